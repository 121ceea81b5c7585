"""Delayed messages on the put side (spec 2.10): a message with a delay level is stored in
``SCHEDULE_TOPIC_XXXX``, queue ``level - 1``, with ``REAL_TOPIC``/``REAL_QID``, as 4.9.8's
``CommitLog.asyncPutMessage`` and 5.x's ``HookUtils.transformDelayLevelMessage`` store it."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqlab.clock import ManualClock
from rmqlab.codec import flags
from rmqlab.config import MessageStoreConfig
from rmqlab.store.message import Message
from rmqlab.store.message_store import MessageStore
from rmqlab.store.results import GetMessageStatus, PutMessageStatus

SCHEDULE = "SCHEDULE_TOPIC_XXXX"


def _store(tmp_path: Path, version: str, clock: ManualClock | None = None) -> MessageStore:
    config = MessageStoreConfig.small(str(tmp_path / "store"), rocketmq_version=version)
    return MessageStore.open(config.store_path_root_dir, config, clock=clock or ManualClock(), threaded=False)


def _raw_properties(store: MessageStore, offset: int) -> bytes:
    rec = store.look_message_by_offset(offset)
    assert rec is not None
    return bytes(rec.properties_raw)


# The stored strings, written out by hand from the Java HashMap rules (buckets of the keys:
# capacity 16 -- REAL_TOPIC 1, KEYS 7, UNIQ_KEY 12, CLUSTER 12, DELAY 13, WAIT 13, TAGS 14,
# REAL_QID 15; capacity 128 -- UNIQ_KEY 28, CLUSTER 28, DELAY 61, TAGS 62, KEYS 87, WAIT 93,
# REAL_TOPIC 113, REAL_QID 127). 4.9.8 stores WAIT here (the map it re-serialises still has it)
# and no last separator; 5.3.3 keeps WAIT as always and ends with one.
EXPECTED = {
    "4.9.8": "REAL_TOPIC\x01Orders\x02KEYS\x01k1\x02UNIQ_KEY\x01{u}\x02CLUSTER\x01DefaultCluster\x02"
             "DELAY\x013\x02WAIT\x01true\x02TAGS\x01TagA\x02REAL_QID\x012",
    "5.3.3": "UNIQ_KEY\x01{u}\x02CLUSTER\x01DefaultCluster\x02DELAY\x013\x02TAGS\x01TagA\x02KEYS\x01k1\x02"
             "WAIT\x01true\x02REAL_TOPIC\x01Orders\x02REAL_QID\x012\x02",
}


@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
def test_a_delayed_message_is_stored_in_the_schedule_topic(tmp_path: Path, version: str) -> None:
    clock = ManualClock(1_700_000_000_000)
    store = _store(tmp_path, version, clock)
    try:
        r = store.put_message(Message("Orders", b"pay later", tags="TagA", keys=["k1"], queue_id=2,
                                      delay_time_level=3, uniq_key="U1"))
        assert r.status is PutMessageStatus.PUT_OK
        assert r.queue_offset == 0
        rec = store.look_message_by_offset(r.wrote_offset)
        assert (rec.topic, rec.queue_id, rec.queue_offset) == (SCHEDULE, 2, 0)
        assert _raw_properties(store, r.wrote_offset) == EXPECTED[version].format(u="U1").encode()
        store.step()
        # the unit waits in the schedule queue, its tags code the time it is due (level 3: 10 s)
        assert store.get_max_offset_in_queue(SCHEDULE, 2) == 1
        assert store.get_max_offset_in_queue("Orders", 2) == 0
        got = store.get_message("g", SCHEDULE, 2, 0, 32)
        assert got.status is GetMessageStatus.FOUND
        cq = store.consume_queue_store.find_consume_queue(SCHEDULE, 2)
        assert cq.units()["tags_code"].tolist() == [rec.store_timestamp + 10_000]
        none = store.get_message("g", "Orders", 2, 0, 32)
        assert none.status is GetMessageStatus.NO_MESSAGE_IN_QUEUE
    finally:
        store.shutdown()


@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
def test_a_level_past_the_last_is_capped(tmp_path: Path, version: str) -> None:
    store = _store(tmp_path, version)
    try:
        r = store.put_message(Message("Orders", b"x", delay_time_level=99))
        rec = store.look_message_by_offset(r.wrote_offset)
        assert (rec.topic, rec.queue_id) == (SCHEDULE, 17)
        assert rec.properties[flags.PROPERTY_DELAY_TIME_LEVEL] == "18"
        assert rec.properties[flags.PROPERTY_REAL_QUEUE_ID] == "0"
    finally:
        store.shutdown()


def test_delay_from_a_user_property_and_its_edge_values(tmp_path: Path) -> None:
    store = _store(tmp_path, "4.9.8")
    try:
        r = store.put_message(Message("Orders", b"x", properties={"DELAY": "2"}))
        assert store.look_message_by_offset(r.wrote_offset).queue_id == 1
        r = store.put_message(Message("Orders", b"x", properties={"DELAY": "0"}))  # not > 0: ordinary
        rec = store.look_message_by_offset(r.wrote_offset)
        assert (rec.topic, rec.properties["DELAY"]) == ("Orders", "0")
        bad = store.put_message(Message("Orders", b"x", properties={"DELAY": "soon"}))
        assert bad.status is PutMessageStatus.MESSAGE_ILLEGAL
        assert "'soon'" in bad.reason
        assert store.get_max_phy_offset() == r.wrote_offset + r.wrote_bytes  # nothing written for it
    finally:
        store.shutdown()


def test_a_prepared_transaction_half_is_not_moved(tmp_path: Path) -> None:
    store = _store(tmp_path, "4.9.8")
    try:
        r = store.put_message(Message("Orders", b"x", delay_time_level=3,
                                      sys_flag=flags.TRANSACTION_PREPARED_TYPE))
        rec = store.look_message_by_offset(r.wrote_offset)
        assert rec.topic == "Orders"
        assert flags.PROPERTY_REAL_TOPIC not in rec.properties
    finally:
        store.shutdown()


def test_the_schedule_queue_offsets_survive_a_reopen(tmp_path: Path) -> None:
    clock = ManualClock(1_700_000_000_000)
    store = _store(tmp_path, "4.9.8", clock)
    for level in (1, 1, 2):
        assert store.put_message(Message("Orders", b"x", delay_time_level=level)).ok
    store.shutdown()
    store = _store(tmp_path, "4.9.8", clock)
    try:
        r = store.put_message(Message("Orders", b"x", delay_time_level=1))
        assert r.queue_offset == 2
        assert store.get_max_offset_in_queue(SCHEDULE, 1) == 1
    finally:
        store.shutdown()
