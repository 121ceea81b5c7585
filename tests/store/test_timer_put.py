"""Timer properties on the put side (5.x ``HookUtils.handleScheduleMessage``).

A 5.3.3 broker keeps a timer message (``TIMER_DELIVER_MS``, ``TIMER_DELAY_SEC`` or
``TIMER_DELAY_MS``) in ``rmq_sys_wheel_timer`` queue 0 until it is due, with ``TIMER_OUT_MS``
(rounded to the tick), ``REAL_TOPIC`` and ``REAL_QID``; with ``timer_wheel_enable`` off it answers
WHEEL_TIMER_NOT_ENABLE, nothing written. A delay level wins over timer properties, which the
broker then drops. 4.9.8 has no timer messages: the properties are stored as sent."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqlab.clock import ManualClock
from rmqlab.codec import flags
from rmqlab.codec.properties import encode_timer_broker_properties_and_map
from rmqlab.config import MessageStoreConfig
from rmqlab.errors import ConfigError
from rmqlab.store.message import Message
from rmqlab.store.message_store import MessageStore
from rmqlab.store.results import PutMessageStatus

NOW = 1_700_000_000_000
TIMER_PROPS = [
    {"TIMER_DELIVER_MS": str(NOW + 60_000)},
    {"TIMER_DELAY_SEC": "30"},
    {"TIMER_DELAY_MS": "1500"},
]


def _store(tmp_path: Path, version: str, name: str = "store", **changes: object) -> MessageStore:
    config = MessageStoreConfig.small(str(tmp_path / name), rocketmq_version=version, **changes)
    return MessageStore.open(config.store_path_root_dir, config, clock=ManualClock(NOW), threaded=False)


@pytest.mark.parametrize("props", TIMER_PROPS, ids=lambda p: next(iter(p)))
def test_5_3_3_without_the_wheel_refuses_a_timer_message_and_writes_nothing(
    tmp_path: Path, props: dict[str, str]
) -> None:
    store = _store(tmp_path, "5.3.3", timer_wheel_enable=False)
    try:
        r = store.put_message(Message("Orders", b"at noon", tags="TagA", properties=dict(props)))
        assert r.status is PutMessageStatus.WHEEL_TIMER_NOT_ENABLE
        assert next(iter(props)) in r.reason
        assert "timer_wheel_enable" in r.reason
        assert store.get_max_phy_offset() == 0
        assert store.get_max_offset_in_queue("Orders", 0) == 0
        # the next ordinary message is the first record
        ok = store.put_message(Message("Orders", b"now"))
        assert (ok.status, ok.wrote_offset, ok.queue_offset) == (PutMessageStatus.PUT_OK, 0, 0)
    finally:
        store.shutdown()


@pytest.mark.parametrize("props", TIMER_PROPS, ids=lambda p: next(iter(p)))
def test_4_9_8_stores_timer_properties_as_sent(tmp_path: Path, props: dict[str, str]) -> None:
    store = _store(tmp_path, "4.9.8")
    try:
        r = store.put_message(Message("Orders", b"at noon", properties=dict(props)))
        assert r.status is PutMessageStatus.PUT_OK
        rec = store.look_message_by_offset(r.wrote_offset)
        assert rec.topic == "Orders"
        assert rec.properties[next(iter(props))] == next(iter(props.values()))
    finally:
        store.shutdown()


def test_5_3_3_a_delay_level_wins_and_the_timer_properties_are_dropped(tmp_path: Path) -> None:
    """The record is byte for byte the one of the same delayed message sent without them."""
    with_timer = _store(tmp_path, "5.3.3", "a")
    plain = _store(tmp_path, "5.3.3", "b")
    try:
        extra = {"TIMER_DELIVER_MS": str(NOW + 5), "TIMER_DELAY_SEC": "9", "TIMER_DELAY_MS": "7", "shop": "7"}
        for level_kw, props in (({"delay_time_level": 2}, {}), ({}, {"DELAY": "2"})):
            a = with_timer.put_message(Message("Orders", b"x", tags="T", uniq_key="U1", **level_kw,
                                               properties={**props, **extra}))
            b = plain.put_message(Message("Orders", b"x", tags="T", uniq_key="U1", **level_kw,
                                          properties={**props, "shop": "7"}))
            assert a.status is b.status is PutMessageStatus.PUT_OK
            ra, rb = with_timer.look_message_by_offset(a.wrote_offset), plain.look_message_by_offset(b.wrote_offset)
            assert ra.topic == flags.SCHEDULE_TOPIC
            assert ra.queue_id == 1
            assert not any(k.startswith("TIMER_") for k in ra.properties)
            assert bytes(ra.properties_raw) == bytes(rb.properties_raw)
    finally:
        with_timer.shutdown()
        plain.shutdown()


@pytest.mark.parametrize(
    ("topic", "sys_flag", "props"),
    [
        ("Orders", flags.TRANSACTION_PREPARED_TYPE, {"TIMER_DELIVER_MS": str(NOW + 60_000)}),
        ("Orders", 0, {"TIMER_DELIVER_MS": str(NOW + 60_000), "TIMER_OUT_MS": str(NOW + 59_000)}),
        (flags.TIMER_TOPIC, 0, {"TIMER_DELIVER_MS": str(NOW + 60_000)}),
    ],
    ids=["prepared-half", "has-TIMER_OUT_MS", "timer-topic"],
)
def test_5_3_3_stores_as_sent_what_the_broker_does_not_take_for_a_timer_message(
    tmp_path: Path, topic: str, sys_flag: int, props: dict[str, str]
) -> None:
    store = _store(tmp_path, "5.3.3")
    try:
        r = store.put_message(Message(topic, b"x", sys_flag=sys_flag, properties=dict(props)))
        assert r.status is PutMessageStatus.PUT_OK
        rec = store.look_message_by_offset(r.wrote_offset)
        assert rec.topic == topic
        assert rec.properties["TIMER_DELIVER_MS"] == props["TIMER_DELIVER_MS"]
    finally:
        store.shutdown()


def test_timer_wheel_enable_is_on_by_default_as_in_rocketmq() -> None:
    c = MessageStoreConfig()
    assert c.timer_wheel_enable is True
    assert (c.timer_precision_ms, c.mapped_file_size_timer_log, c.timer_roll_window_slot) == (1000, 100 << 20, 172800)
    assert (c.timer_max_delay_sec, c.timer_flush_interval_ms) == (259200, 1000)
    assert c.timer_congest_num_each_slot == 2**31 - 1
    with pytest.raises(ConfigError, match="timer_precision_ms"):
        MessageStoreConfig(timer_precision_ms=0)


@pytest.mark.parametrize(
    ("props", "out"),
    [
        ({"TIMER_DELIVER_MS": str(NOW + 60_000)}, NOW + 59_000),  # on a tick: one tick earlier
        ({"TIMER_DELIVER_MS": str(NOW + 60_500)}, NOW + 60_000),  # else down to the tick
        ({"TIMER_DELAY_SEC": "30"}, NOW + 29_000),
        ({"TIMER_DELAY_MS": "1500"}, NOW + 1_000),
        ({"TIMER_DELAY_SEC": "+2", "TIMER_DELAY_MS": "99999", "TIMER_DELIVER_MS": "1"}, NOW + 1_000),  # SEC first
        ({"TIMER_DELAY_MS": "2500", "TIMER_DELIVER_MS": "1"}, NOW + 2_000),  # then MS
    ],
)
def test_5_3_3_moves_a_timer_message_to_the_wheel_topic(tmp_path: Path, props: dict[str, str], out: int) -> None:
    """``transformTimerMessage``: rmq_sys_wheel_timer queue 0, TIMER_OUT_MS, REAL_TOPIC/REAL_QID put
    into the broker's map and the map serialised again (the client's timer properties stay)."""
    store = _store(tmp_path, "5.3.3")
    try:
        r = store.put_message(Message("Orders", b"later", tags="TagA", queue_id=3, uniq_key="U1",
                                      properties=dict(props)))
        assert r.status is PutMessageStatus.PUT_OK, r.reason
        rec = store.look_message_by_offset(r.wrote_offset)
        assert (rec.topic, rec.queue_id) == (flags.TIMER_TOPIC, 0)
        p = rec.properties
        assert (p["TIMER_OUT_MS"], p["REAL_TOPIC"], p["REAL_QID"]) == (str(out), "Orders", "3")
        assert all(p[k] == v for k, v in props.items())
        client = {"TAGS": "TagA", "WAIT": "true", **props, "UNIQ_KEY": "U1"}
        expected, _ = encode_timer_broker_properties_and_map(client, "5.3.3", "DefaultCluster", real_topic="Orders",
                                                             real_queue_id=3, timer_out_ms=out)
        assert bytes(rec.properties_raw) == expected
        assert store.get_max_offset_in_queue("Orders", 3) == 0
    finally:
        store.shutdown()


@pytest.mark.parametrize(
    ("props", "why"),
    [
        ({"TIMER_DELAY_SEC": "soon"}, "not a Java long"),
        ({"TIMER_DELIVER_MS": " 1"}, "not a Java long"),
        ({"TIMER_DELAY_MS": str(2**63)}, "not a Java long"),
        ({"TIMER_DELAY_SEC": str(3 * 86400 + 1)}, "timer_max_delay_sec"),
        ({"TIMER_DELIVER_MS": str(NOW - 1), "TIMER_DEL_UNIQKEY": "U0"}, "delete marker"),
    ],
)
def test_5_3_3_refuses_an_illegal_timer_message(tmp_path: Path, props: dict[str, str], why: str) -> None:
    store = _store(tmp_path, "5.3.3")
    try:
        r = store.put_message(Message("Orders", b"x", properties=dict(props)))
        assert r.status is PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL
        assert why in r.reason
        assert store.get_max_phy_offset() == 0
    finally:
        store.shutdown()


def test_5_3_3_exactly_the_max_delay_is_taken(tmp_path: Path) -> None:
    store = _store(tmp_path, "5.3.3", timer_max_delay_sec=60)
    try:
        ok = store.put_message(Message("Orders", b"x", properties={"TIMER_DELAY_SEC": "60"}))
        assert ok.status is PutMessageStatus.PUT_OK
        far = store.put_message(Message("Orders", b"x", properties={"TIMER_DELAY_MS": "60001"}))
        assert far.status is PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL
    finally:
        store.shutdown()


@pytest.mark.parametrize("props", [{"TIMER_DELIVER_MS": str(NOW)}, {"TIMER_DELAY_SEC": "0"},
                                   {"TIMER_DELAY_MS": "-5"}])
def test_5_3_3_a_timer_message_already_due_is_stored_in_its_topic(tmp_path: Path, props: dict[str, str]) -> None:
    store = _store(tmp_path, "5.3.3")
    try:
        r = store.put_message(Message("Orders", b"now", properties=dict(props)))
        assert r.status is PutMessageStatus.PUT_OK
        rec = store.look_message_by_offset(r.wrote_offset)
        assert rec.topic == "Orders"
        assert "TIMER_OUT_MS" not in rec.properties
        assert "REAL_TOPIC" not in rec.properties
    finally:
        store.shutdown()
