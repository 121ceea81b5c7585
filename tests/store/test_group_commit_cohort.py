"""SYNC_FLUSH group commit: a cohort of producers may overlap a young round.

A round normally overlaps the newest one in flight only once that one has forced for
``overlap_after_ns``. It may also start at once when about half the producers waiting lately
(``cohort_share`` of a decaying peak of requests waiting at once, at least 2) have queued behind
the round in flight: with 8 producers the ones released by the previous round then get their own
msync instead of waiting for the current one. These tests check the decision with a fake
CommitLog whose force blocks until released, and that acknowledgements stay inside finished
forces with real producers.
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
    gc.overlap_after_ns = 10**15  # never by age: only the cohort rule may overlap
    return gc


def _queue(gc: GroupCommitService, mfq: GatedQueue) -> GroupCommitRequest:
    mfq.written += 100
    req = GroupCommitRequest(mfq.written)
    gc.put_request(req)
    return req


def test_half_the_waiting_producers_start_a_round_behind_a_young_one() -> None:
    mfq = GatedQueue()
    gc = _service(mfq)
    first = [_queue(gc, mfq) for _ in range(4)]
    t1 = threading.Thread(target=gc.try_run_once)
    t1.start()
    assert mfq.entered.acquire(timeout=5)  # a round of 4 is forcing
    assert gc.in_flight() == 1
    assert gc.pending() == 0
    second = []
    for k in range(1, 4):  # 1..3 queued behind 4 in flight: fewer than half of 4 + k
        second.append(_queue(gc, mfq))
        assert gc.try_run_once(second[-1]) is False
        assert gc.in_flight() == 1
        assert gc.pending() == k
    second.append(_queue(gc, mfq))  # the 4th: half of the 8 waiting have queued
    t2 = threading.Thread(target=gc.try_run_once, args=(second[-1],))
    t2.start()
    assert mfq.entered.acquire(timeout=5)  # ... so a second round forces alongside the first
    assert gc.in_flight() == 2
    assert gc.pending() == 0
    assert not any(r.is_done() for r in first + second)  # nothing acked before its force ends
    mfq.gate.set()
    t1.join(5)
    t2.join(5)
    assert [r.wait(1000) for r in first + second] == [PutMessageStatus.PUT_OK] * 8
    assert gc.in_flight() == 0
    assert gc.rounds == 2


def test_a_lone_request_never_overlaps_a_young_round() -> None:
    mfq = GatedQueue()
    gc = _service(mfq)
    req = _queue(gc, mfq)
    t1 = threading.Thread(target=gc.try_run_once, args=(req,))
    t1.start()
    assert mfq.entered.acquire(timeout=5)
    other = _queue(gc, mfq)  # one queued behind one in flight: below the floor of 2
    assert gc.try_run_once(other) is False
    assert gc.in_flight() == 1
    assert gc.pending() == 1
    mfq.gate.set()
    t1.join(5)
    deadline = time.monotonic() + 5
    while not other.is_done() and time.monotonic() < deadline:  # the finishing round takes it
        gc.try_run_once()
        time.sleep(0.001)
    assert req.wait(1000) is PutMessageStatus.PUT_OK
    assert other.wait(1000) is PutMessageStatus.PUT_OK


def test_the_producer_estimate_forgets_producers_that_left() -> None:
    mfq = GatedQueue()
    mfq.gate.set()
    gc = _service(mfq)
    for _ in range(8):
        _queue(gc, mfq)
    gc.try_run_once()
    assert gc._peak == 8
    for _ in range(int(8 / gc.peak_decay)):  # one producer from now on
        gc.try_run_once(_queue(gc, mfq))
    assert gc._peak == pytest.approx(1, abs=gc.peak_decay)


@pytest.mark.parametrize(("threads", "may_overlap"), [(2, False), (8, True)])
def test_cohorts_overlap_young_rounds_and_acks_stay_on_disk(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, threads: int, may_overlap: bool) -> None:
    """Forces of 2-4 ms and no overlap by age: 8 producers overlap rounds by cohorts (and still
    group requests), 2 never do; every ack lies inside a finished force."""
    monkeypatch.setattr(GroupCommitService, "max_in_flight", 4)
    monkeypatch.setattr(GroupCommitService, "overlap_after_ns", 10**12)
    recorder = ForceRecorder(monkeypatch, max_delay_s=0.004, min_delay_s=0.002)
    store = _store(tmp_path)
    recorder.gc = store.group_commit
    try:
        assert _produce(store, threads=threads, puts=25, recorder=recorder) == []
        gc = store.group_commit
        assert gc is not None
        if may_overlap:
            assert recorder.max_in_flight_seen >= 2
            assert gc.rounds < threads * 25  # requests were still grouped
        else:
            assert recorder.max_in_flight_seen <= 1
        assert gc.in_flight() == 0
        assert gc.pending() == 0
    finally:
        store.shutdown()
