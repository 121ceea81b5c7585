"""A 5.3.3 store with ``enabled_append_prop_crc`` / ``force_verify_prop_crc`` (spec §2.6, §2.12).

Every record the CommitLog writes ends with ``"__CRC32#" 0x01 <10 digits> 0x02`` holding the CRC
of the record before it (recomputed here with zlib, not with rmqlab's codec): single puts (a
client's own ``__CRC32#`` dropped), list batches and MessageBatches, BatchCQ inner batches,
multi-dispatch (LMQ) records, delayed and timer messages put back, across file rolls. Readers
see the property; consume queues and the index work. Recovery with ``force_verify_prop_crc``
keeps a clean store whole, cuts at header damage the body CRC misses and at a record without
the property, naming file and offset, and accepts a record whose CRC really is 0 with a note.
"""

from __future__ import annotations

import os
import random
import shutil
import zlib
from pathlib import Path

import pytest

from rmqlab import Message, MessageBatch, MessageStore, MessageStoreConfig
from rmqlab.clock import ManualClock
from rmqlab.codec.message import BlankRecord, MessageRecord, decode_message
from rmqlab.codec.names import offset_to_file_name
from rmqlab.codec.walk import iter_records
from rmqlab.inspect import open_snapshot
from rmqlab.store.results import PutMessageStatus
from rmqlab.testing import damage

FILE = 64 * 1024
T0 = 1_764_000_000_000


def _config(root: Path, **kw: object) -> MessageStoreConfig:
    base: dict[str, object] = dict(rocketmq_version="5.3.3", enabled_append_prop_crc=True,
                                   force_verify_prop_crc=True, enable_multi_dispatch=True, enable_lmq=True)
    base.update(kw)
    return MessageStoreConfig.small(str(root), **base)  # type: ignore[arg-type]


def _open(root: Path, clock: ManualClock | None = None, **kw: object) -> MessageStore:
    return MessageStore.open(str(root), _config(root, **kw), clock=clock or ManualClock(T0), threaded=False)


def _records(root: Path) -> list[tuple[str, int, bytes]]:
    """(file, absolute offset, record bytes) of every record of the CommitLog, in order."""
    out = []
    for name in sorted(os.listdir(root / "commitlog")):
        buf = (root / "commitlog" / name).read_bytes()
        base = int(name)
        for off, rec in iter_records(buf, 0, base_offset=base):
            if isinstance(rec, BlankRecord):
                break
            out.append((name, off, buf[off - base : off - base + rec.store_size]))
    return out


def _assert_sealed(data: bytes) -> int:
    """The record ends with the property holding zlib's CRC of the rest; returns the CRC."""
    crc = zlib.crc32(data[:-20]) & 0x7FFFFFFF
    assert data[-20:] == b"__CRC32#\x01" + str(crc).zfill(10)[::-1].encode() + b"\x02"
    return crc


def _fill(store: MessageStore, clock: ManualClock, rng: random.Random) -> int:
    """Every kind of put, across several file rolls; returns the number of messages in CQs."""
    store.create_topic("Orders", queue_type="BatchCQ")
    n = 0
    for i in range(260):
        kind = i % 7
        if kind == 0:
            msgs = [Message("Batch", os.urandom(rng.randint(0, 200)), tags="B", keys=[f"b{i}-{j}"])
                    for j in range(rng.randint(1, 6))]
            assert store.put_messages(msgs).ok
            n += len(msgs)
        elif kind == 1:
            msgs = [Message("Batch", b"w%d" % j, tags="W", properties={"__CRC32#": "123"} if j == 0 else None)
                    for j in range(3)]
            batch = MessageBatch.from_messages(msgs, lambda: store.commit_log.new_uniq_key(clock.now_ms()))
            assert store.put_messages(batch).ok
            n += 3
        elif kind == 2:
            assert store.put_messages([Message("Orders", b"o%d" % j, tags="New") for j in range(4)]).ok
            n += 4
        elif kind == 3:
            r = store.put_message(Message("Chat", b"lmq %d" % i, tags="C", keys=[f"c{i}"],
                                          properties={"INNER_MULTI_DISPATCH": "%LMQ%room-1,%LMQ%room-2"}))
            assert r.ok, r
            n += 1
        else:
            props = {"__CRC32#": "4242", "shop": "x" * rng.randint(0, 30)} if kind == 4 else None
            r = store.put_message(Message("TopicA", os.urandom(rng.randint(0, 700)), tags="A", keys=[f"k{i}"],
                                          queue_id=i % 3, properties=props))
            assert r.ok, r
            n += 1
        if i % 50 == 0:
            store.step()
    # a delayed message and a timer message, put back when due (through put_rebuilt)
    assert store.put_message(Message("Later", b"delayed", tags="D", delay_time_level=1)).ok
    assert store.put_message(Message("Later", b"timer", tags="T", properties={"TIMER_DELAY_SEC": "2"})).ok
    store.step()
    for _ in range(6):
        clock.advance(1_000)
        store.step()
    store.wait_dispatched()
    return n


def test_every_record_written_ends_with_its_crc(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    root = tmp_path / "s"
    store = _open(root, clock)
    try:
        assert store.commit_log.fast_path is False
        _fill(store, clock, random.Random(1))
        assert store.get_max_offset_in_queue("Later", 0) == 2  # both came back
        later = store.get_message("g", "Later", 0, 0, 8)
        assert sorted(m.body for m in later.messages) == [b"delayed", b"timer"]
        for m in later.messages:  # put back with a new CRC of their own: one property, the right one
            assert m.properties["__CRC32#"] == m.properties_raw[-11:-1].decode()
            assert m.properties_raw.count(b"__CRC32#") == 1
    finally:
        store.shutdown()
    recs = _records(root)
    assert len({name for name, _o, _d in recs}) >= 3  # rolled
    topics = set()
    for _name, _off, data in recs:
        _assert_sealed(data)
        rec = decode_message(data, 0, check_crc=True)
        assert isinstance(rec, MessageRecord)
        topics.add(rec.topic)
        if rec.topic in ("TopicA", "Chat", "Later"):  # single puts: the client's own __CRC32# is gone
            assert data.count(b"__CRC32#") == 1
        assert rec.properties["__CRC32#"] == data[-11:-1].decode()
    assert {"TopicA", "Batch", "Orders", "Chat", "Later", "SCHEDULE_TOPIC_XXXX", "rmq_sys_wheel_timer"} <= topics
    # a MessageBatch's inner message keeps its own __CRC32# as sent; the store's comes last and wins
    kept = [d for _n, _o, d in recs if d.count(b"__CRC32#") == 2]
    assert kept
    assert all(d.index(b"__CRC32#\x01123\x02") < len(d) - 20 for d in kept)


def test_readers_consume_queues_and_index(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    root = tmp_path / "s"
    store = _open(root, clock)
    try:
        _fill(store, clock, random.Random(2))
        recs = {off: data for _n, off, data in _records(root)}
        for topic, qid in [("TopicA", 0), ("TopicA", 1), ("Batch", 0), ("Chat", 0), ("%LMQ%room-2", 0)]:
            got = store.get_message("g", topic, qid, 0, 32)
            assert got.messages, (topic, qid)
            for m in got.messages:
                data = recs[m.commit_log_offset]
                assert m.store_size == len(data)
                assert m.properties["__CRC32#"] == str(_assert_sealed(data)).zfill(10)[::-1]
        hits = store.query_message("TopicA", "k5").messages
        assert [m.body for m in hits] == [store.look_message_by_offset(hits[0].commit_log_offset).body]
        assert store.query_message("Chat", "c3").messages
        with store.get_message("g", "Orders", 0, 0, 32) as got:
            assert got.batch_sizes
            assert set(got.batch_sizes) == {4}
    finally:
        store.shutdown()


def test_size_limits_count_the_reserve(tmp_path: Path) -> None:
    """PROPERTIES_SIZE_EXCEEDED applies to the properties with the 20 reserved bytes."""
    on = _open(tmp_path / "on")
    off = _open(tmp_path / "off", enabled_append_prop_crc=False)
    try:
        probe = off.put_message(Message("T", b"x", properties={"big": "v" * 32600}))
        room = 32767 - len(off.look_message_by_offset(probe.wrote_offset).properties_raw)
        fill = "v" * (32600 + room)  # properties of exactly 32767 bytes without the reserve
        assert off.put_message(Message("T", b"x", properties={"big": fill})).ok
        over = on.put_message(Message("T", b"x", properties={"big": fill}))
        assert over.status is PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
        assert "32787" in over.reason
        r = on.put_message(Message("T", b"x", properties={"big": fill[20:]}))
        assert r.ok
        assert len(on.look_message_by_offset(r.wrote_offset).properties_raw) == 32767
    finally:
        on.shutdown()
        off.shutdown()


def test_option_off_writes_no_property(tmp_path: Path) -> None:
    root = tmp_path / "s"
    store = _open(root, enabled_append_prop_crc=False, force_verify_prop_crc=False)
    try:
        assert store.commit_log.fast_path is True
        assert store.put_message(Message("T", b"x", tags="A")).ok
        assert store.put_messages([Message("T", b"y%d" % i) for i in range(3)]).ok
    finally:
        store.shutdown()
    assert all(b"__CRC32#" not in d for _n, _o, d in _records(root))


@pytest.mark.parametrize("abnormal", [False, True])
def test_clean_store_recovers_whole(tmp_path: Path, abnormal: bool) -> None:
    clock = ManualClock(T0)
    root = tmp_path / "s"
    store = _open(root, clock)
    _fill(store, clock, random.Random(3))
    ends = {(t, q): store.get_max_offset_in_queue(t, q) for t, q in [("TopicA", 0), ("Batch", 0), ("Orders", 0)]}
    end = store.commit_log.get_max_offset()
    store.shutdown()
    if abnormal:
        (root / "abort").write_bytes(b"")
    store = _open(root, clock)
    try:
        plan = store.recovery_plan
        assert plan is not None
        assert plan.prop_crc
        assert plan.process_offset == end
        assert plan.stop_reason in ("end of data (zeros)", "fewer than 8 bytes left in the file")
        assert not plan.notes
        assert {k: store.get_max_offset_in_queue(*k) for k in ends} == ends
    finally:
        store.shutdown()


def _damaged_store(tmp_path: Path, what: str) -> tuple[Path, str, int, int]:
    """A store whose last file holds a record that fails the property check: (root, file name,
    its absolute offset, the log end before)."""
    clock = ManualClock(T0)
    root = tmp_path / "s"
    store = _open(root, clock)
    for i in range(400):
        assert store.put_message(Message("TopicA", b"m%d" % i * 20, tags="A", keys=[f"k{i}"])).ok
    if what == "no_property":  # the same store, then written once without the option
        store.shutdown()
        store = _open(root, clock, enabled_append_prop_crc=False, force_verify_prop_crc=False)
        r = store.put_message(Message("TopicA", b"without", tags="A"))
        target = r.wrote_offset
        assert store.put_message(Message("TopicA", b"after", tags="A")).ok
    end = store.commit_log.get_max_offset()
    store.step()
    store.shutdown()
    recs = _records(root)
    last_file = recs[-1][0]
    if what == "header_flip":
        in_last = [off for name, off, _d in recs if name == last_file]
        target = in_last[len(in_last) // 2]
        damage.flip_bit(root / "commitlog" / last_file, target - int(last_file) + 45, 2)  # BORNTIMESTAMP
    return root, last_file, target, end


@pytest.mark.parametrize("abnormal", [False, True])
@pytest.mark.parametrize("what", ["header_flip", "no_property"])
def test_force_verify_cuts_where_the_body_crc_sees_nothing(tmp_path: Path, what: str, abnormal: bool) -> None:
    root, name, target, end = _damaged_store(tmp_path, what)
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    for r in (root, copy):
        if abnormal:
            (r / "abort").write_bytes(b"")
    # without force_verify_prop_crc (body CRC on): nothing to see, the log stays whole
    store = _open(copy, force_verify_prop_crc=False)
    try:
        assert store.recovery_plan.process_offset == end
    finally:
        store.shutdown()
    store = _open(root)
    try:
        plan = store.recovery_plan
        assert (plan.stop_file, plan.stop_offset, plan.process_offset) == (name, target, target)
        assert store.commit_log.get_max_offset() == target
        assert "__CRC32#" in plan.stop_reason
        if what == "no_property":
            assert plan.stop_reason.startswith("no __CRC32# property")
        else:
            assert "which the body CRC cannot see" in plan.stop_reason
        step = plan.steps[-1] if plan.steps[-1].decision == "stop" else next(
            s for s in plan.steps if s.decision == "stop")
        assert (step.file, step.offset) == (name, target)
        # what was cut is gone from the consume queue too
        cq_end = store.get_max_offset_in_queue("TopicA", 0)
        last = store.get_message("g", "TopicA", 0, cq_end - 1, 1).messages[0]
        assert last.commit_log_offset + last.store_size == target
    finally:
        store.shutdown()


def test_verify_reports_a_prop_crc_mismatch(tmp_path: Path) -> None:
    root, name, target, _end = _damaged_store(tmp_path, "header_flip")
    with open_snapshot(str(root)) as snap:
        found = [f for f in snap.verify(check_crc=True) if f.kind.startswith("commitlog_")]
        plain = [f for f in snap.verify(check_crc=False) if f.kind == "commitlog_prop_crc_mismatch"]
    assert [(f.kind, f.file, f.offset) for f in found] == [
        ("commitlog_prop_crc_mismatch", f"commitlog/{name}", target)]
    assert found[0].severity == "error"
    assert plain == []


def _one_record_store(root: Path, flag: int) -> bytes:
    store = _open(root)
    try:
        r = store.put_message(Message("TopicA", b"zero?", tags="A", keys=["z"], flag=flag, uniq_key="U" * 32,
                                      born_timestamp=T0 - 1, born_host=("10.0.0.1", 5)))
        assert r.ok
        for i in range(3):
            assert store.put_message(Message("TopicA", b"next %d" % i, tags="A")).ok
        store.step()
    finally:
        store.shutdown()
    return (root / "commitlog" / offset_to_file_name(0)).read_bytes()


@pytest.mark.parametrize("abnormal", [False, True])
def test_a_record_whose_crc_is_zero(tmp_path: Path, abnormal: bool) -> None:
    """The writer writes "0000000000" for a record whose CRC is 0 (its FLAG chosen for that), and
    recovery accepts it, noting that 5.3.3's check would have cut the log there."""
    probe = _one_record_store(tmp_path / "probe", 0)
    total = int.from_bytes(probe[:4], "big")
    window = damage.forge_crc32_window(probe[: total - 20], 16, 0)
    flag = int.from_bytes(window, "big", signed=True)
    root = tmp_path / "s"
    data = _one_record_store(root, flag)
    assert data[:total][-11:-1] == b"0000000000"
    assert zlib.crc32(data[: total - 20]) & 0x7FFFFFFF == 0
    if abnormal:
        (root / "abort").write_bytes(b"")
    store = _open(root)
    try:
        plan = store.recovery_plan
        assert plan.records_checked == 4
        assert plan.stop_reason == "end of data (zeros)"
        [note] = plan.notes
        assert note.startswith("record at 0: its __CRC32# property says 0")
        assert "would have cut the log here" in note
        assert store.get_max_offset_in_queue("TopicA", 0) == 4
    finally:
        store.shutdown()
    # the same record forged in place by the test helper is the one the writer wrote
    other = tmp_path / "other"
    _one_record_store(other, 0)
    assert damage.forge_prop_crc_zero(other / "commitlog" / offset_to_file_name(0), 0) == flag
    assert (other / "commitlog" / offset_to_file_name(0)).read_bytes()[:total] == data[:total]


def test_get_shows_whether_the_property_holds_the_records_crc(tmp_path: Path) -> None:
    """``rmqlab get`` says ``prop_crc_ok``: True for a whole record, False after a header bit
    flip the body CRC cannot see (``crc_ok`` stays True), null for a record without the property."""
    import json

    from click.testing import CliRunner

    from rmqlab.cli import main

    root = tmp_path / "s"
    config = MessageStoreConfig.small(str(root), rocketmq_version="5.3.3", enabled_append_prop_crc=True)
    with MessageStore.open(str(root), config, threaded=False) as store:
        wrote = [store.put_message(Message("TopicA", b"hello", tags="T")).wrote_offset for _ in range(3)]
    log = sorted((root / "commitlog").iterdir())[0]
    data = bytearray(log.read_bytes())
    data[wrote[1] + 44] ^= 0x01  # BORNTIMESTAMP's low byte
    log.write_bytes(bytes(data))

    def get(store: Path, offset: int) -> dict:
        r = CliRunner().invoke(main, ["get", str(store), "--offset", str(offset), "--json"])
        assert r.exit_code == 0, r.output
        return json.loads(r.output)

    got = [get(root, w) for w in wrote]
    assert [g["crc_ok"] for g in got] == [True, True, True]
    assert [g["prop_crc_ok"] for g in got] == [True, False, True]
    plain = tmp_path / "plain"
    with MessageStore.open(str(plain), MessageStoreConfig.small(str(plain)), threaded=False) as store:
        at = store.put_message(Message("TopicA", b"hello", tags="T")).wrote_offset
    assert get(plain, at)["prop_crc_ok"] is None


def test_scan_column_counts_only_whole_pairs(tmp_path: Path) -> None:
    """``scan_records``' ``prop_crc``: 1 for a sealed record, 0 for a wrong value, -1 where the
    tail is no whole ``__CRC32#`` pair (one byte of its name changed), as verify's rule."""
    from rmqlab.codec.scan import scan_records

    root = tmp_path / "s"
    config = MessageStoreConfig.small(str(root), rocketmq_version="5.3.3", enabled_append_prop_crc=True)
    with MessageStore.open(str(root), config, threaded=False) as store:
        for i in range(4):
            store.put_message(Message("TopicA", b"x" * i, tags="T"))
    data = bytearray(sorted((root / "commitlog").iterdir())[0].read_bytes())
    c = scan_records(data, 0, with_crc=True)
    ends = [int(o) + int(t) for o, t in zip(c.offset, c.store_size, strict=True)]
    data[ends[1] - 18] = ord("X")  # "__CRC32#" -> "__XRC32#": no pair any more
    data[ends[2] - 5] ^= 0x01  # one digit of the value: a pair holding the wrong CRC
    assert scan_records(data, 0, with_crc=True).prop_crc.tolist() == [1, -1, 0, 1]
