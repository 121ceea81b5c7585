"""CPU per put on a shared machine: the CommitLog fast path vs its exact path, same run.

    python bench/bench_put_cpu.py [--n 20000] [--repeat 3] [--chunk 64] [--batch 32] [--distinct] [--dir /tmp]

Puts the bench_store workload (1 KiB body, a tag, two keys) into a stepped store, timing each
chunk of ``--chunk`` puts (or 2 batches of 32) with thread CPU time; ``store.step()`` runs the
dispatch every 512 messages *outside* the timed chunks, so the hints are consumed as the reput
thread would and only the put itself is measured. Prints the 10th and 20th percentile of the
per-message chunk figures (best over ``--repeat`` runs): under load from other jobs the low
percentiles stay put while means and wall clock swing by 2x. "exact" is
``CommitLog.fast_path = False`` (the reference encoder), measured in the same process.
"MessageBatch" puts the same batches pre-encoded by the producer (``MessageBatch.from_messages``,
done before the timed loop: its client-side CPU per message is printed on its own line, it is
what a real producer pays, not the store). Nothing here asserts; it prints.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time

from bench_store import _config, _messages

from rmqlab import MessageStore
from rmqlab.codec.batch import MessageBatch

ENCODE_US: list[float] = []  # client-side MessageBatch encode, thread CPU us per message, per run


def run(workdir: str, n: int, fast: bool, batch: int, chunk: int, encoded: bool = False,
        distinct: bool = False) -> tuple[float, float]:
    """(p10, p20) CPU us per message of put_message (batch 0) or put_messages(batch), with
    ``encoded`` the batches handed over as producer-encoded MessageBatch objects, with
    ``distinct`` every message with its own copy of the body (a MessageBatch always holds
    copies; the shared body of the other rows stays in the CPU cache)."""
    path = tempfile.mkdtemp(prefix="put-", dir=workdir)
    try:
        store = MessageStore.open(path, _config(""), threaded=False)
        store.commit_log.fast_path = fast
        msgs = _messages(n)
        if distinct:
            for m in msgs:
                m.body = bytes(bytearray(m.body))
        if batch:
            items: list = [msgs[i : i + batch] for i in range(0, n, batch)]
            if encoded:
                cl, clock = store.commit_log, store.clock
                c0 = time.thread_time_ns()
                version = store.config.rocketmq_version  # a producer of the store's version
                items = [MessageBatch.from_messages(b, lambda: cl.new_uniq_key(clock.now_ms()), client_version=version)
                         for b in items]  # fmt: skip
                ENCODE_US.append((time.thread_time_ns() - c0) / n / 1000.0)
            put, per, chunk = store.put_messages, batch, 2
        else:
            items, put, per = msgs, store.put_message, 1
        step_every = max(1, 512 // (chunk * per)) * chunk
        out = []
        tt = time.thread_time_ns
        for i in range(0, len(items), chunk):
            part = items[i : i + chunk]
            c0 = tt()
            for m in part:
                put(m)
            out.append((tt() - c0) / (len(part) * per) / 1000.0)
            if (i // chunk) % (step_every // chunk) == 0:
                store.step()
        store.shutdown()
        out.sort()
        return out[len(out) // 10], out[len(out) // 5]
    finally:
        shutil.rmtree(path, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--chunk", type=int, default=64)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--distinct", action="store_true", help="a body object per message (see run())")
    args = ap.parse_args()
    workdir = tempfile.mkdtemp(prefix="rmqlab-putcpu-", dir=args.dir)
    try:
        print(f"n={args.n}, CPU us per message, best of {args.repeat} (p10 / p20 of {args.chunk}-put chunks)"
              f"{', a body object per message' if args.distinct else ''}")
        rows = {}
        mb = f"put_messages(MessageBatch {args.batch})"
        for label, fast, batch, enc in [("put_message, fast path", True, 0, False),
                                        ("put_message, exact path", False, 0, False),
                                        (f"put_messages({args.batch}), fast path", True, args.batch, False),
                                        (f"put_messages({args.batch}), exact path", False, args.batch, False),
                                        (f"{mb}, fast path", True, args.batch, True)]:
            r = [run(workdir, args.n, fast, batch, args.chunk, enc, args.distinct) for _ in range(args.repeat)]
            rows[label] = (min(x[0] for x in r), min(x[1] for x in r))
            print(f"{label:<40} {rows[label][0]:6.2f} / {rows[label][1]:6.2f} us")
        print(f"{'  client-side MessageBatch encode (not timed above)':<40} {min(ENCODE_US):6.2f} us (best run mean)")
        single, batched = rows["put_message, fast path"][0], rows[f"put_messages({args.batch}), fast path"][0]
        print(f"batch vs single (fast, p10): {single / batched:.2f}x cheaper per message")
        encoded = rows[f"{mb}, fast path"][0]
        print(f"MessageBatch vs single (store side, p10): {single / encoded:.2f}x cheaper per message")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
