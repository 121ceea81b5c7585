"""Flush and commit services (spec §7.4): how appended bytes reach the disk.

* ``FlushRealTimeService`` (ASYNC_FLUSH): every ``flush_interval_commit_log`` ms flush the
  CommitLog if at least ``flush_commit_log_least_pages`` dirty pages wait; every
  ``flush_commit_log_thorough_interval`` ms flush whatever is dirty (least pages 0) and record
  the flushed store timestamp in the checkpoint.
* ``GroupCommitService`` (SYNC_FLUSH): producers queue a request for "flushed up to offset N"
  and wait; one round swaps the request lists (double buffering) and serves every waiting
  producer with one flush, so concurrent producers share an fsync.
* ``CommitRealTimeService`` (transient store pool): copies pool buffers into the file channel.
* ``FlushConsumeQueueService``: flushes every ConsumeQueue; a thorough round also persists the
  checkpoint.

Each service has ``run_once()`` and ``interval_ms()`` for the runners in ``services.py``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from rmqlab.clock import Clock
from rmqlab.config import MessageStoreConfig
from rmqlab.faults import crash_point
from rmqlab.store.results import PutMessageStatus

_now_ns = time.monotonic_ns  # real time on purpose: how long the disk takes, not the store's clock

if TYPE_CHECKING:
    from rmqlab.files.mapped_file_queue import MappedFileQueue
    from rmqlab.store.consume_queue_store import ConsumeQueueStore
    from rmqlab.store.store_checkpoint import StoreCheckpoint

log = logging.getLogger(__name__)

__all__ = [
    "CommitRealTimeService",
    "FlushConsumeQueueService",
    "FlushRealTimeService",
    "GroupCommitRequest",
    "GroupCommitService",
]


class FlushRealTimeService:
    name = "flush_commit_log"

    def __init__(self, mfq: MappedFileQueue, checkpoint: StoreCheckpoint, config: MessageStoreConfig,
                 clock: Clock) -> None:
        self.mfq = mfq
        self.checkpoint = checkpoint
        self.config = config
        self.clock = clock
        self.last_flush_timestamp = 0

    def interval_ms(self) -> float:
        return self.config.flush_interval_commit_log

    def sleeps(self) -> bool:
        """``flushCommitLogTimed`` (default): the broker's thread ``Thread.sleep``s between
        rounds, so the wakeups of puts (4.9.8 always, 5.x with ``wakeFlushWhenPutMessage``) and
        of the commit service are lost and data waits for the next round; with False it waits
        interruptibly and flushes as soon as it is woken."""
        return self.config.flush_commit_log_timed

    def run_once(self) -> bool:
        """One round; returns True if the flushed position moved."""
        least = self.config.flush_commit_log_least_pages
        now = self.clock.now_ms()
        if now >= self.last_flush_timestamp + self.config.flush_commit_log_thorough_interval:
            self.last_flush_timestamp = now
            least = 0
        before = self.mfq.flushed_where
        crash_point("before_commit_log_flush")
        self.mfq.flush(least)
        crash_point("after_commit_log_flush")
        ts = self.mfq.store_timestamp
        if ts > 0:
            self.checkpoint.physic_msg_timestamp = ts
        return self.mfq.flushed_where != before

    def shutdown(self) -> None:
        for _ in range(10):
            if self.mfq.flush(0):
                break
        ts = self.mfq.store_timestamp
        if ts > 0:
            self.checkpoint.physic_msg_timestamp = ts


class GroupCommitRequest:
    """A producer waiting until the CommitLog is flushed up to ``next_offset``.

    The latch is a bare ``threading.Lock`` taken at creation and released by :meth:`complete`:
    the cheapest blocking primitive CPython has (an ``Event`` builds a ``Condition`` and a
    waiter lock per wait), and a blocked producer never spins.
    """

    __slots__ = ("_latch", "next_offset", "status")

    def __init__(self, next_offset: int) -> None:
        self.next_offset = next_offset
        self.status = PutMessageStatus.FLUSH_DISK_TIMEOUT
        self._latch = threading.Lock()
        self._latch.acquire()

    def complete(self, status: PutMessageStatus) -> None:
        self.status = status
        try:
            self._latch.release()
        except RuntimeError:
            pass  # completed twice: the first status stands for the waiter

    def is_done(self) -> bool:
        return not self._latch.locked()

    def wait(self, timeout_ms: float) -> PutMessageStatus:
        latch = self._latch
        if latch.acquire(timeout=max(timeout_ms, 0) / 1000.0):
            latch.release()  # stay done for any later wait
            return self.status
        return PutMessageStatus.FLUSH_DISK_TIMEOUT


class GroupCommitService:
    """SYNC_FLUSH group commit (``CommitLog.GroupCommitService``, spec §7.4), with overlapping rounds.

    A round takes every request queued so far and serves them with as few ``flush(0)`` calls as
    the data needs (one, unless it crosses into the next file). Up to ``max_in_flight`` rounds
    may force the file at once, because the disk takes ``msync`` calls in parallel far better
    than one after another (2-vCPU VM, ext4 on virtio, 1 KiB appends: 0.4-3.8 k syncs/s one at
    a time, 11-13 k/s four at a time, with less kernel CPU per sync: ~39 vs 55-83 us), and a
    producer that puts while a round's ``msync`` is under way no longer waits for that round and
    then for one of its own. With 8 producers (bench_durability, loaded machine, 8 alternating
    pairs) 8 rounds in flight did 6.4-8.5 k msgs/s against 2.9-8.6 k (median 4.4 k) for one
    round at a time in a service thread; 2 and 4 in flight fell in between. But on a quiet
    machine (msync ~0.15-0.3 ms) overlapping every round costs one msync per message: 8
    producers did 7.3-8.4 k msgs/s that way against 9.3-11.1 k grouping ~4.4 requests per
    round. So a round overlaps the newest one in flight only once that one has forced for
    ``overlap_after_ns`` (1 ms): slow disks overlap, quick ones group. (A round used to start
    behind a young one also once a *cohort*, half the producers waiting lately, had queued:
    ~3.7 messages per msync with two msyncs in flight. With producers running rounds
    themselves, grouping alone now does better, 4.3-4.4 messages per msync: alternating in one
    session, 3 s rows, medians of 4-8 runs, 4 producers 10.3 -> 11.2 k msgs/s, 8 producers
    13.2-13.6 -> 14.1-14.2 k, 16 producers 14.5 -> 15.1 k.) Overlapping is safe
    because each flush forces from the flushed position it read (bytes already on disk) to its
    own end, so its return alone proves everything below that end is on disk, and the flushed
    position only moves forward (``MappedFile.flush``).

    Rounds run in whatever thread gets there first: a producer right after queueing its request
    (:meth:`try_run_once`, no hand-off to a service thread and back), or the service thread,
    which polls every 10 ms like RocketMQ's ``waitForRunning(10)`` as a backstop. A thread that
    finishes a round starts the next one while requests wait, so no request is left behind when
    every slot was busy at the time it was queued: ``_round`` guards the in-flight count, a
    finishing round gives its slot back under it and only then looks at the queue, and a thread
    that declined to start a round (slots full, or the newest round still young) did so under
    it after its request was queued.
    A producer whose own request is served hands what still waits to the service thread
    (``wake``) instead of flushing for the others. A blocked producer never spins: it waits on
    its request's latch.
    """

    name = "group_commit"
    max_in_flight = 8
    # A round may overlap the newest one in flight only once that one has forced for this long:
    # a quick disk (msync ~0.15-0.3 ms on a quiet VM) is better used by grouping more requests
    # into the next round; a slow one (1-2 ms under load) by forcing several ranges at once.
    overlap_after_ns = 1_000_000

    def __init__(self, mfq: MappedFileQueue, checkpoint: StoreCheckpoint, config: MessageStoreConfig) -> None:
        self.mfq = mfq
        self.checkpoint = checkpoint
        self.config = config
        self._lock = threading.Lock()  # guards the request list
        self._round = threading.Lock()  # guards the in-flight count; held while a round starts
        self._requests: list[GroupCommitRequest] = []
        self._in_flight = 0
        self._last_start_ns = 0
        self.wake: Callable[[], None] | None = None  # wakes the service thread (threaded runner)
        self.attempts = 2 if config.is_v4 else 1000
        self.rounds = 0
        self.flushes = 0

    def interval_ms(self) -> float:
        return 10.0

    def put_request(self, request: GroupCommitRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def pending(self) -> int:
        """Requests queued and not yet taken by a round."""
        return len(self._requests)

    def in_flight(self) -> int:
        """Rounds started and not yet finished."""
        return self._in_flight

    def run_once(self) -> int:
        """Serve every queued request (rounds until none waits); returns how many were served.

        With nothing queued and no round running it flushes anyway, as RocketMQ's service does.
        """
        served = self._drive()
        if served == 0 and self._in_flight == 0 and not self._requests:
            self.mfq.flush(0)
        return served

    def try_run_once(self, request: GroupCommitRequest | None = None) -> bool:
        """Run rounds in the calling thread while requests wait and a slot is free; True if any ran.

        What a SYNC_FLUSH producer calls right after queueing ``request``. When every slot is
        taken it returns False at once: the rounds in flight look at the queue when they finish.
        Once ``request`` is served the producer goes back to producing and leaves any requests
        still queued to the service thread (``wake``), so no producer is kept flushing for others.
        """
        try:
            return self._drive(request) > 0
        except Exception:  # as in the service thread: logged; the waiting requests time out
            log.exception("group commit round failed in a producer thread")
            return True

    def _drive(self, request: GroupCommitRequest | None = None) -> int:
        served = 0
        while self._requests:
            n = self._run_round()
            if n is None:
                break
            served += n
            if request is not None and self.wake is not None and request.is_done():
                if self._requests:
                    self.wake()
                break
        return served

    def _run_round(self) -> int | None:
        """One round: take the queue and serve it; None if no slot was free (or no round may start).

        A round cut short (a KeyboardInterrupt in the producer leading it, at any place an
        interrupt can land, even a second one in the cleanup) gives its slot back and puts its
        requests back at the head of the queue for the next round (served ones are answered
        again as no-ops). Before, an interrupt just after ``_round`` was released kept the
        slot counted for good (the next round started within ``overlap_after_ns`` of it was
        refused: a stepped store answered that put FLUSH_DISK_TIMEOUT at once), and one just
        after ``_round`` was taken kept it taken (no round ever again).
        """
        if self._round.locked():
            return None  # another thread is starting a round: it looks at the queue after its own
        requests: list[GroupCommitRequest] | None = None
        served = False
        try:
            # ``with`` on the C lock: taken and protected at once, where an interrupt after
            # ``acquire(blocking=False)`` returned left it taken for good (the check above
            # makes a wait here rare: only when two threads race to start a round)
            with self._round:
                queued = len(self._requests)
                if not queued:
                    return 0  # another thread took the queue since the caller looked
                if self._in_flight:
                    if self._in_flight >= self.max_in_flight:
                        return None  # the rounds in flight look at the queue when they finish
                    if _now_ns() - self._last_start_ns < self.overlap_after_ns:
                        return None  # a young round: better to share the next one than to overlap
                self._last_start_ns = _now_ns()
                self.rounds += 1
                with self._lock:  # the swap and the count with no interrupt point between them
                    requests, self._requests = self._requests, []
                    self._in_flight += 1
            self._serve(requests)
            served = True
        finally:
            if requests is not None:
                with self._round:  # a C lock: nothing in here can be interrupted
                    self._in_flight -= 1
                    if not served:
                        with self._lock:
                            self._requests[:0] = requests
        return len(requests)

    def _serve(self, requests: list[GroupCommitRequest]) -> None:
        if not requests:
            return
        mfq = self.mfq
        flushes = 0
        for req in requests:
            ok = mfq.flushed_where >= req.next_offset
            for _ in range(self.attempts):
                if ok:
                    break
                crash_point("before_commit_log_flush")
                mfq.flush(0)
                crash_point("after_commit_log_flush")
                flushes += 1
                ok = mfq.flushed_where >= req.next_offset
            req.complete(PutMessageStatus.PUT_OK if ok else PutMessageStatus.FLUSH_DISK_TIMEOUT)
        with self._round:
            self.flushes += flushes
        ts = mfq.store_timestamp
        if ts > 0:
            self.checkpoint.physic_msg_timestamp = ts

    def shutdown(self) -> None:
        self.run_once()
        self.run_once()


class CommitRealTimeService:
    name = "commit_commit_log"

    def __init__(self, mfq: MappedFileQueue, config: MessageStoreConfig, clock: Clock,
                 on_committed: callable | None = None) -> None:  # type: ignore[valid-type]
        self.mfq = mfq
        self.config = config
        self.clock = clock
        self.last_commit_timestamp = 0
        self.on_committed = on_committed

    def interval_ms(self) -> float:
        return self.config.commit_interval_commit_log

    def run_once(self) -> bool:
        least = self.config.commit_commit_log_least_pages
        begin = self.clock.now_ms()
        if begin >= self.last_commit_timestamp + self.config.commit_commit_log_thorough_interval:
            self.last_commit_timestamp = begin
            least = 0
        nothing_moved = self.mfq.commit(least)
        if not nothing_moved:
            self.last_commit_timestamp = self.clock.now_ms()
            if self.on_committed is not None:
                self.on_committed()
        return not nothing_moved

    def shutdown(self) -> None:
        for _ in range(10):
            if self.mfq.commit(0):
                break


class FlushConsumeQueueService:
    name = "flush_consume_queue"

    def __init__(self, cq_store: ConsumeQueueStore, checkpoint: StoreCheckpoint, config: MessageStoreConfig,
                 clock: Clock) -> None:
        self.cq_store = cq_store
        self.checkpoint = checkpoint
        self.config = config
        self.clock = clock
        self.last_flush_timestamp = 0

    def interval_ms(self) -> float:
        return self.config.flush_interval_consume_queue

    def run_once(self, *, thorough: bool = False) -> bool:
        least = 0 if thorough else self.config.flush_consume_queue_least_pages
        logics_ts = 0
        now = self.clock.now_ms()
        if thorough or now >= self.last_flush_timestamp + self.config.flush_consume_queue_thorough_interval:
            self.last_flush_timestamp = now
            least = 0
            logics_ts = self.checkpoint.logics_msg_timestamp
        self.cq_store.flush(least)
        if least == 0:
            if logics_ts > 0:
                self.checkpoint.logics_msg_timestamp = logics_ts
            crash_point("before_checkpoint_flush")
            self.checkpoint.flush()
        return least == 0

    def shutdown(self) -> None:
        for _ in range(3):
            self.run_once(thorough=True)
