"""Admin queue operations: cleanExpiredConsumerQueue, deleteTopics, cleanUnusedTopic (spec §8.2)."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from rmqlab.clock import ManualClock
from rmqlab.codec.names import is_lmq_topic, is_system_topic
from rmqlab.config import MessageStoreConfig
from rmqlab.errors import RmqlabError
from rmqlab.store.message import Message
from rmqlab.store.message_store import MessageStore
from rmqlab.store.results import GetMessageStatus

H = 3_600_000
T0 = int(datetime(2024, 1, 10, 3, 0, tzinfo=UTC).timestamp() * 1000)
VERSIONS = ["4.9.8", "5.3.3"]


def open_store(tmp_path: Path, version: str, clock: ManualClock | None = None) -> MessageStore:
    config = MessageStoreConfig.small(str(tmp_path / "store"), rocketmq_version=version)
    return MessageStore.open(tmp_path / "store", config, clock=clock or ManualClock(T0, tz=UTC), threaded=False)


def put(store: MessageStore, topic: str, n: int, queue_id: int = 0, size: int = 900) -> None:
    for i in range(n):
        assert store.put_message(Message(topic, bytes([i % 256]) * size, tags="A", queue_id=queue_id)).ok


def queues(store: MessageStore) -> set[tuple[str, int]]:
    return {(t, q) for t, q, _ in store.consume_queue_store.all_queues()}


def delete_old_commit_log_files(store: MessageStore, keep: int) -> int:
    """Delete all but the last ``keep`` CommitLog files (as an expired-file cleanup would)."""
    mfq = store.commit_log.mapped_file_queue
    names = [mf.name for mf in mfq.mapped_files]
    for mf in mfq.mapped_files[:-keep]:
        os.utime(mf.file_name, ns=(0, 0))
    deleted = mfq.delete_expired_file_by_time(72 * H, 0, 0, False, now_ms=T0, sleep=lambda ms: None)
    assert deleted == len(names) - keep
    return store.get_min_phy_offset()


def test_system_and_lmq_topic_names() -> None:
    assert is_system_topic("SCHEDULE_TOPIC_XXXX")
    assert is_system_topic("RMQ_SYS_TRANS_HALF_TOPIC")
    assert is_system_topic("rmq_sys_wheel_timer")
    assert is_system_topic("TBW102")
    assert not is_system_topic("Orders")
    assert not is_system_topic("RMQ_SYS")
    assert is_lmq_topic("%LMQ%abc")
    assert not is_lmq_topic("LMQ")


@pytest.mark.parametrize("version", VERSIONS)
def test_clean_expired_consumer_queue_destroys_only_queues_below_min_offset(tmp_path: Path, version: str) -> None:
    with open_store(tmp_path, version) as store:
        put(store, "Old", 5, queue_id=0)  # only in the first files
        put(store, "Old", 3, queue_id=1)
        put(store, "RMQ_SYS_TRACE_TOPIC", 2)
        put(store, "SCHEDULE_TOPIC_XXXX", 2, queue_id=3)
        put(store, "New", 400, queue_id=0)  # many files later
        put(store, "Old", 1, queue_id=2)  # a queue of the same topic that is still alive
        store.wait_dispatched()
        old_dir = os.path.join(store.root, "consumequeue", "Old", "0")
        assert os.path.isdir(old_dir)
        assert store.clean_expired_consumer_queue() == []  # nothing deleted yet: nothing expired
        min_phy = delete_old_commit_log_files(store, keep=3)
        old_last = store.consume_queue_store.find_consume_queue("Old", 0, create=False).get_last_offset()
        assert 0 <= old_last < min_phy

        destroyed = store.clean_expired_consumer_queue()

        expected = {("Old", 0), ("Old", 1), ("RMQ_SYS_TRACE_TOPIC", 0)}
        if version != "4.9.8":
            expected.discard(("RMQ_SYS_TRACE_TOPIC", 0))  # 5.x keeps every system topic
        assert set(destroyed) == expected
        assert queues(store) == {("New", 0), ("Old", 2), ("SCHEDULE_TOPIC_XXXX", 3),
                                 ("RMQ_SYS_TRACE_TOPIC", 0)} - expected
        assert not os.path.exists(old_dir)
        assert "Old-0" not in store.commit_log.topic_queue_table
        assert store.commit_log.topic_queue_table["Old-2"] == 1
        # a new message to a destroyed queue starts again at offset 0, as in RocketMQ
        r = store.put_message(Message("Old", b"again", queue_id=0))
        assert r.ok
        assert r.queue_offset == 0
        store.wait_dispatched()
        with store.get_message("g", "Old", 0, 0, 32) as got:
            assert got.status is GetMessageStatus.FOUND
            assert [m.decode().body for m in got.messages] == [b"again"]
        assert store.clean_expired_consumer_queue() == []


def test_empty_last_file_is_kept_as_created_just_now(tmp_path: Path) -> None:
    with open_store(tmp_path, "4.9.8") as store:
        put(store, "New", 400)
        store.wait_dispatched()
        cq = store.consume_queue_store.find_consume_queue("Fresh", 0, create=True)
        assert cq.get_last_offset() == -1
        delete_old_commit_log_files(store, keep=2)
        assert store.clean_expired_consumer_queue() == []
        assert ("Fresh", 0) in queues(store)


@pytest.mark.parametrize("version", VERSIONS)
def test_delete_topics_and_clean_unused_topic(tmp_path: Path, version: str) -> None:
    with open_store(tmp_path, version) as store:
        for topic in ("A", "B", "C", "%LMQ%x", "RMQ_SYS_TRACE_TOPIC", "SCHEDULE_TOPIC_XXXX",
                      "RMQ_SYS_TRANS_OP_HALF_TOPIC"):
            put(store, topic, 2, queue_id=0)
            put(store, topic, 1, queue_id=1)
        store.wait_dispatched()
        cq_root = os.path.join(store.root, "consumequeue")

        assert store.delete_topics(["A", "Missing"]) == ["A"]
        assert not os.path.exists(os.path.join(cq_root, "A"))
        assert "A-0" not in store.commit_log.topic_queue_table
        assert store.get_max_offset_in_queue("A", 0) == 0
        assert store.get_max_offset_in_queue("B", 0) == 2
        # the CommitLog keeps A's messages until cleanup deletes their files
        assert store.get_max_phy_offset() > 0

        removed = store.clean_unused_topic({"B"})
        kept = {"B", "%LMQ%x", "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_OP_HALF_TOPIC"}
        if version == "4.9.8":  # SCHEDULE_TOPIC_XXXX, RMQ_SYS_TRANS_OP_HALF_TOPIC and LMQ topics are spared
            assert sorted(removed) == sorted(["C", "RMQ_SYS_TRACE_TOPIC"])
            assert {t for t, _ in queues(store)} == kept
        else:  # system and LMQ topics are spared
            assert removed == ["C"]
            assert {t for t, _ in queues(store)} == kept | {"RMQ_SYS_TRACE_TOPIC"}
        assert not os.path.exists(os.path.join(cq_root, "C"))
        assert os.path.isdir(os.path.join(cq_root, "B", "0"))


def test_queue_operations_survive_a_restart(tmp_path: Path) -> None:
    with open_store(tmp_path, "4.9.8") as store:
        put(store, "A", 3)
        put(store, "B", 3)
        store.wait_dispatched()
        store.delete_topics({"A"})
    with open_store(tmp_path, "4.9.8") as store:
        assert {t for t, _ in queues(store)} == {"B"}
        assert store.get_max_offset_in_queue("B", 0) == 3


def test_refused_on_a_shut_down_store(tmp_path: Path) -> None:
    store = open_store(tmp_path, "4.9.8")
    put(store, "A", 1)
    store.shutdown()
    with pytest.raises(RmqlabError, match="cannot delete topics: store is shut down"):
        store.delete_topics(["A"])
    with pytest.raises(RmqlabError, match="cannot clean expired consume queues"):
        store.clean_expired_consumer_queue()


@pytest.mark.parametrize("version", VERSIONS)
def test_offset_zero_after_the_first_file_is_deleted_is_removed_not_another_message(
    tmp_path: Path, version: str
) -> None:
    """RocketMQ reads phy offset 0 with ``returnFirstOnNotFound``: after file 0 is deleted it
    returns the first remaining file's first message. rmqlab says the message was removed."""
    with open_store(tmp_path, version) as store:
        put(store, "Old", 1)  # the record at physical offset 0
        put(store, "New", 400)
        store.wait_dispatched()
        assert store.look_message_by_offset(0).topic == "Old"
        min_phy = delete_old_commit_log_files(store, keep=2)
        first_remaining = store.look_message_by_offset(min_phy)
        assert first_remaining.topic == "New"
        with store.get_message("g", "Old", 0, 0, 32) as got:
            assert got.status is GetMessageStatus.MESSAGE_WAS_REMOVING
            assert got.messages == []
            assert got.next_begin_offset == 1
        assert store.look_message_by_offset(0) is None
        assert store.commit_log.get_message(0, 100) is None
