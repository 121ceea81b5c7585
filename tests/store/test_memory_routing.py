"""MessageStore routes memory topics to the MemoryMessageStore, transparently."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rmqlab import Message, MessageStore, MessageStoreConfig, RmqlabError
from rmqlab.clock import ManualClock
from rmqlab.store.results import GetMessageStatus, PutMessageStatus


def _open(root: Path, **kw: object) -> MessageStore:
    cfg = MessageStoreConfig.small(str(root), **kw)
    return MessageStore.open(str(root), cfg, clock=ManualClock(), threaded=False)


def test_memory_topic_never_touches_the_commit_log(tmp_path: Path) -> None:
    store = _open(tmp_path / "s", memory_topic_enable=True, memory_store_max_bytes=6000)
    try:
        store.create_topic("Mem", memory=True)
        store.put_message(Message("Disk", b"on disk"))
        before = store.get_max_phy_offset()
        results = [store.put_message(Message("Mem", b"m" * 100, tags="T", queue_id=1)) for _ in range(100)]
        assert all(r.status is PutMessageStatus.PUT_OK for r in results)
        assert [r.queue_offset for r in results] == list(range(100))
        assert store.get_max_phy_offset() == before  # nothing appended to the CommitLog
        lo, hi = store.get_min_offset_in_queue("Mem", 1), store.get_max_offset_in_queue("Mem", 1)
        assert hi == 100
        assert 0 < lo < 100
        with store.get_message("g", "Mem", 1, 0, 8) as got:
            assert got.status is GetMessageStatus.OFFSET_TOO_SMALL
            assert got.next_begin_offset == lo
        with store.get_message("g", "Mem", 1, lo, 8) as got:
            assert got.status is GetMessageStatus.FOUND
            assert [m.queue_offset for m in got.messages] == list(range(lo, lo + 8))
            assert got.messages[0].topic == "Mem"
            assert got.messages[0].body == b"m" * 100
        store.step()
        with store.get_message("g", "Disk", 0, 0, 8) as got:
            assert [m.body for m in got.messages] == [b"on disk"]
    finally:
        store.shutdown()
    topics = json.loads((tmp_path / "s" / "config" / "topics.json").read_text())
    assert topics["topicConfigTable"]["Mem"]["attributes"] == {"memory": "true"}


def test_memory_topics_need_the_switch(tmp_path: Path) -> None:
    store = _open(tmp_path / "s")
    try:
        with pytest.raises(RmqlabError, match="memory_topic_enable"):
            store.create_topic("Mem", memory=True)
    finally:
        store.shutdown()


def test_memory_flag_survives_reopen(tmp_path: Path) -> None:
    store = _open(tmp_path / "s", memory_topic_enable=True)
    store.create_topic("Mem", memory=True)
    store.shutdown()
    store = _open(tmp_path / "s", memory_topic_enable=True)
    try:
        assert store.put_message(Message("Mem", b"x")).ok
        assert store.get_max_phy_offset() == 0
    finally:
        store.shutdown()


@pytest.mark.parametrize(("version", "found"), [("4.9.8", False), ("5.3.3", True)])
def test_memory_topic_get_window_follows_the_version(tmp_path: Path, version: str, found: bool) -> None:
    # A filtered get reads a window of units: 4.9.8 800 (16000 bytes / 20), 5.x one more. A
    # memory topic answers as a CommitLog topic of the same store does, unit for unit.
    from rmqlab.store.message_filter import TagFilter

    store = _open(tmp_path / "s", memory_topic_enable=True, rocketmq_version=version,
                  mapped_file_size_consume_queue=2000 * 20)  # one CQ file holds the window
    try:
        store.create_topic("Mem", memory=True)
        for topic in ("Mem", "Disk"):
            for i in range(802):
                assert store.put_message(Message(topic, b"m", tags="B" if i == 800 else "A")).ok
        store.step()
        answers = []
        for topic in ("Mem", "Disk"):
            with store.get_message("g", topic, 0, 0, 32, TagFilter("B")) as got:
                answers.append((got.status.name, got.next_begin_offset, [m.queue_offset for m in got.messages]))
        assert answers[0] == answers[1]
        expected = ("FOUND", 801, [800]) if found else ("NO_MATCHED_MESSAGE", 800, [])
        assert answers[0] == expected
    finally:
        store.shutdown()
