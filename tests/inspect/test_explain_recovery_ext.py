"""``explain_recovery`` of a store written with ``enable_consume_queue_ext``: the plan's first steps
say what consume queue recovery does to each ext run (its walk from the first file, its cut after
the last address the recovered queue holds, the files that deletes), exactly the steps the engine
reports when it opens the same store, and nothing is written by explaining.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from rmqlab.clock import ManualClock
from rmqlab.codec.consume_queue_ext_unit import undecorate
from rmqlab.config import MessageStoreConfig
from rmqlab.events import RecoveryStep
from rmqlab.inspect import open_snapshot
from rmqlab.store.message import Message
from rmqlab.store.message_store import MessageStore
from rmqlab.testing.damage import zero_range
from rmqlab.widgets.figures import recovery_steps_html

EXT_FILE = 1000  # 49 units a file, then the end marker
T0 = 1_700_000_000_000


def _config(root: Path, **changes: object) -> MessageStoreConfig:
    settings = {"enable_consume_queue_ext": True, "mapped_file_size_consume_queue_ext": EXT_FILE, **changes}
    return MessageStoreConfig.small(str(root), **settings)


def _write(root: Path, n: int = 300, **changes: object) -> None:
    """``n`` messages in queues 0 and 1 of one topic (64-unit CQ files, 1000-byte ext files)."""
    clock = ManualClock(T0)
    with MessageStore.open(root, _config(root, **changes), clock=clock, threaded=False) as store:
        for i in range(n):
            assert store.put_message(Message("Orders", b"b%d" % i, tags=f"Tag{i % 3}", queue_id=i % 2)).ok
            clock.advance(3)
        store.step()
        assert store.wait_dispatched()


def _digest(root: Path) -> dict[str, str]:
    return {os.path.relpath(os.path.join(d, f), root): hashlib.sha256(Path(d, f).read_bytes()).hexdigest()
            for d, _, files in os.walk(root) for f in files}


def _ext_steps(steps: list[RecoveryStep]) -> list[tuple[str, str, int, str, str]]:
    return [(s.phase, s.file, s.offset, s.decision, s.reason) for s in steps if s.phase == "consume_queue_ext"]


def _explain_then_open(root: Path, **changes: object) -> tuple[list, list, MessageStore]:
    """(explained ext steps, the engine's ext steps, the store opened without starting)."""
    before = _digest(root)
    with open_snapshot(root) as snap:
        plan = snap.explain_recovery(**changes)
    assert _digest(root) == before  # explaining wrote nothing
    store = MessageStore.open(root, _config(root), clock=ManualClock(T0 + 10_000), threaded=False, start=False)
    return plan, store.recovery_plan, store


def _ext_files(root: Path, qid: int) -> list[str]:
    return sorted(os.listdir(root / "consumequeue_ext" / "Orders" / str(qid)))


@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
def test_a_clean_store_walks_every_ext_file_and_cuts_nothing(tmp_path: Path, version: str) -> None:
    root = tmp_path / "s"
    _write(root, rocketmq_version=version)
    files = {q: _ext_files(root, q) for q in (0, 1)}
    assert all(len(f) >= 3 for f in files.values())
    explained, done, store = _explain_then_open(root, rocketmq_version=version)
    try:
        assert _ext_steps(explained.steps) == _ext_steps(done.steps)
        steps = _ext_steps(explained.steps)
        assert explained.steps[: len(steps)] == done.steps[: len(steps)]  # first: CQs recover before the log
        for q in (0, 1):
            name = f"consumequeue_ext/Orders/{q}"
            mine = [s for s in steps if s[1].startswith(name)]
            walked = [s for s in mine if s[3].startswith("units end at")]
            assert [s[1].rsplit("/", 1)[1] for s in walked] == files[q]  # from the first file on
            assert all("end marker" in s[4] for s in walked[:-1])  # every full file ends with short -1
            assert "size of 0" in walked[-1][4]
            assert "the run's end" in walked[-1][4]
            ext = store.consume_queue_store.find_consume_queue("Orders", q).consume_queue_ext
            end = undecorate(ext.get_max_address())
            cut = next(s for s in mine if s[3].startswith("cut at"))
            assert cut[2] == end
            assert "nothing after it" in cut[4]
            assert not [s for s in mine if s[3] == "delete file"]
        assert not any("10755" in n for n in explained.notes)
    finally:
        store.shutdown()


def test_consume_queue_recovery_cuts_the_ext_run_after_its_last_address(tmp_path: Path) -> None:
    """Units lost from the CQ's tail (zeroed) leave ext units nothing references: CQ recovery cuts
    the run after the unit of the last address it kept and deletes the ext files past it."""
    root = tmp_path / "s"
    _write(root, 400)
    cq_dir = root / "consumequeue" / "Orders" / "0"
    cq_files = sorted(os.listdir(cq_dir))
    zero_range(cq_dir / cq_files[-1], 0)  # the last CQ file's units: gone
    zero_range(cq_dir / cq_files[-2], 20 * 10)  # and all but 10 of the one before
    kept = (len(cq_files) - 2) * 64 + 10  # units queue 0 keeps
    ext_before = _ext_files(root, 0)
    explained, done, store = _explain_then_open(root)
    try:
        assert _ext_steps(explained.steps) == _ext_steps(done.steps)
        mine = [s for s in _ext_steps(done.steps) if s[1].startswith("consumequeue_ext/Orders/0")]
        cq = store.consume_queue_store.find_consume_queue("Orders", 0)
        assert cq.get_max_offset_in_queue() == kept
        last_address = cq.get_unit(kept - 1)[2]
        end = undecorate(last_address) + 20
        cut = next(s for s in mine if s[3].startswith("cut at"))
        assert cut[2] == end
        assert cut[3] == f"cut at {end % EXT_FILE}"
        assert "byte(s) of units after it dropped" in cut[4]
        deleted = [s[1].rsplit("/", 1)[1] for s in mine if s[3] == "delete file"]
        assert deleted == [f for f in ext_before if int(f) > end]
        assert deleted  # the cut spans ext files
        assert _ext_files(root, 0) == [f for f in ext_before if f not in deleted]  # the engine did it
        assert undecorate(cq.consume_queue_ext.get_max_address()) == end
        assert cq.get_ext(last_address) is not None
        # queue 1 lost nothing: its run keeps every file
        assert not [s for s in _ext_steps(done.steps) if s[1].startswith("consumequeue_ext/Orders/1")
                    and s[3] == "delete file"]
    finally:
        store.shutdown()


def test_the_commit_log_cut_leaves_the_ext_runs_alone(tmp_path: Path) -> None:
    """A CommitLog tail lost below the queues' max offset cuts their units past the log, not their
    ext runs (apache/rocketmq#10755, which rmqlab's engine follows): the plan says so."""
    root = tmp_path / "s"
    _write(root, 300)
    log_files = sorted(os.listdir(root / "commitlog"))
    with open_snapshot(root) as snap:
        last = snap.messages().iloc[-40]  # lose the last 40 records
    zero_range(root / "commitlog" / log_files[-1], int(last["commit_log_offset"]) % (64 * 1024))
    explained, done, store = _explain_then_open(root)
    try:
        assert done.truncate_consume_queues
        assert _ext_steps(explained.steps) == _ext_steps(done.steps)
        for plan in (explained, done):
            assert any("10755" in n and "ConsumeQueueExt" in n for n in plan.notes)
        for q in (0, 1):
            cq = store.consume_queue_store.find_consume_queue("Orders", q)
            cut = next(s for s in _ext_steps(done.steps)
                       if s[1].startswith(f"consumequeue_ext/Orders/{q}") and s[3].startswith("cut at"))
            assert undecorate(cq.consume_queue_ext.get_max_address()) == cut[2]  # not cut further
            assert cq.max_physic_offset <= done.process_offset  # while the CQ units were cut
    finally:
        store.shutdown()


def test_explained_with_the_flag_off_the_ext_files_are_left_alone(tmp_path: Path) -> None:
    root = tmp_path / "s"
    _write(root, 100)
    with open_snapshot(root) as snap:
        off = snap.explain_recovery(enable_consume_queue_ext=False)
        on = snap.explain_recovery()  # the store holds ext files: on by default
    assert not _ext_steps(off.steps)
    assert any("enable_consume_queue_ext is off" in n for n in off.notes)
    assert _ext_steps(on.steps)
    assert not any("enable_consume_queue_ext is off" in n for n in on.notes)
    store = MessageStore.open(root, _config(root, enable_consume_queue_ext=False), threaded=False, start=False)
    try:
        assert _ext_steps(store.recovery_plan.steps) == []
        assert store.recovery_plan.notes == off.notes
    finally:
        store.shutdown()


@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
def test_ext_files_before_the_logs_first_file_are_deleted_at_load_and_explained(tmp_path: Path,
                                                                              version: str) -> None:
    """Loading ends with ``recoverTopicQueueTable``: each queue's min offset moves to its first
    unit at or past the CommitLog's min offset, and the ext files wholly before that unit's ext
    address are deleted. The plan names them (explained and done alike), at its end."""
    root = tmp_path / "s"
    # ~56 records a log file: the first two hold units 0..55 of each queue, all in its first
    # consume queue file (64 units), past its first ext file (49 units)
    changes = {"rocketmq_version": version, "mapped_file_size_commit_log": 10240}
    _write(root, **changes)
    logs = sorted(os.listdir(root / "commitlog"))
    assert len(logs) >= 3
    for name in logs[:2]:  # expired files gone, their queues not yet corrected (a crash in between)
        (root / "commitlog" / name).unlink()
    min_phy = int(logs[2])
    before = {q: _ext_files(root, q) for q in (0, 1)}
    digest = _digest(root)
    with open_snapshot(root) as snap:
        explained = snap.explain_recovery(config=_config(root, **changes))
    assert _digest(root) == digest  # explaining wrote nothing
    store = MessageStore.open(root, _config(root, **changes), clock=ManualClock(T0 + 10_000), threaded=False,
                              start=False)
    done = store.recovery_plan
    try:
        steps = [s for s in explained.steps if s.decision == "delete file" and "before offset" in s.reason]
        assert steps, "the first file's records held units whose ext files end before the new min"
        assert steps == [s for s in done.steps if s.decision == "delete file" and "before offset" in s.reason]
        assert explained.steps[-len(steps):] == steps  # the last thing loading does
        assert any("truncateByMinAddress" in n for n in explained.notes)
        assert f"({len(steps)} at the end of loading: before their queue's new first unit)" in \
            recovery_steps_html(explained)
        gone = {(f"consumequeue_ext/Orders/{q}/{f}") for q in (0, 1) for f in set(before[q]) - set(_ext_files(root, q))}
        assert {s.file for s in steps} == gone
        for q in (0, 1):  # the files left start at or before the new first unit's ext address
            cq = store.consume_queue_store.find_consume_queue("Orders", q)
            first = cq.get_unit(cq.get_min_offset_in_queue())
            assert first is not None
            assert first[0] >= min_phy
            left = [int(f) for f in _ext_files(root, q)]
            assert left[0] + EXT_FILE >= undecorate(first[2])
    finally:
        store.shutdown()
