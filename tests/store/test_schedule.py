"""ScheduleMessageService: delayed messages come due and go back to their real topic and queue,
the delivery offsets are kept in config/delayOffset.json, and what cannot be delivered stops
its level as RocketMQ stops it."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pytest

from rmqlab.clock import ManualClock
from rmqlab.codec.delay_offset import decode_delay_offsets
from rmqlab.config import MessageStoreConfig
from rmqlab.errors import RmqlabError
from rmqlab.events import EventRecorder, ScheduleDelivered
from rmqlab.store.message import Message
from rmqlab.store.message_store import MessageStore
from rmqlab.store.results import GetMessageStatus, PutMessageStatus
from rmqlab.testing.crash import simulate_process_kill

SCHEDULE = "SCHEDULE_TOPIC_XXXX"
T0 = 1_700_000_000_000


def _open(root: Path, version: str = "4.9.8", clock: ManualClock | None = None, **changes) -> MessageStore:
    config = MessageStoreConfig.small(str(root), rocketmq_version=version, **changes)
    return MessageStore.open(root, config, clock=clock or ManualClock(T0), threaded=False)


def _real(store: MessageStore, topic: str, queue_id: int) -> list:
    got = store.get_message("g", topic, queue_id, 0, 32)
    return list(got.messages) if got.status is GetMessageStatus.FOUND else []


@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
def test_a_delayed_message_goes_back_to_its_queue_when_due(tmp_path: Path, version: str) -> None:
    clock = ManualClock(T0)
    store = _open(tmp_path / "s", version, clock)
    recorder = EventRecorder(store.bus)
    try:
        r = store.put_message(Message("Orders", b"pay later", tags="TagA", keys=["k1"], queue_id=2, flag=7,
                                      delay_time_level=3, born_timestamp=T0 - 5, reconsume_times=1))
        sched = store.look_message_by_offset(r.wrote_offset)
        store.step()
        clock.advance(9_900)  # level 3 is 10 s: not yet
        store.step()
        assert _real(store, "Orders", 2) == []
        clock.advance(100)
        assert store.step()["schedule"] == 1
        [m] = _real(store, "Orders", 2)
        # what messageTimeup keeps: body, flag, sys flag, born time and host, reconsume times, and the
        # properties the broker wrote (DELAY, REAL_TOPIC, REAL_QID included) serialised again: the same bytes
        assert (m.topic, m.queue_id, m.queue_offset, m.body, m.flag) == ("Orders", 2, 0, b"pay later", 7)
        assert (m.born_timestamp, m.born_host, m.reconsume_times) == (T0 - 5, sched.born_host, 1)
        assert m.sys_flag == sched.sys_flag
        assert m.prepared_transaction_offset == 0
        assert m.properties_raw == sched.properties_raw
        assert m.store_timestamp == clock.now_ms()
        assert m.commit_log_offset > sched.commit_log_offset
        cq = store.consume_queue_store.find_consume_queue("Orders", 2)
        assert cq.units()["tags_code"].tolist() == [m.tags_code]  # the tag's hash, not a time
        assert store.query_message("Orders", "k1", 32).messages[-1].commit_log_offset == m.commit_log_offset
        [event] = [e for e in recorder.events if isinstance(e, ScheduleDelivered)]
        assert (event.level, event.schedule_offset, event.topic, event.queue_id) == (3, 0, "Orders", 2)
        assert store.schedule.offset_table == {3: 1}
        clock.advance(1_000)
        store.step()
        assert len(_real(store, "Orders", 2)) == 1  # delivered once
    finally:
        store.shutdown()


def test_each_level_delivers_in_order_and_waits_for_its_first_unit_not_due(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    store = _open(tmp_path / "s", clock=clock)
    try:
        for i in range(3):
            assert store.put_message(Message("T", b"a%d" % i, delay_time_level=1)).ok  # 1 s
            clock.advance(400)
        assert store.put_message(Message("T", b"b", delay_time_level=2)).ok  # 5 s
        store.step()
        clock.set(T0 + 1_000 + 400)  # the first two of level 1 are due (0 ms and 400 ms + 1 s)
        assert store.step()["schedule"] == 2
        assert [m.body for m in _real(store, "T", 0)] == [b"a0", b"a1"]
        status = {s.level: s for s in store.schedule.status()}
        assert (status[1].offset, status[1].waiting, status[2].waiting) == (2, 1, 1)
        clock.set(T0 + 1_200 + 5_000 + 100)
        assert store.step()["schedule"] == 2
        assert [m.body for m in _real(store, "T", 0)] == [b"a0", b"a1", b"a2", b"b"]
    finally:
        store.shutdown()


def test_a_unit_due_past_now_plus_its_delay_is_delivered_now(tmp_path: Path) -> None:
    """correctDeliverTimestamp: the clock went back an hour; the unit's due time is more than one
    delay away, so it is delivered at once rather than an hour late."""
    clock = ManualClock(T0)
    store = _open(tmp_path / "s", clock=clock)
    try:
        store.put_message(Message("T", b"x", delay_time_level=1))
        store.step()
        clock.set(T0 - 3_600_000)
        store.schedule.start()  # the tasks' next runs from the new now
        clock.advance(1_000)
        assert store.step()["schedule"] == 1
    finally:
        store.shutdown()


@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
def test_offsets_are_persisted_and_loaded(tmp_path: Path, version: str) -> None:
    clock = ManualClock(T0)
    root = tmp_path / "s"
    store = _open(root, version, clock)
    for level in (1, 1, 4):
        store.put_message(Message("T", b"x", delay_time_level=level))
    store.step()
    clock.advance(2_000)
    store.step()  # level 1's two are due; level 4 (30 s) is not
    store.shutdown()
    text = (root / "config" / "delayOffset.json").read_text()
    if version == "4.9.8":
        assert text == '{\n\t"offsetTable":{1:2\n\t}\n}'
    else:
        obj = json.loads(text)
        assert obj["offsetTable"] == {"1": 2}
        assert obj["dataVersion"]["counter"] == 1
    assert decode_delay_offsets(text)[0] == {1: 2}
    store = _open(root, version, clock)
    try:
        assert store.schedule.offset_table == {1: 2}
        assert store.schedule.corrections == []
        clock.advance(30_000)
        store.step()
        assert [m.body for m in _real(store, "T", 0)] == [b"x"] * 3  # nothing twice, level 4 too
    finally:
        store.shutdown()


def test_an_offset_outside_its_queue_is_corrected_at_load(tmp_path: Path) -> None:
    root = tmp_path / "s"
    store = _open(root)
    store.put_message(Message("T", b"x", delay_time_level=2))
    store.shutdown()
    (root / "config" / "delayOffset.json").write_text('{\n\t"offsetTable":{2:99,5:3\n\t}\n}')
    store = _open(root)
    try:
        assert store.schedule.offset_table == {2: 1, 5: 0}
        assert [c.split(":")[0] for c in store.schedule.corrections] == ["delay level 2", "delay level 5"]
    finally:
        store.shutdown()


def test_a_damaged_offset_file_falls_back_to_its_bak_or_refuses_to_open(tmp_path: Path) -> None:
    root = tmp_path / "s"
    store = _open(root)
    store.shutdown()
    cfg = root / "config"
    (cfg / "delayOffset.json").write_text('{"offsetTable":{1:4}}')  # a .bak needs a second write
    (cfg / "delayOffset.json.bak").write_text('{"offsetTable":{1:0}}')
    (cfg / "delayOffset.json").write_bytes(b"\xff{ garbage")
    store = _open(root)
    try:
        assert store.schedule.loaded_from == "bak"
    finally:
        store.shutdown()
    (cfg / "delayOffset.json").write_bytes(b"\xff{ garbage")
    (cfg / "delayOffset.json.bak").write_text("[1, 2]")
    with pytest.raises(RmqlabError, match=r"delayOffset\.json"):
        _open(root)


def test_a_transaction_half_real_topic_is_skipped_and_a_bad_record_stops_its_level(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = ManualClock(T0)
    store = _open(tmp_path / "s", clock=clock)
    try:
        store.put_message(Message("RMQ_SYS_TRANS_HALF_TOPIC", b"h", delay_time_level=1))
        # a schedule record put by hand: due at once (no DELAY: its tags code is 0), REAL_QID unreadable
        assert store.put_message(Message(SCHEDULE, b"bad", queue_id=0,
                                         properties={"REAL_TOPIC": "T", "REAL_QID": "x"})).ok
        store.put_message(Message("T", b"good", delay_time_level=1))
        store.step()
        clock.advance(1_000)
        with caplog.at_level(logging.ERROR, logger="rmqlab.store.schedule"):
            store.step()
            clock.advance(100)
            store.step()
        level1 = store.schedule.status()[0]
        assert (level1.skipped, level1.offset, level1.task_offset) == (1, 0, 1)
        assert "REAL_QID 'x' is not an int" in level1.stuck
        assert _real(store, "T", 0) == []  # the good one waits behind it, as in RocketMQ
        assert sum("stops at schedule queue offset 1" in r.message for r in caplog.records) == 1  # once
        assert any("[BUG]" in r.message for r in caplog.records)
    finally:
        store.shutdown()


def test_a_refused_put_is_retried_until_it_succeeds(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    store = _open(tmp_path / "s", clock=clock)
    try:
        store.put_message(Message("T", b"x", delay_time_level=1))
        store.step()
        clock.advance(1_000)
        real = store.commit_log.put_timeup
        store.commit_log.put_timeup = lambda rec: _refused()  # type: ignore[method-assign]
        store.step()
        assert "OS_PAGECACHE_BUSY" in store.schedule.status()[0].stuck
        store.commit_log.put_timeup = real  # type: ignore[method-assign]
        clock.advance(100)
        assert store.step()["schedule"] == 1
        assert store.schedule.status()[0].stuck == ""
    finally:
        store.shutdown()


def _refused():
    from rmqlab.store.results import PutMessageResult

    return PutMessageResult(PutMessageStatus.OS_PAGECACHE_BUSY, reason="busy")


def test_after_a_crash_messages_delivered_since_the_last_persist_come_again(tmp_path: Path) -> None:
    """At least once: the offsets on disk are the last persisted ones (every 10 s and at
    shutdown), so a kill redelivers what was delivered after that, as RocketMQ does."""
    clock = ManualClock(T0)
    root = tmp_path / "s"
    store = _open(root, clock=clock)
    store.put_message(Message("T", b"x", delay_time_level=1))
    store.step()
    clock.advance(1_000)
    store.step()
    assert len(_real(store, "T", 0)) == 1
    simulate_process_kill(store)
    store = _open(root, clock=clock)
    try:
        clock.advance(1_000)
        store.step()
        assert len(_real(store, "T", 0)) == 2
    finally:
        store.shutdown()


def test_a_slave_keeps_delayed_messages_waiting(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    store = _open(tmp_path / "s", clock=clock, broker_role="SLAVE")
    try:
        assert "schedule" not in [s.name for s in store.services()]
    finally:
        store.shutdown()


def test_a_threaded_store_delivers_on_its_own(tmp_path: Path) -> None:
    config = MessageStoreConfig.small(str(tmp_path / "s"))
    store = MessageStore.open(config.store_path_root_dir, config, threaded=True)
    try:
        assert store.put_message(Message("T", b"soon", delay_time_level=1)).ok
        deadline = time.monotonic() + 30
        while not _real(store, "T", 0) and time.monotonic() < deadline:
            time.sleep(0.05)
        [m] = _real(store, "T", 0)
        assert m.body == b"soon"
        assert m.store_timestamp - m.born_timestamp >= 1_000
    finally:
        store.shutdown()


@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
def test_a_unit_4_9_8_recovery_left_without_a_due_time_still_waits_for_it(tmp_path: Path, version: str) -> None:
    """4.9.8's abnormal recovery re-dispatches schedule records before the delay levels are
    parsed: the unit's tags code is the tag hash (0 here), and 4.9.8 delivers the message at
    once. rmqlab keeps those bytes but takes the due time from the record."""
    clock = ManualClock(T0)
    root = tmp_path / "s"
    store = _open(root, version, clock)
    store.put_message(Message("T", b"in two hours", delay_time_level=18))
    simulate_process_kill(store)  # before dispatch: recovery writes the unit
    store = _open(root, version, clock)
    try:
        unit = store.consume_queue_store.find_consume_queue(SCHEDULE, 17).get_unit(0)
        assert unit[2] == (0 if version == "4.9.8" else T0 + 7_200_000)
        for _ in range(3):
            clock.advance(1_100)
            store.step()
        assert _real(store, "T", 0) == []
        assert store.schedule.status()[17].recomputed == (1 if version == "4.9.8" else 0)
        clock.set(T0 + 7_200_000 + 100)
        store.step()
        assert [m.body for m in _real(store, "T", 0)] == [b"in two hours"]
    finally:
        store.shutdown()


@pytest.mark.parametrize("changes", [{"flush_disk_type": "SYNC_FLUSH"},
                                     {"transient_store_pool_enable": True, "transient_store_pool_size": 2}],
                         ids=["sync-flush", "pool"])
def test_delivery_in_sync_flush_and_pool_stores(tmp_path: Path, changes: dict) -> None:
    """A delivered message carries WAIT=false: a SYNC_FLUSH store does not wait for its flush
    (the next group-commit round takes it), and with the transient pool the commit service
    makes it visible to dispatch, as for any put."""
    clock = ManualClock(T0)
    store = _open(tmp_path / "s", clock=clock, **changes)
    try:
        assert store.put_message(Message("T", b"x", delay_time_level=1)).ok
        store.step()
        store.step()
        clock.advance(1_000)
        assert store.step()["schedule"] == 1
        store.step()
        assert [m.body for m in _real(store, "T", 0)] == [b"x"]
        mfq = store.commit_log.mapped_file_queue
        # SYNC_FLUSH: flushed by the next round; the pool's async flush waits for its least pages
        done = mfq.flushed_where if "flush_disk_type" in changes else mfq.committed_where
        assert done == store.get_max_phy_offset()
    finally:
        store.shutdown()
