"""SIGKILL a writing store (subprocess, real background services), reopen, compare with the acks.

A kill keeps the page cache, so every acknowledged put that reached the mapping survives:
SYNC_FLUSH and ASYNC_FLUSH lose nothing acknowledged; with the transient store pool the
acknowledged-but-uncommitted tail lives in process memory and is lost. In every mode what
survives is a consistent prefix: no hole before the recovered end, every CQ unit points at its
record, every record is in its CQ, and the index finds every key of a re-dispatched message.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from rmqlab.faults import CRASH_POINTS
from rmqlab.testing.crash import (
    CrashReport,
    WriterSpec,
    read_acks,
    reopen_and_check,
    run_writer_and_kill,
    writer_config,
)

MODES = [("ASYNC", False), ("SYNC", False), ("ASYNC", True)]
MODE_IDS = ["async", "sync", "async_tsp"]
KILLS: Counter[str] = Counter()


def _check(spec: WriterSpec, report: CrashReport, *, context: str) -> None:
    plan = report.plan
    where = f"{context}: {report.summary()}"
    assert plan.mode == "abnormal" or (plan.mode == "empty" and report.acked == 0), where
    assert report.consistent, f"{where}\n" + "\n".join(report.problems[:10])
    assert not report.changed, f"{where}\n{report.changed[:3]}"
    # A consistent prefix: whatever was lost lies at or after the recovered end.
    holes = [a for a in report.lost if a.offset < plan.process_offset]
    assert not holes, f"{where}: lost below the recovered end {holes[:3]}"
    if not spec.transient_store_pool:
        assert not report.lost, f"{where}: acknowledged and lost {report.lost[:3]}"
    # Index: keys of messages recovery re-dispatched are all found. Messages before the
    # recovery start keep their keys only if their index file survived (RocketMQ 3868/8007).
    start = plan.dispatch_from if plan.dispatch_from is not None else 0
    late = [(off, key) for off, key in report.index_missing if off >= start]
    assert not late, f"{where}: index misses keys after the recovery start {start}: {late[:5]}"


def _kill_and_check(spec: WriterSpec, **kill: Any) -> CrashReport:
    result = run_writer_and_kill(spec, **kill)
    assert result.killed, f"{spec} {kill}: writer not killed ({result.how}, rc={result.returncode}):\n{result.stderr}"
    KILLS[f"{spec.flush_mode}{'+TSP' if spec.transient_store_pool else ''}"] += 1
    report = reopen_and_check(spec.store_dir, read_acks(spec.ack_log), writer_config(spec))
    _check(spec, report, context=f"seed={spec.seed} {kill}")
    return report


@pytest.mark.slow
@pytest.mark.parametrize("commit_log_size", [64 * 1024, 256 * 1024], ids=["cl64k", "cl256k"])
@pytest.mark.parametrize(("flush_mode", "tsp"), MODES, ids=MODE_IDS)
def test_sigkill_after_random_delay(make_spec: Any, flush_mode: str, tsp: bool, commit_log_size: int) -> None:
    """Six kills per mode and size, at random moments (seeded; the seed is in every message); the
    last two recover as RocketMQ 5.3.3 does.

    Every other run uses a store clock 300x faster, so abnormal recovery starts at a later file
    (the checkpoint's min timestamp is then behind the newest files) and index files dropped at
    load (RocketMQ 3868/8007) are rebuilt only from there.
    """
    rng = random.Random(f"{flush_mode}{tsp}{commit_log_size}")
    for n in range(6):
        seed = rng.randrange(1 << 30)
        spec = make_spec(flush_mode=flush_mode, transient_store_pool=tsp, commit_log_size=commit_log_size,
                         cq_units=64, seed=seed, count=1200, clock_speed=300.0 if n % 2 else 1.0,
                         rocketmq_version="5.3.3" if n >= 4 else "4.9.8")
        _kill_and_check(spec, delay_s=rng.uniform(0.02, 0.5))


@pytest.mark.slow
@pytest.mark.parametrize(("flush_mode", "tsp"), MODES, ids=MODE_IDS)
def test_sigkill_with_concurrent_producers(make_spec: Any, flush_mode: str, tsp: bool) -> None:
    """Four producer threads put at once (SYNC_FLUSH: their flushes grouped), four kills per
    mode (two with RocketMQ 4.9.8's recovery, two with 5.3.3's), mid-write: each kill leaves a
    few records written and never acknowledged (the puts in flight). The same guarantees as one
    producer, with acks logged in the order puts returned."""
    rng = random.Random(f"producers{flush_mode}{tsp}")
    interleaved = []
    for n in range(4):
        spec = make_spec(flush_mode=flush_mode, transient_store_pool=tsp, commit_log_size=64 * 1024,
                         cq_units=64, seed=rng.randrange(1 << 30), count=6000, producers=4,
                         clock_speed=300.0 if n % 2 else 1.0, rocketmq_version="5.3.3" if n >= 2 else "4.9.8")
        report = _kill_and_check(spec, delay_s=rng.uniform(0.05, 0.4))
        offsets = [a.offset for a in read_acks(spec.ack_log)]
        interleaved.append(report.acked >= 20 and offsets != sorted(offsets))
    # the log really interleaves the producers (not in CommitLog order) in some run: on a loaded
    # machine a SYNC_FLUSH run can serialise its producers (each flush done before the next put),
    # as one CI run did (1,047 acks in order), which says nothing of the guarantees checked above
    assert any(interleaved), interleaved


def _nth(point: str, rng: random.Random) -> int:
    if point in ("after_append_before_dispatch", "after_cq_put_before_index_put"):
        return rng.randrange(20, 300)
    if point in ("before_commit_log_flush", "after_commit_log_flush"):
        return rng.randrange(3, 40)
    if point == "index_roll":
        return rng.randrange(1, 4)
    return rng.randrange(2, 6)  # checkpoint flushes: every 100 ms, the first before any put


@pytest.mark.slow
@pytest.mark.parametrize("point", sorted(CRASH_POINTS))
@pytest.mark.parametrize(("flush_mode", "tsp"), MODES, ids=MODE_IDS)
def test_sigkill_at_crash_point(make_spec: Any, flush_mode: str, tsp: bool, point: str) -> None:
    """The writer kills itself at a named point (``RMQLAB_CRASH_AT=point:N``)."""
    rng = random.Random(f"{flush_mode}{tsp}{point}")
    spec = make_spec(flush_mode=flush_mode, transient_store_pool=tsp, commit_log_size=64 * 1024,
                     cq_units=64, seed=rng.randrange(1 << 30), count=1200)
    _kill_and_check(spec, crash_at=f"{point}:{_nth(point, rng)}")


def test_sync_kill_keeps_acknowledged_messages_queryable(make_spec: Any) -> None:
    """A quick one that always runs: SYNC_FLUSH, kill mid-write, every ack readable by key."""
    spec = make_spec(flush_mode="SYNC", seed=7, count=400)
    report = _kill_and_check(spec, delay_s=0.3, after_first_ack=True)  # 0.3 s after READY missed it on a slow disk
    assert report.present, "nothing was acknowledged before the kill"
    assert len(report.present) == report.acked


def test_kill_counts(request: pytest.FixtureRequest) -> None:
    """Report how many kills each mode took (runs last in this module)."""
    request.node.user_properties.append(("kills", dict(KILLS)))
    print("kills per mode:", dict(KILLS))
