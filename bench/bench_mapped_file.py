"""Append throughput of MappedFile vs. a bare mmap slice copy, in the same run.

    python bench/bench_mapped_file.py [--mb 256] [--record 1024] [--repeat 3] [--dir /tmp]

Fills a file of ``--mb`` MiB with ``--record``-byte records three ways:

* baseline      ``mv[pos:pos+n] = data`` on a bare ``memoryview(mmap)`` of a fresh sparse file
* append_message ``MappedFile.append_message(data)`` until it returns False
* append_with    ``MappedFile.append_with(fn)`` where ``fn`` does the same slice copy

Each is timed "cold" (fresh sparse file: page faults and block allocation included, what a
real CommitLog file pays) and "warm" (the same mapping written again: pure Python overhead).
Best of ``--repeat`` runs; ratios are MappedFile MB/s over baseline MB/s (target >= 0.7).
"""

from __future__ import annotations

import argparse
import mmap
import os
import shutil
import tempfile
import time
from collections.abc import Callable

from rmqlab.files.mapped_file import MappedFile


def _baseline(path: str, size: int, data: bytes, passes: int) -> list[float]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    os.ftruncate(fd, size)
    mm = mmap.mmap(fd, size)
    os.close(fd)
    mv = memoryview(mm)
    n = len(data)
    times = []
    for _ in range(passes):
        t0 = time.perf_counter()
        pos = 0
        while pos + n <= size:
            mv[pos : pos + n] = data
            pos += n
        times.append(time.perf_counter() - t0)
    mv.release()
    mm.close()
    return times


def _mapped_file(path: str, size: int, data: bytes, passes: int, use_with: bool) -> list[float]:
    mf = MappedFile(path, size)
    n = len(data)

    def fn(buf: memoryview, pos: int, max_blank: int, file_from_offset: int) -> int:
        if n > max_blank:
            return 0
        buf[pos : pos + n] = data
        return n

    times = []
    for _ in range(passes):
        mf.set_wrote_position(0)
        t0 = time.perf_counter()
        if use_with:
            append_with = mf.append_with
            while append_with(fn) > 0:
                pass
        else:
            append = mf.append_message
            while append(data):
                pass
        times.append(time.perf_counter() - t0)
    mf.close()
    return times


def _best(run: Callable[[str], list[float]], workdir: str, repeat: int) -> tuple[float, float]:
    cold, warm = [], []
    for i in range(repeat):
        path = os.path.join(workdir, f"{i:020d}")
        t = run(path)
        cold.append(t[0])
        warm.append(t[1])
        os.unlink(path)
    return min(cold), min(warm)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=256, help="file size in MiB (default 256)")
    parser.add_argument("--record", type=int, default=1024, help="record size in bytes")
    parser.add_argument("--repeat", type=int, default=3, help="runs per method; best is kept")
    parser.add_argument("--dir", default=None, help="where to put the scratch files")
    args = parser.parse_args(argv)
    size = args.mb * 1024 * 1024
    data = os.urandom(args.record)
    workdir = tempfile.mkdtemp(prefix="rmqlab-bench-", dir=args.dir)
    try:
        results = {
            "baseline (mmap slice)": _best(
                lambda p: _baseline(p, size, data, 2), workdir, args.repeat
            ),
            "append_message": _best(
                lambda p: _mapped_file(p, size, data, 2, False), workdir, args.repeat
            ),
            "append_with": _best(
                lambda p: _mapped_file(p, size, data, 2, True), workdir, args.repeat
            ),
        }
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    mb = size / 1e6
    base_cold, base_warm = (mb / t for t in results["baseline (mmap slice)"])
    print(f"file {args.mb} MiB, records {args.record} B, best of {args.repeat}")
    print(f"{'method':<24}{'cold MB/s':>12}{'ratio':>8}{'warm MB/s':>12}{'ratio':>8}")
    for name, (cold, warm) in results.items():
        c, w = mb / cold, mb / warm
        print(f"{name:<24}{c:>12.0f}{c / base_cold:>8.2f}{w:>12.0f}{w / base_warm:>8.2f}")


if __name__ == "__main__":
    main()
