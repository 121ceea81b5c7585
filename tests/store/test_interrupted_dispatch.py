"""Dispatch interrupted at every line (a notebook's interrupt button while ``store.step()``
builds consume queues and index) leaves nothing unfindable: once the store steps again every
message is at its queue offset and found by its keys, and ``verify`` finds no broken chain.

Found by interrupting a stepped store at random moments (``PyThreadState_SetAsyncExc``): the
index could be left with slots naming items past its count, so the next put overwrote them and
pointed them at themselves (every older item of those chains lost to queries), and a consume
queue could count units as written before writing them (re-dispatch then skipped them).
Here a trace function raises at one line of one function at a time, so every place between two
statements is tried, in the three ways dispatch runs: batches, small rounds record by record,
and key by key while someone listens to the store's events.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from types import CodeType
from typing import Any

import pytest

from rmqlab import Message, MessageStore, MessageStoreConfig
from rmqlab.files.mapped_file import MappedFile
from rmqlab.inspect import open_snapshot, verify
from rmqlab.store.consume_queue import ConsumeQueue
from rmqlab.store.dispatch import ReputMessageService
from rmqlab.store.index_file import IndexFile
from rmqlab.store.index_service import IndexService
from tests.store.trace_interrupts import LineTracer, assert_acked_found, run_interrupted_at_event, run_traced

TARGETS: list[Callable[..., Any]] = [
    IndexFile.put_key, IndexFile.put_hashes, IndexFile.put_items,
    IndexService._build_one, IndexService._build_one_exact, IndexService.build_index_batch,
    IndexService.get_and_create_last_index_file,
    ConsumeQueue.put_message_position_info, ConsumeQueue._put_message_position_info_exact,
    ConsumeQueue.put_units, MappedFile.append_message,
    ReputMessageService.dispatch_batch, ReputMessageService._run_round, ReputMessageService._reput_one_by_one,
]
CODES: dict[CodeType, str] = {f.__code__: f.__qualname__ for f in TARGETS}
ROUNDS = {"batch": (40, 3), "small": (5, 12), "events": (5, 12)}  # mode: (messages per step, steps)


def _steps(root: Path, mode: str, tracer: LineTracer | None) -> None:
    """Put and step a small store (files of every kind roll); the tracer is on for the steps
    of the second half only. Then step with no tracer until dispatched, and check."""
    config = MessageStoreConfig.small(str(root), max_hash_slot_num=16, max_index_num=64,
                                      mapped_file_size_consume_queue=16 * 20)
    store = MessageStore.open(root, config, threaded=False)
    if mode == "events":
        store.bus.subscribe(lambda event: None)
    per_step, steps = ROUNDS[mode]
    acked: list[tuple[str, int, int, int, str]] = []
    n = 0
    try:
        for s in range(steps):
            for _ in range(per_step):
                topic, qid, key = f"T{n % 2}", n % 3, f"k{n}"
                if n % 4 == 3:
                    r = store.put_messages([Message(topic, b"b" * 100, keys=[f"{key}-{j}"], queue_id=qid)
                                            for j in range(3)])  # fmt: skip
                    key = f"{key}-0"
                else:
                    r = store.put_message(Message(topic, b"m" * 150, tags="t", keys=[key, f"g{n // 3}"], queue_id=qid))
                assert r.ok
                acked.append((topic, qid, r.queue_offset, r.wrote_offset, key))
                n += 1
            if tracer is not None and s >= steps // 2:
                run_traced(tracer, store.step)
            else:
                store.step()
        store.step()
        assert store.wait_dispatched()
        assert_acked_found(store, acked)
    finally:
        store.shutdown()
    with open_snapshot(root) as snap:
        assert [f.to_dict() for f in verify(snap) if f.severity == "error"] == []


def _lines(tmp_path: Path, mode: str) -> list[tuple[CodeType, int]]:
    tracer = LineTracer(CODES, None)
    _steps(tmp_path / f"discover-{mode}", mode, tracer)
    return sorted(tracer.seen, key=lambda cl: (CODES[cl[0]], cl[1]))


@pytest.mark.parametrize("mode", list(ROUNDS))
def test_dispatch_interrupted_at_every_line(tmp_path: Path, mode: str) -> None:
    lines = _lines(tmp_path, mode)
    hit = {CODES[code] for code, _ in lines}
    expected = {"batch": {"IndexFile.put_items", "ConsumeQueue.put_units", "ReputMessageService.dispatch_batch"},
                "small": {"IndexFile.put_hashes", "ConsumeQueue.put_message_position_info"},
                "events": {"IndexFile.put_key", "IndexService._build_one_exact"}}[mode]
    assert expected <= hit, sorted(hit)
    fired = 0
    for i, target in enumerate(lines):
        tracer = LineTracer(CODES, target)
        try:
            _steps(tmp_path / f"run-{i}", mode, tracer)
        except AssertionError as e:
            raise AssertionError(f"interrupted at {CODES[target[0]]} line {target[1]}: {e}") from None
        fired += tracer.fired
    assert fired == len(lines)  # every line found was interrupted once


@pytest.mark.parametrize("then", [0, 1, 2])
def test_an_index_file_creation_interrupted_anywhere_leaves_no_orphan_file(tmp_path: Path, then: int) -> None:
    # at each place CPython can raise an interrupt (EventInterrupter), and again ``then``
    # places later: an index file left on disk but never taken into the service stayed behind
    # for good (the next file is named by a later time), one more index file than RocketMQ has
    def index_files(root: Path) -> list[str]:
        return sorted(os.listdir(root / "index")) if (root / "index").exists() else []

    def fresh(root: Path) -> MessageStore:
        return MessageStore.open(root, MessageStoreConfig.small(str(root)), threaded=False)

    for name in ("warm", "count"):  # the first call ever runs more (lazy set-up): count the second
        store = fresh(tmp_path / name)
        events = run_interrupted_at_event(None, 0, store.index_service.get_and_create_last_index_file).n
        store.shutdown()
    assert events > 20, events
    for at in range(1, events + 1):
        root = tmp_path / f"run-{at}"
        store = fresh(root)
        try:
            hooks = run_interrupted_at_event(at, then, store.index_service.get_and_create_last_index_file)
            assert hooks.fired, at
            own = sorted(f.name for f in store.index_service._files)
            assert index_files(root) == own, (at, hooks.where)
            store.put_message(Message("T", b"x", keys=["k"]))  # the store goes on indexing
            store.step()
            assert [m.body for m in store.query_message("T", "k").messages] == [b"x"], (at, hooks.where)
        finally:
            store.shutdown()
        assert len(index_files(root)) == 1, (at, hooks.where)
        shutil.rmtree(root)
