"""Cleanup interrupted at every line (a notebook's interrupt button while ``store.step()``
deletes expired files) leaves nothing stuck: stepping on, the store deletes what an
uninterrupted run deletes, every file it keeps is usable, and every message it keeps is found.

Found by interrupting a stepped store at random moments (``PyThreadState_SetAsyncExc``) while
its clock made files expire: an interrupt inside ``MappedFile.release`` after the count reached
zero but before the unmap left the first CommitLog file shut down and never deletable. Every
later cleanup stopped at it (the disk would fill up), and after a restart it came back with
messages whose queue units and index keys were gone. Here a trace function raises at one line
of one function at a time, so every place between two statements is tried. The same for
``MappedFile.flush`` and ``commit``, which hold the file while they work.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

from rmqlab import Message, MessageStore, MessageStoreConfig
from rmqlab.clock import ManualClock
from rmqlab.files.mapped_file import MappedFile
from rmqlab.files.mapped_file_queue import MappedFileQueue
from rmqlab.files.transient_store_pool import TransientStorePool
from rmqlab.inspect import open_snapshot, verify
from rmqlab.store.cleanup import CleanCommitLogService, CleanConsumeQueueService
from rmqlab.store.consume_queue import ConsumeQueue
from rmqlab.store.index_file import IndexFile
from rmqlab.store.index_service import IndexService
from tests.store.trace_interrupts import Interrupt, LineTracer, assert_acked_found, run_traced

TARGETS: list[Callable[..., Any]] = [
    MappedFile.flush, MappedFile.shutdown, MappedFile.release, MappedFile._cleanup, MappedFile._unmap,
    MappedFile.destroy,
    MappedFileQueue.delete_expired_file_by_offset, MappedFileQueue.retry_delete_first_file,
    MappedFileQueue.delete_files,
    CleanCommitLogService.run_once, CleanCommitLogService._execute, CleanCommitLogService._redelete_hanged_file,
    CleanConsumeQueueService.run_once, ConsumeQueue.delete_expired_file, ConsumeQueue.correct_min_offset,
    IndexService.delete_expired_file, IndexFile.destroy,
]
CODES: dict[CodeType, str] = {f.__code__: f.__qualname__ for f in TARGETS}
# The clock moves 10 minutes a step and files are written within seconds of real time, so from
# step 5 on every file but the last has expired: each round deletes what it may (10 CommitLog
# files at most), later rounds what is left (and what a round cut short left).
STEPS = 16
TRACED = range(5, 11)  # the steps that delete files
ALL_HOURS = ";".join(f"{h:02d}" for h in range(24))


def _files(root: Path) -> list[str]:
    """The CommitLog and ConsumeQueue files below ``root`` (relative paths), and as many
    ``index/#i`` as there are index files (named by the time they were made: a run's own)."""
    out = []
    for sub in ("commitlog", "consumequeue"):
        for dirpath, _dirs, names in os.walk(root / sub):
            out += [os.path.relpath(os.path.join(dirpath, n), root) for n in names]
    return sorted(out) + [f"index/#{i}" for i in range(len(os.listdir(root / "index")))]


def _run(root: Path, tracer: LineTracer | None) -> tuple[list[str], int]:
    """Put and step a small store whose files expire an hour after they were written; the
    tracer is on for the steps that delete files. Then check that every file left is usable
    and every message left is found. Returns the files left and the CommitLog's min offset."""
    config = MessageStoreConfig.small(
        str(root), mapped_file_size_commit_log=16 * 1024, mapped_file_size_consume_queue=16 * 20,
        delete_when=ALL_HOURS, file_reserved_time=1, delete_commit_log_files_interval=0,
        delete_consume_queue_files_interval=0, redelete_hanged_file_interval=0,
        destroy_mapped_file_interval_forcibly=1000,
    )
    # 5 minutes ahead of the files' real mtimes: at step 5 (the clock 65 min on) every file
    # written so far has expired whether the run took 1 ms or 4 min. Started at the real time,
    # a file whose mtime fell in the clock's first millisecond expired a step earlier than one
    # written a millisecond later, so which cleanup lines ran changed from run to run: CI once
    # saw CleanConsumeQueueService's "min offset has not moved" return in the reference run
    # and not in the run meant to interrupt it. Now every traced round deletes something.
    clock = ManualClock(int(time.time() * 1000) + 5 * 60_000)
    store = MessageStore.open(root, config, threaded=False, clock=clock, disk_probe=lambda path: 0.1)
    acked: list[tuple[str, int, int, int, str]] = []
    n = 0
    try:
        for s in range(STEPS):
            for _ in range(30):
                topic, qid, key = f"T{n % 2}", n % 3, f"k{n}"
                r = store.put_message(Message(topic, b"m" * 400, tags="t", keys=[key], queue_id=qid))
                assert r.ok
                acked.append((topic, qid, r.queue_offset, r.wrote_offset, key))
                n += 1
            clock.advance(10 * 60_000)
            if tracer is not None and s in TRACED:
                run_traced(tracer, store.step)
            else:
                store.step()
        assert store.wait_dispatched()
        live = list(store.commit_log.mapped_file_queue.mapped_files)
        live += [f.mapped_file for f in store.index_service._files]
        for _t, _q, cq in store.consume_queue_store.all_queues():
            live += cq.mapped_file_queue.mapped_files
        for mf in live:  # usable, on disk, and held by nobody (a leaked hold delays its deletion)
            assert mf.is_available(), mf.file_name
            assert os.path.exists(mf.file_name), mf.file_name
            assert mf.ref_count == 1, (mf.file_name, mf.ref_count)
        low = store.get_min_phy_offset()
        assert_acked_found(store, acked, low)
    finally:
        store.shutdown()
    with open_snapshot(root) as snap:
        assert [f.to_dict() for f in verify(snap) if f.severity == "error"] == []
    return _files(root), low


def test_cleanup_interrupted_at_every_line(tmp_path: Path) -> None:
    tracer = LineTracer(CODES, None)
    files, low = _run(tmp_path / "reference", tracer)
    assert low > 0
    assert "commitlog/00000000000000000000" not in files
    lines = sorted(tracer.seen, key=lambda cl: (CODES[cl[0]], cl[1]))
    hit = {CODES[code] for code, _ in lines}
    assert {"CleanCommitLogService._execute", "MappedFile.destroy", "IndexService.delete_expired_file",
            "MappedFileQueue.delete_expired_file_by_offset", "MappedFile._unmap"} <= hit, sorted(hit)
    missed = []
    for i, target in enumerate(lines):
        tracer = LineTracer(CODES, target)
        try:
            got = _run(tmp_path / f"run-{i}", tracer)
        except AssertionError as e:
            raise AssertionError(f"interrupted at {CODES[target[0]]} line {target[1]}: {e}") from None
        assert got == (files, low), f"interrupted at {CODES[target[0]]} line {target[1]}"
        if not tracer.fired:
            missed.append(f"{CODES[target[0]]} line {target[1]}")
    assert missed == []  # every line found was interrupted once


def _flush_and_commit(path: Path, target: tuple[CodeType, int] | None, seen: set[tuple[CodeType, int]]) -> bool:
    """Append to a file written through a transient pool buffer, commit and flush it with the
    trace on (raising at ``target``), then check that both go on to the end with every byte
    right, and that the file can still be destroyed.

    An interrupt may leave a hold behind: one landing as ``finally:`` calls ``release()`` (at
    the callee's first instruction, where CPython checks for one) cannot be caught in Python.
    RocketMQ's answer to a holder that never releases is the forced destroy
    (``destroy_mapped_file_interval_forcibly``), so that is what is checked."""
    pool = TransientStorePool(1, 8192)
    pool.init()
    mf = MappedFile(str(path), 8192, transient_store_pool=pool)
    tracer = LineTracer(CODES, target)
    codes = {MappedFile.flush.__code__, MappedFile.commit.__code__, MappedFile._commit0.__code__}

    def trace(frame: FrameType, event: str, arg: object) -> Any:
        return tracer.line if event == "call" and frame.f_code in codes else None

    previous = sys.gettrace()  # coverage's, a debugger's: put back after
    try:
        for round_ in range(3):
            assert mf.append_message(bytes([round_ + 1]) * 1000)
            sys.settrace(trace)
            try:
                mf.commit(0)
                mf.flush(0)
            except Interrupt:
                pass
            finally:
                sys.settrace(previous)
        assert mf.ref_count in (1, 2)  # its own, and at most the one hold the interrupt left
        assert mf.commit(0) == mf.flush(0) == 3000
        with open(path, "rb") as f:
            assert f.read(3000) == b"".join(bytes([r + 1]) * 1000 for r in range(3))
        now = 1_000_000
        gone = mf.destroy(1000, now) or mf.destroy(1000, now + 999) or mf.destroy(1000, now + 1000)
        assert gone
        assert not path.exists()
    finally:
        mf.close()
        pool.destroy()
    seen |= tracer.seen
    return tracer.fired


def test_flush_and_commit_interrupted_leave_no_hold(tmp_path: Path) -> None:
    seen: set[tuple[CodeType, int]] = set()
    _flush_and_commit(tmp_path / f"{0:020d}", None, seen)
    assert {code for code, _ in seen} == {MappedFile.flush.__code__, MappedFile.commit.__code__,
                                          MappedFile._commit0.__code__}
    lines = sorted(seen, key=lambda cl: (cl[0].co_name, cl[1]))
    fired = sum(_flush_and_commit(tmp_path / f"{8192 * (i + 1):020d}", target, set()) for i, target in enumerate(lines))
    assert fired == len(seen)
