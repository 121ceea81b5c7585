"""Spark readers and audit vs single-process inspection, in the same run.

    python bench/bench_spark.py [--mib 256 | --gib 1] [--master local[2]] [--dir /tmp] [--copies 1,2,4]
                                [--store DIR] [--repeat 2] [--audit-repeat 1] [--audit-only]

1. Writes a store of 1 KiB messages with rmqlab's MessageStore (64 MiB CommitLog files).
2. Reads its CommitLog (no bodies) single-process (``StoreSnapshot.iter_records`` walk and
   ``messages()``) and with ``rmq_commitlog`` on ``--master`` (all columns, and the audit's
   columns): MB/s each, wall and per CPU-second of the whole process tree, and the ratio.
3. Spark overhead on a tiny store (data/clean-small): session start, first result, a repeat.
4. ``audit`` on 1, 2, 4 copies of the store (hard links): seconds per GiB, wall and CPU (the
   scaling curve), next to ``verify()`` on one copy. ``--audit-warmup N`` (default 2) audits
   one store first: the first audit of a JVM pays JIT and code generation, and the JIT keeps
   improving over the next ones, so a curve started on a cold JVM flatters the later points.
   Then ``--audit-repeat N`` rounds over the copy counts (1, 2, 4, 1, 2, 4, ...): the first
   warm run and the best of each are printed, and slowest / fastest best s per GiB.
   ``--audit-only`` skips steps 2 and 3.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

from _workload import write_store

ROOT = Path(__file__).resolve().parent.parent


def tree_cpu() -> float:
    """CPU seconds (user + system, reaped children included) of this process and every
    descendant (the Spark JVM, its Python workers): Spark's work runs outside this process."""
    tick = os.sysconf("SC_CLK_TCK")
    procs: dict[int, tuple[int, float]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            procs[int(d)] = (int(fields[1]), sum(int(x) for x in fields[11:15]) / tick)
    mine, todo = set(), [os.getpid()]
    while todo:
        p = todo.pop()
        mine.add(p)
        todo += [c for c, (pp, _) in procs.items() if pp == p and c not in mine]
    return sum(procs[p][1] for p in mine if p in procs)


def timed(fn):  # type: ignore[no-untyped-def]
    c, t = tree_cpu(), time.perf_counter()
    out = fn()
    timed.cpu = tree_cpu() - c  # type: ignore[attr-defined]
    return time.perf_counter() - t, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--gib", type=float, default=None, help="store size in GiB (overrides --mib)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--dir", default="/tmp")
    ap.add_argument("--copies", default="1,2,4")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--repeat", type=int, default=2, help="reader runs (best is reported)")
    ap.add_argument("--store", default=None, help="an existing store to read instead of writing one")
    ap.add_argument("--audit-repeat", type=int, default=1, help="audits per copy count (first and best printed)")
    ap.add_argument("--audit-warmup", type=int, default=2,
                    help="audits of one store before the curve (JIT warm-up; the first is printed as the cold figure)")
    ap.add_argument("--audit-only", action="store_true", help="skip the single-process and reader figures")
    a = ap.parse_args()
    size = int(a.gib * 1024**3) if a.gib else a.mib * 1024**2
    work = Path(a.dir) / f"rmqlab-bench-spark-{os.getpid()}"
    store = str(work / "store0")
    try:
        if a.store:
            store = str(work / "store0")
            shutil.copytree(a.store, store, copy_function=os.link)
        else:
            t, n = timed(lambda: write_store(store, size, file_size=64 * 1024 * 1024))
            print(f"wrote {n} messages ({size / 2**20:.0f} MiB) in {t:.1f} s -> {store}")
        from rmqlab.inspect import open_snapshot

        with open_snapshot(store) as snap:
            log_bytes = snap.max_offset - snap.min_offset
            if not a.audit_only:
                t_walk, cnt = timed(lambda: sum(1 for _ in snap.iter_records(damage=[])))
                t_msgs, df = timed(lambda: snap.messages(damage=[]))
                t_verify, fnd = timed(lambda: list(snap.verify()))
        mb = log_bytes / 1e6
        if not a.audit_only:
            print(f"single-process walk (iter_records): {mb / t_walk:8.1f} MB/s  ({cnt} records, {t_walk:.1f} s)")
            print(f"single-process messages() frame:    {mb / t_msgs:8.1f} MB/s  ({len(df)} rows, {t_msgs:.1f} s)")
            print(f"single-process verify():            {t_verify / (log_bytes / 2**30):8.1f} s/GiB "
                  f"({len(fnd)} findings)")

        from pyspark.sql import functions as F

        import rmqlab.spark.jobs as audit_mod
        from rmqlab.spark import get_session

        # (an older rmqlab on PYTHONPATH, for a baseline: no column option, no unpersist())
        record_columns = getattr(audit_mod, "RECORD_COLUMNS", None)

        t_sess, spark = timed(lambda: get_session(a.master, "rmqlab-bench"))
        if not a.audit_only:
            tiny = str(ROOT / "data" / "clean-small")
            t_first, _ = timed(lambda: spark.read.format("rmq_commitlog").load(tiny).limit(1).collect())
            t_again, _ = timed(lambda: spark.read.format("rmq_commitlog").load(tiny).agg(F.count("*")).collect())
            print(f"spark overhead, tiny store: session {t_sess:.1f} s, first result {t_first:.1f} s, "
                  f"a whole tiny read again {t_again:.1f} s")

            def spark_read(columns: str | None = None) -> int:
                r = spark.read.format("rmq_commitlog")
                df = (r.option("columns", columns) if columns else r).load(store)
                return int(df.agg(F.sum("size"), F.count("*")).collect()[0][1])

            runs = [("all columns", None)] + ([("audit columns", ",".join(record_columns))] if record_columns else [])
            for label, cols in runs:
                best = None
                for _ in range(a.repeat):
                    t_spark, rows = timed(lambda cols=cols: spark_read(cols))
                    if best is None or t_spark < best[0]:
                        best = (t_spark, timed.cpu)  # type: ignore[attr-defined]
                t_spark, cpu = best
                print(f"rmq_commitlog on {a.master}, {label}: {mb / t_spark:8.1f} MB/s wall, {mb / cpu:8.1f} MB/s per "
                      f"CPU-second ({rows} rows, {t_spark:.1f} s, {cpu:.1f} CPU s); ratio spark / walk: "
                      f"{t_walk / t_spark:.2f}, spark / messages(): {t_msgs / t_spark:.2f}")

        from rmqlab.spark.jobs import audit_inputs, load_inputs

        copies = [int(c) for c in a.copies.split(",")]
        paths = [store]
        for i in range(1, max(copies)):
            dst = work / f"store{i}"
            shutil.copytree(store, dst, copy_function=os.link)
            paths.append(str(dst))
        def run(c: int) -> int:
            group = f"audit-{c}-{time.monotonic_ns()}"  # a fresh group per run: its job ids are this run's
            spark.sparkContext.setJobGroup(group, "bench audit")
            inp = load_inputs(spark, paths[:c])
            findings, _ = audit_inputs(inp)
            out = findings.count()
            if hasattr(inp, "unpersist"):
                inp.unpersist()
            else:
                for d in (inp.records, inp.units, inp.items):
                    d.unpersist()
            tracker = spark.sparkContext.statusTracker()
            run.jobs = len(tracker.getJobIdsForGroup(group))  # type: ignore[attr-defined]
            return out

        # The JVM's JIT keeps compiling Spark's hot code over the first few audits of a session:
        # the second audit of one store still ran ~1.2x slower per GiB than a fourth one. Warm
        # the session up on one store first (the first of these is the cold figure a one-shot
        # CLI run pays), then run the copy counts in rounds, so each point sees the same JVM.
        warm: list[str] = []
        for _ in range(a.audit_warmup):
            t_w, _nf = timed(lambda: run(1))
            warm.append(f"{t_w:.1f} s ({timed.cpu:.1f} CPU s)")  # type: ignore[attr-defined]
        if warm:
            print(f"JVM warm-up, audits of one store: {', '.join(warm)} (the first is a cold JVM's)")
        print("audit scaling (copies, GiB, wall s, wall s/GiB, CPU s, CPU s/GiB; first warm run, then best of "
              f"{a.audit_repeat}, copy counts in {a.audit_repeat} interleaved rounds):")
        runs: dict[int, list[tuple[float, float]]] = {c: [] for c in copies}
        jobs: dict[int, list[int]] = {c: [] for c in copies}
        found: dict[int, int] = {}
        for _ in range(a.audit_repeat):
            for c in copies:
                t_a, found[c] = timed(lambda c=c: run(c))
                runs[c].append((t_a, timed.cpu))  # type: ignore[attr-defined]
                jobs[c].append(run.jobs)  # type: ignore[attr-defined]
        for c in copies:
            gib = c * log_bytes / 2**30
            cells = [runs[c][0]] + ([min(runs[c])] if len(runs[c]) > 1 else [])
            print(f"  {c}  {gib:6.3f}  " + "  |  ".join(
                f"{t:7.1f}  {t / gib:7.1f}  {cpu:7.1f}  {cpu / gib:7.1f}" for t, cpu in cells)
                + f"   ({found[c]} findings, Spark jobs per audit {'/'.join(map(str, jobs[c]))})",
                flush=True)
        best = [min(runs[c])[0] / (c * log_bytes / 2**30) for c in copies]
        print(f"flatness: slowest / fastest best s per GiB = {max(best) / min(best):.2f}x")
        spark.stop()
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
