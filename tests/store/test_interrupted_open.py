"""An open interrupted part-way (a notebook's interrupt button while recovery runs) leaves a
store that opens again in the same process, with the same answers, and no service thread left
running.

Found by interrupting ``MessageStore.open`` at every n-th line it runs: an interrupt right after
the lock was taken left it held by a store nothing referred to, so every later open in that
kernel said "store is locked by another writer"; an interrupt during ``start()`` of a threaded
store left its service threads running on files the next open would write too.
"""

from __future__ import annotations

import shutil
import sys
import threading
from pathlib import Path

import pytest

from rmqlab import Message, MessageStore, MessageStoreConfig
from rmqlab.errors import StoreLocked
from tests.store.trace_interrupts import Interrupt, NthLineTracer, store_answers


def _crashed_store(root: Path) -> MessageStoreConfig:
    """A store left as a killed broker leaves it: ``abort`` present, the tail not dispatched."""
    config = MessageStoreConfig.small(str(root))
    store = MessageStore.open(root, config, threaded=False)
    for i in range(160):
        store.put_message(Message(f"T{i % 2}", b"x" * (100 + i * 7 % 900), keys=[f"k{i}"], queue_id=i % 3))
        if i == 120:
            store.step()
    store.commit_log.mapped_file_queue.flush(0)
    store._release()  # no shutdown: as after a kill (a stepped store runs no threads)
    return config


def _open(root: Path, config: MessageStoreConfig, threaded: bool, tracer: NthLineTracer | None = None) -> MessageStore:
    previous = sys.gettrace()  # coverage's, a debugger's: put back after
    if tracer is not None:
        sys.settrace(tracer)
    try:
        return MessageStore.open(root, config.with_(store_path_root_dir=str(root)), threaded=threaded)
    finally:
        sys.settrace(previous)


@pytest.mark.parametrize("threaded", [False, True], ids=["stepped", "threaded"])
def test_open_interrupted_anywhere_opens_again_with_the_same_answers(tmp_path: Path, threaded: bool) -> None:
    src = tmp_path / "src"
    config = _crashed_store(src)
    shutil.copytree(src, tmp_path / "ref")
    counter = NthLineTracer(None)
    store = _open(tmp_path / "ref", config, threaded, counter)
    want = store_answers(store, 160, 3)
    store.shutdown()
    lines = counter.n
    assert lines > 1000, lines
    # every line of the first 150 (the lock is taken there) and of the last 150 (start(): the
    # service threads), ~60 spread over the rest
    points = [*range(1, 150), *range(150, lines - 150, max(1, lines // 60)), *range(max(150, lines - 150), lines + 1)]
    before = {t.ident for t in threading.enumerate()}
    for at in points:
        run = tmp_path / "run"
        shutil.rmtree(run, ignore_errors=True)
        shutil.copytree(src, run)
        tracer = NthLineTracer(at)
        try:
            _open(run, config, threaded, tracer).shutdown()  # a line of open only the counting run ran
        except Interrupt:
            pass
        left = [t.name for t in threading.enumerate() if t.is_alive() and t.ident not in before]
        assert not left, f"threads left at line {at}: {left}"
        try:
            store = _open(run, config, threaded)
        except StoreLocked as e:
            raise AssertionError(f"interrupted at line {at}: {e}") from None
        try:
            assert store_answers(store, 160, 3) == want, f"interrupted at line {at}"
        finally:
            store.shutdown()
