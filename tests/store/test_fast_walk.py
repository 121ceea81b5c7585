"""The fast recovery paths (bulk record checks, re-dispatch pre-check) change nothing.

Random stores -- several topics, delayed (SCHEDULE_TOPIC) and transactional records, empty bodies,
a forged body CRC of 0, small files with blanks -- are damaged in random ways, then recovered
twice: with the fast walk and fast re-dispatch, and with the per-record code only. Plans, consume
queues, index contents, the checkpoint and the duplicate counters must be identical.
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest

import rmqlab.store.message_store as ms_mod
from rmqlab import Message, MessageStore, MessageStoreConfig
from rmqlab.codec import flags
from rmqlab.codec.checkpoint import Checkpoint
from rmqlab.store.recovery import plan_recovery
from rmqlab.testing import damage

FILE = 64 * 1024


def _config(root: Path, version: str, crc: bool) -> MessageStoreConfig:
    return MessageStoreConfig(
        store_path_root_dir=str(root), mapped_file_size_commit_log=FILE, rocketmq_version=version,
        check_crc_on_recover=crc, mapped_file_size_consume_queue=20 * 64,
    )


def _write(root: Path, version: str, rng: random.Random) -> None:
    config = _config(root, version, True)
    with MessageStore.open(str(root), config, threaded=False) as store:
        for i in range(rng.randint(150, 400)):
            kind = rng.random()
            body = os.urandom(rng.choice([0, 1, 10, 100, 700]))
            topic = rng.choice(["TopicA", "TopicB", "T-e%", "x" * 19])
            kw: dict[str, object] = {}
            if kind < 0.1:
                kw["delay_time_level"] = rng.randint(1, 5)
            elif kind < 0.2:
                kw["sys_flag"] = rng.choice([flags.TRANSACTION_PREPARED_TYPE, flags.TRANSACTION_ROLLBACK_TYPE,
                                             flags.TRANSACTION_COMMIT_TYPE])
            elif kind < 0.22:
                prefix = os.urandom(20)
                body = prefix + damage.forge_crc32_suffix(prefix, 0)
            msg = Message(topic, body, tags=rng.choice([None, "TagA"]),
                          keys=rng.choice([(), [f"k{i}"], [f"k{i}", "dup", "dup"]]),
                          queue_id=rng.randint(0, 3), **kw)  # type: ignore[arg-type]
            assert store.put_message(msg).ok
            if rng.random() < 0.05:
                store.step()
        store.step()
        store.wait_dispatched()


def _damage(root: Path, rng: random.Random) -> str:
    cl = root / "commitlog"
    files = sorted(cl.iterdir())
    f = rng.choice(files)
    size = f.stat().st_size
    what = rng.choice(["none", "flip", "zero", "garbage", "cq_cut", "index_gone", "checkpoint"])
    if what == "flip":
        damage.flip_bit(f, rng.randrange(size // 2), rng.randrange(8))
    elif what == "zero":
        a = rng.randrange(size // 2)
        damage.zero_range(f, a, a + rng.randint(1, 300))
    elif what == "garbage":
        damage.overwrite_tail_with_garbage(f, rng.randrange(size // 2), rng.randrange(1000), 2000)
    elif what == "cq_cut":
        for q in (root / "consumequeue").rglob("0*"):
            if q.is_file() and rng.random() < 0.5:
                damage.zero_range(q, rng.randrange(max(q.stat().st_size // 2, 1)))
    elif what == "index_gone":
        shutil.rmtree(root / "index", ignore_errors=True)
    return what


def _snapshot(root: Path) -> dict[str, bytes]:
    out = {}
    for sub in ("consumequeue", "index"):
        for i, p in enumerate(sorted((root / sub).rglob("*"))):
            if p.is_file():
                key = str(p.relative_to(root)) if sub == "consumequeue" else f"index#{i}"
                out[key] = p.read_bytes()
    out["checkpoint"] = (root / "checkpoint").read_bytes()[:24]
    return out


def _recover(root: Path, config: MessageStoreConfig, fast: bool, monkeypatch: pytest.MonkeyPatch):
    real = plan_recovery

    def planner(*a: object, **kw: object):
        return real(*a, fast=fast, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(ms_mod, "plan_recovery", planner)
    store = MessageStore.open(str(root), config, threaded=False, start=False)
    try:
        plan = store.recovery_plan.to_dict()
        dups = {(t, q): cq.duplicates_skipped for t, q, cq in store.consume_queue_store.all_queues()}
        logics = store.checkpoint.logics_msg_timestamp
    finally:
        store.abandon()
    monkeypatch.undo()
    return plan, dups, logics, _snapshot(root)


@pytest.mark.parametrize("seed", range(12))
def test_fast_recovery_matches_slow(tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    version = "4.9.8" if seed % 2 == 0 else "5.3.3"
    src = tmp_path / "src"
    _write(src, version, rng)
    what = _damage(src, rng)
    abnormal = seed % 3 != 0
    if abnormal:
        (src / "abort").write_bytes(b"")
        if rng.random() < 0.7:
            cp = Checkpoint(index_msg_timestamp=rng.choice([0, 1 << 50]))
            with open(src / "checkpoint", "r+b") as fh:
                fh.write(cp.pack()[:40])
    crc = seed % 4 != 3
    results = []
    for fast in (True, False):
        root = tmp_path / f"run-{fast}"
        shutil.copytree(src, root)
        results.append(_recover(root, _config(root, version, crc), fast, monkeypatch))
    fast_r, slow_r = results
    assert fast_r[0] == slow_r[0], what
    assert fast_r[1] == slow_r[1], what
    assert fast_r[2] == slow_r[2], what
    assert fast_r[3].keys() == slow_r[3].keys(), what
    for k in fast_r[3]:
        assert fast_r[3][k] == slow_r[3][k], (what, k)


def test_fast_walk_certifies_and_falls_back(tmp_path: Path) -> None:
    """The fast path really is taken for plain records, and every note-producing record (CRC 0)
    still goes through the slow path."""
    rng = random.Random(7)
    root = tmp_path / "s"
    _write(root, "4.9.8", rng)
    (root / "abort").write_bytes(b"")
    with open(root / "checkpoint", "r+b") as fh:
        fh.write(Checkpoint().pack()[:40])
    config = _config(root, "4.9.8", True)
    store = MessageStore.open(str(root), config, threaded=False, start=False)
    try:
        plan = store.recovery_plan
        assert plan.records_checked > 100
        assert any("body CRC 0" in n for n in plan.notes)
    finally:
        store.shutdown()
