"""Put throughput with and without a StoreDashboard attached (target: ratio >= 0.8).

The dashboard subscribes to the store's bus with a latching router (the first event after a
redraw marks the views dirty and unsubscribes, so the engine stops building events until the
next redraw) and redraws all six views at most 10 times a second on its own thread, holding the
GIL at most ~5 % of the time. Run: ``.venv/bin/python bench/bench_widgets.py``.
Prints messages/s for both and the ratios; no asserts. Two clocks: wall time (what a user
feels; noisy on a shared machine) and process CPU time (all threads, the redraw thread
included: the dashboard's whole cost, and robust to other processes competing for the CPU).
"""

from __future__ import annotations

import argparse
import tempfile
import time

from rmqlab.clock import ManualClock
from rmqlab.config import MessageStoreConfig
from rmqlab.store.message import Message
from rmqlab.store.message_store import MessageStore


def run(n: int, *, dashboard: bool) -> tuple[float, float, int]:
    with tempfile.TemporaryDirectory(prefix="rmqlab-bench-") as d:
        cfg = MessageStoreConfig.small(d, mapped_file_size_commit_log=1024 * 1024,
                                       mapped_file_size_consume_queue=20_000 * 20,
                                       max_hash_slot_num=50_000, max_index_num=200_000)
        store = MessageStore.open(d, cfg, clock=ManualClock(time.time_ns() // 1_000_000), threaded=False)
        dash = None
        if dashboard:
            from rmqlab.widgets import StoreDashboard

            dash = StoreDashboard(store)
        msgs = [Message(f"Topic{i % 4}", b"x" * 200, tags=f"tag{i % 3}", keys=[f"key-{i}"], queue_id=i % 4)
                for i in range(n)]
        started, cpu0 = time.perf_counter(), time.process_time()
        for i, m in enumerate(msgs):
            store.put_message(m)
            if i % 500 == 499:
                store.step()
        store.step()
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu0
        redraws = dash.throttle.redraws if dash is not None else 0
        if dash is not None:
            dash.close()
        store.shutdown()
        return n / elapsed, n / cpu, redraws


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", type=int, default=60_000, help="messages per run")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    run(2000, dashboard=True)  # warm up imports and plotly validators
    bare, with_dash, redraws = [], [], 0
    for _ in range(args.rounds):
        bare.append(run(args.n, dashboard=False)[:2])
        wall, cpu, r = run(args.n, dashboard=True)
        with_dash.append((wall, cpu))
        redraws = max(redraws, r)
    for i, clock in enumerate(("wall", "CPU")):
        b, w = max(x[i] for x in bare), max(x[i] for x in with_dash)
        print(f"{clock:>4}: without dashboard {b:,.0f} msg/s, with dashboard {w:,.0f} msg/s, "
              f"ratio {w / b:.2f}x (target >= 0.8x)")
    print(f"redraws in a dashboard run: up to {redraws}")

if __name__ == "__main__":
    main()
