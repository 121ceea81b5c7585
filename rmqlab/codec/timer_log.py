"""The 5.x ``timerlog/`` unit: 52 bytes per timer message put into the wheel (spec 1.1).

RocketMQ's ``TimerLog`` (a MappedFileQueue of 100 MiB files with 20-digit names) and the unit
``TimerMessageStore.doEnqueue`` appends::

    0   4  size              int   52 (UNIT_SIZE)
    4   8  prevPos           long  timerlog offset of the slot's previous unit, -1 for its first
    12  4  magic             int   1 DEFAULT | 2 ROLL | 4 DELETE (OR-ed; valid iff (m | 0xF) == 0xF)
    16  8  currWriteTimeMs   long  the wheel's write time when enqueued
    24  4  delay             int   delayedTimeMs - currWriteTimeMs (Java (int) cast)
    28  8  offsetPy          long  commitlog offset of the rmq_sys_wheel_timer message
    36  4  sizePy            int   its record size
    40  4  topicHash         int   String.hashCode of its REAL_TOPIC (0 when it has none)
    44  8  reserved          long  0

End of a file: a unit that does not fit with 16 bytes to spare (``52 + 16 > fileSize - wrote``)
goes to the next file; the rest of this one starts with the 16-byte blank ``int (fileSize -
wrote), long 0, int BLANK_MAGIC_CODE``. ``BLANK_MAGIC_CODE`` is written in the Java source as
``0xBBCCDDEE ^ 1880681586 + 8``: ``+`` binds tighter than ``^``, so it is 0xCBD43194, the
commit log's blank magic (golden #1). Units are 52-aligned from the file's start, so the blank
sits where the next unit would; unwritten space is zeros.

A ROLL unit's delayed time is not the message's due time: a message due beyond the roll window
(``timerRollWindowSlots``, default 2 days less 60 ticks) is parked in a slot inside the window
and, when that slot is dequeued, put back into ``rmq_sys_wheel_timer`` (its ``TIMER_OUT_MS``
unchanged) to be enqueued again.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from rmqlab.codec.consume_queue_unit import first_in_chunks
from rmqlab.codec.flags import BLANK_MAGIC_CODE, TIMER_TOPIC

__all__ = [
    "MAGIC_DEFAULT",
    "MAGIC_DELETE",
    "MAGIC_ROLL",
    "MIN_BLANK_LEN",
    "TIMER_LOG_BLANK_MAGIC_CODE",
    "TIMER_LOG_FILE_SIZE",
    "TIMER_LOG_UNIT_DTYPE",
    "TIMER_TOPIC",
    "UNIT_PRE_SIZE_FOR_MSG",
    "UNIT_SIZE",
    "TimerLogScan",
    "TimerLogUnit",
    "encode_timer_log_blank",
    "is_magic_ok",
    "needs_blank",
    "offset_for_last_unit",
    "scan_timer_log",
]

UNIT_SIZE = 52
MIN_BLANK_LEN = 4 + 8 + 4
UNIT_PRE_SIZE_FOR_MSG = 28  # where offsetPy starts
TIMER_LOG_FILE_SIZE = 100 * 1024 * 1024  # mappedFileSizeTimerLog default, 104,857,600
MAGIC_DEFAULT = 1
MAGIC_ROLL = 1 << 1
MAGIC_DELETE = 1 << 2


def _java_int(x: int) -> int:
    return (x + 2**31) % 2**32 - 2**31


TIMER_LOG_BLANK_MAGIC_CODE = _java_int(0xBBCCDDEE ^ (1880681586 + 8))
assert TIMER_LOG_BLANK_MAGIC_CODE == BLANK_MAGIC_CODE  # 0xCBD43194

TIMER_LOG_UNIT_DTYPE = np.dtype([
    ("size", ">i4"), ("prev_pos", ">i8"), ("magic", ">i4"), ("curr_write_time_ms", ">i8"), ("delay_ms", ">i4"),
    ("offset_py", ">i8"), ("size_py", ">i4"), ("topic_hash", ">i4"), ("reserved", ">i8"),
])
assert TIMER_LOG_UNIT_DTYPE.itemsize == UNIT_SIZE
_UNIT = struct.Struct(">iqiqiqiiq")
_BLANK = struct.Struct(">iqi")


def is_magic_ok(magic: int) -> bool:
    """``TimerMessageStore.isMagicOK``: only the low four bits may be set."""
    return (magic | 0xF) == 0xF


def needs_blank(wrote: int, file_size: int = TIMER_LOG_FILE_SIZE, length: int = UNIT_SIZE) -> bool:
    """True when ``length`` bytes at ``wrote`` do not fit with a blank to spare: the file then
    ends with the blank and the unit goes to the next file (``TimerLog.append``)."""
    return length + MIN_BLANK_LEN > file_size - wrote


def encode_timer_log_blank(remaining: int) -> bytes:
    """The 16-byte end-of-file blank for ``remaining`` = ``fileSize - wrotePosition`` bytes."""
    return _BLANK.pack(remaining, 0, TIMER_LOG_BLANK_MAGIC_CODE)


def offset_for_last_unit(file_size: int = TIMER_LOG_FILE_SIZE) -> int:
    """``TimerLog.getOffsetForLastUnit``: where the last unit a full file can hold starts (the
    expired-file cleanup reads it to learn the file's newest commitlog offset)."""
    return file_size - (file_size - MIN_BLANK_LEN) % UNIT_SIZE - MIN_BLANK_LEN - UNIT_SIZE


@dataclass(frozen=True, slots=True)
class TimerLogUnit:
    """One unit. ``delayed_time_ms`` is absolute; on disk it is stored relative to the write time."""

    prev_pos: int
    magic: int
    curr_write_time_ms: int
    delayed_time_ms: int
    offset_py: int
    size_py: int
    topic_hash: int
    size: int = UNIT_SIZE
    reserved: int = 0

    @property
    def roll(self) -> bool:
        return bool(self.magic & MAGIC_ROLL)

    @property
    def delete(self) -> bool:
        return bool(self.magic & MAGIC_DELETE)

    def pack(self) -> bytes:
        buf = bytearray(UNIT_SIZE)
        self.pack_into(buf, 0)
        return bytes(buf)

    def pack_into(self, buf: Any, pos: int) -> None:
        _UNIT.pack_into(buf, pos, self.size, self.prev_pos, self.magic, self.curr_write_time_ms,
                        _java_int(self.delayed_time_ms - self.curr_write_time_ms), self.offset_py, self.size_py,
                        self.topic_hash, self.reserved)

    @classmethod
    def unpack(cls, buf: Any, pos: int = 0) -> TimerLogUnit:
        """The unit at ``pos`` as stored (no validity check; see :func:`scan_timer_log`)."""
        size, prev, magic, write, delay, off, size_py, th, reserved = _UNIT.unpack_from(buf, pos)
        return cls(prev, magic, write, write + delay, off, size_py, th, size, reserved)


@dataclass(frozen=True)
class TimerLogScan:
    """What :func:`scan_timer_log` found in one file.

    ``units``: the valid units from the file's start (zero-copy view of the buffer);
    ``end``: the byte after the last of them; ``stop``: why the walk ended there --
    ``"blank"`` (the end-of-file blank), ``"zeros"`` (unwritten space), ``"end"`` (the buffer
    ended exactly after a unit), ``"bad_unit"`` (a size other than 52 or a magic with high bits:
    where RocketMQ's recovery would truncate) or ``"truncated"`` (a partial unit at the end);
    ``detail`` says more for the last two.
    """

    units: np.ndarray
    end: int
    stop: str
    detail: str = ""

    @property
    def damaged(self) -> bool:
        return self.stop in ("bad_unit", "truncated")


def scan_timer_log(buf: Any) -> TimerLogScan:
    """The units of one timerlog file buffer, stopping at the blank, zeros or the first bad unit.

    Vectorised: the buffer is viewed as 52-byte records and the first one with ``size != 52``
    or a bad magic is searched for in growing chunks, so a mostly-unwritten 100 MiB file costs
    microseconds. Same stop rule as ``TimerMessageStore.recoverAndRevise`` with its check on.
    """
    n = len(buf) // UNIT_SIZE
    units = np.frombuffer(buf, dtype=TIMER_LOG_UNIT_DTYPE, count=n)
    sizes, magics = units["size"], units["magic"]
    k = first_in_chunks(n, lambda lo, hi: (sizes[lo:hi] != UNIT_SIZE) | ((magics[lo:hi] & ~0xF) != 0))
    pos = k * UNIT_SIZE
    left = len(buf) - pos
    if left >= MIN_BLANK_LEN and _BLANK.unpack_from(buf, pos)[2] == TIMER_LOG_BLANK_MAGIC_CODE:
        return TimerLogScan(units[:k], pos, "blank")
    if left == 0:
        return TimerLogScan(units[:k], pos, "end")
    chunk = bytes(buf[pos:pos + UNIT_SIZE])
    if not any(chunk):
        return TimerLogScan(units[:k], pos, "zeros")
    if k == n:
        return TimerLogScan(units[:k], pos, "truncated", f"{left} bytes left, a unit needs {UNIT_SIZE}")
    size, _, magic = _BLANK.unpack_from(buf, pos)
    return TimerLogScan(units[:k], pos, "bad_unit", f"size {size}, magic {magic}")
