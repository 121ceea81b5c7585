"""Dispatch: the ReputMessageService turns CommitLog records into ConsumeQueue units and index keys.

It walks the CommitLog from ``reput_from_offset`` (spec §6.6): every valid record becomes a
``DispatchRequest`` handed to each ``CommitLogDispatcher`` (build consume queue, build index),
a blank record jumps to the next file, a damaged record with a known size is skipped, anything
else stops the round (a master also skips the rest of the data read from that file, as
RocketMQ's master does: :meth:`ReputMessageService._unparsable`). Listeners are told about
arriving messages so long-polling readers wake.

Pre-faulting the CommitLog ahead of its writer is not done here but by a service of its own
(``rmqlab.store.prefault``): a reput round shares the GIL with the writer and falls behind it.
"""

from __future__ import annotations

import logging
import struct
import threading
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from rmqlab.codec import flags
from rmqlab.codec.java_hash import java_hash, java_hash_ranges
from rmqlab.codec.multi_dispatch import dispatches_multi, multi_dispatch_pairs
from rmqlab.codec.names import is_lmq_topic, validate_topic
from rmqlab.codec.properties import decode_properties
from rmqlab.codec.scan import _byte_source, _properties
from rmqlab.codec.walk import DispatchRequest, batch_fields, check_message_and_return_size, new_dispatch_request
from rmqlab.codec.windows import byte_windows
from rmqlab.errors import InvalidTopic
from rmqlab.events import Dispatched, EventBus
from rmqlab.faults import crash_point, is_armed
from rmqlab.store.fast_walk import FastChecker, gather_dispatch_fields, property_values
from rmqlab.store.services import NAP_MS, IdleNap
from rmqlab.wakeups import Arrivals

if TYPE_CHECKING:
    from rmqlab.files.mapped_file import SelectMappedBufferResult
    from rmqlab.store.batch_consume_queue import BatchConsumeQueue
    from rmqlab.store.commit_log import CommitLog, DispatchHint
    from rmqlab.store.consume_queue_store import ConsumeQueueStore
    from rmqlab.store.index_service import IndexService
    from rmqlab.store.store_checkpoint import StoreCheckpoint

__all__ = [
    "BATCH_RECORDS",
    "CommitLogDispatcher",
    "CommitLogDispatcherBuildConsumeQueue",
    "CommitLogDispatcherBuildIndex",
    "DispatchBatch",
    "ReputMessageService",
]

_TX_MASK = 0xC
_HINT_HEAD = struct.Struct(">ii12xqq")  # TOTALSIZE, MAGICCODE, QUEUEOFFSET@20, PHYSICALOFFSET@28
_LONG = struct.Struct(">q")
_INT = struct.Struct(">i")
_CQ_TYPES = (flags.TRANSACTION_NOT_TYPE, flags.TRANSACTION_COMMIT_TYPE)
log = logging.getLogger(__name__)
BATCH_RECORDS = 4096  # records reput gathers before dispatching them together
REDISPATCH_BATCH = 1 << 14  # records recovery re-dispatches together
# Below this many records behind, reput dispatches one by one: a batch round has ~0.2 ms of
# fixed numpy cost (measured: 1 record 227 us batched vs 17 us alone; even at ~32 records), which
# a trickle of puts (SYNC_FLUSH producers, a notebook) would pay per record.
SMALL_ROUND_RECORDS = 32
SMALL_ROUND_BYTES = 32 * 1024  # the same, estimated from bytes when the writer left no hints
_SCHEDULE_RAW = flags.SCHEDULE_TOPIC.encode()
_HINT_DTYPE = np.dtype([("total", ">i4"), ("magic", ">i4"), ("_pad", "V12"), ("queue_offset", ">i8"),
                        ("phys", ">i8")])
assert _HINT_DTYPE.itemsize == _HINT_HEAD.size


@dataclass(eq=False)
class DispatchBatch:
    """The dispatch fields of ``n`` records in commit log order (offsets strictly increasing), as
    columns: what ``n`` DispatchRequests would carry. ``requests`` (only built when someone
    listens) are those DispatchRequests."""

    offset: np.ndarray
    size: np.ndarray
    tags_code: np.ndarray
    store_timestamp: np.ndarray
    queue_offset: np.ndarray
    sys_flag: np.ndarray
    queue_id: np.ndarray
    topic: Sequence[str]
    keys: Sequence[str | None]
    uniq_key: Sequence[str | None]
    requests: list[DispatchRequest] | None = None
    #: index keys already hashed from the stored bytes (record numbers, key hashes), for the
    #: records not in ``string_rows`` (whose ``keys``/``uniq_key`` are then None)
    items: tuple[np.ndarray, np.ndarray] | None = None
    string_rows: np.ndarray | None = None
    #: a topic number per record and the names (saves mapping ``topic`` strings to queues)
    topic_ids: tuple[np.ndarray, list[str]] | None = None

    def __len__(self) -> int:
        return len(self.offset)

    @classmethod
    def from_hints(cls, offsets: list[int], hints: list[DispatchHint]) -> DispatchBatch:
        """From hint-shaped tuples ``(size, queue_offset, store_ts, ts_pos, (topic, queue_id,
        tags_code, keys, uniq_key, sys_flag, prepared, properties))``; transposed at C speed."""
        return cls.from_hints_ts_pos(offsets, hints)[0]

    @classmethod
    def from_hints_ts_pos(cls, offsets: list[int], hints: list[DispatchHint]) -> tuple[DispatchBatch, np.ndarray]:
        """:meth:`from_hints` and the hints' store-timestamp positions: the columns the header
        check (:func:`_first_bad_header`) reads too, transposed once for both."""
        sizes, qoffs, tss, ts_pos, ds = zip(*hints, strict=True)
        topics, qids, tcs, keys, uniqs, sys_flags, _prep, _props = zip(*ds, strict=True)
        i64 = np.int64
        batch = cls(np.array(offsets, i64), np.array(sizes, i64), np.array(tcs, i64), np.array(tss, i64),
                    np.array(qoffs, i64), np.array(sys_flags, i64), np.array(qids, i64), topics, keys, uniqs)
        return batch, np.array(ts_pos, i64)


def _properties_of(raw: bytes | dict[str, str] | None) -> dict[str, str] | None:
    """A hint's properties as the DispatchRequest carries them: writers leave the record's
    properties bytes (decoded here exactly as ``check_message_and_return_size`` decodes them);
    requests turned back into rows (``_hint_of``) already hold the map."""
    if raw is None or raw.__class__ is dict:
        return raw  # type: ignore[return-value]
    return decode_properties(raw) if raw else None


def _request_of(offset: int, hint: DispatchHint) -> DispatchRequest:
    size, queue_offset, store_ts, _ts_pos, d = hint
    topic, queue_id, tags_code, keys, uniq_key, sys_flag, prepared, properties = d
    return new_dispatch_request(
        topic, queue_id, offset, size, tags_code, store_ts, queue_offset, keys, uniq_key,
        sys_flag, prepared, _properties_of(properties),
    )  # fmt: skip


def _hint_of(req: DispatchRequest) -> DispatchHint:
    return (req.msg_size, req.consume_queue_offset, req.store_timestamp, 0,
            (req.topic, req.queue_id, req.tags_code, req.keys, req.uniq_key, req.sys_flag,
             req.prepared_transaction_offset, req.properties))


def _first_bad_header(buf: memoryview, p: np.ndarray, offsets: np.ndarray, sizes: np.ndarray,
                      qoffs: np.ndarray, tss: np.ndarray, ts_pos: np.ndarray, v5: bool) -> int:
    """Index of the first record whose stored header contradicts the writer's columns
    (``_from_hint``'s checks: TOTALSIZE, magic, queue offset, physical offset, store timestamp;
    all records at once), or ``len(p)``. ``p``: positions in ``buf``, every record inside it."""
    u8 = np.frombuffer(buf, dtype=np.uint8)
    try:
        head = byte_windows(u8, _HINT_HEAD.size)[p].view(_HINT_DTYPE).ravel()
        stored_ts = byte_windows(u8, 8)[p + ts_pos].view(">i8").ravel()
        magic = head["magic"]
        ok = (
            (head["total"] == sizes) & (head["phys"] == offsets) & (head["queue_offset"] == qoffs)
            & (stored_ts == tss)
            & ((magic == flags.MESSAGE_MAGIC_CODE_V1) | ((magic == flags.MESSAGE_MAGIC_CODE_V2) & v5))
        )
        del head, stored_ts, magic
        bad = np.flatnonzero(~ok)
        return int(bad[0]) if len(bad) else len(p)
    finally:
        del u8


def _first_bad_hint(buf: memoryview, pos: list[int], offsets: list[int], hints: list[DispatchHint],
                    v5: bool) -> tuple[int, DispatchBatch]:
    """Index of the first hint the stored header contradicts (:func:`_first_bad_header`), or
    ``len(hints)``, and the hints as a DispatchBatch (transposed once, for the check and for
    dispatching them when all are good). Every record lies inside ``buf``."""
    batch, ts_pos = DispatchBatch.from_hints_ts_pos(offsets, hints)
    bad = _first_bad_header(buf, np.array(pos, np.int64), batch.offset, batch.size, batch.queue_offset,
                            batch.store_timestamp, ts_pos, v5)
    return bad, batch


def _from_hint(
    buf: memoryview, pos: int, limit: int, offset: int, hint: DispatchHint, v5: bool
) -> DispatchRequest | None:
    """The DispatchRequest of the record at ``pos`` (absolute ``offset``) built from what the
    writer recorded, if the stored header agrees with it (TOTALSIZE, magic, queue offset,
    physical offset, store timestamp); None means "parse the record instead".

    This is the same request ``check_message_and_return_size`` would return for the record the
    writer encoded (the writer only records fields it knows the parser reads back unchanged),
    so reput still walks the log offset by offset exactly as RocketMQ does; the hint only saves
    re-parsing properties that were built a moment ago.
    """
    if not _hint_matches(buf, pos, limit, offset, hint, v5):
        return None
    size, queue_offset, store_ts, _ts_pos, d = hint
    topic, queue_id, tags_code, keys, uniq_key, sys_flag, prepared, properties = d
    return new_dispatch_request(
        topic, queue_id, offset, size, tags_code, store_ts, queue_offset, keys, uniq_key,
        sys_flag, prepared, _properties_of(properties),
    )  # fmt: skip


def _hint_matches(buf: memoryview, pos: int, limit: int, offset: int, hint: DispatchHint, v5: bool) -> bool:
    """Whether the record at ``pos`` lies inside ``buf[:limit]`` and its stored header agrees
    with the writer's hint (TOTALSIZE, magic, queue offset, physical offset, store timestamp)."""
    size, queue_offset, store_ts, ts_pos, _d = hint
    if pos + size > limit:
        return False
    total, magic, stored_queue_offset, phys = _HINT_HEAD.unpack_from(buf, pos)
    return (
        total == size
        and phys == offset
        and stored_queue_offset == queue_offset
        and (magic == flags.MESSAGE_MAGIC_CODE_V1 or (v5 and magic == flags.MESSAGE_MAGIC_CODE_V2))
        and _LONG.unpack_from(buf, pos + ts_pos)[0] == store_ts
    )


class CommitLogDispatcher(Protocol):
    def dispatch(self, request: DispatchRequest) -> None: ...


class CommitLogDispatcherBuildConsumeQueue:
    """Appends a CQ unit for NOT and COMMIT transaction types (PREPARED/ROLLBACK never enter a CQ).

    With ``multi_dispatch`` (``enableMultiDispatch``), a record whose properties name extra
    queues and their offsets (``INNER_MULTI_DISPATCH``, ``INNER_MULTI_QUEUE_OFFSET``) also gets
    its unit in each, once its own unit is stored: ``multiDispatchLmqQueue`` (spec §3.2). The
    queue id is 0 for a ``%LMQ%`` name with ``lmq`` (``enableLmq``), else the record's; 5.x
    writes none for records of the schedule, timer and ``%RETRY%`` topics. Where
    RocketMQ's dispatcher throws and reput retries the record forever (an offset
    ``Long.parseLong`` rejects) or creates a directory outside ``consumequeue/`` (4.9.8, a name
    with a path separator), rmqlab writes no extra unit for that record or name and logs why.
    """

    def __init__(self, consume_queue_store: ConsumeQueueStore, checkpoint: StoreCheckpoint,
                 bus: EventBus, *, multi_dispatch: bool = False, lmq: bool = False,
                 rocketmq_version: str = "4.9.8", slave: bool = False) -> None:
        self.cq_store = consume_queue_store
        self.checkpoint = checkpoint
        # brokerRole SLAVE: putMessagePositionInfoWrapper also sets the checkpoint's
        # physicMsgTimestamp after each successful put (spec §3.2 step 6, §5.1)
        self.slave = slave
        self.bus = bus
        self.multi_dispatch = multi_dispatch
        self.lmq = lmq
        self.version = rocketmq_version

    def dispatch(self, req: DispatchRequest) -> None:
        if (req.sys_flag & _TX_MASK) not in _CQ_TYPES:
            return
        if self.cq_store.batch_store_path is not None:
            bcq = self.cq_store.batch_queue_for(req.topic, req.queue_id)
            if bcq is not None:
                self._dispatch_batch_cq(bcq, req)
                return
        stored = self.cq_store.put_message_position_info(
            req.topic, req.queue_id, req.commit_log_offset, req.msg_size, req.tags_code,
            req.consume_queue_offset, req.store_timestamp,
        )
        if stored:
            if self.slave:
                self.checkpoint.physic_msg_timestamp = req.store_timestamp
            self.checkpoint.logics_msg_timestamp = req.store_timestamp
        if self.bus.active:
            self.bus.publish(Dispatched(req.topic, req.queue_id, req.consume_queue_offset,
                                        req.commit_log_offset, req.msg_size, req.tags_code,
                                        req.store_timestamp))
        if stored and self.multi_dispatch and req.properties and dispatches_multi(req.topic, self.version):
            self._dispatch_multi(req)

    def _dispatch_batch_cq(self, bcq: BatchConsumeQueue, req: DispatchRequest) -> None:
        """5.x ``BatchConsumeQueue.putMessagePositionInfoWrapper``: one unit for the record, its
        msgBaseOffset and batch size from INNER_BASE / INNER_NUM (``batch_fields``); a record
        without them (a plain message sent to the topic) has msgBaseOffset -1 and gets no unit,
        as in 5.3.3 (logged)."""
        try:
            base, num = batch_fields(req.properties)
        except ValueError:  # (a record the parser would have failed: no unit)
            base, num = -1, 1
        stored = bcq.put_message_position_info_wrapper(req.commit_log_offset, req.msg_size, req.tags_code,
                                                       req.store_timestamp, base, num)
        if stored:
            if self.slave:
                self.checkpoint.physic_msg_timestamp = req.store_timestamp
            self.checkpoint.logics_msg_timestamp = req.store_timestamp
        if self.bus.active:
            self.bus.publish(Dispatched(req.topic, req.queue_id, base, req.commit_log_offset, req.msg_size,
                                        req.tags_code, req.store_timestamp))

    def _dispatch_multi(self, req: DispatchRequest) -> None:
        props = req.properties
        assert props is not None
        if flags.PROPERTY_INNER_MULTI_DISPATCH not in props:
            return
        pairs = multi_dispatch_pairs(props)
        if not pairs:
            if (props.get(flags.PROPERTY_INNER_MULTI_DISPATCH) or "").strip() and \
                    (props.get(flags.PROPERTY_INNER_MULTI_QUEUE_OFFSET) or "").strip():
                log.warning("record at %d: INNER_MULTI_DISPATCH %r / INNER_MULTI_QUEUE_OFFSET %r cannot be read "
                            "(different counts: RocketMQ logs it; an offset Long.parseLong rejects: RocketMQ's "
                            "reput retries the record forever); no multi-dispatch units",
                            req.commit_log_offset, props.get(flags.PROPERTY_INNER_MULTI_DISPATCH),
                            props.get(flags.PROPERTY_INNER_MULTI_QUEUE_OFFSET))
            return
        for name, queue_offset in pairs:
            queue_id = 0 if self.lmq and is_lmq_topic(name) else req.queue_id
            try:
                cq = self.cq_store.find_consume_queue(name, queue_id)
            except InvalidTopic as e:
                log.warning("record at %d: no multi-dispatch unit for queue %r: %s", req.commit_log_offset, name, e)
                continue
            assert cq is not None
            cq.put_message_position_info(req.commit_log_offset, req.msg_size, req.tags_code, queue_offset)
            if self.bus.active:
                self.bus.publish(Dispatched(name, queue_id, queue_offset, req.commit_log_offset, req.msg_size,
                                            req.tags_code, req.store_timestamp))


class CommitLogDispatcherBuildIndex:
    def __init__(self, index_service: IndexService, enabled: bool) -> None:
        self.index_service = index_service
        self.enabled = enabled

    def dispatch(self, req: DispatchRequest) -> None:
        crash_point("after_cq_put_before_index_put")
        if self.enabled:
            self.index_service.build_index(req)


class ReputMessageService:
    """Builds consume queues and the index behind the CommitLog. ``run_once`` dispatches all
    complete records between ``reput_from_offset`` and the CommitLog's max offset."""

    name = "reput"

    def __init__(
        self,
        commit_log: CommitLog,
        dispatchers: list[CommitLogDispatcher],
        *,
        rocketmq_version: str = "4.9.8",
        delay_level_table: dict[int, int] | None = None,
        master: bool = True,
        flushed_only: bool = False,
    ) -> None:
        self.commit_log = commit_log
        self.dispatchers = dispatchers
        self.version = rocketmq_version
        #: 5.x SYNC_FLUSH: dispatch ends at the flushed offset (:meth:`reput_end`)
        self.flushed_only = flushed_only
        self._cut = False  # this round's buffer ends at reput_end(), before its file's data does
        #: a master (brokerId 0) skips the rest of the buffer at a record it cannot parse; a
        #: slave stops there and tries again every round (:meth:`_unparsable`)
        self.master = master
        self.delay_level_table = delay_level_table or {}
        self.max_delay_level = max(self.delay_level_table, default=0)
        self.reput_from_offset = 0
        self.listeners: list[Callable[[DispatchRequest], None]] = []
        self.lock = threading.Lock()
        self.arrived = Arrivals()  # waited on by consumers and producers: see rmqlab.wakeups
        self.direct_records = 0  # records small rounds sent the direct way (no DispatchRequest)
        self.rounds = 0  # rounds finished: a producer waiting for dispatch tells a stuck reput by them
        self.nap = IdleNap()

    def interval_ms(self) -> float:
        # RocketMQ's reput sleeps 1 ms between rounds, always; here only while there is work
        # (an idle store's reput naps until the next put wakes it: ``IdleNap``)
        return NAP_MS if self.nap.napping else 1.0

    def dispatch_behind_bytes(self) -> int:
        return max(0, self.commit_log.get_max_offset() - self.reput_from_offset)

    def is_commit_log_available(self) -> bool:
        return self.reput_from_offset < self.reput_end()

    def reput_end(self) -> int:
        """Where dispatch stops: the CommitLog's max offset (4.9.8; 5.x ASYNC_FLUSH), or with
        ``flushed_only`` (5.x SYNC_FLUSH) its flushed offset. 5.x reads up to
        ``getConfirmOffset()``, which outside controller and duplication mode is
        ``isSyncDiskFlush() ? getFlushedWhere() : getMaxOffset()``: a consumer never sees a
        message that is not on disk yet."""
        if self.flushed_only:
            return min(self.commit_log.mapped_file_queue.flushed_where, self.commit_log.get_max_offset())
        return self.commit_log.get_max_offset()

    def _select(self, end: int) -> SelectMappedBufferResult | None:
        """The data from ``reput_from_offset`` to its file's read position, cut at ``end`` (5.x
        never dispatches a record that would end past its reput end offset)."""
        sel = self.commit_log.get_data(self.reput_from_offset)
        self._cut = False
        if sel is None or not self.flushed_only or sel.start_offset + sel.size <= end:
            return sel  # (the max offset: data a put added since the round began is read too, as before)
        sel.release()
        self._cut = True
        return self.commit_log.get_message(self.reput_from_offset, end - self.reput_from_offset)

    def do_dispatch(self, req: DispatchRequest) -> None:
        for d in self.dispatchers:
            d.dispatch(req)

    def run_once(self) -> int:
        """Dispatch everything available now; returns the number of records dispatched."""
        with self.lock:
            count = self._reput()
        self.rounds += 1
        if count:
            self.arrived.notify_all()
            self.nap.round(True)
        else:  # idle only once caught up (a record it cannot pass yet keeps it polling)
            self.nap.round(self.reput_from_offset < self.commit_log.get_max_offset())
        return count

    def _small_round(self) -> bool:
        """Too few records behind for a batch to pay off (see ``SMALL_ROUND_RECORDS``)."""
        hints = self.commit_log.dispatch_hints
        runs = self.commit_log.dispatch_runs
        if runs:
            n = len(hints) + len(runs)
            if n >= SMALL_ROUND_RECORDS:
                return False
            for run in list(runs.values()):  # a copy: the writer may add runs meanwhile
                n += len(run.sizes) - run.start - 1
            return n < SMALL_ROUND_RECORDS
        if hints:
            return len(hints) < SMALL_ROUND_RECORDS
        return self.commit_log.get_max_offset() - self.reput_from_offset < SMALL_ROUND_BYTES

    def batching(self) -> bool:
        """Whether records can be dispatched in batches: the two standard dispatchers, nobody
        subscribed to events and no crash point armed inside dispatch (each of those needs the
        per-record order of side effects). Records of BatchCQ topics are dispatched one by one
        even then (their units come from each record's INNER_BASE / INNER_NUM): a batch holding
        one goes the per-record way whole (:meth:`dispatch_batch`)."""
        ds = self.dispatchers
        if len(ds) != 2 or type(ds[0]) is not CommitLogDispatcherBuildConsumeQueue or ds[0].multi_dispatch:
            return False  # (multi-dispatch reads each record's properties: the per-record path)
        if ds[0].cq_store.ext_store_path is not None:
            return False  # ext units (tags code, store time) are written record by record
        if type(ds[1]) is not CommitLogDispatcherBuildIndex:
            return False
        bus = ds[0].bus
        idx_bus = ds[1].index_service._bus
        return not (bus.active or (idx_bus is not None and idx_bus.active)
                    or is_armed("after_cq_put_before_index_put") or is_armed("index_roll"))

    def dispatch_batch(self, batch: DispatchBatch) -> None:
        """Dispatch ``batch`` with the effect of ``do_dispatch`` per record, in bulk.

        Consume queues: the units of each queue are written together (``ConsumeQueue.put_units``,
        queues created in first-appearance order) and the checkpoint's logics timestamp is the
        store time of the last record whose unit was accepted. Index: ``build_index_batch``; when
        it must roll a file at record ``j`` the consume queues are first brought up to ``j``, so
        the checkpoint an index roll flushes holds what it holds with per-record dispatch.
        Needs :meth:`batching`; a topic or queue id the CQ store rejects sends the whole batch
        through the per-record path (which raises at that record, as before).
        """
        n = len(batch)
        if n == 0:
            return
        cq_disp: CommitLogDispatcherBuildConsumeQueue = self.dispatchers[0]  # type: ignore[assignment]
        idx_disp: CommitLogDispatcherBuildIndex = self.dispatchers[1]  # type: ignore[assignment]
        batch_topics = cq_disp.cq_store.batch_topic_names()
        if batch_topics and not batch_topics.isdisjoint(batch.topic):
            self._dispatch_each(batch.offset.tolist(), self.delay_level_table, self.max_delay_level)
            return
        tx = batch.sys_flag & _TX_MASK
        cq_rows = np.flatnonzero((tx == flags.TRANSACTION_NOT_TYPE) | (tx == flags.TRANSACTION_COMMIT_TYPE))
        try:
            groups = cq_disp.cq_store.group_rows(batch.topic, batch.queue_id, cq_rows, batch.topic_ids)
        except (InvalidTopic, ValueError):
            reqs = batch.requests if batch.requests is not None else self._requests(batch)
            for req in reqs:
                self.do_dispatch(req)
            return
        done = 0  # records [0, done) have their CQ units

        def cq_upto(j: int) -> None:
            nonlocal done
            if j < done:
                return
            best = -1
            for cq, rows in groups:
                a, b = np.searchsorted(rows, (done, j + 1))
                if a == b:
                    continue
                sel = rows[a:b]
                last = cq.put_units(batch.offset[sel], batch.size[sel], batch.tags_code[sel],
                                    batch.queue_offset[sel])
                if last >= 0:
                    best = max(best, int(sel[last]))
            if best >= 0:
                if cq_disp.slave:
                    cq_disp.checkpoint.physic_msg_timestamp = int(batch.store_timestamp[best])
                cq_disp.checkpoint.logics_msg_timestamp = int(batch.store_timestamp[best])
            done = j + 1

        if idx_disp.enabled:
            idx_disp.index_service.build_index_batch(
                batch.offset, batch.store_timestamp, batch.sys_flag, batch.topic, batch.keys, batch.uniq_key,
                before_roll=cq_upto, items=batch.items, string_rows=batch.string_rows,
            )
        cq_upto(n - 1)

    def _dispatch_each(self, offsets: list[int], table: dict[int, int], max_level: int) -> None:
        """``do_dispatch`` on the records at these CommitLog offsets (checked records, in order),
        each parsed in full from the CommitLog: the per-record way, for a batch holding a record
        of a BatchCQ topic."""
        cl = self.commit_log
        check = check_message_and_return_size
        for off in offsets:
            sel = cl.get_data(off)
            assert sel is not None, off
            try:
                _size, _ok, req = check(sel.buffer, 0, check_crc=False, read_body=False, rocketmq_version=self.version,
                                        delay_level_table=table, max_delay_level=max_level)
            finally:
                sel.release()
            assert req is not None, off
            self.do_dispatch(req)

    @staticmethod
    def _requests(batch: DispatchBatch) -> list[DispatchRequest]:
        """DispatchRequests for a batch built without them (the CQ fields and the index keys;
        no properties): enough for the dispatchers."""
        return [
            new_dispatch_request(batch.topic[i], int(batch.queue_id[i]), int(batch.offset[i]), int(batch.size[i]),
                                 int(batch.tags_code[i]), int(batch.store_timestamp[i]),
                                 int(batch.queue_offset[i]), batch.keys[i], batch.uniq_key[i],
                                 int(batch.sys_flag[i]), 0, None)
            for i in range(len(batch))
        ]

    def redispatch(self, buf: memoryview, base: int, positions: np.ndarray, delay_level_table: dict[int, int],
                   max_delay_level: int) -> None:
        """Dispatch the records at ``positions`` of one CommitLog file (validated by the recovery
        walk, in order), as ``do_dispatch`` on each would.

        In batches (:meth:`dispatch_batch`) when :meth:`batching` allows: fixed fields for all
        records with numpy; properties (TAGS, KEYS, UNIQ_KEY) are read only for records that
        can still change a consume queue or the index -- a record whose queue already ends at
        or past it and whose offset is below the last index file's end is only counted as a
        duplicate, as the per-record path would (RocketMQ re-dispatches everything and the
        puts skip what they have). Delayed (SCHEDULE_TOPIC) records are parsed one by one.
        """
        version = self.version
        check = check_message_and_return_size
        if not self.batching():
            for pos in positions.tolist():
                _size, _ok, req = check(buf, pos, check_crc=False, read_body=False, rocketmq_version=version,
                                        delay_level_table=delay_level_table, max_delay_level=max_delay_level)
                assert req is not None
                self.do_dispatch(req)
            return
        batch_topics = self.dispatchers[0].cq_store.batch_topic_names()  # type: ignore[attr-defined]
        for c0 in range(0, len(positions), REDISPATCH_BATCH):
            p = positions[c0 : c0 + REDISPATCH_BATCH]
            batch = self._batch_at(buf, base, p, delay_level_table, max_delay_level)
            if batch_topics and not batch_topics.isdisjoint(batch.topic):  # (with recovery's delay table)
                self._dispatch_each(batch.offset.tolist(), delay_level_table, max_delay_level)
            else:
                self.dispatch_batch(batch)

    def _batch_at(self, buf: memoryview, base: int, p: np.ndarray, table: dict[int, int], max_level: int
                  ) -> DispatchBatch:
        cq_disp: CommitLogDispatcherBuildConsumeQueue = self.dispatchers[0]  # type: ignore[assignment]
        idx_disp: CommitLogDispatcherBuildIndex = self.dispatchers[1]  # type: ignore[assignment]
        f = gather_dispatch_fields(buf, p)
        n = len(p)
        off = base + p
        size, qid, sys_flag, ts = f["size"], f["queue_id"], f["sys_flag"], f["store_ts"]
        u8 = np.frombuffer(buf, dtype=np.uint8)
        try:
            queue_offset = byte_windows(u8, 8)[p + 20].view(">i8").ravel().astype(np.int64)
        finally:
            del u8
        topic_names = [raw.decode("utf-8", errors="replace") for raw in f["topics"]]
        tid = f["topic_id"].astype(np.int64)
        topics = list(map(topic_names.__getitem__, tid.tolist()))
        # which records can still change something (bounds taken now only grow while dispatching)
        tx = sys_flag & _TX_MASK
        cq_type = (tx == flags.TRANSACTION_NOT_TYPE) | (tx == flags.TRANSACTION_COMMIT_TYPE)
        bound = np.full(n, -(1 << 62), dtype=np.int64)
        table_cq = cq_disp.cq_store.consume_queue_table
        pair = (tid << 32) | (qid & 0xFFFFFFFF)
        pairs, pair_of = np.unique(pair, return_inverse=True)
        pair_of = pair_of.reshape(-1)
        qbound = np.empty(len(pairs), dtype=np.int64)
        for k, key in enumerate(pairs.tolist()):
            q = key & 0xFFFFFFFF
            cq = table_cq.get(topic_names[key >> 32], {}).get(q - (1 << 32) if q >= 1 << 31 else q)
            qbound[k] = cq.max_physic_offset if cq is not None else -(1 << 62)
        bound = qbound[pair_of]
        index = idx_disp.index_service
        if idx_disp.enabled and index.message_index_enable:
            files = index._files
            idx_end = files[-1].end_phy_offset if files else 0
        else:
            idx_end = 1 << 62
        need = ~((~cq_type | (off + size <= bound)) & (off < idx_end))
        tags_code = np.zeros(n, dtype=np.int64)
        keys: list[str | None] = [None] * n
        uniq: list[str | None] = [None] * n
        rows = np.flatnonzero(need)
        batch = DispatchBatch(off, size, tags_code, ts, queue_offset, sys_flag, qid, topics, keys, uniq)
        if len(set(topic_names)) == len(topic_names):  # distinct raw names may decode alike
            batch.topic_ids = (tid, topic_names)
        if len(rows):
            want_tags = bool(np.any(cq_type[rows] & (off[rows] + size[rows] > bound[rows])))
            if self._queues_valid(topic_names, tid, qid, cq_type):
                rows = self._vector_rows(buf, p, rows, tid, topic_names, f, batch, want_tags)
            if len(rows):
                self._parse_rows(buf, p, rows, topics, tags_code, keys, uniq, table, max_level, f, want_tags)
        return batch

    @staticmethod
    def _queues_valid(topic_names: list[str], tid: np.ndarray, qid: np.ndarray, cq_type: np.ndarray) -> bool:
        """Whether every consume queue the batch will touch can exist (topic name and queue id
        as ``ConsumeQueue`` checks them); if not, the batch keeps every key as a string so the
        per-record fallback of :meth:`dispatch_batch` can rebuild exact requests."""
        if np.any(cq_type & (qid < 0)):
            return False
        for k in np.unique(tid[cq_type]).tolist():
            try:
                validate_topic(topic_names[k], max_length=255)
            except InvalidTopic:
                return False
        return True

    def _vector_rows(self, buf: memoryview, p: np.ndarray, rows: np.ndarray, tid: np.ndarray,
                     topic_names: list[str], f: dict[str, np.ndarray], batch: DispatchBatch, want_tags: bool
                     ) -> np.ndarray:
        """Hash the index keys (and the tags codes) of ``rows`` straight from the stored bytes
        (:func:`property_values`, :func:`java_hash_ranges`) into ``batch``; returns the rows
        that need the string path instead (unusual properties, SCHEDULE_TOPIC records)."""
        names = (b"KEYS", b"UNIQ_KEY", b"TAGS") if want_tags else (b"KEYS", b"UNIQ_KEY")
        props, fb, ranges = property_values(buf, f["props_pos"][rows], f["props_len"][rows], names)
        if _SCHEDULE_RAW in f["topics"]:
            fb |= np.array([f["topics"][t] == _SCHEDULE_RAW for t in tid[rows].tolist()], dtype=bool)
        ok = ~fb
        (ks, ke), (us, ue) = ranges[0], ranges[1]
        topic_h = np.array([java_hash(f"{t}#") for t in topic_names], dtype=np.int64)[tid[rows]]
        # UNIQ_KEY items, then the KEYS tokens (split on " ", empty tokens dropped)
        ur = np.flatnonzero(ok & (us >= 0))
        kr = np.flatnonzero(ok & (ks >= 0))
        spaces = np.flatnonzero(props == 32)
        k_at = np.searchsorted(ks[kr], spaces, side="right") - 1
        inside = (k_at >= 0) & (spaces < ke[kr][np.maximum(k_at, 0)]) if len(kr) else np.zeros(len(spaces), bool)
        sp = spaces[inside]
        t_start = np.sort(np.concatenate((ks[kr], sp + 1)))
        t_end = np.sort(np.concatenate((sp, ke[kr])))
        t_rec = kr[np.searchsorted(ks[kr], t_start, side="right") - 1] if len(kr) else np.empty(0, np.int64)
        nonempty = t_end > t_start
        t_start, t_end, t_rec = t_start[nonempty], t_end[nonempty], t_rec[nonempty]
        rec = np.concatenate((ur, t_rec))
        a = np.concatenate((us[ur], t_start))
        b = np.concatenate((ue[ur], t_end))
        kind = np.concatenate((np.zeros(len(ur), np.int64), np.ones(len(t_rec), np.int64)))
        order = np.lexsort((a, kind, rec))
        rec, a, b = rec[order], a[order], b[order]
        h = java_hash_ranges(props, a, b, topic_h[rec])
        batch.items = (rows[rec], np.where(h == -(2**31), 0, np.abs(h)))
        if want_tags:
            ts_, te_ = ranges[2]
            tr = np.flatnonzero(ok & (ts_ >= 0))
            batch.tags_code[rows[tr]] = java_hash_ranges(props, ts_[tr], te_[tr], np.zeros(len(tr), np.int64))
        string_rows = rows[fb]
        batch.string_rows = string_rows
        return string_rows

    def _parse_rows(self, buf: memoryview, p: np.ndarray, rows: np.ndarray, topics: list[str],
                    tags_code: np.ndarray, keys: list[str | None], uniq: list[str | None],
                    table: dict[int, int], max_level: int, f: dict[str, np.ndarray], want_tags: bool) -> None:
        """Fill TAGS code, KEYS and UNIQ_KEY of the records ``rows`` (what the parser's request
        holds) into ``tags_code``/``keys``/``uniq``."""
        pl_pos = f["props_pos"][rows]
        pl = f["props_len"][rows]
        src = _byte_source(buf)
        raws = list(map(src.__getitem__, map(slice, pl_pos.tolist(), (pl_pos + pl).tolist())))
        if want_tags:
            tg, ky, uk, _ = _properties(raws, False)
            codes: dict[str | None, int] = {t: java_hash(t) for t in set(tg) if t}
            codes[None] = codes[""] = 0
            tags_code[rows] = np.fromiter(map(codes.__getitem__, tg), dtype=np.int64, count=len(tg))
        else:  # every unit is already in its queue: the tags code is never read
            _, ky, uk, _ = _properties(raws, False, with_tags=False)
        if len(rows) == len(keys):
            keys[:] = ky
            uniq[:] = uk
        else:
            for j, i in enumerate(rows.tolist()):
                keys[i] = ky[j]
                uniq[i] = uk[j]
        if _SCHEDULE_RAW in f["topics"]:  # a delayed record's tags code may be a due time: parse those
            check = check_message_and_return_size
            for i in rows.tolist():
                if topics[i] == flags.SCHEDULE_TOPIC:
                    _size, _ok, req = check(buf, int(p[i]), check_crc=False, read_body=False,
                                            rocketmq_version=self.version, delay_level_table=table,
                                            max_delay_level=max_level)
                    assert req is not None
                    tags_code[i], keys[i], uniq[i] = req.tags_code, req.keys, req.uniq_key

    def _reput(self) -> int:
        batching = self.batching()
        if not batching or self._small_round():
            return self._reput_one_by_one(batching)
        cl = self.commit_log
        count = 0
        min_offset = cl.get_min_offset()
        if self.reput_from_offset < min_offset:
            self.reput_from_offset = min_offset
        end = self.reput_end()
        check = check_message_and_return_size
        hints = cl.dispatch_hints
        runs = cl.dispatch_runs
        v5 = self.version != "4.9.8"
        while self.reput_from_offset < end:
            sel = self._select(end)
            if sel is None:
                break
            try:
                buf, limit, pos = sel.buffer, sel.size, 0
                if limit <= 0:
                    return count
                base = self.reput_from_offset  # absolute offset of buf[0]
                # records without a hint: certified in bulk (numpy checks) and read as columns,
                # unless a listener wants the exact DispatchRequest (then they are parsed)
                fc = None if self.listeners else FastChecker(v5, False, keep_positions=True, batch=BATCH_RECORDS)
                while pos < limit:
                    if runs and self.reput_from_offset in runs:  # column batches: their own DispatchBatch
                        got = self._run_round(buf, base, limit, v5)
                        count += got
                        pos = self.reput_from_offset - base
                        if got:
                            continue
                    # gather: hinted runs (checked against the headers in bulk) and parsed records
                    offsets: list[int] = []
                    rows: list[DispatchHint] = []
                    starts: list[int] = []
                    off = self.reput_from_offset
                    stop = ""  # "blank" | "end" once the record at ``pos`` ends the round
                    certified: np.ndarray | None = None
                    hinted: DispatchBatch | None = None  # rows[:len(hinted)] transposed, checked good
                    while pos < limit and len(rows) < BATCH_RECORDS:
                        first = len(rows)
                        if hints:
                            pop, add_row, add_off, add_start = hints.pop, rows.append, offsets.append, starts.append
                            for _ in range(BATCH_RECORDS - first):
                                hint = pop(off, None)
                                if hint is None:
                                    break
                                size = hint[0]
                                if pos + size > limit:
                                    break
                                add_off(off)
                                add_row(hint)
                                add_start(pos)
                                pos += size
                                off += size
                        if len(rows) > first:
                            bad, checked = _first_bad_hint(buf, starts[first:], offsets[first:], rows[first:], v5)
                            bad += first
                            if first == 0:  # the usual round: the batch is the checked one
                                hinted = checked
                            if bad < len(rows):
                                for o, h in zip(offsets[bad + 1 :], rows[bad + 1 :], strict=True):
                                    hints[o] = h  # not consumed: the walk will meet them again
                                pos, off = starts[bad], offsets[bad]
                                del offsets[bad:], rows[bad:], starts[bad:]
                                hinted = None  # rows changed: transposed again at the end
                            else:
                                continue
                        if pos >= limit or len(rows) >= BATCH_RECORDS or (rows and runs and off in runs):
                            break
                        # a run without hints (not a lone record between hinted ones: peek at the next)
                        if fc is not None and limit - pos >= 8 and (
                            not (hints or runs) or ((nxt := off + _INT.unpack_from(buf, pos)[0]) not in hints
                                                    and nxt not in runs)
                        ):
                            if rows:
                                break  # dispatch what is gathered first
                            new_pos, k, _nbytes, _last = fc.advance(buf, pos, base)
                            if k:
                                certified = fc.positions(base)
                                fc.accepted.clear()
                                pos, off = new_pos, base + new_pos
                                break
                        size, ok, req = check(
                            buf, pos, check_crc=False, read_body=False, rocketmq_version=self.version,
                            delay_level_table=self.delay_level_table, max_delay_level=self.max_delay_level,
                        )
                        if ok and size > 0 and req is not None:
                            offsets.append(off)
                            rows.append(_hint_of(req))
                            starts.append(pos)
                            pos += size
                            off += size
                        elif ok and size == 0:
                            stop = "blank"
                            break
                        elif size > 0:  # damaged but sized: skip it, like RocketMQ
                            pos += size
                            off += size
                        else:
                            stop = "end"
                            break
                    if certified is not None:  # records the bulk checks vouch for: read as columns
                        for c0 in range(0, len(certified), REDISPATCH_BATCH):
                            self.dispatch_batch(self._batch_at(buf, base, certified[c0 : c0 + REDISPATCH_BATCH],
                                                               self.delay_level_table, self.max_delay_level))
                        count += len(certified)
                        certified = None
                    if rows:
                        batch = (hinted if hinted is not None and len(hinted) == len(rows)
                                 else DispatchBatch.from_hints(offsets, rows))
                        listeners = self.listeners
                        if listeners:
                            batch.requests = [_request_of(o, h) for o, h in zip(offsets, rows, strict=True)]
                        self.dispatch_batch(batch)
                        count += len(rows)
                        if listeners:
                            for req in batch.requests or ():
                                for listener in listeners:
                                    listener(req)
                    self.reput_from_offset = off
                    if stop == "blank":  # the rest of this file is filler
                        self.reput_from_offset = cl.roll_next_file(self.reput_from_offset)
                        break
                    if stop == "end":
                        self._unparsable(base + limit)
                        return count
            finally:
                sel.release()
        return count

    def _unparsable(self, buffer_end: int) -> None:
        """The round met a record the parser fails without a size (``DispatchRequest(-1, false)``:
        bad magic, lengths past the buffer, an INNER_NUM / INNER_BASE ``parseShort`` /
        ``parseLong`` rejects...) at ``reput_from_offset``. ``ReputMessageService.doReput`` (4.9.8
        and 5.x alike) ends the round there; on a master (``brokerId == MASTER_ID``, or DLedger)
        it also logs "[BUG]dispatch message to consume queue error" and moves the reput offset
        by ``result.getSize() - readSize``: to ``buffer_end``, the end of the data read from that
        file, so the record and every record after it up to there are never dispatched. A slave
        keeps the offset and meets the record again next round. A record the round's ``end``
        cuts (5.x SYNC_FLUSH: not flushed whole yet) is not skipped: the round just ends there."""
        if self.master and not self._cut:
            log.error("[BUG]dispatch message to consume queue error, COMMITLOG OFFSET: %d (a record the parser "
                      "fails: a master skips to %d, the end of the data read from that file)",
                      self.reput_from_offset, buffer_end)
            self.reput_from_offset = buffer_end

    def _run_round(self, buf: memoryview, base: int, limit: int, v5: bool) -> int:
        """Dispatch the column batches' runs (``CommitLog.dispatch_runs``) that follow each
        other from ``reput_from_offset`` inside ``buf[:limit]`` (``buf[0]`` at ``base``), up to
        ``BATCH_RECORDS`` records, as one DispatchBatch built from their columns. Every record's
        stored header is checked against its hint first (as ``_first_bad_hint``, all at once):
        the records before the first it contradicts are dispatched, that record's hint is
        dropped (the walk parses it) and the rest go back, as does what did not fit. Returns
        the records dispatched; ``reput_from_offset`` is the next record's."""
        runs = self.commit_log.dispatch_runs
        off = self.reput_from_offset
        end = base + limit
        segs: list[tuple[Any, int, int]] = []
        offs: list[int] = []
        sizes: list[int] = []
        qoffs: list[int] = []
        tss: list[int] = []
        tps: list[int] = []
        tcs: list[int] = []
        sfs: list[int] = []
        qids: list[int] = []
        topics: list[str] = []
        keys: list[str | None] = []
        uniqs: list[str | None] = []
        total = 0
        while total < BATCH_RECORDS:
            run = runs.pop(off, None)
            if run is None:
                break
            i, n, ro = run.start, len(run.sizes), run.offsets
            k = bisect_right(ro, end, i, min(n, i + BATCH_RECORDS - total) + 1) - 1  # ro[k]: record k-1's end
            if k <= i:
                runs[off] = run
                break
            m = k - i
            offs += ro[i:k]
            sizes += run.sizes[i:k]
            qoffs += range(run.q0 + i, run.q0 + k)
            tss += repeat(run.now, m)
            tps += repeat(run.ts_pos, m)
            tcs += run.tags[i:k]
            sfs += repeat(run.sys_flag, m)
            qids += repeat(run.queue_id, m)
            topics += repeat(run.topic, m)
            keys += run.keys[i:k]
            uniqs += run.uniqs[i:k]
            segs.append((run, i, k))
            total += m
            off = ro[k]
            if k < n:
                break
        if not segs:
            return 0
        i64 = np.int64
        a_off = np.array(offs, i64)
        a_size = np.array(sizes, i64)
        a_q = np.array(qoffs, i64)
        a_ts = np.array(tss, i64)
        bad = _first_bad_header(buf, a_off - base, a_off, a_size, a_q, a_ts, np.array(tps, i64), v5)
        if bad < total:
            c = 0
            for x, (run, i, k) in enumerate(segs):
                if c + k - i > bad:
                    j = i + bad - c  # its hint is dropped: the walk parses the record
                    back = [(run, j + 1)] + [(r, ri) for r, ri, _k in segs[x + 1 :]]
                    segs[x:] = [(run, i, j)]
                    break
                c += k - i
            next_off = offs[bad]
        else:
            run, i, k = segs[-1]
            back = [(run, k)]
            next_off = off
        for run, start in back:
            if start < len(run.sizes):
                run.start = start
                runs[run.offsets[start]] = run
        if bad:
            batch = DispatchBatch(a_off[:bad], a_size[:bad], np.array(tcs[:bad], i64), a_ts[:bad], a_q[:bad],
                                  np.array(sfs[:bad], i64), np.array(qids[:bad], i64), topics[:bad], keys[:bad],
                                  uniqs[:bad])  # fmt: skip
            listeners = self.listeners
            if listeners:
                batch.requests = [_request_of(run.offsets[j], run.hint(j)) for run, i, k in segs for j in range(i, k)]
            self.dispatch_batch(batch)
            if listeners:
                for req in batch.requests or ():
                    for listener in listeners:
                        listener(req)
        self.reput_from_offset = next_off
        return bad

    def _reput_one_by_one(self, batching: bool) -> int:
        """Dispatch record by record (small rounds, listeners, custom dispatchers, armed points).

        A hinted record with the two standard dispatchers and nobody listening (``batching()``)
        goes straight to the CQ store and ``IndexService._build_one`` with the hint's fields:
        what the dispatchers would do with its DispatchRequest, without building the request or
        decoding its properties (which neither reads). Measured on rounds of 8 records, thread
        CPU, best of 6: ~10.2 -> ~7.6 us per record, which a SYNC_FLUSH run pays for every message;
        with the index/CQ fast paths and the hint check inlined, ~5.3 us.
        """
        cl = self.commit_log
        count = 0
        min_offset = cl.get_min_offset()
        if self.reput_from_offset < min_offset:
            self.reput_from_offset = min_offset
        end = self.reput_end()
        check = check_message_and_return_size
        listeners = self.listeners
        dispatchers = self.dispatchers
        hints = cl.dispatch_hints
        runs = cl.dispatch_runs
        v5 = self.version != "4.9.8"
        direct = bool(hints or runs) and not listeners and batching
        if direct:
            cq_disp: CommitLogDispatcherBuildConsumeQueue = dispatchers[0]  # type: ignore[assignment]
            idx_disp: CommitLogDispatcherBuildIndex = dispatchers[1]  # type: ignore[assignment]
            # ConsumeQueueStore.put_message_position_info, its queue lookup inlined
            cq_table = cq_disp.cq_store.consume_queue_table
            cq_find = cq_disp.cq_store.find_consume_queue
            checkpoint = cq_disp.checkpoint
            slave = cq_disp.slave
            index_service = idx_disp.index_service
            build = index_service._build_one if idx_disp.enabled and index_service.message_index_enable else None
            batch_topics = cq_disp.cq_store.batch_topic_names()  # their records: the request way
            head_unpack, long_unpack = _HINT_HEAD.unpack_from, _LONG.unpack_from
            magic_v1, magic_v2 = flags.MESSAGE_MAGIC_CODE_V1, flags.MESSAGE_MAGIC_CODE_V2
        while self.reput_from_offset < end:
            sel = self._select(end)
            if sel is None:
                break
            try:
                buf, limit, pos = sel.buffer, sel.size, 0
                if limit <= 0:
                    return count
                buffer_end = self.reput_from_offset + limit
                while pos < limit:
                    hint = hints.pop(self.reput_from_offset, None) if hints else None
                    if hint is None and runs:  # a column batch's run: its next record, the rest put back
                        run = runs.pop(self.reput_from_offset, None)
                        if run is not None:
                            i = run.start
                            hint = run.hint(i)
                            if i + 1 < len(run.sizes):
                                run.start = i + 1
                                runs[run.offsets[i + 1]] = run
                    # the direct way (_hint_matches inlined: the stored header agrees with the hint)
                    if direct and hint is not None and pos + hint[0] <= limit and not (
                            batch_topics and hint[4][0] in batch_topics):
                        off = self.reput_from_offset
                        size, queue_offset, store_ts, ts_pos, d = hint
                        total, magic, stored_queue_offset, phys = head_unpack(buf, pos)
                        if (
                            total == size
                            and phys == off
                            and stored_queue_offset == queue_offset
                            and (magic == magic_v1 or (v5 and magic == magic_v2))
                            and long_unpack(buf, pos + ts_pos)[0] == store_ts
                        ):
                            topic, queue_id, tags_code, keys, uniq_key, sys_flag, _prepared, _properties = d
                            if (sys_flag & _TX_MASK) in _CQ_TYPES:
                                queues = cq_table.get(topic)
                                cq = queues.get(queue_id) if queues is not None else None
                                if cq is None:
                                    cq = cq_find(topic, queue_id)
                                    assert cq is not None
                                if cq.put_message_position_info(off, size, tags_code, queue_offset):
                                    if slave:
                                        checkpoint.physic_msg_timestamp = store_ts
                                    checkpoint.logics_msg_timestamp = store_ts
                            if build is not None:
                                build(off, sys_flag, topic, store_ts, uniq_key, keys)
                            pos += size
                            self.reput_from_offset = off + size
                            count += 1
                            self.direct_records += 1
                            continue
                    req = None if hint is None else _from_hint(buf, pos, limit, self.reput_from_offset, hint, v5)
                    if req is not None:
                        size, ok = req.msg_size, True
                    else:
                        size, ok, req = check(
                            buf, pos, check_crc=False, read_body=False, rocketmq_version=self.version,
                            delay_level_table=self.delay_level_table, max_delay_level=self.max_delay_level,
                        )
                    if ok and size > 0 and req is not None:
                        for d in dispatchers:
                            d.dispatch(req)
                        for listener in listeners:
                            listener(req)
                        pos += size
                        self.reput_from_offset += size
                        count += 1
                    elif ok and size == 0:  # blank: the rest of this file is filler
                        self.reput_from_offset = cl.roll_next_file(self.reput_from_offset)
                        break
                    elif size > 0:  # damaged but sized: skip it, like RocketMQ
                        pos += size
                        self.reput_from_offset += size
                    else:
                        self._unparsable(buffer_end)
                        return count
            finally:
                sel.release()
        return count

    def wait_for_arrival(self, timeout_s: float) -> bool:
        """Block until new records were dispatched or ``timeout_s`` passes (long polling)."""
        return self.arrived.wait(timeout_s)
