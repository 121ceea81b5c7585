"""CQ unit (golden #4) and ext addresses (golden #20)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqlab.codec.consume_queue_unit import (
    CQ_STORE_UNIT_SIZE,
    CQ_UNIT_DTYPE,
    MAX_ADDR,
    PRE_BLANK_UNIT,
    decorate,
    is_ext_addr,
    is_valid_unit,
    pack_unit,
    pack_unit_into,
    undecorate,
    units_view,
    unpack_unit,
    valid_prefix,
)


def test_golden_4() -> None:
    assert pack_unit(0, 187, 2598919).hex().upper() == "0000000000000000000000BB000000000027A807"
    assert PRE_BLANK_UNIT.hex().upper() == "00000000000000007FFFFFFF0000000000000000"
    assert CQ_STORE_UNIT_SIZE == CQ_UNIT_DTYPE.itemsize == 20


def test_golden_20_ext_addresses() -> None:
    assert MAX_ADDR == -2147483649
    assert decorate(0) == -9223372036854775808
    assert decorate(100) == -9223372036854775708
    assert undecorate(decorate(100)) == 100
    assert not is_ext_addr(-2147483648)
    assert is_ext_addr(MAX_ADDR)
    assert is_ext_addr(decorate(0))


def test_validity_rule() -> None:
    assert is_valid_unit(0, 0x7FFFFFFF)  # pre-blank units count as valid
    assert not is_valid_unit(0, 0)
    assert not is_valid_unit(-1, 10)


@given(st.lists(st.tuples(st.integers(-(2**63), 2**63 - 1), st.integers(-(2**31), 2**31 - 1),
                          st.integers(-(2**63), 2**63 - 1)), max_size=20))  # fmt: skip
def test_pack_unpack_and_view(units: list[tuple[int, int, int]]) -> None:
    buf = bytearray(len(units) * 20 + 7)  # trailing partial unit is ignored by the view
    for i, u in enumerate(units):
        pack_unit_into(buf, i * 20, *u)
        assert unpack_unit(buf, i * 20) == u
        assert bytes(buf[i * 20 : i * 20 + 20]) == pack_unit(*u)
    view = units_view(buf)
    assert len(view) == len(units)
    for row, u in zip(view, units, strict=True):
        assert (int(row["commit_log_offset"]), int(row["size"]), int(row["tags_code"])) == u


def test_units_view_is_zero_copy() -> None:
    buf = bytearray(40)
    view = units_view(buf)
    pack_unit_into(buf, 20, 123, 45, 6)
    assert int(view["commit_log_offset"][1]) == 123
    assert np.shares_memory(view, np.frombuffer(buf, dtype=np.uint8))


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 6000), st.lists(st.tuples(st.integers(0, 5999), st.sampled_from(["off", "size0", "sizeneg"])),
                                      max_size=4),
       st.sampled_from([1, 3, 1024]))
def test_valid_prefix_is_the_first_invalid_unit(n: int, bad: list[tuple[int, str]], first_chunk: int) -> None:
    """``valid_prefix`` (chunked) == the brute-force index of the first unit with offset < 0 or
    size <= 0, whatever the chunk boundaries; a pre-blank unit (0, 0x7FFFFFFF) is valid."""
    units = np.zeros(n, CQ_UNIT_DTYPE)
    units["commit_log_offset"] = np.arange(n) * 100
    units["size"] = 100
    if n:
        units[0] = np.frombuffer(PRE_BLANK_UNIT, CQ_UNIT_DTYPE)[0]
    for i, how in bad:
        if i < n:
            if how == "off":
                units[i]["commit_log_offset"] = -1
            else:
                units[i]["size"] = 0 if how == "size0" else -5
    invalid = (units["commit_log_offset"] < 0) | (units["size"] <= 0)
    want = int(np.argmax(invalid)) if invalid.any() else n
    assert valid_prefix(units, first_chunk) == want
    assert valid_prefix(units_view(units.tobytes() + bytes(7)), first_chunk) == want  # partial tail ignored
