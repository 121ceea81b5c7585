"""What the timer and schedule views draw, as plain values, from a live store or a snapshot.

Live, every number comes from the engine's own reports (``store.timer.status()``, ``.slots()``,
``.recent_events()``, ``.checkpoint.values``; ``store.schedule.status()``, ``.waiting()``,
``.recent_deliveries()``). On a read-only snapshot it comes from the inspection layer
(:mod:`rmqlab.inspect.timers`: ``config/timercheck``, the pending chains of the wheel, the
timerlog; ``snap.delays()`` and the schedule queues' units). Nothing here interprets bytes or
decides what the engine would do; it only reshapes the answers for the figure builders in
:mod:`rmqlab.widgets.timer_figures`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rmqlab.codec.flags import SCHEDULE_TOPIC, TIMER_TOPIC
from rmqlab.events import TimerEnqueued

if TYPE_CHECKING:
    from rmqlab.codec.timer_checkpoint import TimerCheckpoint
    from rmqlab.inspect.snapshot import StoreSnapshot
    from rmqlab.store.message_store import MessageStore
    from rmqlab.widgets._source import Source

__all__ = ["DelayLevelState", "ScheduleState", "TimerEventRow", "TimerSlotState", "TimerState", "schedule_state",
           "timer_state"]

_PAST_TICKS = 5  # slots drawn before the read time (already read: slots are never cleared)
_EVENT_ROWS = 64
_UNIT_SIZE = 52


@dataclass(frozen=True, slots=True)
class TimerSlotState:
    """One valid wheel slot in the drawn window: its tick's time, its units by kind (as dequeue
    treats them) and the slot's own ``num`` field (messages minus delete markers)."""

    time_ms: int
    messages: int
    rolls: int
    deletes: int
    num: int
    first_pos: int = -1
    last_pos: int = -1

    @property
    def units(self) -> int:
        return self.messages + self.rolls + self.deletes


@dataclass(frozen=True, slots=True)
class TimerEventRow:
    """One line of the events table. ``what``: ``enqueued``, ``rolled in`` (parked in a slot
    inside the roll window), ``delete marker``, ``due at once`` (handed back without a unit), a
    dequeue outcome (``delivered``, ``rolled``, ``deleted``, ``dropped``, ``missing``), or for a
    snapshot ``in timerlog`` (a unit on disk; when it was dequeued is not stored)."""

    at_ms: int | None
    what: str
    slot_ms: int
    commit_log_offset: int
    timer_log_offset: int = -1
    topic: str | None = None
    to: str = ""


@dataclass(frozen=True, slots=True)
class TimerState:
    """The timer wheel as the view draws it. ``enabled`` False: not a 5.x store with the wheel
    (``note`` says why). Times are clock ms; ``now_ms`` is the store's clock (a snapshot: the
    checkpoint's read time). ``read_time_ms``/``queue_offset`` are the live values (a snapshot:
    the checkpoint's); ``checkpoint`` is what ``config/timercheck`` holds (live: the values the
    last flush round wrote). ``slots``: the valid slots in ``[window_from_ms, window_to_ms)``;
    ``beyond``: units pending in later slots (``num`` summed: delete markers subtract)."""

    enabled: bool
    live: bool = False
    note: str = ""
    now_ms: int = 0
    precision_ms: int = 1000
    read_time_ms: int = 0
    write_time_ms: int | None = None
    queue_offset: int = 0
    max_queue_offset: int = 0
    timer_log_end: int = 0
    timer_log_flushed: int | None = None
    checkpoint: TimerCheckpoint | None = None
    window_from_ms: int = 0
    window_to_ms: int = 0
    slots: tuple[TimerSlotState, ...] = ()
    beyond: int = 0
    roll_window_ms: int | None = None
    counts: dict[str, int] = field(default_factory=dict)
    stuck: str = ""
    events: tuple[TimerEventRow, ...] = ()

    @property
    def enqueue_behind(self) -> int:
        """``rmq_sys_wheel_timer`` units not in the wheel yet."""
        return max(0, self.max_queue_offset - self.queue_offset)

    @property
    def units_in_window(self) -> int:
        return sum(s.units for s in self.slots)


@dataclass(frozen=True, slots=True)
class DelayLevelState:
    """One delay level: ``SCHEDULE_TOPIC_XXXX`` queue ``level - 1``. ``offset``: the first unit
    not delivered (what ``config/delayOffset.json`` keeps; None when a snapshot's file has none
    for it); ``due``: ``(queue offset, due ms)`` of the waiting units (at most a view's limit);
    ``delivered``: since the store opened (None for a snapshot)."""

    level: int
    delay_ms: int | None
    offset: int | None
    max_offset: int
    waiting: int
    next_due_ms: int | None
    due: tuple[tuple[int, int], ...] = ()
    delivered: int | None = None
    stuck: str = ""


@dataclass(frozen=True, slots=True)
class ScheduleState:
    """The schedule service's levels (every level of ``messageDelayLevel``, plus any other level
    a schedule queue exists for) and its last deliveries ``(clock ms, level, schedule offset, real
    topic, queue id, new CommitLog offset)``. ``source``: ``live``, or for a snapshot where the
    offsets came from (``file``, ``bak``, None)."""

    live: bool
    now_ms: int
    levels: tuple[DelayLevelState, ...]
    source: str | None = "live"
    deliveries: tuple[tuple[int, int, int, str, int, int], ...] = ()
    note: str = ""

    @property
    def waiting(self) -> int:
        return sum(lv.waiting for lv in self.levels)


# ------------------------------------------------------------------------------------ timer
def timer_state(source: Source, horizon_ms: int = 60_000) -> TimerState:
    """The wheel from a few ticks before the read time (or now) to ``horizon_ms`` past now."""
    if source.store is not None:
        return _live_timer(source.store, horizon_ms)
    assert source.snapshot is not None
    return _snapshot_timer(source.snapshot, horizon_ms)


def _window(read_ms: int, now_ms: int, p: int, horizon_ms: int) -> tuple[int, int]:
    now = now_ms // p * p
    start = max(min(read_ms, now) - _PAST_TICKS * p, now - horizon_ms)
    return start, now + horizon_ms


def _live_timer(store: MessageStore, horizon_ms: int) -> TimerState:
    timer = store.timer
    if timer is None:
        why = ("RocketMQ 4.9.8 has no timer wheel" if store.config.is_v4
               else "timer_wheel_enable is off: timer messages are refused")
        return TimerState(False, True, why, store.clock.now_ms())
    s = timer.status()
    now, p = store.clock.now_ms(), timer.precision_ms
    lo, hi = _window(s.curr_read_time_ms, now, p, horizon_ms)
    slots = tuple(TimerSlotState(x.time_ms, x.messages, x.rolls, x.deletes, x.num, x.first_pos, x.last_pos)
                  for x in timer.slots(lo, hi))
    shown = sum(x.num for x in slots if x.time_ms >= s.curr_read_time_ms)
    events = tuple(_event_row(at, e) for at, e in timer.recent_events()[-_EVENT_ROWS:])
    counts = {k: getattr(s, k) for k in ("enqueued", "delivered", "rolled", "deleted", "dropped", "missing")}
    return TimerState(
        True, True, "", now, p, s.curr_read_time_ms, s.curr_write_time_ms, s.curr_queue_offset, s.max_queue_offset,
        s.timer_log_end, timer.timer_log.mapped_file_queue.flushed_where, timer.checkpoint.values, lo, hi, slots,
        max(0, s.congest_num - shown), timer.roll_window_slots * p, counts, s.stuck, events)


def _event_row(at: int, e: Any) -> TimerEventRow:
    if isinstance(e, TimerEnqueued):
        what = ("due at once" if e.timer_log_offset == -1 else "rolled in" if e.roll
                else "delete marker" if e.delete else "enqueued")
        return TimerEventRow(at, what, e.slot_ms, e.commit_log_offset, e.timer_log_offset, e.real_topic,
                             f"queue offset {e.queue_offset}")
    to = (f"{e.topic}/{e.queue_id} @ {e.to_offset:,}" if e.to_offset >= 0 and e.topic is not None else "")
    return TimerEventRow(at, e.outcome, e.slot_ms, e.from_offset, -1, e.topic, to)


def _snapshot_timer(snap: StoreSnapshot, horizon_ms: int) -> TimerState:
    from rmqlab.inspect.timers import timer_checkpoint_values

    pending = snap.timers()
    if not len(pending) and pending.attrs.get("note", "").startswith("no timer files"):
        return TimerState(False, False, pending.attrs["note"])
    cp = timer_checkpoint_values(snap)
    p = 1000  # timerPrecisionMs is configuration, not stored (rmqlab.inspect.timers)
    read = cp.last_read_time_ms if cp is not None else 0
    lo, hi = _window(read, read, p, horizon_ms)
    wheel = pending[pending["stage"] == "wheel"].dropna(subset=["slot_ms"])
    slots = []
    for slot_ms, rows in wheel.groupby("slot_ms", sort=True):
        if not lo <= int(slot_ms) < hi:
            continue
        kinds = rows["kind"].value_counts().to_dict()
        m, r, d = kinds.get("message", 0), kinds.get("roll", 0), kinds.get("delete", 0)
        slots.append(TimerSlotState(int(slot_ms), m, r, d, m + r - d))
    later = wheel[wheel["slot_ms"] >= hi]
    beyond = int((later["kind"] != "delete").sum() - (later["kind"] == "delete").sum())
    log = snap.timer_log()
    end = int(log["timer_log_offset"].max()) + _UNIT_SIZE if len(log) else 0
    events = tuple(TimerEventRow(None, "in timerlog", int(u.delayed_time_ms) // p * p, int(u.offset_py),
                                 int(u.timer_log_offset), None,
                                 "roll" if u.roll else "delete marker" if u.delete else "")
                   for u in log.tail(_EVENT_ROWS).itertuples())
    q = snap.consume_queues.get((TIMER_TOPIC, 0))
    max_q = q.units()[0] + len(q.units()[1]) if q is not None else 0
    note = pending.attrs.get("note", "")
    return TimerState(True, False, note, read, p, read, None, cp.last_timer_queue_offset if cp else 0, max_q, end,
                      None, cp, lo, hi, tuple(slots), beyond, None, {}, "", events)


# ------------------------------------------------------------------------------------ schedule
def schedule_state(source: Source, due_limit: int = 200) -> ScheduleState:
    """Every delay level, with up to ``due_limit`` waiting due times each."""
    if source.store is not None:
        return _live_schedule(source.store, due_limit)
    assert source.snapshot is not None
    return _snapshot_schedule(source.snapshot, due_limit)


def _live_schedule(store: MessageStore, due_limit: int) -> ScheduleState:
    sched = store.schedule
    now = store.clock.now_ms()
    if not sched.started:
        return ScheduleState(True, now, (), note="the schedule service is not running (a SLAVE, or not started)")
    levels = tuple(DelayLevelState(s.level, s.delay_ms, s.offset, s.max_offset, s.waiting, s.next_due_ms,
                                   tuple(sched.waiting(s.level, due_limit)), s.delivered, s.stuck)
                   for s in sched.status())
    deliveries = tuple((at, e.level, e.schedule_offset, e.topic, e.queue_id, e.to_offset)
                       for at, e in sched.recent_deliveries())
    return ScheduleState(True, now, levels, "live", deliveries)


def _snapshot_schedule(snap: StoreSnapshot, due_limit: int) -> ScheduleState:
    df = snap.delays()
    by_level = {int(r.level): r for r in df.itertuples()}
    from rmqlab.config import MessageStoreConfig

    table = MessageStoreConfig().delay_level_table
    levels = []
    for level in sorted(set(table) | set(by_level)):
        r = by_level.get(level)
        if r is None:
            levels.append(DelayLevelState(level, table.get(level), None, 0, 0, None))
            continue
        offset = None if _na(r.offset) else int(r.offset)
        due = _snapshot_due(snap, level, max(offset or 0, int(r.min_offset)), due_limit)
        levels.append(DelayLevelState(level, None if _na(r.delay_ms) else int(r.delay_ms), offset,
                                      int(r.max_offset), int(r.waiting),
                                      None if _na(r.next_due_ms) else int(r.next_due_ms), due))
    cp_dir = os.path.join(snap.path, "config")
    note = "" if os.path.isdir(cp_dir) else "no config/ dir: no delay offsets stored"
    read = [d for lv in levels for _, d in lv.due[:1]]
    now = min(read) if read else 0  # a snapshot has no clock: draw from its first due time
    return ScheduleState(False, now, tuple(levels), df.attrs.get("source"), (), note or df.attrs.get("error", ""))


def _snapshot_due(snap: StoreSnapshot, level: int, start: int, limit: int) -> tuple[tuple[int, int], ...]:
    """Due times as the schedule queue's units say (their tags codes, spec 2.10)."""
    q = snap.consume_queues.get((SCHEDULE_TOPIC, level - 1))
    if q is None:
        return ()
    base, units = q.units()
    k0 = max(0, start - base)
    codes = units["tags_code"][k0 : k0 + limit].tolist()
    sizes = units["size"][k0 : k0 + limit].tolist()
    return tuple((base + k0 + i, int(c)) for i, (c, s) in enumerate(zip(codes, sizes, strict=True))
                 if s != 0x7FFFFFFF)


def _na(value: Any) -> bool:
    import pandas as pd

    return value is None or value is pd.NA or (isinstance(value, float) and value != value)
