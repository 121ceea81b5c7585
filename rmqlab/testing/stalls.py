"""A disk that takes its time to create the next CommitLog file, for tests and lessons.

A broker's put that rolls into a new file waits for it (up to 5 s) with the put lock held; every
other put then waits behind it, or, once the wait passes ``os_page_cache_busy_timeout_mills``,
is refused at once with OS_PAGECACHE_BUSY (a client sees "[PC_SYNCHRONIZED]broker busy").
:class:`FileCreationStall` holds up a threaded store's file allocator, for real, so that happens
on demand::

    with FileCreationStall(store) as stall:
        ...                            # a producer thread rolls into a new file and waits
        stall.wait_until_a_put_waits()
        clock.advance(1_500)           # the store's (manual) clock: 1.5 s in the lock
        store.put_message(m).status    # OS_PAGECACHE_BUSY
    # leaving the block creates the file: the waiting put goes in
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rmqlab.store.message_store import MessageStore

__all__ = ["FileCreationStall"]


class FileCreationStall:
    """Holds up ``store``'s CommitLog file creation from ``__enter__`` until :meth:`release` or
    the block's end (at most ``max_hold_s``, so a forgotten stall cannot hang a kernel).

    The store must be threaded: a stepped store creates its files in the putting thread.
    """

    def __init__(self, store: MessageStore, max_hold_s: float = 30.0) -> None:
        if not store.threaded:
            raise ValueError("FileCreationStall needs a threaded store (a stepped one creates files in the put)")
        self.store = store
        self.max_hold_s = max_hold_s
        self._gate = threading.Event()
        self._held = threading.Event()

    @property
    def holding(self) -> bool:
        """A file creation has been held up (and not released yet)."""
        return self._held.is_set() and not self._gate.is_set()

    def release(self) -> None:
        """Let the file be created (and every later one at once)."""
        self._gate.set()

    def wait_until_a_put_waits(self, timeout_s: float = 20.0) -> bool:
        """True once a put holds the put lock waiting for the held file (the CommitLog's end
        stops moving with the lock taken); False after ``timeout_s`` without that."""
        log = self.store.commit_log
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.holding and log.put_lock.locked():
                end = log.get_max_offset()
                time.sleep(0.05)
                if log.put_lock.locked() and log.get_max_offset() == end:
                    return True
            else:
                time.sleep(0.005)
        return False

    def __enter__(self) -> FileCreationStall:
        alloc = self.store.allocate_service
        create = alloc._create

        def held_up(req: Any) -> None:
            self._held.set()
            self._gate.wait(self.max_hold_s)
            create(req)

        alloc._create = held_up  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
        alloc = self.store.allocate_service
        if "_create" in vars(alloc):
            del alloc._create  # the class's own method again
