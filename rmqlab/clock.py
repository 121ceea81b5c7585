"""Injected time: every "now" in the engine comes from a Clock, so tests and notebooks can jump.

``SystemClock`` reads the wall clock; ``ManualClock`` only moves when told (``advance``,
``set``, ``jump_to_hour``), which makes flush intervals, index file names and cleanup windows
deterministic.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta, timezone
from typing import Protocol

__all__ = ["Clock", "ManualClock", "SystemClock"]


class Clock(Protocol):
    def now_ms(self) -> int:
        """Milliseconds since the epoch (Java's ``System.currentTimeMillis()``)."""
        ...

    def sleep_ms(self, ms: float) -> None:
        """Wait ``ms`` milliseconds of this clock's time."""
        ...

    def tz(self) -> timezone:
        """Time zone used for local-hour rules (delete-when) and index file names."""
        ...


class SystemClock:
    """The wall clock, in the machine's local time zone (like the JVM default)."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def sleep_ms(self, ms: float) -> None:
        if ms > 0:
            time.sleep(ms / 1000.0)

    def tz(self) -> timezone:
        local = datetime.now().astimezone().tzinfo
        offset = local.utcoffset(None) if local is not None else None
        return timezone(offset or timedelta(0))


class ManualClock:
    """A clock that moves only when told; thread-safe. ``sleep_ms`` advances it.

    ``tz`` defaults to UTC so index file names and delete-when hours are reproducible.
    """

    def __init__(self, start_ms: int = 1_700_000_000_000, tz: timezone = UTC) -> None:
        self._now = int(start_ms)
        self._tz = tz
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        with self._lock:
            return self._now

    def sleep_ms(self, ms: float) -> None:
        self.advance(ms)

    def tz(self) -> timezone:
        return self._tz

    def advance(self, ms: float) -> int:
        """Move forward ``ms`` milliseconds; returns the new time."""
        with self._lock:
            self._now += int(ms)
            return self._now

    def advance_hours(self, hours: float) -> int:
        return self.advance(hours * 3_600_000)

    def set(self, ms: int) -> None:
        with self._lock:
            self._now = int(ms)

    def jump_to_hour(self, hour: int) -> int:
        """Move forward to the next ``hour``:00:00.000 local time (04:00 for cleanup)."""
        with self._lock:
            now = datetime.fromtimestamp(self._now / 1000, tz=self._tz)
            target = now.replace(hour=hour, minute=0, second=0, microsecond=0)
            if target <= now:
                target += timedelta(days=1)
            self._now = int(target.timestamp() * 1000)
            return self._now
