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

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rmqlab.store.commit_log import CommitLog

__all__ = ["CommitLogPrefaultService"]


class CommitLogPrefaultService:
    """Keeps the CommitLog's last file pre-faulted ahead of the writer (``run_once`` every 1 ms
    in a threaded store, every ``store.step()`` in a stepped one)."""

    name = "prefault_commit_log"

    def __init__(self, commit_log: CommitLog) -> None:
        self.commit_log = commit_log
        self.prefaulted_bytes = 0  # total this service pre-faulted (notebooks, tests)

    def interval_ms(self) -> float:
        # switched off (the kernel refused, or the log became read-only): look again rarely
        return 1.0 if self.commit_log.prefault_enabled else 1000.0

    def run_once(self) -> int:
        """Top the window up; returns the bytes pre-faulted (0: still ahead, or off)."""
        done = self.commit_log.prefault_ahead()
        self.prefaulted_bytes += done
        return done
