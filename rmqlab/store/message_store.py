"""MessageStore: the facade over CommitLog, ConsumeQueues, IndexService and services.

It mirrors RocketMQ's ``DefaultMessageStore``: ``load()`` (abort check, CommitLog, consume
queues, checkpoint, index, recovery), ``start()`` (reput until caught up, topic-queue table,
services, ``abort`` created), ``shutdown()`` (services stopped, everything flushed, checkpoint
written, ``abort`` removed when all is dispatched). Reads and writes keep RocketMQ's semantics:
``get_message`` statuses and ``next_begin_offset``, ``query_message`` by index, offsets by time.

Unlike RocketMQ, the ``lock`` file is taken before recovery (recovery truncates files, so a
second writer must be refused before it can cut anything).

Services run in background threads (``threaded=True``) or only when ``step()`` is called.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from rmqlab import faults
from rmqlab.clock import Clock, SystemClock
from rmqlab.codec.batch import MessageBatch
from rmqlab.codec.consume_queue_unit import MAX_ADDR
from rmqlab.codec.flags import (
    BLANK_MAGIC_CODE,
    BORNHOST_V6_FLAG,
    INNER_BATCH_FLAG,
    PROPERTY_INNER_MULTI_DISPATCH,
    PROPERTY_INNER_NUM,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    SCHEDULE_TOPIC,
    TIMER_TOPIC,
)
from rmqlab.codec.message import PHYSICAL_OFFSET_POSITION, MessageRecord, decode_message, store_timestamp_position
from rmqlab.codec.names import (
    BATCH_CONSUME_QUEUE_DIR,
    COMPACTION_DIR,
    CONSUME_QUEUE_EXT_DIR,
    is_lmq_topic,
    is_rocksdb_listing,
    is_system_topic,
)
from rmqlab.codec.scan import header_hop
from rmqlab.codec.walk import check_message_and_return_size
from rmqlab.config import MessageStoreConfig
from rmqlab.errors import DiskFull, InvalidArgument, InvalidTopic, NotAStore, RmqlabError
from rmqlab.events import EventBus, RecoveryStep
from rmqlab.faults import crash_point
from rmqlab.files.allocate_mapped_file_service import AllocateMappedFileService
from rmqlab.files.fs import DiskUsageProbe, FileLock, dledger_commit_log
from rmqlab.files.transient_store_pool import TransientStorePool
from rmqlab.store.abort_file import AbortFile
from rmqlab.store.args import int_arg, queue_args, str_arg
from rmqlab.store.cleanup import CleanCommitLogService, CleanConsumeQueueService, CleanupPlan
from rmqlab.store.commit_log import CommitLog
from rmqlab.store.consume_queue_store import ConsumeQueueStore, batch_queues_under_v4
from rmqlab.store.dispatch import (
    CommitLogDispatcherBuildConsumeQueue,
    CommitLogDispatcherBuildIndex,
    ReputMessageService,
)
from rmqlab.store.fast_walk import FastChecker
from rmqlab.store.flush import (
    CommitRealTimeService,
    FlushConsumeQueueService,
    FlushRealTimeService,
    GroupCommitRequest,
    GroupCommitService,
)
from rmqlab.store.index_service import IndexService
from rmqlab.store.memory_store import MemoryMessageStore
from rmqlab.store.message import BAD_FIELD_ERRORS, Message, refuse_bad_fields
from rmqlab.store.message_filter import MessageFilter
from rmqlab.store.prefault import CommitLogPrefaultService
from rmqlab.store.recovery import (
    CommitLogFileView,
    RecoveryPlan,
    index_end_past_log,
    note_ext_min_correction,
    note_ext_recovery,
    note_units_past_log,
    plan_recovery,
    written_by_v5_text,
)
from rmqlab.store.results import (
    GetMessageResult,
    GetMessageStatus,
    PutMessageResult,
    PutMessageStatus,
    QueryMessageResult,
    SharedSelection,
    StoredMessage,
)
from rmqlab.store.schedule import ScheduleMessageService
from rmqlab.store.services import Service, ServiceRunner, StepRunner, ThreadedRunner
from rmqlab.store.store_checkpoint import StoreCheckpoint
from rmqlab.store.store_stats import StoreStats, StoreStatsService
from rmqlab.store.timer_store import TimerMessageStore
from rmqlab.store.topic_config import BATCH_CQ, QUEUE_TYPE_ATTRIBUTE, TopicConfig, TopicConfigManager

log = logging.getLogger(__name__)


if TYPE_CHECKING:
    from rmqlab.files.mapped_file import SelectMappedBufferResult

__all__ = ["MessageStore"]

_perf_ns = time.perf_counter_ns
_PUT_OK = PutMessageStatus.PUT_OK
_LONG_MAX = 2**63 - 1
_LONG_MIN = -(2**63)
_CQ_UNIT = 20
_MAX_ADDR = MAX_ADDR  # a tags code at or below it is a ConsumeQueueExt address
_CQ_UNIT_STRUCT = struct.Struct(">qiq")  # commit log offset, size, tags code
_new_object = object.__new__  # StoredMessage built slot by slot in _scan (no __init__ call per message)
_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")
_HEAD_CHECK = PHYSICAL_OFFSET_POSITION + 8
_INNER_BATCH = INNER_BATCH_FLAG
_INNER_NUM = PROPERTY_INNER_NUM
_BCQ_UNIT = 46
_MAX_PULL_MSG_SIZE = 128 * 1024 * 1024  # 5.x DefaultMessageStore.MAX_PULL_MSG_SIZE


def _java_long(x: int) -> int:
    """Wrap to a signed 64-bit value, as Java ``long`` arithmetic does."""
    return ((x + (1 << 63)) & ((1 << 64) - 1)) - (1 << 63)


def _total_physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 * 1024**3


@dataclass(frozen=True)
class StoreStatus:
    """Lifecycle flags, as RocketMQ's RunningFlags reports them."""

    loaded: bool
    started: bool
    shutdown: bool
    writeable: bool
    last_exit_ok: bool


class _StoreTimeReader:
    """``CommitLog.pickup_store_timestamp`` for the ~15 probes of one by-time binary search.

    Same answers, without the per-probe costs: the min offset is taken once per search (the
    caller's), the max offset is re-read only when a probe would pass the one already read
    (it only grows), and each CommitLog file is looked up and held once per search instead of
    once per probe (released by :meth:`close`). A probe too short to hold SYSFLAG and the store
    timestamp, or one the cached file does not cover, goes to the exact method.
    """

    __slots__ = ("_cl", "_end", "_exact", "_file", "_file_size", "_held", "_max", "_min", "_start")

    def __init__(self, cl: CommitLog, cl_min: int) -> None:
        self._cl = cl
        self._exact = cl.pickup_store_timestamp
        self._min = cl_min
        self._max = cl.get_max_offset()
        self._file_size = cl.file_size
        self._file: Any = None  # the held file probes hit last, and its [start, end) range
        self._start = self._end = 0
        self._held: list[Any] = []

    def __call__(self, offset: int, size: int) -> int:
        if offset < self._min:
            return -1
        if offset + size > self._max:
            self._max = self._cl.get_max_offset()
            if offset + size > self._max:
                return -1
        if size < 76:  # 68 + 8: the store timestamp may lie past the record; exact rules decide
            return self._exact(offset, size)
        mf = self._file
        if mf is None or not self._start <= offset < self._end:
            mf = self._cl.mapped_file_queue.find_mapped_file_by_offset(offset, offset == 0)
            if mf is None:
                return -1
            start = mf.file_from_offset
            if not start <= offset < start + self._file_size:
                return self._exact(offset, size)
            if mf not in self._held:
                if not mf.hold():  # being destroyed
                    return -1
                self._held.append(mf)
            self._file, self._start, self._end = mf, start, start + self._file_size
        pos = offset - self._start
        if pos + size > mf.read_position:
            return -1
        buf = mf.buffer
        return _LONG.unpack_from(buf, pos + (68 if _INT.unpack_from(buf, pos + 36)[0] & BORNHOST_V6_FLAG else 56))[0]

    def close(self) -> None:
        held, self._held, self._file = self._held, [], None
        for mf in held:
            mf.release()


def _size_hint(err: object, field: str) -> str:
    """What to set when every file of a directory has one length the config does not expect
    (the usual cause: a store written with another size opened with the defaults)."""
    size = getattr(err, "uniform_size", None)
    if size is None:
        return ""
    return f"; a store written with that size opens with MessageStoreConfig({field}={size})"


#: topics 4.9.8's cleanUnusedTopic never deletes (besides LMQ topics)
_KEPT_UNUSED_V4 = frozenset({SCHEDULE_TOPIC, "RMQ_SYS_TRANS_OP_HALF_TOPIC"})


class MessageStore:
    """A RocketMQ store directory opened for writing. Use :meth:`open`.

    Thread-safety: puts are serialised by the CommitLog's put lock; reads may run concurrently
    with puts and services.
    """

    def __init__(
        self,
        config: MessageStoreConfig,
        *,
        clock: Clock | None = None,
        bus: EventBus | None = None,
        threaded: bool = True,
        disk_probe: DiskUsageProbe | None = None,
    ) -> None:
        self.config = config
        self.disk_probe = disk_probe  # usedPercent(path) for cleanup; None: the real disk
        self.root = config.store_path_root_dir
        self.clock: Clock = clock or SystemClock()
        self.bus = bus or EventBus()
        self.runner: ServiceRunner = ThreadedRunner() if threaded else StepRunner()
        self.threaded = threaded
        # producers wait for a lagging dispatch (threaded only: stepped, step() dispatches)
        self._dispatch_bound = config.max_dispatch_behind_bytes if threaded else 0
        self._puts_unchecked = 0  # single puts since the last look at the dispatch lag
        self._stalled_at = -1  # reput offset at which a wait gave up (reput not moving)
        self.dispatch_waits = 0  # times producers waited for dispatch to catch up
        os.makedirs(self.root, exist_ok=True)
        # RocketMQ's constructor creates consumequeue/: cleanup's usedPercent of a missing path is
        # -1, which would read as "clean now".
        os.makedirs(os.path.join(self.root, "consumequeue"), exist_ok=True)
        self._lock = FileLock(os.path.join(self.root, "lock"))
        try:
            self._lock.acquire()
            self._build()
        except BaseException:
            self._lock.release()
            raise
        self.loaded = False
        self.started = False
        self.is_shutdown = False
        self._closed = False  # shutdown() (or abandon) finished: the lock is released
        self._shutdown_done: set[str] = set()  # the steps of a shutdown cut short that are done
        self.last_exit_ok = True
        self.recovery_plan: RecoveryPlan | None = None
        self._memory_cache: float | None = None

    def _build(self) -> None:
        c = self.config
        self.transient_store_pool: TransientStorePool | None = None
        tsp_enabled = c.transient_store_pool_enable and (
            (not c.is_sync_flush and c.broker_role != "SLAVE") if c.is_v4 else c.broker_role != "SLAVE"
        )
        if tsp_enabled:
            self.transient_store_pool = TransientStorePool(c.transient_store_pool_size, c.mapped_file_size_commit_log)
            self.transient_store_pool.init()
        self.allocate_service = AllocateMappedFileService(
            transient_store_pool=self.transient_store_pool,
            warm_mapped_file_enable=c.warm_mapped_file_enable,
            flush_disk_type=c.flush_disk_type,
            flush_least_pages_when_warm_mapped_file=c.flush_least_pages_when_warm_mapped_file,
            mapped_file_size_commit_log=c.mapped_file_size_commit_log,
            fast_fail_if_no_buffer_in_store_pool=c.fast_fail_if_no_buffer_in_store_pool,
            bus=self.bus,
            threaded=self.threaded,
        )
        self.commit_log = CommitLog(
            c, clock=self.clock, bus=self.bus, allocate_service=self.allocate_service,
            transient_store_pool=self.transient_store_pool,
        )
        self.consume_queue_store = ConsumeQueueStore(
            os.path.join(self.root, "consumequeue"), c.consume_queue_file_size,
            rocketmq_version=c.rocketmq_version, bus=self.bus,
            ext_store_path=os.path.join(self.root, CONSUME_QUEUE_EXT_DIR) if c.enable_consume_queue_ext else None,
            ext_file_size=c.mapped_file_size_consume_queue_ext,
            bit_map_length=c.bit_map_length_consume_queue_ext,
            # 5.x: BatchCQ topics' queues under batchconsumequeue/ (4.9.8 has none: its
            # TopicConfig drops the queue.type attribute)
            batch_store_path=None if c.is_v4 else os.path.join(self.root, BATCH_CONSUME_QUEUE_DIR),
            batch_file_size=c.mapper_file_size_batch_consume_queue,
            batch_topics=lambda: self.topic_config_manager.batch_cq_topics,
        )
        self.checkpoint = StoreCheckpoint(os.path.join(self.root, "checkpoint"))
        self.index_service = IndexService(
            os.path.join(self.root, "index"),
            hash_slot_num=c.max_hash_slot_num,
            index_num=c.max_index_num,
            checkpoint=self.checkpoint,
            clock=self.clock,
            max_msgs_num_batch=c.max_msgs_num_batch,
            message_index_enable=c.message_index_enable,
            bus=self.bus,
        )
        self.abort_file = AbortFile(self.root, rocketmq_version=c.rocketmq_version)
        self._lmq_limit = c.enable_lmq and c.enable_multi_dispatch  # checkLmqMessage on puts
        self.reput = ReputMessageService(
            self.commit_log,
            [
                CommitLogDispatcherBuildConsumeQueue(self.consume_queue_store, self.checkpoint, self.bus,
                                                     multi_dispatch=c.enable_multi_dispatch, lmq=c.enable_lmq,
                                                     rocketmq_version=c.rocketmq_version,
                                                     slave=c.broker_role == "SLAVE"),
                CommitLogDispatcherBuildIndex(self.index_service, c.message_index_enable),
            ],
            rocketmq_version=c.rocketmq_version,
            delay_level_table=c.delay_level_table,
            master=c.broker_role != "SLAVE",  # (rmqlab has no brokerId: a master's is MASTER_ID, 0)
            flushed_only=not c.is_v4 and c.is_sync_flush,  # 5.x getConfirmOffset(): flushedWhere
        )
        # pre-faulting needs writes that go through the mapping: no pool, not read-only
        self.prefault = CommitLogPrefaultService(self.commit_log) if self.commit_log.prefault_enabled else None
        # Services that nap while idle (``IdleNap``) and the flag their naps set: a put that
        # finds it set wakes them (one attribute test per put otherwise).
        self._asleep = False
        self._naps = [(s.name, s.nap) for s in (self.prefault, self.reput) if s is not None]
        for _name, nap in self._naps:
            nap.on_nap = self._note_nap
        mfq = self.commit_log.mapped_file_queue
        self.group_commit: GroupCommitService | None = None
        self.flush_commit_log: FlushRealTimeService | None = None
        if c.is_sync_flush:
            self.group_commit = GroupCommitService(mfq, self.checkpoint, c)
            if self.threaded:
                self.group_commit.wake = lambda: self.runner.wakeup("group_commit")
        else:
            self.flush_commit_log = FlushRealTimeService(mfq, self.checkpoint, c, self.clock)
        self.commit_service: CommitRealTimeService | None = None
        if self.transient_store_pool is not None:
            self.commit_service = CommitRealTimeService(mfq, c, self.clock, on_committed=self._on_committed)
        # What an async put wakes (handleDiskFlush): 4.9.8 always wakes the flush service (the
        # commit service with the pool); 5.x only with wake_flush / wake_commit_when_put_message.
        # Waking a flush that sleeps (flush_commit_log_timed, the default) does nothing, so the
        # hot path skips it then.
        self._wake_flush_on_put = (self.flush_commit_log is not None and self.commit_service is None
                                   and not c.flush_commit_log_timed
                                   and (c.is_v4 or c.wake_flush_when_put_message))
        self._wake_commit_on_put = self.commit_service is not None and (c.is_v4 or c.wake_commit_when_put_message)
        self._after_put_needed = self.group_commit is not None or self._wake_commit_on_put or self._wake_flush_on_put
        self.flush_consume_queue = FlushConsumeQueueService(self.consume_queue_store, self.checkpoint, c, self.clock)
        self.stats = StoreStatsService(self.clock)
        self.clean_commit_log = CleanCommitLogService(self, disk_probe=self.disk_probe)
        self.clean_consume_queue = CleanConsumeQueueService(self)
        self.topic_config_manager = TopicConfigManager.for_store(self.root, rocketmq_version=c.rocketmq_version)
        self.schedule = ScheduleMessageService(
            c, self.clock, self.bus, os.path.join(self.root, "config"),
            find_queue=lambda qid: self.consume_queue_store.find_consume_queue(SCHEDULE_TOPIC, qid, create=False),
            look=self.look_message_by_offset, pickup=self.commit_log.pickup_store_timestamp,
            deliver=self._deliver_timeup,
        )  # fmt: skip
        # 5.x: the broker's TimerMessageStore (timerWheelEnable), built with the store here
        self.timer: TimerMessageStore | None = None
        if not c.is_v4 and c.timer_wheel_enable:
            self.timer = TimerMessageStore(
                c, self.clock, self.bus, self.root,
                find_queue=lambda: self.consume_queue_store.find_consume_queue(TIMER_TOPIC, 0, create=False),
                look=self.look_message_by_offset, deliver=self._deliver_timer,
                min_phy_offset=self.commit_log.get_min_offset,
            )  # fmt: skip
            self.commit_log.timer_reject = self.timer.is_reject
        self.memory_store: MemoryMessageStore | None = None
        if c.memory_topic_enable:
            self.memory_store = MemoryMessageStore(self.commit_log, c, clock=self.clock, bus=self.bus)

    # ------------------------------------------------------------------ open / lifecycle
    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        config: MessageStoreConfig | None = None,
        *,
        clock: Clock | None = None,
        bus: EventBus | None = None,
        threaded: bool = True,
        start: bool = True,
        disk_probe: DiskUsageProbe | None = None,
    ) -> MessageStore:
        """Open (or create) the store at ``path``: lock, load, recover and (by default) start."""
        path = os.fspath(path)
        if os.path.exists(path) and not os.path.isdir(path):
            raise NotAStore(path, "not a directory")
        config = (config or MessageStoreConfig()).with_(store_path_root_dir=path)
        store = cls(config, clock=clock, bus=bus, threaded=threaded, disk_probe=disk_probe)
        try:
            if not store.load():
                raise NotAStore(path, f"cannot load store: {store.load_error}")
            if start:
                store.start()
        except BaseException:
            store._abandon()
            raise
        return store

    def services(self) -> list[Service]:
        """Services in the order ``step()`` runs them."""
        out: list[Service] = [] if self.prefault is None else [self.prefault]
        if self.schedule.started:  # before reput: a step that delivers also dispatches what it put
            out.append(self.schedule)
        if self.timer is not None and self.timer.started:  # (the same)
            out.append(self.timer)
        out.append(self.reput)
        if self.commit_service is not None:
            out.append(self.commit_service)
        if self.group_commit is not None:
            out.append(self.group_commit)
        if self.flush_commit_log is not None:
            out.append(self.flush_commit_log)
        out.append(self.flush_consume_queue)
        out.append(self.clean_commit_log)
        out.append(self.clean_consume_queue)
        out.append(self.stats)
        return out

    def load(self) -> bool:
        self.load_error = ""
        if not self.topic_config_manager.load():
            self.load_error = f"{self.topic_config_manager.path}: unreadable topic config (and .bak)"
            return False
        if not self._rocksdb_cq_absent() or not self._no_v5_queues_under_v4() or not self._no_dledger_log():
            return False
        self.last_exit_ok = not self.abort_file.exists()
        if not self.commit_log.load():
            err = getattr(self.commit_log.mapped_file_queue, "load_error", "")
            self.load_error = f"commit log: {err}{_size_hint(err, 'mapped_file_size_commit_log')}"
            return False
        self._warn_ext_ignored()
        if not self.consume_queue_store.load():
            err = self.consume_queue_store.load_error
            self.load_error = f"consume queue: {err}{_size_hint(err, 'mapped_file_size_consume_queue')}"
            return False
        # planned before the index files load (which destroys some after an abnormal exit), so a
        # refused plan leaves every byte as it was; the index load does not depend on the plan
        plan = self._plan_recovery(self.last_exit_ok)
        if plan.written_by_v5:  # a 5.x store opened with 4.9.8's rules: refused, not cut
            self.load_error = written_by_v5_text(plan.stop_file or "", plan.stop_offset)
            return False
        if not self.index_service.load(self.last_exit_ok):
            self.load_error = f"index: {self.index_service.load_error or 'index files failed to load'}"
            return False
        self.recovery_plan = self._recover(plan)
        # after recovery, as 4.9.8's store and 5.x's broker load it: its offsets are corrected
        # into the recovered schedule queues
        if not self.schedule.load():
            self.load_error = self.schedule.load_error
            return False
        if self.timer is not None and not self.timer.load():  # the broker loads it after the store
            self.load_error = self.timer.load_error
            return False
        self.loaded = True
        return True

    def _rocksdb_cq_absent(self) -> bool:
        """A store whose ``consumequeue/`` holds a RocksDB database (5.x ``storeType=defaultRocksDB``,
        or ``rocksdbCQDoubleWriteEnable`` beside the file queues; spec §1) is refused: rmqlab reads
        and writes file consume queues only, so it would rebuild them from the commit log (or keep
        writing the file ones) and leave the broker's RocksDB queues behind -- after which the
        broker answers differently from what rmqlab showed. A ``compaction/`` store (5.x compacted
        topics) is only logged: the broker compacts from the commit log on its own, from its checkpoint."""
        cq_dir = os.path.join(self.root, "consumequeue")
        try:
            with os.scandir(cq_dir) as it:
                plain = [e.name for e in it if e.is_file(follow_symlinks=False)]
        except OSError:
            plain = []
        compaction = os.path.join(self.root, COMPACTION_DIR)
        if os.path.isdir(compaction) and any(files for _, _, files in os.walk(compaction)):
            log.warning("%s: 5.x compaction files (topics with cleanup.policy=COMPACTION) are not read or "
                        "written by rmqlab; the broker resumes compacting from its own position-checkpoint", compaction)
        if not is_rocksdb_listing(plain):
            return True
        self.load_error = (f"{cq_dir} holds a RocksDB database (5.x storeType=defaultRocksDB or "
                           "rocksdbCQDoubleWriteEnable): rmqlab reads and writes file consume queues only, so opening "
                           "the store would leave the broker's RocksDB consume queues behind; inspect it read-only "
                           "with `rmqlab inspect` / `rmqlab verify` (the commit log and index are read)")
        return False

    def _no_dledger_log(self) -> bool:
        """A store whose messages are in a DLedger CommitLog (``dledger-<id>/data/``) is refused:
        rmqlab would find ``commitlog/`` empty (or holding only the files from before the switch),
        the consume queues past its end, and truncate them. Nothing is read or written first."""
        data = dledger_commit_log(self.root)
        if data is None:
            return True
        self.load_error = (f"{data}: a DLedger CommitLog (enableDLegerCommitLog: the broker keeps its messages there "
                           "as DLedger entries, not in commitlog/), which rmqlab does not read or write; opening the "
                           "store would find its consume queues past the plain CommitLog's end and truncate them. "
                           "Inspect it read-only with `rmqlab inspect` / `rmqlab verify` (the consume queues and "
                           "index are read)")
        return False

    def _no_v5_queues_under_v4(self) -> bool:
        """A store with BatchConsumeQueue files is refused by 4.9.8's rules
        (:func:`~rmqlab.store.recovery.batch_queues_under_v4`). Nothing is read or written first."""
        if not self.config.is_v4:
            return True
        self.load_error = batch_queues_under_v4(self.root)
        return not self.load_error

    def _ext_files_present(self) -> bool:
        ext_dir = os.path.join(self.root, CONSUME_QUEUE_EXT_DIR)
        return os.path.isdir(ext_dir) and bool(os.listdir(ext_dir))

    def _warn_ext_ignored(self) -> None:
        """A ``consumequeue_ext/`` with the flag off: RocketMQ ignores it (no ext run is created),
        so the consume queues' tags codes that are ext addresses resolve to nothing."""
        ext_dir = os.path.join(self.root, CONSUME_QUEUE_EXT_DIR)
        if not self.config.enable_consume_queue_ext and self._ext_files_present():
            log.warning("%s exists but enable_consume_queue_ext is off: the consume queues' tags codes written "
                        "with it on are ext addresses, which are not read (as in RocketMQ): tag filters pass every "
                        "such message, and the schedule service takes store time + delay as due time; open "
                        "with enable_consume_queue_ext=True to read them", ext_dir)

    def start(self) -> None:
        """Dispatch everything recovery left behind, then start the services and mark ``abort``."""
        cq_max = self.consume_queue_store.get_dispatched_end()
        reput_from = cq_max
        min_offset = self.commit_log.get_min_offset()
        if reput_from < min_offset:
            reput_from = min_offset
        self.reput.reput_from_offset = self._reput_start(max(0, reput_from))
        while self.reput.dispatch_behind_bytes() > 0 and self.reput.run_once() > 0:
            pass
        self._recover_topic_queue_table()
        if self.config.broker_role != "SLAVE":  # handleScheduleMessageService: masters deliver
            self.schedule.start()
            if self.timer is not None:
                self.timer.start()
        if self.threaded:
            self.allocate_service.start()
        self.runner.start(self.services())
        self.abort_file.create()
        self.started = True

    def _reput_start(self, offset: int) -> int:
        """Where dispatch starts: ``offset`` (the consume queues' max physical offset), or the
        start of the record it falls inside (rmqlab, not RocketMQ).

        A damaged consume queue unit can end off a record boundary; RocketMQ's reput then
        reads no record there and stalls for good, so no message written afterwards reaches a
        consume queue or the index. Dispatching that record again is harmless (duplicates are
        skipped). The recovery plan says so.
        """
        mfq = self.commit_log.mapped_file_queue
        mf = mfq.find_mapped_file_by_offset(offset) if offset < mfq.get_max_offset() else None
        if mf is None:
            return offset
        buf, base, end = mf.buffer, mf.file_from_offset, mf.wrote_position
        pos = offset - base
        if pos + _HEAD_CHECK <= end and _LONG.unpack_from(buf, pos + PHYSICAL_OFFSET_POSITION)[0] == offset:
            return offset  # the common case: a record says it starts here
        starts, stop = header_hop(buf, 0, end)
        if pos < stop:  # inside the records the hop crossed: the one holding ``pos``
            p = starts[bisect.bisect_right(starts, pos) - 1]
        elif stop + 8 <= end and _INT.unpack_from(buf, stop + 4)[0] == BLANK_MAGIC_CODE:
            p = stop  # inside the file's end filler: reput rolls over from it
        else:
            return offset  # damage before it: nothing to say where records start
        if p == pos:
            return offset
        start = base + p
        plan = self.recovery_plan
        if plan is not None:
            reason = (f"dispatch would start at {offset}, the consume queues' max physical offset, inside the "
                      f"record at {start} (a damaged consume queue unit ends off a record boundary): it starts at "
                      f"{start} instead (RocketMQ {plan.rocketmq_version} starts at {offset}, reads no record there "
                      f"and stalls: no message written afterwards reaches a consume queue or the index)")
            plan.step("dispatch", mf.name, offset, f"start dispatch at {start}", reason)
            plan.notes.append(reason)
            if self.bus.active:
                self.bus.publish(plan.steps[-1])
        return start

    def step(self, *, flush: bool = True) -> dict[str, Any]:
        """Run every service once (stepped mode), in order; returns what each did.

        A service that finds the disk full (:class:`~rmqlab.errors.DiskFull`, nothing written)
        does not stop the others: cleanup may be the one to free space. The first such error
        is raised once all have run."""
        done: dict[str, Any] = {}
        self._check_open()
        if not self.threaded:
            while self.allocate_service.run_once():
                pass
        full: DiskFull | None = None
        for service in self.services():
            if not flush and service.name.startswith("flush"):
                continue
            try:
                done[service.name] = service.run_once()
            except DiskFull as e:
                done[service.name] = e
                full = full or e
        if full is not None:
            raise full
        return done

    def shutdown(self) -> None:
        """Stop services, flush everything, write the checkpoint, remove ``abort`` if clean.

        Interrupted (KeyboardInterrupt), it can be called again and finishes: it skips the
        steps already done and redoes the one cut short (each can run twice), and the lock (and
        the pool's uncommitted bytes) are kept until the end. Any other error stops the service
        threads and releases the lock (the ``abort`` file stays: the next open recovers).
        """
        if self._closed:
            return
        self.is_shutdown = True
        self.commit_log.writeable = False
        self.commit_log.not_writeable_reason = "store is shut down"
        done = self._shutdown_done
        try:
            for name, step in self._shutdown_steps():
                if name not in done:
                    step()
                    done.add(name)
        except Exception:
            # An error (a failing disk): stop as a crash would (the threads stop, the lock is
            # released, ``abort`` stays), so the next open recovers.
            try:
                self._stop_threads()
            finally:
                self._close()
            raise
        self._close()

    def _shutdown_steps(self) -> list[tuple[str, Callable[[], object]]]:
        """``shutdown``'s steps in order, by name. A started store first stops its services:
        the pool's last commit, then dispatch what it made visible (RocketMQ stops the
        CommitLog's services before the reput drains, else the abort file stays)."""
        steps: list[tuple[str, Callable[[], object]]] = []
        if self.started:
            steps.append(("runner", self.runner.shutdown))
            steps.append(("schedule", self.schedule.shutdown))  # persists config/delayOffset.json
        if self.timer is not None:
            steps.append(("timer", self.timer.shutdown))  # writes config/timercheck, flushes timerlog/
        if self.started:
            if self.commit_service is not None:
                steps.append(("commit", self.commit_service.shutdown))
            steps.append(("reput", self._drain_reput))
            if self.flush_commit_log is not None:
                steps.append(("flush_commit_log", self.flush_commit_log.shutdown))
            if self.group_commit is not None:
                steps.append(("group_commit", self.group_commit.shutdown))
            steps += [("flush_consume_queue", self.flush_consume_queue.shutdown),
                      ("allocate", self.allocate_service.shutdown), ("index", self.index_service.shutdown)]
        steps += [("commit_log", self.commit_log.shutdown), ("consume_queues", self.consume_queue_store.shutdown),
                  ("checkpoint", self.checkpoint.shutdown), ("abort", self._remove_abort_if_clean)]
        return steps

    def _drain_reput(self) -> None:
        """Dispatch all that is written, in this thread. A 5.x SYNC_FLUSH reput sees flushed bytes
        only, so those are flushed first (RocketMQ's shutdown also stops the CommitLog's services,
        with their last flush, before the reput drains)."""
        if self.reput.flushed_only:
            mfq = self.commit_log.mapped_file_queue
            while not mfq.flush(0):
                pass
        while self.reput.dispatch_behind_bytes() > 0 and self.reput.run_once() > 0:
            pass

    def _remove_abort_if_clean(self) -> None:
        if self.started and self.reput.dispatch_behind_bytes() == 0:
            self.abort_file.remove()

    def _close(self) -> None:
        """The end of a shutdown: the pool's buffers go back and the lock is released; marked
        closed last, so one cut short runs again."""
        try:
            if self.transient_store_pool is not None:
                self.transient_store_pool.destroy()
        finally:
            self._release()
            self._closed = True

    def abandon(self) -> None:
        """Drop the store as a killed process would: stop the service threads, flush nothing,
        truncate nothing, leave ``abort`` and the checkpoint as they are on disk, release the lock.

        Every byte already written to a mapping stays (the page cache survives a process kill),
        so reopening runs abnormal recovery over exactly what a SIGKILL leaves. The object must
        not be used afterwards (``shutdown()`` becomes a no-op). Crash models build on this.
        """
        if self._closed:
            return
        self.is_shutdown = True
        self.commit_log.writeable = False
        self.commit_log.not_writeable_reason = "store was abandoned (simulated crash)"
        try:
            self._stop_threads()
            if self.timer is not None:
                self.timer.abandon()
        finally:
            self._closed = True
            self._release()

    def _release(self) -> None:
        self._lock.release()

    def _abandon(self) -> None:
        """After an open that failed part-way (an error, or a KeyboardInterrupt during recovery
        or start): stop whatever service threads it started and release the lock, so the store
        can be opened again in this process. What recovery already did stays (it is redone)."""
        try:
            self._stop_threads()
            if self.timer is not None:
                self.timer.abandon()
        finally:
            self._release()

    def _stop_threads(self) -> None:
        """Stop every service thread (the runner's and the allocate service's); nothing else."""
        self.runner.shutdown()
        self.allocate_service.shutdown()

    def destroy(self) -> None:
        """Delete every file of the store (after shutdown)."""
        self.shutdown()
        self.commit_log.destroy()
        self.consume_queue_store.destroy()
        self.index_service.destroy()
        if self.timer is not None:
            self.timer.destroy()
        for name in ("checkpoint", "abort", "lock"):
            try:
                os.remove(os.path.join(self.root, name))
            except FileNotFoundError:
                pass

    def __enter__(self) -> MessageStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def _check_open(self) -> None:
        if self.is_shutdown:
            raise RmqlabError(f"{self.root}: store is shut down")

    # ------------------------------------------------------------------ recovery
    def _commit_log_views(self) -> list[CommitLogFileView]:
        return [
            CommitLogFileView(mf.name, mf.file_from_offset, mf.buffer)
            for mf in self.commit_log.mapped_file_queue.mapped_files
        ]

    def _plan_recovery(self, last_exit_ok: bool) -> RecoveryPlan:
        cq_max = self.consume_queue_store.recover()
        return plan_recovery(
            self._commit_log_views(),
            self.config.mapped_file_size_commit_log,
            last_exit_ok=last_exit_ok,
            max_phy_offset_of_consume_queue=cq_max,
            checkpoint=self.checkpoint.snapshot(),
            config=self.config,
        )

    def _recover(self, plan: RecoveryPlan) -> RecoveryPlan:
        plan.steps[:0] = self.consume_queue_store.batch_recovery_steps  # (BatchConsumeQueues recover first)
        note_ext_recovery(plan, self.consume_queue_store.ext_recovery_steps,
                          ext_enabled=self.config.enable_consume_queue_ext,
                          ext_files_present=not self.config.enable_consume_queue_ext and self._ext_files_present())
        self._apply_recovery(plan)
        last = self.index_service.index_files[-1:] if not self.index_service.read_only else []
        if last and index_end_past_log(plan, last[0].name, last[0].end_phy_offset):
            last[0].cut_end_phy_offset(plan.process_offset)
        if self.bus.active:
            for step in plan.steps:
                self.bus.publish(step)
        self._recover_topic_queue_table()
        note_ext_min_correction(plan, self.consume_queue_store.ext_min_steps)
        if self.bus.active:
            for step in self.consume_queue_store.ext_min_steps:
                self.bus.publish(step)
        return plan

    def _apply_recovery(self, plan: RecoveryPlan) -> None:
        mfq = self.commit_log.mapped_file_queue
        if plan.mode == "empty":
            mfq.flushed_where = 0
            mfq.committed_where = 0
            self.consume_queue_store.destroy()
            return
        walked = plan.accepted
        plan.accepted = None  # the positions are only needed here
        if plan.dispatch_from is not None:
            # 4.9.8 quirk (spec §2.10): the delay level table is not parsed yet at this point.
            self._dispatch_range(plan.dispatch_from, plan.process_offset, -1, quirk_no_delay=self.config.is_v4,
                                 walked=walked)
        elif plan.dispatch_above >= 0 or (not self.config.is_v4 and plan.mode == "normal"):
            self._dispatch_range(mfq.mapped_files[plan.start_index].file_from_offset, plan.process_offset,
                                 plan.dispatch_above, quirk_no_delay=False, walked=walked)
        mfq.flushed_where = plan.process_offset
        mfq.committed_where = plan.process_offset
        cuts: list[RecoveryStep] = []
        if self.config.is_v4:
            mfq.truncate_dirty_files(plan.process_offset)
            if plan.truncate_consume_queues:
                cuts = self.consume_queue_store.truncate_dirty_logic_files(plan.process_offset)
        else:
            if plan.truncate_consume_queues:
                cuts = self.consume_queue_store.truncate_dirty_logic_files(plan.process_offset)
            mfq.truncate_dirty_files(plan.process_offset)
            self.commit_log.confirm_offset = plan.last_valid_offset
            if plan.last_valid_offset >= 0:
                # 5.x CommitLog.setConfirmOffset also sets StoreCheckpoint.confirmPhyOffset (spec
                # §5.1): bytes 32..39 hold it from the next checkpoint flush on. (With no valid
                # record Java writes its walk's initial value instead; rmqlab leaves the field.)
                self.checkpoint.confirm_phy_offset = plan.last_valid_offset
        note_units_past_log(plan, cuts)  # what RocketMQ does not do: say so in the report

    def _dispatch_range(self, start: int, end: int, above: int, *, quirk_no_delay: bool,
                        walked: FastChecker | None = None) -> None:
        """Re-dispatch every valid record in [start, end) whose offset is > ``above``.

        ``walked`` holds the positions the recovery walk accepted in that range (the walk starts
        at ``start`` and stops at ``end``, so they are exactly the records the loop below would
        find): then there is no second hop, and runs of records already in their consume queue
        and index are recognised from fixed fields without parsing properties
        (:meth:`_redispatch_file`). The outcome is the same.
        """
        table = {} if quirk_no_delay else self.config.delay_level_table
        max_level = max(table, default=0)
        size_cl = self.config.mapped_file_size_commit_log
        version = self.config.rocketmq_version
        for mf in self.commit_log.mapped_file_queue.mapped_files:
            base = mf.file_from_offset
            if base + size_cl <= start or base >= end:
                continue
            buf = mf.buffer
            if walked is not None:
                p = walked.positions(base)
                p = p[(p >= start - base) & (p < end - base) & (p + base > above)]
                self._redispatch_file(buf, base, p, table, max_level)
                continue
            pos = max(0, start - base)
            limit = min(size_cl, end - base)
            while pos < limit:
                size, ok, req = check_message_and_return_size(
                    buf, pos, check_crc=False, read_body=False, rocketmq_version=version,
                    delay_level_table=table, max_delay_level=max_level,
                )
                if not ok or size <= 0 or req is None:
                    break
                if base + pos > above:
                    self.reput.do_dispatch(req)
                pos += size

    def _redispatch_file(self, buf: memoryview, base: int, positions: np.ndarray,
                         table: dict[int, int], max_level: int) -> None:
        """Dispatch the validated records at ``positions`` of one file, in order
        (``ReputMessageService.redispatch``: batched, records already in their consume queue
        and index only counted as duplicates, without parsing)."""
        self.reput.redispatch(buf, base, positions, table, max_level)

    def _recover_topic_queue_table(self) -> None:
        min_phy = self.commit_log.get_min_offset()
        self.commit_log.topic_queue_table = self.consume_queue_store.recover_topic_queue_table(min_phy)

    # ------------------------------------------------------------------ writing
    def put_message(self, msg: Message) -> PutMessageResult:
        """Append one message (and, in SYNC_FLUSH mode, wait until it is on disk)."""
        started = _perf_ns()
        if msg.__class__ is not Message and not isinstance(msg, Message):
            raise InvalidArgument(f"put_message takes a rmqlab.Message, not {type(msg).__name__} {msg!r:.80}")
        if self.is_shutdown or not self.started:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, reason="store is not running")
        if self.memory_store is not None and self._is_memory_topic(msg.topic):
            return self.memory_store.put_message(msg)
        if self.commit_log.begin_time_in_lock and self.is_os_page_cache_busy():
            return self._page_cache_busy(1, started)
        if self._lmq_limit and msg.properties and self._lmq_exceeded(msg):
            return PutMessageResult(PutMessageStatus.LMQ_CONSUME_QUEUE_NUM_EXCEEDED, reason=(
                f"{self.consume_queue_store.lmq_queue_count} LMQ consume queues exceed max_lmq_consume_queue_num "
                f"{self.config.max_lmq_consume_queue_num} (RocketMQ 4.9.8 makes this check but tests the wrong "
                "status after it, so a 4.9.8 broker stores the message anyway)"))
        if (msg.sys_flag & _INNER_BATCH or (msg.properties and _INNER_NUM in msg.properties)) \
                and not self.config.is_v4:
            return self._put_inner_message(msg, started)
        if (batch_topics := self.topic_config_manager.batch_cq_topics) and msg.topic in batch_topics:
            return self._refuse_plain_to_batch_topic(msg.topic, 1, started)
        result = self.commit_log.put_message(msg)
        if result.status is _PUT_OK:
            if self._asleep:
                self._wake_naps()
            if self._after_put_needed or faults._armed:
                result = self._after_put(result)  # else it would do nothing (the async flush's hot path)
                if result.status is not _PUT_OK:
                    self.stats.record_put(False, 0, 1, started)
                    return result
            self.stats.record_put(True, result.append_result.wrote_bytes, 1, started)  # type: ignore[union-attr]
            if self._dispatch_bound:
                n = self._puts_unchecked = self._puts_unchecked + 1
                if n >= 64:  # a look every 64 puts: tens of ns a put
                    self._puts_unchecked = 0
                    self._bound_dispatch_lag()
        else:
            self.stats.record_put(False, 0, 1, started)
        return result

    def put_messages(self, msgs: Sequence[Message] | MessageBatch) -> PutMessageResult:
        """Append a batch of messages of one topic and queue: a list of messages, or a
        producer-encoded :class:`~rmqlab.codec.batch.MessageBatch` (same records, less work)."""
        try:
            return self._put_messages(msgs)
        except (AttributeError, TypeError):  # checked only then: nothing is written before the encode
            if msgs.__class__ is not MessageBatch and not (
                    isinstance(msgs, Sequence) and all(isinstance(m, Message) for m in msgs)):
                raise InvalidArgument("put_messages takes a MessageBatch or a sequence of rmqlab.Message, not "
                                      f"{type(msgs).__name__} {msgs!r:.80}") from None
            raise

    def _put_messages(self, msgs: Sequence[Message] | MessageBatch) -> PutMessageResult:
        started = _perf_ns()
        if self.is_shutdown or not self.started:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, reason="store is not running")
        if msgs and self.memory_store is not None:
            is_batch = msgs.__class__ is MessageBatch
            if self._is_memory_topic(msgs.topic if is_batch else msgs[0].topic):  # type: ignore[union-attr,index]
                return self.memory_store.put_messages(
                    self.commit_log.batch_messages(msgs) if is_batch else msgs  # type: ignore[arg-type]
                )
        if self.commit_log.begin_time_in_lock and self.is_os_page_cache_busy():
            return self._page_cache_busy(len(msgs), started)
        batch = self._inner_batch(msgs) if self.consume_queue_store.batch_store_path is not None else None
        if isinstance(batch, PutMessageResult):
            return batch
        if batch is not None and self._lmq_limit and batch.properties and self._lmq_exceeded(batch):
            # an inner batch goes into a 5.x store as one message (asyncPutMessage): checkLmqMessage
            self.stats.record_put(False, 0, len(msgs), started)
            return PutMessageResult(PutMessageStatus.LMQ_CONSUME_QUEUE_NUM_EXCEEDED, reason=(
                f"{self.consume_queue_store.lmq_queue_count} LMQ consume queues exceed max_lmq_consume_queue_num "
                f"{self.config.max_lmq_consume_queue_num} (RocketMQ makes this check but tests the wrong status "
                "after it, so a broker stores the message anyway)"))
        result = self.commit_log.put_messages(msgs) if batch is None else self.commit_log.put_inner_batch(batch)
        if result.status is _PUT_OK:
            if self._asleep:
                self._wake_naps()
            result = self._after_put(result)
        self.stats.record_put(result.ok, result.wrote_bytes, len(msgs), started)
        if self._dispatch_bound and result.status is _PUT_OK:
            self._bound_dispatch_lag()
        return result

    def _inner_batch(self, msgs: Sequence[Message] | MessageBatch) -> MessageBatch | PutMessageResult | None:
        """The batch to store as ONE inner-batch record (5.x, a BatchCQ topic), else None.

        5.3.3's ``SendMessageProcessor`` turns a batch for a BatchCQ topic into an inner batch when
        the batch message carries its own UNIQ_KEY (every 5.x producer's ``batch()`` sets one): a
        list is encoded as such a producer would; a MessageBatch without one (a 4.x producer) is
        stored as separate records, as the broker does -- which a BatchConsumeQueue then skips.
        """
        if not msgs:
            return None
        is_batch = msgs.__class__ is MessageBatch
        topic = msgs.topic if is_batch else msgs[0].topic  # type: ignore[union-attr,index]
        if not self.consume_queue_store.is_batch_topic(topic):
            return None
        if is_batch:
            batch = msgs
        else:
            cl = self.commit_log
            try:
                batch = MessageBatch.from_messages(msgs, lambda: cl.new_uniq_key(cl.clock.now_ms()),  # type: ignore[arg-type]
                                                   client_version=self.config.rocketmq_version)
            except ValueError as e:
                return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, reason=str(e))
            except BAD_FIELD_ERRORS:
                return refuse_bad_fields(msgs)  # type: ignore[arg-type]
        if not batch.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX):  # type: ignore[union-attr]
            return self._refuse_plain_to_batch_topic(topic, len(msgs), _perf_ns())
        return batch  # type: ignore[return-value]

    def _refuse_plain_to_batch_topic(self, topic: str, n: int, started: int) -> PutMessageResult:
        """A message that is not an inner batch, for a BatchCQ topic: refused (MESSAGE_ILLEGAL).

        A 5.3.3 broker stores such a record and moves the queue offset, but its record carries no
        INNER_NUM/INNER_BASE, so ``BatchConsumeQueue`` skips it (``[NOTIFYME]unexpected dispatch
        request``, msgBaseOffset -1): acknowledged, yet no consumer can ever read it, and the queue
        has a hole. rmqlab refuses instead and says why. A store a broker wrote with such records
        still opens and is read as the broker reads it (``verify``: ``not_in_consume_queue``)."""
        self.stats.record_put(False, 0, n, started)
        return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, reason=(
            f"topic {topic} has queue.type=BatchCQ: a message that is not an inner batch (a single put, or a "
            "batch without its own UNIQ_KEY as a 4.x producer sends it) would be stored by RocketMQ 5.3.3 with "
            "a queue offset but skipped by its BatchConsumeQueue, so no consumer could read it; send it with "
            "put_messages (a list, or a 5.x MessageBatch), which stores one inner-batch record"))

    def _put_inner_message(self, msg: Message, started: int) -> PutMessageResult:
        """5.x ``DefaultMessageStore.asyncPutMessage``'s checks of a single message: INNER_NUM without
        the INNER_BATCH flag, or an inner batch for a topic that is not BatchCQ, is MESSAGE_ILLEGAL;
        an inner batch for a BatchCQ topic is stored with INNER_BASE (``put_inner_message``)."""
        inner = bool(msg.sys_flag & _INNER_BATCH)
        if not inner:
            result = PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL,
                                      reason=f"the message had property {_INNER_NUM} but is not an inner batch")
        elif not self.consume_queue_store.is_batch_topic(msg.topic):
            result = PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL,
                                      reason="the message is an inner batch but its topic's queue type is not BatchCQ")
        else:
            result = self.commit_log.put_inner_message(msg)
        if result.status is _PUT_OK:
            if self._asleep:
                self._wake_naps()
            result = self._after_put(result)
        self.stats.record_put(result.ok, result.wrote_bytes, 1, started)
        return result

    def is_os_page_cache_busy(self) -> bool:
        """``isOSPageCacheBusy``: a put has held the CommitLog's put lock for more than
        ``os_page_cache_busy_timeout_mills`` (1 s; less than 10,000 s, RocketMQ's bound) -- a
        disk stall, a slow new file, a long pause. Puts are then refused with OS_PAGECACHE_BUSY
        (the broker's "[PC_SYNCHRONIZED]broker busy") rather than queue behind it; a store that
        is not writeable says SERVICE_NOT_AVAILABLE first, as RocketMQ's checkStoreStatus does."""
        cl = self.commit_log
        begin = cl.begin_time_in_lock
        if not begin or not cl.writeable:
            return False
        held = self.clock.now_ms() - begin
        return self.config.os_page_cache_busy_timeout_mills < held < 10_000_000

    def lock_time_mills(self) -> int:
        """``lockTimeMills``: how long the put now holding the CommitLog's lock has held it
        (0 when no put holds it)."""
        return self.commit_log.lock_time_mills()

    def _page_cache_busy(self, n: int, started: int) -> PutMessageResult:
        held = self.commit_log.lock_time_mills()
        self.stats.record_put(False, 0, n, started)
        return PutMessageResult(PutMessageStatus.OS_PAGECACHE_BUSY, reason=(
            f"a put has held the CommitLog lock for {held} ms (more than os_page_cache_busy_timeout_mills "
            f"{self.config.os_page_cache_busy_timeout_mills}): the broker answers \"[PC_SYNCHRONIZED]broker busy, "
            "start flow control for a while\""))

    def _lmq_exceeded(self, msg: Message | MessageBatch) -> bool:
        """4.9.8's ``checkLmqMessage``: a message naming multi-dispatch queues, once the store
        holds more LMQ consume queues than ``max_lmq_consume_queue_num``. 4.9.8's
        ``asyncPutMessage`` computes it and then tests the previous check's status instead, so
        the refusal never happens there; rmqlab refuses, as the check means to, and says so."""
        named = (msg.properties or {}).get(PROPERTY_INNER_MULTI_DISPATCH) or ""
        return bool(named.strip()) and self.consume_queue_store.lmq_queue_count > self.config.max_lmq_consume_queue_num

    def _note_nap(self) -> None:
        self._asleep = True

    def _wake_naps(self) -> None:
        """A put into a store whose reput or pre-fault service naps: back to 1 ms polling now."""
        self._asleep = False
        for name, nap in self._naps:
            if nap.wake():
                self.runner.wakeup(name)

    def _on_committed(self) -> None:
        """The commit service moved data into the file (transient store pool): it wakes the
        flush service (which runs now unless it sleeps: ``flush_commit_log_timed``), and a
        napping reput, which sees committed data only, wakes for it."""
        self.runner.wakeup("flush_commit_log")
        if self._asleep:
            self._wake_naps()

    def _bound_dispatch_lag(self) -> None:
        """Wait while dispatch is more than ``max_dispatch_behind_bytes`` behind, until it is
        half as far behind (threaded store).

        A put loop never blocks, so the reput thread, which does (its 1 ms wait between rounds),
        gets the GIL back only when CPython forces a switch and it wins it over the other
        service threads: during a 7 s put loop it dispatched ~12 % of what was put and fell
        ~1 GB behind, so consumers saw nothing new for seconds (RocketMQ's reput, on its own
        core, stays within a round of the writer). Waiting here hands it the GIL; the writer
        then runs on alone for half the bound. Bursts below the bound run at full speed, and a
        sustained stream runs at the rate of put and dispatch together, which it had anyway (the
        backlog was dispatched later).

        If the reput is stuck (it stopped at a damaged record, or waits for a commit), the wait
        gives up until it moves again: stuck is two finished rounds that did not move it, or
        half a second without a move while no round runs. A round in progress is never stuck,
        however long it takes: a first round that creates the consume queue and index files
        took 30 ms here and over 100 ms on a busy CI machine, where an earlier 100 ms clock gave
        up and let producers run ahead unbounded.
        """
        reput = self.reput
        bound = self._dispatch_bound
        if reput.dispatch_behind_bytes() <= bound:
            return
        at = reput.reput_from_offset
        if at == self._stalled_at:
            return  # gave up at this offset: the reput has not moved since
        self.dispatch_waits += 1
        self.runner.wakeup("reput")
        target = bound >> 1
        moved = time.monotonic()
        rounds = reput.rounds
        arrived = reput.arrived
        in_round = reput.lock.locked
        while reput.dispatch_behind_bytes() > target and self.started and not self.is_shutdown:
            arrived.wait(0.001)
            now_at = reput.reput_from_offset
            if now_at != at:
                at, moved, rounds = now_at, time.monotonic(), reput.rounds
            elif in_round():
                moved = time.monotonic()
            elif reput.rounds - rounds >= 2 or time.monotonic() - moved > 0.5:
                self._stalled_at = at
                log.debug("dispatch stalled at %d: producers go on without waiting for it", at)
                return

    def _deliver_timeup(self, rec: MessageRecord) -> PutMessageResult:
        """Put a due delayed message back (``CommitLog.put_timeup``) for the schedule service,
        then what a put does after the append; its WAIT is false, so a SYNC_FLUSH store wakes
        the flush and does not wait for it (``submitFlushRequest``)."""
        started = _perf_ns()
        return self._after_service_put(self.commit_log.put_timeup(rec), started)

    def _deliver_timer(self, rec: MessageRecord, topic: str, queue_id: int, props: dict[str, str]
                       ) -> PutMessageResult:
        """Put a timer message back (``CommitLog.put_rebuilt``) for the timer wheel, then what a
        put does after the append (as :meth:`_deliver_timeup`; WAIT is false)."""
        started = _perf_ns()
        return self._after_service_put(self.commit_log.put_rebuilt(rec, topic, queue_id, props), started)

    def _after_service_put(self, result: PutMessageResult, started: int) -> PutMessageResult:
        """What a put by a store service (schedule, timer) does after the append: naps woken, the
        flush or commit service woken (WAIT is false: a SYNC_FLUSH store does not wait), stats."""
        if result.status is _PUT_OK:
            if self._asleep:
                self._wake_naps()
            if self.group_commit is not None:
                self.runner.wakeup("group_commit")
            elif self._wake_commit_on_put:
                self.runner.wakeup("commit_commit_log")
            elif self._wake_flush_on_put:
                self.runner.wakeup("flush_commit_log")
            self.stats.record_put(True, result.wrote_bytes, 1, started)
        else:
            self.stats.record_put(False, 0, 1, started)
        return result

    def _after_put(self, result: PutMessageResult) -> PutMessageResult:
        crash_point("after_append_before_dispatch")
        if self.group_commit is not None:
            req = GroupCommitRequest(result.wrote_offset + result.wrote_bytes)
            gc = self.group_commit
            gc.put_request(req)
            if self.threaded:
                # Serve the queue here when a round slot is free (no hand-off to the service
                # thread and back); else a round in flight takes it when it finishes.
                gc.try_run_once(req)
                status = req.wait(self.config.sync_flush_timeout)
            else:
                gc.run_once()
                status = req.status
            if status is not PutMessageStatus.PUT_OK:
                return PutMessageResult(status, result.append_result, reason="flush did not finish in time")
        elif self._wake_commit_on_put:
            self.runner.wakeup("commit_commit_log")
        elif self._wake_flush_on_put:
            self.runner.wakeup("flush_commit_log")
        return result

    # ------------------------------------------------------------------ offsets
    def get_max_phy_offset(self) -> int:
        return self.commit_log.get_max_offset()

    def get_min_phy_offset(self) -> int:
        return self.commit_log.get_min_offset()

    # ------------------------------------------------------------------ memory topics
    def _is_memory_topic(self, topic: str) -> bool:
        return self.memory_store is not None and self.topic_config_manager.is_memory_topic(topic)

    def create_topic(self, topic: str, queue_nums: int = 4, *, memory: bool = False,
                     queue_type: str | None = None) -> TopicConfig:
        """Create (and persist in ``config/topics.json``) a topic config; ``memory=True`` routes the
        topic to the MemoryMessageStore (needs ``memory_topic_enable``). ``queue_type="BatchCQ"``
        writes the ``queue.type`` attribute as RocketMQ does: on a 5.x store the topic's queues
        are BatchConsumeQueues (a 4.9.8 store keeps the attribute and ignores it, as 4.9.8 does); a
        memory topic cannot be one."""
        if memory and self.memory_store is None:
            raise RmqlabError("memory topics need MessageStoreConfig(memory_topic_enable=True)")
        if queue_type not in (None, "SimpleCQ", BATCH_CQ):
            raise RmqlabError(f"queue_type must be SimpleCQ or {BATCH_CQ}, not {queue_type!r}")
        if memory and queue_type == BATCH_CQ:  # (a topics.json saying both: memory routing wins)
            raise RmqlabError(f"topic {topic!r}: a memory topic cannot be {BATCH_CQ}: its messages never reach the "
                              "CommitLog, so it has no consume queue of either kind")
        attributes = {QUEUE_TYPE_ATTRIBUTE: queue_type} if queue_type else None
        return self.topic_config_manager.create_if_absent(topic, queue_nums, memory=memory, attributes=attributes)

    def _batch_queue(self, topic: str, queue_id: int, create: bool = False) -> Any:
        """The topic/queue's BatchConsumeQueue (5.x BatchCQ topic), else None (a plain queue)."""
        cs = self.consume_queue_store
        if cs.batch_store_path is None:
            return None
        try:
            return cs.batch_queue_for(topic, queue_id, create=create)
        except (InvalidTopic, ValueError):
            return None

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        topic, queue_id = queue_args(topic, queue_id)
        if self._is_memory_topic(topic):
            return self.memory_store.get_max_offset_in_queue(topic, queue_id)  # type: ignore[union-attr]
        bcq = self._batch_queue(topic, queue_id)
        if bcq is not None:
            return bcq.get_max_offset_in_queue()
        cq = self.consume_queue_store.find_consume_queue(topic, queue_id, create=False)
        return cq.get_max_offset_in_queue() if cq is not None else 0

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """The queue's min offset; 0 for a queue the store lacks (RocketMQ creates an empty one
        on the lookup and answers its 0; rmqlab answers without creating it)."""
        topic, queue_id = queue_args(topic, queue_id)
        if self._is_memory_topic(topic):
            return self.memory_store.get_min_offset_in_queue(topic, queue_id)  # type: ignore[union-attr]
        bcq = self._batch_queue(topic, queue_id)
        if bcq is not None:
            return bcq.get_min_offset_in_queue()  # (-1 while it holds no unit, as 5.x answers)
        cq = self.consume_queue_store.find_consume_queue(topic, queue_id, create=False)
        return cq.get_min_offset_in_queue() if cq is not None else 0

    def get_commit_log_offset_in_queue(self, topic: str, queue_id: int, consume_queue_offset: int) -> int:
        topic, queue_id = queue_args(topic, queue_id)
        consume_queue_offset = int_arg("consume_queue_offset", consume_queue_offset)
        bcq = self._batch_queue(topic, queue_id)
        if bcq is not None:  # the record holding that queue offset (5.x ``get``: the unit whose batch holds it)
            bunit = bcq.get(consume_queue_offset)
            return bunit[0] if bunit is not None else 0
        cq = self.consume_queue_store.find_consume_queue(topic, queue_id, create=False)
        unit = cq.get_unit(consume_queue_offset) if cq is not None else None
        return unit[0] if unit is not None else 0

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp: int, boundary: str = "LOWER") -> int:
        topic, queue_id = queue_args(topic, queue_id)
        timestamp = int_arg("timestamp", timestamp)
        bcq = self._batch_queue(topic, queue_id)
        if bcq is not None:
            # 5.x DefaultMessageStore: the queue's answer clamped into [min, max]
            found = bcq.get_offset_in_queue_by_time(timestamp, boundary)
            return min(max(found, bcq.get_min_offset_in_queue()), bcq.get_max_offset_in_queue())
        cq = self.consume_queue_store.find_consume_queue(topic, queue_id, create=False)
        if cq is None:
            return 0
        cl_min = self.commit_log.get_min_offset()
        reader = _StoreTimeReader(self.commit_log, cl_min)
        try:
            return cq.get_offset_in_queue_by_time(
                timestamp, commit_log_min_offset=cl_min, pickup_store_timestamp=reader, boundary=boundary,
            )
        finally:
            reader.close()

    def estimate_message_count(self, topic: str, queue_id: int, from_offset: int, to_offset: int,
                               message_filter: MessageFilter | None = None) -> int:
        """RocketMQ 5.x ``MessageStore.estimateMessageCount``: about how many messages of queue
        offsets ``[from_offset, to_offset)`` match ``message_filter`` (what the broker uses to
        show a filtered consumer's lag without reading the messages).

        ``DefaultMessageStore``'s steps, in order (the same in every 5.x source read, up to 5.3.x):

        * ``from < 0`` becomes 0; then ``from >= to`` answers 0.
        * No filter: ``to - from`` at once, whatever the queue holds (``to`` is not clamped to
          the max offset, and the queue is not looked at).
        * ``from`` below the queue's min offset moves the window up to it, keeping its length
          (``to`` moves as much).
        * The queue's own estimate (:meth:`ConsumeQueue.estimate_message_count`,
          :meth:`BatchConsumeQueue.estimate_message_count`): the units scanned in their files,
          exact while at most ``max_consume_queue_scan`` (20,000) units are scanned and at most
          ``sample_count_threshold`` (5,000) match, else ``(long) (match * (to - from) * 1.0 /
          raw)``. A BatchConsumeQueue counts messages (batch sizes), its limits count units.
        * The queue answers -1 when it cannot tell (no file overlaps the range; in a
          BatchConsumeQueue, ``to`` at or past the max offset); that becomes ``to - from``.

        So a queue the store lacks (an unknown topic or queue id, or an invalid topic name,
        which the other readers answer as an absent queue too) answers ``to - from``: RocketMQ
        makes an empty queue on the lookup and its estimate is -1; rmqlab answers the same
        without making one. ``to`` past the last unit is not clamped either: the partly written
        last file is then skipped, so its matches are not counted (an exact count of what the
        full files hold, or 0 within one file).

        A memory topic answers an exact count of its held messages
        (:meth:`MemoryMessageStore.estimate_message_count`). RocketMQ 4.9.8 has no such call; a
        4.9.8 store answers with the 5.x algorithm, since its consume queue files are the same.
        Offsets must be ints that fit a Java ``long`` (InvalidArgument, a TypeError / ValueError
        otherwise).
        """
        self._check_open()
        from_offset, to_offset = int_arg("from_offset", from_offset), int_arg("to_offset", to_offset)
        for name, value in (("from_offset", from_offset), ("to_offset", to_offset)):
            if not _LONG_MIN <= value <= _LONG_MAX:
                raise ValueError(f"{name} must fit a Java long, not {value}")
        from_offset = max(from_offset, 0)
        if from_offset >= to_offset:
            return 0
        if message_filter is None:
            return to_offset - from_offset
        if self._is_memory_topic(topic):
            return self.memory_store.estimate_message_count(  # type: ignore[union-attr]
                topic, queue_id, from_offset, to_offset, message_filter)
        queue = self._batch_queue(topic, queue_id)
        if queue is None:
            queue = self.consume_queue_store.find_consume_queue(topic, queue_id, create=False)
        if queue is None:
            return to_offset - from_offset
        min_offset = queue.get_min_offset_in_queue()
        if from_offset < min_offset:
            from_offset, to_offset = min_offset, _java_long(min_offset + (to_offset - from_offset))
        c = self.config
        count = queue.estimate_message_count(from_offset, to_offset, message_filter,
                                             max_consume_queue_scan=c.max_consume_queue_scan,
                                             sample_count_threshold=c.sample_count_threshold)
        return _java_long(to_offset - from_offset) if count == -1 else int(count)

    def get_message_store_timestamp(self, topic: str, queue_id: int, consume_queue_offset: int) -> int:
        topic, queue_id = queue_args(topic, queue_id)
        consume_queue_offset = int_arg("consume_queue_offset", consume_queue_offset)
        bcq = self._batch_queue(topic, queue_id)
        if bcq is not None:  # getCqUnitAndStoreTime: the unit's record's store time
            bunit = bcq.get(consume_queue_offset)
            return -1 if bunit is None else self.commit_log.pickup_store_timestamp(bunit[0], bunit[1])
        cq = self.consume_queue_store.find_consume_queue(topic, queue_id, create=False)
        unit = cq.get_unit(consume_queue_offset) if cq is not None else None
        if unit is None:
            return -1
        return self.commit_log.pickup_store_timestamp(unit[0], unit[1])

    def get_earliest_message_time(self, topic: str | None = None, queue_id: int = 0) -> int:
        """Store time of the oldest message (of one queue when ``topic`` is given); -1 if none.

        The whole store's answer is RocketMQ's ``pickupStoreTimestamp(minPhyOffset, size)``:
        4.9.8 asks for ``2 * maxMessageSize`` bytes there (8 MiB by default), so it answers -1
        until that much of the oldest file is written after the min offset (a small or young
        store); 5.3.3 asks for the record's head only (the store time's position + 8 bytes, +20
        with an IPv6 store host). ``get_earliest_message_time(topic, queue_id)`` reads the
        record of the queue's oldest unit in both.
        """
        if topic is None:
            first = self.commit_log.get_min_offset()
            if first < 0:
                return -1
            if self.config.is_v4:
                size = 2 * self.config.max_message_size
            else:
                size = store_timestamp_position(0) + (20 if ":" in self.commit_log.store_host[0] else 8)
            return self.commit_log.pickup_store_timestamp(first, size)
        return self.get_message_store_timestamp(topic, queue_id, self.get_min_offset_in_queue(topic, queue_id))

    def dispatch_behind_bytes(self) -> int:
        return self.reput.dispatch_behind_bytes()

    def wait_dispatched(self, timeout_s: float = 10.0) -> bool:
        """Block until every message put before the call is dispatched (stepped: dispatch now);
        False if that did not happen within ``timeout_s`` (threaded).

        With the transient store pool, dispatch sees committed bytes only, so what the pool holds
        is committed first (as ``flush()`` does), whatever the commit service's page rules say.
        A 5.x SYNC_FLUSH store dispatches flushed bytes only: what a store service appended
        without waiting for the flush (a delivered delayed message) is flushed first.
        """
        mfq = self.commit_log.mapped_file_queue
        target = mfq.get_max_wrote_position()
        if self.commit_service is not None:
            while mfq.committed_where < target and not mfq.commit(0):
                pass
        if not self.threaded:
            self._drain_reput()
            return self.reput.dispatch_behind_bytes() == 0
        if self.reput.flushed_only:
            while not mfq.flush(0):
                pass
        deadline = time.monotonic() + timeout_s
        while self.reput.reput_from_offset < target:
            if time.monotonic() > deadline:
                return False
            self.runner.wakeup("reput")
            time.sleep(0.001)
        return True

    def flush(self) -> int:
        """Commit and flush the CommitLog and consume queues now; returns the flushed offset."""
        mfq = self.commit_log.mapped_file_queue
        if self.transient_store_pool is not None:
            while not mfq.commit(0):
                pass
        while not mfq.flush(0):
            pass
        self.consume_queue_store.flush(0)
        return mfq.flushed_where

    # ------------------------------------------------------------------ reading
    def look_message_by_offset(self, commit_log_offset: int, size: int | None = None) -> MessageRecord | None:
        """Decode the message at a CommitLog offset (None if nothing is there)."""
        commit_log_offset = int_arg("commit_log_offset", commit_log_offset)
        if size is None:
            return self.commit_log.look_message(commit_log_offset)
        sel = self.commit_log.get_message(commit_log_offset, size)
        if sel is None:
            return None
        try:
            rec = decode_message(sel.buffer, 0)
        except RmqlabError:
            return None
        finally:
            sel.release()
        return rec if isinstance(rec, MessageRecord) else None

    def _correct(self, old: int, new: int) -> int:
        if self.config.broker_role == "SLAVE" and not self.config.offset_check_in_slave:
            return old
        return new

    def get_message(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_msg_nums: int,
        message_filter: MessageFilter | None = None,
    ) -> GetMessageResult:
        """Up to ``max_msg_nums`` messages from ``offset`` of a queue, RocketMQ 4.9.8's rules.

        Messages are zero-copy views; call ``result.release()`` (or use ``with``) when done.
        Nothing is decoded until a message is: the first ``decode()`` (or record attribute) of
        any message decodes every message of the result, in one pass, as RocketMQ's client
        decodes a whole pull result (``StoredMessage``).
        """
        self._check_open()
        if topic.__class__ is not str or queue_id.__class__ is not int or offset.__class__ is not int \
                or max_msg_nums.__class__ is not int:
            topic, queue_id = queue_args(topic, queue_id)
            offset, max_msg_nums = int_arg("offset", offset), int_arg("max_msg_nums", max_msg_nums)
        if self._is_memory_topic(topic):
            return self.memory_store.get_message(  # type: ignore[union-attr]
                group, topic, queue_id, offset, max_msg_nums, message_filter)
        status = GetMessageStatus.NO_MESSAGE_IN_QUEUE
        next_begin = offset
        min_offset = max_offset = 0
        result = GetMessageResult(status)
        max_offset_py = self.commit_log.get_max_offset()
        bcq = self._batch_queue(topic, queue_id, create=True)
        if bcq is not None:
            return self._get_batch_message(bcq, offset, max_msg_nums, message_filter, max_offset_py, result)
        # RocketMQ creates the queue object on demand (no files), hence NO_MESSAGE_IN_QUEUE.
        try:
            cq = self.consume_queue_store.find_consume_queue(topic, queue_id, create=True)
        except (InvalidTopic, ValueError):
            # An illegal topic ("../x") or a negative queue id: RocketMQ would make an empty,
            # file-less queue object and answer NO_MESSAGE_IN_QUEUE. rmqlab gives the same answer
            # without making a queue for a name that can never be stored (it used to raise).
            cq = None
        if cq is None:
            status, next_begin = GetMessageStatus.NO_MESSAGE_IN_QUEUE, self._correct(offset, 0)
        else:
            min_offset = cq.get_min_offset_in_queue()
            max_offset = cq.get_max_offset_in_queue()
            outside = self._outside_queue(offset, min_offset, max_offset)
            if outside is not None:
                status, next_begin = outside
            else:
                status, next_begin = self._scan(cq, offset, max_msg_nums, message_filter, max_offset_py, result)
        result.status = status
        result.next_begin_offset = next_begin
        result.min_offset = min_offset
        result.max_offset = max_offset
        self.stats.record_get(len(result.messages))
        return result

    def _outside_queue(self, offset: int, min_offset: int, max_offset: int) -> tuple[GetMessageStatus, int] | None:
        """``getMessage``'s answer for an offset outside ``[min_offset, max_offset)`` (or an empty
        queue): status and next begin offset; None when the offset is inside and must be read."""
        if max_offset == 0:
            return GetMessageStatus.NO_MESSAGE_IN_QUEUE, self._correct(offset, 0)
        if offset < min_offset:
            return GetMessageStatus.OFFSET_TOO_SMALL, self._correct(offset, min_offset)
        if offset == max_offset:
            return GetMessageStatus.OFFSET_OVERFLOW_ONE, self._correct(offset, offset)
        if offset > max_offset:
            return GetMessageStatus.OFFSET_OVERFLOW_BADLY, self._correct(offset, max_offset)
        return None

    def _get_batch_message(self, bcq: Any, offset: int, max_msg_nums: int, message_filter: MessageFilter | None,
                           max_offset_py: int, result: GetMessageResult) -> GetMessageResult:
        """``get_message`` over a BatchConsumeQueue, 5.3.3's ``DefaultMessageStore.getMessage``:
        each unit returns its whole record (all its ``batch_size`` messages); the count, the
        batch-full test (``count + batchNum > maxMsgNums``) and ``next_begin_offset`` (the last
        unit looked at's ``msgBaseOffset + batchSize``, filtered units included) go by batch size;
        the tag filter tests the unit's tags code. The CQ window is ``max(maxFilterMessageSize,
        maxMsgNums * 46)`` bytes of units past the requested offset; one BCQ file per call."""
        c = self.config
        min_offset = bcq.get_min_offset_in_queue()
        max_offset = bcq.get_max_offset_in_queue()
        next_begin = offset
        outside = self._outside_queue(offset, min_offset, max_offset)
        if outside is not None:
            status, next_begin = outside
        else:
            max_filter = max(c.max_filter_message_size, max_msg_nums * _BCQ_UNIT)
            max_pull = _MAX_PULL_MSG_SIZE  # (maxTotalMsgSize defaults to it)
            memory = self._memory_for_messages()
            status = GetMessageStatus.NO_MATCHED_MESSAGE
            max_phy_pulling = 0
            total = count = 0
            messages = result.messages
            if next_begin < max_offset:  # travelCqFileNumWhenGetMessage = 1: one BCQ file
                units = bcq.units_from(next_begin, max_filter // _BCQ_UNIT + 2)
                if len(units) == 0:
                    status = GetMessageStatus.OFFSET_FOUND_NULL
                    next_begin = self._correct(next_begin, bcq.roll_next_file(next_begin))
                else:
                    next_phy_file_start = _LONG_MIN
                    rows = zip(units["commit_log_offset"].tolist(), units["size"].tolist(),
                               units["tags_code"].tolist(), units["msg_base_offset"].tolist(),
                               units["batch_size"].tolist(), strict=True)
                    for off_py, size_py, tags_code, base, batch_num in rows:
                        if next_begin >= max_offset:
                            break
                        if (base - offset) * _BCQ_UNIT > max_filter:
                            break
                        if total and count:  # 5.x isTheBatchFull
                            if count + batch_num > max_msg_nums or total + size_py > max_pull:
                                break
                            if max_offset_py - off_py <= memory:
                                if total + size_py > c.max_transfer_bytes_on_message_in_memory \
                                        or count > c.max_transfer_count_on_message_in_memory - 1:
                                    break
                            elif total + size_py > c.max_transfer_bytes_on_message_in_disk \
                                    or count > c.max_transfer_count_on_message_in_disk - 1:
                                break
                        if total >= max_pull:
                            break
                        max_phy_pulling = off_py
                        next_begin = base + batch_num
                        if next_phy_file_start != _LONG_MIN and off_py < next_phy_file_start:
                            continue
                        if message_filter is not None and not message_filter.is_matched_by_consume_queue(tags_code):
                            result.filtered_count += 1
                            if not total:
                                status = GetMessageStatus.NO_MATCHED_MESSAGE
                            continue
                        sel = self.commit_log.get_message(off_py, size_py)
                        if sel is None:
                            if not total:
                                status = GetMessageStatus.MESSAGE_WAS_REMOVING
                            next_phy_file_start = self.commit_log.roll_next_file(off_py)
                            continue
                        if message_filter is not None and not message_filter.is_matched_by_commit_log(sel.buffer):
                            sel.release()
                            if not total:
                                status = GetMessageStatus.NO_MATCHED_MESSAGE
                            continue
                        m = StoredMessage(sel, sel.buffer, off_py, size_py)
                        m._batch = messages
                        messages.append(m)
                        result.batch_sizes.append(batch_num)
                        total += size_py
                        count += batch_num
                        status = GetMessageStatus.FOUND
                        next_phy_file_start = _LONG_MIN
            result.buffer_total_size = total
            result.suggest_pulling_from_slave = max_offset_py - max_phy_pulling > memory
        result.status = status
        result.next_begin_offset = next_begin
        result.min_offset = min_offset
        result.max_offset = max_offset
        self.stats.record_get(result.message_count)
        return result

    def _scan(self, cq: Any, offset: int, max_msg_nums: int, message_filter: MessageFilter | None,
              max_offset_py: int, result: GetMessageResult) -> tuple[GetMessageStatus, int]:
        sel_cq = cq.get_index_buffer(offset)
        if sel_cq is None:
            return GetMessageStatus.OFFSET_FOUND_NULL, self._correct(offset, cq.roll_next_file(offset))
        status = GetMessageStatus.NO_MATCHED_MESSAGE
        long_min = next_phy_file_start = _LONG_MIN
        max_phy_pulling = 0
        c = self.config
        window_units = c.get_message_window_units(max_msg_nums)
        memory = self._memory_for_messages()
        messages = result.messages
        append = messages.append
        select = self.commit_log.select_from
        get = self.commit_log.get_message
        shared: SharedSelection | None = None
        sh_start = sh_end = 0  # the shared selection's [start, end) and buffer
        sh_buf = memoryview(b"")
        count = skipped = 0  # messages found and units skipped (the next pull starts after both)
        total = 0  # result.buffer_total_size, kept local in the loop
        no_filter = message_filter is None
        max_addr = _MAX_ADDR  # (a local: the filtered path compares every tags code with it)
        # the limits of 4.9.8's isTheBatchFull, hoisted out of the loop (checked inline below)
        disk_bytes, disk_count = c.max_transfer_bytes_on_message_in_disk, c.max_transfer_count_on_message_in_disk
        mem_bytes, mem_count = c.max_transfer_bytes_on_message_in_memory, c.max_transfer_count_on_message_in_memory
        try:
            buf = sel_cq.buffer
            # Hot loop: the units come out of one struct.iter_unpack over the window (C-level),
            # not three int.from_bytes slices per unit.
            window = min(sel_cq.size // _CQ_UNIT, window_units) * _CQ_UNIT
            units = _CQ_UNIT_STRUCT.iter_unpack(buf[:window])
            if message_filter is not None and cq.consume_queue_ext is not None:
                # ext addresses resolved with numpy a chunk at a time, not one ext.get a unit
                units = cq.iter_units_resolved(buf[:window])
            for off_py, size_py, tags_code in units:
                max_phy_pulling = off_py
                if next_phy_file_start != long_min and off_py < next_phy_file_start:
                    skipped += 1
                    continue
                if total and count:  # isTheBatchFull(sizePy, maxMsgNums, total, count, isInDisk)
                    if max_msg_nums <= count:
                        break
                    if (max_offset_py - off_py) > memory:
                        if total + size_py > disk_bytes or count >= disk_count:
                            break
                    elif total + size_py > mem_bytes or count >= mem_count:
                        break
                if (no_filter and sh_start <= off_py and off_py + size_py <= sh_end and size_py >= 0
                        and shared is not None):
                    # The common case first, in one test: no filter, inside the current shared
                    # selection. What the general path below does for it, without its temporaries:
                    # StoredMessage(shared, view, off_py, size_py) built without the __init__ call,
                    # holding the selection's buffer and its place in it (no view made here),
                    # linked to the result's messages (its first decode decodes them all).
                    shared._refs += 1  # shared.acquire()
                    m = _new_object(StoredMessage)
                    m._selection = shared
                    m._view = None
                    m._base = sh_buf
                    m._at = off_py - sh_start
                    m._batch = messages
                    m.commit_log_offset = off_py
                    m.size = size_py
                    m._record = None
                    append(m)
                    total += size_py
                    count += 1
                    next_phy_file_start = long_min
                    continue
                if message_filter is not None and not message_filter.is_matched_by_consume_queue(
                        tags_code if tags_code > max_addr else cq.resolve_tags_code(tags_code)):
                    # (an ext address: the real tags code, or None -- matches -- when unresolved)
                    result.filtered_count += 1
                    if not messages:
                        status = GetMessageStatus.NO_MATCHED_MESSAGE
                    skipped += 1
                    continue
                # commit_log.get_message(off_py, size_py), served from one selection per file;
                # the message holds the selection's buffer and its place in it (no view made here)
                holder: SharedSelection | SelectMappedBufferResult | None
                if sh_start <= off_py and off_py + size_py <= sh_end and size_py >= 0 and shared is not None:
                    # the common case first, in one test: inside the current shared selection
                    base = sh_buf
                    a = off_py - sh_start
                    view = None
                    shared._refs += 1  # shared.acquire()
                    holder = shared
                else:
                    if shared is None or not (sh_start <= off_py and off_py + size_py <= sh_end):
                        if shared is not None:
                            shared.release()
                        shared = None
                        sh_start = sh_end = 0
                        sel = select(off_py)
                        if sel is not None:
                            shared = SharedSelection(sel)
                            sh_start, sh_end, sh_buf = shared.start, shared.end, shared.buffer
                    holder = shared
                    if shared is None or size_py < 0 or off_py + size_py > sh_end:
                        holder = get(off_py, size_py)  # the exact rule for what a shared one can't serve
                        if holder is None:
                            if not messages:
                                status = GetMessageStatus.MESSAGE_WAS_REMOVING
                            next_phy_file_start = self.commit_log.roll_next_file(off_py)
                            skipped += 1
                            continue
                        base = view = holder.buffer
                        a = 0
                    else:
                        base = sh_buf
                        a = off_py - sh_start
                        view = None
                        shared._refs += 1  # shared.acquire()
                if message_filter is not None:
                    if view is None:
                        view = base[a : a + size_py]
                    if not message_filter.is_matched_by_commit_log(view):
                        with contextlib.suppress(BufferError):
                            view.release()
                        holder.release()
                        if not messages:
                            status = GetMessageStatus.NO_MATCHED_MESSAGE
                        skipped += 1
                        continue
                # StoredMessage(holder, view, off_py, size_py), built without the __init__ call,
                # linked to the result's messages (its first decode decodes them all)
                m = _new_object(StoredMessage)
                m._selection = holder
                m._view = view
                m._base = base
                m._at = a
                m._batch = messages
                m.commit_log_offset = off_py
                m.size = size_py
                m._record = None
                append(m)
                total += size_py
                count += 1
                next_phy_file_start = long_min
        finally:
            result.buffer_total_size = total
            sel_cq.release()
            if shared is not None:
                shared.release()
        result.suggest_pulling_from_slave = max_offset_py - max_phy_pulling > memory
        # once a message is found the status stays FOUND (the skips above only set it while
        # there is none); every unit looked at is a message or a skip
        return (GetMessageStatus.FOUND if count else status), offset + count + skipped

    def _memory_for_messages(self) -> float:
        """Bytes of CommitLog RocketMQ treats as "in memory" (``accessMessageInMemoryMaxRatio``
        of physical memory); computed once, it does not change while the store runs."""
        memory = self._memory_cache
        if memory is None:
            memory = self._memory_cache = _total_physical_memory() * (
                self.config.access_message_in_memory_max_ratio / 100.0
            )
        return memory

    def query_message(self, topic: str, key: str, max_num: int | None = None, begin: int = 0,
                      end: int = _LONG_MAX) -> QueryMessageResult:
        """Messages indexed under ``topic#key`` (4.9.8's ``queryMessage``), keys checked exactly.

        ``phy_offsets`` are RocketMQ's answer (hash matches, sorted, duplicates kept, capped);
        ``messages`` only those whose topic is ``topic`` and whose keys or uniq key is ``key``.
        ``max_num`` defaults to ``default_query_max_num`` (32), what a broker passes for a query by
        unique key (other queries carry the client's own number).
        """
        self._check_open()
        topic, key = str_arg("topic", topic), str_arg("key", key)
        max_num = self.config.default_query_max_num if max_num is None else int_arg("max_num", max_num)
        begin, end = int_arg("begin", begin), int_arg("end", end)
        last_query_msg_time = end
        phy_offsets: list[int] = []
        messages: list[MessageRecord] = []
        discarded = 0
        ts = po = 0
        for _ in range(3):
            r = self.index_service.query_offset(topic, key, max_num, begin, last_query_msg_time)
            if not r.phy_offsets:
                break
            offsets = sorted(r.phy_offsets)
            ts, po = r.index_last_update_timestamp, r.index_last_update_phyoffset
            phy_offsets = offsets
            found_any = False
            for m, off in enumerate(offsets):
                rec = self.look_message_by_offset(off)
                if rec is None:
                    continue
                if m == 0:
                    last_query_msg_time = rec.store_timestamp
                found_any = True
                if rec.topic == topic and (key in rec.keys or key == rec.uniq_key):
                    messages.append(rec)
                else:
                    discarded += 1
            if found_any:
                break
            if last_query_msg_time < begin:
                break
        return QueryMessageResult(phy_offsets, messages, discarded, ts, po)

    # ------------------------------------------------------------------ cleanup
    def execute_delete_files_manually(self) -> None:
        """Admin ``DELETE_EXPIRED_COMMITLOG``: the next 20 cleanup rounds delete expired files at any hour."""
        self.clean_commit_log.execute_delete_files_manually()

    def clean_expired_consumer_queue(self) -> list[tuple[str, int]]:
        """Admin ``cleanExpiredConsumerQueue``: destroy every queue whose last unit ends below the
        CommitLog's min offset (all its messages are gone) and forget its queue offset.

        Skips ``SCHEDULE_TOPIC_XXXX`` (4.9.8) or every system topic (5.x); a queue whose last file
        is empty (``getLastOffset() == -1``, "maybe created just now") is kept, as RocketMQ keeps
        it. Returns the ``(topic, queue_id)`` destroyed.
        """
        self._check_admin("clean expired consume queues")
        skip = SCHEDULE_TOPIC.__eq__ if self.config.is_v4 else is_system_topic
        with self.reput.lock:  # no dispatch into a queue being destroyed
            doomed = self.consume_queue_store.expired_queues(self.commit_log.get_min_offset(), skip)
            for topic, queue_id, _ in doomed:
                self._forget_queue(topic, queue_id)
                self.consume_queue_store.destroy_queue(topic, queue_id)
        return [(topic, queue_id) for topic, queue_id, _ in doomed]

    def delete_topics(self, topics: Sequence[str] | set[str]) -> list[str]:
        """Destroy every consume queue of ``topics`` and their directories (5.x ``deleteTopics``).

        The CommitLog keeps the messages until cleanup deletes their files, and the topic's
        config stays (the broker deletes it separately). Returns the topics that had queues.
        """
        self._check_admin("delete topics")
        deleted = []
        with self.reput.lock:
            for topic in topics:
                cs = self.consume_queue_store
                queue_ids = [*cs.consume_queue_table.get(topic, {}), *cs.batch_queue_table.get(topic, {})]
                if not queue_ids:
                    continue
                for queue_id in queue_ids:
                    self._forget_queue(topic, queue_id)
                self.consume_queue_store.destroy_topic(topic)
                deleted.append(topic)
        return deleted

    def clean_unused_topic(self, retain_topics: Sequence[str] | set[str]) -> list[str]:
        """Admin ``cleanUnusedTopic``: delete the queues of every topic not in ``retain_topics``,
        except ``SCHEDULE_TOPIC_XXXX``, ``RMQ_SYS_TRANS_OP_HALF_TOPIC`` and LMQ topics (4.9.8)
        or system and LMQ topics (5.x). Returns them."""
        retain = set(retain_topics)
        cs = self.consume_queue_store
        candidates = [t for t in dict.fromkeys([*cs.consume_queue_table, *cs.batch_queue_table]) if t not in retain]
        if self.config.is_v4:
            candidates = [t for t in candidates if t not in _KEPT_UNUSED_V4 and not is_lmq_topic(t)]
        else:
            candidates = [t for t in candidates if not (is_system_topic(t) or is_lmq_topic(t))]
        return self.delete_topics(candidates)

    def _check_admin(self, what: str) -> None:
        if self.is_shutdown or not self.commit_log.writeable:
            reason = self.commit_log.not_writeable_reason or "store is not writeable"
            raise RmqlabError(f"cannot {what}: {reason} ({self.root})")

    def _forget_queue(self, topic: str, queue_id: int) -> None:
        """``removeQueueFromTopicQueueTable``: the next message to this queue gets offset 0."""
        with self.commit_log.put_lock:
            self.commit_log.topic_queue_table.pop(f"{topic}-{queue_id}", None)

    def plan_cleanup(self, now_ms: int | None = None, disk_ratio: float | None = None) -> CleanupPlan:
        """What the next CleanCommitLogService round would decide (nothing is changed).

        ``now_ms`` defaults to the store's clock; ``disk_ratio`` (0.0-1.0) replaces both measured
        disk ratios (CommitLog and consume queue paths), e.g. 0.86 to see a forced cleanup.
        """
        return self.clean_commit_log.plan(now_ms, disk_ratio)

    def store_stats(self) -> StoreStats:
        return self.stats.snapshot()

    def status(self) -> StoreStatus:
        return StoreStatus(self.loaded, self.started, self.is_shutdown, self.commit_log.writeable, self.last_exit_ok)



