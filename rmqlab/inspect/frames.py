"""DataFrame builders over a :class:`~rmqlab.inspect.snapshot.StoreSnapshot` (read-only).

Fixed-size units (ConsumeQueue units, index items and slots) are read as numpy structured arrays
over the mapped bytes and turned into columns directly; only variable-size CommitLog records are
decoded one by one. Column names are stable snake_case: the CLI's JSON uses the same names.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from rmqlab.codec.consume_queue_unit import CQ_STORE_UNIT_SIZE, MAX_ADDR
from rmqlab.codec.flags import PROPERTY_KEYS, TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE
from rmqlab.codec.index_layout import (
    HASH_SLOT_SIZE,
    INDEX_HEADER_SIZE,
    INDEX_ITEM_DTYPE,
    INDEX_SIZE,
    index_key,
    index_key_hash,
    item_position,
)
from rmqlab.codec.message import MessageRecord
from rmqlab.codec.names import parse_offset_file_name

if TYPE_CHECKING:
    from rmqlab.inspect.snapshot import Damage, StoreSnapshot
    from rmqlab.store.index_file import IndexFile

__all__ = [
    "BCQ_COLUMNS",
    "CHAIN_COLUMNS",
    "CQ_COLUMNS",
    "DELAY_COLUMNS",
    "FILE_COLUMNS",
    "INDEX_FILE_COLUMNS",
    "MESSAGE_COLUMNS",
    "SLOT_COLUMNS",
    "TOPIC_COLUMNS",
    "batch_consume_queue_frame",
    "checkpoint_frame",
    "consume_queue_frame",
    "delays_frame",
    "files_frame",
    "index_chain_frame",
    "index_files_frame",
    "index_items",
    "index_slots_frame",
    "message_row",
    "messages_frame",
    "record_has_key",
    "record_key_hashes",
    "topics_frame",
]

DELAY_COLUMNS = [
    "level", "queue_id", "delay_ms", "offset", "min_offset", "max_offset", "waiting", "next_due_ms",
]
FILE_COLUMNS = [
    "kind", "path", "name", "topic", "queue_id", "file_from_offset", "size", "file_size",
    "wrote_position", "flushed_position", "index_count", "mtime_ms",
]
MESSAGE_COLUMNS = [
    "commit_log_offset", "store_size", "topic", "queue_id", "queue_offset", "tags", "tags_code", "keys",
    "uniq_key", "msg_id", "flag", "sys_flag", "born_timestamp", "store_timestamp", "born_host", "store_host",
    "body_length", "body_crc", "crc_ok", "file",
]
#: a BatchConsumeQueue unit per row: its first queue offset and how many messages its record holds
BCQ_COLUMNS = ["queue_offset", "batch_size", "commit_log_offset", "size", "tags_code", "store_timestamp", "file",
               "position"]
CQ_COLUMNS = ["queue_offset", "commit_log_offset", "size", "tags_code", "file", "position", "ext_address"]
INDEX_FILE_COLUMNS = [
    "name", "path", "size", "begin_timestamp", "end_timestamp", "begin_phy_offset", "end_phy_offset",
    "hash_slot_count", "index_count", "items", "hash_slot_num", "index_num", "used_slots", "max_chain_length",
]
SLOT_COLUMNS = ["slot", "item", "chain_length"]
CHAIN_COLUMNS = [
    "file", "item", "position", "key_hash", "phy_offset", "time_diff", "prev_index", "time", "hash_matches",
    "time_in_window", "stop", "message_found", "message_topic", "message_keys", "message_has_key", "collision",
]
TOPIC_COLUMNS = [
    "topic", "queue_id", "min_offset", "max_offset", "cq_units", "cq_bytes", "cq_max_phy_offset",
    "messages", "bytes", "min_queue_offset", "max_queue_offset", "lag",
]


#: config JSON files are a few KiB; one larger is damage (a huge sparse file), not read into memory
MAX_CONFIG_FILE = 64 << 20


def int64_column(values: Any) -> Any:
    """``values`` (ints, None/NA) as a nullable Int64 array. Built from the Python ints, not from a
    DataFrame column (a column of ints and None is float64, which rounds any int above 2**53 and
    makes ``astype("Int64")`` refuse it: a file named near Long.MAX_VALUE); a value no long holds
    (a product of damaged fields) is NA rather than wrapped."""
    out = []
    for v in values:
        if v is None or v is pd.NA or (isinstance(v, float) and v != v):
            out.append(None)
        else:
            v = int(v)
            out.append(v if -(2**63) <= v < 2**63 else None)
    return pd.array(out, dtype="Int64")


def printable(name: str) -> str:
    """A file or directory name as a frame can hold it: bytes that are not UTF-8 (a name from
    another system or a damaged directory; Python lists them as lone surrogates, which pandas'
    string columns and JSON output refuse) are shown as ``\\xff`` escapes."""
    try:
        name.encode("utf-8")
        return name
    except UnicodeEncodeError:
        return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _rel(snap: StoreSnapshot, path: str) -> str:
    return printable(os.path.relpath(path, snap.path))


def _stat(path: str) -> os.stat_result:
    """The file's stat, or the link's own for a symlink leading nowhere (or into a loop): a stray
    entry to list, not a reason to refuse the whole listing."""
    try:
        return os.stat(path)
    except OSError:
        return os.lstat(path)


# ---------------------------------------------------------------------------------------- files
def files_frame(snap: StoreSnapshot) -> pd.DataFrame:
    """Every file of the store, one row each, with the positions recoverable from its bytes.

    ``wrote_position`` (= ``flushed_position``: on disk both are what is readable): CommitLog,
    the end of the valid records (file size after a blank record); ConsumeQueue, units until
    the first invalid one * 20; index, the byte just past item ``index_count - 1``.
    """
    from rmqlab.inspect.snapshot import scan_end

    rows: list[dict[str, Any]] = []

    def row(kind: str, path: str, **kw: Any) -> None:
        base = {c: None for c in FILE_COLUMNS}
        st = _stat(path)
        base.update(kind=kind, path=_rel(snap, path), name=printable(os.path.basename(path)), size=st.st_size,
                    mtime_ms=st.st_mtime_ns // 1_000_000)
        base.update(kw)
        if base["wrote_position"] is not None:
            base["flushed_position"] = base["wrote_position"]
        rows.append(base)

    for mf in snap.commit_log_files:
        row("commitlog", mf.file_name, file_from_offset=mf.file_from_offset, file_size=snap.commit_log_file_size,
            wrote_position=scan_end(mf.buffer))
    for q in snap.consume_queues.values():
        for mf in q.files:
            row("consumequeue", mf.file_name, topic=printable(q.topic), queue_id=q.queue_id,
                file_from_offset=mf.file_from_offset,
                file_size=snap.consume_queue_file_size,
                wrote_position=len(q.valid_units(mf)) * CQ_STORE_UNIT_SIZE)
    for b in snap.batch_consume_queues.values():
        for mf in b.files:
            units = b.valid_units(mf)
            row("batchconsumequeue", mf.file_name, topic=printable(b.topic), queue_id=b.queue_id,
                file_from_offset=mf.file_from_offset, file_size=snap.batch_consume_queue_file_size,
                wrote_position=len(units) * units.itemsize)
    if not snap.index_error:
        for f in snap.index_files_opened():
            row("index", f.file_name, file_size=f.file_size, index_count=f.index_count,
                wrote_position=item_position(f.hash_slot_num, f.index_count))
    else:
        for p in snap.index_paths:
            row("index", p)
    _other_files(snap, row)
    df = pd.DataFrame(rows, columns=FILE_COLUMNS)
    for c in ("queue_id", "file_from_offset", "file_size", "wrote_position", "flushed_position", "index_count"):
        df[c] = int64_column([r[c] for r in rows])  # from the rows: the frame's column may be float64
    return df


def _other_files(snap: StoreSnapshot, row: Any) -> None:
    """The files the typed rows do not cover: checkpoint, abort, lock, config, and every stray
    file, in the mapped dirs too (any name there that is not one of their numeric file names)."""
    for dirpath, dirnames, filenames in os.walk(snap.path):
        dirnames.sort()
        rel = os.path.relpath(dirpath, snap.path)
        parts = [] if rel == "." else rel.split(os.sep)
        top = parts[0] if parts else ""
        for n in sorted(filenames):
            full = os.path.join(dirpath, n)
            if (top == "commitlog" and len(parts) == 1) or (top in ("consumequeue", "batchconsumequeue")
                                                            and len(parts) == 3):
                if parse_offset_file_name(n) is None:
                    row("other", full)
            elif top == "index" and len(parts) == 1:
                if not n.isdigit():
                    row("other", full)
            elif not parts and n in ("checkpoint", "abort", "lock"):
                row(n, full)
            else:
                row("config" if top == "config" else "other", full)


# ---------------------------------------------------------------------------------------- messages
def message_row(rec: MessageRecord, file: str = "") -> dict[str, Any]:
    return {
        "commit_log_offset": rec.commit_log_offset,
        "store_size": rec.store_size,
        "topic": rec.topic,
        "queue_id": rec.queue_id,
        "queue_offset": rec.queue_offset,
        "tags": rec.tags,
        "tags_code": rec.tags_code,
        "keys": rec.properties.get(PROPERTY_KEYS),  # as stored (None: no KEYS property)
        "uniq_key": rec.uniq_key,
        "msg_id": rec.msg_id,
        "flag": rec.flag,
        "sys_flag": rec.sys_flag,
        "born_timestamp": rec.born_timestamp,
        "store_timestamp": rec.store_timestamp,
        "born_host": f"{rec.born_host[0]}:{rec.born_host[1]}",
        "store_host": f"{rec.store_host[0]}:{rec.store_host[1]}",
        "body_length": len(rec.body),
        "body_crc": rec.body_crc,
        "crc_ok": rec.crc_ok,
        "file": file,
    }


def messages_frame(snap: StoreSnapshot, topic: str | None = None, start: int | None = None,
                   limit: int | None = None, *, queue_id: int | None = None,
                   damage: list[Damage] | None = None) -> pd.DataFrame:
    """One row per message in CommitLog order, from the first message at or after CommitLog
    offset ``start`` (any byte, not only a record's start).

    Damage ends the walk of a file: pass ``damage=[]`` to collect it instead of raising.
    Built from :func:`rmqlab.codec.scan.scan_records` columns (the rows ``message_row`` gives).
    """
    from rmqlab.inspect.snapshot import SCAN_CHUNK, Damage

    if start is not None:
        at = snap.record_start_at_or_after(start)
        start = start if at is None else at

    parts: list[dict[str, Any]] = []
    taken = 0
    need = [limit]  # what an unfiltered limited walk still needs (read by the scan between chunks)
    if limit is None or limit > 0:
        for mf, cols in _limited_scan(snap, start, need, topic is not None or queue_id is not None, SCAN_CHUNK):
            part = cols
            if topic is not None or queue_id is not None:
                mask = np.ones(cols.n, bool)
                if topic is not None:
                    mask &= np.fromiter((t == topic for t in cols.topic), bool, cols.n)
                if queue_id is not None:
                    mask &= cols.queue_id == queue_id
                part = cols.take(mask)
            if limit is not None and part.n > limit - taken:
                part = part.take(slice(0, limit - taken))
            if part.n:
                parts.append(_message_columns(part, mf.name))
                taken += part.n
                need[0] = None if limit is None else limit - taken
            if limit is not None and taken >= limit:
                break
            if cols.error is not None:
                if damage is None:
                    raise cols.error
                damage.append(Damage(mf.name, cols.error.offset, cols.error.reason, cols.error.detail))
    if not parts:
        return pd.DataFrame([], columns=MESSAGE_COLUMNS)
    data = {c: _concat([p[c] for p in parts]) for c in MESSAGE_COLUMNS}
    return pd.DataFrame(data, columns=MESSAGE_COLUMNS)


def _limited_scan(snap: StoreSnapshot, start: int | None, need: list[int | None], filtered: bool,
                  chunk: int) -> Any:
    """``snap.scan`` whose chunk size shrinks to the rows an unfiltered limited walk still needs
    (``need[0]``, updated by the caller)."""
    if need[0] is None or filtered:
        yield from snap.scan(start=start, chunk=chunk, with_properties=False, with_crc=True)
        return
    for mf in snap.commit_log_files:
        base = mf.file_from_offset
        if start is not None and base + mf.mapped_length <= start:
            continue
        pos = max(0, start - base) if start is not None else 0
        start = None
        while True:
            want = max(1, min(chunk, need[0] or 1))
            cols = snap.scan_file(mf, pos, chunk=want, with_properties=False, with_crc=True).__next__()
            yield mf, cols
            if not cols.more:
                break
            pos = cols.stop - base


def _concat(values: list[Any]) -> Any:
    if isinstance(values[0], np.ndarray):
        return values[0] if len(values) == 1 else np.concatenate(values)
    return values[0] if len(values) == 1 else [v for part in values for v in part]


def _message_columns(c: Any, file: str) -> dict[str, Any]:
    """``message_row`` for every row of a :class:`~rmqlab.codec.scan.RecordColumns` at once."""
    return {
        "commit_log_offset": c.commit_log_offset,
        "store_size": c.store_size,
        "topic": c.topic,
        "queue_id": c.queue_id,
        "queue_offset": c.queue_offset,
        "tags": c.tags,
        "tags_code": c.tags_code,
        "keys": c.keys,
        "uniq_key": c.uniq_key,
        "msg_id": c.msg_ids(),
        "flag": c.flag,
        "sys_flag": c.sys_flag,
        "born_timestamp": c.born_timestamp,
        "store_timestamp": c.store_timestamp,
        "born_host": c.born_hosts(),
        "store_host": c.store_hosts(),
        "body_length": c.body_length,
        "body_crc": c.body_crc,
        "crc_ok": c.crc_ok,
        "file": [file] * c.n,
    }


# ---------------------------------------------------------------------------------------- consume queue
def consume_queue_frame(snap: StoreSnapshot, topic: str, queue_id: int, start: int | None = None,
                        limit: int | None = None) -> pd.DataFrame:
    """The queue's valid units (pre-blank units dropped), from queue offset ``start``.

    A unit written with ``enableConsumeQueueExt`` holds an ext address in its tags code field:
    ``ext_address`` is that address (``<NA>`` for a plain tags code) and ``tags_code`` the real
    tags code from its ext unit, or ``<NA>`` when it resolves to no unit (RocketMQ's readers then
    pass a null tags code, which every tag filter matches)."""
    q = snap.consume_queues.get((topic, queue_id))
    if q is None:
        from rmqlab.errors import ConfigError

        raise ConfigError(f"no consume queue {topic}/{queue_id} in {snap.path}")
    cols: dict[str, list[np.ndarray]] = {c: [] for c in CQ_COLUMNS if c not in ("file", "ext_address")}
    files: list[tuple[str, int]] = []  # (relative file, rows): the file column is built once at the end
    taken = 0
    for mf in q.files:
        units = q.valid_units(mf)
        first = mf.file_from_offset // CQ_STORE_UNIT_SIZE
        lo = max(0, (start or 0) - first)
        part = units[lo:]
        if limit is not None:
            part = part[: max(0, limit - taken)]
        sizes = part["size"]
        keep = sizes != 0x7FFFFFFF  # pre-blank units fill a queue's first file
        if keep.all():
            pos = np.arange(lo, lo + len(part), dtype=np.int64)
            cols["commit_log_offset"].append(part["commit_log_offset"].astype(np.int64))
            cols["size"].append(sizes.astype(np.int64))
            cols["tags_code"].append(part["tags_code"].astype(np.int64))
        else:
            pos = np.arange(lo, lo + len(part), dtype=np.int64)[keep]
            cols["commit_log_offset"].append(part["commit_log_offset"][keep].astype(np.int64))
            cols["size"].append(sizes[keep].astype(np.int64))
            cols["tags_code"].append(part["tags_code"][keep].astype(np.int64))
        cols["queue_offset"].append(first + pos)
        cols["position"].append(pos * CQ_STORE_UNIT_SIZE)
        files.append((_rel(snap, mf.file_name), len(pos)))
        taken += len(pos)
        if len(units) * CQ_STORE_UNIT_SIZE < mf.file_size or (limit is not None and taken >= limit):
            break
    data: dict[str, Any] = {c: (np.concatenate(v) if v else np.empty(0, np.int64)) for c, v in cols.items()}
    data["file"] = _repeated_strings(files)
    data["tags_code"], data["ext_address"] = _resolve_ext(snap, (topic, queue_id), data["tags_code"])
    return pd.DataFrame(data, columns=CQ_COLUMNS, copy=False)  # 10 M rows: no second copy of 6 columns


def batch_consume_queue_frame(snap: StoreSnapshot, topic: str, queue_id: int, start: int | None = None,
                              limit: int | None = None) -> pd.DataFrame:
    """A 5.x BatchConsumeQueue's valid units, one row per unit (= per commit-log record), from the
    unit holding queue offset ``start`` (units whose ``queue_offset + batch_size > start``)."""
    from rmqlab.codec.batch_consume_queue_unit import BCQ_STORE_UNIT_SIZE

    q = snap.batch_consume_queues.get((topic, queue_id))
    if q is None:
        from rmqlab.errors import ConfigError

        raise ConfigError(f"no batch consume queue {topic}/{queue_id} in {snap.path}")
    where, units = q.units()
    ends = units["msg_base_offset"].astype(np.int64) + units["batch_size"].astype(np.int64)
    pos = np.concatenate([np.arange(n, dtype=np.int64) * BCQ_STORE_UNIT_SIZE for _, n in where]) if where \
        else np.empty(0, np.int64)
    files = [(_rel(snap, mf.file_name), n) for mf, n in where]
    lo = int(np.searchsorted(ends, start, side="right")) if start is not None else 0
    hi = len(units) if limit is None else min(len(units), lo + max(0, limit))
    part = units[lo:hi]
    data: dict[str, Any] = {
        "queue_offset": part["msg_base_offset"].astype(np.int64), "batch_size": part["batch_size"].astype(np.int64),
        "commit_log_offset": part["commit_log_offset"].astype(np.int64), "size": part["size"].astype(np.int64),
        "tags_code": part["tags_code"].astype(np.int64), "store_timestamp": part["store_timestamp"].astype(np.int64),
        "file": _repeated_strings(files)[lo:hi], "position": pos[lo:hi],
    }
    return pd.DataFrame(data, columns=BCQ_COLUMNS)


def _resolve_ext(snap: StoreSnapshot, key: tuple[str, int], tags: np.ndarray) -> tuple[np.ndarray, Any]:
    """(tags codes with every resolvable ext address replaced by its unit's tags code, the
    addresses as a nullable column)."""
    is_addr = tags <= MAX_ADDR
    address = pd.array(np.where(is_addr, tags, 0), dtype="Int64")
    address[~is_addr] = pd.NA
    ext = snap.consume_queue_exts.get(key)
    if ext is not None and is_addr.any():
        sel = np.flatnonzero(is_addr)
        found, real, _ = ext.resolve(tags[sel])
        tags = tags.copy()
        tags[sel[found]] = real[found]
        is_addr[sel[found]] = False
    if is_addr.any():  # unresolved: RocketMQ's readers pass a null tags code (Spark's rows say NULL too)
        out = pd.array(tags, dtype="Int64")
        out[is_addr] = pd.NA
        return out, address
    return tags, address


def _repeated_strings(runs: list[tuple[str, int]]) -> Any:
    """A categorical column of ``count`` copies of each ``value`` (in order): one small int code
    per row instead of one Python string (10 M units in ~30 ms instead of over a second)."""
    total = sum(n for _, n in runs)
    if not total:
        return np.empty(0, object) if runs else np.empty(0, np.int64)  # the dtypes the frame always had
    codes = np.repeat(np.arange(len(runs), dtype=np.int32), [n for _, n in runs])
    return pd.Categorical.from_codes(codes, [v for v, _ in runs])  # one run per file: names are unique


# ---------------------------------------------------------------------------------------- index
def index_items(f: IndexFile) -> np.ndarray:
    """Items 1 .. index_count-1 of an index file as a zero-copy structured array."""
    buf = f.mapped_file.buffer
    base = INDEX_HEADER_SIZE + f.hash_slot_num * HASH_SLOT_SIZE
    count = min(max(f.index_count - 1, 0), max(0, (len(buf) - base) // INDEX_SIZE - 1))
    return np.frombuffer(buf, INDEX_ITEM_DTYPE, count=count, offset=base + INDEX_SIZE) if count else \
        np.empty(0, INDEX_ITEM_DTYPE)


def index_slots(f: IndexFile) -> np.ndarray:
    """The hash slot table of an index file (item numbers, big-endian int32), zero-copy."""
    buf = f.mapped_file.buffer
    n = min(f.hash_slot_num, max(0, (len(buf) - INDEX_HEADER_SIZE) // HASH_SLOT_SIZE))
    return np.frombuffer(buf, ">i4", count=n, offset=INDEX_HEADER_SIZE)


def _chain_lengths(f: IndexFile) -> np.ndarray:
    """Items per slot: every item of a slot's chain has ``key_hash % slots == slot``."""
    items = index_items(f)
    return np.bincount(items["key_hash"].astype(np.int64) % f.hash_slot_num, minlength=f.hash_slot_num)


def index_files_frame(snap: StoreSnapshot) -> pd.DataFrame:
    rows = []
    for f in snap.index_files_opened():
        lengths = _chain_lengths(f)
        rows.append({
            "name": f.name, "path": _rel(snap, f.file_name), "size": f.mapped_file.mapped_length,
            "begin_timestamp": f.begin_timestamp, "end_timestamp": f.end_timestamp,
            "begin_phy_offset": f.begin_phy_offset, "end_phy_offset": f.end_phy_offset,
            "hash_slot_count": f.hash_slot_count, "index_count": f.index_count, "items": max(f.index_count - 1, 0),
            "hash_slot_num": f.hash_slot_num, "index_num": f.index_num,
            "used_slots": int(np.count_nonzero(index_slots(f))), "max_chain_length": int(lengths.max(initial=0)),
        })
    return pd.DataFrame(rows, columns=INDEX_FILE_COLUMNS)


def index_slots_frame(snap: StoreSnapshot, file: str, *, used_only: bool = True) -> pd.DataFrame:
    """Per slot of one index file: the newest item number and the chain length."""
    f = snap.index_file(file)
    heads = index_slots(f).astype(np.int64)
    lengths = _chain_lengths(f)[: len(heads)]
    slot = np.arange(len(heads), dtype=np.int64)
    if used_only:
        keep = heads != 0
        slot, heads, lengths = slot[keep], heads[keep], lengths[keep]
    return pd.DataFrame({"slot": slot, "item": heads, "chain_length": lengths.astype(np.int64)},
                        columns=SLOT_COLUMNS)


def record_key_hashes(rec: MessageRecord) -> set[int]:
    """Index key hashes a record is indexed under: ``topic#uniq_key`` and each ``topic#key``."""
    keys = list(rec.keys)
    if rec.uniq_key:
        keys.append(rec.uniq_key)
    return {index_key_hash(index_key(rec.topic, k)) for k in keys}


def record_has_key(rec: MessageRecord, topic: str, key: str) -> bool:
    return rec.topic == topic and (key in rec.keys or rec.uniq_key == key)


def index_chain_frame(snap: StoreSnapshot, topic: str, key: str, begin: int = 0,
                      end: int = 2**63 - 1) -> pd.DataFrame:
    """The slot chain of ``topic#key`` in every index file, newest file first, step by step.

    ``hash_matches & time_in_window`` is what the store's ``query_message`` returns;
    ``collision`` marks a returned item whose message does not carry the key (equal hash).
    """
    rows = []
    full = index_key(topic, key)
    for f in reversed(snap.index_files_opened()):
        for s in f.walk_chain(full, begin, end):
            rec = snap.read_record(s.phy_offset) if s.hash_matches else None
            has = rec is not None and record_has_key(rec, topic, key)
            rows.append({
                "file": f.name, "item": s.item, "position": item_position(f.hash_slot_num, s.item),
                "key_hash": s.key_hash, "phy_offset": s.phy_offset, "time_diff": s.time_diff,
                "prev_index": s.prev_index, "time": s.time, "hash_matches": s.hash_matches,
                "time_in_window": s.time_in_window, "stop": s.stop, "message_found": rec is not None,
                "message_topic": rec.topic if rec else None, "message_keys": " ".join(rec.keys) if rec else None,
                "message_has_key": has, "collision": bool(s.hash_matches and s.time_in_window and not has),
            })
    return pd.DataFrame(rows, columns=CHAIN_COLUMNS)


# ---------------------------------------------------------------------------------------- checkpoint
def checkpoint_frame(snap: StoreSnapshot) -> pd.DataFrame:
    """One row: the five stored values plus the derived ``min_timestamp``/``min_timestamp_index``
    (no rows when the checkpoint file is missing or short)."""
    cp = snap.checkpoint_values()
    cols = ["physic_msg_timestamp", "logics_msg_timestamp", "index_msg_timestamp", "master_flushed_offset",
            "confirm_phy_offset", "min_timestamp", "min_timestamp_index"]
    if cp is None:
        return pd.DataFrame([], columns=cols)
    return pd.DataFrame([{c: getattr(cp, c) for c in cols}], columns=cols)


# ---------------------------------------------------------------------------------------- topics
def queue_figures(snap: StoreSnapshot) -> dict[tuple[str, int], tuple[int, int, int, int, int]]:
    """Per topic/queue with consume-queue files: ``(min_offset, max_offset, cq_units, cq_bytes,
    cq_max_phy_offset)`` as :func:`topics_frame` reports them (pre-blank units not counted; a
    BatchConsumeQueue by message, one unit per record; a queue with plain files too keeps the
    plain figures). ``cq_max_phy_offset`` is -1 for a queue without units."""
    cq: dict[tuple[str, int], tuple[int, int, int, int, int]] = {}
    for key, q in snap.consume_queues.items():
        base, units = q.units()
        real = units[units["size"] != 0x7FFFFFFF]
        first = base + (len(units) - len(real))
        end_phy = int(real["commit_log_offset"][-1]) + int(real["size"][-1]) if len(real) else -1
        cq[key] = (first, base + len(units), len(real), int(real["size"].astype(np.int64).sum()), end_phy)
    for key, b in snap.batch_consume_queues.items():
        if key in cq:
            continue  # a queue with plain files too: its records are checked against those
        _, units = b.units()
        if len(units):
            last = units[-1]
            cq[key] = (int(units["msg_base_offset"][0]), int(last["msg_base_offset"]) + int(last["batch_size"]),
                       len(units), int(units["size"].astype(np.int64).sum()),
                       int(last["commit_log_offset"]) + int(last["size"]))
        else:
            cq[key] = (0, 0, 0, 0, -1)
    return cq


def topics_frame(snap: StoreSnapshot) -> pd.DataFrame:
    """Per topic/queue: the CQ's offsets, units and bytes, the CommitLog's count and bytes, and
    ``lag``: records in the log (not PREPARED/ROLLBACK) at or past the CQ's max offset.

    ``min_offset``/``max_offset`` are the CQ's (like ``get_min/max_offset_in_queue``, 0/0 when
    there is no CQ); ``min_queue_offset``/``max_queue_offset`` the records' own (-1 when none).
    A 5.x BatchConsumeQueue counts one unit per record and its offsets by message (its last
    unit's ``queue_offset + batch_size``); an inner-batch record's queue offset is its first message's.
    """
    cq = queue_figures(snap)
    log: dict[tuple[str, int], list[int]] = {}
    for _mf, c in snap.scan(with_properties=False):
        if not c.n:
            continue
        codes: dict[str, int] = {}
        tcode = np.array([codes.setdefault(t, len(codes)) for t in c.topic], np.int64)
        names = list(codes)
        pair = (tcode << 32) | (c.queue_id & 0xFFFFFFFF)
        uniq, first, inv = np.unique(pair, return_index=True, return_inverse=True)
        inv = inv.ravel()
        keys = [(names[int(c_ >> 32)], int(c.queue_id[f])) for c_, f in zip(uniq.tolist(), first.tolist(), strict=True)]
        tx = c.sys_flag & 0xC
        counted = (tx != TRANSACTION_PREPARED_TYPE) & (tx != TRANSACTION_ROLLBACK_TYPE)
        cq_end = np.array([cq.get(k, (0, 0))[1] for k in keys], np.int64)
        lag = counted & (c.queue_offset >= cq_end[inv])
        g = len(uniq)
        cnt = np.bincount(inv, minlength=g)
        size = np.bincount(inv, weights=c.store_size, minlength=g)
        lags = np.bincount(inv, weights=lag, minlength=g)
        qmin = np.full(g, np.iinfo(np.int64).max)
        qmax = np.full(g, np.iinfo(np.int64).min)
        np.minimum.at(qmin, inv, c.queue_offset)
        np.maximum.at(qmax, inv, c.queue_offset)
        for i, k in enumerate(keys):
            s = log.get(k)
            if s is None:
                log[k] = [int(cnt[i]), int(qmin[i]), int(qmax[i]), int(size[i]), int(lags[i])]
            else:
                s[0] += int(cnt[i])
                s[1] = min(s[1], int(qmin[i]))
                s[2] = max(s[2], int(qmax[i]))
                s[3] += int(size[i])
                s[4] += int(lags[i])
    rows = []
    for k in sorted(set(cq) | set(log)):
        lo, hi, n, b, end_phy = cq.get(k, (0, 0, 0, 0, -1))
        ln, lmin, lmax, lb, lag = log.get(k, [0, -1, -1, 0, 0])
        rows.append({"topic": printable(k[0]), "queue_id": k[1], "min_offset": lo, "max_offset": hi, "cq_units": n,
                     "cq_bytes": b, "cq_max_phy_offset": end_phy, "messages": ln, "bytes": lb,
                     "min_queue_offset": lmin, "max_queue_offset": lmax, "lag": lag})
    return pd.DataFrame(rows, columns=TOPIC_COLUMNS)


# ---------------------------------------------------------------------------------------- delays
def delay_levels(message_delay_level: str) -> dict[int, int]:
    """``messageDelayLevel`` parsed (level -> ms); ConfigError where RocketMQ's
    ``parseDelayLevel`` fails (a unit not s/m/h/d, a number ``Long.parseLong`` refuses), which
    stops its schedule service from loading."""
    from rmqlab.config import MessageStoreConfig
    from rmqlab.errors import ConfigError

    try:
        for token in message_delay_level.split(" "):
            if not -(2**63) <= int(token[:-1]) < 2**63:
                raise ValueError(f"{token[:-1]} is not a long")
        return MessageStoreConfig(message_delay_level=message_delay_level).delay_level_table
    except (ValueError, KeyError, IndexError) as e:
        why = f"unit {e} is not s, m, h or d" if isinstance(e, KeyError) else str(e)
        raise ConfigError(f"message_delay_level {message_delay_level!r} is not a list like '1s 5s 10m 2h' "
                          f"(RocketMQ's parseDelayLevel fails: {why})") from None


def delays_frame(snap: StoreSnapshot, message_delay_level: str | None = None) -> pd.DataFrame:
    """Per delay level with an offset in ``config/delayOffset.json`` or a schedule queue: the
    offset delivery has reached (``offset``, NA when the file has none for the level: delivery
    starts at 0), the schedule queue's ``min_offset``/``max_offset``, ``waiting`` (units not
    delivered yet) and ``next_due_ms`` (the due time of the first of them, as its unit's tags
    code says; NA when none waits). ``delay_ms`` from ``message_delay_level`` (RocketMQ's default
    levels unless given). ``df.attrs``: ``source`` ("file", "bak" or None) and ``error`` (why the
    file could not be read, or "")."""
    from rmqlab.codec.delay_offset import DelayOffsetError, decode_delay_offsets
    from rmqlab.codec.flags import SCHEDULE_TOPIC
    from rmqlab.config import MessageStoreConfig

    config = MessageStoreConfig() if message_delay_level is None else MessageStoreConfig(
        message_delay_level=message_delay_level)
    delays = delay_levels(config.message_delay_level)
    table: dict[int, int] = {}
    source: str | None = None
    errors: list[str] = []
    base = os.path.join(snap.path, "config", "delayOffset.json")
    for name, path in (("file", base), ("bak", base + ".bak")):
        if not os.path.exists(path):
            continue
        if not os.path.isfile(path):  # a directory; a FIFO (a read would block), /dev/zero (it never ends)
            errors.append(f"{path}: not a regular file")
            continue
        try:
            with open(path, "rb") as f:
                raw = f.read(MAX_CONFIG_FILE + 1)
        except OSError as e:  # an unreadable file: RocketMQ's load fails on it, then tries the .bak
            errors.append(f"{path}: {e.strerror or e}")
            continue
        if len(raw) > MAX_CONFIG_FILE:
            errors.append(f"{path}: over {MAX_CONFIG_FILE:,} bytes, not an offset table (not read)")
            continue
        text = raw.decode("utf-8", errors="replace")
        if not text:
            continue
        try:
            table = decode_delay_offsets(text)[0]
        except DelayOffsetError as e:
            errors.append(f"{path}: {e}")
            continue
        source = name
        break
    queues = {qid: q for (topic, qid), q in snap.consume_queues.items() if topic == SCHEDULE_TOPIC}
    rows = []
    for level in sorted(set(table) | {qid + 1 for qid in queues}):
        q = queues.get(level - 1)
        lo = hi = 0
        due: Any = pd.NA
        offset = table.get(level)
        if q is not None:
            start, units = q.units()
            real = np.flatnonzero(units["size"] != 0x7FFFFFFF)
            lo, hi = (start + int(real[0]), start + len(units)) if len(real) else (start + len(units),) * 2
            at = max(offset or 0, lo)
            if at < hi:
                due = int(units["tags_code"][at - start])
        rows.append({"level": level, "queue_id": level - 1, "delay_ms": delays.get(level, pd.NA),
                     "offset": pd.NA if offset is None else offset, "min_offset": lo, "max_offset": hi,
                     "waiting": max(0, hi - max(offset or 0, lo)), "next_due_ms": due})
    df = pd.DataFrame(rows, columns=DELAY_COLUMNS)
    for col in ("delay_ms", "offset", "next_due_ms"):
        df[col] = int64_column([r.get(col) for r in rows])
    df.attrs["source"] = source
    df.attrs["error"] = "; ".join(errors)
    return df
