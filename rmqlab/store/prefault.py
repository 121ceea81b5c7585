"""The CommitLog pre-fault service: the writer's next pages faulted in by a thread of their own.

The first write to each page of a fresh mapping takes a page fault, and the put thread takes it
with the GIL held (~0.4-2 us per 1 KiB record on these VMs, more while the VM hands out fresh
memory). ``CommitLog.prefault_ahead`` faults the pages ahead of the writer with
``madvise(MADV_POPULATE_WRITE)``, without the GIL, so on another core. It used to run in the
reput service's rounds, but a thread that blocks (a timed wait, I/O, a ctypes call) gets the GIL
back from a thread that never blocks -- a put loop -- only when CPython forces a switch, every
5 ms (``sys.getswitchinterval``): during a stream of puts the reput ran 11-60 rounds in a
0.3 s loop of 50,000 puts, and the window it kept ahead fell tens of MiB behind the writer.
Here one round is two comparisons, and at most one ``madvise`` over the pages between the
pre-faulted mark and the writer plus ``prefault_bytes`` (topped up only once the writer has used
half the window, so a slow writer costs one call per half window and a fast one gets big
calls), so the thread needs the GIL seldom and briefly.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from rmqlab.store.services import NAP_MS, IdleNap

if TYPE_CHECKING:
    from rmqlab.store.commit_log import CommitLog

__all__ = ["CommitLogPrefaultService"]


class CommitLogPrefaultService:
    """Keeps the CommitLog's last file pre-faulted ahead of the writer (``run_once`` between
    1 ms and ``NAP_MS`` apart in a threaded store, every ``store.step()`` in a stepped one).

    A round is due when the writer may have used the window's slack (``prefault_slack``), so
    the wait after a round is the time the writer, at its pace since the previous round, needs
    to use half of it: 1 ms for a fast writer near a top-up, ``NAP_MS`` for a slow one
    (a SYNC_FLUSH producer writes ~12 MB/s: one round per 20 ms instead of 1,000 a second),
    and an idle writer lets the service nap (``IdleNap``) until its next put. The window keeps
    half of ``prefault_bytes`` in reserve, so a round that comes late (CPython hands a waiting
    thread the GIL within 5 ms) still finds the writer inside pre-faulted pages.
    """

    name = "prefault_commit_log"

    def __init__(self, commit_log: CommitLog, now_ns: Callable[[], int] = time.perf_counter_ns) -> None:
        self.commit_log = commit_log
        self.prefaulted_bytes = 0  # total this service pre-faulted (notebooks, tests)
        self.nap = IdleNap()
        self._now_ns = now_ns  # real time: it paces a thread (tests pass their own)
        self._next_ms = 1.0
        self._last_offset = -1
        self._last_ns = 0

    def interval_ms(self) -> float:
        # switched off (the kernel refused, or the log became read-only): look again rarely
        if not self.commit_log.prefault_enabled:
            return 1000.0
        return NAP_MS if self.nap.napping else self._next_ms

    def run_once(self) -> int:
        """Top the window up; returns the bytes pre-faulted (0: still ahead, or off)."""
        cl = self.commit_log
        done = cl.prefault_ahead()
        self.prefaulted_bytes += done
        offset, now = cl.get_max_offset(), self._now_ns()
        moved = offset - self._last_offset if self._last_offset >= 0 else 0
        elapsed = now - self._last_ns
        self._last_offset, self._last_ns = offset, now
        self.nap.round(moved > 0 or done > 0)
        slack = cl.prefault_slack()
        if moved > 0 and slack > 0 and elapsed > 0:
            # ms for the writer, at its pace since the last round, to use half the slack
            self._next_ms = min(max(slack * elapsed / moved / 2e6, 1.0), NAP_MS)
        else:
            self._next_ms = 1.0
        return done
