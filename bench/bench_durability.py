"""Durability benchmarks: recovery speed (normal and abnormal) and sync-flush put throughput.

    python bench/bench_durability.py [--mb 256] [--gib 1] [--repeat 2] [--threads 1 8] [--dir /tmp]

Recovery: a store of 1 KiB messages (default 1 GiB CommitLog files) is written once, shut down
cleanly and reopened (normal recovery: 4.9.8 walks the last three files with CRC), then the
``abort`` marker is put back and the checkpoint's physic/logics timestamps are set to 0 so that
abnormal recovery walks (with CRC checks) and re-dispatches everything from the first file --
twice: once with the index timestamp set to now (the index file survives the load, every record
is already in its CQ and index: the re-dispatch pre-check skips them), once with it at 0 (the
index file is destroyed at load, as after a real crash of a store whose index file is not yet
full, and re-dispatch rebuilds all of it). Reported: seconds and MB/s of CommitLog walked, next
to a baseline in the same run: a bare header hop (``struct`` reads of size and magic).

Sync flush: producers in 1 and 8 threads put 1 KiB messages into a SYNC_FLUSH store (group commit:
rounds run by the producers themselves, up to 8 overlapping msyncs, the service thread as a
backstop); messages/s, flushes done, messages per flush, process CPU per message (all threads),
and the ratio 8 threads / 1 thread (group commit must make it clearly > 1). Before each row, a
baseline in the same run: bare 1 KiB appends into a mapping, each forced by its own msync, from
as many threads, no store code (``x bare`` = the store's rate over it); and the plainest Python
group commit, no store code either (``bare_group_commit``: leader/follower over one mapping;
``x bare gc`` = the store's rate over it): what one CPython process does at best with this disk.
After the rows, the msync timeline of each bare group commit and store row (``msync_timeline``):
msyncs per second, how much of the time one was under way, how long each took until its thread
was back in Python (the GIL taken back included), and the idle gap between one and the next.
Then where the CPU went (``cpu_ledger``): per message, the process's user and system µs, minor
page faults and voluntary context switches, and the reput's and group-commit thread's own user /
system µs (``/proc``, Linux).
The msync latency depends on every other process's I/O on the same file system (one ext4
journal), so compare variants only within one session, alternating. ``x RocketMQ``: the store's
rate over the real RocketMQ 4.9.8 store's on these machines, ~4.3 k msgs/s (1 thread) and ~14.8 k
msgs/s (8 threads); its recovery did ~364 MB/s abnormal, ~1.8 GB/s normal.

``--reput-rounds``: the reput thread's CPU per record in small one-by-one rounds (what a
SYNC_FLUSH run pays per message): rounds of ``--round-records`` puts of the sync row's message
(a key, a UNIQ_KEY, 4 queues) into a store without service threads, each followed by one
``reput.run_once()``; thread CPU of the reput calls only, best of 5 runs of 1,500 rounds. Compare
code versions alternating runs (``PYTHONPATH=<other tree>``).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import mmap
import os
import shutil
import struct
import tempfile
import threading
import time
from collections.abc import Callable, Iterator

from rmqlab import Message, MessageStore, MessageStoreConfig
from rmqlab.clock import ManualClock
from rmqlab.codec.checkpoint import Checkpoint

_TOTAL_MAGIC = struct.Struct(">ii")
# The real RocketMQ 4.9.8 store's sync-flush puts/s on one of these VMs, by producer threads (issue 4).
ROCKETMQ_SYNC_FLUSH = {1: 4300.0, 8: 14800.0}


def write_store(root: str, total_bytes: int, file_size: int) -> int:
    config = MessageStoreConfig(store_path_root_dir=root, mapped_file_size_commit_log=file_size)
    body = os.urandom(1024 - 200)
    with MessageStore.open(root, config, threaded=False) as store:
        batches = [[Message("BenchTopic", body, tags="TagA", keys=[f"k{q}-{i}"], queue_id=q) for i in range(32)]
                   for q in range(8)]
        n = 0
        while store.get_max_phy_offset() < total_bytes:
            r = store.put_messages(batches[n % 8])
            if not r.ok:
                raise SystemExit(f"put failed: {r.status.name} {r.reason}")
            n += 1
            if n % 256 == 0:
                store.step()
        store.wait_dispatched()
        return store.get_max_phy_offset()


def header_hop(root: str) -> tuple[float, int]:
    """Baseline: walk every record by its size field only (mmap + struct)."""

    walked = 0
    t0 = time.perf_counter()
    cl = os.path.join(root, "commitlog")
    for name in sorted(os.listdir(cl)):
        with open(os.path.join(cl, name), "rb") as f:
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            pos, n = 0, len(mm)
            unpack = _TOTAL_MAGIC.unpack_from
            while pos + 8 <= n:
                size, magic = unpack(mm, pos)
                if size <= 0 or magic not in (-626843481, -626843477):
                    break
                pos += size
            walked += pos
            mm.close()
    return time.perf_counter() - t0, walked


def reopen(root: str, file_size: int) -> tuple[float, float, object]:
    """(wall seconds, process CPU seconds, plan) of one open with recovery (``start=False``)."""
    config = MessageStoreConfig(store_path_root_dir=root, mapped_file_size_commit_log=file_size)
    c0 = time.process_time()
    t0 = time.perf_counter()
    store = MessageStore.open(root, config, threaded=False, start=False)
    elapsed = time.perf_counter() - t0
    cpu = time.process_time() - c0
    plan = store.recovery_plan
    store.shutdown()
    return elapsed, cpu, plan


def best_reopen(root: str, file_size: int, repeat: int, keep_index: bool | None) -> tuple[float, float, object]:
    """Best wall and best CPU of ``repeat`` reopens (``keep_index`` None: normal recovery)."""
    runs = []
    for _ in range(repeat):
        if keep_index is not None:
            force_abnormal(root, keep_index=keep_index)
        runs.append(reopen(root, file_size))
    return min(r[0] for r in runs), min(r[1] for r in runs), runs[-1][2]


def force_abnormal(root: str, *, keep_index: bool = False) -> None:
    """Put ``abort`` back and zero the checkpoint's physic/logics timestamps, so abnormal recovery
    walks (CRC) and re-dispatches from the first file. ``keep_index``: set the index timestamp to
    now (as if the index had just been flushed), so the index file survives the load and the
    re-dispatch finds every record already in its CQ and index; otherwise it is zeroed too and
    the index is rebuilt from scratch -- what a crash does to an index file that is not yet full
    (its end time is past the checkpoint's index timestamp, RocketMQ issue #3868)."""
    with open(os.path.join(root, "abort"), "wb"):
        pass
    index_ts = int(time.time() * 1000) if keep_index else 0
    with open(os.path.join(root, "checkpoint"), "r+b") as f:
        f.write(Checkpoint(index_msg_timestamp=index_ts).pack()[:40])


def bench_recovery(args: argparse.Namespace) -> None:
    root = os.path.join(tempfile.mkdtemp(dir=args.dir, prefix="rmqlab-bench-"), "store")
    total = int(args.gib * (1 << 30)) if args.gib else args.mb << 20
    file_size = 1 << 30
    try:
        t0 = time.perf_counter()
        size = write_store(root, total, file_size)
        print(f"wrote {size / 1e6:.0f} MB of 1 KiB messages in {time.perf_counter() - t0:.1f} s")
        hop_s, hop_bytes = header_hop(root)
        rep = args.repeat
        normal_s, normal_cpu, normal_plan = best_reopen(root, file_size, rep, None)
        kept_s, kept_cpu, kept_plan = best_reopen(root, file_size, rep, True)
        abnormal_s, abnormal_cpu, abnormal_plan = best_reopen(root, file_size, rep, False)
        rows = [
            ("baseline header hop", hop_s, hop_s, hop_bytes),
            ("normal recovery", normal_s, normal_cpu, normal_plan.bytes_checked),  # type: ignore[attr-defined]
            ("abnormal (CRC, re-dispatch; CQ+index kept)", kept_s, kept_cpu,
             kept_plan.bytes_checked),  # type: ignore[attr-defined]
            ("abnormal (CRC, re-dispatch; index rebuilt)", abnormal_s, abnormal_cpu,
             abnormal_plan.bytes_checked),  # type: ignore[attr-defined]
        ]
        base = hop_bytes / hop_s / 1e6
        print(f"best of {rep}; wall and process CPU (all threads)")
        print(f"{'recovery':44} {'seconds':>8} {'cpu s':>7} {'MB':>7} {'MB/s':>7} {'cpu MB/s':>8} {'vs hop':>7}")
        for name, secs, cpu, walked in rows:
            mbs = walked / secs / 1e6 if secs else 0.0
            cpu_mbs = walked / cpu / 1e6 if cpu else 0.0
            print(f"{name:44} {secs:8.2f} {cpu:7.2f} {walked / 1e6:7.0f} {mbs:7.0f} {cpu_mbs:8.0f} {mbs / base:7.2f}")
        print("targets: abnormal >= 300 MB/s (RocketMQ 4.9.8: ~364 MB/s; normal ~1.8 GB/s warm)")
    finally:
        shutil.rmtree(os.path.dirname(root), ignore_errors=True)


@contextlib.contextmanager
def _bare_mapping(directory: str | None, prefix: str, size: int = 256 << 20) -> Iterator[tuple[mmap.mmap, int]]:
    """A fresh sparse file of ``size`` bytes mapped shared: (mapping, its address for msync)."""
    from rmqlab.files.fs import address_of

    fd, path = tempfile.mkstemp(dir=directory, prefix=prefix)
    try:
        os.ftruncate(fd, size)
        mm = mmap.mmap(fd, size)
        try:
            yield mm, address_of(mm)
        finally:
            mm.close()
    finally:
        os.close(fd)
        os.unlink(path)


def _run_writers(writer: Callable[[int], None], threads: int) -> float:
    """Run ``writer(i)`` in ``threads`` threads until all return; the seconds it took."""
    ts = [threading.Thread(target=writer, args=(i,)) for i in range(threads)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return time.perf_counter() - t0


def _append(mm: mmap.mmap, lock: threading.Lock, ends: list[int], record: bytes) -> int:
    """Append ``record`` at ``ends[0]`` under ``lock``; the new end, or -1 once the mapping is full."""
    with lock:
        pos = ends[0]
        end = pos + len(record)
        if end > len(mm):
            return -1
        mm[pos:end] = record
        ends[0] = end
        return end


def bare_sync_loop(directory: str | None, threads: int, seconds: float) -> float:
    """Baseline: appends of 1 KiB into one shared mapping, each followed by an ``msync`` of its
    own dirty pages (``fs.msync_range``, as the store flushes), no store code; appends/s.

    What this disk and this Python do with ``threads`` writers forcing every append on their own
    (no group commit): the day's ceiling for one producer, and the disk's capacity for parallel
    syncs with eight. The msync latency of these VMs swings 2-3x from day to day, so the store's
    rows are read against this one, measured in the same run."""
    from rmqlab.files.fs import msync_range

    with _bare_mapping(directory, "rmqlab-bare-sync-") as (mm, addr):
        record = os.urandom(1024)
        lock = threading.Lock()
        end = [0]
        counts = [0] * threads
        stop = time.perf_counter() + seconds

        def writer(i: int) -> None:
            page = mmap.PAGESIZE
            while time.perf_counter() < stop:
                upto = _append(mm, lock, end, record)
                if upto < 0:
                    return
                start = upto - 1024
                start -= start % page
                msync_range(mm, addr, start, upto - start)
                counts[i] += 1

        elapsed = _run_writers(writer, threads)  # before the counts are read
        return sum(counts) / elapsed


def bare_group_commit(directory: str | None, threads: int, seconds: float) -> tuple[float, float, int]:
    """Baseline: the plainest group commit in Python, no store code; (appends/s, appends per
    msync, acknowledgements of bytes not yet forced: always 0).

    Writers append 1 KiB under a lock into one shared mapping, then wait until the forced end
    covers their record. A writer that finds no force under way leads: one ``msync`` from the
    forced end's page to everything appended so far (its own record and whoever appended
    meanwhile), then it wakes every waiter; a woken writer still not covered leads the next
    force itself (leader/follower, as a database's group commit does; no service thread, no
    request lists, no dispatch). What one CPython process with this disk can do at best with
    ``threads`` producers: the store's sync-flush rows read against it show what the store's
    own work (the put, the requests, the reput dispatching on the same GIL) costs."""
    from rmqlab.files import fs

    with _bare_mapping(directory, "rmqlab-bare-gc-") as (mm, addr):
        record = os.urandom(1024)
        append_lock = threading.Lock()
        leader = threading.Lock()
        forced = threading.Condition(threading.Lock())
        state = [0, 0, 0, 0]  # appended end, forced end, msyncs, acknowledged past the forced end
        counts = [0] * threads
        stop = time.perf_counter() + seconds

        def lead() -> None:
            start = state[1]
            upto = state[0]  # everything appended so far, not only this writer's record
            start -= start % mmap.PAGESIZE
            fs.msync_range(mm, addr, start, upto - start)
            state[2] += 1
            if upto > state[1]:
                state[1] = upto

        def writer(i: int) -> None:
            while time.perf_counter() < stop:
                end = _append(mm, append_lock, state, record)
                if end < 0:
                    return
                while state[1] < end:
                    if leader.acquire(blocking=False):
                        try:
                            if state[1] < end:
                                lead()
                        finally:
                            leader.release()
                        with forced:
                            forced.notify_all()
                    else:
                        with forced:
                            if state[1] < end and leader.locked():
                                forced.wait(0.005)
                if state[1] < end:
                    state[3] += 1
                counts[i] += 1

        elapsed = _run_writers(writer, threads)
        if mm[: state[1]] != record * (state[1] // 1024):
            raise RuntimeError("bare group commit: the mapping does not hold the appended records")
        n = sum(counts)
        return n / elapsed, n / max(state[2], 1), state[3]


@contextlib.contextmanager
def msync_timeline() -> Iterator[list[tuple[int, int, int]]]:
    """Record every ``fs.msync_range`` call made inside the block, the store's and the bare
    loops' alike: ``(start ns, return ns, bytes)``. The return is when the calling thread is back
    in Python, i.e. after the syscall *and* after it took the GIL back. ~0.3 us a call."""
    from rmqlab.files import fs, mapped_file

    real = fs.msync_range
    events: list[tuple[int, int, int]] = []
    now = time.perf_counter_ns

    def traced(mm: mmap.mmap, addr: int, offset: int, length: int) -> None:
        t0 = now()
        real(mm, addr, offset, length)
        events.append((t0, now(), length))

    fs.msync_range = mapped_file.msync_range = traced  # type: ignore[assignment]
    try:
        yield events
    finally:
        fs.msync_range = mapped_file.msync_range = real  # type: ignore[assignment]


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _thread_cpu(native_id: int | None) -> tuple[float, float]:
    """(user s, system s) of one thread from ``/proc`` (Linux; clock-tick resolution), or zeros."""
    try:
        with open(f"/proc/self/task/{native_id}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) / _TICK, int(fields[12]) / _TICK
    except (OSError, IndexError, ValueError):
        return 0.0, 0.0


@contextlib.contextmanager
def cpu_ledger() -> Iterator[dict[str, float]]:
    """Where the CPU of the block went: the process's user and system seconds, minor page faults
    and voluntary context switches, and each ``rmqlab-*`` service thread's user and system
    seconds (threads alive at both ends; ``/proc``, so Linux only). Filled in when the block
    ends; keys ``user``, ``sys``, ``faults``, ``switches``, ``<thread> user``, ``<thread> sys``."""
    import resource

    def services() -> dict[str, int | None]:
        return {t.name: t.native_id for t in threading.enumerate() if t.name.startswith("rmqlab-")}

    out: dict[str, float] = {}
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    before = {name: _thread_cpu(tid) for name, tid in services().items()}
    try:
        yield out
    finally:
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        out.update(user=r1.ru_utime - r0.ru_utime, sys=r1.ru_stime - r0.ru_stime,
                   faults=r1.ru_minflt - r0.ru_minflt, switches=r1.ru_nvcsw - r0.ru_nvcsw)
        for name, tid in services().items():
            if name in before:
                u, s = _thread_cpu(tid)
                out[f"{name} user"] = u - before[name][0]
                out[f"{name} sys"] = s - before[name][1]


def _ledger_row(name: str, threads: int, ledger: dict[str, float], n: float) -> str:
    """One row of the CPU table: per message, the process's user / system microseconds, faults
    and context switches, then the reput and group-commit service threads' user / system us."""
    def us(key: str) -> str:
        return f"{ledger.get(key + ' user', 0.0) / n * 1e6:5.1f} / {ledger.get(key + ' sys', 0.0) / n * 1e6:4.1f}"

    row = (f"{name:28} {threads:7} {ledger['user'] / n * 1e6:8.1f} {ledger['sys'] / n * 1e6:8.1f}"
           f" {ledger['faults'] / n:7.2f} {ledger['switches'] / n:8.1f}")
    if "rmqlab-reput user" in ledger:
        row += f"   {us('rmqlab-reput'):>13}   {us('rmqlab-group_commit'):>13}"
    return row


def timeline_stats(events: list[tuple[int, int, int]]) -> dict[str, float]:
    """What a list of msync calls says about the disk's use: calls per second, the share of the
    time at least one was under way (``busy``), their duration (p50/p90, us), the idle ``gap``
    from the end of one to the start of the next when none was under way (p50/p90, us), and
    the median bytes per call."""
    if len(events) < 2:
        return {}
    ev = sorted(events)
    busy = 0
    end = ev[0][0]
    gaps = []
    for t0, t1, _ in ev:
        if t0 > end:
            gaps.append(t0 - end)
        if t1 > end:
            busy += t1 - max(t0, end)
            end = t1
    span = end - ev[0][0]
    durations = sorted(t1 - t0 for t0, t1, _ in ev)
    gaps.sort()
    sizes = sorted(n for _, _, n in ev)

    def pct(xs: list[int], q: float) -> float:
        return xs[min(len(xs) - 1, int(len(xs) * q))] / 1e3 if xs else float("nan")

    return {"per_s": len(ev) / span * 1e9, "busy": busy / span, "p50": pct(durations, 0.5), "p90": pct(durations, 0.9),
            "gap50": pct(gaps, 0.5), "gap90": pct(gaps, 0.9), "bytes": sizes[len(sizes) // 2]}  # fmt: skip


def _timeline_row(name: str, threads: int, st: dict[str, float]) -> str:
    if not st:
        return f"{name:28} {threads:7}  (fewer than two msyncs)"
    return (f"{name:28} {threads:7} {st['per_s']:9.0f} {st['busy'] * 100:9.0f}% {st['p50']:7.0f} / {st['p90']:4.0f}"
            f" {st['gap50']:7.0f} / {st['gap90']:4.0f} {st['bytes']:9.0f}")  # fmt: skip


def bench_sync_flush(args: argparse.Namespace) -> None:
    print(f"\n{'sync flush':28} {'threads':>7} {'msgs/s':>9} {'flushes':>8} {'msgs/flush':>10} {'cpu us/msg':>10}"
          f" {'x bare':>7} {'x bare gc':>9} {'x RocketMQ':>10}")
    results = {}
    bare = {}
    timelines: list[str] = []
    ledgers: list[str] = []
    for threads in args.threads:
        rocketmq = ROCKETMQ_SYNC_FLUSH.get(threads)
        bare[threads] = bare_sync_loop(args.dir, threads, min(args.seconds, 3.0))
        print(f"{'  bare append + msync':28} {threads:7} {bare[threads]:9.0f} {'':8} {'':10} {'':10} {1:7.2f}")
        with msync_timeline() as events, cpu_ledger() as gc_ledger:
            gc_rate, gc_per_flush, unforced = bare_group_commit(args.dir, threads, min(args.seconds, 3.0))
        timelines.append(_timeline_row("  bare Python group commit", threads, timeline_stats(events)))
        ledgers.append(_ledger_row("  bare Python group commit", threads, gc_ledger,
                                   max(gc_rate * min(args.seconds, 3.0), 1.0)))
        if unforced:
            raise RuntimeError(f"bare group commit acknowledged {unforced} appends before forcing them")
        print(f"{'  bare Python group commit':28} {threads:7} {gc_rate:9.0f} {'':8} {gc_per_flush:10.1f} {'':10} "
              f"{gc_rate / bare[threads]:7.2f} {1:9.2f}")
        root = os.path.join(tempfile.mkdtemp(dir=args.dir, prefix="rmqlab-bench-"), "store")
        config = MessageStoreConfig(store_path_root_dir=root, flush_disk_type="SYNC_FLUSH",
                                    mapped_file_size_commit_log=256 << 20)
        body = os.urandom(1024 - 200)
        try:
            with MessageStore.open(root, config, threaded=True) as store, msync_timeline() as events:
                stop = time.perf_counter() + args.seconds
                counts = [0] * threads

                def producer(i: int, store: MessageStore = store, stop: float = stop, body: bytes = body,
                             counts: list[int] = counts) -> None:
                    msg = Message("SyncTopic", body, tags="TagA", keys=[f"t{i}"], queue_id=i % 4)
                    while time.perf_counter() < stop:
                        if store.put_message(msg).ok:
                            counts[i] += 1

                ts = [threading.Thread(target=producer, args=(i,)) for i in range(threads)]
                with cpu_ledger() as ledger:
                    c0 = time.process_time()
                    t0 = time.perf_counter()
                    for t in ts:
                        t.start()
                    for t in ts:
                        t.join()
                    elapsed = time.perf_counter() - t0
                    cpu = time.process_time() - c0  # every thread: producers, group commit, reput...
                flushes = store.group_commit.flushes if store.group_commit else 0
                timelines.append(_timeline_row("  store, group commit", threads, timeline_stats(events)))
            n = max(sum(counts), 1)
            ledgers.append(_ledger_row("  store, group commit", threads, ledger, n))
            rate = sum(counts) / elapsed
            results[threads] = rate
            per_flush = sum(counts) / max(flushes, 1)
            versus = f"{rate / rocketmq:10.2f}" if rocketmq else f"{'':10}"
            print(f"{'  store, group commit':28} {threads:7} {rate:9.0f} {flushes:8} {per_flush:10.1f} "
                  f"{cpu / n * 1e6:10.0f} {rate / bare[threads]:7.2f} {rate / gc_rate:9.2f} {versus}")
        finally:
            shutil.rmtree(os.path.dirname(root), ignore_errors=True)
    if len(results) >= 2:
        lo, hi = min(results), max(results)
        print(f"group commit: {hi} threads / {lo} thread = {results[hi] / results[lo]:.2f}x "
              "(RocketMQ 4.9.8: ~4.3 k and ~14.8 k msgs/s)")
    print(f"\n{'msync timeline':28} {'threads':>7} {'msyncs/s':>9} {'disk busy':>10} {'msync p50/p90 us':>16}"
          f" {'gap p50/p90 us':>14} {'bytes p50':>9}")
    for line in timelines:
        print(line)
    print("msync: call to return, the GIL taken back included; gap: from the end of one msync to the start of"
          " the next, when none was under way")
    print(f"\n{'cpu per message':28} {'threads':>7} {'user us':>8} {'sys us':>8} {'faults':>7} {'switches':>8}"
          f"   {'reput u/s us':>13}   {'group commit':>13}")
    for line in ledgers:
        print(line)
    print("user/sys: the whole process; faults: minor page faults; switches: voluntary context switches;"
          " reput, group commit: those service threads alone (user / sys us per message)")


def bench_reput_rounds(args: argparse.Namespace, rounds: int = 1500, runs: int = 5) -> None:
    per = args.round_records
    best = float("inf")
    for _ in range(runs):
        root = os.path.join(tempfile.mkdtemp(dir=args.dir, prefix="rmqlab-bench-"), "store")
        config = MessageStoreConfig(store_path_root_dir=root, mapped_file_size_commit_log=256 << 20)
        body = os.urandom(1024 - 200)
        msgs = [Message("SyncTopic", body, tags="TagA", keys=[f"t{i}"], queue_id=i % 4) for i in range(per)]
        store = MessageStore.open(root, config, clock=ManualClock(), threaded=False)
        reput = store.reput
        cpu = 0.0
        n = 0
        gc.disable()
        try:
            for _r in range(rounds):
                for m in msgs:
                    if not store.put_message(m).ok:
                        raise RuntimeError("put failed")
                store.clock.advance(1)  # type: ignore[attr-defined]
                c0 = time.thread_time()
                n += reput.run_once()
                cpu += time.thread_time() - c0
        finally:
            gc.enable()
            store.shutdown()
            shutil.rmtree(os.path.dirname(root), ignore_errors=True)
        if n != rounds * per:
            raise RuntimeError(f"dispatched {n} of {rounds * per}")
        best = min(best, cpu / n * 1e6)
    print(f"reput, rounds of {per}: {best:.2f} us thread CPU per record (best of {runs} x {rounds} rounds)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mb", type=int, default=256, help="CommitLog bytes to write for the recovery bench")
    p.add_argument("--gib", type=float, default=0, help="write this many GiB instead (the issue's figure: 1)")
    p.add_argument("--threads", type=int, nargs="+", default=[1, 8])
    p.add_argument("--seconds", type=float, default=5.0, help="duration of each sync-flush run")
    p.add_argument("--dir", default=None, help="where to write (default: the system temp dir)")
    p.add_argument("--repeat", type=int, default=2, help="recovery runs per row (best is shown)")
    p.add_argument("--skip-recovery", action="store_true")
    p.add_argument("--skip-sync", action="store_true")
    p.add_argument("--reput-rounds", action="store_true", help="only the reput small-round CPU row")
    p.add_argument("--round-records", type=int, default=8, help="records per round for --reput-rounds")
    args = p.parse_args()
    if args.reput_rounds:
        bench_reput_rounds(args)
        return
    if not args.skip_recovery:
        bench_recovery(args)
    if not args.skip_sync:
        bench_sync_flush(args)


if __name__ == "__main__":
    main()
