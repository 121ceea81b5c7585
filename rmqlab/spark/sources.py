"""PySpark data sources over store dirs: ``rmq_commitlog``, ``rmq_consumequeue``,
``rmq_batchconsumequeue`` (5.x BatchConsumeQueues), ``rmq_index``.

::

    spark.read.format("rmq_commitlog").load("/data/store1,/data/store2")   # comma-separated
    spark.read.format("rmq_commitlog").option("paths", "/data/store*").load()  # globs too

A file is a partition (style rule 13; small ConsumeQueue files are packed several to a task,
since a task costs a Python worker round trip): partitions are small frozen dataclasses (store, path,
base offset, range); ``read`` opens the file itself (``mmap``, read-only) and yields Arrow record
batches built in chunks by the same ``codec.walk`` the engine and ``rmqlab.inspect`` use, so the
rows are exactly what single-process inspection returns. Damage never fails a job: it becomes one
row with ``record_type = 'error'`` and ``error = <reason>`` at the exact offset, and the walk of
that file stops there, like recovery.

Large CommitLog files are split into several partitions (option ``split_bytes``, default 64 MiB,
0 = never) at record boundaries found by a header hop on the driver, which checks each record's
magic and that its lengths add up to TOTALSIZE (``calMsgLength``). The hop stops where a walk
would; only the last split of a file reads past that point, so damage still ends the file. (A
record only a full decode rejects — a topic that is not UTF-8 — ends its own split, not the
later ones.)

A store written with ``enableConsumeQueueExt`` holds ConsumeQueueExt addresses in its units'
tags code fields: ``rmq_consumequeue`` resolves them against ``consumequeue_ext/`` (one read-only
map and one numpy gather per ext file a CQ file's addresses fall in) and returns the ext unit's
tags code, or null where the address resolves to nothing, with the address as ``ext_address``,
as ``rmqlab.inspect``'s CQ frames and ``verify`` do.

``rmq_batchconsumequeue`` reads ``batchconsumequeue/<topic>/<queueId>/`` (46-byte units, one per
record, ``queue_offset`` = the unit's msgBaseOffset) as ``rmqlab.inspect``'s
``BatchQueueFiles.units()`` does: each file's valid prefix, the queue's next file only after a
full one; ``unit_index`` numbers a queue's units in that order.

Options (all strings): ``path``/``paths`` store dirs (comma-separated, globs); ``columns``: a
comma-separated subset of the columns (the reader then builds and ships only those; the only way
to get ``rmq_commitlog``'s ``key_hashes``, ``multi_dispatch`` and ``inner_num``); commitlog:
``include_body`` (false), ``include_blank`` (false: blank end-of-file records as rows),
``split_bytes``, ``batch_rows`` (8192); consumequeue: ``include_pre_blank`` (false),
``units_per_partition`` (2,000,000: small CQ files are packed into one task; 0 = one file per
partition; batchconsumequeue too); index:
``hash_slot_num`` and ``index_num`` (default: the preset most index files fit, RocketMQ's
defaults or the small one; files shorter than the layout give no rows), ``items_per_partition``
(0: one task per index file; else a file's written items are split into tasks of that many, so
one big index file spreads over every core).

File sizes and the index layout are chosen as ``rmqlab.inspect`` chooses them, from what most
files agree on (``codec.names.infer_file_size``, ``codec.index_layout.choose_index_layout``), and
a file grown by damage is read only up to that size: the audit then sees the bytes ``verify``
sees (``tests/spark/test_audit_random_damage.py``).

This module imports only ``rmqlab.codec`` from rmqlab (small pickles, fast executor start-up).
"""

from __future__ import annotations

import glob
import mmap
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from rmqlab.codec import batch_consume_queue_unit as bcq
from rmqlab.codec.consume_queue_ext_unit import gather_units, undecorate
from rmqlab.codec.consume_queue_unit import CQ_STORE_UNIT_SIZE, MAX_ADDR, units_view, valid_prefix
from rmqlab.codec.flags import (
    BORNHOST_V6_FLAG,
    INNER_BATCH_FLAG,
    MESSAGE_MAGIC_CODE_V1,
    MESSAGE_MAGIC_CODE_V2,
    PROPERTY_INNER_NUM,
    STOREHOSTADDRESS_V6_FLAG,
)
from rmqlab.codec.index_layout import (
    HASH_SLOT_SIZE,
    INDEX_HEADER_SIZE,
    INDEX_ITEM_DTYPE,
    INDEX_SIZE,
    IndexHeader,
    choose_index_layout,
    index_file_size,
)
from rmqlab.codec.message import MIN_RECORD_SIZE, calc_msg_length
from rmqlab.codec.names import infer_file_size, offset_overflow, parse_offset_file_name
from rmqlab.codec.properties import raw_property_value
from rmqlab.codec.scan import RecordColumns, scan_records
from rmqlab.spark import schemas

__all__ = [
    "BatchConsumeQueueDataSource",
    "BatchConsumeQueuePartition",
    "CommitLogDataSource",
    "CommitLogPartition",
    "ConsumeQueueDataSource",
    "ConsumeQueueFiles",
    "ConsumeQueuePartition",
    "IndexDataSource",
    "IndexPartition",
    "batch_consume_queue_partitions",
    "commit_log_files",
    "pack_partitions",
    "resolve_stores",
    "split_points",
    "written_index_items",
]

DEFAULT_SPLIT_BYTES = 64 * 1024 * 1024
DEFAULT_BATCH_ROWS = 8192
DEFAULT_UNITS_PER_PARTITION = 2_000_000  # 40 MB of ConsumeQueue units per task
_PRE_BLANK_SIZE = 0x7FFFFFFF
_INNER_NUM_KEY = (PROPERTY_INNER_NUM + "\x01").encode()


def _true(options: dict[str, str], name: str) -> bool:
    return str(options.get(name, "false")).strip().lower() in ("1", "true", "yes")


def resolve_stores(options: dict[str, str]) -> list[str]:
    """Absolute store dirs named by options ``path`` and ``paths`` (comma-separated, globs).

    Raises FileNotFoundError for a name that matches nothing and NotADirectoryError for a file.
    """
    names = [n.strip() for key in ("path", "paths") for n in str(options.get(key) or "").split(",") if n.strip()]
    stores: list[str] = []
    for name in names:
        matches = sorted(glob.glob(name)) if glob.has_magic(name) else [name]
        if not matches or not os.path.exists(matches[0]):
            raise FileNotFoundError(f"no store dir {name!r}")
        for m in matches:
            if not os.path.isdir(m):
                raise NotADirectoryError(f"{m!r} is not a directory")
            p = os.path.abspath(m)
            if p not in stores:
                stores.append(p)
    return stores


def _offset_files(directory: str) -> list[tuple[str, int, int]]:
    """``(name, start offset, size)`` of the non-empty 20-digit files in ``directory``, sorted."""
    if not os.path.isdir(directory):
        return []
    out = []
    for n in sorted(os.listdir(directory)):
        start = parse_offset_file_name(n)
        full = os.path.join(directory, n)
        if start is not None and os.path.isfile(full):
            size = os.path.getsize(full)
            if size:
                out.append((n, start, size))
    return out


def _nominal_size(dirs: list[list[tuple[str, int, int]]], default: int) -> int:
    """The file size ``rmqlab.inspect`` infers from the same files (:func:`infer_file_size`)."""
    return infer_file_size([([n for n, _, _ in d], [z for _, _, z in d]) for d in dirs], default)


def commit_log_files(store: str) -> list[tuple[str, int, int]]:
    """``(name, base offset, size)`` of a store's non-empty CommitLog files, oldest first; a file
    longer than the store's file size (bytes appended by damage) counts up to that size, as
    ``rmqlab.inspect`` maps it."""
    return _commit_log_files(store)[0]


def _commit_log_files(store: str) -> tuple[list[tuple[str, int, int]], int]:
    """:func:`commit_log_files` and the store's CommitLog file size."""
    files = _offset_files(os.path.join(store, "commitlog"))
    nominal = _nominal_size([files], 1 << 30)
    return [(n, base, min(size, nominal)) for n, base, size in files], nominal


def _open(path: str, length: int = -1) -> tuple[Any, Any]:
    """``(file, mmap)`` of the first ``length`` bytes of a file (-1: all of it), read-only;
    ``(file, b"")`` when it is empty."""
    f = open(path, "rb")  # noqa: SIM115 - closed by the caller with the map
    size = os.fstat(f.fileno()).st_size
    if length >= 0:
        size = min(size, length)
    return f, (mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) if size else b"")


# ------------------------------------------------------------------------------------ commit log
_HEAD = struct.Struct(">ii")
_I = struct.Struct(">i")
_B = struct.Struct(">b")
_H = struct.Struct(">h")


def split_points(buf: Any, split_bytes: int) -> list[int]:
    """Record starts at least ``split_bytes`` apart, from a header hop over ``buf``.

    The hop checks each record's magic, its bounds and that its body, topic and properties
    lengths add up to TOTALSIZE; it stops at the first record that fails, at a blank and at
    unwritten space, so no split starts past a place where the full walk would stop.
    Kept as straight-line struct calls: it runs once per record of a large file on the driver.
    """
    n = len(buf)
    cuts: list[int] = []
    if split_bytes <= 0:
        return cuts
    pos, nxt = 0, split_bytes
    while pos + 8 <= n:
        total, magic = _HEAD.unpack_from(buf, pos)
        if magic not in (MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2) or total < MIN_RECORD_SIZE or pos + total > n:
            break
        sys_flag = _I.unpack_from(buf, pos + 36)[0]
        p = pos + 56 + (20 if sys_flag & BORNHOST_V6_FLAG else 8) + (20 if sys_flag & STOREHOSTADDRESS_V6_FLAG else 8)
        body_len = _I.unpack_from(buf, p + 12)[0]
        p += 16 + max(body_len, 0)
        v = 1 if magic == MESSAGE_MAGIC_CODE_V1 else 2
        if body_len < 0 or p + v + 2 > pos + total:
            break
        topic_len = (_B if v == 1 else _H).unpack_from(buf, p)[0]
        p += v + max(topic_len, 0)
        if topic_len < 0 or p + 2 > pos + total:
            break
        props_len = _H.unpack_from(buf, p)[0]
        if props_len < 0 or calc_msg_length(v, sys_flag, body_len, topic_len, props_len) != total:
            break
        if pos >= nxt:
            cuts.append(pos)
            nxt = pos + split_bytes
        pos += total
    return cuts


@dataclass(frozen=True)
class CommitLogPartition(InputPartition):
    """Records of one CommitLog file from byte ``start`` up to ``end`` (None: the end of the
    ``length`` bytes read; -1: the file's end). ``overflow``: why the file is not read (it ends
    past a long, :func:`~rmqlab.codec.names.offset_overflow`): one error row at ``base``."""

    store: str
    path: str
    base: int
    start: int = 0
    end: int | None = None
    length: int = -1
    overflow: str | None = None


class _CommitLogBatches:
    """Column lists for the few non-message rows (blank, error); ``batch()`` makes a RecordBatch."""

    _SET = ("store_path", "file", "offset", "record_type", "size", "error", "error_detail")

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        self.rows: list[tuple[Any, ...]] = []

    @property
    def n(self) -> int:
        return len(self.rows)

    def add_other(self, store: str, file: str, off: int, kind: str, size: int | None = None,
                  error: str | None = None, detail: str | None = None) -> None:
        self.rows.append((store, file, off, kind, size, error, detail))

    def batch(self) -> pa.RecordBatch:
        arrays = []
        for field in self.schema:
            if field.name in self._SET:
                i = self._SET.index(field.name)
                arrays.append(pa.array([r[i] for r in self.rows], field.type))
            else:
                arrays.append(pa.nulls(len(self.rows), field.type))
        self.rows = []
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


class CommitLogReader(DataSourceReader):
    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.stores = resolve_stores(options)
        self.include_blank = _true(options, "include_blank")
        self.split_bytes = int(options.get("split_bytes", DEFAULT_SPLIT_BYTES))
        self.batch_rows = int(options.get("batch_rows", DEFAULT_BATCH_ROWS))
        self.arrow = schemas.arrow_schema(schema)
        names = set(schema.names)
        # the scan computes only what the schema asks for: dicts, CRCs and bodies cost most
        self.with_properties = "properties" in names
        self.with_crc = "crc_ok" in names or "prop_crc_ok" in names
        self.include_body = "body" in names
        self.with_multi_dispatch = "multi_dispatch" in names

    def partitions(self) -> list[InputPartition]:
        parts: list[InputPartition] = []
        for store in self.stores:
            files, file_size = _commit_log_files(store)
            for name, base, size in files:
                path = os.path.join(store, "commitlog", name)
                why = offset_overflow(base, file_size)
                if why is not None:  # (as rmqlab.inspect's walk: no offset past a long)
                    parts.append(CommitLogPartition(store, path, base, length=size, overflow=why))
                    continue
                cuts: list[int] = []
                if 0 < self.split_bytes < size:
                    f, buf = _open(path, size)
                    try:
                        cuts = split_points(buf, self.split_bytes)
                    finally:
                        buf.close()
                        f.close()
                bounds = [0, *cuts]
                for i, start in enumerate(bounds):
                    end = bounds[i + 1] if i + 1 < len(bounds) else None
                    parts.append(CommitLogPartition(store, path, base, start, end, size))
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, CommitLogPartition):
            return  # Spark hands one empty partition to a source with none (an empty store)
        p = partition
        file = os.path.relpath(p.path, p.store)
        out = _CommitLogBatches(self.arrow)
        if p.overflow is not None:
            out.add_other(p.store, file, p.base, "error", error="offset_overflow", detail=p.overflow)
            yield out.batch()
            return
        f, buf = _open(p.path, p.length)
        try:
            pos = p.start
            while True:
                cols = scan_records(buf, pos, p.end, base_offset=p.base, file=file,
                                    with_properties=self.with_properties, with_crc=self.with_crc,
                                    with_body=self.include_body, with_multi_dispatch=self.with_multi_dispatch,
                                    max_records=self.batch_rows)
                if cols.n:
                    yield _message_batch(self.arrow, p.store, file, cols, buf)
                if not cols.more:
                    break
                pos = cols.stop - p.base
            if cols.blank is not None and self.include_blank:
                out.add_other(p.store, file, cols.blank[0], "blank", size=cols.blank[1])
            if cols.error is not None:
                e = cols.error
                out.add_other(p.store, file, e.offset, "error", error=e.reason, detail=e.detail or None)
            del cols
            if out.n:
                yield out.batch()
        finally:
            if isinstance(buf, mmap.mmap):
                buf.close()
            f.close()


_NUMPY = {pa.int64(): np.int64, pa.int32(): np.int32}


def _np(v: np.ndarray, t: pa.DataType) -> pa.Array:
    """A numeric numpy column as an Arrow array of type ``t`` (cast in numpy, no copy by Arrow)."""
    return pa.array(np.ascontiguousarray(v, _NUMPY[t]), t)


def _key_hashes(c: RecordColumns, t: pa.DataType) -> pa.Array:
    """``key_hashes``: each row's distinct index key hashes, ascending, as one list column."""
    rows, hashes = c.index_key_hashes()
    order = np.lexsort((hashes, rows))
    offsets = np.zeros(c.n + 1, np.int32)
    np.cumsum(np.bincount(rows, minlength=c.n), out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(hashes[order].astype(np.int32)), type=t)


def _multi_dispatch(c: RecordColumns, t: pa.DataType) -> pa.Array:
    """``multi_dispatch``: each row's (queue, queue offset) pairs, null for rows without any."""
    if c.multi_dispatch is None:
        return pa.nulls(c.n, t)
    return pa.array([[{"queue": q, "queue_offset": o} for q, o in md] if md else None for md in c.multi_dispatch], t)


def _properties_map(props: list[dict[str, str]], t: pa.DataType) -> pa.Array:
    """The property dicts as one map column, built from flat key/value lists (C-level loops)."""
    offsets = np.zeros(len(props) + 1, np.int32)
    np.cumsum(np.fromiter(map(len, props), np.int32, len(props)), out=offsets[1:])
    keys = list(chain.from_iterable(props))
    values = list(chain.from_iterable(map(dict.values, props)))
    return pa.MapArray.from_arrays(pa.array(offsets), pa.array(keys, pa.string()), pa.array(values, pa.string()),
                                   type=t)


def _inner_nums(buf: Any, c: RecordColumns, t: pa.DataType) -> pa.Array:
    """``inner_num``: INNER_NUM of each inner-batch record (``INNER_BATCH_FLAG``) as ``int()``
    reads it (what ``verify`` compares a BatchConsumeQueue unit's batch size with); null for other
    records, and where it is absent, not a number or beyond a long. Only those records' properties
    are searched (found after the body and topic the scan located)."""
    values = np.zeros(c.n, np.int64)
    null = np.ones(c.n, bool)
    for i in np.flatnonzero(c.sys_flag & INNER_BATCH_FLAG).tolist():
        p = int(c.body_position[i] + c.body_length[i])
        if c.magic[i] == MESSAGE_MAGIC_CODE_V2:
            p += 2 + _H.unpack_from(buf, p)[0]
        else:
            p += 1 + _B.unpack_from(buf, p)[0]
        n = _H.unpack_from(buf, p)[0]
        text = raw_property_value(bytes(buf[p + 2: p + 2 + n]), _INNER_NUM_KEY)  # = decode_properties(...).get
        try:
            v = int(text) if text is not None else None
        except ValueError:
            v = None
        if v is not None and -(1 << 63) <= v < (1 << 63):
            values[i], null[i] = v, False
    return pa.array(values, t, mask=null)


def _message_batch(schema: pa.Schema, store: str, file: str, c: RecordColumns, buf: Any = None) -> pa.RecordBatch:
    """One Arrow batch of ``record_type = 'message'`` rows straight from scan columns; only the
    schema's columns are built (``inner_num`` reads ``buf``, the scanned buffer)."""
    n = c.n

    def ts(v: np.ndarray) -> pa.Array:
        return _np(v * 1000, pa.int64()).view(pa.timestamp("us", tz="UTC"))

    make: dict[str, Any] = {
        "store_path": lambda t: pa.repeat(pa.scalar(store, t), n),
        "file": lambda t: pa.repeat(pa.scalar(file, t), n),
        "offset": lambda t: _np(c.offset, t),
        "size": lambda t: _np(c.store_size, t),
        "record_type": lambda t: pa.repeat(pa.scalar("message", t), n),
        "topic": lambda t: pa.array(c.topic, t),
        "queue_id": lambda t: _np(c.queue_id, t),
        "queue_offset": lambda t: _np(c.queue_offset, t),
        "physical_offset": lambda t: _np(c.commit_log_offset, t),
        "sys_flag": lambda t: _np(c.sys_flag, t),
        "flag": lambda t: _np(c.flag, t),
        "tags": lambda t: pa.array(c.tags, t),
        "tags_code": lambda t: _np(c.tags_code, t),
        "keys": lambda t: pa.array(c.key_lists(), t),
        "uniq_key": lambda t: pa.array(c.uniq_key, t),
        "msg_id": lambda t: pa.array(c.msg_ids(), t),
        "born_timestamp": lambda t: _np(c.born_timestamp, t),
        "store_timestamp": lambda t: _np(c.store_timestamp, t),
        "born_time": lambda t: ts(c.born_timestamp),
        "store_time": lambda t: ts(c.store_timestamp),
        "born_host": lambda t: pa.array(c.born_hosts(), t),
        "store_host": lambda t: pa.array(c.store_hosts(), t),
        "body_crc": lambda t: _np(c.body_crc, t),
        "crc_ok": lambda t: pa.array(c.crc_ok, t),
        "prop_crc_ok": lambda t: pa.array(c.prop_crc == 1, t, mask=c.prop_crc < 0),
        "body_length": lambda t: _np(c.body_length, t),
        "reconsume_times": lambda t: _np(c.reconsume_times, t),
        "prepared_transaction_offset": lambda t: _np(c.prepared_transaction_offset, t),
        "properties": lambda t: _properties_map(c.properties or [], t),
        "error": lambda t: pa.nulls(n, t),
        "error_detail": lambda t: pa.nulls(n, t),
        "body": lambda t: pa.array(c.body, t),
        "key_hashes": lambda t: _key_hashes(c, t),
        "multi_dispatch": lambda t: _multi_dispatch(c, t),
        "inner_num": lambda t: _inner_nums(buf, c, t),
    }
    return pa.RecordBatch.from_arrays([make[f.name](f.type) for f in schema], schema=schema)


class CommitLogDataSource(DataSource):
    """``rmq_commitlog``: one row per CommitLog record (schema: ``schemas.COMMIT_LOG_COLUMNS``)."""

    @classmethod
    def name(cls) -> str:
        return "rmq_commitlog"

    def schema(self) -> StructType:
        return schemas.commit_log_schema(_true(self.options, "include_body"),
                                         schemas.parse_columns(self.options.get("columns")))

    def reader(self, schema: StructType) -> DataSourceReader:
        return CommitLogReader(dict(self.options), schema)


# ------------------------------------------------------------------------------------ consume queue
@dataclass(frozen=True)
class ConsumeQueuePartition(InputPartition):
    """The first ``count`` units of one ConsumeQueue file (the planner found where they stop)."""

    store: str
    topic: str
    queue_id: int
    path: str
    base: int  # the file's start, in bytes of the queue's logical space
    count: int
    ext_dir: str | None = None  # the queue's consumequeue_ext/<topic>/<queueId> dir, when there is one
    ext_file_size: int = 0  # the store's ext file size, inferred as rmqlab.inspect infers it


def _valid_count(buf: Any) -> int:
    """Units up to the first invalid one (``offset < 0 or size <= 0``), as ``ConsumeQueue.recover``."""
    return valid_prefix(units_view(buf))


def _valid_count_file(f: Any, nominal: int) -> int:
    """:func:`_valid_count` of a file's first ``nominal`` bytes, read in chunks growing 4x: a
    queue with a few units costs one small read, not a copy of its whole 6 MB file."""
    count, want = 0, 1024 * CQ_STORE_UNIT_SIZE
    while count * CQ_STORE_UNIT_SIZE < nominal:
        data = f.read(min(want, nominal - count * CQ_STORE_UNIT_SIZE))
        if not data:
            break
        k = _valid_count(data)
        count += k
        if k * CQ_STORE_UNIT_SIZE < len(data):
            break
        want *= 4
    return count


def _queue_dirs(root: str) -> Iterator[tuple[str, str, str]]:
    """``(topic, queue dir name, queue dir)`` of every ``<root>/<topic>/<digits>/`` dir, in the
    order the snapshot lists them (topics sorted, queue ids numerically)."""
    for topic in sorted(os.listdir(root)):
        tdir = os.path.join(root, topic)
        if not os.path.isdir(tdir):
            continue
        for qname in sorted(os.listdir(tdir), key=lambda s: (len(s), s)):
            qdir = os.path.join(tdir, qname)
            if qname.isdigit() and os.path.isdir(qdir):
                yield topic, qname, qdir


def _ext_queues(store: str) -> tuple[dict[tuple[str, str], str], int]:
    """``({(topic, queue dir name): ext dir}, ext file size)`` of a store's ``consumequeue_ext/``:
    the file size inferred from every ext dir's file names and sizes (empty files included), as
    ``rmqlab.inspect`` infers it (48 MiB by default)."""
    root = os.path.join(store, "consumequeue_ext")
    dirs: dict[tuple[str, str], str] = {}
    evidence: list[tuple[list[str], list[int]]] = []
    if not os.path.isdir(root):
        return dirs, 0
    for topic, qname, qdir in _queue_dirs(root):
        dirs[(topic, qname)] = qdir
        names = sorted(n for n in os.listdir(qdir) if parse_offset_file_name(n) is not None
                       and os.path.isfile(os.path.join(qdir, n)))
        evidence.append((names, [os.path.getsize(os.path.join(qdir, n)) for n in names]))
    return dirs, infer_file_size(evidence, 48 * 1024 * 1024)


def resolve_ext(ext_dir: str | None, file_size: int, addresses: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(found, tags_code)`` of each ConsumeQueueExt address (``<= MAX_ADDR``) in the queue's ext
    dir, as ``rmqlab.inspect``'s ``ExtQueueFiles.resolve``: the unit at ``undecorate(address)`` in
    the non-empty file named after ``real - real % file_size`` (read up to ``file_size``), there
    when its 20-byte head fits and its size field is >= 1. One read-only map and one vectorised
    gather per ext file the addresses fall in; no dir (``None``) resolves nothing."""
    addr = np.asarray(addresses, dtype=np.int64)
    found = np.zeros(len(addr), dtype=bool)
    tags = np.zeros(len(addr), dtype=np.int64)
    if ext_dir is None or not len(addr):
        return found, tags
    files = {start: (os.path.join(ext_dir, name), size) for name, start, size in _offset_files(ext_dir)}
    is_addr = addr <= MAX_ADDR
    # undecorate in int64: for a negative address, address - Long.MIN_VALUE clears the sign bit
    real = np.where(is_addr, addr & np.int64(undecorate(-1)), -1)
    starts = np.where(is_addr, real - real % file_size, -1)
    for start in np.unique(starts[is_addr]).tolist():
        if start not in files:
            continue
        sel = np.flatnonzero(starts == start)
        f, buf = _open(files[start][0], file_size)
        try:
            hit, t, _ = gather_units(buf, real[sel] - start)
            found[sel], tags[sel] = hit, t
        finally:
            if isinstance(buf, mmap.mmap):
                buf.close()
            f.close()
    return found, tags


def consume_queue_partitions(store: str) -> list[ConsumeQueuePartition]:
    """Per queue, its files from the first on, stopping after the first file not full of valid
    units (what ``rmqlab.inspect`` reads). Reads the units with numpy: ~2 % of the log's size.
    A queue with a ``consumequeue_ext/`` dir gets it (and the store's ext file size) along, so
    its reader resolves ext addresses."""
    root = os.path.join(store, "consumequeue")
    ext_dirs, ext_size = _ext_queues(store)
    parts: list[ConsumeQueuePartition] = []
    if not os.path.isdir(root):
        return parts
    queues = [(topic, qname, qdir, _offset_files(qdir)) for topic, qname, qdir in _queue_dirs(root)]
    # a file's units are read up to the queues' file size (not past it: bytes appended by damage)
    nominal = _nominal_size([q[3] for q in queues], 300_000 * CQ_STORE_UNIT_SIZE)
    for topic, qname, qdir, files in queues:
        for name, base, _ in files:
            path = os.path.join(qdir, name)
            with open(path, "rb") as f:
                count = _valid_count_file(f, nominal)
            parts.append(ConsumeQueuePartition(store, topic, int(qname), path, base, count,
                                               ext_dirs.get((topic, qname)), ext_size))
            if count * CQ_STORE_UNIT_SIZE < nominal:
                break
    return parts


@dataclass(frozen=True)
class ConsumeQueueFiles(InputPartition):
    """Several ConsumeQueue files read by one task: a task costs a Python worker round trip, and a
    CQ file is small next to its CommitLog (20 bytes per message)."""

    files: tuple[Any, ...]  # ConsumeQueuePartition or BatchConsumeQueuePartition


def pack_partitions(parts: list[Any], units_per_partition: int) -> list[InputPartition]:
    """Consecutive file partitions packed into groups of at least ``units_per_partition`` units
    (0 = one file per partition)."""
    if units_per_partition <= 0:
        return list(parts)
    out: list[InputPartition] = []
    group: list[Any] = []
    units = 0
    for p in parts:
        group.append(p)
        units += p.count
        if units >= units_per_partition:
            out.append(ConsumeQueueFiles(tuple(group)))
            group, units = [], 0
    if group:
        out.append(ConsumeQueueFiles(tuple(group)))
    return out


class ConsumeQueueReader(DataSourceReader):
    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.stores = resolve_stores(options)
        self.include_pre_blank = _true(options, "include_pre_blank")
        self.units_per_partition = int(options.get("units_per_partition", DEFAULT_UNITS_PER_PARTITION))
        self.arrow = schemas.arrow_schema(schema)

    def partitions(self) -> list[InputPartition]:
        return pack_partitions([p for s in self.stores for p in consume_queue_partitions(s)], self.units_per_partition)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, ConsumeQueueFiles):
            for p in partition.files:
                yield from self._read_file(p)
        elif isinstance(partition, ConsumeQueuePartition):
            yield from self._read_file(partition)

    def _read_file(self, p: ConsumeQueuePartition) -> Iterator[pa.RecordBatch]:
        if not p.count:
            return
        with open(p.path, "rb") as f:
            units = units_view(f.read(p.count * CQ_STORE_UNIT_SIZE))
        real = units["size"] != _PRE_BLANK_SIZE
        keep = np.ones(len(units), bool) if self.include_pre_blank else real
        pos = np.flatnonzero(keep).astype(np.int64)
        n = len(pos)
        if not n:
            return
        stored = units["tags_code"][keep].astype(np.int64)
        is_addr = stored <= MAX_ADDR
        tags, lost = stored, np.zeros(n, bool)
        if is_addr.any() and "tags_code" in self.arrow.names:  # only the tags code needs the ext files
            sel = np.flatnonzero(is_addr)
            found, ext_tags = resolve_ext(p.ext_dir, p.ext_file_size, stored[sel])
            tags = stored.copy()
            tags[sel[found]] = ext_tags[found]
            lost[sel[~found]] = True
        make: dict[str, Any] = {
            "store_path": lambda t: pa.repeat(pa.scalar(p.store, t), n),
            "topic": lambda t: pa.repeat(pa.scalar(p.topic, t), n),
            "queue_id": lambda t: _np(np.full(n, p.queue_id), t),
            "file": lambda t: pa.repeat(pa.scalar(os.path.relpath(p.path, p.store), t), n),
            "queue_offset": lambda t: _np(p.base // CQ_STORE_UNIT_SIZE + pos, t),
            "position": lambda t: _np(pos * CQ_STORE_UNIT_SIZE, t),
            "commit_log_offset": lambda t: _np(units["commit_log_offset"][keep], t),
            "size": lambda t: _np(units["size"][keep], t),
            "tags_code": lambda t: pa.array(tags, t, mask=lost),
            "ext_address": lambda t: pa.array(stored, t, mask=~is_addr),
            "valid": lambda t: pa.array(real[keep], t),
        }
        yield pa.RecordBatch.from_arrays([make[f.name](f.type) for f in self.arrow], schema=self.arrow)


class ConsumeQueueDataSource(DataSource):
    """``rmq_consumequeue``: one row per ConsumeQueue unit (``schemas.CONSUME_QUEUE_COLUMNS``)."""

    @classmethod
    def name(cls) -> str:
        return "rmq_consumequeue"

    def schema(self) -> StructType:
        return schemas.consume_queue_schema(schemas.parse_columns(self.options.get("columns")))

    def reader(self, schema: StructType) -> DataSourceReader:
        return ConsumeQueueReader(dict(self.options), schema)


# ------------------------------------------------------------------------------------ batch consume queue
@dataclass(frozen=True)
class BatchConsumeQueuePartition(InputPartition):
    """The first ``count`` (valid) units of one BatchConsumeQueue file; ``first`` is the
    ``unit_index`` of its first unit."""

    store: str
    topic: str
    queue_id: int
    path: str
    count: int
    first: int


def _bcq_valid_count(f: Any, nominal: int) -> int:
    """Valid units (:func:`bcq.valid_prefix`) among a file's first ``nominal`` bytes, read in
    chunks growing 4x (a queue with a few units costs one small read)."""
    size = bcq.BCQ_STORE_UNIT_SIZE
    count, want = 0, 1024 * size
    while (count + 1) * size <= nominal:
        data = f.read(min(want, nominal - count * size))
        units = bcq.units_view(data)
        k = bcq.valid_prefix(units)
        count += k
        if not len(units) or k < len(units):
            break
        f.seek(count * size)  # (a partial unit read at the chunk's end is read again)
        want *= 4
    return count


def batch_consume_queue_partitions(store: str) -> list[BatchConsumeQueuePartition]:
    """Per batch queue, its files from the first on, each up to its first invalid unit,
    stopping after the first file not full of valid units (``BatchQueueFiles.units()``); the
    file size is inferred from every batch queue's files as ``rmqlab.inspect`` infers it."""
    root = os.path.join(store, "batchconsumequeue")
    parts: list[BatchConsumeQueuePartition] = []
    if not os.path.isdir(root):
        return parts
    queues = [(topic, qname, qdir, _offset_files(qdir)) for topic, qname, qdir in _queue_dirs(root)]
    nominal = _nominal_size([q[3] for q in queues], bcq.BCQ_FILE_SIZE)
    for topic, qname, qdir, files in queues:
        first = 0
        for name, _, _ in files:
            path = os.path.join(qdir, name)
            with open(path, "rb") as f:
                count = _bcq_valid_count(f, nominal)
            parts.append(BatchConsumeQueuePartition(store, topic, int(qname), path, count, first))
            first += count
            if (count + 1) * bcq.BCQ_STORE_UNIT_SIZE <= nominal:
                break
    return parts


class BatchConsumeQueueReader(DataSourceReader):
    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.stores = resolve_stores(options)
        self.units_per_partition = int(options.get("units_per_partition", DEFAULT_UNITS_PER_PARTITION))
        self.arrow = schemas.arrow_schema(schema)

    def partitions(self) -> list[InputPartition]:
        parts = [p for s in self.stores for p in batch_consume_queue_partitions(s)]
        return pack_partitions([p for p in parts if p.count], self.units_per_partition)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, ConsumeQueueFiles):
            for p in partition.files:
                yield from self._read_file(p)
        elif isinstance(partition, BatchConsumeQueuePartition):
            yield from self._read_file(partition)

    def _read_file(self, p: BatchConsumeQueuePartition) -> Iterator[pa.RecordBatch]:
        n = p.count
        if not n:
            return
        with open(p.path, "rb") as f:
            units = bcq.units_view(f.read(n * bcq.BCQ_STORE_UNIT_SIZE))
        idx = np.arange(n, dtype=np.int64)
        make: dict[str, Any] = {
            "store_path": lambda t: pa.repeat(pa.scalar(p.store, t), n),
            "topic": lambda t: pa.repeat(pa.scalar(p.topic, t), n),
            "queue_id": lambda t: _np(np.full(n, p.queue_id), t),
            "file": lambda t: pa.repeat(pa.scalar(os.path.relpath(p.path, p.store), t), n),
            "position": lambda t: _np(idx * bcq.BCQ_STORE_UNIT_SIZE, t),
            "unit_index": lambda t: _np(p.first + idx, t),
            "commit_log_offset": lambda t: _np(units["commit_log_offset"], t),
            "size": lambda t: _np(units["size"], t),
            "tags_code": lambda t: _np(units["tags_code"], t),
            "store_timestamp": lambda t: _np(units["store_timestamp"], t),
            "queue_offset": lambda t: _np(units["msg_base_offset"], t),
            "batch_size": lambda t: _np(units["batch_size"], t),
        }
        yield pa.RecordBatch.from_arrays([make[f.name](f.type) for f in self.arrow], schema=self.arrow)


class BatchConsumeQueueDataSource(DataSource):
    """``rmq_batchconsumequeue``: one row per valid 5.x BatchConsumeQueue unit
    (``schemas.BATCH_CONSUME_QUEUE_COLUMNS``)."""

    @classmethod
    def name(cls) -> str:
        return "rmq_batchconsumequeue"

    def schema(self) -> StructType:
        return schemas.batch_consume_queue_schema(schemas.parse_columns(self.options.get("columns")))

    def reader(self, schema: StructType) -> DataSourceReader:
        return BatchConsumeQueueReader(dict(self.options), schema)


# ------------------------------------------------------------------------------------ index
@dataclass(frozen=True)
class IndexPartition(InputPartition):
    """The written items of one index file."""

    store: str
    path: str
    hash_slot_num: int
    index_num: int
    first: int = 0  #: first item of this task (0 = item 1), ``limit`` items from it; -1: to the end
    limit: int = -1


def _written_items(f: Any, size: int, hash_slot_num: int) -> tuple[IndexHeader, int, int]:
    """``(header, index_count, items)`` of an open index file: the items written after the
    unused item 0, as far as the file holds them."""
    f.seek(0)
    hdr = IndexHeader.unpack(f.read(INDEX_HEADER_SIZE).ljust(INDEX_HEADER_SIZE, b"\0"))
    index_count = hdr.index_count if hdr.index_count > 0 else 1  # IndexHeader.load
    base = INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE
    return hdr, index_count, min(max(index_count - 1, 0), max(0, (size - base) // INDEX_SIZE - 1))


def _index_files(store: str, options: dict[str, str]) -> tuple[list[str], tuple[int, int]]:
    """A store's index files that can be read, and their layout: as ``rmqlab.inspect`` chooses
    it (:func:`~rmqlab.codec.index_layout.choose_index_layout`; the audit reports what it
    skips). No files when no layout fits (``index_layout_unknown``); files shorter than the
    layout are left out (``file_size_mismatch``)."""
    d = os.path.join(store, "index")
    if not os.path.isdir(d):
        return [], (0, 0)
    sizes = {os.path.join(d, n): os.path.getsize(os.path.join(d, n)) for n in sorted(os.listdir(d))
             if n.isdigit() and os.path.isfile(os.path.join(d, n))}
    slots, items, error = choose_index_layout(
        list(sizes.values()), int(options.get("hash_slot_num") or 0), int(options.get("index_num") or 0))
    if error:
        return [], (0, 0)
    expected = index_file_size(slots, items)
    return [p for p, n in sizes.items() if n >= expected], (slots, items)


def written_index_items(stores: list[str], options: dict[str, str] | None = None) -> int:
    """The index items ``rmq_index`` reads from ``stores`` (headers only): to size its tasks."""
    n = 0
    for store in stores:
        paths, layout = _index_files(store, options or {})
        for p in paths:
            with open(p, "rb") as f:
                n += _written_items(f, os.fstat(f.fileno()).st_size, layout[0])[2]
    return n


class IndexReader(DataSourceReader):
    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.options = options
        self.stores = resolve_stores(options)
        self.arrow = schemas.arrow_schema(schema)

    def partitions(self) -> list[InputPartition]:
        parts: list[InputPartition] = []
        per = int(self.options.get("items_per_partition") or 0)
        for store in self.stores:
            paths, layout = _index_files(store, self.options)
            for p in paths:
                n = 0
                if per > 0:
                    with open(p, "rb") as f:
                        n = _written_items(f, os.fstat(f.fileno()).st_size, layout[0])[2]
                starts = list(range(0, n, per)) if per > 0 and n > per else [0]
                parts.extend(IndexPartition(store, p, *layout, a, per if a != starts[-1] else -1) for a in starts)
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, IndexPartition):
            return
        p = partition
        with open(p.path, "rb") as f:
            hdr, index_count, total = _written_items(f, os.fstat(f.fileno()).st_size, p.hash_slot_num)
            first = min(p.first, total)
            count = total - first if p.limit < 0 else min(p.limit, total - first)
            f.seek(INDEX_HEADER_SIZE + p.hash_slot_num * HASH_SLOT_SIZE + (1 + first) * INDEX_SIZE)
            items = np.frombuffer(f.read(count * INDEX_SIZE), INDEX_ITEM_DTYPE)
        if not count:
            return
        key_hash = items["key_hash"].astype(np.int32)
        time_diff = items["time_diff"].astype(np.int32)

        def full(v: int, t: Any) -> pa.Array:
            return pa.array(np.full(count, v, t))

        cols = {
            "store_path": pa.array([p.store] * count, pa.string()),
            "file": pa.array([os.path.relpath(p.path, p.store)] * count, pa.string()),
            "begin_timestamp": full(hdr.begin_timestamp, np.int64),
            "end_timestamp": full(hdr.end_timestamp, np.int64),
            "begin_phy_offset": full(hdr.begin_phy_offset, np.int64),
            "end_phy_offset": full(hdr.end_phy_offset, np.int64),
            "hash_slot_count": full(hdr.hash_slot_count, np.int32),
            "index_count": full(index_count, np.int32),
            "hash_slot_num": full(p.hash_slot_num, np.int32),
            "index_num": full(p.index_num, np.int32),
            "item_no": pa.array(np.arange(first + 1, first + count + 1, dtype=np.int32)),
            "key_hash": pa.array(key_hash),
            "phy_offset": pa.array(items["phy_offset"].astype(np.int64)),
            "time_diff": pa.array(time_diff),
            "prev_index": pa.array(items["prev_index"].astype(np.int32)),
            "slot": pa.array((key_hash.astype(np.int64) % p.hash_slot_num).astype(np.int32)),
            "item_timestamp": pa.array(hdr.begin_timestamp + time_diff.astype(np.int64) * 1000),
        }
        yield pa.RecordBatch.from_arrays([cols[n] for n in self.arrow.names], schema=self.arrow)


class IndexDataSource(DataSource):
    """``rmq_index``: one row per written index item with its file's header (``INDEX_COLUMNS``)."""

    @classmethod
    def name(cls) -> str:
        return "rmq_index"

    def schema(self) -> StructType:
        return schemas.index_schema(schemas.parse_columns(self.options.get("columns")))

    def reader(self, schema: StructType) -> DataSourceReader:
        return IndexReader(dict(self.options), schema)


SOURCES = (CommitLogDataSource, ConsumeQueueDataSource, BatchConsumeQueueDataSource, IndexDataSource)
