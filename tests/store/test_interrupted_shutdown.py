"""A shutdown interrupted part-way (a notebook's interrupt button while ``store.shutdown()``
flushes) leaves no service thread running and no lock held; calling ``shutdown()`` again
finishes it, and the store opens again in the same process with every message in place.
"""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest

from rmqlab import Message, MessageStore, MessageStoreConfig
from rmqlab.errors import StoreLocked
from tests.store.trace_interrupts import NthLineTracer, run_traced, store_answers


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


@pytest.mark.parametrize(("threaded", "tsp"), [(False, False), (True, False), (True, True)],
                         ids=["stepped", "threaded", "threaded-pool"])
def test_shutdown_interrupted_anywhere_finishes_and_opens_again(tmp_path: Path, threaded: bool, tsp: bool) -> None:
    store, config = _filled(tmp_path / "ref", threaded, tsp)
    counter = NthLineTracer(None)
    run_traced(counter, store.shutdown)
    lines = counter.n
    assert lines > 100, lines
    store = MessageStore.open(tmp_path / "ref", config, threaded=threaded)
    assert store.last_exit_ok
    want = store_answers(store, 160)
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
        run_traced(NthLineTracer(at), store.shutdown)
        store.shutdown()  # what a person does next: finishes it (or does nothing: it was done)
        left = [t.name for t in threading.enumerate() if t.is_alive() and t.ident not in before]
        assert not left, f"threads left at line {at}: {left}"
        try:
            store = MessageStore.open(run, config.with_(store_path_root_dir=str(run)), threaded=threaded)
        except StoreLocked as e:
            raise AssertionError(f"interrupted at line {at}: {e}") from None
        try:
            assert store_answers(store, 160) == want, f"interrupted at line {at}"
        finally:
            store.shutdown()


def test_shutdown_failing_stops_threads_releases_lock_and_recovers(tmp_path: Path) -> None:
    """An error part-way (a disk failing as the consume queues flush) is not an interrupt: the
    shutdown stops as a crash would, threads stopped and the lock released, and the next open
    recovers every message."""
    before = {t.ident for t in threading.enumerate()}
    store, config = _filled(tmp_path / "ref", True, False)
    want = store_answers(store, 160)

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
        assert store_answers(store, 160) == want
    finally:
        store.shutdown()
