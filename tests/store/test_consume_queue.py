"""ConsumeQueue against spec §3 and the RocketMQ code it mirrors: real files, tiny sizes.

Files hold 8 units (160 bytes) so queues roll after a few appends. Unit ``i`` of the helper
queues points at commit log offset ``PHY0 + 100*i`` with size 100 unless a test says otherwise.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqlab.codec.consume_queue_unit import PRE_BLANK_UNIT, pack_unit
from rmqlab.codec.java_hash import java_hash
from rmqlab.errors import InvalidTopic, ReadOnlyStore
from rmqlab.store.consume_queue import ConsumeQueue, OrderWarning

UNIT = 20
FILE = 8 * UNIT  # 8 units per file
V4, V5 = "4.9.8", "5.3.3"
BOTH = pytest.mark.parametrize("version", [V4, V5])
SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _root(tmp_path: Path) -> str:
    return str(tmp_path / "consumequeue")


def make_cq(root: str | Path, version: str = V4, size: int = FILE, **kw) -> ConsumeQueue:
    return ConsumeQueue("TopicT", 0, str(root), size, rocketmq_version=version, **kw)


def fill(cq: ConsumeQueue, phys: list[int], size: int = 100, first: int = 0) -> None:
    for i, phy in enumerate(phys):
        assert cq.put_message_position_info(phy, size, i, first + i)


def file_names(cq: ConsumeQueue) -> list[str]:
    return sorted(os.listdir(cq.queue_dir)) if os.path.isdir(cq.queue_dir) else []


def reopen(cq: ConsumeQueue) -> ConsumeQueue:
    cq.flush(0)
    cq.shutdown()
    new = make_cq(cq.store_path, cq.rocketmq_version, cq.mapped_file_size)
    assert new.load()
    return new


def set_unit(cq: ConsumeQueue, index: int, raw: bytes) -> None:
    """Byte surgery on the file holding unit ``index`` (through the live mapping)."""
    mf = cq.mapped_file_queue.find_mapped_file_by_offset(index * UNIT)
    pos = index * UNIT % cq.mapped_file_size
    mf.buffer[pos : pos + len(raw)] = raw


# --- layout and append ----------------------------------------------------------------------


def test_golden_4_unit_bytes_on_disk(tmp_path):
    cq = make_cq(_root(tmp_path))
    assert cq.put_message_position_info(0, 187, java_hash("TagA"), 0)
    path = Path(cq.queue_dir) / "00000000000000000000"
    assert path.parent == tmp_path / "consumequeue" / "TopicT" / "0"
    data = path.read_bytes()
    assert len(data) == FILE
    assert data[:20].hex() == "0000000000000000" "000000bb" "000000000027a807"
    assert data[20:] == bytes(FILE - 20)
    assert cq.max_physic_offset == 187
    assert (cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue()) == (0, 1)


def test_golden_4_pre_blank_bytes():
    assert PRE_BLANK_UNIT.hex() == "0000000000000000" "7fffffff" "0000000000000000"


def test_fill_pre_blank_when_first_unit_lands_past_zero(tmp_path):
    cq = make_cq(_root(tmp_path))
    # queue offset 10 = logic offset 200 -> second file (160..320), position 40
    assert cq.put_message_position_info(5000, 100, 7, 10)
    assert file_names(cq) == ["00000000000000000160"]
    data = (Path(cq.queue_dir) / "00000000000000000160").read_bytes()
    assert data[:40] == PRE_BLANK_UNIT * 2
    assert data[40:60] == pack_unit(5000, 100, 7)
    assert cq.min_logic_offset == 200
    assert cq.mapped_file_queue.flushed_where == 200
    assert cq.mapped_file_queue.committed_where == 200
    assert (cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue()) == (10, 11)
    assert cq.get_message_total_in_queue() == 1
    assert cq.get_unit(9) is None  # below min_logic_offset
    assert cq.get_unit(10) == (5000, 100, 7)
    units = cq.units()
    assert units.tolist() == [(0, 0x7FFFFFFF, 0), (0, 0x7FFFFFFF, 0), (5000, 100, 7)]
    assert cq.put_message_position_info(5100, 100, 8, 11)
    assert cq.get_max_offset_in_queue() == 12


def test_pre_blank_exactly_at_a_file_start_writes_none(tmp_path):
    cq = make_cq(_root(tmp_path))
    assert cq.put_message_position_info(5000, 100, 7, 16)
    assert file_names(cq) == ["00000000000000000320"]
    assert cq.units().tolist() == [(5000, 100, 7)]
    assert cq.get_min_offset_in_queue() == 16


def test_duplicates_are_skipped_without_writing(tmp_path):
    cq = make_cq(_root(tmp_path))
    fill(cq, [0, 100, 200, 300, 400])
    before = bytes(cq.mapped_file_queue.get_last_mapped_file().buffer)
    # 1. idempotence on the physical offset (offset + size <= max_physic_offset)
    assert cq.put_message_position_info(200, 100, 99, 2)
    assert cq.put_message_position_info(400, 100, 99, 5)  # ends exactly at max_physic_offset
    # 2. a queue offset below the current end, even with a new physical offset
    assert cq.put_message_position_info(1000, 10, 99, 1)
    assert bytes(cq.mapped_file_queue.get_last_mapped_file().buffer) == before
    assert cq.duplicates_skipped == 3
    assert cq.get_max_offset_in_queue() == 5
    assert cq.max_physic_offset == 500
    assert cq.order_warnings == []


def test_order_mismatch_is_appended_at_current_end_and_warned(tmp_path, caplog):
    cq = make_cq(_root(tmp_path))
    fill(cq, [0, 100, 200, 300, 400])
    assert cq.put_message_position_info(500, 100, 9, 7)  # expected 5
    assert cq.order_warnings == [OrderWarning(140, 100, 500, 100)]
    assert cq.get_unit(5) == (500, 100, 9)
    assert cq.get_max_offset_in_queue() == 6
    assert cq.max_physic_offset == 600
    assert "[BUG]logic queue order maybe wrong" in caplog.text


def test_cq_offset_zero_never_checks_order(tmp_path):
    # RocketMQ skips both checks for cqOffset == 0: a second "offset 0" unit is appended.
    cq = make_cq(_root(tmp_path))
    fill(cq, [0, 100])
    assert cq.put_message_position_info(900, 100, 1, 0)
    assert cq.get_max_offset_in_queue() == 3
    assert cq.order_warnings == []


def test_roll_across_files_and_index_buffers(tmp_path):
    cq = make_cq(_root(tmp_path))
    phys = [100 * i for i in range(20)]
    fill(cq, phys)
    assert file_names(cq) == [f"{i * FILE:020d}" for i in range(3)]
    assert (cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue()) == (0, 20)
    assert cq.get_last_offset() == 2000
    with cq.get_index_buffer(5) as sbr:
        assert (sbr.start_offset, sbr.size) == (100, 60)
        assert bytes(sbr.buffer[:20]) == pack_unit(500, 100, 5)
    with cq.get_index_buffer(8) as sbr:
        assert (sbr.start_offset, sbr.size) == (160, 160)
    with cq.get_index_buffer(19) as sbr:
        assert (sbr.start_offset, sbr.size) == (380, 20)
    assert cq.get_index_buffer(20) is None
    assert cq.get_index_buffer(24) is None
    assert cq.get_index_buffer(1000) is None
    assert [cq.get_unit(i)[0] for i in range(20)] == phys
    units = cq.units()
    assert units["commit_log_offset"].tolist() == phys
    assert units["tags_code"].tolist() == list(range(20))
    assert cq.units(6, 10)["commit_log_offset"].tolist() == phys[6:10]  # spans two files
    view = cq.units(8, 12)
    assert not view.flags.owndata  # one file: a zero-copy view over the mapping
    assert cq.units(18, 100)["commit_log_offset"].tolist() == phys[18:]
    assert cq.units(5, 5).size == 0


def test_roll_next_file(tmp_path):
    cq = make_cq(_root(tmp_path))
    assert [cq.roll_next_file(i) for i in (0, 5, 7, 8, 9)] == [8, 8, 8, 16, 16]
    default = ConsumeQueue("TopicT", 1, _root(tmp_path), 6_000_000)
    assert default.roll_next_file(300001) == 600000  # golden #21


def test_invalid_topic_and_sizes(tmp_path):
    with pytest.raises(InvalidTopic):
        ConsumeQueue("../etc", 0, _root(tmp_path), FILE)
    with pytest.raises(InvalidTopic):
        ConsumeQueue("a/b", 0, _root(tmp_path), FILE)
    with pytest.raises(ValueError, match="queue id"):
        ConsumeQueue("TopicT", -1, _root(tmp_path), FILE)
    with pytest.raises(Exception, match="multiple of 20"):
        ConsumeQueue("TopicT", 0, _root(tmp_path), 150)
    assert ConsumeQueue("%RETRY%group_1", 3, _root(tmp_path), FILE).queue_dir.endswith(
        os.path.join("%RETRY%group_1", "3")
    )


# --- recover ---------------------------------------------------------------------------------


def test_recover_after_reopen_restores_positions(tmp_path):
    cq = make_cq(_root(tmp_path))
    fill(cq, [100 * i for i in range(20)], size=50)
    cq = reopen(cq)
    assert cq.get_max_offset_in_queue() == 24  # loaded files count as full until recovered
    cq.recover()
    assert cq.get_max_offset_in_queue() == 20
    assert cq.max_physic_offset == 1950
    assert cq.mapped_file_queue.flushed_where == 400
    assert cq.mapped_file_queue.committed_where == 400
    last = cq.mapped_file_queue.get_last_mapped_file()
    assert (last.wrote_position, last.committed_position, last.flushed_position) == (80, 80, 80)
    assert cq.put_message_position_info(2000, 50, 0, 20)
    assert cq.get_unit(20) == (2000, 50, 0)


def test_recover_cuts_a_torn_last_unit(tmp_path):
    cq = make_cq(_root(tmp_path))
    fill(cq, [100 * i for i in range(20)])
    set_unit(cq, 18, bytes(20))  # ... and unit 19 stays behind it, unreachable
    set_unit(cq, 18, (1800).to_bytes(8, "big"))  # a torn write: offset only, size still 0
    cq = reopen(cq)
    cq.recover()
    assert cq.get_max_offset_in_queue() == 18
    assert cq.max_physic_offset == 1800
    # truncation is logical: the bytes after the new end are not zeroed
    data = (Path(cq.queue_dir) / "00000000000000000320").read_bytes()
    assert data[60:80] == pack_unit(1900, 100, 19)


def test_recover_scans_only_the_last_three_files(tmp_path):
    cq = make_cq(_root(tmp_path))
    fill(cq, [100 * i for i in range(40)])  # 5 full files
    set_unit(cq, 3, pack_unit(300, -1, 3))  # damage in file 0: not scanned, trusted
    cq = reopen(cq)
    cq.recover()
    assert cq.get_max_offset_in_queue() == 40
    assert cq.get_unit(3) == (300, -1, 3)
    assert cq.max_physic_offset == 4000
    # damage in the third-from-last file (index 2 of 5): cut there, later files deleted
    set_unit(cq, 18, pack_unit(1800, 0, 18))
    cq = reopen(cq)
    cq.recover()
    assert cq.get_max_offset_in_queue() == 18
    assert cq.max_physic_offset == 1800
    assert file_names(cq) == [f"{i * FILE:020d}" for i in range(3)]


def test_recover_keeps_an_empty_last_file(tmp_path):
    cq = make_cq(_root(tmp_path))
    fill(cq, [100 * i for i in range(16)])  # exactly two full files
    cq.mapped_file_queue.get_last_mapped_file_for(16 * UNIT)  # an empty third file
    cq = reopen(cq)
    cq.recover()
    assert len(file_names(cq)) == 3
    assert cq.get_max_offset_in_queue() == 16
    assert cq.max_physic_offset == 1600


def test_recover_empty_queue(tmp_path):
    cq = make_cq(_root(tmp_path))
    assert cq.load()
    cq.recover()
    assert cq.max_physic_offset == -1
    assert (cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue()) == (0, 0)
    assert cq.get_last_offset() == -1
    assert cq.units().size == 0


# --- truncate_dirty_logic_files ------------------------------------------------------------------


@SETTINGS
@given(
    n=st.integers(1, 30),
    gaps=st.lists(st.integers(1, 300), min_size=30, max_size=30),
    cut=st.integers(0, 10_000),
    version=st.sampled_from([V4, V5]),
)
def test_truncate_dirty_logic_files_against_model(tmp_path_factory, n, gaps, cut, version):
    root = tmp_path_factory.mktemp("trunc") / "consumequeue"
    cq = make_cq(root, version)
    phys = list(np.cumsum(gaps[:n]).tolist())
    fill(cq, phys, size=7)
    cq.truncate_dirty_logic_files(cut)
    # RocketMQ keeps units with p < cut; rmqlab also drops one whose record would end past the
    # cut (recovery cuts between records, so such a unit is garbage). Ends increase: a prefix.
    kept = [p for p in phys if p + 7 <= cut]
    k = len(kept)
    assert cq.get_max_offset_in_queue() == k
    assert cq.max_physic_offset == (kept[-1] + 7 if kept else cut)
    assert cq.units()["commit_log_offset"].tolist() == kept
    # files wholly after the cut are gone; the last file is the one holding unit k-1
    expected_files = (k - 1) // 8 + 1 if k else 0
    assert len(file_names(cq)) == expected_files
    if k:
        assert cq.mapped_file_queue.get_last_mapped_file().wrote_position == ((k - 1) % 8 + 1) * 20
    cq.shutdown()


def test_truncate_keeps_unit_zero_without_the_size_test(tmp_path):
    # RocketMQ 4.9.8/5.3.3 quirk: unit 0 of the last file only has to point below phyOffset.
    cq = make_cq(_root(tmp_path))
    fill(cq, [100 * i for i in range(8)])
    cq.mapped_file_queue.get_last_mapped_file_for(8 * UNIT)  # empty last file: unit 0 = zeros
    cq.truncate_dirty_logic_files(10_000)
    assert len(file_names(cq)) == 2
    assert cq.get_max_offset_in_queue() == 9
    assert cq.max_physic_offset == 0
    # with phyOffset 0 the zero unit points "at or past" it and the file goes
    cq.truncate_dirty_logic_files(0)
    assert file_names(cq) == []
    assert cq.max_physic_offset == 0


def test_truncate_stops_at_an_invalid_unit_after_unit_zero(tmp_path):
    cq = make_cq(_root(tmp_path))
    fill(cq, [100 * i for i in range(6)])
    set_unit(cq, 3, pack_unit(300, 0, 3))
    cq.truncate_dirty_logic_files(10_000)
    assert cq.get_max_offset_in_queue() == 3
    assert cq.max_physic_offset == 300


@pytest.mark.parametrize(
    ("units", "cut", "expected"),
    [
        ([(0, 100), (100, 100), (200, 100)], 300, (3, None)),  # all below the end
        ([(0, 100), (100, 100), (200, 100)], 200, (2, None)),  # RocketMQ's rule: offset >= cut
        ([(0, 100), (100, 490_000_000), (200, 100)], 300, (1, 1)),  # garbage size: cut there
        ([(0, 100), (150, 100), (250, 100)], 200, (1, 1)),  # straddles the end: garbage
        ([(0, 400)], 300, (0, 0)),  # unit 0 itself: the file goes, as when it points past the end
        ([(0, 0x7FFFFFFF), (0, 0x7FFFFFFF), (100, 50)], 150, (3, None)),  # pre-blank units are not garbage
        ([(0, 100), (100, 0), (200, 100)], 300, (1, None)),  # size 0 past unit 0: RocketMQ stops
        ([(500, 100)], 300, (0, None)),  # unit 0 at or past the end: RocketMQ deletes the file
        ([], 300, (0, None)),
    ],
)
def test_truncation_point(units, cut, expected):
    from rmqlab.store.consume_queue import truncation_point

    offsets = np.array([u[0] for u in units], dtype=">i8")
    sizes = np.array([u[1] for u in units], dtype=">i4")
    assert truncation_point(offsets, sizes, cut) == expected


def test_truncate_reports_a_unit_ending_past_the_log(tmp_path):
    cq = make_cq(_root(tmp_path))
    fill(cq, [100 * i for i in range(6)])
    set_unit(cq, 4, pack_unit(400, 490_000_000, 4))  # a torn size: its "end" is 490 MB away
    assert cq.units_past_log(600)[0].offset == 4 * UNIT  # the dry run says the same, changing nothing
    assert cq.get_max_offset_in_queue() == 6
    cuts = cq.truncate_dirty_logic_files(600)
    assert [(s.phase, s.offset, s.decision) for s in cuts] == [
        ("consume_queue", 4 * UNIT, "truncate at a unit ending past the log")]
    assert "ending at 490000400, past the log's end 600" in cuts[0].reason
    assert "RocketMQ 4.9.8/5.3.3 keeps it" in cuts[0].reason
    assert cq.get_max_offset_in_queue() == 4
    assert cq.max_physic_offset == 400  # not 490000400: dispatch starts inside the log


# --- delete_expired_file / correct_min_offset -----------------------------------------------------


@BOTH
def test_delete_expired_file(tmp_path, version):
    cq = make_cq(_root(tmp_path), version)
    fill(cq, [100 * i for i in range(20)])
    assert cq.delete_expired_file(1000) == 1  # file 0's last unit points at 700 < 1000
    assert file_names(cq) == ["00000000000000000160", "00000000000000000320"]
    assert cq.get_min_offset_in_queue() == 10
    assert cq.get_index_buffer(9) is None
    assert cq.get_unit(10) == (1000, 100, 10)
    assert cq.delete_expired_file(1000) == 0


@BOTH
def test_delete_expired_file_never_deletes_the_last_file(tmp_path, version):
    cq = make_cq(_root(tmp_path), version)
    fill(cq, [100 * i for i in range(20)])
    assert cq.delete_expired_file(10**9) == 2
    assert file_names(cq) == ["00000000000000000320"]
    if version == V4:
        # 4.9.8: no unit of the first file reaches min_phy -> unchanged (still 0)
        assert cq.get_min_offset_in_queue() == 0
    else:
        # 5.3.3: the last unit expired -> min points past the end
        assert cq.get_min_offset_in_queue() == 20
    assert cq.get_max_offset_in_queue() == 20


@pytest.mark.parametrize(("version", "expected"), [(V4, 8), (V5, 9)])
def test_correct_min_offset_covers_pre_blank_after_restart(tmp_path, version, expected):
    """spec §3.2 note: pre-blank units (offset 0) satisfy "offset >= minPhy" when minPhy is 0.

    4.9.8 scans linearly and lands on the first pre-blank (8). 5.3.3's binary search stops at
    the first probe equal to minPhy, here the second pre-blank (9): the units are not strictly
    increasing, so "first unit >= minPhy" is not what it finds.
    """
    cq = make_cq(_root(tmp_path), version)
    fill(cq, [5000, 5100], first=10)
    assert cq.get_min_offset_in_queue() == 10
    cq = reopen(cq)
    cq.recover()
    assert cq.get_max_offset_in_queue() == 12
    assert cq.get_min_offset_in_queue() == 0  # load resets it
    cq.correct_min_offset(0)
    assert cq.get_min_offset_in_queue() == expected
    cq.correct_min_offset(5000)
    assert cq.get_min_offset_in_queue() == 10
    cq.shutdown()


def _model_v4(files: list[list[int]], first_from: int, min_logic: int, m: int) -> int:
    for i, phy in enumerate(files[0]):
        if phy >= m:
            return first_from + i * UNIT
    return min_logic


def _model_v5(files: list[list[int]], first_from: int, min_logic: int, m: int) -> int:
    max_offset = first_from + (len(files) - 1) * FILE + len(files[-1]) * UNIT
    if min_logic >= max_offset:
        return min_logic
    if files[-1] and files[-1][-1] < m:
        return max_offset
    start = min_logic - first_from
    intact = start >= 0
    start = max(start, 0) // UNIT
    units = files[0]
    if start >= len(units):
        return min_logic
    if intact and units[start] >= m:
        return min_logic
    for i in range(start, len(units)):
        if units[i] >= m:
            return first_from + i * UNIT
    return min_logic


@SETTINGS
@given(
    n=st.integers(1, 30),
    gaps=st.lists(st.integers(1, 50), min_size=30, max_size=30),
    calls=st.lists(st.tuples(st.integers(0, 1600), st.booleans()), min_size=1, max_size=5),
    version=st.sampled_from([V4, V5]),
)
def test_correct_min_offset_against_sorted_list_model(tmp_path_factory, n, gaps, calls, version):
    """Both variants vs a plain model, over calls mixing correct_min_offset and deletions."""
    root = tmp_path_factory.mktemp("cmo") / "consumequeue"
    cq = make_cq(root, version)
    phys = list(np.cumsum(gaps[:n]).tolist())
    fill(cq, phys, size=1)
    files = [phys[i : i + 8] for i in range(0, n, 8)]
    first_from = 0
    min_logic = 0
    model = _model_v4 if version == V4 else _model_v5
    for m, delete in calls:
        if delete:
            # deleteExpiredFile: leading files (not the last) whose last unit is below m
            while len(files) > 1 and len(files[0]) == 8 and files[0][-1] < m:
                files.pop(0)
                first_from += FILE
            cq.delete_expired_file(m)
        else:
            cq.correct_min_offset(m)
        min_logic = model(files, first_from, min_logic, m)
        assert cq.min_logic_offset == min_logic, (m, delete)
    assert file_names(cq) == [f"{first_from + i * FILE:020d}" for i in range(len(files))]
    cq.shutdown()


# --- get_offset_in_queue_by_time ------------------------------------------------------------


def pickup_from(times: dict[int, int], cl_min: int = 0):
    """A fake ``CommitLog.pickupStoreTimestamp``: -1 below the min offset or when unknown."""

    def pickup(phy: int, size: int) -> int:
        if phy < cl_min:
            return -1
        return times.get(phy, -1)

    return pickup


def queue_with_times(root, version, times: list[int]) -> tuple[ConsumeQueue, dict[int, int]]:
    cq = make_cq(root, version)
    phys = [1000 + 100 * i for i in range(len(times))]
    fill(cq, phys)
    return cq, dict(zip(phys, times, strict=True))


def by_time(cq, ts, times, boundary="LOWER", cl_min=0):
    return cq.get_offset_in_queue_by_time(
        ts, commit_log_min_offset=cl_min, pickup_store_timestamp=pickup_from(times),
        boundary=boundary,
    )


EQUAL = [100, 200, 200, 200, 200, 300, 400, 500]  # one full file, a run of equal store times


@pytest.mark.parametrize(
    ("ts", "v4", "lower", "upper"),
    [
        # exact hit inside a run: 4.9.8 returns whichever unit the search lands on (issue 4890/
        # 5445: "not the first message with that time"); 5.3.3 walks to the run's boundary
        (200, 3, 1, 4),
        (100, 0, 0, 0),
        (500, 7, 7, 7),
        # between two times: 4.9.8 nearest (tie -> left); 5.3.3 LOWER right / UPPER left
        (250, 4, 5, 4),
        (260, 5, 5, 4),
        (440, 6, 7, 6),
        (460, 7, 7, 6),
        # before the first / after the last
        (50, 0, 0, 0),
        (1000, 7, 8, 7),
    ],
)
def test_by_time_equal_timestamps_one_file(tmp_path, ts, v4, lower, upper):
    cq4, times = queue_with_times(tmp_path / "a", V4, EQUAL)
    cq5, _ = queue_with_times(tmp_path / "b", V5, EQUAL)
    assert by_time(cq4, ts, times) == v4
    assert by_time(cq5, ts, times, "LOWER") == lower
    assert by_time(cq5, ts, times, "UPPER") == upper


def test_by_time_4_9_rejects_upper(tmp_path):
    cq, times = queue_with_times(tmp_path, V4, EQUAL)
    with pytest.raises(ValueError, match=r"4\.9\.8"):
        by_time(cq, 200, times, "UPPER")
    with pytest.raises(ValueError, match="boundary"):
        by_time(cq, 200, times, "MIDDLE")


# 20 units over 3 files; units 6..9 share 1060 across the file 0 / file 1 boundary
ACROSS = [1000 + 10 * i for i in range(20)]
ACROSS[6:10] = [1060] * 4


def _set_mtimes(cq: ConsumeQueue, mtimes_ms: list[int]) -> None:
    for name, ms in zip(file_names(cq), mtimes_ms, strict=True):
        os.utime(Path(cq.queue_dir) / name, ns=(ms * 1_000_000, ms * 1_000_000))


@pytest.mark.parametrize(
    ("ts", "expected"),
    [
        (1060, 6),  # file 0 (mtime 1075 >= ts); exact hit at unit 6
        (1065, 7),  # file 0; no hit, only smaller values -> the left neighbour
        (1100, 10),  # file 1 (mtime 1155); exact hit
        (1170, 17),  # file 2 (mtime 2000)
        (999, 0),
        (5000, 19),  # no file is that new: the last file
    ],
)
def test_by_time_v4_file_chosen_by_mtime(tmp_path, ts, expected):
    cq, times = queue_with_times(tmp_path, V4, ACROSS)
    _set_mtimes(cq, [1075, 1155, 2000])
    assert by_time(cq, ts, times) == expected


def test_by_time_v4_mtime_quirk(tmp_path):
    # A first file touched late is chosen for every timestamp up to its mtime: the answer is
    # then the nearest unit *inside that file* (what the reference store shows, e.g. 64 for 32).
    cq, times = queue_with_times(tmp_path, V4, ACROSS)
    _set_mtimes(cq, [9999, 9999, 9999])
    assert by_time(cq, 1150, times) == 7
    assert by_time(cq, 1150, times) != 15


def test_by_time_v4_units_below_commit_log_min_and_missing_records(tmp_path):
    cq, times = queue_with_times(tmp_path, V4, EQUAL)
    # every unit below the CommitLog min: left moves, no value -> offset -1, Java (0-1)/20 == 0
    assert by_time(cq, 300, times, cl_min=10**9) == 0
    # units 0..3 below the min: the search only sees 4..7
    assert by_time(cq, 200, times, cl_min=1400) == 4
    # a record the CommitLog no longer has ends the search with 0
    gone = dict(times)
    del gone[1300]
    assert by_time(cq, 200, gone) == 0


def test_by_time_v4_java_truncating_division_in_a_later_file(tmp_path):
    cq, times = queue_with_times(tmp_path, V4, ACROSS)
    _set_mtimes(cq, [1, 1, 2000])
    # file 2 chosen; all its units below the CommitLog min -> offset -1 -> (320 - 1) / 20 = 15
    assert by_time(cq, 1500, times, cl_min=10**9) == 15


@pytest.mark.parametrize(
    ("ts", "lower", "upper"),
    [
        (1060, 6, 9),  # the run spans files: LOWER picks file 0, UPPER file 1
        (1000, 0, 0),
        (1055, 6, 5),
        (1100, 10, 10),
        (1190, 19, 19),
        (1195, 20, 19),  # after the last: LOWER = max offset, UPPER = last unit
        (500, 0, 0),  # before the first: LOWER = first file start, UPPER: no file -> 0
    ],
)
def test_by_time_v5_across_files(tmp_path, ts, lower, upper):
    cq, times = queue_with_times(tmp_path, V5, ACROSS)
    _set_mtimes(cq, [1, 1, 1])  # 5.x ignores mtimes
    assert by_time(cq, ts, times, "LOWER") == lower
    assert by_time(cq, ts, times, "UPPER") == upper


def test_by_time_v5_after_the_last_unit_of_a_partial_last_file(tmp_path):
    cq, times = queue_with_times(tmp_path, V5, ACROSS[:19])  # last file: 3 units
    assert by_time(cq, 10**6, times, "LOWER") == 19
    assert by_time(cq, 10**6, times, "UPPER") == 18


@SETTINGS
@given(
    deltas=st.lists(st.integers(0, 3), min_size=1, max_size=30),
    ts=st.integers(0, 120),
)
def test_by_time_v5_is_bisect_on_sorted_times(tmp_path_factory, deltas, ts):
    """With non-decreasing store times (a real queue) 5.3.3 LOWER/UPPER are exact boundaries."""
    import bisect

    times_list = list(np.cumsum([10, *deltas[1:]]).tolist())
    cq, times = queue_with_times(tmp_path_factory.mktemp("bt") / "consumequeue", V5, times_list)
    n = len(times_list)
    lower = bisect.bisect_left(times_list, ts)
    upper = bisect.bisect_right(times_list, ts) - 1
    assert by_time(cq, ts, times, "LOWER") == lower
    assert by_time(cq, ts, times, "UPPER") == max(upper, 0)
    assert 0 <= lower <= n
    cq.shutdown()


def test_by_time_empty_queue(tmp_path):
    for version in (V4, V5):
        cq = make_cq(tmp_path / version, version)
        assert by_time(cq, 123, {}) == 0


# --- lifecycle ---------------------------------------------------------------------------------


def test_flush_destroy_and_read_only(tmp_path):
    cq = make_cq(_root(tmp_path))
    fill(cq, [100 * i for i in range(10)])
    assert cq.flush(0) is False  # something moved
    assert cq.mapped_file_queue.flushed_where == 160  # one file per call, as RocketMQ
    cq.flush(0)
    assert cq.mapped_file_queue.flushed_where == 200
    assert cq.flush(0) is True
    cq.shutdown()

    ro = make_cq(_root(tmp_path), read_only=True)
    assert ro.load()
    ro.recover()
    assert ro.get_max_offset_in_queue() == 10
    assert ro.get_unit(9) == (900, 100, 9)
    with pytest.raises(ReadOnlyStore):
        ro.put_message_position_info(1000, 100, 0, 10)
    with pytest.raises(ReadOnlyStore):
        ro.truncate_dirty_logic_files(0)
    with pytest.raises(ReadOnlyStore):
        ro.destroy()
    ro.shutdown()

    cq = make_cq(_root(tmp_path))
    assert cq.load()
    cq.recover()
    cq.destroy()
    assert file_names(cq) == []
    assert (cq.max_physic_offset, cq.min_logic_offset, cq.get_max_offset_in_queue()) == (-1, 0, 0)


def test_recover_and_truncate_publish_recovery_steps(tmp_path):
    from rmqlab.events import EventBus, EventRecorder, RecoveryStep

    cq = make_cq(_root(tmp_path))
    fill(cq, [100 * i for i in range(10)])
    cq.flush(0)
    cq.shutdown()
    bus = EventBus()
    recorder = EventRecorder(bus)
    cq = make_cq(_root(tmp_path), bus=bus)
    assert cq.load()
    cq.recover()
    cq.truncate_dirty_logic_files(800)  # a record boundary, as recovery's cuts are
    steps = [(s.phase, os.path.basename(s.file), s.offset, s.decision)
             for s in recorder.of(RecoveryStep)]
    assert steps == [
        ("consume_queue", "00000000000000000160", 200, "truncate"),
        ("consume_queue", "00000000000000000160", 160, "delete"),
        ("consume_queue", "00000000000000000000", 160, "truncate"),
    ]
    assert cq.get_max_offset_in_queue() == 8


def _truncation_point_whole(offsets, sizes, phy_offset):
    """The rule over the whole file at once (the implementation before the chunked one)."""
    if not len(offsets):
        return 0, None
    offsets = offsets.astype(np.int64)
    ends = offsets + sizes.astype(np.int64)
    past = (offsets < phy_offset) & (ends > phy_offset) & ~((offsets == 0) & (sizes == 0x7FFFFFFF))
    if int(offsets[0]) >= phy_offset:
        return 0, None
    if past[0]:
        return 0, 0
    hits = np.flatnonzero((offsets[1:] < 0) | (sizes[1:] <= 0) | (offsets[1:] >= phy_offset) | past[1:])
    if not hits.size:
        return len(offsets), None
    kept = 1 + int(hits[0])
    return kept, kept if past[kept] else None


@settings(max_examples=150, deadline=None)
@given(n=st.integers(0, 6000), cut=st.integers(-10, 700_000),
       edits=st.lists(st.tuples(st.integers(0, 5999), st.sampled_from(["neg", "zero", "huge", "blank", "big"])),
                      max_size=5))
def test_truncation_point_chunks_agree_with_the_whole_file(n, cut, edits):
    """Looked at in growing chunks, the answer is the one a pass over the whole file gives,
    wherever the stop falls (chunk boundaries at units 1, 1025, 5121)."""
    from rmqlab.store.consume_queue import truncation_point

    offsets = (np.arange(n, dtype=np.int64) * 100).astype(">i8")
    sizes = np.full(n, 100, dtype=">i4")
    for i, how in edits:
        if i < n:
            if how == "neg":
                offsets[i] = -1
            elif how == "zero":
                sizes[i] = 0
            elif how == "huge":
                sizes[i] = 490_000_000
            elif how == "blank":
                offsets[i], sizes[i] = 0, 0x7FFFFFFF
            else:
                offsets[i] = 10**9
    assert truncation_point(offsets, sizes, cut) == _truncation_point_whole(offsets, sizes, cut)
