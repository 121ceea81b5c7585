"""SYNC_FLUSH group commit with overlapping rounds: an ack still means "on disk".

Several rounds may force the CommitLog at once (``GroupCommitService.max_in_flight``). These
tests slow the force down so that rounds really overlap, record every force that *finished*,
and check at each acknowledgement that the message's bytes lie inside finished forces (what a
power cut keeps); that the flushed position never moves back; that no request is left waiting
when every slot was busy; and that a round dying at a crash point frees its slot.
"""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

import pytest

from rmqlab import MessageStore, MessageStoreConfig
from rmqlab.faults import arm, disarm
from rmqlab.files.mapped_file import MappedFile
from rmqlab.store.flush import GroupCommitService
from rmqlab.store.message import Message
from rmqlab.store.results import PutMessageStatus


class ForceRecorder:
    """Wraps ``MappedFile._force_range`` of CommitLog files: a random delay, then the real force;
    remembers the absolute ranges whose force returned and the most rounds seen in flight."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, max_delay_s: float = 0.004, min_delay_s: float = 0.0) -> None:
        self.done: list[tuple[int, int]] = []
        self.lock = threading.Lock()
        self.max_in_flight_seen = 0
        self.concurrent = 0
        self.max_concurrent = 0
        self.gc: GroupCommitService | None = None
        real = MappedFile._force_range
        rng = random.Random(5)
        recorder = self

        def force_range(mf: MappedFile, start: int, end: int) -> None:
            if "commitlog" not in mf.file_name:
                real(mf, start, end)
                return
            with recorder.lock:
                recorder.concurrent += 1
                recorder.max_concurrent = max(recorder.max_concurrent, recorder.concurrent)
                if recorder.gc is not None:
                    recorder.max_in_flight_seen = max(recorder.max_in_flight_seen, recorder.gc.in_flight())
                delay = rng.uniform(min_delay_s, max_delay_s)
            time.sleep(delay)
            try:
                real(mf, start, end)
            finally:
                with recorder.lock:
                    recorder.concurrent -= 1
            with recorder.lock:
                recorder.done.append((mf.file_from_offset + start, mf.file_from_offset + end))

        monkeypatch.setattr(MappedFile, "_force_range", force_range)

    def covered(self, start: int, end: int) -> bool:
        """Whether ``[start, end)`` lies inside the union of the finished forces."""
        with self.lock:
            ranges = sorted(self.done)
        reach = start
        for a, b in ranges:
            if a > reach:
                break
            reach = max(reach, b)
            if reach >= end:
                return True
        return reach >= end


def _store(tmp_path: Path, start: bool = True, **changes: object) -> MessageStore:
    root = str(tmp_path / "s")
    config = MessageStoreConfig.small(root, flush_disk_type="SYNC_FLUSH", **changes)
    return MessageStore.open(root, config, threaded=True, start=start)


def _produce(store: MessageStore, threads: int, puts: int, recorder: ForceRecorder | None) -> list[str]:
    """Run ``threads`` producers; returns every problem seen at acknowledgement time."""
    mfq = store.commit_log.mapped_file_queue
    problems: list[str] = []

    def producer(i: int) -> None:
        msg = Message("TopicO", bytes([65 + i]) * (200 + 37 * i), keys=[f"p{i}"], queue_id=i % 4)
        for n in range(puts):
            r = store.put_message(msg)
            if not r.ok:
                problems.append(f"producer {i} put {n}: {r.status.name}")
                continue
            end = r.wrote_offset + r.wrote_bytes
            flushed = mfq.flushed_where
            if flushed < end:
                problems.append(f"acked {end} with flushed_where {flushed}")
            if recorder is not None and not recorder.covered(r.wrote_offset, end):
                problems.append(f"acked [{r.wrote_offset}, {end}) before a finished force covered it")

    ts = [threading.Thread(target=producer, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return problems


@pytest.mark.parametrize("max_in_flight", [1, 2, 4])
def test_every_ack_is_inside_a_finished_force(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, max_in_flight: int) -> None:
    monkeypatch.setattr(GroupCommitService, "max_in_flight", max_in_flight)
    monkeypatch.setattr(GroupCommitService, "overlap_after_ns", 0)  # overlap as much as the slots allow
    recorder = ForceRecorder(monkeypatch)
    store = _store(tmp_path)  # 64 KiB CommitLog files: rounds cross into new files too
    recorder.gc = store.group_commit
    try:
        problems = _produce(store, threads=12, puts=40, recorder=recorder)
        assert problems == []
        assert len(store.commit_log.mapped_file_queue.mapped_files) > 2
        assert recorder.max_in_flight_seen <= max_in_flight
        if max_in_flight > 1:
            assert recorder.max_concurrent >= 2, "the rounds never overlapped"
        gc = store.group_commit
        assert gc is not None
        assert gc.in_flight() == 0
        assert gc.pending() == 0
    finally:
        store.shutdown()


@pytest.mark.parametrize("max_in_flight", [1, 2])
@pytest.mark.parametrize("service_wake", [True, False])
def test_no_request_is_left_behind_when_every_slot_is_busy(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, service_wake: bool, max_in_flight: int) -> None:
    """Producers put all at once (a barrier before each put), so most find every slot busy.
    The service thread's 10 ms poll is switched off: only the rounds in flight looking at the
    queue when they finish (and, with ``service_wake``, the wake of the service thread) can
    serve those requests. A lost one would time out."""
    monkeypatch.setattr(GroupCommitService, "max_in_flight", max_in_flight)
    ForceRecorder(monkeypatch, max_delay_s=0.003)
    store = _store(tmp_path, start=False, sync_flush_timeout=5000)
    gc = store.group_commit
    assert gc is not None
    monkeypatch.setattr(gc, "interval_ms", lambda: 600_000.0)
    store.start()
    if not service_wake:
        gc.wake = None  # producers keep running rounds while requests wait
    threads, puts = 12, 8
    barrier = threading.Barrier(threads)
    failed: list[str] = []

    def producer(i: int) -> None:
        msg = Message("TopicO", bytes([65 + i]) * 300, queue_id=i % 4)
        for _ in range(puts):
            barrier.wait()
            r = store.put_message(msg)
            if not r.ok:
                failed.append(r.status.name)

    try:
        ts = [threading.Thread(target=producer, args=(i,)) for i in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert failed == []
    finally:
        barrier.abort()
        store.shutdown()


def test_a_round_dying_at_a_crash_point_frees_its_slot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rounds raise at random flush crash points: their producers get FLUSH_DISK_TIMEOUT, every
    other ack is still flushed, and the store keeps acknowledging afterwards."""
    ForceRecorder(monkeypatch, max_delay_s=0.002)
    store = _store(tmp_path, sync_flush_timeout=1000)

    class Injected(RuntimeError):
        pass

    def die() -> None:
        raise Injected("crash point")

    rng = random.Random(11)
    try:
        for _ in range(3):
            point = rng.choice(["before_commit_log_flush", "after_commit_log_flush"])
            arm(f"{point}:{rng.randrange(2, 30)}", action=die)
            problems = _produce(store, threads=8, puts=15, recorder=None)
            disarm()
            bad = [p for p in problems if not p.endswith(PutMessageStatus.FLUSH_DISK_TIMEOUT.name)]
            assert bad == []
            gc = store.group_commit
            assert gc is not None
            deadline = time.monotonic() + 30
            while gc.in_flight() and time.monotonic() < deadline:
                time.sleep(0.01)
            assert gc.in_flight() == 0
        assert _produce(store, threads=4, puts=10, recorder=None) == []
    finally:
        disarm()
        store.shutdown()


@pytest.mark.parametrize(("overlap_after_ms", "may_overlap"), [(60_000.0, False), (1.0, True)])
def test_rounds_overlap_only_behind_a_slow_force(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, overlap_after_ms: float, may_overlap: bool) -> None:
    """A second round starts only once the newest one has forced for ``overlap_after_ns``: with
    forces of 2-4 ms, a 1 ms threshold overlaps them and a 60 s one never does (it groups
    instead). (It was 1 s: a force stalled for a second on a busy CI disk was rightly overlapped.)"""
    monkeypatch.setattr(GroupCommitService, "max_in_flight", 4)
    monkeypatch.setattr(GroupCommitService, "overlap_after_ns", int(overlap_after_ms * 1e6))
    recorder = ForceRecorder(monkeypatch, max_delay_s=0.004, min_delay_s=0.002)
    store = _store(tmp_path)
    recorder.gc = store.group_commit
    try:
        assert _produce(store, threads=8, puts=25, recorder=recorder) == []
        if may_overlap:
            assert recorder.max_in_flight_seen >= 2
        else:
            assert recorder.max_in_flight_seen <= 1
            assert store.group_commit.rounds < 8 * 25  # requests were grouped
    finally:
        store.shutdown()
