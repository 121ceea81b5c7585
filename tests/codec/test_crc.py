"""Golden #8: the stored body CRC clears the top bit."""

from __future__ import annotations

import zlib

from hypothesis import given
from hypothesis import strategies as st

from rmqlab.codec.crc import body_crc


def test_golden_8() -> None:
    assert zlib.crc32(b"Hello") == 0xF7D18982
    assert body_crc(b"Hello") == 0x77D18982 == 2010220930
    assert body_crc(b"Hello RocketMQ") == 0x69C865ED == 1774740973
    assert body_crc(b"") == 0


@given(st.binary(max_size=256))
def test_non_negative_int32(body: bytes) -> None:
    c = body_crc(body)
    assert 0 <= c <= 0x7FFFFFFF
    assert body_crc(memoryview(body)) == body_crc(bytearray(body)) == c
