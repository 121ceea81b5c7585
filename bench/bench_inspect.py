"""Single-process inspection throughput: messages(), topics(), verify(), consume_queue().

    python bench/bench_inspect.py [--mib 256 | --gib 1] [--dir /tmp] [--cq-units 10000000] [--no-legacy]

1. Writes a store of 1 KiB messages (tag, one key, 4 topics x 8 queues) with rmqlab's
   MessageStore, 256 MiB CommitLog files (dispatch included, so CQ and index are complete).
2. Baseline in the same run: the bare header hop (``codec.scan.header_hop``: one struct unpack
   per record) over every file.
3. ``messages()``, ``topics()``, ``verify()`` and ``verify(check_crc=True)``: MB/s of log
   (wall and process CPU) and x baseline; with the legacy row walk (``iter_records`` +
   ``message_row`` per record, what messages() did before the columnar scan) for comparison.
4. ``consume_queue()`` of one queue of ``--cq-units`` units: the queue's files are written
   directly with numpy (CQ_UNIT_DTYPE), since putting 10 M messages through the store would take
   minutes; the read path is the same.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

from _workload import write_store


def write_cq(root: str, units: int, file_units: int = 300_000) -> None:
    """One queue ``BenchCQ/0`` of ``units`` units in files of ``file_units`` (RocketMQ's default)."""
    import numpy as np

    from rmqlab.codec.consume_queue_unit import CQ_UNIT_DTYPE
    from rmqlab.codec.names import offset_to_file_name

    qdir = Path(root) / "consumequeue" / "BenchCQ" / "0"
    qdir.mkdir(parents=True, exist_ok=True)
    (Path(root) / "commitlog").mkdir(exist_ok=True)
    for first in range(0, units, file_units):
        k = min(file_units, units - first)
        arr = np.zeros(file_units, CQ_UNIT_DTYPE)
        i = np.arange(first, first + k, dtype=np.int64)
        arr["commit_log_offset"][:k] = i * 1100
        arr["size"][:k] = 1100
        arr["tags_code"][:k] = i % 8
        arr.tofile(qdir / offset_to_file_name(first * 20))


def best(fn, repeat: int):  # type: ignore[no-untyped-def]
    """(best wall s, cpu s of that run, result)."""
    out = None
    runs = []
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        out = fn()
        runs.append((time.perf_counter() - w, time.process_time() - c))
    w, c = min(runs)
    return w, c, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--gib", type=float, default=None, help="store size in GiB (overrides --mib)")
    ap.add_argument("--dir", default="/tmp")
    ap.add_argument("--cq-units", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--no-legacy", action="store_true", help="skip the legacy row walk")
    ap.add_argument("--store", default=None, help="use an existing store dir instead of writing one")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    size = int(a.gib * 1024**3) if a.gib else a.mib * 1024**2
    work = Path(a.dir) / f"rmqlab-bench-inspect-{os.getpid()}"
    store = a.store or str(work / "store")
    try:
        if a.store is None:
            t = time.perf_counter()
            n = write_store(store, size, file_size=256 * 1024 * 1024)
            print(f"wrote {n} messages ({size / 2**20:.0f} MiB) in {time.perf_counter() - t:.1f} s -> {store}")
        from rmqlab.codec.scan import header_hop
        from rmqlab.inspect import open_snapshot
        from rmqlab.inspect.frames import MESSAGE_COLUMNS, message_row

        with open_snapshot(store) as snap:
            log = snap.max_offset - snap.min_offset
            mb = log / 1e6

            def hop() -> int:
                return sum(len(header_hop(mf.buffer, 0, mf.mapped_length)[0]) for mf in snap.commit_log_files)

            def legacy() -> int:
                import pandas as pd

                rows = [message_row(r, f) for f, _o, r in snap.iter_records(damage=[]) if hasattr(r, "topic")]
                return len(pd.DataFrame(rows, columns=MESSAGE_COLUMNS))

            figures = [("baseline header hop", hop)]
            if not a.no_legacy:
                figures.append(("legacy row walk + frame", legacy))
            figures += [
                ("messages()", lambda: len(snap.messages(damage=[]))),
                ("topics()", lambda: len(snap.topics())),
                ("verify()", lambda: len(list(snap.verify()))),
                ("verify(check_crc=True)", lambda: len(list(snap.verify(check_crc=True)))),
            ]
            print(f"log: {log / 2**20:.0f} MiB in {len(snap.commit_log_files)} file(s)")
            print(f"{'what':28s} {'wall MB/s':>10s} {'cpu MB/s':>10s} {'s/GiB':>7s} {'x hop':>7s}  result")
            base = None
            for name, fn in figures:
                w, c, out = best(fn, 1 if name.startswith("legacy") else a.repeat)
                base = base or w
                print(f"{name:28s} {mb / w:10.1f} {mb / c:10.1f} {w / (log / 2**30):7.2f} {base / w:7.3f}  {out}")
        cq_root = str(work / "cqstore")
        write_cq(cq_root, a.cq_units)
        with open_snapshot(cq_root) as snap:
            w, c, df = best(lambda: snap.consume_queue("BenchCQ", 0), a.repeat)
            print(f"consume_queue() of {len(df)} units: {w:.3f} s wall, {c:.3f} s cpu "
                  f"({len(df) / w / 1e6:.1f} M units/s)")
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
