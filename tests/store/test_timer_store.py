"""The 5.3.3 timer wheel in the engine (``store.timer``, RocketMQ's ``TimerMessageStore``): timer
messages come out of ``rmq_sys_wheel_timer`` into their real queue once, when due, with the
properties RocketMQ sets; far ones roll; delete markers cancel; reopening (clean or after a crash)
keeps RocketMQ's at-least-once; the files decode with the codecs and ``snap.timers`` agrees."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rmqlab.clock import ManualClock
from rmqlab.codec import flags
from rmqlab.codec.timer_checkpoint import TimerCheckpoint
from rmqlab.codec.timer_log import MAGIC_DEFAULT, MAGIC_DELETE, MAGIC_ROLL, TimerLogUnit, scan_timer_log
from rmqlab.codec.timer_wheel import TIMER_WHEEL_FILE_SIZE, TimerSlot, slot_index
from rmqlab.config import MessageStoreConfig
from rmqlab.events import EventRecorder, TimerDequeued, TimerEnqueued
from rmqlab.inspect import open_snapshot
from rmqlab.store.message import Message
from rmqlab.store.message_store import MessageStore
from rmqlab.store.results import GetMessageStatus, PutMessageStatus

T0 = 1_700_000_000_000  # on a second boundary
DAY = 86_400_000


def _open(path: Path, clock: ManualClock, **changes: object) -> MessageStore:
    config = MessageStoreConfig.small(str(path), rocketmq_version="5.3.3", **changes)
    return MessageStore.open(path, config, clock=clock, threaded=False)


def _put(store: MessageStore, body: bytes, topic: str = "Orders", queue_id: int = 0, **props: str) -> str:
    r = store.put_message(Message(topic, body, tags="T", queue_id=queue_id, properties=props))
    assert r.status is PutMessageStatus.PUT_OK, r.reason
    return r.msg_id


def _delivered(store: MessageStore, topic: str = "Orders", queue_id: int = 0) -> list:
    out, offset = [], 0
    while (got := store.get_message("g", topic, queue_id, offset, 1000)).status is GetMessageStatus.FOUND:
        out += got.messages
        offset = got.next_begin_offset
    return out


def _steps(store: MessageStore, n: int = 2) -> None:
    for _ in range(n):
        store.step()


def test_messages_come_out_once_in_their_real_queue_when_due(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    store = _open(tmp_path / "s", clock)
    rec = EventRecorder(store.bus)
    try:
        _put(store, b"in 30 s", TIMER_DELAY_SEC="30")
        _put(store, b"in 1.5 s", queue_id=2, TIMER_DELAY_MS="1500")
        _put(store, b"at 60.5 s", TIMER_DELIVER_MS=str(T0 + 60_500))
        _steps(store)
        assert store.timer.status().enqueued == 3
        assert _delivered(store) == []
        clock.advance(1_999)
        _steps(store)
        assert _delivered(store, queue_id=2) == []  # its tick (T0 + 1 s) is read once T0 + 2 s has come
        clock.advance(1)
        _steps(store)
        (m,) = _delivered(store, queue_id=2)
        assert m.body == b"in 1.5 s"
        clock.set(T0 + 29_999)
        _steps(store)
        assert _delivered(store) == []
        clock.set(T0 + 30_000)
        _steps(store)
        (m,) = _delivered(store)
        p = m.properties
        assert m.topic == "Orders"
        assert (p["TIMER_OUT_MS"], p["TIMER_ENQUEUE_MS"], p["TIMER_DEQUEUE_MS"]) == (str(T0 + 29_000), str(T0),
                                                                                     str(T0 + 30_000))
        assert (p["REAL_TOPIC"], p["REAL_QID"], p["TIMER_DELAY_SEC"]) == ("Orders", "0", "30")  # kept, as RocketMQ
        assert "TIMER_ROLL_TIMES" not in p
        clock.set(T0 + 61_000)
        _steps(store)
        clock.advance(3_600_000)
        _steps(store, 3)
        assert [x.body for x in _delivered(store)] == [b"in 30 s", b"at 60.5 s"]
        assert store.timer.status().delivered == 3
        assert len(rec.of(TimerEnqueued)) == 3
        assert [e.outcome for e in rec.of(TimerDequeued)] == ["delivered"] * 3
        found = store.look_message_by_offset(rec.of(TimerDequeued)[0].to_offset)
        assert found.topic == "Orders"
        assert found.queue_id == 2
    finally:
        store.shutdown()


def test_a_message_already_due_when_enqueued_is_handed_back_at_once(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    store = _open(tmp_path / "s", clock)
    try:
        _put(store, b"x", TIMER_DELAY_SEC="5")
        clock.advance(60_000)  # enqueue runs after its time: TIMER_ENQUEUE_MS is Long.MAX_VALUE
        _steps(store, 3)
        (m,) = _delivered(store)
        assert m.properties["TIMER_ENQUEUE_MS"] == str(2**63 - 1)
        assert store.timer.timer_log.mapped_file_queue.get_max_offset() == 0  # never in the wheel
    finally:
        store.shutdown()


def test_far_messages_roll_through_the_window_and_past_the_wheels_seven_days(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    store = _open(tmp_path / "s", clock, timer_max_delay_sec=10 * 86_400)
    try:
        _put(store, b"2.5 days", TIMER_DELIVER_MS=str(T0 + 2 * DAY + DAY // 2))
        _put(store, b"9 days", TIMER_DELIVER_MS=str(T0 + 9 * DAY + 500))
        _steps(store)
        units = [TimerLogUnit.unpack(store.timer.timer_log.files()[0].buffer, i * 52) for i in range(2)]
        assert [u.magic for u in units] == [MAGIC_DEFAULT | MAGIC_ROLL] * 2
        window = 2 * DAY
        # 2.5 days: within a third of a window past it -> parked half a window ahead; 9 days: a window ahead
        assert [u.delayed_time_ms for u in units] == [T0 + window // 2, T0 + window]
        due = {b"2.5 days": T0 + 2 * DAY + DAY // 2, b"9 days": T0 + 9 * DAY + 1000}
        seen: dict[bytes, int] = {}
        while clock.now_ms() < T0 + 10 * DAY:
            near = any(0 <= d - clock.now_ms() <= 3_000 for d in due.values())
            clock.advance(1_000 if near else 3_600_000)
            _steps(store, 2)
            for m in _delivered(store):
                seen.setdefault(m.body, clock.now_ms())
        assert seen == due  # each in the step at its tick's end: on time
        got = _delivered(store)
        assert [m.body for m in got] == [b"2.5 days", b"9 days"]
        assert all(int(m.properties["TIMER_ROLL_TIMES"]) >= 1 for m in got)
        assert int(got[1].properties["TIMER_ROLL_TIMES"]) >= 4
        assert store.timer.status().rolled >= 5
    finally:
        store.shutdown()


def test_a_delete_marker_cancels_its_message_and_is_not_delivered(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    store = _open(tmp_path / "s", clock)
    try:
        at = str(T0 + 10_000)
        store.put_message(Message("Orders", b"cancel me", uniq_key="U-1", properties={"TIMER_DELIVER_MS": at}))
        store.put_message(Message("Orders", b"keep me", uniq_key="U-2", properties={"TIMER_DELIVER_MS": at}))
        _steps(store)
        r = store.put_message(Message("Orders", b"", properties={"TIMER_DELIVER_MS": at, "TIMER_DEL_UNIQKEY": "U-1"}))
        assert r.status is PutMessageStatus.PUT_OK
        _steps(store)
        slot = store.timer.wheel.get_slot(T0 + 9_000)
        assert slot.num == 1  # two messages, one delete marker
        clock.advance(1_000)  # the flush round: a snapshot reads what is on disk
        _steps(store)
        snap = open_snapshot(store.root)
        try:
            pending = snap.timers()
            assert sorted(pending["kind"]) == ["delete", "message", "message"]
            assert pending.loc[pending["uniq_key"] == "U-1", "cancelled"].item()
        finally:
            snap.close()
        clock.advance(9_000)
        _steps(store)
        assert [m.body for m in _delivered(store)] == [b"keep me"]
        s = store.timer.status()
        assert (s.delivered, s.deleted) == (1, 1)
    finally:
        store.shutdown()


def test_flow_control_refuses_a_put_into_a_congested_slot(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    store = _open(tmp_path / "s", clock, timer_congest_num_each_slot=1)
    try:
        for _ in range(2):
            _put(store, b"x", TIMER_DELAY_SEC="30")
        _steps(store)
        r = store.put_message(Message("Orders", b"x", properties={"TIMER_DELAY_SEC": "30"}))
        assert r.status is PutMessageStatus.WHEEL_TIMER_FLOW_CONTROL
        assert _put(store, b"other slot", TIMER_DELAY_SEC="31")
    finally:
        store.shutdown()


def test_files_decode_with_the_codecs_and_snapshot_agrees(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    path = tmp_path / "s"
    store = _open(path, clock, mapped_file_size_timer_log=200)  # three units a file, then the blank
    try:
        for i in range(5):
            _put(store, f"m{i}".encode(), TIMER_DELAY_SEC=str(10 + i % 2))
        _steps(store)
        clock.advance(1_000)  # the flush round writes wheel and checkpoint
        _steps(store)
        wheel = path / "timerwheel"
        assert os.path.getsize(wheel) == TIMER_WHEEL_FILE_SIZE
        assert os.stat(wheel).st_blocks * 512 < 1 << 20  # sparse
        with open(wheel, "rb") as f:
            f.seek(slot_index(T0 + 9_000) * 32)
            slot = TimerSlot.unpack(f.read(32))
        assert (slot.time, slot.num) == ((T0 + 9_000) // 1000, 3)
        logs = sorted(os.listdir(path / "timerlog"))
        assert logs == ["00000000000000000000", "00000000000000000200"]
        first = (path / "timerlog" / logs[0]).read_bytes()
        scan = scan_timer_log(first)
        assert (len(scan.units), scan.stop) == (3, "blank")
        cp = TimerCheckpoint.unpack((path / "config" / "timercheck").read_bytes())
        assert (cp.last_read_time_ms, cp.last_timer_queue_offset, cp.master_timer_queue_offset) == (T0 + 1000, 5, 5)
        assert cp.counter >= 1
        snap = open_snapshot(path)
        try:
            pending = snap.timers()
            assert sorted(pending["body"] if "body" in pending else pending["commit_log_offset"].tolist()) \
                == sorted(pending["commit_log_offset"].tolist())
            assert len(pending) == 5
            assert set(pending["stage"]) == {"wheel"}
            assert set(pending["real_topic"]) == {"Orders"}
            assert not pending["problem"].astype(bool).any()
        finally:
            snap.close()
        clock.advance(11_000)
        _steps(store)
        assert len(_delivered(store)) == 5
        clock.advance(1_000)
        _steps(store)
        snap = open_snapshot(path)
        try:
            assert len(snap.timers()) == 0
        finally:
            snap.close()
    finally:
        store.shutdown()


@pytest.mark.parametrize("how", ["clean", "abort-after-flush", "abort-before-flush"])
def test_reopen_mid_way_loses_nothing(tmp_path: Path, how: str) -> None:
    """Clean: every message once. A crash: RocketMQ enqueues again what the last checkpoint flush
    did not cover, and delivers again the slots read since: at least once, and exactly once when
    the checkpoint covered everything."""
    clock = ManualClock(T0)
    path = tmp_path / "s"
    store = _open(path, clock)
    for i in range(6):
        _put(store, f"m{i}".encode(), TIMER_DELAY_SEC=str(5 + 10 * (i % 3)))
    _steps(store)
    clock.advance(6_000)  # the 5 s ones come due; a flush round
    _steps(store)
    assert len(_delivered(store)) == 2
    if how == "abort-before-flush":
        for i in range(6, 8):
            _put(store, f"m{i}".encode(), TIMER_DELAY_SEC="20")
        _steps(store)  # enqueued, not yet covered by a checkpoint
    if how == "clean":
        store.shutdown()
    else:
        store.abandon()
    store = _open(path, clock)
    try:
        clock.advance(40_000)
        _steps(store, 3)
        bodies = [m.body for m in _delivered(store)]
        expected = {f"m{i}".encode() for i in range(8 if how == "abort-before-flush" else 6)}
        assert set(bodies) == expected
        if how != "abort-before-flush":
            assert len(bodies) == len(expected)
        else:
            assert len(bodies) <= len(expected) + 2
    finally:
        store.shutdown()


def test_a_wheel_of_the_wrong_length_refuses_to_open(tmp_path: Path) -> None:
    path = tmp_path / "s"
    path.mkdir()
    (path / "timerwheel").write_bytes(b"\0" * 100)
    with pytest.raises(Exception, match="timerwheel") as e:
        _open(path, ManualClock(T0))
    assert "length_mismatch" in str(e.value) or "38707200" in str(e.value)


def test_4_9_8_and_a_wheel_switched_off_have_no_timer_files(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    for name, changes in (("v4", {"rocketmq_version": "4.9.8"}), ("off", {"timer_wheel_enable": False})):
        config = MessageStoreConfig.small(str(tmp_path / name), **{"rocketmq_version": "5.3.3", **changes})
        store = MessageStore.open(tmp_path / name, config, clock=clock, threaded=False)
        assert store.timer is None
        store.shutdown()
        assert not (tmp_path / name / "timerwheel").exists()


def test_delete_units_are_written_with_the_delete_magic(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    store = _open(tmp_path / "s", clock)
    try:
        store.put_message(Message("Orders", b"", properties={"TIMER_DELAY_SEC": "9", "TIMER_DEL_UNIQKEY": "K"}))
        _steps(store)
        unit = TimerLogUnit.unpack(store.timer.timer_log.files()[0].buffer, 0)
        assert unit.magic == MAGIC_DEFAULT | MAGIC_DELETE
        assert unit.prev_pos == -1
        assert store.timer.wheel.get_slot(T0 + 8_000).num == -1
        assert store.look_message_by_offset(unit.offset_py).topic == flags.TIMER_TOPIC
    finally:
        store.shutdown()


def test_the_engine_takes_over_a_store_whose_timer_files_a_broker_wrote(tmp_path: Path) -> None:
    """The hand-built store of ``rmqlab.testing.timer_store`` (files as ``doEnqueue`` writes them):
    recovery reads them, the pending messages come out when due, the one its delete marker names
    does not, nor does the unit without a record; ``late`` (not yet enqueued) is enqueued."""
    from rmqlab.testing.timer_store import T0 as W0
    from rmqlab.testing.timer_store import write_timer_store

    ts = write_timer_store(tmp_path / "w")
    clock = ManualClock(W0)
    store = _open(ts.root, clock, mapped_file_size_timer_log=200)
    try:
        assert store.timer.curr_queue_offset == 6
        assert store.timer.curr_read_time_ms == W0
        _steps(store)
        assert store.timer.status().enqueued == 1  # late
        clock.advance(31_000)
        _steps(store, 3)
        got = {(m.topic, m.queue_id, m.body) for q in range(3) for m in _delivered(store, "Orders", q)}
        got |= {(m.topic, m.queue_id, m.body) for m in _delivered(store, "Payments", 0)}
        assert got == {("Orders", 1, b"m0m0m0"), ("Payments", 0, b"m2m2m2"), ("Orders", 0, b"latelatelate")}
        s = store.timer.status()
        assert (s.deleted, s.missing, s.dropped) == (1, 1, 0)  # m1; ghost; a delete unit is only read
    finally:
        store.shutdown()


def test_rmqlab_timers_and_verify_on_a_store_the_engine_wrote(tmp_path: Path) -> None:
    import json

    from click.testing import CliRunner

    from rmqlab.cli import main

    clock = ManualClock(T0)
    path = tmp_path / "s"
    store = _open(path, clock)
    for i, delay in enumerate((5, 5, 40)):
        _put(store, f"m{i}".encode(), queue_id=i, TIMER_DELAY_SEC=str(delay))
    _steps(store)
    clock.advance(1_000)
    _steps(store)
    store.shutdown()
    runner = CliRunner()
    r = runner.invoke(main, ["timers", str(path), "--json-lines"])
    assert r.exit_code == 0, r.output
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert [(x["stage"], x["kind"], x["due_ms"], x["real_queue_id"]) for x in rows] == [
        ("wheel", "message", T0 + 4_000, 0), ("wheel", "message", T0 + 4_000, 1), ("wheel", "message", T0 + 39_000, 2)]
    v = runner.invoke(main, ["verify", str(path), "--json"])
    assert not [f for f in json.loads(v.stdout)["findings"] if f["kind"].startswith("timer_")]
    store = _open(path, clock)  # the clean stop did not write the wheel (as RocketMQ): recovery rebuilds it
    try:
        clock.advance(40_000)
        _steps(store)
        assert sorted(m.body for q in range(3) for m in _delivered(store, queue_id=q)) == [b"m0", b"m1", b"m2"]
    finally:
        store.shutdown()


def test_destroy_removes_the_timer_files(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    store = _open(tmp_path / "s", clock)
    _put(store, b"x", TIMER_DELAY_SEC="9")
    _steps(store)
    store.destroy()
    left = {p.relative_to(tmp_path / "s").as_posix() for p in (tmp_path / "s").rglob("*")}
    assert not {"timerwheel", "timerlog", "config/timercheck"} & left


def test_is_reject_follows_rocketmqs_rule_between_the_limit_and_twice_it(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    store = _open(tmp_path / "s", clock, timer_congest_num_each_slot=10)
    try:
        timer = store.timer
        at = T0 + 9_000
        for num, expect in ((10, False), (20, True), (25, True)):
            timer.wheel.put_slot(at, 0, 0, num, 0)
            assert timer.is_reject(at) is expect
        timer.wheel.put_slot(at, 0, 0, 11, 0)  # just past the limit: refused ~90 % of the time
        just = sum(timer.is_reject(at) for _ in range(1000))
        timer.wheel.put_slot(at, 0, 0, 19, 0)  # nearly twice it: ~10 %
        nearly = sum(timer.is_reject(at) for _ in range(1000))
        assert just > 800 > 200 > nearly
    finally:
        store.shutdown()


def test_recovery_rebuilds_slots_across_timerlog_files(tmp_path: Path) -> None:
    """Three units a file: a clean stop before any wheel flush leaves the wheel empty; recovery
    reads the timerlog from its start through every file's blank and rebuilds each slot."""
    clock = ManualClock(T0)
    path = tmp_path / "s"
    store = _open(path, clock, mapped_file_size_timer_log=200)
    for i in range(8):
        _put(store, f"m{i}".encode(), TIMER_DELAY_SEC=str(5 + i % 3))
    _steps(store)
    store.shutdown()
    assert len(os.listdir(path / "timerlog")) == 3
    store = _open(path, clock, mapped_file_size_timer_log=200)
    try:
        slot = store.timer.wheel.get_slot(T0 + 4_000)  # m0, m3, m6: units 0, 3, 6 (file 0 pos 0 .. file 2 pos 0)
        assert (slot.first_pos, slot.last_pos) == (0, 400)
        clock.advance(8_000)
        _steps(store)
        assert sorted(m.body for m in _delivered(store)) == [f"m{i}".encode() for i in range(8)]
    finally:
        store.shutdown()


@pytest.mark.parametrize("skip", [False, True])
def test_a_put_back_refused_for_an_unknown_reason_waits_or_is_skipped(tmp_path: Path, skip: bool) -> None:
    # doPut: CREATE_MAPPED_FILE_FAILED, UNKNOWN_ERROR... are retried until they pass (delivery waits
    # there, nothing lost) unless timerSkipUnknownError, which drops the message
    from rmqlab.store.results import PutMessageResult

    clock = ManualClock(T0)
    store = _open(tmp_path / "s", clock, timer_skip_unknown_error=skip)
    deliver = store.timer._deliver
    refusals = [0]

    def no_new_file(*args: object) -> PutMessageResult:  # a disk that cannot make the next file, twice
        if refusals[0] < 8:
            refusals[0] += 1
            return PutMessageResult(PutMessageStatus.CREATE_MAPEDFILE_FAILED, reason="test: no file")
        return deliver(*args)

    store.timer._deliver = no_new_file
    try:
        _put(store, b"due in 2 s", TIMER_DELAY_SEC="2")
        _steps(store)
        clock.advance(3_000)
        _steps(store)  # 4 tries a run: both runs refused
        if skip:
            assert refusals[0] == 1
            assert store.timer.counts["dropped"] == 1
            assert _delivered(store) == []
            return
        assert refusals[0] == 8
        assert "CREATE_MAPEDFILE_FAILED" in store.timer.stuck
        assert store.timer.counts["dropped"] == 0
        assert _delivered(store) == []
        _steps(store)
        assert [m.body for m in _delivered(store)] == [b"due in 2 s"]
        assert store.timer.stuck == ""
    finally:
        store.shutdown()
