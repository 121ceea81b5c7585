"""Producers of a threaded store wait while dispatch lags more than ``max_dispatch_behind_bytes``.

A put loop never blocks, so without the bound the reput thread barely got the GIL during it and
fell behind without limit (consumers saw nothing new until the loop ended). These tests put from
the test thread, as a notebook cell does, and sample the lag after every put.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from rmqlab import Message, MessageStore, MessageStoreConfig
from rmqlab.errors import ConfigError

BOUND = 256 << 10
BODY = bytes(1000)


def _open(root: Path, bound: int = BOUND, threaded: bool = True) -> MessageStore:
    config = MessageStoreConfig(store_path_root_dir=str(root), max_dispatch_behind_bytes=bound)
    return MessageStore.open(root, config, threaded=threaded)


def _msg(i: int) -> Message:
    return Message("LagTopic", BODY, tags="TagA", keys=[f"k{i}"], queue_id=i % 2, born_host=("10.0.0.1", 40000))


def test_single_puts_never_run_further_ahead_of_dispatch_than_the_bound(tmp_path: Path) -> None:
    store = _open(tmp_path)
    try:
        record = 0
        worst = 0
        for i in range(6_000):  # ~6.5 MB: 25 bounds
            r = store.put_message(_msg(i))
            assert r.ok
            record = max(record, r.wrote_bytes)
            worst = max(worst, store.dispatch_behind_bytes())
        # looked at every 64 puts, so at most 64 records past the bound
        assert worst <= BOUND + 64 * record
        assert store.dispatch_waits > 0
        assert store.wait_dispatched()
        assert store.get_max_offset_in_queue("LagTopic", 0) + store.get_max_offset_in_queue("LagTopic", 1) == 6_000
    finally:
        store.shutdown()


def test_batch_puts_never_run_further_ahead_of_dispatch_than_the_bound(tmp_path: Path) -> None:
    store = _open(tmp_path)
    try:
        worst = batch_bytes = 0
        for _ in range(0, 6_400, 32):
            r = store.put_messages([_msg(0)] * 32)
            assert r.ok
            batch_bytes = max(batch_bytes, r.wrote_bytes)
            worst = max(worst, store.dispatch_behind_bytes())
        assert worst <= BOUND + batch_bytes  # looked at after every batch
        assert store.dispatch_waits > 0
        assert store.wait_dispatched()
        assert store.get_max_offset_in_queue("LagTopic", 0) == 6_400
    finally:
        store.shutdown()


@pytest.mark.parametrize(("bound", "threaded"), [(0, True), (BOUND, False)], ids=["bound-0", "stepped"])
def test_no_wait_without_a_bound_or_in_a_stepped_store(tmp_path: Path, bound: int, threaded: bool) -> None:
    store = _open(tmp_path, bound, threaded)
    try:
        for i in range(1_000):  # ~1 MB: four bounds
            assert store.put_message(_msg(i)).ok
        assert store.dispatch_waits == 0
        assert store.wait_dispatched()
    finally:
        store.shutdown()


@pytest.mark.parametrize("stub", ["_reput", "run_once"], ids=["rounds-without-a-move", "no-rounds"])
def test_a_stalled_dispatch_does_not_hold_producers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    stub: str) -> None:
    """A stuck reput is waited for once, then producers go on without waiting until it moves
    again. Stuck: its rounds do not move it (``_reput`` made to dispatch nothing: two rounds),
    or it runs no round at all (``run_once`` replaced by one that neither takes the lock nor
    counts: half a second)."""
    store = _open(tmp_path)
    try:
        monkeypatch.setattr(store.reput, stub, lambda: 0)
        for i in range(1_500):  # ~1.6 MB: six bounds
            assert store.put_message(_msg(i)).ok
        assert store.dispatch_waits == 1
        assert store.dispatch_behind_bytes() > BOUND
    finally:
        monkeypatch.undo()
        store.shutdown()


def test_a_slow_round_is_waited_for_not_given_up_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A round that takes long (here: the first one sleeps 0.8 s inside, as a first round that
    creates queue and index files did on a busy CI machine) holds producers at the bound: an
    earlier 100 ms clock took it for a stuck reput and let them run ahead without limit."""
    store = _open(tmp_path)
    real = store.reput._reput
    slow = [True]

    def first_round_slow() -> int:
        if slow[0]:
            slow[0] = False
            time.sleep(0.8)
        return real()

    try:
        monkeypatch.setattr(store.reput, "_reput", first_round_slow)
        worst = record = 0
        for i in range(1_500):  # ~1.6 MB: six bounds
            r = store.put_message(_msg(i))
            assert r.ok
            record = max(record, r.wrote_bytes)
            worst = max(worst, store.dispatch_behind_bytes())
        assert not slow[0]
        assert worst <= BOUND + 64 * record
        assert store._stalled_at == -1
    finally:
        monkeypatch.undo()
        store.shutdown()


def test_a_negative_bound_is_refused() -> None:
    with pytest.raises(ConfigError, match="max_dispatch_behind_bytes"):
        MessageStoreConfig(max_dispatch_behind_bytes=-1)
