"""Retry topics longer than 127 chars: V2 records in a 5.x store (spec §2.3).

A consumer group's retry topic is ``%RETRY%<group>``, so a group name of more than 120 chars
makes a topic that a V1 record's one-byte topic length cannot hold. 5.x's broker takes a
retry topic of up to 255 bytes (``HookUtils.checkBeforePutMessage``; any other topic stops at
127) and its CommitLog writes it as a V2 record (``autoMessageVersionOnTopicLen``). 4.9.8's
store refuses every topic of more than 127 chars. With ``autoMessageVersionOnTopicLen`` off, 5.x
would write the length into one byte (unreadable); rmqlab refuses the put and says so.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from rmqlab.clock import ManualClock
from rmqlab.codec import MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2
from rmqlab.config import MessageStoreConfig
from rmqlab.errors import NotAStore
from rmqlab.inspect import open_snapshot
from rmqlab.store.message import Message
from rmqlab.store.message_store import MessageStore
from rmqlab.store.results import PutMessageStatus
from tests.tree import tree_digest

LONG_RETRY = "%RETRY%" + "group_" * 33  # 205 chars
assert len(LONG_RETRY) == 205


def _magic(store: MessageStore, offset: int) -> int:
    with store.commit_log.get_data(offset) as sel:
        return struct.unpack_from(">i", sel.buffer, 4)[0]


def _config(root: Path, **changes: object) -> MessageStoreConfig:
    return MessageStoreConfig.small(str(root), rocketmq_version="5.3.3", **changes)


def test_5x_stores_a_long_retry_topic_as_v2_records_every_put_path(tmp_path: Path) -> None:
    root = tmp_path / "s"
    config = _config(root)
    store = MessageStore.open(str(root), config, clock=ManualClock(1_700_000_000_000), threaded=False)
    one = store.put_message(Message(LONG_RETRY, b"fast", tags="t", keys=["k1"]))
    exact = store.put_message(Message(LONG_RETRY, b"exact", properties={"user": "p"}))
    listed = store.put_messages([Message(LONG_RETRY, b"a", keys=["k2"]), Message(LONG_RETRY, b"b")])
    # (a producer cannot encode a MessageBatch for a retry topic: "Retry Group is not supported for batching")
    batch = store.put_messages([Message(LONG_RETRY, b"c", properties={"user": "q"}), Message(LONG_RETRY, b"d")])
    short = store.put_message(Message("%RETRY%short", b"v1"))
    for r in (one, exact, listed, batch, short):
        assert r.status is PutMessageStatus.PUT_OK, r.reason
    store.step()
    for r in (one, exact, listed, batch):
        assert _magic(store, r.wrote_offset) == MESSAGE_MAGIC_CODE_V2
    assert _magic(store, short.wrote_offset) == MESSAGE_MAGIC_CODE_V1
    with store.get_message("g", LONG_RETRY, 0, 0, 16) as got:
        assert [m.body for m in got.messages] == [b"fast", b"exact", b"a", b"b", b"c", b"d"]
        assert {m.topic for m in got.messages} == {LONG_RETRY}
        assert got.messages[0].tags == "t"
    assert [m.body for m in store.query_message(LONG_RETRY, "k2").messages] == [b"a"]
    assert (root / "consumequeue" / LONG_RETRY / "0").is_dir()
    store.abandon()  # a killed process: abnormal recovery walks the V2 records again
    with MessageStore.open(str(root), config, threaded=False) as again:
        assert again.recovery_plan.mode == "abnormal"
        assert again.get_max_offset_in_queue(LONG_RETRY, 0) == 6
        assert [m.body for m in again.query_message(LONG_RETRY, "k1").messages] == [b"fast"]
    records = open_snapshot(str(root)).messages()
    assert list(records[records.topic == LONG_RETRY].queue_offset) == [0, 1, 2, 3, 4, 5]


@pytest.mark.parametrize(("version", "topic", "why"), [
    ("4.9.8", LONG_RETRY, "longer than topic max length 127"),  # 4.9.8's checkMessage
    ("5.3.3", "T" * 128, "longer than topic max length 127"),  # only retry topics may be longer
    ("5.3.3", "%DLQ%" + "g" * 123, "longer than topic max length 127"),
    ("5.3.3", "%RETRY%" + "g" * 249, "longer than topic max length 255"),
])
def test_long_topics_refused(tmp_path: Path, version: str, topic: str, why: str) -> None:
    config = MessageStoreConfig.small(str(tmp_path / "s"), rocketmq_version=version)
    with MessageStore.open(str(tmp_path / "s"), config, threaded=False) as store:
        for r in (store.put_message(Message(topic, b"x")), store.put_messages([Message(topic, b"x")])):
            assert r.status is PutMessageStatus.MESSAGE_ILLEGAL
            assert why in r.reason
        assert store.get_max_phy_offset() == 0


def test_5x_without_auto_version_refuses_what_it_would_write_unreadable(tmp_path: Path) -> None:
    config = _config(tmp_path / "s", auto_message_version_on_topic_len=False)
    with MessageStore.open(str(tmp_path / "s"), config, threaded=False) as store:
        for r in (store.put_message(Message(LONG_RETRY, b"x")), store.put_messages([Message(LONG_RETRY, b"x")])):
            assert r.status is PutMessageStatus.MESSAGE_ILLEGAL
            assert "one byte of a V1 record" in r.reason
        ok = store.put_message(Message("%RETRY%" + "g" * 120, b"x"))  # 127 chars: V1 holds it
        assert ok.ok
        assert _magic(store, ok.wrote_offset) == MESSAGE_MAGIC_CODE_V1


@pytest.mark.parametrize("clean", [True, False], ids=["clean-exit", "abnormal-exit"])
def test_a_5x_store_with_v2_records_opened_as_4_9_8_is_refused_not_cut(tmp_path: Path, clean: bool) -> None:
    """4.9.8's walk stops at the first V2 record and cuts the log there: opening a 5.x store with
    the default version would drop every record from it on. rmqlab refuses, naming the file and
    offset and the version to use, and changes no byte; the same store opens as 5.3.3 whole."""
    root = tmp_path / "s"
    config = _config(root)
    store = MessageStore.open(str(root), config, clock=ManualClock(1_700_000_000_000), threaded=False)
    for i in range(5):
        store.put_message(Message("TopicA", b"before", keys=[f"b{i}"]))
    v2 = store.put_message(Message(LONG_RETRY, b"retry"))
    for i in range(5):
        store.put_message(Message("TopicA", b"after", keys=[f"a{i}"]))
    store.step()
    end = store.get_max_phy_offset()
    if clean:
        store.shutdown()
    else:
        store.abandon()  # a killed process: abort file left, abnormal recovery next
    digest = tree_digest(root)
    with pytest.raises(NotAStore) as e:
        MessageStore.open(str(root), config.with_(rocketmq_version="4.9.8"), threaded=False)
    text = str(e.value)
    assert f"commitlog/00000000000000000000 at offset {v2.wrote_offset}: a well-formed V2 record" in text
    assert "Open it with rocketmq_version='5.3.3'" in text
    assert tree_digest(root) == digest
    with open_snapshot(root) as snap:  # the dry run says the same
        assert snap.explain_recovery(rocketmq_version="4.9.8").notes[0].startswith(
            f"commitlog/00000000000000000000 at offset {v2.wrote_offset}: a well-formed V2 record")
        assert not snap.explain_recovery(rocketmq_version="5.3.3").written_by_v5
    store = MessageStore.open(str(root), config, threaded=False)
    try:
        assert store.get_max_phy_offset() == end
        assert store.get_max_offset_in_queue("TopicA", 0) == 10
        assert [m.body for m in store.query_message("TopicA", "a4").messages] == [b"after"]
    finally:
        store.shutdown()
