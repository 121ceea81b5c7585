"""Pure figure builders for delayed and timer messages: :class:`TimerState` / :class:`ScheduleState`
-> figure specs and escaped HTML tables (the conventions of :mod:`rmqlab.widgets.figures`).

Time axes are seconds relative to the store's clock (``now``): a slot due in 10 s sits at +10.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import plotly.graph_objects as go

from rmqlab.widgets.figures import Spec, _base_layout, esc, to_figure

if TYPE_CHECKING:
    from rmqlab.widgets._timer_source import ScheduleState, TimerSlotState, TimerState

__all__ = [
    "KIND_COLORS",
    "schedule_deliveries_html",
    "schedule_figure",
    "schedule_spec",
    "schedule_table_html",
    "timer_events_html",
    "timer_status_html",
    "timer_wheel_figure",
    "timer_wheel_spec",
]

#: unit kind -> (trace name, colour); the wheel's bars stack in this order
KIND_COLORS = {
    "messages": ("message", "#1f77b4"),
    "rolls": ("roll (due beyond the window)", "#ff7f0e"),
    "deletes": ("delete marker", "#d62728"),
}
_MARKERS = {  # marker name -> (colour, dash)
    "now": ("#31a354", "solid"),
    "read time": ("#08519c", "dash"),
    "checkpoint lastReadTimeMs": ("#756bb1", "dot"),
}


def _s(ms: int, now: int) -> float:
    """``ms`` as seconds from ``now``."""
    return (ms - now) / 1000


def _clock(ms: int | None) -> str:
    if ms is None:
        return "-"
    try:
        return datetime.fromtimestamp(ms / 1000).astimezone().strftime("%H:%M:%S.%f")[:-3]
    except (OverflowError, OSError, ValueError):
        return str(ms)


def _rel(ms: int | None, now: int) -> str:
    return "-" if ms is None else f"{_s(ms, now):+.1f} s"


def _vline(name: str, x: float, label: str, row: int) -> tuple[dict[str, Any], dict[str, Any]]:
    color, dash = _MARKERS[name]
    shape = {"type": "line", "name": name, "x0": x, "x1": x, "yref": "paper", "y0": 0, "y1": 1,
             "line": {"color": color, "dash": dash, "width": 2}}
    note = {"x": x, "yref": "paper", "y": 1.0, "yshift": 2 + 13 * row, "yanchor": "bottom", "showarrow": False,
            "text": esc(label), "font": {"size": 10, "color": color}, "name": name}
    return shape, note


# ---------------------------------------------------------------------------------------- timer
def _slot_hover(s: TimerSlotState, state: TimerState) -> str:
    read = "read already (slots are never cleared)" if s.time_ms < state.read_time_ms else "waiting for dequeue"
    return (f"<b>slot {_clock(s.time_ms)}</b> ({_rel(s.time_ms, state.now_ms)}), {read}<br>"
            f"{s.messages} message(s), {s.rolls} roll(s), {s.deletes} delete marker(s); num field {s.num}<br>"
            f"chain in timerlog: firstPos {s.first_pos:,} .. lastPos {s.last_pos:,}")


def timer_wheel_spec(state: TimerState) -> Spec:
    """The wheel's slots from a few ticks before the read time to the horizon: one stacked bar
    per slot (x = its time in seconds from now) split into messages, rolls and delete markers;
    slots before the read time (dequeued already: their bytes stay) drawn faint. Vertical
    markers: now (the clock, where the write time is), the read time (dequeue's position) and
    the checkpoint's ``lastReadTimeMs`` (what a restart would resume from).

    Traces, in order: message, roll, delete marker (``customdata``: each slot's time in ms).
    """
    if not state.enabled:
        return {"data": [], "layout": _base_layout(f"timer wheel: not here ({state.note})", height=160)}
    now, slots = state.now_ms, state.slots
    xs = [_s(s.time_ms, now) for s in slots]
    faint = [0.35 if s.time_ms < state.read_time_ms else 1.0 for s in slots]
    hover = [_slot_hover(s, state) for s in slots]
    data = [{"type": "bar", "name": name, "x": xs, "y": [getattr(s, kind) for s in slots],
             "customdata": [s.time_ms for s in slots], "hovertext": hover, "hoverinfo": "text",
             "marker": {"color": color, "opacity": faint}, "width": state.precision_ms / 1000 * 0.8}
            for kind, (name, color) in KIND_COLORS.items()]
    shapes, notes = [], []
    marks = [("now", now, f"now {_clock(now)}"),
             ("read time", state.read_time_ms, f"read time {_rel(state.read_time_ms, now)}")]
    if state.checkpoint is not None:
        cp = state.checkpoint.last_read_time_ms
        marks.append(("checkpoint lastReadTimeMs", cp, f"checkpoint {_rel(cp, now)}"))
    lo, hi = _s(state.window_from_ms, now) - 0.5, _s(state.window_to_ms, now)
    for row, (name, ms, label) in enumerate(marks):
        x = _s(ms, now)
        if not lo <= x <= hi:  # e.g. a checkpoint not written yet: at the edge, its label says where
            x, label = min(max(x, lo), hi), f"{label} (off the axis)"
        shape, note = _vline(name, x, label, row)
        shapes.append(shape)
        notes.append(note)
    ahead = sum(s.units for s in slots if s.time_ms >= state.read_time_ms)
    title = (f"timer wheel: {ahead} unit(s) waiting in the next {_s(state.window_to_ms, now):.0f} s, "
             f"{state.beyond} beyond; {state.enqueue_behind} not enqueued yet")
    layout = _base_layout(title, height=320, shapes=shapes, annotations=notes, barmode="stack",
                          margin={"l": 60, "r": 20, "t": 36 + 13 * len(marks), "b": 40},
                          xaxis={"title": {"text": "slot time, seconds from now"}, "zeroline": False,
                                 "range": [lo, hi]},
                          yaxis={"title": {"text": "units in the slot's chain"}, "rangemode": "tozero",
                                 **({"dtick": 1} if max((s.units for s in slots), default=0) <= 10 else {})},
                          legend={"orientation": "h", "y": -0.2, "traceorder": "normal"})
    layout["title"].update(yref="container", y=1.0, yanchor="top", pad={"t": 8})  # above the marker labels
    return {"data": data, "layout": layout}


def timer_wheel_figure(state: TimerState) -> go.Figure:
    """:func:`timer_wheel_spec` as a Figure."""
    return to_figure(timer_wheel_spec(state))


def timer_status_html(state: TimerState) -> str:
    """The service's live position beside ``config/timercheck``'s values, the timerlog's write
    and flush positions, and the counters. All text escaped."""
    if not state.enabled:
        return f"<i>{esc(state.note)}</i>"
    cp, now = state.checkpoint, state.now_ms
    live = "live" if state.live else "snapshot"

    def row(name: str, value: str, stored: str) -> str:
        return f"<tr><td>{esc(name)}</td><td>{value}</td><td>{stored}</td></tr>"

    rows = [
        row("read time (dequeue)", f"{_clock(state.read_time_ms)} ({_rel(state.read_time_ms, now)})",
            f"lastReadTimeMs {_clock(cp.last_read_time_ms)} ({_rel(cp.last_read_time_ms, now)})" if cp else "-"),
        row("write time (enqueue)", _clock(state.write_time_ms), "-"),
        row("timer queue offset", f"{state.queue_offset:,} of {state.max_queue_offset:,}",
            f"lastTimerQueueOffset {cp.last_timer_queue_offset:,}, masterTimerQueueOffset "
            f"{cp.master_timer_queue_offset:,}" if cp else "-"),
        row("timerlog end", f"{state.timer_log_end:,} ({state.timer_log_end // 52:,} units of 52 B)",
            f"lastTimerLogFlushPos {cp.last_timer_log_flush_pos:,}" if cp else "-"),
        row("timerlog flushed", "-" if state.timer_log_flushed is None else f"{state.timer_log_flushed:,}", "-"),
        row("dataVersion", "-", f"counter {cp.counter}, timestamp {_clock(cp.timestamp or None)}" if cp else "-"),
    ]
    if state.roll_window_ms is not None:
        rows.append(row("roll window", f"{state.roll_window_ms / 1000:,.0f} s", "-"))
    counts = ", ".join(f"{k} {v}" for k, v in state.counts.items())
    extra = (f"<div>since open: {esc(counts)}</div>" if counts else "") + (
        f"<div style='color:#de2d26'>stuck: {esc(state.stuck)}</div>" if state.stuck else "") + (
        f"<div><i>{esc(state.note)}</i></div>" if state.note else "")
    return ("<table class='rmq-timer-status' style='font-size:12px'>"
            f"<tr><th></th><th>{live}</th><th>config/timercheck</th></tr>" + "".join(rows) + "</table>" + extra)


def timer_events_html(state: TimerState, limit: int = 20) -> str:
    """The last ``limit`` enqueues and dequeues, newest first (a snapshot: the last timerlog
    units). All text escaped."""
    if not state.enabled:
        return ""
    rows = "".join(
        f"<tr><td>{'-' if e.at_ms is None else _clock(e.at_ms)}</td><td>{esc(e.what)}</td>"
        f"<td>{_clock(e.slot_ms)} ({_rel(e.slot_ms, state.now_ms)})</td><td>{e.commit_log_offset:,}</td>"
        f"<td>{'-' if e.timer_log_offset < 0 else f'{e.timer_log_offset:,}'}</td><td>{esc(e.topic or '')}</td>"
        f"<td>{esc(e.to)}</td></tr>"
        for e in reversed(state.events[-limit:]))
    if not rows:
        return "<i>no timer events yet</i>"
    return ("<table class='rmq-timer-events' style='font-size:12px'><tr><th>at</th><th>what</th><th>slot</th>"
            "<th>CommitLog offset</th><th>timerlog offset</th><th>real topic</th><th>detail</th></tr>"
            + rows + "</table>")


# ---------------------------------------------------------------------------------------- schedule
def _delay_text(delay_ms: int | None) -> str:
    """``delay_ms`` as ``messageDelayLevel`` writes it (``10s``, ``2m``, ``1h``)."""
    if delay_ms is None:
        return "?"
    s = delay_ms / 1000
    if s >= 3600 and s % 3600 == 0:
        return f"{s / 3600:g}h"
    return f"{s / 60:g}m" if s >= 60 and s % 60 == 0 else f"{s:g}s"


def _level_label(level: int, delay_ms: int | None) -> str:
    return f"level {level} ({_delay_text(delay_ms)})"


def schedule_spec(state: ScheduleState, levels: Sequence[int] | None = None) -> Spec:
    """Each waiting delayed message a dot on its level's row at its due time (seconds from now;
    the level's next due one larger), and a line at now. Rows: the levels with anything queued,
    or ``levels``. Traces, in order: waiting (``customdata``: schedule queue offsets), next due."""
    shown = [lv for lv in state.levels if (lv.level in levels if levels is not None else lv.max_offset)]
    now = state.now_ms
    labels = {lv.level: _level_label(lv.level, lv.delay_ms) for lv in shown}
    xs, ys, cd, hover = [], [], [], []
    for lv in shown:
        for offset, due in lv.due:
            xs.append(_s(due, now))
            ys.append(labels[lv.level])
            cd.append(offset)
            hover.append(f"{esc(labels[lv.level])}, SCHEDULE_TOPIC_XXXX queue {lv.level - 1} offset {offset}"
                         f"<br>due {_clock(due)} ({_rel(due, now)}): the unit's tags code")
    nxt = [lv for lv in shown if lv.next_due_ms is not None]
    data = [
        {"type": "scatter", "mode": "markers", "name": "waiting", "x": xs, "y": ys, "customdata": cd,
         "hovertext": hover, "hoverinfo": "text", "marker": {"size": 9, "color": "#1f77b4"}},
        {"type": "scatter", "mode": "markers", "name": "next due", "x": [_s(lv.next_due_ms or 0, now) for lv in nxt],
         "y": [labels[lv.level] for lv in nxt], "hoverinfo": "skip",
         "marker": {"size": 16, "color": "rgba(0,0,0,0)", "line": {"color": "#de2d26", "width": 2}}},
    ]
    shape, note = _vline("now", 0.0, "now" if state.live else "first due time (a snapshot has no clock)", 0)
    waiting = state.waiting
    first = min((lv.next_due_ms for lv in nxt if lv.next_due_ms is not None), default=None)
    title = (f"delay levels: {waiting} message(s) waiting in SCHEDULE_TOPIC_XXXX"
             + (f"; next due {_rel(first, now)}" if first is not None else ""))
    cats = [labels[lv.level] for lv in reversed(shown)]
    layout = _base_layout(title, height=max(200, 110 + 28 * len(shown)), shapes=[shape], annotations=[note],
                          margin={"l": 110, "r": 20, "t": 54, "b": 40},
                          xaxis={"title": {"text": "due, seconds from now"}, "zeroline": False},
                          yaxis={"categoryorder": "array", "categoryarray": cats, "type": "category"},
                          legend={"orientation": "h", "y": -0.3})
    layout["title"].update(yref="container", y=1.0, yanchor="top", pad={"t": 8})
    return {"data": data, "layout": layout}


def schedule_figure(state: ScheduleState, levels: Sequence[int] | None = None) -> go.Figure:
    """:func:`schedule_spec` as a Figure."""
    return to_figure(schedule_spec(state, levels))


def schedule_table_html(state: ScheduleState, *, all_levels: bool = False) -> str:
    """Per level: its queue, delay, delivered offset (``config/delayOffset.json``), queue max,
    waiting, next due, delivered since open, and why it is stuck. Levels with nothing queued
    are left out unless ``all_levels``."""
    now = state.now_ms
    rows = "".join(
        f"<tr><td>{lv.level}</td><td>{lv.level - 1}</td><td>{esc(_delay_text(lv.delay_ms))}</td>"
        f"<td>{'-' if lv.offset is None else lv.offset}</td><td>{lv.max_offset}</td><td>{lv.waiting}</td>"
        f"<td>{_rel(lv.next_due_ms, now)}</td><td>{'-' if lv.delivered is None else lv.delivered}</td>"
        f"<td>{esc(lv.stuck)}</td></tr>"
        for lv in state.levels if all_levels or lv.max_offset)
    src = {"live": "live", "file": "config/delayOffset.json", "bak": "config/delayOffset.json.bak"}.get(
        state.source or "", "no delayOffset.json")
    note = f"<div><i>{esc(state.note)}</i></div>" if state.note else ""
    if not rows:
        return f"<i>no delayed messages yet (offsets: {esc(src)})</i>" + note
    return (f"<div>offsets: {esc(src)}</div><table class='rmq-delay-levels' style='font-size:12px'><tr>"
            "<th>level</th><th>queue</th><th>delay</th><th>delivered offset</th><th>queue max</th><th>waiting</th>"
            "<th>next due</th><th>delivered</th><th>stuck</th></tr>" + rows + "</table>" + note)


def schedule_deliveries_html(state: ScheduleState, limit: int = 20) -> str:
    """The last ``limit`` deliveries, newest first."""
    rows = "".join(
        f"<tr><td>{_clock(at)}</td><td>{level}</td><td>{offset}</td><td>{esc(topic)}/{qid}</td><td>{to:,}</td></tr>"
        for at, level, offset, topic, qid, to in reversed(state.deliveries[-limit:]))
    if not rows:
        return "<i>no deliveries yet</i>" if state.live else ""
    return ("<table class='rmq-delay-deliveries' style='font-size:12px'><tr><th>at</th><th>level</th>"
            "<th>schedule offset</th><th>to queue</th><th>new CommitLog offset</th></tr>" + rows + "</table>")
