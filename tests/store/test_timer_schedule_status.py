"""What the timer wheel and the schedule service report about themselves for views and notebooks:
``TimerMessageStore.slots`` / ``recent_events`` and ``ScheduleMessageService.waiting`` /
``recent_deliveries`` / ``LevelStatus.next_due_ms``, checked against the files and the events."""

from __future__ import annotations

from pathlib import Path

from rmqlab.clock import ManualClock
from rmqlab.codec.timer_log import MAGIC_DELETE, MAGIC_ROLL
from rmqlab.config import MessageStoreConfig
from rmqlab.events import EventRecorder, ScheduleDelivered, TimerDequeued, TimerEnqueued
from rmqlab.store import schedule as schedule_module
from rmqlab.store import timer_store as timer_module
from rmqlab.store.message import Message
from rmqlab.store.message_store import MessageStore

T0 = 1_700_000_000_000


def _open(path: Path, version: str = "5.3.3", **changes: object) -> MessageStore:
    config = MessageStoreConfig.small(str(path), rocketmq_version=version, **changes)
    return MessageStore.open(path, config, clock=ManualClock(T0), threaded=False)


def test_slots_count_each_chain_by_kind(tmp_path: Path) -> None:
    store = _open(tmp_path / "s", timer_roll_window_slot=20)
    try:
        at = str(T0 + 10_000)
        for key in ("U-1", "U-2"):
            store.put_message(Message("Orders", b"m", uniq_key=key, properties={"TIMER_DELIVER_MS": at}))
        store.put_message(Message("Orders", b"", properties={"TIMER_DELIVER_MS": at, "TIMER_DEL_UNIQKEY": "U-1"}))
        store.put_message(Message("Orders", b"far", properties={"TIMER_DELAY_SEC": "100"}))
        store.step()
        store.step()
        timer = store.timer
        slots = timer.slots(T0, T0 + 60_000)
        assert [(s.time_ms - T0, s.messages, s.rolls, s.deletes, s.num, s.complete) for s in slots] == [
            (9_000, 2, 0, 1, 1, True), (20_000, 0, 1, 0, 1, True)]
        nine = timer.wheel.get_slot(T0 + 9_000)
        assert (slots[0].first_pos, slots[0].last_pos) == (nine.first_pos, nine.last_pos)
        # the same counts as the timerlog's magics say
        units = [timer.timer_log.unit_at(p) for p in range(0, timer.status().timer_log_end, 52)]
        assert sum(bool(u.magic & MAGIC_DELETE) for u in units) == 1
        assert sum(bool(u.magic & MAGIC_ROLL) for u in units) == 1
        assert timer.slots(T0 + 10_000, T0 + 20_000) == []  # the window is half-open
    finally:
        store.shutdown()


def test_recent_events_are_kept_without_a_subscriber_and_match_the_bus(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(timer_module, "RECENT_EVENTS", 3)
    store = _open(tmp_path / "s")
    try:
        store.put_message(Message("Orders", b"a", properties={"TIMER_DELAY_SEC": "2"}))
        store.step()
        store.step()
        ((at, first),) = store.timer.recent_events()  # nobody listened on the bus
        assert isinstance(first, TimerEnqueued)
        assert at == T0
        recorder = EventRecorder(store.bus)
        for body in (b"b", b"c"):
            store.put_message(Message("Orders", body, properties={"TIMER_DELAY_SEC": "5"}))
        store.step()
        store.step()
        store.clock.advance(2_000)
        store.step()
        timer_events = [e for e in recorder.events if isinstance(e, TimerEnqueued | TimerDequeued)]
        assert [type(e) for e in timer_events] == [TimerEnqueued, TimerEnqueued, TimerDequeued]
        kept = store.timer.recent_events()
        assert [e for _, e in kept] == timer_events  # the last RECENT_EVENTS, oldest first
        assert [t - T0 for t, _ in kept] == [0, 0, 2_000]
    finally:
        store.shutdown()


def test_schedule_waiting_next_due_and_recent_deliveries(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(schedule_module, "RECENT_DELIVERIES", 2)
    store = _open(tmp_path / "s", "4.9.8")
    try:
        for level in (2, 2, 2):
            store.put_message(Message("Orders", b"x", delay_time_level=level))
            store.clock.advance(1_000)
        store.step()
        sched = store.schedule
        assert sched.waiting(2) == [(0, T0 + 5_000), (1, T0 + 6_000), (2, T0 + 7_000)]
        assert sched.waiting(2, limit=1) == [(0, T0 + 5_000)]
        assert sched.waiting(1) == []  # no queue for level 1
        status = {s.level: s for s in sched.status()}
        assert (status[2].next_due_ms, status[1].next_due_ms) == (T0 + 5_000, None)
        recorder = EventRecorder(store.bus)
        store.clock.set(T0 + 6_000)
        store.step()
        assert sched.waiting(2) == [(2, T0 + 7_000)]
        assert {s.level: s for s in sched.status()}[2].next_due_ms == T0 + 7_000
        store.clock.set(T0 + 7_000)
        store.step()
        assert sched.waiting(2) == []
        assert {s.level: s for s in sched.status()}[2].next_due_ms is None
        delivered = [e for e in recorder.events if isinstance(e, ScheduleDelivered)]
        kept = sched.recent_deliveries()
        assert [e for _, e in kept] == delivered[-2:]  # the last RECENT_DELIVERIES
        assert [(t - T0, e.schedule_offset) for t, e in kept] == [(6_000, 1), (7_000, 2)]
    finally:
        store.shutdown()
