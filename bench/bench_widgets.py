"""Put throughput with and without a StoreDashboard attached (target: ratio >= 0.8).

The dashboard subscribes to the store's bus with a latching router (the first event after a
redraw marks the views dirty and unsubscribes, so the engine stops building events until the
next redraw) and redraws at most 10 times a second on its own thread, holding the GIL at most
~5 % of the time; only the view in the selected tab (the default, "files") follows events.
Run: ``.venv/bin/python bench/bench_widgets.py``. Prints messages/s for both and the ratios
(best and median of the rounds, runs interleaved); no asserts. Two clocks: wall time (what a
user feels; noisy on a shared machine) and process CPU time (all threads, the redraw thread
included: the dashboard's whole cost). Also the redraw thread's own CPU time, the part of the
dashboard's cost that does not depend on the machine's noise.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from typing import Any

from rmqlab.clock import ManualClock
from rmqlab.config import MessageStoreConfig
from rmqlab.store.message import Message
from rmqlab.store.message_store import MessageStore


def run(n: int, *, dashboard: bool, tab: str | None = None) -> tuple[float, float, int, float]:
    """``(msg/s wall, msg/s CPU, redraws, redraw CPU seconds)`` for ``n`` puts."""
    with tempfile.TemporaryDirectory(prefix="rmqlab-bench-") as d:
        cfg = MessageStoreConfig.small(d, mapped_file_size_commit_log=1024 * 1024,
                                       mapped_file_size_consume_queue=20_000 * 20,
                                       max_hash_slot_num=50_000, max_index_num=200_000)
        store = MessageStore.open(d, cfg, clock=ManualClock(time.time_ns() // 1_000_000), threaded=False)
        dash = None
        if dashboard:
            from rmqlab.widgets import StoreDashboard

            dash = StoreDashboard(store)
            if tab is not None:
                dash.tabs.selected_index = list(dash.views).index(tab)
        msgs = [Message(f"Topic{i % 4}", b"x" * 200, tags=f"tag{i % 3}", keys=[f"key-{i}"], queue_id=i % 4)
                for i in range(n)]
        started, cpu0 = time.perf_counter(), time.process_time()
        for i, m in enumerate(msgs):
            store.put_message(m)
            if i % 500 == 499:
                store.step()
        store.step()
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu0
        redraws, busy = 0, 0.0
        if dash is not None:
            dash.throttle.close()  # stop first: a redraw still running would count after the clock stopped
            redraws, busy = dash.throttle.redraws, dash.throttle.busy_cpu
            dash.close()
        store.shutdown()
        return n / elapsed, n / cpu, redraws, busy


def redraw_costs(repeat: int = 3, n: int = 30_000) -> None:
    """CPU of the dashboard's own steps on this thread, best of ``repeat``: building it, the first
    redraw (one message stored), an event-driven redraw and a redraw of all views (a button) on
    an ``n``-message store. No store writes are timed: the figures do not depend on the noise of
    a concurrent writer."""
    from rmqlab.widgets import StoreDashboard

    costs: dict[str, list[float]] = {}

    def timed(name: str, fn: Any) -> Any:
        t = time.thread_time()
        out = fn()
        costs.setdefault(name, []).append(time.thread_time() - t)
        return out

    for _ in range(repeat + 1):  # the first round warms imports up and is dropped
        with tempfile.TemporaryDirectory(prefix="rmqlab-bench-") as d:
            cfg = MessageStoreConfig.small(d, mapped_file_size_commit_log=1024 * 1024,
                                           mapped_file_size_consume_queue=20_000 * 20,
                                           max_hash_slot_num=50_000, max_index_num=200_000)
            store = MessageStore.open(d, cfg, clock=ManualClock(time.time_ns() // 1_000_000), threaded=False)
            dash = timed("build a dashboard", lambda: StoreDashboard(store))  # noqa: B023
            dash.throttle.close()  # redraws are called directly below
            events = frozenset(f for fs in dash.routes.values() for f in fs)  # what the latched router marks
            store.put_message(Message("Topic0", b"x" * 200, keys=["k"]))
            timed("first redraw (1 message)", lambda: dash._redraw(events))  # noqa: B023
            for i in range(n):
                store.put_message(Message(f"Topic{i % 4}", b"x" * 200, tags=f"tag{i % 3}", keys=[f"key-{i}"],
                                          queue_id=i % 4))
                if i % 500 == 499:
                    store.step()
            timed(f"event redraw at {n:,}", lambda: dash._redraw(events))  # noqa: B023
            store.put_message(Message("Topic0", b"y", keys=["z"]))
            timed(f"all views at {n:,} (a button)", lambda: dash._redraw(frozenset({"*"})))  # noqa: B023
            dash.close()
            store.shutdown()
    for name, values in costs.items():
        print(f"{name}: {min(values[1:]) * 1000:.1f} ms CPU (best of {repeat})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", type=int, default=60_000, help="messages per run")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tab", default=None, help="select this dashboard tab first (files, log, consume queue, "
                                                    "index, recovery, cleanup); default: files")
    parser.add_argument("--costs", action="store_true", help="print the dashboard's own redraw costs instead")
    args = parser.parse_args()
    if args.costs:
        redraw_costs()
        return
    run(2000, dashboard=True, tab=args.tab)  # warm up imports and plotly validators
    bare, with_dash = [], []
    for _ in range(args.rounds):
        bare.append(run(args.n, dashboard=False))
        with_dash.append(run(args.n, dashboard=True, tab=args.tab))
    for i, clock in enumerate(("wall", "CPU")):
        b, w = max(x[i] for x in bare), max(x[i] for x in with_dash)
        mb, mw = statistics.median(x[i] for x in bare), statistics.median(x[i] for x in with_dash)
        print(f"{clock:>4}: without dashboard {b:,.0f} msg/s, with dashboard {w:,.0f} msg/s, "
              f"ratio {w / b:.2f}x best, {mw / mb:.2f}x median (target >= 0.8x)")
    share = [x[3] * x[0] / args.n for x in with_dash]  # redraw CPU / wall time of the run
    print(f"redraws in a dashboard run: {min(x[2] for x in with_dash)}..{max(x[2] for x in with_dash)}, "
          f"redraw thread CPU {statistics.median(x[3] for x in with_dash) * 1000:.0f} ms per run "
          f"(median; {statistics.median(share):.1%} of the run's wall time)")


if __name__ == "__main__":
    main()
