"""CQ unit (golden #4) and ext addresses (golden #20)."""

from __future__ import annotations

import numpy as np
from hypothesis import given
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
