"""One read-only vocabulary over a live ``MessageStore`` or a ``StoreSnapshot``.

Views ask a :class:`Source` questions (files of a queue and their pointers, records of a file,
units of a consume queue or of a 5.x batch consume queue, index files, the recovery plan, a
cleanup plan) and get plain values
back (:class:`FileState`, :class:`QueueState`, :class:`RecordInfo`, numpy copies), so the figure
builders in :mod:`rmqlab.widgets.figures` never see an engine object. Nothing here writes.

Thread-safety: a live store may be appending while a view reads. Positions are plain ints read
once; a record half-written at the read position is reported as the end of the walk, never
decoded as junk (decoding raises and the walk stops there).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from rmqlab.codec.batch_consume_queue_unit import BCQ_STORE_UNIT_SIZE, BCQ_UNIT_DTYPE
from rmqlab.codec.consume_queue_unit import CQ_STORE_UNIT_SIZE, CQ_UNIT_DTYPE, MAX_ADDR
from rmqlab.codec.index_layout import index_key, index_key_hash, item_position
from rmqlab.codec.message import BlankRecord, MessageRecord, decode_message
from rmqlab.codec.walk import iter_records
from rmqlab.errors import ConfigError, RmqlabError

if TYPE_CHECKING:
    from rmqlab.events import EventBus
    from rmqlab.files.mapped_file import MappedFile
    from rmqlab.inspect.snapshot import StoreSnapshot
    from rmqlab.store.cleanup import CleanupPlan
    from rmqlab.store.index_file import ChainStep, IndexFile
    from rmqlab.store.message_store import MessageStore
    from rmqlab.store.recovery import RecoveryPlan

__all__ = ["BATCH_CONSUME_QUEUE", "COMMITLOG", "CONSUME_QUEUE", "INDEX", "FileState", "MemoryQueueState",
           "MemoryState", "QueueState", "RecordInfo", "Source", "WalkStep", "as_source"]

COMMITLOG = "commitlog"
INDEX = "index"
CONSUME_QUEUE = "consumequeue"
BATCH_CONSUME_QUEUE = "batchconsumequeue"  # 5.x topics with queue.type=BatchCQ (spec §3.8)
_CQ_PREFIX = CONSUME_QUEUE + "/"
_BCQ_PREFIX = BATCH_CONSUME_QUEUE + "/"


@dataclass(frozen=True, slots=True)
class FileState:
    """One mapped file: absolute ``start``, ``size`` bytes, positions relative to the file.

    ``status``: ``active`` (being written), ``full``, ``empty``, ``pending`` (filed with the
    allocate service, not handed out yet: pre-allocation) or ``deleted`` (gone, fading out:
    ``opacity`` < 1).
    """

    name: str
    start: int
    size: int
    wrote: int
    committed: int
    flushed: int
    status: str
    opacity: float = 1.0


@dataclass(frozen=True, slots=True)
class QueueState:
    """The files of one mapped-file queue; ``*_where`` are None for a snapshot (no such state)."""

    queue: str
    files: tuple[FileState, ...]
    committed_where: int | None = None
    flushed_where: int | None = None
    pending: tuple[FileState, ...] = ()
    live: bool = False


@dataclass(frozen=True, slots=True)
class RecordInfo:
    """A CommitLog record as the log view draws it (``kind``: ``message`` or ``blank``)."""

    offset: int
    size: int
    kind: str
    file: str
    topic: str = ""
    queue_id: int = -1
    queue_offset: int = -1
    tags: str | None = None
    keys: str = ""


@dataclass(frozen=True, slots=True)
class WalkStep:
    """One step of an index chain walk plus what the message at ``phy_offset`` says.

    ``collision``: the item's hash equals the key's and its time is in the window (so the store
    would return it) but the message does not carry the key (RocketMQ issue 3613).
    """

    step: ChainStep
    slot: int
    message_found: bool
    message_has_key: bool
    collision: bool


@dataclass(frozen=True, slots=True)
class MemoryQueueState:
    """One queue of a memory topic: offsets held ``[min_offset, max_offset)`` and their bytes
    (``held_bytes`` None when the engine does not say)."""

    topic: str
    queue_id: int
    min_offset: int
    max_offset: int
    held_bytes: int | None = None

    @property
    def held(self) -> int:
        return self.max_offset - self.min_offset

    @property
    def evicted(self) -> int:
        """Messages evicted from this queue: offsets start at 0 and live in RAM only, so every
        offset below the oldest held one was evicted."""
        return self.min_offset


@dataclass(frozen=True, slots=True)
class MemoryState:
    """The memory store of a live store (``enabled`` False: memory topics off, or a snapshot)."""

    enabled: bool
    threshold: int = 0
    total_bytes: int = 0
    count: int = 0
    evicted_count: int = 0
    evicted_bytes: int = 0
    queues: tuple[MemoryQueueState, ...] = ()

    def topics(self) -> list[str]:
        return sorted({q.topic for q in self.queues})


def as_source(target: Any) -> Source:
    """``target``: a Source, MessageStore, StoreSnapshot, or a store dir path (opened read-only)."""
    return target if isinstance(target, Source) else Source(target)


class Source:
    """Read-only adapter; see the module docstring."""

    def __init__(self, target: Any) -> None:
        from rmqlab.inspect.snapshot import StoreSnapshot, open_snapshot
        from rmqlab.store.message_store import MessageStore

        self.owned = False
        if isinstance(target, str | os.PathLike):
            target = open_snapshot(target)
            self.owned = True
        self.store: MessageStore | None = target if isinstance(target, MessageStore) else None
        self.snapshot: StoreSnapshot | None = target if isinstance(target, StoreSnapshot) else None
        if self.store is None and self.snapshot is None:
            raise TypeError(f"expected a MessageStore, StoreSnapshot or store path, not {type(target).__name__}")

    # ------------------------------------------------------------------ identity
    @property
    def live(self) -> bool:
        return self.store is not None

    @property
    def bus(self) -> EventBus | None:
        return self.store.bus if self.store is not None else None

    def retarget(self, store: MessageStore) -> None:
        """Point at a reopened store (after a crash and recovery)."""
        self.store = store

    def now_ms(self) -> int:
        """The store's clock; for a snapshot the wall clock (a view default only)."""
        if self.store is not None:
            return self.store.clock.now_ms()
        return time.time_ns() // 1_000_000

    def close(self) -> None:
        if self.owned and self.snapshot is not None:
            self.snapshot.close()

    # ------------------------------------------------------------------ mapped-file queues
    def queues(self) -> list[str]:
        """``commitlog``, ``consumequeue/<topic>/<queue id>`` for every queue,
        ``batchconsumequeue/<topic>/<queue id>`` for every batch queue (5.x), ``index``."""
        return [COMMITLOG, *(f"{_CQ_PREFIX}{t}/{q}" for t, q in self.consume_queue_keys()),
                *(f"{_BCQ_PREFIX}{t}/{q}" for t, q in self.batch_queue_keys()), INDEX]

    def mapped_files(self, queue: str = COMMITLOG) -> list[MappedFile]:
        if queue == COMMITLOG:
            if self.store is not None:
                return list(self.store.commit_log.mapped_file_queue.mapped_files)
            return list(self.snapshot.commit_log_files)  # type: ignore[union-attr]
        if queue == INDEX:
            return [f.mapped_file for f in self.index_files()]
        kind, topic, qid = _parse_queue(queue)
        if self.store is not None:
            cq = self._live_queue(kind, topic, qid)
            return list(cq.mapped_file_queue.mapped_files) if cq is not None else []
        queues = (self.snapshot.consume_queues if kind == CONSUME_QUEUE  # type: ignore[union-attr]
                  else self.snapshot.batch_consume_queues)  # type: ignore[union-attr]
        q = queues.get((topic, qid))
        return list(q.files) if q is not None else []

    def _live_queue(self, kind: str, topic: str, queue_id: int) -> Any:
        """The live store's ConsumeQueue or BatchConsumeQueue (``kind``), None if it has none."""
        assert self.store is not None
        cqs = self.store.consume_queue_store
        if kind == CONSUME_QUEUE:
            return cqs.find_consume_queue(topic, queue_id, create=False)
        return cqs.find_batch_queue(topic, queue_id, create=False)

    def queue_state(self, queue: str = COMMITLOG) -> QueueState:
        files = self.mapped_files(queue)
        if self.store is None:
            return QueueState(queue, tuple(self._snapshot_file(queue, mf) for mf in files))
        last = len(files) - 1
        states = tuple(_live_file(mf, i == last) for i, mf in enumerate(files))
        committed = flushed = None
        pending: tuple[FileState, ...] = ()
        if queue == COMMITLOG:
            mfq = self.store.commit_log.mapped_file_queue
            committed, flushed = mfq.committed_where, mfq.flushed_where
            pending = self.pending_files()
        elif queue != INDEX:
            cq = self._live_queue(*_parse_queue(queue))
            if cq is not None:
                committed, flushed = cq.mapped_file_queue.committed_where, cq.mapped_file_queue.flushed_where
        return QueueState(queue, states, committed, flushed, pending, live=True)

    def pending_files(self) -> tuple[FileState, ...]:
        """CommitLog files filed with the allocate service and not handed out yet."""
        if self.store is None:
            return ()
        in_queue = {mf.name for mf in self.store.commit_log.mapped_file_queue.mapped_files}
        out = []
        for req in self.store.allocate_service.pending_requests():
            name = os.path.basename(req.file_path)
            if name in in_queue or not name.isdigit():
                continue
            out.append(FileState(name, int(name), req.file_size, 0, 0, 0, "pending"))
        return tuple(out)

    def _snapshot_file(self, queue: str, mf: MappedFile) -> FileState:
        from rmqlab.inspect.snapshot import scan_end

        if queue == COMMITLOG:
            pos = scan_end(mf.buffer)
        elif queue == INDEX:
            f = next((f for f in self.index_files() if f.mapped_file is mf), None)
            pos = item_position(f.hash_slot_num, f.index_count) if f is not None else mf.mapped_length
        else:
            kind, topic, qid = _parse_queue(queue)
            if kind == CONSUME_QUEUE:
                q = self.snapshot.consume_queues[(topic, qid)]  # type: ignore[union-attr]
                pos = len(q.valid_units(mf)) * CQ_STORE_UNIT_SIZE
            else:
                b = self.snapshot.batch_consume_queues[(topic, qid)]  # type: ignore[union-attr]
                pos = len(b.valid_units(mf)) * BCQ_STORE_UNIT_SIZE
        size = self._file_size(queue, mf)
        status = "full" if pos >= size else ("empty" if pos == 0 else "active")
        return FileState(mf.name, mf.file_from_offset, size, pos, pos, pos, status)

    def _file_size(self, queue: str, mf: MappedFile) -> int:
        snap = self.snapshot
        if snap is None:
            return mf.file_size
        if queue == COMMITLOG:
            return snap.commit_log_file_size
        if queue == INDEX:
            return mf.file_size
        if queue.startswith(_BCQ_PREFIX):
            return snap.batch_consume_queue_file_size
        return snap.consume_queue_file_size

    # ------------------------------------------------------------------ commit log records
    def scan_records(self, mf: MappedFile, pos: int = 0) -> tuple[list[RecordInfo], int, str]:
        """Records of one CommitLog file from byte ``pos`` up to its read position.

        Returns ``(records, next_pos, stop)``: ``stop`` is ``blank`` after an EOF record, ``end``
        at unwritten space or the read position, or the damage reason. Header fields only
        (topic, queue, tags, keys); bodies are decoded on demand by :meth:`read_record`.
        """
        end = self.read_end(mf)
        out: list[RecordInfo] = []
        stop = "end"
        try:
            for off, rec in iter_records(mf.buffer, pos, end, file=mf.name, base_offset=mf.file_from_offset):
                if isinstance(rec, BlankRecord):
                    out.append(RecordInfo(off, rec.size, "blank", mf.name))
                    pos = off - mf.file_from_offset + rec.size
                    stop = "blank"
                    break
                out.append(RecordInfo(off, rec.store_size, "message", mf.name, rec.topic, rec.queue_id,
                                      rec.queue_offset, rec.tags, " ".join(rec.keys)))
                pos = off - mf.file_from_offset + rec.store_size
        except RmqlabError as e:  # damage, or a record still being copied in: stop here
            stop = getattr(e, "reason", "") or str(e)
        return out, pos, stop

    def read_end(self, mf: MappedFile) -> int:
        """Where readable bytes of a CommitLog file end: its read position (live) or its length."""
        return mf.read_position if self.store is not None else mf.mapped_length

    def file_of(self, offset: int) -> MappedFile | None:
        for mf in self.mapped_files(COMMITLOG):
            if mf.file_from_offset <= offset < mf.file_from_offset + mf.file_size:
                return mf
        return None

    def commit_log_min_offset(self) -> int:
        """Where the CommitLog starts: its first file's offset (0 with no file)."""
        files = self.mapped_files(COMMITLOG)
        return files[0].file_from_offset if files else 0

    def read_record(self, offset: int) -> tuple[MessageRecord | BlankRecord | None, bytes]:
        """The record at ``offset`` (decoded, CRC compared) and its raw bytes; (None, b"") if none."""
        mf = self.file_of(offset)
        if mf is None:
            return None, b""
        pos = offset - mf.file_from_offset
        try:
            rec = decode_message(mf.buffer, pos, file=mf.name)
        except RmqlabError:
            return None, b""
        if isinstance(rec, MessageRecord):
            return rec, bytes(mf.buffer[pos : pos + rec.store_size])
        if isinstance(rec, BlankRecord):
            return rec, bytes(mf.buffer[pos : pos + 8])
        return None, b""

    # ------------------------------------------------------------------ consume queues
    def consume_queue_keys(self) -> list[tuple[str, int]]:
        if self.store is not None:
            return sorted((t, q) for t, q, _ in self.store.consume_queue_store.all_queues())
        return sorted(self.snapshot.consume_queues)  # type: ignore[union-attr]

    def cq_units(self, topic: str, queue_id: int) -> tuple[int, np.ndarray]:
        """``(first queue offset, units)`` as a copy (``CQ_UNIT_DTYPE``); pre-blank units included."""
        if self.store is not None:
            cq = self.store.consume_queue_store.find_consume_queue(topic, queue_id, create=False)
            if cq is None or not cq.mapped_file_queue.mapped_files:
                return 0, np.empty(0, CQ_UNIT_DTYPE)
            base = cq.mapped_file_queue.mapped_files[0].file_from_offset // CQ_STORE_UNIT_SIZE
            return base, np.array(cq.units(), copy=True)
        q = self.snapshot.consume_queues.get((topic, queue_id))  # type: ignore[union-attr]
        if q is None:
            return 0, np.empty(0, CQ_UNIT_DTYPE)
        base, units = q.units()
        return base, np.array(units, copy=True)

    def batch_queue_keys(self) -> list[tuple[str, int]]:
        """``(topic, queue_id)`` of every 5.x BatchConsumeQueue (none on 4.9.8)."""
        if self.store is not None:
            return sorted((t, q) for t, q, _ in self.store.consume_queue_store.all_batch_queues())
        return sorted(self.snapshot.batch_consume_queues)  # type: ignore[union-attr]

    def bcq_units(self, topic: str, queue_id: int) -> np.ndarray:
        """A batch queue's units, oldest first, as a copy (``BCQ_UNIT_DTYPE``: one 46-byte unit per
        CommitLog record, its queue offsets ``msg_base_offset .. + batch_size - 1``): what the
        engine holds (``BatchConsumeQueue.units``) or inspection reads (the valid units of each
        file, up to the first file not full of them)."""
        if self.store is not None:
            bcq = self.store.consume_queue_store.find_batch_queue(topic, queue_id, create=False)
            return bcq.units() if bcq is not None else np.empty(0, BCQ_UNIT_DTYPE)
        q = self.snapshot.batch_consume_queues.get((topic, queue_id))  # type: ignore[union-attr]
        if q is None:
            return np.empty(0, BCQ_UNIT_DTYPE)
        return q.units()[1].astype(BCQ_UNIT_DTYPE)  # a copy, big-endian (a concatenation of files is native)

    def cq_ext(self, topic: str, queue_id: int, units: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """``(resolved, tags_code)`` beside ``units`` (from :meth:`cq_units`) for the units whose tags
        code is a ConsumeQueueExt address, as the engine resolves them (a live store:
        ``ConsumeQueue.ext_tags_codes``) or inspection does (a snapshot: the ext files read
        read-only); None when no unit holds an address. ``resolved`` False: the address resolves
        to nothing (no ext run, or its unit is gone)."""
        codes = units["tags_code"].astype(np.int64) if len(units) else np.empty(0, np.int64)
        if not (codes <= MAX_ADDR).any():
            return None
        if self.store is not None:
            cq = self.store.consume_queue_store.find_consume_queue(topic, queue_id, create=False)
            if cq is not None:
                return cq.ext_tags_codes(codes)
        else:
            ext = self.snapshot.consume_queue_exts.get((topic, queue_id))  # type: ignore[union-attr]
            if ext is not None:
                found, tags, _ = ext.resolve(codes)
                return found, tags
        return np.zeros(len(codes), dtype=bool), np.zeros(len(codes), dtype=np.int64)

    def dispatch_state(self) -> dict[str, int] | None:
        """Reput progress of a live store: ``reput_from_offset``, ``max_offset``, ``behind_bytes``."""
        if self.store is None:
            return None
        reput = self.store.reput
        return {"reput_from_offset": reput.reput_from_offset, "max_offset": self.store.get_max_phy_offset(),
                "behind_bytes": reput.dispatch_behind_bytes()}

    # ------------------------------------------------------------------ index
    def index_files(self) -> list[IndexFile]:
        if self.store is not None:
            return list(self.store.index_service.index_files)
        try:
            return list(self.snapshot.index_files_opened())  # type: ignore[union-attr]
        except ConfigError:
            return []

    def index_walk(self, topic: str, key: str, file: IndexFile) -> list[WalkStep]:
        """``file.walk_chain(topic#key)``, each step checked against the message it points at."""
        full = index_key(topic, key)
        slot = index_key_hash(full) % file.hash_slot_num
        out = []
        for s in file.walk_chain(full):
            rec, _ = self.read_record(s.phy_offset) if s.hash_matches else (None, b"")
            msg = rec if isinstance(rec, MessageRecord) else None
            has = msg is not None and msg.topic == topic and (key in msg.keys or msg.uniq_key == key)
            out.append(WalkStep(s, slot, msg is not None, has, bool(s.hash_matches and s.time_in_window and not has)))
        return out

    # ------------------------------------------------------------------ memory store
    def memory_state(self) -> MemoryState:
        """Totals, threshold and per-queue offsets of the live store's memory store."""
        mem = self.store.memory_store if self.store is not None else None
        if mem is None:
            return MemoryState(False)
        queues = tuple(MemoryQueueState(q.topic, q.queue_id, q.min_offset, q.max_offset, q.held_bytes)
                       for q in mem.queue_stats())
        return MemoryState(True, mem.threshold, mem.message_total_size, mem.message_count, mem.evicted_count,
                           mem.evicted_bytes, queues)

    # ------------------------------------------------------------------ plans
    def recovery_plan(self) -> RecoveryPlan | None:
        """The plan the live store recovered with, or what recovery would do to the snapshot."""
        if self.store is not None:
            return self.store.recovery_plan
        return self.snapshot.explain_recovery()  # type: ignore[union-attr]

    def plan_cleanup(self, now_ms: int | None = None, disk_ratio: float | None = None) -> CleanupPlan:
        """The store's (or snapshot's) ``plan_cleanup`` at ``now_ms`` with the disk ``disk_ratio`` full."""
        if self.store is not None:
            return self.store.plan_cleanup(now_ms=now_ms, disk_ratio=disk_ratio)
        return self.snapshot.explain_cleanup(now=now_ms, disk_ratio=disk_ratio)  # type: ignore[union-attr]


def _parse_queue(queue: str) -> tuple[str, str, int]:
    """``(CONSUME_QUEUE or BATCH_CONSUME_QUEUE, topic, queue id)`` of a queue name."""
    kind, _, rest = queue.partition("/")
    if kind not in (CONSUME_QUEUE, BATCH_CONSUME_QUEUE) or not rest:
        raise ValueError(f"unknown queue {queue!r}: 'commitlog', 'index', 'consumequeue/<topic>/<id>' or "
                         f"'batchconsumequeue/<topic>/<id>'")
    topic, _, qid = rest.rpartition("/")
    return kind, topic, int(qid)


def _live_file(mf: MappedFile, last: bool) -> FileState:
    wrote = mf.wrote_position
    if wrote >= mf.file_size:
        status = "full"
    elif last:
        status = "active"
    else:
        status = "full" if wrote else "empty"  # rolled with a blank: positions stay below size
    return FileState(mf.name, mf.file_from_offset, mf.file_size, wrote, mf.committed_position,
                     mf.flushed_position, status)
