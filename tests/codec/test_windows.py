"""byte_windows is numpy's sliding_window_view, made cheaper: same rows, read-only, same refusals."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numpy.lib.stride_tricks import sliding_window_view

from rmqlab.codec.windows import byte_windows


@given(st.binary(min_size=1, max_size=300), st.data())
def test_rows_equal_sliding_window_view(raw: bytes, data: st.DataObject) -> None:
    u8 = np.frombuffer(raw, dtype=np.uint8)
    width = data.draw(st.integers(1, len(raw)))
    pos = np.array(data.draw(st.lists(st.integers(0, len(raw) - width), max_size=20)), dtype=np.int64)
    got = byte_windows(u8, width)
    assert got.shape == (len(raw) - width + 1, width)
    assert np.array_equal(got, sliding_window_view(u8, width))
    assert np.array_equal(got[pos], sliding_window_view(u8, width)[pos])
    assert not got.flags.writeable


def test_views_a_writable_buffer_without_copying() -> None:
    buf = bytearray(range(10))
    rows = byte_windows(np.frombuffer(buf, dtype=np.uint8), 4)
    buf[5] = 99
    assert rows[2].tolist() == [2, 3, 4, 99]


@pytest.mark.parametrize(("array", "width"), [
    (np.zeros(4, np.uint8), 5), (np.zeros(4, np.uint8), 0), (np.zeros(4, np.int32), 2),
    (np.zeros((2, 2), np.uint8), 1), (np.zeros(8, np.uint8)[::2], 2),
])
def test_refuses_what_it_cannot_view(array: np.ndarray, width: int) -> None:
    with pytest.raises(ValueError, match=r"byte_windows|width"):
        byte_windows(array, width)
