"""The 5.x ``config/timercheck`` file: the timer wheel's progress, seven longs in a 4096-byte page.

RocketMQ's ``TimerCheckpoint`` (spec 1.1)::

    0   lastReadTimeMs          the next tick dequeue reads (ticks before it were delivered)
    8   lastTimerLogFlushPos    timerlog bytes flushed (recovery re-reads the last file from here)
    16  lastTimerQueueOffset    rmq_sys_wheel_timer queue 0 units enqueued into the wheel
    24  masterTimerQueueOffset  the same as a master last reported it
    32  dataVersion.stateVersion    40  dataVersion.timestamp    48  dataVersion.counter
    56..4095 zero

Versions before the data version was added wrote only the first 32 bytes; they read back as 0.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from rmqlab.errors import TruncatedRecord

__all__ = ["TIMER_CHECKPOINT_DATA_SIZE", "TIMER_CHECKPOINT_FILE_SIZE", "TimerCheckpoint"]

TIMER_CHECKPOINT_FILE_SIZE = 4096  # OS_PAGE_SIZE, mapped whole
TIMER_CHECKPOINT_DATA_SIZE = 56
_LAYOUT = struct.Struct(">qqqqqqq")


@dataclass(frozen=True, slots=True)
class TimerCheckpoint:
    """The timercheck values (ms, byte offsets, queue offsets, data version)."""

    last_read_time_ms: int = 0
    last_timer_log_flush_pos: int = 0
    last_timer_queue_offset: int = 0
    master_timer_queue_offset: int = 0
    state_version: int = 0
    timestamp: int = 0
    counter: int = 0

    def pack(self) -> bytes:
        """The whole 4096-byte file: the seven longs, then zeros."""
        buf = bytearray(TIMER_CHECKPOINT_FILE_SIZE)
        self.pack_into(buf, 0)
        return bytes(buf)

    def pack_into(self, buf: Any, pos: int = 0) -> None:
        _LAYOUT.pack_into(buf, pos, self.last_read_time_ms, self.last_timer_log_flush_pos,
                          self.last_timer_queue_offset, self.master_timer_queue_offset, self.state_version,
                          self.timestamp, self.counter)

    @classmethod
    def unpack(cls, buf: Any, pos: int = 0, file: str | None = None) -> TimerCheckpoint:
        """Read the seven longs; ``TruncatedRecord`` (naming ``file`` and where it ends) when
        fewer than 56 bytes are there."""
        if len(buf) - pos < TIMER_CHECKPOINT_DATA_SIZE:
            raise TruncatedRecord(file, len(buf), f"timer checkpoint needs {TIMER_CHECKPOINT_DATA_SIZE} bytes, "
                                                  f"has {max(0, len(buf) - pos)}")
        return cls(*_LAYOUT.unpack_from(buf, pos))
