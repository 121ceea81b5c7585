"""The 5.x ``timerwheel`` file: a ring of 32-byte slots, one per precision tick (spec 1.1).

RocketMQ's ``TimerWheel``/``Slot``. The file holds ``2 * slots_total`` slots (``slots_total`` =
7 days of seconds = 604,800, fixed whatever the precision), 38,707,200 bytes; any other
non-zero length aborts a broker's start-up. Slot ``i`` sits at byte ``i * 32``::

    0   8  time       long  due time / precisionMs (NOT milliseconds: a tick number)
    8   8  firstPos   long  timerlog offset of the slot's first unit
    16  8  lastPos    long  timerlog offset of its last unit (the chain head: walk prevPos back)
    24  4  num        int   units put minus delete units put (a congestion count)
    28  4  magic      int   unused, kept 0

A slot is found by ``(time_ms // precision_ms) % (2 * slots_total)``; it belongs to time ``t``
only if its ``time`` field equals ``t // precision_ms`` (the ring wraps every 14 days at the
default precision, and a dequeued slot is never cleared, so stale slots stay in the file).
An all-zero slot was never written (the file is created sparse/zeroed).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from rmqlab.errors import CorruptRecord, TruncatedRecord

__all__ = [
    "DEFAULT_TIMER_PRECISION_MS",
    "SLOTS_TOTAL",
    "SLOT_DTYPE",
    "SLOT_SIZE",
    "TIMER_BLANK_SLOTS",
    "TIMER_WHEEL_FILE_SIZE",
    "TIMER_WHEEL_TTL_DAY",
    "WHEEL_SLOTS",
    "TimerSlot",
    "check_wheel_length",
    "non_empty_slots",
    "slot_index",
    "slot_position",
    "wheel_length",
]

SLOT_SIZE = 32
TIMER_WHEEL_TTL_DAY = 7
DAY_SECS = 24 * 3600
SLOTS_TOTAL = TIMER_WHEEL_TTL_DAY * DAY_SECS  # 604,800
WHEEL_SLOTS = 2 * SLOTS_TOTAL  # 1,209,600 slots in the file
TIMER_WHEEL_FILE_SIZE = WHEEL_SLOTS * SLOT_SIZE  # 38,707,200 bytes (golden #25)
DEFAULT_TIMER_PRECISION_MS = 1000  # timerPrecisionMs
TIMER_BLANK_SLOTS = 60  # recovery never reads further back than slots_total - 60 ticks before now

SLOT_DTYPE = np.dtype([("time", ">i8"), ("first_pos", ">i8"), ("last_pos", ">i8"), ("num", ">i4"),
                       ("magic", ">i4")])
assert SLOT_DTYPE.itemsize == SLOT_SIZE
_SLOT = struct.Struct(">qqqii")


def wheel_length(slots_total: int = SLOTS_TOTAL) -> int:
    """File length for ``slots_total``: ``slots_total * 2 * 32``."""
    return slots_total * 2 * SLOT_SIZE


def slot_index(time_ms: int, precision_ms: int = DEFAULT_TIMER_PRECISION_MS, slots_total: int = SLOTS_TOTAL) -> int:
    """``(time_ms / precision_ms) % (2 * slots_total)`` (``getSlotIndex``; times are >= 0)."""
    return (time_ms // precision_ms) % (2 * slots_total)


def slot_position(index: int) -> int:
    """Byte offset of slot ``index``."""
    return index * SLOT_SIZE


@dataclass(frozen=True, slots=True)
class TimerSlot:
    """One slot as stored. ``time`` is the tick number (``due_ms // precision_ms``)."""

    time: int
    first_pos: int
    last_pos: int
    num: int = 0
    magic: int = 0

    def time_ms(self, precision_ms: int = DEFAULT_TIMER_PRECISION_MS) -> int:
        """The slot's due time in ms (``Slot.timeMs`` as ``getRawSlot`` returns it)."""
        return self.time * precision_ms

    @classmethod
    def for_time(cls, time_ms: int, first_pos: int, last_pos: int, num: int = 0, magic: int = 0,
                 precision_ms: int = DEFAULT_TIMER_PRECISION_MS) -> TimerSlot:
        """The slot ``putSlot(time_ms, ...)`` writes: the time stored as a tick number."""
        return cls(time_ms // precision_ms, first_pos, last_pos, num, magic)

    def pack(self) -> bytes:
        return _SLOT.pack(self.time, self.first_pos, self.last_pos, self.num, self.magic)

    def pack_into(self, buf: Any, index: int) -> None:
        """Write this slot as slot number ``index`` of a wheel buffer."""
        _SLOT.pack_into(buf, slot_position(index), self.time, self.first_pos, self.last_pos, self.num, self.magic)

    @classmethod
    def unpack(cls, buf: Any, index: int = 0) -> TimerSlot:
        """Slot number ``index`` of ``buf``; ``TruncatedRecord`` when the buffer ends inside it."""
        pos = slot_position(index)
        if index < 0 or pos + SLOT_SIZE > len(buf):
            raise TruncatedRecord(None, pos, f"timer wheel slot {index} needs {SLOT_SIZE} bytes")
        return cls(*_SLOT.unpack_from(buf, pos))


def check_wheel_length(length: int, file: str | None = None, slots_total: int = SLOTS_TOTAL) -> None:
    """``CorruptRecord(reason="length_mismatch")`` unless ``length`` is 0 or the wheel's length: the
    check ``TimerWheel``'s constructor makes before a broker may start. The offset named is where
    the file ends (short) or where it should have ended (long)."""
    expected = wheel_length(slots_total)
    if length not in (0, expected):
        raise CorruptRecord(file, min(length, expected), "length_mismatch",
                            f"timer wheel is {length} bytes, expected {expected}")


def non_empty_slots(buf: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(indices, slots)``: the slots of a wheel buffer that hold any non-zero byte, in index
    order, as an int64 index array and a ``SLOT_DTYPE`` array (a copy; the buffer may be closed).

    One vectorised pass over the buffer as 8-byte words (38.7 MB in a few tens of ms); a
    partial slot at the end is ignored (check the length first with :func:`check_wheel_length`).
    """
    n = len(buf) // SLOT_SIZE
    words = np.frombuffer(buf, dtype=np.uint64, count=n * 4).reshape(n, 4)
    idx = np.flatnonzero(words.any(axis=1))
    slots = np.frombuffer(buf, dtype=SLOT_DTYPE, count=n)[idx].copy()
    return idx.astype(np.int64), slots
