"""TimerView and ScheduleView: a real stepped store with a manual clock; the figures, markers and
tables follow puts, the clock and deliveries, live and on a read-only snapshot."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rmqlab.clock import ManualClock
from rmqlab.config import MessageStoreConfig
from rmqlab.inspect.snapshot import open_snapshot
from rmqlab.store.message import Message
from rmqlab.store.message_store import MessageStore
from rmqlab.widgets import ScheduleView, TimerView, timer_figures
from rmqlab.widgets._timer_source import TimerEventRow, TimerState

T0 = 1_700_000_000_000  # on a second boundary
EVIL = "<script>alert(1)</script>"


def _open(path: Path, version: str = "5.3.3", **changes: object) -> MessageStore:
    config = MessageStoreConfig.small(str(path), rocketmq_version=version, **changes)
    return MessageStore.open(path, config, clock=ManualClock(T0), threaded=False)


@pytest.fixture
def timer_store(tmp_path: Path) -> Iterator[MessageStore]:
    store = _open(tmp_path / "t", timer_roll_window_slot=20)  # a 20 s roll window: rolls show up in a minute
    yield store
    if not store.is_shutdown:
        store.shutdown()


def _timer_put(store: MessageStore, body: bytes, **props: str) -> None:
    r = store.put_message(Message("Orders", body, properties=props, uniq_key=props.pop("uniq", None)))
    assert r.ok, r.reason


def _bars(view: TimerView) -> dict[str, dict[float, int]]:
    """trace name -> {seconds from now: units}, zero bars left out."""
    return {t.name: {x: y for x, y in zip(t.x, t.y, strict=True) if y} for t in view.figure.data}


def _shape_x(fig, name: str) -> float:
    return next(s.x0 for s in fig.layout.shapes if s.name == name)


def _steps(store: MessageStore) -> None:
    """Dispatch, then the timer service's enqueue (it runs before reput in a step)."""
    store.step()
    store.step()


def _advance(store: MessageStore, ms: int) -> None:
    store.clock.advance(ms)  # type: ignore[attr-defined]
    store.step()


def test_wheel_counts_markers_and_events_follow_puts_time_and_delivery(timer_store: MessageStore) -> None:
    store = timer_store
    view = TimerView(store)  # subscribed: enqueue/dequeue events redraw it
    assert _bars(view) == {"message": {}, "roll (due beyond the window)": {}, "delete marker": {}}
    assert "0 unit(s) waiting" in view.figure.layout.title.text
    for delay in ("5", "5", "7"):
        _timer_put(store, b"soon", TIMER_DELAY_SEC=delay)
    _timer_put(store, b"far", TIMER_DELAY_SEC="45")  # past the 20 s window: parked as a roll at +20 s
    _steps(store)
    view.throttle.flush()
    assert not view.throttle.errors
    # TIMER_DELAY_SEC=5 from T0 is TIMER_OUT_MS T0 + 5 s, on a tick: the slot of T0 + 4 s
    bars = _bars(view)
    assert bars["message"] == {4.0: 2, 6.0: 1}
    assert bars["roll (due beyond the window)"] == {20.0: 1}
    assert bars["delete marker"] == {}
    assert [s.num for s in view.state.slots] == [
        store.timer.wheel.get_slot(T0 + k).num for k in (4000, 6000, 20_000)]
    assert _shape_x(view.figure, "now") == 0.0
    assert _shape_x(view.figure, "read time") == 0.0
    assert "4 unit(s) waiting in the next 60 s" in view.figure.layout.title.text
    assert view.events.value.count("<tr>") == 1 + 4
    assert view.events.value.count("<td>enqueued</td>") == 3
    assert view.events.value.count("<td>rolled in</td>") == 1
    assert "208 (4 units of 52 B)" in view.status.value  # the timerlog's write position

    _advance(store, 6_000)  # slots +4 and +5 are read; the clock stands at T0 + 6 s
    view.throttle.flush()
    bars = _bars(view)
    assert bars["message"] == {-2.0: 2, 0.0: 1}  # the read slot stays (faint): slots are never cleared
    opacity = dict(zip(view.figure.data[0].x, view.figure.data[0].marker.opacity, strict=True))
    assert (opacity[-2.0], opacity[0.0]) == (0.35, 1.0)
    assert _shape_x(view.figure, "read time") == 0.0
    assert view.state.counts["delivered"] == 2
    assert view.events.value.count("<td>delivered</td>") == 2
    assert "Orders/0 @" in view.events.value
    assert "2 unit(s) waiting" in view.figure.layout.title.text

    store.clock.advance(500)  # no event: the view redraws when asked
    view.refresh()
    assert _shape_x(view.figure, "now") == 0.0
    assert _bars(view)["message"] == {-2.5: 2, -0.5: 1}
    assert _shape_x(view.figure, "read time") == -0.5
    view.close()


def test_delete_markers_and_the_checkpoint(timer_store: MessageStore) -> None:
    store = timer_store
    at = str(T0 + 10_000)
    _timer_put(store, b"cancel me", TIMER_DELIVER_MS=at, uniq="U-1")
    _timer_put(store, b"keep me", TIMER_DELIVER_MS=at, uniq="U-2")
    _timer_put(store, b"", TIMER_DELIVER_MS=at, TIMER_DEL_UNIQKEY="U-1")
    store.step()
    view = TimerView(store, autoupdate=False)
    assert "3 not enqueued yet" in view.figure.layout.title.text  # dispatched, not yet in the wheel
    assert "timer queue offset</td><td>0 of 3" in view.status.value
    store.step()
    view.refresh()
    (slot,) = view.state.slots
    assert (slot.messages, slot.rolls, slot.deletes, slot.num) == (2, 0, 1, 1)
    assert _bars(view)["delete marker"] == {9.0: 1}
    assert "<td>delete marker</td>" in view.events.value
    cp = store.timer.checkpoint.values
    assert view.state.checkpoint == cp
    # not flushed since open: its read time is 7 days back, drawn at the axis' left edge
    assert _shape_x(view.figure, "checkpoint lastReadTimeMs") == -5.5
    assert any("(off the axis)" in a.text for a in view.figure.layout.annotations)
    _advance(store, 1_000)  # the flush round writes config/timercheck
    view.refresh()
    cp = store.timer.checkpoint.values
    # the round takes the checkpoint's values before it flushes the timerlog: the flush position lags a round
    assert (cp.last_timer_queue_offset, cp.last_timer_log_flush_pos) == (3, 0)
    assert "lastTimerQueueOffset 3" in view.status.value
    assert "timerlog flushed</td><td>156</td>" in view.status.value
    assert _shape_x(view.figure, "checkpoint lastReadTimeMs") == (cp.last_read_time_ms - T0 - 1_000) / 1000 == 0.0
    _advance(store, 1_000)
    view.refresh()
    assert "lastTimerLogFlushPos 156" in view.status.value
    _advance(store, 8_000)
    view.refresh()
    assert view.state.counts["delivered"] == 1
    assert view.state.counts["deleted"] == 1
    assert "<td>deleted</td>" in view.events.value
    view.close()


def test_timer_view_on_a_snapshot(tmp_path: Path) -> None:
    store = _open(tmp_path / "t", timer_roll_window_slot=20)
    for delay in ("3", "8", "8", "40"):
        _timer_put(store, b"x", TIMER_DELAY_SEC=delay)
    _steps(store)
    _advance(store, 1_000)  # flush: wheel, timerlog and timercheck on disk
    store.shutdown()
    with open_snapshot(tmp_path / "t") as snap:
        view = TimerView(snap)
        pending = snap.timers()
        assert not view.source.live
        assert view.state.read_time_ms == snap.timer_checkpoint()["last_read_time_ms"].item()
        slots = {s.time_ms: (s.messages, s.rolls) for s in view.state.slots}
        assert slots == {T0 + 2_000: (1, 0), T0 + 7_000: (2, 0), T0 + 20_000: (0, 1)}
        assert sum(s.units for s in view.state.slots) == len(pending)
        assert view.events.value.count("<td>in timerlog</td>") == len(snap.timer_log()) == 4
        assert "lastTimerLogFlushPos 208" in view.status.value
        view.close()


def test_timer_view_without_a_wheel(tmp_path: Path) -> None:
    store = _open(tmp_path / "v4", "4.9.8")
    try:
        view = TimerView(store, autoupdate=False)
        assert not view.state.enabled
        assert "4.9.8 has no timer wheel" in view.figure.layout.title.text
        assert list(view.figure.data) == []
        view.close()
    finally:
        store.shutdown()


def test_timer_tables_escape_stored_text() -> None:
    state = TimerState(True, True, EVIL, T0, read_time_ms=T0,
                       events=(TimerEventRow(T0, "enqueued", T0, 0, 0, EVIL, EVIL),), stuck=EVIL)
    for html in (timer_figures.timer_events_html(state), timer_figures.timer_status_html(state)):
        assert "<script>" not in html
        assert "&lt;script&gt;" in html
    assert timer_figures.timer_wheel_figure(state).layout.title.text.startswith("timer wheel")  # valid plotly


@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
def test_schedule_view_levels_due_times_and_deliveries(tmp_path: Path, version: str) -> None:
    store = _open(tmp_path / "s", version)
    try:
        view = ScheduleView(store)
        assert "0 message(s) waiting" in view.figure.layout.title.text
        for level in (1, 3, 3):
            assert store.put_message(Message("Orders", b"later", delay_time_level=level)).ok
        store.step()
        view.throttle.flush()
        waiting, nxt = view.figure.data
        assert sorted(zip(waiting.y, waiting.x, strict=True)) == [
            ("level 1 (1s)", 1.0), ("level 3 (10s)", 10.0), ("level 3 (10s)", 10.0)]
        assert list(waiting.customdata) == [0, 0, 1]  # schedule queue offsets
        assert sorted(zip(nxt.y, nxt.x, strict=True)) == [("level 1 (1s)", 1.0), ("level 3 (10s)", 10.0)]
        assert "3 message(s) waiting in SCHEDULE_TOPIC_XXXX; next due +1.0 s" in view.figure.layout.title.text
        levels = {lv.level: lv for lv in view.state.levels}
        assert (levels[3].offset, levels[3].max_offset, levels[3].waiting) == (0, 2, 2)
        assert view.table.value.count("<tr>") == 1 + 2
        _advance(store, 1_000)  # level 1 comes due
        view.throttle.flush()
        waiting, _ = view.figure.data
        assert sorted(zip(waiting.y, waiting.x, strict=True)) == [("level 3 (10s)", 9.0)] * 2
        levels = {lv.level: lv for lv in view.state.levels}
        assert (levels[1].offset, levels[1].waiting, levels[1].delivered, levels[1].next_due_ms) == (1, 0, 1, None)
        assert "<td>1</td><td>0</td><td>Orders/0</td>" in view.deliveries.value
        _advance(store, 9_000)
        view.throttle.flush()
        assert view.state.waiting == 0
        assert view.deliveries.value.count("<tr>") == 1 + 3
        view.close()
    finally:
        store.shutdown()
    with open_snapshot(tmp_path / "s") as snap:  # shutdown persisted config/delayOffset.json
        view = ScheduleView(snap)
        levels = {lv.level: lv for lv in view.state.levels}
        assert (levels[1].offset, levels[3].offset, levels[3].max_offset) == (1, 2, 2)
        assert view.state.source == "file"
        assert "offsets: config/delayOffset.json" in view.table.value
        view.close()


def test_schedule_view_on_a_snapshot_shows_what_waits(tmp_path: Path) -> None:
    store = _open(tmp_path / "s", "4.9.8")
    for level in (2, 2, 4):
        assert store.put_message(Message("Orders", b"later", delay_time_level=level)).ok
    store.step()
    store.shutdown()
    with open_snapshot(tmp_path / "s") as snap:
        view = ScheduleView(snap)
        waiting, _ = view.figure.data
        # a snapshot has no clock: times from the first due one (level 2: 5 s after the puts)
        assert sorted(zip(waiting.y, waiting.x, strict=True)) == [
            ("level 2 (5s)", 0.0), ("level 2 (5s)", 0.0), ("level 4 (30s)", 25.0)]
        assert view.state.waiting == 3
        view.close()
