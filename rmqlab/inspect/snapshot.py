"""Read-only snapshots of any store dir: a broker's live dir, a copy, or a damaged copy.

``open_snapshot(path)`` maps every CommitLog, ConsumeQueue, ConsumeQueueExt and index file with
``ACCESS_READ``.
It never creates, truncates, deletes, locks or writes anything: no ``lock`` taken, no ``abort``
or ``checkpoint`` written, no recovery run. Damage is reported (file and offset), never repaired.

Sizes are inferred from the files, since a store dir does not record its configuration:

* CommitLog / ConsumeQueue file size: what most files agree on (``infer_file_size``): the most
  common distance between consecutive file names, else the most common file length. One file
  cut short or grown by damage is then reported against its siblings' size, not taken as the
  size (which would report every other file), and a trimmed last file is accepted as shorter.
* Index files do not record their slot and item counts (the header's ``hash_slot_count`` is the
  number of *used* slots). ``hash_slot_num``/``index_num`` default to auto-detection: a file of
  ``40 + s*4 + n*20`` bytes for RocketMQ's defaults (5,000,000 / 20,000,000) or the small preset
  (64 / 256, ``MessageStoreConfig.small``) is recognised; any other size needs both values passed
  explicitly (``open_snapshot(p, hash_slot_num=..., index_num=...)``, CLI ``--hash-slot-num`` /
  ``--index-num``), else the index views raise :class:`~rmqlab.errors.ConfigError` and
  ``verify`` reports one finding.

A CommitLog file shorter than the configured size (a trimmed sample, see ``data/README.md``) is
accepted as the last file: its missing tail counts as unwritten space.

A CommitLog file named so near ``Long.MAX_VALUE`` that its end (name + file size) is past it
(:func:`~rmqlab.codec.names.offset_overflow`: no broker wrote it) is mapped, but its records are
not read: every walk of it stops at its first byte with the damage ``offset_overflow``, so no
offset past a long (or wrapped below zero) comes out of a snapshot.

``consumequeue_ext/`` (a store written with ``enableConsumeQueueExt``) is mapped whatever the
configuration: its file size is inferred the same way (48 MiB by default). Ext addresses are
resolved against the bytes of its files as they are (no recovery runs): a unit is there when its
file exists, its 20-byte head fits, and its size field is >= 1.
"""

from __future__ import annotations

import bisect
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from rmqlab.codec import batch_consume_queue_unit as bcq
from rmqlab.codec.checkpoint import CHECKPOINT_DATA_SIZE, Checkpoint
from rmqlab.codec.consume_queue_ext_unit import gather_units, undecorate
from rmqlab.codec.consume_queue_unit import CQ_STORE_UNIT_SIZE, CQ_UNIT_DTYPE, MAX_ADDR, units_view, valid_prefix
from rmqlab.codec.flags import BLANK_MAGIC_CODE
from rmqlab.codec.index_layout import choose_index_layout, index_file_size
from rmqlab.codec.message import BlankRecord, MessageRecord, decode_message
from rmqlab.codec.names import (
    BATCH_CONSUME_QUEUE_DIR,
    COMPACTION_DIR,
    infer_file_size,
    is_rocksdb_listing,
    offset_overflow,
    parse_offset_file_name,
)
from rmqlab.codec.scan import RecordColumns, header_hop, scan_records
from rmqlab.codec.walk import iter_records
from rmqlab.errors import ConfigError, CorruptRecord, NotAStore
from rmqlab.files.fs import dledger_commit_log
from rmqlab.files.mapped_file import MappedFile
from rmqlab.store.args import int_arg, queue_args, str_arg

if TYPE_CHECKING:
    import pandas as pd

    from rmqlab.store.index_file import IndexFile

__all__ = ["BatchQueueFiles", "Damage", "ExtQueueFiles", "QueueFiles", "StoreSnapshot", "open_snapshot"]

_STORE_MARKERS = ("commitlog", "consumequeue", "index", "checkpoint")
#: records per columnar scan chunk (bounds the memory of a walk over a 1 GiB file)
SCAN_CHUNK = 1 << 17
_INT = struct.Struct(">i")


@dataclass(frozen=True)
class Damage:
    """Where a walk had to stop before the end of a file, and why."""

    file: str
    offset: int  # absolute CommitLog offset
    reason: str
    detail: str


@dataclass
class QueueFiles:
    """One topic/queue's ConsumeQueue files, mapped read-only, oldest first."""

    topic: str
    queue_id: int
    files: list[MappedFile]

    def valid_units(self, mf: MappedFile) -> np.ndarray:
        """The units of one file up to the first invalid one (``offset < 0 or size <= 0``)."""
        units = units_view(mf.buffer)
        return units[: valid_prefix(units)]

    def units(self) -> tuple[int, np.ndarray]:
        """``(first queue offset, units)``: valid units of every file, contiguous from the first.

        Stops at the first file that is not full of valid units (like ``ConsumeQueue.recover``).
        A single file is returned as a zero-copy view; several are concatenated.
        """
        if not self.files:
            return 0, np.empty(0, CQ_UNIT_DTYPE)
        base = self.files[0].file_from_offset // CQ_STORE_UNIT_SIZE
        parts = []
        for mf in self.files:
            part = self.valid_units(mf)
            parts.append(part)
            if len(part) * CQ_STORE_UNIT_SIZE < mf.file_size:
                break
        return base, parts[0] if len(parts) == 1 else np.concatenate(parts)


@dataclass
class BatchQueueFiles:
    """One topic/queue's 5.x BatchConsumeQueue files (46-byte units), mapped read-only, oldest first."""

    topic: str
    queue_id: int
    files: list[MappedFile]

    def valid_units(self, mf: MappedFile) -> np.ndarray:
        """The units of one file up to the first invalid one (``BatchConsumeQueue.recover``'s test)."""
        units = bcq.units_view(mf.buffer)
        return units[: bcq.valid_prefix(units)]

    def units(self) -> tuple[list[tuple[MappedFile, int]], np.ndarray]:
        """``([(file, units read from it)], units)``: the valid units of every file, stopping at
        the first file not full of them. A unit's queue offsets are its own ``msg_base_offset ..
        + batch_size - 1`` (no unit index maps to a queue offset, unlike a plain queue)."""
        parts: list[np.ndarray] = []
        where: list[tuple[MappedFile, int]] = []
        for mf in self.files:
            part = self.valid_units(mf)
            parts.append(part)
            where.append((mf, len(part)))
            if len(part) * bcq.BCQ_STORE_UNIT_SIZE + bcq.BCQ_STORE_UNIT_SIZE <= mf.file_size:
                break
        if not parts:
            return where, np.empty(0, bcq.BCQ_UNIT_DTYPE)
        return where, parts[0] if len(parts) == 1 else np.concatenate(parts)


@dataclass
class ExtQueueFiles:
    """One topic/queue's ConsumeQueueExt files, mapped read-only, oldest first."""

    topic: str
    queue_id: int
    files: list[MappedFile]
    file_size: int

    def resolve(self, addresses: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(found, tags_code, msg_store_time)`` for each ext address (``<= MAX_ADDR``; any other
        value is not found): the unit at ``undecorate(address)`` in the file holding it."""
        addr = np.asarray(addresses, dtype=np.int64)
        found = np.zeros(len(addr), dtype=bool)
        tags = np.zeros(len(addr), dtype=np.int64)
        times = np.zeros(len(addr), dtype=np.int64)
        is_addr = addr <= MAX_ADDR
        # undecorate in int64: for a negative address, address - Long.MIN_VALUE clears the sign bit
        real = np.where(is_addr, addr & np.int64(undecorate(-1)), -1)
        starts = real - real % self.file_size
        for mf in self.files:
            sel = np.flatnonzero(is_addr & (starts == mf.file_from_offset))
            if sel.size:
                f, t, s = gather_units(mf.buffer, real[sel] - mf.file_from_offset)
                found[sel], tags[sel], times[sel] = f, t, s
        return found, tags, times


def _check_window(start: int | None, limit: int | None) -> tuple[int | None, int | None]:
    """A frame's ``start`` (an offset) and ``limit`` (rows) are None or ints >= 0: a negative one
    is a user's mistake, which would otherwise give an empty frame that looks like an empty store
    (ConfigError), and another type is refused (InvalidArgument). Returns them as ints."""
    out: list[int | None] = []
    for name, value in (("start", start), ("limit", limit)):
        if value is not None:
            value = int_arg(name, value)
            if value < 0:
                raise ConfigError(f"{name} must be >= 0 (None: from the first / no limit), not {value}")
        out.append(value)
    return out[0], out[1]


def _stores_below(path: str, entries: set[str], limit: int = 3) -> list[str]:
    """Store roots one level below ``path`` (at most ``limit``, by name): what a user who points
    at a broker's home, or at a folder of copied stores, most likely meant. Looks at no more
    than 1,000 entries, so a huge directory answers at once."""
    found: list[str] = []
    for name in sorted(entries)[:1000]:
        sub = os.path.join(path, name)
        try:
            if os.path.isdir(sub) and set(os.listdir(sub)) & set(_STORE_MARKERS):
                found.append(sub)
        except OSError:
            continue  # unreadable: not a suggestion
        if len(found) == limit:
            break
    return found


class StoreSnapshot:
    """A read-only view of one store dir. Use as a context manager or call :meth:`close`.

    Attributes: ``commit_log_files`` (``MappedFile`` list, oldest first), ``consume_queues``
    (``{(topic, queue_id): QueueFiles}``), ``batch_consume_queues`` (5.x BatchConsumeQueues under
    ``batchconsumequeue/``, ``{(topic, queue_id): BatchQueueFiles}``), ``index_paths``, ``abort_present``,
    ``rocksdb_consume_queue`` (5.x keeps consume queues in a RocksDB database in ``consumequeue/``,
    which is not read), ``compaction_files`` (5.x compaction logs, not read), the inferred
    ``commit_log_file_size``, ``consume_queue_file_size``, ``hash_slot_num``, ``index_num``.
    DataFrames come from the methods (built in :mod:`rmqlab.inspect.frames`).
    """

    def __init__(
        self,
        path: str,
        *,
        commit_log_file_size: int | None = None,
        consume_queue_file_size: int | None = None,
        hash_slot_num: int | None = None,
        index_num: int | None = None,
    ) -> None:
        self.path = os.path.abspath(path)
        if not os.path.exists(self.path):
            raise NotAStore(self.path, "no such directory")
        if not os.path.isdir(self.path):
            raise NotAStore(self.path, "not a directory")
        entries = set(os.listdir(self.path))
        if not entries & set(_STORE_MARKERS):
            below = _stores_below(self.path, entries)
            hint = f"; did you mean {' or '.join(below)}?" if below else ""
            what = "not a RocketMQ store (no commitlog/, consumequeue/, index/ or checkpoint)"
            raise NotAStore(self.path, what + hint)
        self.commit_log_files: list[MappedFile] = []
        self.consume_queues: dict[tuple[str, int], QueueFiles] = {}
        self.consume_queue_exts: dict[tuple[str, int], ExtQueueFiles] = {}
        self.batch_consume_queues: dict[tuple[str, int], BatchQueueFiles] = {}
        self._index_files: list[IndexFile] | None = None
        try:
            self._map_commit_log(commit_log_file_size)
            self._map_consume_queues(consume_queue_file_size)
            self._map_consume_queue_exts()
            self._map_batch_consume_queues()
            self._find_index_files(hash_slot_num, index_num)
        except BaseException:
            self.close()
            raise
        self.abort_present = os.path.exists(os.path.join(self.path, "abort"))
        self.rocksdb_consume_queue = is_rocksdb_listing(_plain_files(os.path.join(self.path, "consumequeue")))
        #: a DLedger CommitLog's data dir (``dledger-<id>/data``): the broker's messages are there, not read
        self.dledger_commit_log = dledger_commit_log(self.path)
        self.compaction_files = _files_below(os.path.join(self.path, COMPACTION_DIR))

    # ------------------------------------------------------------------ opening
    def _map_commit_log(self, file_size: int | None) -> None:
        self.commit_log_dir = os.path.join(self.path, "commitlog")
        names, sizes = _offset_files(self.commit_log_dir)
        self.commit_log_file_size = file_size or infer_file_size([(names, sizes)], 1024 * 1024 * 1024)
        for name, size in zip(names, sizes, strict=True):
            if size:
                self.commit_log_files.append(
                    MappedFile(os.path.join(self.commit_log_dir, name), self.commit_log_file_size, read_only=True)
                )
        self._starts = [mf.file_from_offset for mf in self.commit_log_files]

    def _map_consume_queues(self, file_size: int | None) -> None:
        root = os.path.join(self.path, "consumequeue")
        found = _queue_dirs(root)
        self.consume_queue_file_size = file_size or infer_file_size([(f[2], f[3]) for f in found], 300_000 * 20)
        for topic, qid, names, sizes in found:
            qdir = os.path.join(root, topic, str(qid))
            files = [
                MappedFile(os.path.join(qdir, n), self.consume_queue_file_size, read_only=True)
                for n, s in zip(names, sizes, strict=True) if s
            ]
            self.consume_queues[(topic, qid)] = QueueFiles(topic, qid, files)

    def _map_consume_queue_exts(self) -> None:
        self.consume_queue_ext_dir = os.path.join(self.path, "consumequeue_ext")
        found = _queue_dirs(self.consume_queue_ext_dir)
        self.consume_queue_ext_file_size = infer_file_size([(f[2], f[3]) for f in found], 48 * 1024 * 1024)
        for topic, qid, names, sizes in found:
            qdir = os.path.join(self.consume_queue_ext_dir, topic, str(qid))
            files = [
                MappedFile(os.path.join(qdir, n), self.consume_queue_ext_file_size, read_only=True)
                for n, s in zip(names, sizes, strict=True) if s
            ]
            self.consume_queue_exts[(topic, qid)] = ExtQueueFiles(topic, qid, files, self.consume_queue_ext_file_size)

    def _map_batch_consume_queues(self) -> None:
        self.batch_consume_queue_dir = os.path.join(self.path, BATCH_CONSUME_QUEUE_DIR)
        found = _queue_dirs(self.batch_consume_queue_dir)
        self.batch_consume_queue_file_size = infer_file_size([(f[2], f[3]) for f in found], bcq.BCQ_FILE_SIZE)
        for topic, qid, names, sizes in found:
            qdir = os.path.join(self.batch_consume_queue_dir, topic, str(qid))
            files = [
                MappedFile(os.path.join(qdir, n), self.batch_consume_queue_file_size, read_only=True)
                for n, s in zip(names, sizes, strict=True) if s
            ]
            self.batch_consume_queues[(topic, qid)] = BatchQueueFiles(topic, qid, files)

    def _find_index_files(self, hash_slot_num: int | None, index_num: int | None) -> None:
        self.index_dir = os.path.join(self.path, "index")
        self.index_paths: list[str] = []
        if os.path.isdir(self.index_dir):
            self.index_paths = [
                os.path.join(self.index_dir, n) for n in sorted(os.listdir(self.index_dir))
                if n.isdigit() and os.path.isfile(os.path.join(self.index_dir, n))
            ]
        self.index_error = ""
        #: index files shorter than their layout (torn or truncated): never opened, reported
        self.index_short: list[tuple[str, int]] = []
        sizes = {p: os.path.getsize(p) for p in self.index_paths}
        self.hash_slot_num, self.index_num, self.index_error = choose_index_layout(
            list(sizes.values()), hash_slot_num, index_num)
        if self.index_error:  # name the files: a size alone does not say which one to look at
            named = ", ".join(f"{os.path.basename(p)}: {n:,} bytes" for p, n in list(sizes.items())[:4])
            more = f" and {len(sizes) - 4} more" if len(sizes) > 4 else ""
            self.index_error += f" (in {self.index_dir}: {named}{more})"
            return
        expected = index_file_size(self.hash_slot_num, self.index_num)
        self.index_short = [(p, n) for p, n in sizes.items() if 0 < n < expected]

    # ------------------------------------------------------------------ commit log
    @property
    def min_offset(self) -> int:
        return self._starts[0] if self._starts else 0

    @cached_property
    def max_offset(self) -> int:
        """End of the readable log: where the walk stops in the newest non-empty file."""
        for mf in reversed(self.commit_log_files):
            end = 0 if offset_overflow(mf.file_from_offset, mf.file_size) else scan_end(mf.buffer)
            if end > 0:
                return mf.file_from_offset + end
        return self.min_offset

    def file_of(self, offset: int) -> MappedFile | None:
        """The CommitLog file holding ``offset``, or None."""
        offset = int_arg("offset", offset)
        i = bisect.bisect_right(self._starts, offset) - 1
        if i < 0:
            return None
        mf = self.commit_log_files[i]
        return mf if offset < mf.file_from_offset + mf.mapped_length else None

    def read_record(self, offset: int, *, check_crc: bool = False,
                    any_physical_offset: bool = False) -> MessageRecord | None:
        """The message starting exactly at ``offset``, or None (no file, blank, damage, or a
        record whose PHYSICALOFFSET field names another offset: a stale record of a reused file,
        or that field damaged; ``any_physical_offset=True`` returns such a record too)."""
        mf = self.file_of(offset)
        if mf is None:
            return None
        try:
            rec = decode_message(mf.buffer, offset - mf.file_from_offset, check_crc=check_crc, file=mf.name)
        except CorruptRecord:
            return None
        if not isinstance(rec, MessageRecord) or (rec.commit_log_offset != offset and not any_physical_offset):
            return None
        return rec

    def record_start_at_or_after(self, offset: int) -> int | None:
        """The offset of the first message starting at or after ``offset``, hopping record sizes
        from the start of its file (the next file's start once only the file's end filler is
        left); None when damage before it leaves nothing to hop by, or no file holds ``offset``.
        ``messages --from-offset`` takes any byte, not only a record's start."""
        mf = self.file_of(offset)
        if mf is None:
            return None
        buf, base, end = mf.buffer, mf.file_from_offset, mf.mapped_length
        pos = offset - base
        starts, stop = header_hop(buf, 0, end)
        i = bisect.bisect_left(starts, pos)
        if i < len(starts):
            return base + starts[i]
        if stop + 8 <= end and _INT.unpack_from(buf, stop + 4)[0] == BLANK_MAGIC_CODE:
            return base + self.commit_log_file_size  # only the file's end filler is left: the next file
        return base + stop if stop >= pos else None  # the data ends there, or damage before ``offset``

    def iter_records(
        self, *, start: int | None = None, check_crc: bool = False, damage: list[Damage] | None = None
    ) -> Iterator[tuple[str, int, MessageRecord | BlankRecord]]:
        """Yield ``(file name, absolute offset, record)`` over the whole log, in order.

        A damaged record ends the walk of its file (like recovery); it is appended to
        ``damage`` when a list is given, else raised as ``CorruptRecord``.
        """
        for mf in self.commit_log_files:
            base = mf.file_from_offset
            if start is not None and base + mf.mapped_length <= start:
                continue
            pos = max(0, start - base) if start is not None else 0
            yield from self.iter_file_records(mf, pos, check_crc=check_crc, damage=damage)
            start = None

    @staticmethod
    def iter_file_records(
        mf: MappedFile, pos: int = 0, *, check_crc: bool = False, damage: list[Damage] | None = None
    ) -> Iterator[tuple[str, int, MessageRecord | BlankRecord]]:
        """One file's records from byte ``pos``; damage as in :meth:`iter_records`."""
        why = offset_overflow(mf.file_from_offset, mf.file_size)
        if why is not None:
            if damage is None:
                raise CorruptRecord(mf.name, mf.file_from_offset, "offset_overflow", why)
            damage.append(Damage(mf.name, mf.file_from_offset, "offset_overflow", why))
            return
        try:
            for off, rec in iter_records(mf.buffer, pos, check_crc=check_crc, file=mf.name,
                                         base_offset=mf.file_from_offset):
                yield mf.name, off, rec
        except CorruptRecord as e:
            if damage is None:
                raise
            damage.append(Damage(mf.name, e.offset, e.reason, e.detail))

    def scan(self, *, start: int | None = None, chunk: int | None = SCAN_CHUNK,
             **kwargs: Any) -> Iterator[tuple[MappedFile, RecordColumns]]:
        """The log as columns: ``(file, chunk)`` pairs in order, like :meth:`iter_records` (same
        files, same start rule). The last chunk of each file says how its walk ended (``blank``,
        ``error``); nothing is raised for damage. ``kwargs`` go to
        :func:`~rmqlab.codec.scan.scan_records`."""
        for mf in self.commit_log_files:
            base = mf.file_from_offset
            if start is not None and base + mf.mapped_length <= start:
                continue
            pos = max(0, start - base) if start is not None else 0
            start = None
            for cols in self.scan_file(mf, pos, chunk=chunk, **kwargs):
                yield mf, cols

    @staticmethod
    def scan_file(mf: MappedFile, pos: int = 0, *, chunk: int | None = SCAN_CHUNK,
                  **kwargs: Any) -> Iterator[RecordColumns]:
        """One file's records from byte ``pos`` as chunks of at most ``chunk`` records; none, and
        the damage ``offset_overflow`` at the file's start, when the file ends past a long."""
        why = offset_overflow(mf.file_from_offset, mf.file_size)
        if why is not None:
            cols = scan_records(mf.buffer, 0, 0, base_offset=mf.file_from_offset, file=mf.name, **kwargs)
            cols.error = CorruptRecord(mf.name, mf.file_from_offset, "offset_overflow", why)
            yield cols
            return
        while True:
            cols = scan_records(mf.buffer, pos, base_offset=mf.file_from_offset, file=mf.name,
                                max_records=chunk, **kwargs)
            yield cols
            if not cols.more:
                return
            pos = cols.stop - mf.file_from_offset

    def iter_messages(self, topic: str | None = None, *, queue_id: int | None = None, start: int | None = None,
                      damage: list[Damage] | None = None) -> Iterator[MessageRecord]:
        for _, _, rec in self.iter_records(start=start, damage=damage):
            if (isinstance(rec, MessageRecord) and (topic is None or rec.topic == topic)
                    and (queue_id is None or rec.queue_id == queue_id)):
                yield rec

    # ------------------------------------------------------------------ other files
    def checkpoint_values(self) -> Checkpoint | None:
        """The checkpoint file's values, or None when it is missing or shorter than 40 bytes."""
        path = os.path.join(self.path, "checkpoint")
        if not os.path.isfile(path):
            return None
        with open(path, "rb") as f:
            raw = f.read(CHECKPOINT_DATA_SIZE)
        return Checkpoint.unpack(raw) if len(raw) == CHECKPOINT_DATA_SIZE else None

    def index_files_opened(self) -> list[IndexFile]:
        """Every index file as a read-only ``IndexFile`` (oldest first), except the empty ones and those
        shorter than the layout (:attr:`index_short`); ConfigError if the layout is unknown."""
        if self.index_error:
            raise ConfigError(self.index_error)
        if self._index_files is None:
            from rmqlab.store.index_file import IndexFile

            short = {p for p, _ in self.index_short}
            self._index_files = []
            for p in self.index_paths:
                if os.path.getsize(p) and p not in short:
                    self._index_files.append(IndexFile(p, self.hash_slot_num, self.index_num, read_only=True))
        return self._index_files

    def index_file(self, name: str) -> IndexFile:
        for f in self.index_files_opened():
            if f.name == os.path.basename(name):
                return f
        for p, size in self.index_short:  # there, but not read: say so rather than "no index file"
            if os.path.basename(p) == name:
                raise ConfigError(f"{p} is {size} bytes, shorter than its layout "
                                  f"({index_file_size(self.hash_slot_num, self.index_num)} bytes): not read")
        if name in {os.path.basename(p) for p in self.index_paths}:
            raise ConfigError(f"{os.path.join(self.index_dir, name)} is empty: not read")
        raise ConfigError(f"no index file {name!r} in {self.index_dir}")

    # ------------------------------------------------------------------ frames (see frames.py)
    def files(self) -> pd.DataFrame:
        from rmqlab.inspect import frames

        return frames.files_frame(self)

    def messages(self, topic: str | None = None, start: int | None = None, limit: int | None = None, *,
                 queue_id: int | None = None, damage: list[Damage] | None = None) -> pd.DataFrame:
        """One row per message (bodies summarised by length and CRC), in CommitLog order."""
        from rmqlab.inspect import frames

        start, limit = _check_window(start, limit)
        if topic is not None:
            topic = str_arg("topic", topic)
        if queue_id is not None:
            queue_id = int_arg("queue_id", queue_id)
        return frames.messages_frame(self, topic, start, limit, queue_id=queue_id, damage=damage)

    def consume_queue(self, topic: str, queue_id: int, start: int | None = None,
                      limit: int | None = None) -> pd.DataFrame:
        from rmqlab.inspect import frames

        start, limit = _check_window(start, limit)
        topic, queue_id = queue_args(topic, queue_id)
        return frames.consume_queue_frame(self, topic, queue_id, start, limit)

    def batch_consume_queue(self, topic: str, queue_id: int, start: int | None = None,
                            limit: int | None = None) -> pd.DataFrame:
        from rmqlab.inspect.frames import batch_consume_queue_frame

        start, limit = _check_window(start, limit)
        topic, queue_id = queue_args(topic, queue_id)
        return batch_consume_queue_frame(self, topic, queue_id, start, limit)

    def index_files(self) -> pd.DataFrame:
        from rmqlab.inspect import frames

        return frames.index_files_frame(self)

    def index_slots(self, file: str, *, used_only: bool = True) -> pd.DataFrame:
        from rmqlab.inspect import frames

        return frames.index_slots_frame(self, file, used_only=used_only)

    def index_chain(self, topic: str, key: str, begin: int = 0, end: int = 2**63 - 1) -> pd.DataFrame:
        from rmqlab.inspect import frames

        topic, key = str_arg("topic", topic), str_arg("key", key)
        return frames.index_chain_frame(self, topic, key, int_arg("begin", begin), int_arg("end", end))

    def checkpoint(self) -> pd.DataFrame:
        from rmqlab.inspect import frames

        return frames.checkpoint_frame(self)

    def topics(self) -> pd.DataFrame:
        from rmqlab.inspect import frames

        return frames.topics_frame(self)

    def delays(self, message_delay_level: str | None = None) -> pd.DataFrame:
        from rmqlab.inspect import frames

        return frames.delays_frame(self, message_delay_level)

    # 5.x timer messages (see timers.py): every frame is empty, with an attrs note, without timer files
    def timer_checkpoint(self) -> pd.DataFrame:
        """One row: ``config/timercheck`` (read time, timerlog flush position, queue offsets, data version)."""
        from rmqlab.inspect import timers

        return timers.timer_checkpoint_frame(self)

    def timer_wheel(self, precision_ms: int = 1000) -> pd.DataFrame:
        """The ``timerwheel``'s non-empty slots (``timerPrecisionMs`` is configuration: pass it if not 1000)."""
        from rmqlab.inspect import timers

        return timers.timer_wheel_frame(self, precision_ms)

    def timer_log(self, file_size: int | None = None) -> pd.DataFrame:
        """Every valid ``timerlog/`` unit, oldest first; damage in ``attrs["damage"]``."""
        from rmqlab.inspect import timers

        return timers.timer_log_frame(self, file_size)

    def timers(self, precision_ms: int = 1000, *, file_size: int | None = None,
               limit: int | None = None) -> pd.DataFrame:
        """The timer messages still pending (wheel chains after the checkpoint's read time, and
        ``rmq_sys_wheel_timer`` units not yet enqueued), joined to their commit-log records."""
        from rmqlab.inspect import timers

        _check_window(None, limit)
        return timers.timers_frame(self, precision_ms, file_size, limit)

    def verify(self, *, check_crc: bool = False, progress: Any = None) -> Iterator[Any]:
        from rmqlab.inspect.checks import verify

        return verify(self, check_crc=check_crc, progress=progress)

    def explain_recovery(self, **kwargs: Any) -> Any:
        from rmqlab.inspect.explain import explain_recovery

        return explain_recovery(self, **kwargs)

    def explain_cleanup(self, **kwargs: Any) -> Any:
        from rmqlab.inspect.explain import explain_cleanup

        return explain_cleanup(self, **kwargs)

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        for mf in self.commit_log_files:
            mf.close()
        self.commit_log_files = []
        for q in self.consume_queues.values():
            for mf in q.files:
                mf.close()
        self.consume_queues = {}
        for e in self.consume_queue_exts.values():
            for mf in e.files:
                mf.close()
        self.consume_queue_exts = {}
        for b in getattr(self, "batch_consume_queues", {}).values():
            for mf in b.files:
                mf.close()
        self.batch_consume_queues = {}
        for f in self._index_files or []:
            f.mapped_file.close()
        self._index_files = None

    def __enter__(self) -> StoreSnapshot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _plain_files(directory: str) -> list[str]:
    """Names of the regular files directly in ``directory`` (none when it does not exist)."""
    try:
        with os.scandir(directory) as it:
            return [e.name for e in it if e.is_file(follow_symlinks=False)]
    except OSError:
        return []


def _files_below(directory: str) -> list[str]:
    """Paths (relative to ``directory``'s parent) of the non-empty files below ``directory``."""
    out: list[str] = []
    parent = os.path.dirname(directory)
    for dirpath, _dirs, files in os.walk(directory):
        for f in sorted(files):
            full = os.path.join(dirpath, f)
            if os.path.isfile(full) and os.path.getsize(full):  # not a link to nothing, a FIFO...
                out.append(os.path.relpath(full, parent))
    return sorted(out)


def _queue_dirs(root: str) -> list[tuple[str, int, list[str], list[int]]]:
    """``(topic, queue id, file names, file sizes)`` of every ``<root>/<topic>/<digits>/`` dir."""
    found: list[tuple[str, int, list[str], list[int]]] = []
    if os.path.isdir(root):
        for topic in sorted(os.listdir(root)):
            tdir = os.path.join(root, topic)
            if not os.path.isdir(tdir):
                continue
            for qname in sorted(os.listdir(tdir), key=lambda s: (len(s), s)):
                qdir = os.path.join(tdir, qname)
                if not (qname.isdigit() and os.path.isdir(qdir)):
                    continue
                names, sizes = _offset_files(qdir)
                found.append((topic, int(qname), names, sizes))
    return found


def _offset_files(directory: str) -> tuple[list[str], list[int]]:
    """Sorted names (20-digit offsets) of the regular files in ``directory`` and their sizes."""
    if not os.path.isdir(directory):
        return [], []
    names = sorted(
        n for n in os.listdir(directory)
        if parse_offset_file_name(n) is not None and os.path.isfile(os.path.join(directory, n))
    )
    return names, [os.path.getsize(os.path.join(directory, n)) for n in names]


def scan_end(buf: Any) -> int:
    """Where a record-header hop over ``buf`` stops: after a blank record, the file's end; else
    the first position that does not start a plausible record (zeros, damage, a torn tail).

    Header-only (TOTALSIZE + magic) for speed; ``verify`` decodes every record.
    """
    import struct

    from rmqlab.codec.flags import BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2

    head = struct.Struct(">ii")
    n = len(buf)
    pos = 0
    while pos + 8 <= n:
        total, magic = head.unpack_from(buf, pos)
        if magic == BLANK_MAGIC_CODE:
            return n
        if magic not in (MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2) or total < 8 or pos + total > n:
            break
        pos += total
    return pos


def open_snapshot(path: str | os.PathLike[str], **kwargs: Any) -> StoreSnapshot:
    """Open ``path`` read-only. Raises ``NotAStore`` when it is not a store dir.

    Keyword arguments: ``commit_log_file_size``, ``consume_queue_file_size``, ``hash_slot_num``,
    ``index_num`` (each inferred from the files when omitted; see the module docstring).
    """
    return StoreSnapshot(os.fspath(path), **kwargs)

