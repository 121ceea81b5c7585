"""A shutdown interrupted part-way (a notebook's interrupt button while ``store.shutdown()``
flushes) leaves no service thread running and no lock held; calling ``shutdown()`` again
finishes it, and the store opens again in the same process with every message in place.
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


def _filled(root: Path, threaded: bool, tsp: bool) -> tuple[MessageStore, MessageStoreConfig]:
    """A running store with files of every kind rolled and the last puts not yet dispatched
    or flushed (what a shutdown has to finish)."""
    config = MessageStoreConfig.small(str(root), transient_store_pool_enable=tsp, transient_store_pool_size=4)
    store = MessageStore.open(root, config, threaded=threaded)
    for i in range(160):
        store.put_message(Message(f"T{i % 2}", b"x" * (100 + i * 7 % 900), keys=[f"k{i}"], queue_id=i % 3))
        if i == 120 and not threaded:
            store.step()
    return store, config


def _answers(store: MessageStore) -> dict[str, Any]:
    assert store.wait_dispatched()
    out: dict[str, Any] = {"max": store.get_max_phy_offset(), "min": store.get_min_phy_offset()}
    for t in ("T0", "T1"):
        for q in range(3):
            out[f"{t}/{q}"] = (store.get_min_offset_in_queue(t, q), store.get_max_offset_in_queue(t, q))
    out["keys"] = [sorted({m.commit_log_offset for m in store.query_message(f"T{i % 2}", f"k{i}").messages})
                   for i in range(160)]  # fmt: skip
    return out


def _shutdown(store: MessageStore, tracer: _Tracer) -> None:
    sys.settrace(tracer)
    try:
        store.shutdown()
    finally:
        sys.settrace(None)


@pytest.mark.parametrize(("threaded", "tsp"), [(False, False), (True, False), (True, True)],
                         ids=["stepped", "threaded", "threaded-pool"])
def test_shutdown_interrupted_anywhere_finishes_and_opens_again(tmp_path: Path, threaded: bool, tsp: bool) -> None:
    store, config = _filled(tmp_path / "ref", threaded, tsp)
    counter = _Tracer(None)
    _shutdown(store, counter)
    lines = counter.n
    assert lines > 100, lines
    store = MessageStore.open(tmp_path / "ref", config, threaded=threaded)
    assert store.last_exit_ok
    want = _answers(store)
    store.shutdown()
    before = {t.ident for t in threading.enumerate()}
    # every line of the first 100 (shutdown's own steps, the threads stopping) and of the last
    # 100 (checkpoint, abort file, lock), ~100 spread over the rest
    points = sorted({*range(1, 100), *range(100, lines - 100, max(1, (lines - 200) // 100)),
                     *range(max(100, lines - 100), lines + 1)})
    for at in points:
        run = tmp_path / "run"
        shutil.rmtree(run, ignore_errors=True)
        store, config = _filled(run, threaded, tsp)
        tracer = _Tracer(at)
        try:
            _shutdown(store, tracer)
        except Interrupt:
            pass
        store.shutdown()  # what a person does next: finishes it (or does nothing: it was done)
        left = [t.name for t in threading.enumerate() if t.is_alive() and t.ident not in before]
        assert not left, f"threads left at line {at}: {left}"
        try:
            store = MessageStore.open(run, config.with_(store_path_root_dir=str(run)), threaded=threaded)
        except StoreLocked as e:
            raise AssertionError(f"interrupted at line {at}: {e}") from None
        try:
            assert _answers(store) == want, f"interrupted at line {at}"
        finally:
            store.shutdown()


def test_shutdown_failing_stops_threads_releases_lock_and_recovers(tmp_path: Path) -> None:
    """An error part-way (a disk failing as the consume queues flush) is not an interrupt: the
    shutdown stops as a crash would, threads stopped and the lock released, and the next open
    recovers every message."""
    before = {t.ident for t in threading.enumerate()}
    store, config = _filled(tmp_path / "ref", True, False)
    want = _answers(store)

    def failing() -> None:
        raise OSError(5, "Input/output error")

    store.flush_consume_queue.shutdown = failing  # type: ignore[method-assign]
    with pytest.raises(OSError, match="Input/output"):
        store.shutdown()
    store.shutdown()  # done: nothing more to do
    left = [t.name for t in threading.enumerate() if t.is_alive() and t.ident not in before]
    assert not left
    store = MessageStore.open(tmp_path / "ref", config, threaded=True)
    try:
        assert not store.last_exit_ok  # abort stayed: recovered as after a crash
        assert _answers(store) == want
    finally:
        store.shutdown()
