"""Damaged files at load: where recovery cuts, why, and what the plan says (and the known traps).

Each store is written in process and shut down cleanly; then bytes are changed with
``rmqlab.testing.damage`` and, unless a test says otherwise, an ``abort`` file is put back so
the reopen runs abnormal recovery (the case where damage is expected).
"""

from __future__ import annotations

import os
import random
import zlib
from pathlib import Path

import pytest

from rmqlab.clock import ManualClock
from rmqlab.codec.walk import check_message_and_return_size
from rmqlab.config import MessageStoreConfig
from rmqlab.errors import CorruptRecord, RmqlabError
from rmqlab.store.message import Message
from rmqlab.store.message_store import MessageStore
from rmqlab.testing import damage
from rmqlab.testing.crash import Ack, _acks_for, make_message, reopen_and_check

CL = 64 * 1024


def _config(root: Path, **kw: object) -> MessageStoreConfig:
    return MessageStoreConfig.small(str(root), mapped_file_size_commit_log=CL, **kw)  # type: ignore[arg-type]


def _write(root: Path, n: int = 400, *, extra: list[Message] | None = None, **kw: object) -> tuple[
        MessageStoreConfig, list[Ack]]:
    """Put ``n`` workload messages (then ``extra``), shut down cleanly; returns config and acks."""
    config = _config(root, **kw)
    rng = random.Random(11)
    acks: list[Ack] = []
    store = MessageStore.open(str(root), config, clock=ManualClock(1_790_000_000_000), threaded=False)
    try:
        msgs = [(i, make_message(11, i, rng)) for i in range(n)]
        msgs += [(n + j, m) for j, m in enumerate(extra or [])]
        for i, m in msgs:
            r = store.put_message(m)
            assert r.ok, r
            acks += _acks_for(r, [(i, m)])
            store.clock.advance(5)  # type: ignore[attr-defined]
        store.step()
    finally:
        store.shutdown()
    return config, acks


def _abort(root: Path) -> None:
    (root / "abort").write_bytes(b"")


def _cl_file(root: Path, offset: int) -> tuple[Path, int]:
    name, pos = damage.file_position(offset, CL)
    return root / "commitlog" / name, pos


def test_garbage_over_tail_of_last_commit_log_file(tmp_path: Path) -> None:
    config, acks = _write(tmp_path)
    victim = acks[-20]
    path, pos = _cl_file(tmp_path, victim.offset)
    damage.overwrite_tail_with_garbage(path, pos, seed=3)
    _abort(tmp_path)
    report = reopen_and_check(tmp_path, acks, config)
    plan = report.plan
    assert plan.stop_file == path.name
    assert plan.stop_offset == victim.offset
    assert "bad magic" in plan.stop_reason
    assert plan.process_offset == victim.offset
    assert [a.i for a in report.lost] == [a.i for a in acks[-20:]]
    assert report.consistent, report.problems


@pytest.mark.parametrize("check_crc", [True, False], ids=["crc_on", "crc_off"])
def test_flipped_bit_in_middle_record(tmp_path: Path, check_crc: bool) -> None:
    config, acks = _write(tmp_path, check_crc_on_recover=check_crc)
    victim = next(a for a in acks[len(acks) // 2:] if a.sha != acks[0].sha and a.size > 400)
    path, pos = _cl_file(tmp_path, victim.offset)
    start, end = damage.body_range(path, pos)
    damage.flip_bit(path, start + (end - start) // 2, 5)
    _abort(tmp_path)
    report = reopen_and_check(tmp_path, acks, config)
    plan = report.plan
    if check_crc:
        # Recovery cuts at the damaged record: the plan names file, offset and reason.
        assert (plan.stop_file, plan.stop_offset) == (path.name, victim.offset)
        assert "CRC" in plan.stop_reason
        assert plan.process_offset == victim.offset
        assert {a.i for a in report.lost} == {a.i for a in acks if a.offset >= victim.offset}
        assert report.consistent, report.problems
    else:
        # Without the CRC check nothing notices: the record survives with a changed body.
        assert plan.stop_reason == "end of data (zeros)"
        assert not report.lost
        assert [(a.i, why) for a, why in report.changed] == [(victim.i, "body differs")]
        assert any("body CRC" in p or "crc" in p.lower() for p in report.problems)  # the strict walk sees it


def test_truncated_consume_queue_file_fails_the_load_clearly(tmp_path: Path) -> None:
    """Spec §7.3: a CQ file whose length is not the configured size aborts the load."""
    config, _ = _write(tmp_path)
    qdir = tmp_path / "consumequeue" / "CrashTopic0" / "0"
    victim = sorted(qdir.iterdir())[0]
    size = victim.stat().st_size
    damage.truncate_file(victim, size - 20)
    with pytest.raises(RmqlabError) as info:
        MessageStore.open(str(tmp_path), config, threaded=False)
    msg = str(info.value)
    assert str(victim) in msg, msg
    assert f"length {size - 20} does not match the configured mapped file size {size}" in msg, msg
    # The failed open released the lock and changed nothing.
    assert victim.stat().st_size == size - 20
    damage.truncate_file(victim, size)
    MessageStore.open(str(tmp_path), config, threaded=False).shutdown()


def test_index_file_newer_than_checkpoint_dropped_after_abnormal_exit_and_rebuilt(tmp_path: Path) -> None:
    """RocketMQ issues 3868 / 8007: after an abnormal exit every index file whose end time is
    after the checkpoint's index timestamp (the not-yet-full one) is deleted at load; recovery's
    re-dispatch rebuilds the keys of the messages it walks (here: all of them)."""
    config, acks = _write(tmp_path)
    newest = sorted((tmp_path / "index").iterdir())[-1]
    _abort(tmp_path)
    report = reopen_and_check(tmp_path, acks, config)
    assert str(newest) in report.index_dropped_files
    assert report.plan.dispatch_from == 0
    assert not report.index_missing
    assert len(report.present) == len(acks)


@pytest.mark.parametrize("part", ["header_zeroed", "items_zeroed"])
def test_index_file_partly_flushed_before_abnormal_exit(tmp_path: Path, part: str) -> None:
    """RocketMQ 3868 / 8007 again, for a power cut that wrote back only some pages of the open
    index file. ``header_zeroed``: end time reads 0, so the file is *kept* and refilled from item
    1 by the re-dispatch; ``items_zeroed``: the header survived, the file is newer than the
    checkpoint and dropped. Either way every key of every message is found again."""
    config, acks = _write(tmp_path)
    newest = sorted((tmp_path / "index").iterdir())[-1]
    if part == "header_zeroed":
        damage.zero_range(newest, 0, 40)
    else:
        damage.zero_range(newest, 40)
    _abort(tmp_path)
    report = reopen_and_check(tmp_path, acks, config)
    assert (str(newest) in report.index_dropped_files) == (part == "items_zeroed")
    assert not report.index_missing, report.index_missing[:5]
    assert report.consistent, report.problems


def _zero_crc_body() -> bytes:
    prefix = b"issue-9121 body "
    body = prefix + damage.forge_crc32_suffix(prefix, 0)
    assert zlib.crc32(body) & 0x7FFFFFFF == 0
    return body


def test_trap_9121_body_crc_zero_is_accepted(tmp_path: Path) -> None:
    """RocketMQ issue 9121 (fixed by PR 9122): some versions treated a stored body CRC of 0 as a
    failed check and truncated the log at such a record. rmqlab compares the value, accepts the
    record, and says in the plan what an affected version would have done. (The empty body also
    has CRC 0 and is never checked: no note for it.)"""
    extra = [Message("CrashTopic0", _zero_crc_body(), keys=["zero-crc"]), Message("CrashTopic0", b"", keys=["empty"]),
             Message("CrashTopic0", b"after", keys=["after"])]
    config, acks = _write(tmp_path, 50, extra=extra)
    _abort(tmp_path)
    report = reopen_and_check(tmp_path, acks, config)
    assert not report.lost
    assert report.consistent
    zero = acks[-3]
    notes = [n for n in report.plan.notes if "9121" in n]
    assert len(notes) == 1
    assert f"record at {zero.offset}" in notes[0]


def test_trap_7437_torn_properties_with_intact_body(tmp_path: Path) -> None:
    """RocketMQ issue 7437: the body CRC does not cover the properties, so a record whose body
    was written but whose properties' tail was not (a torn write: zeros) passes magic, CRC and
    length checks, and RocketMQ accepts it with broken keys/tags/uniq key. rmqlab stops there
    (no broker writes properties ending in a zero byte) and notes the difference."""
    config, acks = _write(tmp_path)
    victim = acks[-5]
    path, pos = _cl_file(tmp_path, victim.offset)
    damage.zero_range(path, pos + victim.size - 12, pos + victim.size)
    with open(path, "rb") as f:
        buf = f.read()
    size, ok, _ = check_message_and_return_size(buf, pos, check_crc=True)
    assert ok
    assert size == victim.size
    _abort(tmp_path)
    report = reopen_and_check(tmp_path, acks, config)
    plan = report.plan
    assert plan.stop_offset == victim.offset
    assert "torn record" in plan.stop_reason
    assert any("7437" in n for n in plan.notes)
    assert [a.i for a in report.lost] == [a.i for a in acks[-5:]]
    assert report.consistent, report.problems


def test_trap_7437_damage_inside_properties_goes_unnoticed(tmp_path: Path) -> None:
    """The limit of the 7437 check: bytes changed *inside* the properties (the last byte
    intact) pass every check, in RocketMQ and in rmqlab; the record survives with changed
    properties, which the strict walk of ``reopen_and_check`` cannot tell either."""
    config, acks = _write(tmp_path)
    victim = acks[-5]
    path, pos = _cl_file(tmp_path, victim.offset)
    damage.set_bytes(path, pos + victim.size - 30, b"\x02\x02")
    _abort(tmp_path)
    report = reopen_and_check(tmp_path, acks, config, check_index=False)
    assert report.plan.stop_reason == "end of data (zeros)"
    assert len(report.present) + len(report.changed) == len(acks)


def test_trap_10017_stale_record_at_wrong_physical_offset(tmp_path: Path) -> None:
    """RocketMQ issue 10017: a reused/recycled file can hold an old record that passes magic,
    CRC and length checks; RocketMQ 4.9.8 accepts it (and every stale record after it) as
    data. rmqlab also checks PHYSICALOFFSET against the record's position and stops there."""
    config, acks = _write(tmp_path)
    src = acks[3]
    end = acks[-1].end
    src_path, src_pos = _cl_file(tmp_path, src.offset)
    stale = damage.read_bytes(src_path, src_pos, src.size)
    path, pos = _cl_file(tmp_path, end)
    assert pos + src.size + 8 <= CL, "no room after the last record"
    damage.set_bytes(path, pos, stale)
    size, ok, _ = check_message_and_return_size(damage.read_bytes(path, 0, CL), pos, check_crc=True)
    assert ok
    assert size == src.size
    _abort(tmp_path)
    report = reopen_and_check(tmp_path, acks, config)
    plan = report.plan
    assert plan.stop_offset == end
    assert "stale record" in plan.stop_reason
    assert any("10017" in n and "4.9.8 would have accepted" in n for n in plan.notes)
    assert plan.process_offset == end
    assert not report.lost
    assert report.consistent


@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
def test_empty_last_consume_queue_file_at_startup(tmp_path: Path, version: str) -> None:
    """An empty last CQ file (a crash right after creating it). 5.x deletes a zero-length last
    file at load; 4.9.8 fails the load (length != configured size) and the broker will not
    start. rmqlab takes the safe choice in both modes: the file holds no data, so it is deleted
    and the store opens with every message intact."""
    config, acks = _write(tmp_path, rocketmq_version=version)
    qdir = tmp_path / "consumequeue" / "CrashTopic0" / "0"
    last = sorted(qdir.iterdir())[-1]
    empty = qdir / f"{int(last.name) + config.consume_queue_file_size:020d}"
    empty.write_bytes(b"")
    _abort(tmp_path)
    report = reopen_and_check(tmp_path, acks, config)
    assert not empty.exists() or empty.stat().st_size == config.consume_queue_file_size
    assert not report.lost
    assert report.consistent, report.problems


def test_zero_length_middle_file_is_a_clear_error(tmp_path: Path) -> None:
    """Only the *last* file may be empty; an empty earlier CQ file is a size mismatch."""
    config, _ = _write(tmp_path, 900)
    qdir = tmp_path / "consumequeue" / "CrashTopic0" / "0"
    files = sorted(qdir.iterdir())
    assert len(files) >= 2
    damage.truncate_file(files[0], 0)
    with pytest.raises(RmqlabError, match=str(files[0])):
        MessageStore.open(str(tmp_path), config, threaded=False)
    assert os.path.exists(files[0])


def test_a_get_of_a_record_damaged_after_recovery_names_its_file_and_position(tmp_path: Path) -> None:
    # A clean shutdown: normal recovery walks the last files only, so damage in an early file
    # stays; its consume queue unit still points at it and the consumer's decode must say where
    config, acks = _write(tmp_path, n=1500)
    assert acks[-1].offset >= 4 * CL  # five files at least: the second is not among the last three
    victim = next(a for a in acks if CL <= a.offset < 2 * CL)  # a record of the second file
    path, pos = _cl_file(tmp_path, victim.offset)
    damage.set_bytes(path, pos + 4, b"\x00\x00\x00\x00")  # MAGICCODE
    store = MessageStore.open(str(tmp_path), config, clock=ManualClock(1_790_100_000_000), threaded=False)
    try:
        with store.get_message("g", victim.topic, victim.queue_id, victim.queue_offset, 1) as got:
            (m,) = got.messages
            with pytest.raises(CorruptRecord, match="bad_magic") as info:
                m.decode()
    finally:
        store.shutdown()
    assert info.value.file == str(path)
    assert info.value.offset == pos
    assert f"{path} at offset {pos}" in str(info.value)


def test_messages_written_after_a_cut_below_the_index_end_are_indexed(tmp_path: Path) -> None:
    # Recovery cuts the log below the last index file's end_phy_offset. RocketMQ's buildIndex
    # skips every record below that end as "already indexed", so the next messages would never
    # be found by key; rmqlab cuts the end back and says so, in the dry run too.
    from rmqlab.inspect.snapshot import open_snapshot

    config, acks = _write(tmp_path)
    victim = acks[-20]
    path, pos = _cl_file(tmp_path, victim.offset)
    damage.overwrite_tail_with_garbage(path, pos, seed=3)  # a clean exit: normal recovery cuts it
    with open_snapshot(str(tmp_path)) as snap:
        dry = snap.explain_recovery()
        old_end = snap.index_files()["end_phy_offset"].iloc[-1]
    assert dry.process_offset == victim.offset < old_end
    store = MessageStore.open(str(tmp_path), config, clock=ManualClock(1_790_000_100_000), threaded=False)
    try:
        plan = store.recovery_plan
        steps = [s for s in plan.steps if s.phase == "index"]
        assert [(s.offset, s.decision) for s in steps] == [(old_end, f"cut end_phy_offset to {victim.offset}")]
        assert "leaves every message below it out of the index" in steps[0].reason
        assert [n for n in dry.notes if "past the recovered log end" in n] == [steps[0].reason]
        assert store.index_service.index_files[-1].end_phy_offset == victim.offset
        r = store.put_message(Message("CutTopic", b"after the cut", keys="after-cut"))
        assert r.ok
        assert r.append_result.wrote_offset == victim.offset
        store.step()
        found = store.query_message("CutTopic", "after-cut", 32, 0, 2**62)
        assert [m.commit_log_offset for m in found.messages] == [victim.offset]
    finally:
        store.shutdown()
    store = MessageStore.open(str(tmp_path), config, clock=ManualClock(1_790_000_200_000), threaded=False)
    try:
        assert not [s for s in store.recovery_plan.steps if s.phase == "index"]  # the end now fits the log
        assert len(store.query_message("CutTopic", "after-cut", 32, 0, 2**62).messages) == 1
    finally:
        store.shutdown()


def _last_unit(root: Path, topic: str, queue_id: int) -> tuple[Path, int]:
    """The last consume queue file of a queue and the byte position of its last unit."""
    qdir = root / "consumequeue" / topic / str(queue_id)
    last = sorted(qdir.iterdir())[-1]
    data = last.read_bytes()
    n = 0
    while n * 20 + 20 <= len(data) and data[n * 20 + 8: n * 20 + 12] != b"\0\0\0\0":
        n += 1
    return last, (n - 1) * 20


def _put_and_find(store: MessageStore, topic: str, queue_id: int, key: str) -> None:
    r = store.put_message(Message(topic, b"written after the damage", keys=key, queue_id=queue_id))
    assert r.ok
    store.step()
    found = store.query_message(topic, key, 32, 0, 2**62)
    assert [m.commit_log_offset for m in found.messages] == [r.append_result.wrote_offset]
    with store.get_message("g", topic, queue_id, r.queue_offset, 1) as got:
        assert [m.commit_log_offset for m in got.messages] == [r.append_result.wrote_offset]


def test_a_unit_with_a_torn_size_does_not_stall_dispatch(tmp_path: Path) -> None:
    # The last unit of a consume queue gets a garbage size: its "end" is 490 MB past the log.
    # RocketMQ keeps it, starts dispatch there and never dispatches another message; rmqlab
    # cuts the queue at that unit and says so, in the dry run too.
    from rmqlab.inspect.snapshot import open_snapshot

    config, acks = _write(tmp_path)
    last = next(a for a in reversed(acks) if a.topic == "CrashTopic1")
    cq, pos = _last_unit(tmp_path, last.topic, last.queue_id)
    damage.set_bytes(cq, pos + 8, (490_000_000).to_bytes(4, "big"))
    with open_snapshot(str(tmp_path)) as snap:
        dry = snap.explain_recovery()
    store = MessageStore.open(str(tmp_path), config, clock=ManualClock(1_790_000_100_000), threaded=False)
    try:
        plan = store.recovery_plan
        cut = [s for s in plan.steps if s.decision == "truncate at a unit ending past the log"]
        assert len(cut) == 1
        assert f"points at {last.offset} with size 490000000" in cut[0].reason
        assert "RocketMQ 4.9.8 keeps it" in cut[0].reason
        assert [n for n in dry.notes if "past the log's end" in n] == [cut[0].reason]
        assert store.reput.reput_from_offset <= store.get_max_phy_offset()
        assert store.get_max_offset_in_queue(last.topic, last.queue_id) == last.queue_offset  # the unit is gone
        _put_and_find(store, "CrashTopic0", 0, "after-torn-size")
    finally:
        store.shutdown()


def test_a_unit_ending_inside_a_record_does_not_stall_dispatch(tmp_path: Path) -> None:
    # The newest unit of all queues is damaged to end 10 bytes into its record: dispatch would
    # start off a record boundary, where RocketMQ reads no record and stalls for good.
    config, acks = _write(tmp_path)
    last = acks[-1]
    cq, pos = _last_unit(tmp_path, last.topic, last.queue_id)
    damage.set_bytes(cq, pos + 8, (10).to_bytes(4, "big"))  # size 10: ends inside the record
    store = MessageStore.open(str(tmp_path), config, clock=ManualClock(1_790_000_100_000), threaded=False)
    try:
        plan = store.recovery_plan
        steps = [s for s in plan.steps if s.phase == "dispatch"]
        assert [(s.offset, s.decision) for s in steps] == [(last.offset + 10, f"start dispatch at {last.offset}")]
        assert "RocketMQ 4.9.8 starts at" in steps[0].reason
        assert steps[0].reason in plan.notes
        assert store.reput.reput_from_offset == store.get_max_phy_offset()
        _put_and_find(store, "CrashTopic2", 1, "after-short-unit")
    finally:
        store.shutdown()


@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
def test_a_kept_first_unit_of_size_zero_answers_by_time_lookups(tmp_path: Path, version: str) -> None:
    # Found by fuzzing: zeros over a queue's last file from byte 8 leave unit 0 with an offset
    # and size 0. Truncation keeps a last file's unit 0 unchecked (RocketMQ does), and the
    # by-time lookup then read a store time from a 0-byte slice: a struct.error. RocketMQ's
    # getLong throws there too; rmqlab takes it for "no store time" (-1): 4.9.8 answers 0.
    config, acks = _write(tmp_path, rocketmq_version=version)
    last = acks[-1]
    other = next(a for a in reversed(acks) if (a.topic, a.queue_id) != (last.topic, last.queue_id))
    cq, _ = _last_unit(tmp_path, other.topic, other.queue_id)
    size = cq.stat().st_size
    damage.set_bytes(cq, 8, bytes(size - 8))
    store = MessageStore.open(str(tmp_path), config, clock=ManualClock(1_790_000_100_000), threaded=False)
    try:
        assert store.get_max_offset_in_queue(other.topic, other.queue_id) >= 1
        for ts in (0, 1_790_000_000_000, 2**62):
            got = store.get_offset_in_queue_by_time(other.topic, other.queue_id, ts)
            if version == "4.9.8":
                assert got == 0
            assert isinstance(got, int)
        assert store.commit_log.pickup_store_timestamp(last.offset, 0) == -1
        assert store.commit_log.pickup_store_timestamp(last.offset, last.size) > 0
    finally:
        store.shutdown()
