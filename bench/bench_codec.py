"""Decode speed over the reference stores' CommitLogs, vs a bare header hop over the same bytes.

    python bench/bench_codec.py [--repeat 20] [--store tests/fixtures/clean-small/store ...]

For each CommitLog file of each reference store (written by real RocketMQ 4.9.8), every record
is walked four ways; best of ``--repeat`` runs, CPU time of this thread:

* baseline      ``struct.unpack_from(">ii")`` of TOTALSIZE + MAGIC and hop (the least any walker
                must do)
* dispatch      ``check_message_and_return_size`` (what reput and recovery call per record)
* decode        ``iter_records``: full ``MessageRecord`` (body copy, topic, properties, CRC flag)
* decode+crc    ``iter_records(check_crc=True)``

Prints MB/s and records/s per way and the ratio to the baseline.
"""

from __future__ import annotations

import argparse
import glob
import os
import struct
import time
from collections.abc import Callable

from rmqlab.codec.flags import BLANK_MAGIC_CODE
from rmqlab.codec.walk import check_message_and_return_size, iter_records

_TOTAL_MAGIC = struct.Struct(">ii")
_DEFAULT_STORES = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "*", "store")))


def _hop(buf: bytes) -> int:
    pos, n, count = 0, len(buf), 0
    unpack = _TOTAL_MAGIC.unpack_from
    while pos + 8 <= n:
        total, magic = unpack(buf, pos)
        if magic == BLANK_MAGIC_CODE or total <= 0:
            break
        pos += total
        count += 1
    return count


def _dispatch(buf: bytes) -> int:
    pos, count = 0, 0
    while True:
        size, ok, req = check_message_and_return_size(buf, pos, check_crc=False, read_body=False)
        if not ok or size <= 0 or req is None:
            return count
        pos += size
        count += 1


def _decode(buf: bytes) -> int:
    return sum(1 for _, rec in iter_records(buf) if rec.__class__.__name__ == "MessageRecord")


def _decode_crc(buf: bytes) -> int:
    return sum(1 for _, rec in iter_records(buf, check_crc=True) if rec.__class__.__name__ == "MessageRecord")


def _best(fn: Callable[[bytes], int], files: list[bytes], repeat: int) -> tuple[float, int]:
    best, count = float("inf"), 0
    for _ in range(repeat):
        t0 = time.thread_time()
        count = sum(fn(b) for b in files)
        best = min(best, time.thread_time() - t0)
    return best, count


def _bytes_used(files: list[bytes]) -> int:
    """Bytes covered by records (up to the blank / end of data), the MB/s denominator."""
    total = 0
    for buf in files:
        pos = 0
        while pos + 8 <= len(buf):
            size, magic = _TOTAL_MAGIC.unpack_from(buf, pos)
            if magic == BLANK_MAGIC_CODE or size <= 0:
                break
            pos += size
        total += pos
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--store", action="append", default=None, help="store root(s); default: tests/fixtures/*/store")
    args = ap.parse_args()
    for store in args.store or _DEFAULT_STORES:
        paths = sorted(glob.glob(os.path.join(store, "commitlog", "*")))
        files = []
        for p in paths:
            with open(p, "rb") as f:
                files.append(f.read())
        used = _bytes_used(files)
        print(f"{os.path.normpath(store)}: {len(files)} files, {used / 1e6:.2f} MB of records")
        print(f"  {'way':<12} {'records':>8} {'MB/s':>10} {'records/s':>12}  ratio vs baseline")
        base_t = None
        for name, fn in (("baseline", _hop), ("dispatch", _dispatch), ("decode", _decode), ("decode+crc", _decode_crc)):
            t, count = _best(fn, files, args.repeat)
            base_t = t if base_t is None else base_t
            print(f"  {name:<12} {count:>8} {used / t / 1e6:>10.1f} {count / t:>12,.0f}  {base_t / t:.3f}")


if __name__ == "__main__":
    main()
