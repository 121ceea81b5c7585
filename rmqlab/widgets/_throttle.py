"""Coalesce engine events and redraw at a bounded rate, off the publishing thread.

The event callback (:meth:`Throttle.mark`) runs inside the engine's ``publish`` call, on the
thread that appended or dispatched, so it does the least possible: a dict lookup, and a set add
under a lock only when the flag is not already dirty. A daemon thread wakes on the first dirty
flag, waits until the redraw interval has passed, swaps the dirty set out and calls ``redraw``
once with every flag collected meanwhile. 1000 events in a burst thus cost one redraw.

Two limits bound the cost of the picture: at most ``max_hz`` redraws a second, and a pause after
each redraw of at least ``(1 - duty) / duty`` times its duration, so redrawing holds the GIL at
most ``duty`` (default 5 %) of the time even when a figure is slow to build (the pause is capped
at ``max_pause``, 4 s, so a cold first redraw does not leave the picture stale for long). A store writing as
fast as it can is therefore slowed by the callbacks (well under a microsecond each) plus at most
``duty``.

Thread-safety: ``mark`` may be called from any thread; ``redraw`` runs on the throttle's thread
(or the caller's, for :meth:`flush`), never twice at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from rmqlab.wakeups import Wakeup

__all__ = ["ALL", "EventRouter", "Throttle"]

#: The flag meaning "everything": a full redraw (first draw, reopen, user action).
ALL = "*"


class Throttle:
    """Call ``redraw(flags)`` at most ``max_hz`` times a second with the flags marked meanwhile."""

    def __init__(
        self,
        redraw: Callable[[frozenset[str]], Any],
        *,
        max_hz: float = 10.0,
        duty: float = 0.05,
        max_pause: float = 4.0,
        name: str = "rmqlab-widgets-redraw",
    ) -> None:
        if max_hz <= 0 or not 0 < duty <= 1:
            raise ValueError("max_hz must be > 0 and duty in (0, 1]")
        self._redraw = redraw
        self.min_interval = 1.0 / max_hz
        self.duty = duty
        self.max_pause = max_pause  # a picture is never more than this stale (a cold first redraw is slow)
        self._name = name
        self._dirty: set[str] = set()
        self._lock = threading.Lock()
        self._draw_lock = threading.RLock()  # refresh() may run inside a redraw
        self._wake = Wakeup()  # set inside publish, on a thread a notebook interrupts: rmqlab.wakeups
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._next_allowed = 0.0
        self.on_take: list[Callable[[], Any]] = []  # run after flags are taken, before the redraw
        self.redraw_times: list[float] = []  # time.monotonic() of each redraw (tests, notebooks)
        self.busy_cpu = 0.0  # CPU seconds spent in redraws, on whichever thread ran them (benchmarks)
        self.errors: list[BaseException] = []  # redraw failures, kept instead of killing the thread

    @property
    def redraws(self) -> int:
        return len(self.redraw_times)

    @property
    def dirty(self) -> frozenset[str]:
        return frozenset(self._dirty)

    def mark(self, *flags: str) -> None:
        """Note that ``flags`` need a redraw; cheap, any thread."""
        if self._dirty.issuperset(flags):  # unlocked read: already pending, nothing to do
            return
        with self._lock:
            self._dirty.update(flags)
        self._wake.set()
        if self._thread is None and not self._stop.is_set():
            self._start()

    def _start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait()
            if self._stop.is_set():
                return
            delay = self._next_allowed - time.monotonic()
            if delay > 0 and self._stop.wait(delay):
                return
            self._wake.clear()
            self._draw_pending()

    def _take(self) -> frozenset[str]:
        with self._lock:
            flags = frozenset(self._dirty)
            self._dirty.clear()
        return flags

    def _draw_pending(self) -> None:
        with self._draw_lock:
            flags = self._take()
            if not flags:
                return
            for hook in self.on_take:
                hook()
            started, cpu = time.monotonic(), time.thread_time()
            try:
                self._redraw(flags)
            except Exception as e:  # a broken redraw must not stop later ones (nor the store)
                self.errors.append(e)
            done = time.monotonic()
            self.busy_cpu += time.thread_time() - cpu
            self.redraw_times.append(done)
            took = done - started
            pause = max(self.min_interval - took, took * (1 - self.duty) / self.duty)
            self._next_allowed = done + min(pause, self.max_pause)

    def flush(self) -> None:
        """Redraw now, in the calling thread, if anything is dirty (tests, static rendering)."""
        self._draw_pending()

    def close(self) -> None:
        """Stop the thread (pending flags are dropped)."""
        self._stop.set()
        self._wake.set()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout=2.0)


class EventRouter:
    """One bus subscription feeding one :class:`Throttle`: event class -> dirty flags.

    ``routes`` maps an event class to the flags it dirties. The callback is a dict lookup and a
    subset test. With ``latch=True`` (the default) the first routed event marks *every* routed
    flag and unsubscribes: until the next redraw nothing more can be learnt from events, and
    with no subscriber left the engine stops building event objects at all (``bus.active`` is
    False), so a store writing flat out runs at full speed between redraws. The router
    subscribes again when the throttle takes the flags, *before* the redraw reads any state, so
    a change made during the redraw is never missed. ``latch=False`` keeps the subscription and
    marks only each event's own flags (finer redraws, every event paid for).
    """

    def __init__(self, bus: Any, throttle: Throttle, routes: dict[type, Iterable[str]], *, latch: bool = True) -> None:
        self.throttle = throttle
        self.bus = bus
        self.latch = latch
        self.routes = {cls: frozenset(flags) for cls, flags in routes.items()}
        self._all = frozenset().union(*self.routes.values()) if self.routes else frozenset()
        self._dirty = throttle._dirty  # the same set object for the throttle's whole life
        self._unsubscribe: Callable[[], None] | None = None
        self._closed = False
        self._attach_lock = threading.Lock()
        if latch:
            throttle.on_take.append(self._attach)
        self._attach()

    def _attach(self) -> None:
        with self._attach_lock:
            if self.bus is not None and self._unsubscribe is None and not self._closed:
                self._unsubscribe = self.bus.subscribe(self)

    def _detach(self) -> None:
        with self._attach_lock:
            if self._unsubscribe is not None:
                self._unsubscribe()
                self._unsubscribe = None

    @property
    def attached(self) -> bool:
        return self._unsubscribe is not None

    def __call__(self, event: object) -> None:
        # Runs inside the engine's publish, once per event: keep it to a lookup and a subset test.
        flags = self.routes.get(event.__class__)
        if flags is None or flags <= self._dirty:
            return
        if self.latch:
            self._detach()
            self.throttle.mark(*self._all)
        else:
            self.throttle.mark(*flags)

    def close(self) -> None:
        self._closed = True
        self._detach()
        if self._attach in self.throttle.on_take:
            self.throttle.on_take.remove(self._attach)
