"""The periodic flush services' page and time rules (spec §7.4), driven one round at a time.

FlushRealTimeService: a round flushes the CommitLog only once ``flushCommitLogLeastPages`` (4)
whole pages wait, except every ``flushCommitLogThoroughInterval`` (10 s), when it flushes
whatever waits; the flushed file's store time goes to the checkpoint's physicMsgTimestamp.
FlushConsumeQueueService: 2 pages, a thorough round every 60 s which alone writes the checkpoint
file, with the logicsMsgTimestamp read *before* the queues are flushed.
"""

from __future__ import annotations

from pathlib import Path

from rmqlab import MessageStore, MessageStoreConfig
from rmqlab.clock import ManualClock
from rmqlab.codec.checkpoint import CHECKPOINT_DATA_SIZE, Checkpoint
from rmqlab.store.message import Message

T0 = 1_700_000_000_000


def _store(tmp_path: Path) -> tuple[MessageStore, ManualClock]:
    root = str(tmp_path / "s")
    clock = ManualClock(T0)
    config = MessageStoreConfig.small(root, mapped_file_size_commit_log=1 << 20,
                                      mapped_file_size_consume_queue=4096 * 20)
    return MessageStore.open(root, config, clock=clock, threaded=False), clock


def _on_disk(store: MessageStore) -> Checkpoint:
    with open(store.checkpoint.path, "rb") as f:
        return Checkpoint.unpack(f.read(CHECKPOINT_DATA_SIZE))


def test_flush_real_time_service_least_pages_and_thorough_interval(tmp_path: Path) -> None:
    store, clock = _store(tmp_path)
    try:
        svc = store.flush_commit_log
        assert svc is not None
        mfq = store.commit_log.mapped_file_queue
        assert store.put_message(Message("TopicF", b"x" * 100)).ok
        assert svc.run_once()  # the first round is thorough (last thorough flush at 0): everything
        assert mfq.flushed_where == store.commit_log.get_max_offset()
        assert store.checkpoint.physic_msg_timestamp == mfq.store_timestamp > 0
        clock.advance(500)
        while store.commit_log.get_max_offset() < 3 * 4096 + 200:  # 3 pages: below the 4-page rule
            assert store.put_message(Message("TopicF", b"y" * 1000)).ok
        assert not svc.run_once()
        assert mfq.flushed_where < store.commit_log.get_max_offset()
        while store.commit_log.get_max_offset() < 4 * 4096 + 200:  # a 4th whole page: flushed
            assert store.put_message(Message("TopicF", b"z" * 1000)).ok
        assert svc.run_once()
        assert mfq.flushed_where == store.commit_log.get_max_offset()
        assert store.put_message(Message("TopicF", b"w")).ok
        clock.advance(9_000)  # 9.5 s since the thorough round: still 4 pages
        assert not svc.run_once()
        clock.advance(500)  # 10 s: thorough, the one dirty byte's page is flushed
        assert svc.run_once()
        assert mfq.flushed_where == store.commit_log.get_max_offset()
    finally:
        store.shutdown()


def test_flush_consume_queue_service_writes_the_checkpoint_on_thorough_rounds_only(tmp_path: Path) -> None:
    store, clock = _store(tmp_path)
    try:
        svc = store.flush_consume_queue
        assert svc.run_once()  # the first round is thorough
        before = _on_disk(store)
        clock.advance(1000)
        assert store.put_message(Message("TopicF", b"x")).ok
        store.reput.run_once()
        logics = store.checkpoint.logics_msg_timestamp
        assert logics > before.logics_msg_timestamp
        assert not svc.run_once()  # 2 pages: no CQ page full, no checkpoint write
        assert _on_disk(store) == before
        clock.advance(60_000)
        cqs = store.consume_queue_store
        flush = cqs.flush

        def dispatch_during_flush(least: int) -> object:  # a record dispatched while the queues flush
            store.checkpoint.logics_msg_timestamp = logics + 5000
            return flush(least)

        cqs.flush = dispatch_during_flush  # type: ignore[method-assign]
        try:
            assert svc.run_once()  # thorough
        finally:
            del cqs.flush
        # the value read before the flush is the one written (what the flushed queues cover)
        assert _on_disk(store).logics_msg_timestamp == logics
        assert store.checkpoint.logics_msg_timestamp == logics
    finally:
        store.shutdown()
