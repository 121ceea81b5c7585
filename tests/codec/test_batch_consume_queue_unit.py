"""The 46-byte BatchConsumeQueue unit (spec §3.8): layout, offsets of the searched fields, validity."""

from __future__ import annotations

import struct

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from rmqlab.codec import batch_consume_queue_unit as bcq

longs = st.integers(-(2**63), 2**63 - 1)
ints = st.integers(-(2**31), 2**31 - 1)
shorts = st.integers(-(2**15), 2**15 - 1)


def test_golden_layout() -> None:
    raw = bcq.pack_unit(0x1122334455667788, 0x0A0B0C0D, -2, 1_700_000_000_123, 42, 7)
    assert len(raw) == bcq.BCQ_STORE_UNIT_SIZE == 46
    assert raw.hex() == (
        "1122334455667788" "0a0b0c0d" "fffffffffffffffe" "0000018bcfe5687b"
        "000000000000002a" "0007" "ffffffff" "00000000"
    )
    # the fields RocketMQ reads by absolute index
    assert struct.unpack_from(">q", raw, bcq.MSG_STORE_TIME_OFFSET_INDEX)[0] == 1_700_000_000_123
    assert struct.unpack_from(">q", raw, bcq.MSG_BASE_OFFSET_INDEX)[0] == 42
    assert struct.unpack_from(">h", raw, bcq.MSG_BATCH_SIZE_INDEX)[0] == 7
    assert struct.unpack_from(">i", raw, bcq.MSG_COMPACT_OFFSET_INDEX)[0] == bcq.INVALID_POS
    assert bcq.BCQ_FILE_SIZE == 13_800_000


@given(longs, ints, longs, longs, longs, shorts, ints, ints)
def test_pack_unpack_and_view_agree(o: int, s: int, t: int, ts: int, b: int, n: int, c: int, r: int) -> None:
    raw = bcq.pack_unit(o, s, t, ts, b, n, c, r)
    assert bcq.unpack_unit(raw, 0) == (o, s, t, ts, b, n, c, r)
    buf = bytearray(100)
    bcq.pack_unit_into(buf, 46, o, s, t, ts, b, n)
    assert bcq.unpack_unit(buf, 46) == (o, s, t, ts, b, n, -1, 0)
    view = bcq.units_view(bytes(buf))
    assert len(view) == 2  # 100 bytes: two whole units, the 8-byte tail ignored
    assert view[1].tolist() == (o, s, t, ts, b, n, -1, 0)


@given(st.lists(st.tuples(st.integers(-3, 3), st.integers(-3, 3), st.integers(-3, 3), st.integers(-3, 3)),
                max_size=40), st.integers(1, 8))
def test_valid_prefix_is_the_recovery_walk(units: list[tuple[int, int, int, int]], chunk: int) -> None:
    buf = b"".join(bcq.pack_unit(o, s, 0, 0, b, n) for o, s, b, n in units)
    expected = next((i for i, (o, s, b, n) in enumerate(units) if not bcq.is_valid_unit(o, s, b, n)), len(units))
    assert bcq.valid_prefix(bcq.units_view(buf), first_chunk=chunk) == expected


def test_all_zero_file_has_no_units() -> None:
    assert bcq.valid_prefix(bcq.units_view(bytes(46 * 10))) == 0
    assert bcq.units_view(b"").dtype == np.dtype(bcq.BCQ_UNIT_DTYPE)
