"""The 5.x timer files' codecs: wheel slot, timerlog unit and blank, timercheck (spec 1.1, golden #1/#25)."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rmqlab.codec import (
    BLANK_MAGIC_CODE,
    TIMER_CHECKPOINT_FILE_SIZE,
    TIMER_LOG_BLANK_MAGIC_CODE,
    TIMER_LOG_FILE_SIZE,
    TIMER_LOG_UNIT_DTYPE,
    TIMER_WHEEL_FILE_SIZE,
    TimerCheckpoint,
    TimerLogUnit,
    TimerSlot,
    check_wheel_length,
    encode_timer_log_blank,
    is_magic_ok,
    non_empty_slots,
    scan_timer_log,
    slot_index,
)
from rmqlab.codec.timer_log import MIN_BLANK_LEN, UNIT_SIZE, needs_blank, offset_for_last_unit
from rmqlab.codec.timer_wheel import SLOT_SIZE, SLOTS_TOTAL, WHEEL_SLOTS, slot_position, wheel_length
from rmqlab.errors import CorruptRecord, TruncatedRecord

LONG = st.integers(-(2**63), 2**63 - 1)
INT = st.integers(-(2**31), 2**31 - 1)


# ------------------------------------------------------------------ golden facts
def test_golden_sizes_and_magic() -> None:
    assert SLOTS_TOTAL == 604_800
    assert WHEEL_SLOTS == 1_209_600
    assert TIMER_WHEEL_FILE_SIZE == wheel_length() == 38_707_200
    assert SLOT_SIZE == 32
    assert UNIT_SIZE == 52
    assert MIN_BLANK_LEN == 16
    assert TIMER_LOG_FILE_SIZE == 104_857_600
    assert TIMER_CHECKPOINT_FILE_SIZE == 4096
    # `0xBBCCDDEE ^ 1880681586 + 8`: + binds first -> 0xCBD43194, the commit log's blank magic
    assert TIMER_LOG_BLANK_MAGIC_CODE == BLANK_MAGIC_CODE == -875286124
    assert TIMER_LOG_BLANK_MAGIC_CODE & 0xFFFFFFFF == 0xCBD43194
    assert struct.unpack(">i", struct.pack(">I", (0xBBCCDDEE ^ 1880681586) + 8))[0] != TIMER_LOG_BLANK_MAGIC_CODE


def test_slot_index_is_ticks_modulo_two_weeks() -> None:
    t = 1_700_000_000_123
    assert slot_index(t) == (t // 1000) % 1_209_600 == 1_700_000_000 % 1_209_600
    assert slot_index(t, precision_ms=100) == (t // 100) % 1_209_600
    assert slot_index(t + 14 * 86_400_000) == slot_index(t)  # the ring wraps every 14 days at 1 s
    assert slot_position(3) == 96


def test_slot_layout_stores_ticks_not_ms() -> None:
    s = TimerSlot.for_time(1_700_000_005_999, first_pos=52, last_pos=104, num=2)
    assert s.time == 1_700_000_005
    assert s.time_ms() == 1_700_000_005_000
    assert s.pack().hex() == (f"{1_700_000_005:016x}" f"{52:016x}" f"{104:016x}" "00000002" "00000000")
    assert len(s.pack()) == 32


def test_unit_layout() -> None:
    u = TimerLogUnit(prev_pos=-1, magic=1, curr_write_time_ms=1_700_000_000_000, delayed_time_ms=1_700_000_010_000,
                     offset_py=4096, size_py=300, topic_hash=2598919)
    b = u.pack()
    assert len(b) == 52
    assert b.hex() == ("00000034" "ffffffffffffffff" "00000001" f"{1_700_000_000_000:016x}" f"{10_000:08x}"
                       f"{4096:016x}" f"{300:08x}" f"{2598919:08x}" "0000000000000000")
    assert np.frombuffer(b, TIMER_LOG_UNIT_DTYPE)[0]["delay_ms"] == 10_000


def test_blank_and_end_of_file_rule() -> None:
    assert encode_timer_log_blank(1000).hex() == "000003e8" "0000000000000000" "cbd43194"
    # a unit fits while 52 + 16 <= room
    assert not needs_blank(wrote=1040 - 68, file_size=1040)
    assert needs_blank(wrote=1040 - 67, file_size=1040)
    # the last unit a default file can hold (the cleanup reads it)
    last = offset_for_last_unit()
    assert last % UNIT_SIZE == 0
    assert not needs_blank(last)
    assert needs_blank(last + UNIT_SIZE)


def test_magic_rule() -> None:
    assert all(is_magic_ok(m) for m in (0, 1, 2, 3, 5, 7, 15))
    assert not is_magic_ok(16)
    assert not is_magic_ok(-1)
    assert not is_magic_ok(BLANK_MAGIC_CODE)


def test_wheel_length_check() -> None:
    check_wheel_length(0)
    check_wheel_length(38_707_200)
    with pytest.raises(CorruptRecord, match="timerwheel at offset 1000: length_mismatch"):
        check_wheel_length(1000, "timerwheel")
    with pytest.raises(CorruptRecord) as e:
        check_wheel_length(38_707_232, "timerwheel")
    assert e.value.offset == 38_707_200


# ------------------------------------------------------------------ round trips
@given(LONG, LONG, LONG, INT, INT, st.integers(0, WHEEL_SLOTS - 1))
def test_slot_round_trip(time: int, first: int, last: int, num: int, magic: int, index: int) -> None:
    s = TimerSlot(time, first, last, num, magic)
    assert TimerSlot.unpack(s.pack()) == s
    buf = bytearray(SLOT_SIZE * 4)
    s.pack_into(buf, 2)
    assert TimerSlot.unpack(buf, 2) == s
    with pytest.raises(TruncatedRecord):
        TimerSlot.unpack(buf, 4)


@given(LONG, INT, st.integers(0, 2**62), INT, LONG, INT, INT, LONG)
def test_unit_round_trip(prev: int, magic: int, write: int, delay: int, off: int, size_py: int, th: int,
                         reserved: int) -> None:
    u = TimerLogUnit(prev, magic, write, write + delay, off, size_py, th, UNIT_SIZE, reserved)
    assert TimerLogUnit.unpack(u.pack()) == u
    row = np.frombuffer(u.pack(), TIMER_LOG_UNIT_DTYPE)[0]
    assert (int(row["prev_pos"]), int(row["magic"]), int(row["curr_write_time_ms"]) + int(row["delay_ms"]),
            int(row["offset_py"]), int(row["topic_hash"])) == (prev, magic, write + delay, off, th)


@given(st.lists(LONG, min_size=7, max_size=7))
def test_checkpoint_round_trip(values: list[int]) -> None:
    cp = TimerCheckpoint(*values)
    data = cp.pack()
    assert len(data) == 4096
    assert not any(data[56:])
    assert data[:56].hex() == "".join(struct.pack(">q", v).hex() for v in values)
    assert TimerCheckpoint.unpack(data) == cp


def test_checkpoint_truncated_names_file_and_offset() -> None:
    with pytest.raises(TruncatedRecord, match="config/timercheck at offset 40"):
        TimerCheckpoint.unpack(bytes(40), file="config/timercheck")


# ------------------------------------------------------------------ vectorised decoders
@given(st.dictionaries(st.integers(0, 255), st.tuples(st.integers(1, 2**40), LONG, LONG, INT, INT),
                       max_size=20))
def test_non_empty_slots_finds_exactly_the_written_ones(written: dict[int, tuple[int, int, int, int, int]]) -> None:
    buf = bytearray(256 * SLOT_SIZE)
    for i, v in written.items():
        TimerSlot(*v).pack_into(buf, i)
    idx, slots = non_empty_slots(buf)
    assert idx.tolist() == sorted(written)
    for i, row in zip(idx.tolist(), slots, strict=True):
        assert TimerSlot(*(int(row[f]) for f in ("time", "first_pos", "last_pos", "num", "magic"))) == \
            TimerSlot(*written[i])


def _units(n: int) -> list[TimerLogUnit]:
    return [TimerLogUnit(i * 52 - 52 if i else -1, 1 + (i % 3) * 2, 1000, 5000 + i, i * 100, 100, 7)
            for i in range(n)]


@given(st.integers(0, 19))
def test_scan_stops_at_blank(n: int) -> None:
    file_size = 20 * 52 + 16
    buf = bytearray(file_size)
    for i, u in enumerate(_units(n)):
        u.pack_into(buf, i * 52)
    buf[n * 52:n * 52 + 16] = encode_timer_log_blank(file_size - n * 52)
    scan = scan_timer_log(buf)
    assert (len(scan.units), scan.end, scan.stop, scan.damaged) == (n, n * 52, "blank", False)
    assert scan.units["offset_py"].tolist() == [i * 100 for i in range(n)]


def test_scan_stops_at_zeros_end_and_damage() -> None:
    buf = bytearray(10 * 52)
    for i, u in enumerate(_units(3)):
        u.pack_into(buf, i * 52)
    assert (scan_timer_log(buf).stop, scan_timer_log(buf).end) == ("zeros", 156)
    full = bytearray(b"".join(u.pack() for u in _units(4)))
    assert scan_timer_log(full).stop == "end"
    assert len(scan_timer_log(full).units) == 4
    assert scan_timer_log(full[:200]).stop == "truncated"  # 3 units and 44 bytes of the fourth
    assert scan_timer_log(full[:200]).end == 156
    bad = bytearray(full)
    bad[2 * 52 + 12:2 * 52 + 16] = struct.pack(">i", 0x10)  # magic with a high bit
    scan = scan_timer_log(bad)
    assert (scan.stop, scan.end, len(scan.units)) == ("bad_unit", 104, 2)
    assert "magic 16" in scan.detail
    bad = bytearray(full)
    bad[52:56] = struct.pack(">i", 51)
    assert (scan_timer_log(bad).stop, scan_timer_log(bad).end) == ("bad_unit", 52)
    assert scan_timer_log(b"").stop == "end"
