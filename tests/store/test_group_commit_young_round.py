"""SYNC_FLUSH group commit: a young round is never overlapped, however many queue behind it.

A round overlaps the newest one in flight only once that one has forced for
``overlap_after_ns``; until then whatever queues behind it waits and is served by the next round,
together (on a quick disk grouping beats overlapping). These tests check the decision with a
fake CommitLog whose force blocks until released, and that acknowledgements stay inside
finished forces with real producers.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from rmqlab import MessageStoreConfig
from rmqlab.store.flush import GroupCommitRequest, GroupCommitService
from rmqlab.store.results import PutMessageStatus

from .test_group_commit_overlap import ForceRecorder, _produce, _store


class GatedQueue:
    """A fake MappedFileQueue: ``flush`` announces itself, blocks until ``gate`` is set, then
    marks everything written so far as flushed."""

    def __init__(self) -> None:
        self.flushed_where = 0
        self.written = 0
        self.store_timestamp = 0
        self.gate = threading.Event()
        self.entered = threading.Semaphore(0)

    def flush(self, least_pages: int) -> int:
        target = self.written
        self.entered.release()
        assert self.gate.wait(10)
        self.flushed_where = max(self.flushed_where, target)
        return self.flushed_where


def _service(mfq: GatedQueue) -> GroupCommitService:
    gc = GroupCommitService(mfq, SimpleNamespace(physic_msg_timestamp=0), MessageStoreConfig())  # type: ignore[arg-type]
    gc.overlap_after_ns = 10**15  # every round in flight stays young
    return gc


def _queue(gc: GroupCommitService, mfq: GatedQueue) -> GroupCommitRequest:
    mfq.written += 100
    req = GroupCommitRequest(mfq.written)
    gc.put_request(req)
    return req


def test_requests_queued_behind_a_young_round_wait_and_share_the_next() -> None:
    mfq = GatedQueue()
    gc = _service(mfq)
    first = [_queue(gc, mfq) for _ in range(4)]
    t1 = threading.Thread(target=gc.try_run_once)
    t1.start()
    assert mfq.entered.acquire(timeout=30)  # a round of 4 is forcing
    assert gc.in_flight() == 1
    assert gc.pending() == 0
    second = []
    for k in range(1, 8):  # 7 producers queue behind it: none may start a round yet
        second.append(_queue(gc, mfq))
        assert gc.try_run_once(second[-1]) is False
        assert gc.in_flight() == 1
        assert gc.pending() == k
    assert not any(r.is_done() for r in first + second)  # nothing acked before its force ends
    mfq.gate.set()
    t1.join(30)
    deadline = time.monotonic() + 30
    while not all(r.is_done() for r in second) and time.monotonic() < deadline:
        gc.try_run_once()  # the finishing round took the queue already, or this does
        time.sleep(0.001)
    assert [r.wait(1000) for r in first + second] == [PutMessageStatus.PUT_OK] * 11
    assert gc.in_flight() == 0
    assert gc.rounds == 2  # the 7 shared one round


def test_a_round_older_than_overlap_after_is_overlapped() -> None:
    mfq = GatedQueue()
    gc = _service(mfq)
    gc.overlap_after_ns = 0  # every round in flight is old enough
    first = _queue(gc, mfq)
    t1 = threading.Thread(target=gc.try_run_once, args=(first,))
    t1.start()
    assert mfq.entered.acquire(timeout=30)
    second = _queue(gc, mfq)
    t2 = threading.Thread(target=gc.try_run_once, args=(second,))
    t2.start()
    assert mfq.entered.acquire(timeout=30)  # a second force alongside the first
    assert gc.in_flight() == 2
    assert not first.is_done()
    assert not second.is_done()
    mfq.gate.set()
    t1.join(30)
    t2.join(30)
    assert first.wait(1000) is PutMessageStatus.PUT_OK
    assert second.wait(1000) is PutMessageStatus.PUT_OK
    assert gc.in_flight() == 0
    assert gc.rounds == 2


@pytest.mark.parametrize("threads", [2, 8])
def test_young_rounds_are_not_overlapped_and_acks_stay_on_disk(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, threads: int) -> None:
    """Forces of 2-4 ms and no overlap by age: producers never force alongside one another and
    their requests are grouped; every ack lies inside a finished force."""
    monkeypatch.setattr(GroupCommitService, "max_in_flight", 4)
    monkeypatch.setattr(GroupCommitService, "overlap_after_ns", 10**12)
    recorder = ForceRecorder(monkeypatch, max_delay_s=0.004, min_delay_s=0.002)
    store = _store(tmp_path)
    recorder.gc = store.group_commit
    try:
        assert _produce(store, threads=threads, puts=25, recorder=recorder) == []
        gc = store.group_commit
        assert gc is not None
        assert recorder.max_in_flight_seen <= 1
        if threads > 2:
            assert gc.rounds < threads * 25  # requests were grouped
        assert gc.in_flight() == 0
        assert gc.pending() == 0
    finally:
        store.shutdown()
