"""Checkpoint layout and derived timestamps (golden #17)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rmqlab.codec.checkpoint import CHECKPOINT_FILE_SIZE, Checkpoint
from rmqlab.errors import TruncatedRecord


def test_golden_17() -> None:
    cp = Checkpoint(physic_msg_timestamp=1700000010000, logics_msg_timestamp=1700000005000)
    assert cp.min_timestamp == 1700000002000
    cp = Checkpoint(1700000010000, 1700000005000, 1699999999000)
    assert cp.min_timestamp_index == 1699999999000
    assert Checkpoint().min_timestamp == 0  # clamped at 0


def test_layout() -> None:
    cp = Checkpoint(1, 2, 3, 4, 5)
    data = cp.pack()
    assert len(data) == CHECKPOINT_FILE_SIZE == 4096
    assert data[:40].hex() == "".join(f"{i:016x}" for i in range(1, 6))
    assert not any(data[40:])
    with pytest.raises(TruncatedRecord):
        Checkpoint.unpack(data[:39])


@given(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=5, max_size=5))
def test_round_trip(values: list[int]) -> None:
    cp = Checkpoint(*values)
    assert Checkpoint.unpack(cp.pack()) == cp
    buf = bytearray(4096)
    cp.pack_into(buf)
    assert Checkpoint.unpack(buf) == cp
