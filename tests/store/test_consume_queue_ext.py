"""ConsumeQueueExt (``enable_consume_queue_ext``): the ext run itself, dispatch writing ext units
and addresses, readers resolving them, and the lifecycle (reopen, abnormal recovery, cleanup).

Ext files are tiny here (``EXT_FILE`` bytes: 49 units of 20 bytes and the 4 kept for the end
marker) so that runs roll and end files with ``short -1`` after a few dozen messages.
"""

from __future__ import annotations

import logging
import os
import random
import struct
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqlab.clock import ManualClock
from rmqlab.codec.consume_queue_ext_unit import END_MARKER, CqExtUnit, decode_at, decorate, is_ext_addr, undecorate
from rmqlab.codec.java_hash import java_hash
from rmqlab.config import MessageStoreConfig
from rmqlab.errors import ConfigError, CorruptRecord
from rmqlab.store.consume_queue_ext import PUT_FAILED, ConsumeQueueExt
from rmqlab.store.message import Message
from rmqlab.store.message_filter import TagFilter
from rmqlab.store.message_store import MessageStore
from rmqlab.store.results import GetMessageStatus
from rmqlab.testing.crash import simulate_process_kill

EXT_FILE = 1000  # (1000 - 4) // 20 = 49 units, then the marker at byte 980
T0 = 1_700_000_000_000
TAGS = ["TagA", "TagB", "TagC", "TagD", None]
FILTERS = ["*", "TagA", "TagB || TagC", "TagD", "TagX"]


# --- the ext run --------------------------------------------------------------------------------


def _ext(root: Path, size: int = EXT_FILE) -> ConsumeQueueExt:
    return ConsumeQueueExt("T", 0, str(root), size)


def test_put_get_roll_and_end_marker(tmp_path: Path) -> None:
    ext = _ext(tmp_path)
    addresses = [ext.put(CqExtUnit(i, T0 + i)) for i in range(120)]
    assert all(is_ext_addr(a) for a in addresses)
    # 49 units a file, then the marker; units never span files
    offsets = [undecorate(a) for a in addresses]
    assert offsets[:3] == [0, 20, 40]
    assert offsets[48:50] == [960, 1000]
    assert offsets[98] == 2000
    for i, a in enumerate(addresses):
        assert ext.get(a) == CqExtUnit(i, T0 + i)
    files = ext.mapped_file_queue.mapped_files
    assert [f.file_from_offset for f in files] == [0, 1000, 2000]
    assert bytes(files[0].buffer[980:982]) == END_MARKER
    assert files[0].wrote_position == EXT_FILE
    assert ext.get(decorate(980)) is None  # the marker is no unit
    assert ext.get(ext.get_max_address()) is None  # past the write position
    assert ext.get(12345) is None  # a tags hash, not an address
    ext.flush(0)
    ext.shutdown()


def test_bitmaps_make_units_of_other_sizes(tmp_path: Path) -> None:
    ext = _ext(tmp_path, 100)
    a = ext.put(CqExtUnit(1, 2, b"\x01" * 8))  # 28 bytes
    b = ext.put(CqExtUnit(3, 4, b"\x02" * 60))  # 80 bytes: 80 > 100 - 28 - 4, next file
    assert (undecorate(a), undecorate(b)) == (0, 100)
    assert ext.get(b) == CqExtUnit(3, 4, b"\x02" * 60)
    assert bytes(ext.mapped_file_queue.mapped_files[0].buffer[28:30]) == END_MARKER


def test_put_failures_answer_one(tmp_path: Path) -> None:
    ext = _ext(tmp_path, 100)
    assert ext.put(CqExtUnit(1, 2, bytes(40000))) == PUT_FAILED  # > Short.MAX_VALUE
    assert ext.put(CqExtUnit(1, 2, bytes(90))) == PUT_FAILED  # never fits: 3 tries, 3 files ended
    assert ext.put_failures == 2
    with pytest.raises(ConfigError):
        _ext(tmp_path / "tiny", 23)
    with pytest.raises(ConfigError):
        MessageStoreConfig.small(str(tmp_path), enable_consume_queue_ext=True, mapped_file_size_consume_queue_ext=20)


def _reopen(root: Path, size: int = EXT_FILE) -> ConsumeQueueExt:
    ext = _ext(root, size)
    assert ext.load()
    ext.recover()
    return ext


def test_recover_cuts_the_last_file_at_its_units(tmp_path: Path) -> None:
    ext = _ext(tmp_path)
    addresses = [ext.put(CqExtUnit(i, i)) for i in range(60)]
    ext.flush(0)
    ext.shutdown()
    again = _reopen(tmp_path)
    assert again.get_max_address() == decorate(1000 + 11 * 20)
    assert again.mapped_file_queue.flushed_where == 1220
    assert again.mapped_file_queue.mapped_files[0].wrote_position == EXT_FILE  # earlier files trusted
    assert [again.get(a) for a in addresses] == [CqExtUnit(i, i) for i in range(60)]
    assert undecorate(again.put(CqExtUnit(99, 99))) == 1220
    again.shutdown()


def test_recover_of_a_last_file_ended_by_the_marker(tmp_path: Path) -> None:
    ext = _ext(tmp_path)
    for i in range(49):
        ext.put(CqExtUnit(i, i))
    ext.put(CqExtUnit(49, 49))  # ends file 0 with the marker, goes to file 1000
    ext.mapped_file_queue.delete_last_mapped_file()  # as if the new file was never made
    ext.flush(0)
    ext.shutdown()
    again = _reopen(tmp_path)
    # the walk stops at the marker: the file is no longer full, the next unit ends it again
    assert again.get_max_address() == decorate(980)
    assert undecorate(again.put(CqExtUnit(50, 50))) == 1000
    again.shutdown()


def test_truncate_by_max_and_min_address(tmp_path: Path) -> None:
    ext = _ext(tmp_path)
    addresses = [ext.put(CqExtUnit(i, i)) for i in range(150)]  # files 0, 1000, 2000, 3000
    ext.truncate_by_max_address(addresses[60])
    assert ext.get_max_address() == decorate(undecorate(addresses[60]) + 20)
    assert [f.file_from_offset for f in ext.mapped_file_queue.mapped_files] == [0, 1000]
    ext.truncate_by_max_address(decorate(5000))  # resolves to nothing: nothing happens
    ext.truncate_by_max_address(7)  # not an address
    assert ext.get_max_address() == decorate(undecorate(addresses[60]) + 20)
    # min: only files ending strictly before the address go
    assert ext.truncate_by_min_address(decorate(1000)) == []
    assert [s.offset for s in ext.truncate_by_min_address(decorate(1001))] == [0]
    assert ext.get_min_address() == decorate(1000)
    assert ext.get(addresses[49]) == CqExtUnit(49, 49)
    assert ext.get(addresses[48]) is None
    # RocketMQ's findMappedFileByOffset(0, true): address 0 falls back to the first file
    assert ext.get(decorate(0)) == CqExtUnit(49, 49)
    ext.destroy()
    assert not os.path.exists(ext.queue_dir)


def test_damage_is_a_corrupt_record_naming_the_file(tmp_path: Path) -> None:
    ext = _ext(tmp_path)
    for i in range(10):
        ext.put(CqExtUnit(i, i))
    mf = ext.mapped_file_queue.mapped_files[0]
    struct.pack_into(">h", mf.buffer, 100, 30000)  # unit 5's size runs past the file
    ext.flush(0)
    ext.shutdown()
    broken = _ext(tmp_path)
    assert broken.load()
    with pytest.raises(CorruptRecord) as exc:
        broken.recover()
    assert exc.value.offset == 100
    assert exc.value.file is not None
    assert exc.value.file.endswith("00000000000000000000")


# --- the store ----------------------------------------------------------------------------------


def _config(root: Path, ext: bool = True, **changes) -> MessageStoreConfig:
    return MessageStoreConfig.small(str(root), enable_consume_queue_ext=ext,
                                    mapped_file_size_consume_queue_ext=EXT_FILE, **changes)


def _open(root: Path, clock: ManualClock, ext: bool = True, **changes) -> MessageStore:
    return MessageStore.open(root, _config(root, ext, **changes), clock=clock, threaded=False)


def _write(store: MessageStore, clock: ManualClock, n: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    for i in range(n):
        msg = Message("Orders" if i % 5 else "Audit", b"m%d" % i, tags=rng.choice(TAGS), queue_id=rng.randrange(3))
        assert store.put_message(msg).ok
        clock.advance(rng.choice([0, 1, 7]))
        if i % 200 == 0:
            store.step()
    store.step()
    assert store.wait_dispatched()


def _check_units(store: MessageStore, expect_ext: bool = True) -> int:
    """Every CQ unit: its tags code is an ext address whose unit holds the record's tags code and
    store time. Returns the number of units checked."""
    checked = 0
    for _topic, _qid, cq in store.consume_queue_store.all_queues():
        for q in range(cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue()):
            off, size, tags = cq.get_unit(q)
            rec = store.look_message_by_offset(off, size)
            want = java_hash(rec.tags) if rec.tags else 0
            if not expect_ext:
                assert tags == want
                continue
            assert is_ext_addr(tags), (q, tags)
            assert cq.get_ext(tags) == CqExtUnit(want, rec.store_timestamp)
            checked += 1
    return checked


def _pull_all(store: MessageStore, topic: str, queue_id: int, expression: str) -> list[int]:
    """Commit log offsets of every message a consumer with this tag filter gets, pulling from 0."""
    got: list[int] = []
    offset = 0
    while True:
        with store.get_message("g", topic, queue_id, offset, 16, TagFilter(expression)) as r:
            got += [m.commit_log_offset for m in r.messages]
            if r.status not in (GetMessageStatus.FOUND, GetMessageStatus.NO_MATCHED_MESSAGE) or \
                    r.next_begin_offset == offset:
                return got
            offset = r.next_begin_offset


def _pulls(store: MessageStore) -> dict[tuple[str, int, str], list[int]]:
    return {(t, q, e): _pull_all(store, t, q, e) for t in ("Orders", "Audit") for q in range(3) for e in FILTERS}


@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
def test_dispatch_writes_ext_units_and_reopens(tmp_path: Path, version: str) -> None:
    clock = ManualClock(T0)
    store = _open(tmp_path / "s", clock, rocketmq_version=version)
    assert not store.reput.batching()  # ext units are written record by record
    _write(store, clock, 3000)
    assert _check_units(store) == 3000
    ext_files = sorted(os.listdir(tmp_path / "s" / "consumequeue_ext" / "Orders" / "0"))
    assert len(ext_files) > 10  # rolled, each ended by the marker
    pulls = _pulls(store)
    store.shutdown()
    store = _open(tmp_path / "s", clock, rocketmq_version=version)
    try:
        assert _check_units(store) == 3000
        assert _pulls(store) == pulls
        _write(store, clock, 300, seed=8)  # appends go on after the recovered end
        assert _check_units(store) == 3300
    finally:
        store.shutdown()


@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
def test_tag_filters_answer_as_without_ext(tmp_path: Path, version: str) -> None:
    results = []
    for ext in (False, True):
        clock = ManualClock(T0)
        store = _open(tmp_path / str(ext), clock, ext, rocketmq_version=version)
        try:
            _write(store, clock, 2000)
            _check_units(store, expect_ext=ext)
            results.append(_pulls(store))
        finally:
            store.shutdown()
    plain, with_ext = results
    assert with_ext == plain
    assert plain["Orders", 0, "TagA"]  # the filters do filter
    assert len(plain["Orders", 0, "TagA"]) < len(plain["Orders", 0, "*"])
    assert plain["Orders", 0, "TagX"] == []


@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
def test_abnormal_recovery_keeps_addresses_right(tmp_path: Path, version: str) -> None:
    clock = ManualClock(T0)
    store = _open(tmp_path / "s", clock, rocketmq_version=version)
    _write(store, clock, 2000)
    pulls = _pulls(store)
    ext_end = {(t, q): cq.consume_queue_ext.get_max_address() for t, q, cq in store.consume_queue_store.all_queues()}
    simulate_process_kill(store)
    store = _open(tmp_path / "s", clock, rocketmq_version=version)
    try:
        assert store.recovery_plan.mode == "abnormal"
        assert _check_units(store) == 2000
        assert _pulls(store) == pulls
        # re-dispatch puts an ext unit for every record before the CQ put finds it a duplicate
        # (putMessagePositionInfoWrapper): orphan units after the old end, never referenced
        grew = [k for k, cq in ((k, store.consume_queue_store.find_consume_queue(*k)) for k in ext_end)
                if cq.consume_queue_ext.get_max_address() > ext_end[k]]
        assert grew
        _write(store, clock, 200, seed=9)
        assert _check_units(store) == 2200
    finally:
        store.shutdown()


def test_an_unresolved_address_matches_every_filter(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    store = _open(tmp_path / "s", clock)
    _write(store, clock, 300)
    cq = store.consume_queue_store.find_consume_queue("Orders", 1)
    every = _pull_all(store, "Orders", 1, "*")
    tagged = _pull_all(store, "Orders", 1, "TagX")
    assert tagged == []
    # lose the ext run's units from the second file on, as a power loss before its flush would
    ext = cq.consume_queue_ext
    ext.mapped_file_queue.truncate_dirty_files(EXT_FILE)
    lost = [q for q in range(cq.get_max_offset_in_queue()) if cq.get_ext(cq.get_unit(q)[2]) is None]
    assert lost
    assert cq.resolve_tags_code(cq.get_unit(lost[0])[2]) is None
    got = _pull_all(store, "Orders", 1, "TagX")
    assert got == [every[q] for q in lost]  # RocketMQ passes a null tags code: a match
    assert cq.ext_misses >= len(lost)
    store.shutdown()


def test_opening_ext_files_with_the_flag_off(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock(T0)
    store = _open(tmp_path / "s", clock)
    _write(store, clock, 300)
    every = _pull_all(store, "Orders", 2, "*")
    store.shutdown()
    with caplog.at_level(logging.WARNING, logger="rmqlab.store.message_store"):
        store = _open(tmp_path / "s", clock, ext=False)
    try:
        assert "enable_consume_queue_ext is off" in caplog.text
        cq = store.consume_queue_store.find_consume_queue("Orders", 2)
        assert cq.consume_queue_ext is None
        assert is_ext_addr(cq.get_unit(0)[2])
        # RocketMQ without the flag has no ext run: every address is unresolved, every filter passes
        assert _pull_all(store, "Orders", 2, "TagX") == every
    finally:
        store.shutdown()
    assert os.path.isdir(tmp_path / "s" / "consumequeue_ext" / "Orders" / "2")  # left as it is


def test_cleanup_deletes_ext_files_with_their_cq_files(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    store = _open(tmp_path / "s", clock)
    try:
        _write(store, clock, 3000)
        cq = store.consume_queue_store.find_consume_queue("Orders", 0)
        ext = cq.consume_queue_ext
        n_cq, n_ext = len(cq.mapped_file_queue.mapped_files), len(ext.mapped_file_queue.mapped_files)
        assert n_cq >= 3
        # the commit log's min offset moves past the second CQ file's units
        second = cq.mapped_file_queue.mapped_files[1]
        min_phy = cq.get_unit(second.file_from_offset // 20 + 10)[0]
        store.consume_queue_store.delete_expired_files(min_phy)
        assert len(cq.mapped_file_queue.mapped_files) == n_cq - 1
        first_addr = undecorate(cq.get_unit(cq.get_min_offset_in_queue())[2])
        files = ext.mapped_file_queue.mapped_files
        assert len(files) < n_ext
        # every file ending before the new first unit's ext unit is gone, and only those
        assert files[0].file_from_offset <= first_addr < files[0].file_from_offset + 2 * EXT_FILE
        for q in range(cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue()):
            assert cq.get_ext(cq.get_unit(q)[2]) is not None
    finally:
        store.shutdown()


def test_destroy_removes_the_ext_run(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    store = _open(tmp_path / "s", clock)
    try:
        _write(store, clock, 100)
        assert store.consume_queue_store.destroy_queue("Orders", 0)
        assert not os.path.exists(tmp_path / "s" / "consumequeue_ext" / "Orders" / "0")
        assert store.delete_topics(["Audit"]) == ["Audit"]
        assert not os.path.exists(tmp_path / "s" / "consumequeue_ext" / "Audit")
    finally:
        store.shutdown()


@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
def test_delayed_messages_take_their_due_time_from_the_ext_unit(tmp_path: Path, version: str) -> None:
    clock = ManualClock(T0)
    store = _open(tmp_path / "s", clock, rocketmq_version=version)
    try:
        assert store.put_message(Message("Orders", b"later", tags="TagA", delay_time_level=3)).ok  # 10 s
        store.step()
        sched = store.consume_queue_store.find_consume_queue("SCHEDULE_TOPIC_XXXX", 2)
        address = sched.get_unit(0)[2]
        assert is_ext_addr(address)
        assert sched.get_ext(address).tags_code == T0 + 10_000  # the due time
        clock.advance(9_900)
        store.step()
        assert store.get_message("g", "Orders", 0, 0, 32).status is not GetMessageStatus.FOUND
        clock.advance(100)
        assert store.step()["schedule"] == 1
        with store.get_message("g", "Orders", 0, 0, 32, TagFilter("TagA")) as r:
            assert [m.body for m in r.messages] == [b"later"]
        cq = store.consume_queue_store.find_consume_queue("Orders", 0)
        assert cq.get_ext(cq.get_unit(0)[2]).tags_code == java_hash("TagA")
    finally:
        store.shutdown()


def test_a_lost_ext_unit_of_a_delayed_message_is_due_at_store_time_plus_delay(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    store = _open(tmp_path / "s", clock)
    try:
        assert store.put_message(Message("Orders", b"later", delay_time_level=2)).ok  # 5 s
        store.step()
        sched = store.consume_queue_store.find_consume_queue("SCHEDULE_TOPIC_XXXX", 1)
        mf = sched.consume_queue_ext.mapped_file_queue.mapped_files[0]
        mf.buffer[0:20] = bytes(20)  # the ext unit is gone
        assert sched.get_ext(sched.get_unit(0)[2]) is None
        clock.advance(4_900)
        store.step()
        assert store.get_message("g", "Orders", 0, 0, 32).status is not GetMessageStatus.FOUND
        clock.advance(100)
        assert store.step()["schedule"] == 1
    finally:
        store.shutdown()


def test_decode_of_a_written_unit_matches_the_codec(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    store = _open(tmp_path / "s", clock)
    try:
        assert store.put_message(Message("Orders", b"x", tags="TagB", queue_id=1)).ok
        store.step()
        ext = store.consume_queue_store.find_consume_queue("Orders", 1).consume_queue_ext
        raw = bytes(ext.mapped_file_queue.mapped_files[0].buffer[:20])
        assert raw[:2] == b"\x00\x14"  # size 20: no bitmap (enableCalcFilterBitMap is off)
        assert decode_at(raw, 0) == CqExtUnit(java_hash("TagB"), T0)
    finally:
        store.shutdown()


@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
def test_a_4_9_8_recovery_hash_in_an_ext_unit_still_waits_for_its_due_time(tmp_path: Path, version: str) -> None:
    """4.9.8's abnormal recovery dispatches schedule records before the delay levels are parsed:
    the ext unit's tags code is then the tag hash (0 here), as the plain unit's would be; rmqlab
    takes the due time from the record there too (RocketMQ 4.9.8 delivers at once)."""
    clock = ManualClock(T0)
    root = tmp_path / "s"
    store = _open(root, clock, rocketmq_version=version)
    store.put_message(Message("T", b"in two hours", delay_time_level=18))
    simulate_process_kill(store)  # before dispatch: recovery writes the unit
    store = _open(root, clock, rocketmq_version=version)
    try:
        cq = store.consume_queue_store.find_consume_queue("SCHEDULE_TOPIC_XXXX", 17)
        assert cq.get_ext(cq.get_unit(0)[2]).tags_code == (0 if version == "4.9.8" else T0 + 7_200_000)
        for _ in range(3):
            clock.advance(1_100)
            store.step()
        assert store.get_message("g", "T", 0, 0, 32).status is not GetMessageStatus.FOUND
        assert store.schedule.status()[17].recomputed == (1 if version == "4.9.8" else 0)
        clock.set(T0 + 7_200_000 + 100)
        store.step()
        with store.get_message("g", "T", 0, 0, 32) as r:
            assert [m.body for m in r.messages] == [b"in two hours"]
    finally:
        store.shutdown()


def test_clean_services_delete_ext_files_with_their_cq_files(tmp_path: Path) -> None:
    """The whole path: expired CommitLog files go (CleanCommitLogService), then the CQ files
    whose units all point below the new min offset (CleanConsumeQueueService), and with them
    (``correct_min_offset``) the ext files wholly before the new first unit's ext unit."""
    clock = ManualClock(T0)
    root = tmp_path / "s"
    config = _config(root, mapped_file_size_consume_queue=32 * 20)
    store = MessageStore.open(root, config, clock=clock, threaded=False, disk_probe=lambda _path: 0.5)
    try:
        _write(store, clock, 3000)
        cl_files = store.commit_log.mapped_file_queue.mapped_files
        assert len(cl_files) > 6
        old_ns = (clock.now_ms() - 100 * 3600 * 1000) * 1_000_000
        for mf in cl_files[:4]:
            os.utime(mf.file_name, ns=(old_ns, old_ns))
        ext_before = {(t, q): len(cq.consume_queue_ext.mapped_file_queue.mapped_files)
                      for t, q, cq in store.consume_queue_store.all_queues()}
        store.execute_delete_files_manually()
        for _ in range(5):
            clock.advance(1_000)
            store.step()
        min_phy = store.get_min_phy_offset()
        assert min_phy == cl_files[3].file_from_offset + config.mapped_file_size_commit_log
        shrunk = 0
        for topic, qid, cq in store.consume_queue_store.all_queues():
            ext = cq.consume_queue_ext
            lo = cq.get_min_offset_in_queue()
            assert cq.get_unit(lo)[0] >= min_phy
            first = undecorate(cq.get_unit(lo)[2])
            # no ext file that ends before the first unit's ext unit is left ...
            assert ext.mapped_file_queue.mapped_files[0].file_from_offset + EXT_FILE >= first
            shrunk += len(ext.mapped_file_queue.mapped_files) < ext_before[topic, qid]
            # ... and every unit consumers can still read resolves
            for q in range(lo, cq.get_max_offset_in_queue()):
                assert cq.get_ext(cq.get_unit(q)[2]) is not None
        assert shrunk
    finally:
        store.shutdown()


def test_threaded_store_with_ext(tmp_path: Path) -> None:
    """The real background services (reput, CQ flush with its ext runs, cleanup) with ext on."""
    root = tmp_path / "s"
    config = _config(root, flush_interval_consume_queue=10)
    with MessageStore.open(root, config, threaded=True) as store:
        for i in range(1500):
            assert store.put_message(Message("Orders", b"t%d" % i, tags=TAGS[i % 5], queue_id=i % 3)).ok
        assert store.wait_dispatched()
        assert _check_units(store) == 1500
        pulls = _pulls(store)
    with MessageStore.open(root, config, threaded=True) as store:
        assert store.recovery_plan.mode == "normal"
        assert _check_units(store) == 1500
        assert _pulls(store) == pulls


# --- against a model ------------------------------------------------------------------------------

_OPS = st.lists(st.one_of(
    st.tuples(st.just("put"), st.just(0)),
    st.tuples(st.just("reopen"), st.just(0)),  # flush, shut down, load, recover, cut at the last address
    st.tuples(st.just("truncate"), st.integers(0, 10_000)),  # truncate_by_max_address(some unit's address)
), max_size=60)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_OPS, st.sampled_from([100, 128, 333]), st.sampled_from([0, 1, 8, 40, 90]))
def test_ext_run_against_a_model(ops: list[tuple[str, int]], file_size: int, bitmap: int) -> None:
    """Addresses follow the fit rule (a unit goes where it fits before the 4 bytes kept, else at
    byte 0 of the next file), every unit reads back until cut, and a reopen -- recover, then the
    cut at the last address a CQ would hold -- keeps exactly the units up to there.

    One unit size per run (``bitmap`` bytes of bitmap; a broker's ``bitMapLengthConsumeQueueExt``
    is one size): with sizes mixed, a reopen after a cut can walk into stale bytes (below)."""
    with tempfile.TemporaryDirectory() as d:
        ext = _ext(Path(d), file_size)
        model: list[tuple[int, CqExtUnit]] = []
        cur, end = 0, 0  # the model's current file and where its units end
        for n, (op, arg) in enumerate(ops):
            if op == "put":
                unit = CqExtUnit(n, T0 + n, bytes([n % 256]) * bitmap if bitmap else None)
                if unit.size > file_size - 4:
                    assert ext.put(unit) == PUT_FAILED
                    continue
                if unit.size > file_size - end - 4:
                    cur, end = cur + file_size, 0
                address = ext.put(unit)
                assert undecorate(address) == cur + end
                end += unit.size
                model.append((address, unit))
            elif op == "truncate" and model:
                address, unit = model[arg % len(model)]
                ext.truncate_by_max_address(address)
                model = [(a, u) for a, u in model if a <= address]
                cur, end = undecorate(address) - undecorate(address) % file_size, 0
                end = undecorate(address) % file_size + unit.size
            elif op == "reopen":
                ext.flush(0)
                ext.shutdown()
                ext = _ext(Path(d), file_size)
                assert ext.load()
                ext.recover()
                ext.truncate_by_max_address(model[-1][0] if model else 1)
            for address, unit in model:
                assert ext.get(address) == unit
        ext.shutdown()


def test_mixed_unit_sizes_after_a_cut_stop_recovery_as_in_rocketmq(tmp_path: Path) -> None:
    """A cut does not zero what follows (truncateDirtyFiles only moves positions); a unit of
    another size written over the stale units then leaves the walk of the next recovery inside
    one of them. RocketMQ's ``readBySkip`` takes the bytes there for a size and throws once it
    leads past the file: its broker does not start. rmqlab raises CorruptRecord at that byte."""
    ext = _ext(tmp_path, 100)
    a = [ext.put(CqExtUnit(i, i)) for i in range(3)]  # 20-byte units at 0, 20, 40
    ext.truncate_by_max_address(a[0])  # the run ends at 20; bytes 20..60 still hold units 1, 2
    assert undecorate(ext.put(CqExtUnit(7, 7, b"x"))) == 20  # 21 bytes: 20..41
    ext.flush(0)
    ext.shutdown()
    again = _ext(tmp_path, 100)
    assert again.load()
    with pytest.raises(CorruptRecord) as exc:
        again.recover()
    assert exc.value.offset == 41  # inside stale unit 2: bytes 0x14 0x00 read as size 5120
    assert "5120" in str(exc.value)


def test_bulk_unit_puts_are_refused_with_an_ext_run(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    store = _open(tmp_path / "s", clock)
    try:
        cq = store.consume_queue_store.find_consume_queue("Orders", 0)
        one = np.array([0], dtype=np.int64)
        with pytest.raises(ConfigError, match="put_units"):
            cq.put_units(one, one + 100, one, one)
    finally:
        store.shutdown()
