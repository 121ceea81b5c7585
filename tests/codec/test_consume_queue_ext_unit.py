"""ConsumeQueueExt unit codec (spec §3.7, golden #20)."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rmqlab.codec.consume_queue_ext_unit import (
    END_BLANK_DATA_LENGTH,
    END_MARKER,
    MAX_ADDR,
    MAX_EXT_UNIT_SIZE,
    MAX_REAL_OFFSET,
    MIN_EXT_UNIT_SIZE,
    CqExtUnit,
    decode_at,
    decorate,
    encode,
    encode_into,
    fits,
    gather_units,
    is_ext_addr,
    undecorate,
    unit_size_at,
    units_end,
)
from rmqlab.errors import CorruptRecord, TruncatedRecord

_LONG = st.integers(-(2**63), 2**63 - 1)


def test_golden_unit_bytes() -> None:
    # the worked example of the module docstring: no bitmap -> 20 bytes, bitMapSize 0
    data = encode(CqExtUnit(2598919, 1700000000123))
    assert data.hex().upper() == "0014" "000000000027A807" "0000018BCFE5687B" "0000"
    assert MIN_EXT_UNIT_SIZE == 20
    assert MAX_EXT_UNIT_SIZE == 32767
    assert END_BLANK_DATA_LENGTH == 4
    # the default bitMapLengthConsumeQueueExt (64 bits) makes 28-byte units when a bitmap is set
    with_map = encode(CqExtUnit(-1, 0, bytes(range(8))))
    assert len(with_map) == 28
    assert with_map[:2] == b"\x00\x1c"
    assert with_map[18:20] == b"\x00\x08"
    assert with_map[20:] == bytes(range(8))


def test_golden_20_addresses() -> None:
    assert MAX_ADDR == -2147483649
    assert decorate(0) == -9223372036854775808
    assert decorate(100) == -9223372036854775708
    assert not is_ext_addr(-2147483648)
    assert undecorate(decorate(1040)) == 1040
    assert decorate(MAX_REAL_OFFSET) == MAX_ADDR


def test_end_marker_and_fit_rule() -> None:
    assert END_MARKER == b"\xff\xff"
    # 100-byte file: a 20-byte unit fits at 76 (100 - 76 - 4 = 20), not at 77
    assert fits(20, 100, 76)
    assert not fits(20, 100, 77)


def test_decode_stops_at_zero_and_marker() -> None:
    buf = bytearray(64)
    n = encode_into(buf, 0, CqExtUnit(7, 8))
    buf[n : n + 2] = END_MARKER
    assert decode_at(buf, 0) == CqExtUnit(7, 8)
    assert decode_at(buf, n) is None  # -1: the end marker
    assert decode_at(buf, n + 2) is None  # zeros
    assert decode_at(buf, 63) is None  # fewer than 2 bytes left
    assert unit_size_at(buf, n) == -1
    assert units_end(buf) == n
    with pytest.raises(TruncatedRecord):
        unit_size_at(buf, 63)


def test_damage_raises_with_offset() -> None:
    buf = bytearray(30)
    struct.pack_into(">h", buf, 0, 20)
    struct.pack_into(">h", buf, 20, 40)  # a size leading past the end
    with pytest.raises(CorruptRecord) as exc:
        units_end(buf)
    assert exc.value.offset == 20
    struct.pack_into(">h", buf, 20, 10)  # ends exactly at the end: no room for a size
    with pytest.raises(CorruptRecord) as exc:
        units_end(buf)
    assert exc.value.offset == 30
    short = encode(CqExtUnit(1, 2, b"abc"))[:21]
    with pytest.raises(TruncatedRecord):
        decode_at(short, 0)
    with pytest.raises(ValueError, match="MAX_EXT_UNIT_SIZE"):
        encode(CqExtUnit(1, 2, bytes(MAX_EXT_UNIT_SIZE)))


@given(st.lists(st.tuples(_LONG, _LONG, st.one_of(st.none(), st.binary(min_size=1, max_size=40))),
                max_size=20))  # fmt: skip
def test_round_trip_and_walk(units: list[tuple[int, int, bytes | None]]) -> None:
    buf = bytearray(sum(MIN_EXT_UNIT_SIZE + len(b or b"") for *_, b in units) + 4)
    pos = 0
    starts = []
    for tags, ts, bitmap in units:
        unit = CqExtUnit(tags, ts, bitmap)
        starts.append(pos)
        assert encode_into(buf, pos, unit) == unit.size
        assert decode_at(buf, pos) == unit
        pos += unit.size
    assert units_end(buf) == pos
    assert [decode_at(buf, p) for p in starts] == [CqExtUnit(*u) for u in units]


@given(st.integers(0, MAX_REAL_OFFSET))
def test_address_round_trip(offset: int) -> None:
    address = decorate(offset)
    assert is_ext_addr(address)
    assert -(2**63) <= address <= MAX_ADDR
    assert undecorate(address) == offset


@given(st.integers(-(2**31), 2**31 - 1))
def test_tags_hashes_are_never_addresses(tags_hash: int) -> None:
    assert not is_ext_addr(tags_hash)


@given(st.lists(st.tuples(_LONG, _LONG, st.one_of(st.none(), st.binary(min_size=1, max_size=9))), max_size=12),
       st.lists(st.integers(-5, 400), max_size=12))  # fmt: skip
def test_gather_units_agrees_with_decode_at(units: list[tuple[int, int, bytes | None]], extra: list[int]) -> None:
    buf = bytearray(300)
    starts, pos = [], 0
    for tags, ts, bitmap in units:
        unit = CqExtUnit(tags, ts, bitmap)
        if pos + unit.size > len(buf):
            break
        starts.append(pos)
        pos += encode_into(buf, pos, unit)
    positions = np.array(starts + extra, dtype=np.int64)
    found, tags, times = gather_units(bytes(buf), positions)
    for p, f, t, s in zip(positions.tolist(), found.tolist(), tags.tolist(), times.tolist(), strict=True):
        try:
            want = decode_at(buf, p) if p >= 0 and p + MIN_EXT_UNIT_SIZE <= len(buf) else None
        except TruncatedRecord:
            want = None  # a bitmap past the end: gather_units reads heads only
            want_head = struct.unpack_from(">hqq", buf, p)
            assert (f, t, s) == (True, want_head[1], want_head[2])
            continue
        assert f == (want is not None)
        if want is not None:
            assert (t, s) == (want.tags_code, want.msg_store_time)


@given(st.lists(st.tuples(_LONG, _LONG, st.one_of(st.none(), st.binary(min_size=1, max_size=30))), max_size=12),
       st.integers(0, 300), st.lists(st.integers(-5, 400), max_size=12))  # fmt: skip
def test_gather_whole_units_is_exactly_where_decode_at_returns_one(
        units: list[tuple[int, int, bytes | None]], cut: int, extra: list[int]) -> None:
    """``whole=True`` finds a unit exactly where ``decode_at`` returns one (not None, no raise),
    also in a buffer cut anywhere (a write position inside a unit, or inside its bitmap)."""
    buf = bytearray(300)
    starts, pos = [], 0
    for tags, ts, bitmap in units:
        unit = CqExtUnit(tags, ts, bitmap)
        if pos + unit.size > len(buf):
            break
        starts.append(pos)
        pos += encode_into(buf, pos, unit)
    data = bytes(buf[:cut])
    positions = np.array(starts + extra, dtype=np.int64)
    found, tags, _ = gather_units(data, positions, whole=True)
    for p, f, t in zip(positions.tolist(), found.tolist(), tags.tolist(), strict=True):
        try:
            want = decode_at(data, p)
        except TruncatedRecord:
            want = None
        assert f == (want is not None), p
        if want is not None:
            assert t == want.tags_code
