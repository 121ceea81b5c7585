"""SYNC_FLUSH group commit: what an acknowledgement guarantees, shared flushes, timeouts.

Producers queue a request; one that finds no round running runs it itself, otherwise the service
thread's next round serves it. A PUT_OK means the CommitLog is flushed past the message, and a
flush that cannot finish (or a round that fails) gives FLUSH_DISK_TIMEOUT.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from rmqlab import MessageStore, MessageStoreConfig
from rmqlab.store.flush import GroupCommitRequest
from rmqlab.store.message import Message
from rmqlab.store.results import PutMessageStatus


def sync_store(tmp_path: Path, **changes: object) -> MessageStore:
    root = str(tmp_path / "s")
    config = MessageStoreConfig.small(root, flush_disk_type="SYNC_FLUSH", **changes)
    return MessageStore.open(root, config, threaded=True)


def test_a_request_queued_during_a_round_is_served_by_the_next(tmp_path: Path) -> None:
    store = sync_store(tmp_path)
    try:
        gc = store.group_commit
        assert gc is not None
        assert store.put_message(Message("TopicF", b"x" * 100)).ok
        end = store.commit_log.get_max_offset()
        with gc._round:  # a round is running
            req = GroupCommitRequest(end)
            gc.put_request(req)
            store.runner.wakeup("group_commit")
            time.sleep(0.05)
            assert not req.is_done()  # nobody can serve it while the round runs
        assert req.wait(30_000) is PutMessageStatus.PUT_OK  # the service's next round does
        assert store.commit_log.mapped_file_queue.flushed_where >= end
    finally:
        store.shutdown()


def test_acknowledged_means_flushed_with_concurrent_producers(tmp_path: Path) -> None:
    store = sync_store(tmp_path)
    mfq = store.commit_log.mapped_file_queue
    bad: list[tuple[int, int]] = []
    acked = [0] * 6

    def producer(i: int) -> None:
        msg = Message("TopicF", bytes([i]) * 300, keys=[f"p{i}"], queue_id=i % 2)
        for _ in range(40):
            r = store.put_message(msg)
            assert r.ok, r.status
            end = r.wrote_offset + r.wrote_bytes
            if mfq.flushed_where < end:  # the flushed position never moves back
                bad.append((end, mfq.flushed_where))
            acked[i] += 1

    try:
        threads = [threading.Thread(target=producer, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert bad == []
        assert sum(acked) == 240
        gc = store.group_commit
        assert gc is not None
        # One flush per request at most, except at a file boundary: a round whose flushed
        # prefix still ends in the previous file forces that file's tail first, and with
        # overlapping rounds each of the 6 producers may do so once per boundary.
        assert gc.flushes <= 240 + 6 * (len(mfq.mapped_files) - 1)
        assert store.checkpoint.physic_msg_timestamp > 0  # rounds record the flushed store time
    finally:
        store.shutdown()


def test_a_flush_that_cannot_finish_times_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = sync_store(tmp_path, sync_flush_timeout=300)
    try:
        mfq = store.commit_log.mapped_file_queue
        monkeypatch.setattr(mfq, "flush", lambda least: True)  # the disk never takes anything
        t0 = time.monotonic()
        r = store.put_message(Message("TopicF", b"y" * 50))
        assert r.status is PutMessageStatus.FLUSH_DISK_TIMEOUT
        assert time.monotonic() - t0 < 5  # the round gives up after its attempts, no long wait
    finally:
        monkeypatch.undo()
        store.shutdown()


def test_a_failing_round_is_logged_and_the_producer_times_out(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = sync_store(tmp_path, sync_flush_timeout=200)
    try:
        mfq = store.commit_log.mapped_file_queue

        def broken(least: int) -> bool:
            raise OSError(5, "I/O error")

        monkeypatch.setattr(mfq, "flush", broken)
        r = store.put_message(Message("TopicF", b"z" * 50))
        assert r.status is PutMessageStatus.FLUSH_DISK_TIMEOUT  # the service logs it; never raised here
    finally:
        monkeypatch.undo()
        store.shutdown()


def test_a_lone_producer_runs_the_round_itself(tmp_path: Path) -> None:
    """No round running: the producer serves its own request in its own thread (no hand-off)."""
    store = sync_store(tmp_path)
    try:
        gc = store.group_commit
        assert gc is not None
        ran_in: list[str] = []
        real = gc._run_round

        def spy() -> int:
            ran_in.append(threading.current_thread().name)
            return real()

        gc._run_round = spy  # type: ignore[method-assign]
        time.sleep(0.05)  # let the service's start-up rounds pass
        ran_in.clear()
        r = store.put_message(Message("TopicF", b"w" * 100))
        assert r.ok
        assert store.commit_log.mapped_file_queue.flushed_where >= r.wrote_offset + r.wrote_bytes
        assert threading.current_thread().name in ran_in
        end = store.commit_log.get_max_offset()
        with gc._round:  # a round is running: try_run_once declines, the request waits its turn
            req = GroupCommitRequest(end)
            gc.put_request(req)
            assert gc.try_run_once() is False
            assert not req.is_done()
        store.runner.wakeup("group_commit")
        assert req.wait(30_000) is PutMessageStatus.PUT_OK
    finally:
        store.shutdown()
