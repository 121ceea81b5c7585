"""The throttle coalesces bursts and bounds the redraw rate."""

from __future__ import annotations

import itertools
import threading
import time

from rmqlab.events import Appended, EventBus, Flushed
from rmqlab.widgets._throttle import EventRouter, Throttle
from tests.waits import until


def test_burst_of_1000_events_is_a_few_redraws():
    seen: list[frozenset[str]] = []
    throttle = Throttle(seen.append, max_hz=10)
    bus = EventBus()
    router = EventRouter(bus, throttle, {Appended: ("files",), Flushed: ("files", "where")})
    start = time.monotonic()
    for i in range(1000):
        bus.publish(Appended("commitlog", "f", i, 1, i))
        if i % 100 == 0:
            bus.publish(Flushed("commitlog", i))
    # the redraw thread runs when the OS lets it: wait for its first redraw (however busy the
    # machine), then a little more to catch any redraw beyond the rate
    assert until(lambda: throttle.redraws >= 1)
    time.sleep(0.35)
    router.close()
    throttle.close()
    elapsed = time.monotonic() - start
    assert 1 <= throttle.redraws <= 10 * elapsed + 1
    assert frozenset().union(*seen) == {"files", "where"}


def test_sustained_events_redraw_at_most_10_hz():
    throttle = Throttle(lambda flags: None, max_hz=10)
    stop = time.monotonic() + 1.0
    n = 0
    while time.monotonic() < stop:
        throttle.mark("x")
        n += 1
        if n % 1000 == 0:
            time.sleep(0.001)
    time.sleep(0.15)
    throttle.close()
    times = throttle.redraw_times
    assert n >= 1000
    assert len(times) <= 12  # ~1.15 s at 10 Hz
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert all(g >= 0.09 for g in gaps)


def test_slow_redraw_keeps_duty_bounded():
    def slow(_flags):
        time.sleep(0.05)

    throttle = Throttle(slow, max_hz=100, duty=0.25)
    stop = time.monotonic() + 0.8
    deadline = time.monotonic() + 30  # a busy machine stretches each redraw (and its pause): wait for 3
    while time.monotonic() < stop or (throttle.redraws < 3 and time.monotonic() < deadline):
        throttle.mark("x")
        time.sleep(0.002)
    throttle.close()
    gaps = [b - a for a, b in zip(throttle.redraw_times, throttle.redraw_times[1:], strict=False)]
    # after a 50 ms redraw at duty 25 %, the next starts >= 150 ms later: end-to-end gap >= 200 ms
    assert gaps
    assert all(g >= 0.19 for g in gaps)


def test_failing_redraw_is_kept_not_raised():
    def bad(_flags):
        raise RuntimeError("boom")

    throttle = Throttle(bad)
    throttle.mark("x")
    throttle.flush()
    throttle.close()
    assert throttle.errors
    assert isinstance(throttle.errors[0], RuntimeError)


def test_mark_is_thread_safe():
    collected: list[str] = []
    throttle = Throttle(lambda flags: collected.extend(flags), max_hz=50)
    threads = [threading.Thread(target=lambda k=k: [throttle.mark(f"f{k}-{i}") for i in range(200)]) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    time.sleep(0.1)
    throttle.flush()
    throttle.close()
    assert len(set(collected)) == 800


def test_latched_router_leaves_the_bus_idle_until_the_redraw():
    seen: list[frozenset[str]] = []
    throttle = Throttle(seen.append)
    bus = EventBus()
    router = EventRouter(bus, throttle, {Appended: ("files",), Flushed: ("where",)})
    assert bus.active
    bus.publish(Appended("commitlog", "f", 0, 1, 1))
    assert not bus.active  # the engine skips building events until the next redraw
    assert throttle.dirty == {"files", "where"}
    throttle.flush()
    assert seen == [frozenset({"files", "where"})]
    assert bus.active  # subscribed again before the redraw read any state
    router.close()
    throttle.close()
    assert not bus.active
