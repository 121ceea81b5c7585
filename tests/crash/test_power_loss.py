"""Power loss: what was flushed survives, what was not is gone (``simulate_power_loss``).

The store runs in process, stepped, on a ManualClock; at a random moment the harness abandons it
and rewrites the files to the worst case a power cut allows (every byte past each file's
flushed position zeroed, index files as of their last flush). SYNC_FLUSH acknowledges a put
only after it is flushed, so nothing acknowledged may be lost; ASYNC_FLUSH may lose exactly what
was written but not yet flushed, and the recovery plan's ``process_offset`` tells how much.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from rmqlab.clock import ManualClock
from rmqlab.store.message_store import MessageStore
from rmqlab.testing.crash import (
    Ack,
    CrashReport,
    IndexFlushRecorder,
    PowerLossReport,
    _acks_for,
    make_message,
    reopen_and_check,
    simulate_power_loss,
    writer_config,
)

MODES = [("ASYNC", False), ("SYNC", False), ("ASYNC", True)]
MODE_IDS = ["async", "sync", "async_tsp"]


def _run_and_cut(spec: Any, count: int, ms_per_put: int) -> tuple[list[Ack], PowerLossReport, CrashReport]:
    rng = random.Random(spec.seed)
    clock = ManualClock(1_790_000_000_000)
    config = writer_config(spec)
    acks: list[Ack] = []
    with IndexFlushRecorder() as recorder:
        store = MessageStore.open(spec.store_dir, config, clock=clock, threaded=False)
        for i in range(count):
            m = make_message(spec.seed, i, rng)
            r = store.put_message(m)
            if r.ok:
                acks += _acks_for(r, [(i, m)])
            clock.advance(ms_per_put)
            if rng.random() < 0.3:
                store.step()
        cut = simulate_power_loss(store, recorder)
    report = reopen_and_check(spec.store_dir, acks, config)
    return acks, cut, report


@pytest.mark.parametrize("ms_per_put", [1, 40], ids=["dense", "spread"])
@pytest.mark.parametrize(("flush_mode", "tsp"), MODES, ids=MODE_IDS)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_power_loss(make_spec: Any, flush_mode: str, tsp: bool, seed: int, ms_per_put: int) -> None:
    spec = make_spec(flush_mode=flush_mode, transient_store_pool=tsp, seed=seed * 1000 + ms_per_put)
    count = random.Random(seed).randrange(150, 900)
    acks, cut, report = _run_and_cut(spec, count, ms_per_put)
    plan = report.plan
    where = f"{report.summary()} flushed_where={cut.flushed_where} max={cut.max_offset}"
    assert report.consistent, f"{where}\n" + "\n".join(report.problems[:10])
    assert not report.changed, where
    durable = [a for a in acks if a.end <= cut.flushed_where]
    lost_durable = [a for a in report.lost if a.end <= cut.flushed_where]
    assert not lost_durable, f"{where}: flushed and lost {lost_durable[:3]}"
    if flush_mode == "SYNC":
        assert not report.lost, f"{where}: SYNC_FLUSH lost acknowledged messages"
    # The plan says how much was lost: the recovered end is the flushed end (or the blank
    # record just before it, when the flushed end is a file boundary and the next file is gone).
    assert plan.process_offset <= cut.flushed_where, where
    if durable:
        assert plan.process_offset >= durable[-1].end, where
    lost_bytes = (acks[-1].end if acks else 0) - plan.process_offset
    assert lost_bytes >= sum(a.size for a in report.lost), where
    start = plan.dispatch_from or 0
    assert not [m for m in report.index_missing if m[0] >= start], where
