"""Wake-ups between threads that survive an exception raised into a thread at any moment.

A notebook's interrupt button raises KeyboardInterrupt in the thread driving the store (the
main thread, between two bytecodes), and tests raise exceptions into producer threads the same
way (``PyThreadState_SetAsyncExc``). CPython raises such an exception on entering a Python
function, on a backward jump or just after a call returns. ``threading.Condition.__enter__``
and ``threading.Event.set``/``wait`` are Python functions that acquire a lock and then return:
an exception raised right after the acquire leaves the lock held for good, and the service
thread that needs it next (the reput, a flush, the file allocator) hangs forever.

The primitives here hold no lock across a Python frame boundary: every state change is one C
call (``Lock.acquire``/``release``, ``set.add``) or one attribute store, so an exception lands
either before it or after it. Threads an exception may be raised into (producers, consumers,
whoever steps a store) use only these, or ``with`` on a plain ``threading.Lock`` (whose
``__enter__`` is C: the ``with`` statement owns the lock the moment it is taken).
"""

from __future__ import annotations

import threading


class Flag:
    """A done flag that waiters poll (``threading.Event`` without its lock): ``set`` is one
    attribute store."""

    __slots__ = ("_set",)

    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        self._set = True

    def is_set(self) -> bool:
        return self._set


class Wakeup:
    """Cuts one service thread's wait short: ``set`` from any thread, ``wait`` in the service
    thread only. A ``set`` before the ``wait`` is kept (the wait returns at once) and a ``wait``
    that returns True consumes it, which is ``Event.wait`` then ``Event.clear`` as one step."""

    __slots__ = ("_gate",)

    def __init__(self) -> None:
        self._gate = threading.Lock()
        self._gate.acquire()  # held: not set

    def set(self) -> None:
        try:
            self._gate.release()
        except RuntimeError:  # already set
            pass

    def is_set(self) -> bool:
        return not self._gate.locked()

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait until set or ``timeout_s`` passes (None: no limit); True (and no longer set)
        when it was set."""
        if timeout_s is None:
            return self._gate.acquire()
        return self._gate.acquire(timeout=max(timeout_s, 0.0))

    def clear(self) -> None:
        self._gate.acquire(blocking=False)


class Arrivals:
    """Wakes every thread waiting for news (consumers long-polling for dispatched messages, a
    producer waiting for dispatch to catch up) when one thread calls ``notify_all``. A waiter
    parks on a lock of its own, registered in a set; ``notify_all`` releases each lock
    registered when it starts, so the notifier never waits for a lock a waiter holds. A waiter
    cut short before it unregisters is dropped by the next ``notify_all``."""

    __slots__ = ("_waiting",)

    def __init__(self) -> None:
        self._waiting: set[threading.Lock] = set()

    def wait(self, timeout_s: float) -> bool:
        """Wait for the next ``notify_all`` (True) or until ``timeout_s`` passes (False)."""
        gate = threading.Lock()
        gate.acquire()
        self._waiting.add(gate)
        try:
            return gate.acquire(timeout=max(timeout_s, 0.0))
        finally:
            self._waiting.discard(gate)

    def notify_all(self) -> int:
        """Release every waiter registered now; returns how many."""
        waiting = list(self._waiting)  # one C call: a snapshot, whatever other threads do
        for gate in waiting:
            self._waiting.discard(gate)
            try:
                gate.release()
            except RuntimeError:  # another notify_all released it first
                pass
        return len(waiting)
