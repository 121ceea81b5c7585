"""Engine events: the seam between the engine and whatever watches it (widgets, tests, logs).

Events are small frozen dataclasses. ``EventBus.publish`` calls subscribers synchronously in the
publishing thread. Publishing must cost nothing measurable when nobody listens, so hot paths do
``if bus.active: bus.publish(Appended(...))`` and never build the event otherwise.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Appended",
    "CheckpointWritten",
    "CleanupDecision",
    "Committed",
    "Dispatched",
    "Event",
    "EventBus",
    "FileCreated",
    "FileDeleted",
    "FileTruncated",
    "FileWarmed",
    "Flushed",
    "IndexFileRolled",
    "IndexPut",
    "MemoryEvicted",
    "MemoryPut",
    "RecoveryStep",
    "Rolled",
    "ScheduleDelivered",
    "TimerDequeued",
    "TimerEnqueued",
]


@dataclass(frozen=True, slots=True)
class Event:
    """Base class; ``queue`` names the mapped-file queue or component (e.g. ``commitlog``)."""


@dataclass(frozen=True, slots=True)
class FileCreated(Event):
    queue: str
    file: str
    start_offset: int
    size: int
    preallocated: bool = False


@dataclass(frozen=True, slots=True)
class FileWarmed(Event):
    queue: str
    file: str
    pages: int
    mlocked: bool


@dataclass(frozen=True, slots=True)
class FileDeleted(Event):
    queue: str
    file: str
    start_offset: int
    reason: str = ""


@dataclass(frozen=True, slots=True)
class FileTruncated(Event):
    queue: str
    file: str
    position: int
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Appended(Event):
    queue: str
    file: str
    offset: int  # absolute offset of the first appended byte
    size: int
    wrote_position: int  # relative to the file


@dataclass(frozen=True, slots=True)
class Committed(Event):
    queue: str
    committed_where: int


@dataclass(frozen=True, slots=True)
class Flushed(Event):
    queue: str
    flushed_where: int
    store_timestamp: int = 0


@dataclass(frozen=True, slots=True)
class Rolled(Event):
    queue: str
    from_file: str
    to_file: str
    blank_offset: int
    blank_size: int


@dataclass(frozen=True, slots=True)
class Dispatched(Event):
    topic: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    size: int
    tags_code: int
    store_timestamp: int


@dataclass(frozen=True, slots=True)
class IndexPut(Event):
    file: str
    key: str
    slot: int
    item: int
    prev_item: int
    phy_offset: int


@dataclass(frozen=True, slots=True)
class IndexFileRolled(Event):
    from_file: str
    to_file: str


@dataclass(frozen=True, slots=True)
class CheckpointWritten(Event):
    physic_msg_timestamp: int
    logics_msg_timestamp: int
    index_msg_timestamp: int


@dataclass(frozen=True, slots=True)
class RecoveryStep(Event):
    phase: str  # e.g. "start_file", "record", "truncate", "consume_queue", "index"
    file: str
    offset: int
    decision: str
    reason: str = ""


@dataclass(frozen=True, slots=True)
class CleanupDecision(Event):
    file: str
    rule: str  # "time_up" | "space_full" | "forced" | "manual" | "none"
    decision: str  # "delete" | "keep" | ...
    reason: str = ""


@dataclass(frozen=True, slots=True)
class MemoryPut(Event):
    """Messages of a memory topic stored in RAM (after any ``MemoryEvicted`` the put caused)."""

    topic: str
    queue_id: int
    first_queue_offset: int
    count: int
    size: int


@dataclass(frozen=True, slots=True)
class MemoryEvicted(Event):
    topic: str
    queue_id: int
    queue_offset: int
    size: int


@dataclass(frozen=True, slots=True)
class ScheduleDelivered(Event):
    """A delayed message came due: the unit at ``schedule_offset`` of ``SCHEDULE_TOPIC_XXXX``
    queue ``level - 1`` (the record at ``from_offset``) put back into ``topic``/``queue_id``
    as the record at ``to_offset``."""

    level: int
    schedule_offset: int
    from_offset: int
    topic: str
    queue_id: int
    to_offset: int


@dataclass(frozen=True, slots=True)
class TimerEnqueued(Event):
    """A ``rmq_sys_wheel_timer`` message (queue offset ``queue_offset``, record at
    ``commit_log_offset``) entered the timer wheel: its unit at ``timer_log_offset`` hangs in the
    slot of ``slot_ms`` (``roll``: parked there, due later; ``delete``: a delete marker). A
    message already due is handed back at once: ``timer_log_offset`` is then -1."""

    queue_offset: int
    commit_log_offset: int
    timer_log_offset: int
    slot_ms: int
    real_topic: str | None
    roll: bool = False
    delete: bool = False


@dataclass(frozen=True, slots=True)
class TimerDequeued(Event):
    """The wheel's slot of ``slot_ms`` handed back the record at ``from_offset``: ``outcome`` is
    ``"delivered"`` (put into ``topic``/``queue_id`` as the record at ``to_offset``), ``"rolled"``
    (put back into ``rmq_sys_wheel_timer``), ``"deleted"`` (a delete marker of the slot names it),
    ``"dropped"`` (a delete marker, or a put RocketMQ does not retry) or ``"missing"`` (the record
    is gone)."""

    slot_ms: int
    from_offset: int
    outcome: str
    topic: str | None = None
    queue_id: int = -1
    to_offset: int = -1


@dataclass
class EventBus:
    """Synchronous publish/subscribe. ``active`` is a plain attribute read on hot paths."""

    _subscribers: list[Callable[[Event], Any]] = field(default_factory=list)
    active: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def subscribe(self, callback: Callable[[Event], Any]) -> Callable[[], None]:
        """Add ``callback``; returns a function that removes it again."""
        with self._lock:
            self._subscribers = [*self._subscribers, callback]
            self.active = True

        def unsubscribe() -> None:
            with self._lock:
                self._subscribers = [s for s in self._subscribers if s is not callback]
                self.active = bool(self._subscribers)

        return unsubscribe

    def publish(self, event: Event) -> None:
        for callback in self._subscribers:
            callback(event)


class EventRecorder:
    """A subscriber that keeps every event, for tests and notebooks."""

    def __init__(self, bus: EventBus | None = None) -> None:
        self.events: list[Event] = []
        if bus is not None:
            bus.subscribe(self)

    def __call__(self, event: Event) -> None:
        self.events.append(event)

    def of(self, kind: type[Event]) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]
