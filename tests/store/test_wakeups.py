"""rmqlab.wakeups: the wake-up primitives producers and consumers share with service threads
keep working when exceptions are raised into the producer or consumer at any moment (a
notebook's interrupt button). ``threading.Event.set`` and ``with Condition`` could leave a lock
held for good there, and the service thread needing it hung."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from rmqlab.wakeups import Arrivals, Flag, Wakeup
from tests.store.trace_interrupts import Interrupt, run_traced


def test_flag() -> None:
    f = Flag()
    assert not f.is_set()
    f.set()
    f.set()
    assert f.is_set()


def test_a_wakeup_set_before_the_wait_is_kept_and_consumed() -> None:
    w = Wakeup()
    assert not w.is_set()
    assert not w.wait(0.01)
    w.set()
    w.set()  # twice: still one wake-up
    assert w.is_set()
    assert w.wait(5)
    assert not w.is_set()
    assert not w.wait(0)
    w.set()
    w.clear()
    assert not w.wait(0)


def test_a_wakeup_cuts_a_wait_short_from_another_thread() -> None:
    w = Wakeup()
    got: list[bool] = []
    t = threading.Thread(target=lambda: got.append(w.wait(30)))
    t.start()
    time.sleep(0.05)
    started = time.monotonic()
    w.set()
    t.join(10)
    assert got == [True]
    assert time.monotonic() - started < 5


def test_arrivals_wake_every_waiter_registered() -> None:
    a = Arrivals()
    assert not a.wait(0.01)  # nobody notifies: times out
    got: list[bool] = []
    threads = [threading.Thread(target=lambda: got.append(a.wait(30))) for _ in range(4)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 10
    while len(a._waiting) < 4 and time.monotonic() < deadline:
        time.sleep(0.001)
    assert a.notify_all() == 4
    for t in threads:
        t.join(10)
    assert got == [True] * 4
    assert a.notify_all() == 0  # each waiter unregistered itself


def test_a_waiter_cut_short_before_it_unregistered_is_dropped_by_the_next_notify() -> None:
    a = Arrivals()
    gate = threading.Lock()
    gate.acquire()
    a._waiting.add(gate)  # what an interrupt between add and try leaves
    assert a.notify_all() == 1
    assert not gate.locked()
    assert a.notify_all() == 0


class _RaiseAtReturn:
    """A ``sys.settrace`` function raising :class:`Interrupt` at the ``at``-th return event of
    any Python function (stdlib ones too): where CPython raises an exception sent from
    outside just after a call returns, in the caller (for ``Condition.__enter__``: with the
    lock taken and the ``with`` block not yet entered)."""

    def __init__(self, at: int) -> None:
        self.at, self.n = at, 0

    def __call__(self, frame: object, event: str, arg: object) -> object:
        return self.local if event == "call" else None

    def local(self, frame: object, event: str, arg: object) -> object:
        if event == "return":
            self.n += 1
            if self.n == self.at:
                raise Interrupt
        return self.local


def _hung_points(op: Callable[[], object], other_side: Callable[[], object]) -> list[int]:
    """Interrupt ``op`` after each return inside it in turn; after each, run ``other_side``
    (what a service thread does next) in another thread: the return events after which it
    did not finish (a lock left held)."""
    hung: list[int] = []
    for at in range(1, 100):
        if not run_traced(_RaiseAtReturn(at), op):
            return hung  # ran through: every return was tried
        t = threading.Thread(target=other_side, daemon=True)
        t.start()
        t.join(2)
        if t.is_alive():
            hung.append(at)
            return hung  # its objects stay locked: stop here
    raise AssertionError("op never ran through")


def test_threading_event_and_condition_hang_a_service_when_their_user_is_interrupted() -> None:
    # the hazard the module exists for, shown with the harness of the next test (so that test can fail)
    e = threading.Event()
    assert _hung_points(e.set, lambda: e.wait(0.01))
    c = threading.Condition()

    def wait_once() -> None:
        with c:
            c.wait(0)

    def notify() -> None:
        with c:
            c.notify_all()

    assert _hung_points(wait_once, notify)


def test_wakeups_interrupted_after_any_return_leave_nothing_held() -> None:
    w, a = Wakeup(), Arrivals()
    assert _hung_points(w.set, lambda: (w.set(), w.wait(1))) == []
    assert _hung_points(w.clear, lambda: (w.set(), w.wait(1))) == []
    assert _hung_points(lambda: w.wait(0), lambda: (w.set(), w.wait(1))) == []
    assert _hung_points(lambda: a.wait(0), a.notify_all) == []
    a.notify_all()
    assert a._waiting == set()
