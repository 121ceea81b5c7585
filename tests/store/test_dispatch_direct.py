"""Small reput rounds dispatch hinted records straight to the CQ store and the index (no
DispatchRequest): the files must be byte-identical to dispatching each record's request."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from rmqlab.clock import ManualClock
from rmqlab.store import dispatch
from rmqlab.store.dispatch import ReputMessageService
from rmqlab.store.message_store import MessageStore
from tests.store.test_dispatch_batch import _config, _message, _snapshot


def _run(root: Path, seed: int, direct: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, bytes], int]:
    """Random workload, every round one by one; returns the files and how many records went
    the direct way."""
    monkeypatch.setattr(dispatch, "SMALL_ROUND_RECORDS", 1 << 30)
    monkeypatch.setattr(dispatch, "SMALL_ROUND_BYTES", 1 << 40)
    if not direct:  # the request path: as with a custom dispatcher or an event subscriber
        monkeypatch.setattr(ReputMessageService, "batching", lambda self: False)
    direct_count = 0
    rng = random.Random(seed)
    version = "4.9.8" if seed % 2 == 0 else "5.3.3"
    config = _config(root, version, rng.choice([1, 2, 7, 64]), rng.choice([2, 3, 5, 17, 256]),
                     rng.choice([1, 3, 64]))
    store = MessageStore.open(str(root), config, clock=ManualClock(), threaded=False)
    try:
        for i in range(rng.randint(50, 300)):
            r = store.put_message(_message(rng, i))
            assert r.ok
            store.clock.advance(rng.choice([0, 1, 700, 1500]))  # type: ignore[attr-defined]
            if rng.random() < 0.3:  # lone records without hints: parsed, between direct ones
                store.commit_log.dispatch_hints.pop(r.wrote_offset, None)
            if rng.random() < 0.2:
                store.step()
        store.wait_dispatched()
        store.checkpoint.flush()
        direct_count = store.reput.direct_records
    finally:
        store.shutdown()
        monkeypatch.undo()
    return _snapshot(root), direct_count


@pytest.mark.parametrize("seed", range(6))
def test_direct_small_rounds_equal_dispatching_requests(
        tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    direct_files, n_direct = _run(tmp_path / "direct", seed, True, monkeypatch)
    request_files, _ = _run(tmp_path / "requests", seed, False, monkeypatch)
    assert n_direct > 10, "the direct path was not taken"
    assert direct_files.keys() == request_files.keys()
    for name in direct_files:
        assert direct_files[name] == request_files[name], name
