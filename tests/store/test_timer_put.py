"""Timer properties on the put side (5.x ``HookUtils.handleScheduleMessage``).

A 5.3.3 broker keeps a timer message (``TIMER_DELIVER_MS``, ``TIMER_DELAY_SEC`` or
``TIMER_DELAY_MS``) in ``rmq_sys_wheel_timer`` until it is due. rmqlab has no timer wheel yet, so
it answers as a broker with ``timerWheelEnable=false``: WHEEL_TIMER_NOT_ENABLE, nothing written.
A delay level wins over timer properties, which the broker then drops. 4.9.8 has no timer
messages: the properties are stored as sent."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqlab.clock import ManualClock
from rmqlab.codec import flags
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


def _store(tmp_path: Path, version: str, name: str = "store") -> MessageStore:
    config = MessageStoreConfig.small(str(tmp_path / name), rocketmq_version=version)
    return MessageStore.open(config.store_path_root_dir, config, clock=ManualClock(NOW), threaded=False)


@pytest.mark.parametrize("props", TIMER_PROPS, ids=lambda p: next(iter(p)))
def test_5_3_3_refuses_a_timer_message_and_writes_nothing(tmp_path: Path, props: dict[str, str]) -> None:
    store = _store(tmp_path, "5.3.3")
    try:
        r = store.put_message(Message("Orders", b"at noon", tags="TagA", properties=dict(props)))
        assert r.status is PutMessageStatus.WHEEL_TIMER_NOT_ENABLE
        assert next(iter(props)) in r.reason
        assert "timer wheel" in r.reason
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


def test_timer_wheel_enable_is_refused_with_a_reason() -> None:
    with pytest.raises(ConfigError, match="timer wheel"):
        MessageStoreConfig(timer_wheel_enable=True)
    assert MessageStoreConfig().timer_wheel_enable is False
