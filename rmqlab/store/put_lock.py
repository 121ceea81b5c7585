"""Taking the CommitLog's put lock without a GIL convoy.

A blocked ``threading.Lock.acquire`` takes the lock at release, while its thread still has to win
the GIL back before it can use it. Meanwhile the thread that released the lock (and holds the
GIL) cannot take it for its next put, so with several producers every put costs a GIL hand-off.
With any other Python thread busy (a consumer polling in a loop, a widget, dispatch) a hand-off
can wait out whole switch intervals (5 ms each): four producers and three busy consumers made
~100 puts/s instead of thousands.

So the put paths try the lock without blocking and, when it is taken, call :func:`acquire_yielding`:
it yields the GIL (``time.sleep(0)``) and tries again, so the lock only ever goes to a thread that
is running Python, which can then put again within its time slice. After ``spins`` yields it
blocks as usual (the owner then waits for something else, such as a new file). RocketMQ offers
the same choice (``useReentrantLockWhenPutMessage``: a queueing lock or ``PutMessageSpinLock``).
The try-then-release pattern is also cheaper than ``with lock:`` on the uncontended path.
"""

from __future__ import annotations

import threading
import time

SPINS = 50


def acquire_yielding(lock: threading.Lock, spins: int = SPINS) -> None:
    """Take ``lock``, held by another thread: yield the GIL between tries, block after ``spins``."""
    sleep, try_lock = time.sleep, lock.acquire
    for _ in range(spins):
        sleep(0)
        if try_lock(False):
            return
    lock.acquire()
