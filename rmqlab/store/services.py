"""Every background service is ``run_once()`` plus an interval; a runner decides how it runs.

``ThreadedRunner`` drives each service in its own daemon thread (real broker behaviour);
``StepRunner`` runs nothing by itself, so a test or notebook calls ``store.step()`` and each
service runs exactly once, in a fixed order: deterministic teaching and tests.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Protocol

from rmqlab.wakeups import Flag, Wakeup

__all__ = ["NAP_MS", "IdleNap", "Service", "ServiceRunner", "StepRunner", "ThreadedRunner"]

log = logging.getLogger(__name__)


class Service(Protocol):
    name: str

    def run_once(self) -> object:
        """Do one round of work; must not block longer than one interval."""
        ...

    def interval_ms(self) -> float:
        """How long the threaded runner waits between rounds (may change between rounds).

        A service may also define ``initial_delay_ms()``: the threaded runner waits that long
        before the first round (``step()`` ignores it); and ``sleeps()``: True while its wait is
        RocketMQ's ``Thread.sleep`` rather than ``waitForRunning``, which a wakeup does not cut
        short (only a shutdown does).
        """
        ...


#: How long a napping service waits between rounds (see ``IdleNap``).
NAP_MS = 20.0


class IdleNap:
    """Idle back-off for a service that polls every millisecond while there is work.

    A 1 ms poll costs nothing a put loop would notice, but an idle threaded store woke ~1,900
    times a second for it (reput and pre-fault), ~4 % of a core in every notebook kernel left
    open. After ``after`` rounds in a row without work the service naps (``napping``: it waits
    ``NAP_MS`` between rounds) and tells its store (``on_nap``), whose next put wakes it
    (``wake``), so a message put into an idle store is dispatched at once, not a poll later.
    A nap that starts just as a put looks costs that put at most one nap of latency.
    """

    __slots__ = ("after", "idle_rounds", "napping", "naps", "on_nap", "wakes")

    def __init__(self, after: int = 10) -> None:
        self.after = after
        self.idle_rounds = 0
        self.napping = False
        self.on_nap: Callable[[], None] | None = None
        self.naps = 0  # times it fell asleep (tests, notebooks)
        self.wakes = 0  # times a put woke it

    def round(self, busy: bool) -> None:
        """Count one round: ``busy`` if it found work (or work waits it cannot do yet)."""
        if busy:
            self.idle_rounds = 0
            self.napping = False
            return
        self.idle_rounds += 1
        if self.idle_rounds >= self.after and not self.napping:
            self.napping = True
            self.naps += 1
            if self.on_nap is not None:
                self.on_nap()

    def wake(self) -> bool:
        """Back to busy polling; True if it was napping (the caller then wakes its thread)."""
        if not self.napping:
            return False
        self.napping = False
        self.idle_rounds = 0
        self.wakes += 1
        return True


class ServiceRunner(Protocol):
    threaded: bool

    def start(self, services: Iterable[Service]) -> None: ...

    def wakeup(self, name: str) -> None: ...

    def shutdown(self) -> None: ...


class StepRunner:
    """Runs nothing in the background: the owner steps services explicitly."""

    threaded = False

    def start(self, services: Iterable[Service]) -> None:
        self.services = list(services)

    def wakeup(self, name: str) -> None:
        """Nothing to wake: work happens at the next ``step()``."""

    def shutdown(self) -> None:
        self.services = []


class _Loop(threading.Thread):
    def __init__(self, service: Service) -> None:
        super().__init__(name=f"rmqlab-{service.name}", daemon=True)
        self.service = service
        self.stopped = Flag()
        self.woken = Wakeup()  # set by producers: see rmqlab.wakeups

    def run(self) -> None:
        # Optional ``initial_delay_ms()``: the broker starts cleanup 60 s after start. A wakeup
        # or shutdown cuts the wait short.
        initial_delay = getattr(self.service, "initial_delay_ms", None)
        if initial_delay is not None:
            self.woken.wait(initial_delay() / 1000.0)
        last_error = ""
        while not self.stopped.is_set():
            try:
                self.service.run_once()
            except Exception as e:  # a service must survive one bad round, like RocketMQ's
                error = f"{type(e).__name__}: {e}"
                if error != last_error:  # the same failure round after round (a full disk): once
                    log.exception("service %s failed one round", self.service.name)
                    last_error = error
            else:
                last_error = ""
            self._wait(self.service.interval_ms() / 1000.0)

    def _wait(self, timeout_s: float) -> None:
        sleeps = getattr(self.service, "sleeps", None)
        if sleeps is None or not sleeps():
            self.woken.wait(timeout_s)
            return
        # Thread.sleep: a wakeup in the meantime is spent here without ending the wait
        deadline = time.monotonic() + timeout_s
        while not self.stopped.is_set() and (left := deadline - time.monotonic()) > 0:
            self.woken.wait(left)


class ThreadedRunner:
    """One daemon thread per service; ``wakeup(name)`` cuts the current wait short."""

    threaded = True

    def __init__(self) -> None:
        self._loops: dict[str, _Loop] = {}

    def start(self, services: Iterable[Service]) -> None:
        for service in services:
            loop = _Loop(service)
            self._loops[service.name] = loop
            loop.start()

    def wakeup(self, name: str) -> None:
        loop = self._loops.get(name)
        if loop is not None:
            loop.woken.set()

    def shutdown(self) -> None:
        for loop in self._loops.values():
            loop.stopped.set()
            loop.woken.set()
        for loop in self._loops.values():
            if loop.ident is not None:  # else start() was cut short (an interrupted open)
                loop.join(timeout=10)
        self._loops.clear()
