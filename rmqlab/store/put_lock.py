"""Taking the CommitLog's put lock without a GIL convoy.

A blocked ``threading.Lock.acquire`` takes the lock at release, while its thread still has to win
the GIL back before it can use it. Meanwhile the thread that released the lock (and holds the
GIL) cannot take it for its next put, so with several producers every put costs a GIL hand-off.
With any other Python thread busy (a consumer polling in a loop, a widget, dispatch) a hand-off
can wait out whole switch intervals (5 ms each): four producers and three busy consumers made
~100 puts/s instead of thousands.

So a put that finds the lock taken first calls :func:`wait_until_free`: it yields the GIL
(``time.sleep(0)``) until the lock is free, without taking it, and only then enters
``with lock:``. The lock thus goes to a thread that is running Python, which can put again within
its time slice. After ``spins`` yields it stops waiting and the ``with`` blocks as usual (the
owner then waits for something else, such as a new file). The acquire itself stays the C-level
``with lock:``, so an exception raised between taking and using the lock (a KeyboardInterrupt
in a notebook) cannot leave it taken. RocketMQ offers the same choice
(``useReentrantLockWhenPutMessage``: a queueing lock or ``PutMessageSpinLock``).
"""

from __future__ import annotations

import threading
import time

SPINS = 50


def wait_until_free(lock: threading.Lock, spins: int = SPINS) -> None:
    """Yield the GIL while another thread holds ``lock``, at most ``spins`` times; never takes it."""
    sleep, locked = time.sleep, lock.locked
    for _ in range(spins):
        sleep(0)
        if not locked():
            return
