"""An open interrupted part-way (a notebook's interrupt button while recovery runs) leaves a
store that opens again in the same process, with the same answers, and no service thread left
running.

Found by interrupting ``MessageStore.open`` at every n-th line it runs: an interrupt right after
the lock was taken left it held by a store nothing referred to, so every later open in that
kernel said "store is locked by another writer"; an interrupt during ``start()`` of a threaded
store left its service threads running on files the next open would write too.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

import rmqlab
from rmqlab import Message, MessageStore, MessageStoreConfig
from rmqlab.errors import StoreLocked
from tests.store.trace_interrupts import Interrupt, no_real_interrupt_here

RMQLAB = os.path.dirname(rmqlab.__file__)


class _Tracer:
    """Count the rmqlab lines that run; raise :class:`Interrupt` at line ``at`` (None: count only)."""

    def __init__(self, at: int | None) -> None:
        self.at, self.n, self.fired = at, 0, False

    def __call__(self, frame: FrameType, event: str, arg: object) -> Any:
        code = frame.f_code  # not __del__: a collection may run one anywhere (its errors are only printed)
        return self._line if event == "call" and code.co_filename.startswith(RMQLAB) and code.co_name != "__del__" \
            else None

    def _line(self, frame: FrameType, event: str, arg: object) -> Any:
        if event == "line" and not no_real_interrupt_here(frame):
            self.n += 1
            if self.n == self.at:
                self.fired = True
                raise Interrupt
        return self._line


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


def _answers(store: MessageStore) -> dict[str, Any]:
    assert store.wait_dispatched()
    out: dict[str, Any] = {"max": store.get_max_phy_offset(), "min": store.get_min_phy_offset()}
    for t in ("T0", "T1"):
        for q in range(3):
            out[f"{t}/{q}"] = (store.get_min_offset_in_queue(t, q), store.get_max_offset_in_queue(t, q))
    # as sets: RocketMQ's recovery may index the last record twice, and whether it does depends
    # on where the index stood when the process stopped
    out["keys"] = [sorted({m.commit_log_offset for m in store.query_message(f"T{i % 2}", f"k{i}").messages})
                   for i in range(0, 160, 3)]
    return out


def _open(root: Path, config: MessageStoreConfig, threaded: bool, tracer: _Tracer | None = None) -> MessageStore:
    if tracer is not None:
        sys.settrace(tracer)
    try:
        return MessageStore.open(root, config.with_(store_path_root_dir=str(root)), threaded=threaded)
    finally:
        sys.settrace(None)


@pytest.mark.parametrize("threaded", [False, True], ids=["stepped", "threaded"])
def test_open_interrupted_anywhere_opens_again_with_the_same_answers(tmp_path: Path, threaded: bool) -> None:
    src = tmp_path / "src"
    config = _crashed_store(src)
    shutil.copytree(src, tmp_path / "ref")
    counter = _Tracer(None)
    store = _open(tmp_path / "ref", config, threaded, counter)
    want = _answers(store)
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
        tracer = _Tracer(at)
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
            assert _answers(store) == want, f"interrupted at line {at}"
        finally:
            store.shutdown()
