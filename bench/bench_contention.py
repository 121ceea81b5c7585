"""Producers in threads, alone and beside consumers polling in a loop: the put lock's GIL convoy.

    python bench/bench_contention.py [--producers 4] [--pollers 3] [--seconds 3] [--repeat 2] [--dir /tmp]

A threaded ASYNC_FLUSH store (256 MiB CommitLog files, so no file is created during a row) takes
1 KiB messages with a tag and a key from ``--producers`` threads for ``--seconds``, first alone,
then beside ``--pollers`` threads calling ``get_message`` in a loop. Each setting runs twice in
the same process: with the put lock taken as rmqlab takes it (a contended waiter yields the GIL
until the lock is free, ``rmqlab.store.put_lock``), and with a plain blocking acquire, which is
how it was taken before (the **baseline**: a waiter that blocks owns the lock at release but must still win
the GIL back, so each put waits out a GIL hand-off). Prints puts/s (sum over producers, best of
``--repeat``) and the ratios: beside pollers over alone, and rmqlab over the blocking acquire.
Nothing asserts; it prints.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import threading
import time

from rmqlab import Message, MessageStore, MessageStoreConfig
from rmqlab.store import commit_log


def _blocking(lock: threading.Lock, spins: int = 0) -> None:
    """The baseline: no waiting for the lock to come free, so ``with lock:`` blocks in it."""


def run(workdir: str, producers: int, pollers: int, seconds: float, yielding: bool) -> float:
    """Puts per second of ``producers`` threads beside ``pollers`` polling threads."""
    root = tempfile.mkdtemp(prefix="contention-", dir=workdir)
    saved = commit_log.wait_until_free
    if not yielding:
        commit_log.wait_until_free = _blocking  # type: ignore[assignment]
    store = MessageStore.open(root, MessageStoreConfig.small(root, mapped_file_size_commit_log=256 << 20))
    stop = threading.Event()
    counts = [0] * producers
    body = b"x" * 1024

    def produce(p: int) -> None:
        i = 0
        while not stop.is_set():
            store.put_message(Message("TopicA", body, tags="TagA", keys=[f"k{p}-{i}"], queue_id=p % 4))
            i += 1
        counts[p] = i

    def poll() -> None:
        while not stop.is_set():
            store.get_message("g", "TopicA", 0, 0, 32).release()

    threads = [threading.Thread(target=produce, args=(p,)) for p in range(producers)]
    threads += [threading.Thread(target=poll) for _ in range(pollers)]
    try:
        for t in threads:
            t.start()
        time.sleep(seconds)
        stop.set()
        for t in threads:
            t.join()
        return sum(counts) / seconds
    finally:
        stop.set()
        store.shutdown()
        commit_log.wait_until_free = saved
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--producers", type=int, default=4)
    ap.add_argument("--pollers", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    workdir = tempfile.mkdtemp(prefix="rmqlab-contention-", dir=args.dir)
    try:
        rates: dict[tuple[bool, int], float] = {}
        for _ in range(args.repeat):
            for yielding in (False, True):  # alternating, so a noisy moment hits both alike
                for pollers in (0, args.pollers):
                    r = run(workdir, args.producers, pollers, args.seconds, yielding)
                    rates[(yielding, pollers)] = max(rates.get((yielding, pollers), 0.0), r)
        print(f"{args.producers} producer threads, 1 KiB messages, ASYNC_FLUSH, {args.seconds:g} s rows, "
              f"best of {args.repeat}")
        print(f"{'put lock':<34} {'alone':>12} {f'+{args.pollers} pollers':>12} {'ratio':>7}")
        for yielding, label in ((False, "baseline: blocking acquire"), (True, "rmqlab: wait until free")):
            alone, busy = rates[(yielding, 0)], rates[(yielding, args.pollers)]
            print(f"{label:<34} {alone:>10,.0f}/s {busy:>10,.0f}/s {busy / alone:>7.3f}")
        for pollers, label in ((0, "alone"), (args.pollers, f"beside {args.pollers} pollers")):
            print(f"rmqlab / baseline, {label}: {rates[(True, pollers)] / rates[(False, pollers)]:.2f}x")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
