"""Where ReputMessageService stops (spec §6.6, §10 "Reput end").

4.9.8 dispatches up to the CommitLog's max offset. 5.x dispatches up to ``getConfirmOffset()``,
which outside controller/duplication mode is ``flushedWhere`` with SYNC_FLUSH and the max offset
with ASYNC_FLUSH: a SYNC_FLUSH 5.x broker never shows a consumer a message that is not on disk,
and never dispatches a record that would end past that offset.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqlab import MessageStore, MessageStoreConfig
from rmqlab.clock import ManualClock
from rmqlab.store.message import Message


def _store(tmp_path: Path, version: str, flush: str) -> MessageStore:
    root = str(tmp_path / "s")
    config = MessageStoreConfig.small(root, rocketmq_version=version, flush_disk_type=flush)
    return MessageStore.open(root, config, clock=ManualClock(1_700_000_000_000), threaded=False)


def _append(store: MessageStore, body: bytes) -> int:
    """Append a record the way a store service does (no wait for the flush); its end offset."""
    r = store.commit_log.put_message(Message("TopicR", body, tags="TagA", keys=["k"], queue_id=0))
    assert r.ok
    return r.wrote_offset + r.wrote_bytes


@pytest.mark.parametrize("direct", [True, False], ids=["hinted", "parsed"])
def test_5x_sync_flush_dispatches_only_flushed_records(tmp_path: Path, direct: bool) -> None:
    store = _store(tmp_path, "5.3.3", "SYNC_FLUSH")
    try:
        mfq = store.commit_log.mapped_file_queue
        first = _append(store, b"a" * 100)
        _append(store, b"b" * 100)
        if not direct:
            store.commit_log.dispatch_hints.clear()  # the reput parses the records
            store.commit_log.dispatch_runs.clear()
        assert mfq.flushed_where == 0
        assert store.reput.run_once() == 0  # nothing flushed: nothing dispatched
        assert store.get_max_offset_in_queue("TopicR", 0) == 0
        assert store.reput.reput_from_offset == 0
        mfq.flushed_where = first  # flushed up to the end of the first record only
        assert store.reput.run_once() == 1
        assert store.get_max_offset_in_queue("TopicR", 0) == 1
        assert store.reput.reput_from_offset == first  # not skipped past the unflushed record
        assert store.reput.run_once() == 0
        while not mfq.flush(0):
            pass
        assert store.reput.run_once() == 1
        assert store.get_max_offset_in_queue("TopicR", 0) == 2
        assert store.reput.reput_from_offset == store.commit_log.get_max_offset()
    finally:
        store.shutdown()


@pytest.mark.parametrize(("version", "flush"), [("4.9.8", "SYNC_FLUSH"), ("5.3.3", "ASYNC_FLUSH"),
                                                ("4.9.8", "ASYNC_FLUSH")])
def test_otherwise_dispatch_runs_to_the_max_offset(tmp_path: Path, version: str, flush: str) -> None:
    store = _store(tmp_path, version, flush)
    try:
        _append(store, b"a" * 100)
        _append(store, b"b" * 100)
        assert store.commit_log.mapped_file_queue.flushed_where == 0
        assert store.reput.run_once() == 2
        assert store.get_max_offset_in_queue("TopicR", 0) == 2
    finally:
        store.shutdown()


def test_5x_sync_flush_wait_dispatched_and_put_message(tmp_path: Path) -> None:
    """A SYNC_FLUSH put is flushed before it is acknowledged, so a step dispatches it; what a
    store service appended without waiting is flushed by ``wait_dispatched`` (as the transient
    pool's tail is committed) and then dispatched."""
    store = _store(tmp_path, "5.3.3", "SYNC_FLUSH")
    try:
        assert store.put_message(Message("TopicR", b"x", queue_id=0)).ok
        store.step()
        assert store.get_max_offset_in_queue("TopicR", 0) == 1
        _append(store, b"y")
        assert store.wait_dispatched()
        assert store.get_max_offset_in_queue("TopicR", 0) == 2
    finally:
        store.shutdown()


@pytest.mark.parametrize("hints", ["hints", "runs", "parsed"])
def test_5x_sync_flush_batched_rounds_stop_at_the_flushed_offset(tmp_path: Path, hints: str) -> None:
    """Rounds large enough to be dispatched in batches (hinted, column runs, bulk-certified)."""
    store = _store(tmp_path, "5.3.3", "SYNC_FLUSH")
    try:
        mfq = store.commit_log.mapped_file_queue
        if hints == "runs":
            msgs = [Message("TopicR", b"m%d" % i, tags="TagA", queue_id=0) for i in range(200)]
            assert store.commit_log.put_messages(msgs).ok
        else:
            for i in range(200):
                _append(store, b"m%d" % i)
        if hints == "parsed":
            store.commit_log.dispatch_hints.clear()
            store.commit_log.dispatch_runs.clear()
        sel = store.commit_log.get_data(0)
        assert sel is not None
        with sel:
            ends, pos = [], 0
            while len(ends) < 150:
                pos += int.from_bytes(sel.buffer[pos:pos + 4], "big")
                ends.append(pos)
        mfq.flushed_where = ends[-1]
        assert store.reput.run_once() == 150
        assert store.reput.reput_from_offset == ends[-1]
        assert store.get_max_offset_in_queue("TopicR", 0) == 150
        while not mfq.flush(0):
            pass
        assert store.reput.run_once() == 50
        assert store.get_max_offset_in_queue("TopicR", 0) == 200
    finally:
        store.shutdown()


def test_a_record_cut_by_the_flushed_offset_is_not_skipped(tmp_path: Path) -> None:
    """A round whose data ends inside a record (it never does: a flush stops at the read
    position) waits for it; a master does not skip it as unparsable."""
    store = _store(tmp_path, "5.3.3", "SYNC_FLUSH")
    try:
        mfq = store.commit_log.mapped_file_queue
        first = _append(store, b"a" * 100)
        end = _append(store, b"b" * 100)
        store.commit_log.dispatch_hints.clear()
        store.commit_log.dispatch_runs.clear()
        mfq.flushed_where = first + 50
        assert store.reput.run_once() == 1
        assert store.reput.reput_from_offset == first
        mfq.flushed_where = end
        assert store.reput.run_once() == 1
        assert store.get_max_offset_in_queue("TopicR", 0) == 2
    finally:
        store.shutdown()


def test_5x_sync_flush_shutdown_flushes_before_the_reput_drains(tmp_path: Path) -> None:
    """RocketMQ stops the CommitLog's services (a last flush) before the reput: what a store
    service appended unflushed is dispatched, and the shutdown is clean (no ``abort``)."""
    store = _store(tmp_path, "5.3.3", "SYNC_FLUSH")
    root = store.root
    _append(store, b"late")
    assert store.commit_log.mapped_file_queue.flushed_where < store.commit_log.get_max_offset()
    store.shutdown()
    assert not (Path(root) / "abort").exists()
    store = _store(tmp_path, "5.3.3", "SYNC_FLUSH")
    try:
        assert store.recovery_plan is not None
        assert store.recovery_plan.mode == "normal"
        assert store.get_max_offset_in_queue("TopicR", 0) == 1
    finally:
        store.shutdown()
