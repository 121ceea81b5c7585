"""Golden #8: the stored body CRC clears the top bit."""

from __future__ import annotations

import importlib
import mmap
import sys
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

import rmqlab.codec.crc as crc_mod
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


# -- crc32: isal's CRC-32 (zlib's fallback) is zlib.crc32 exactly -----------------------------------


def test_crc32_is_isal_when_installed() -> None:
    isal_zlib = pytest.importorskip("isal.isal_zlib")
    assert crc_mod.crc32 is isal_zlib.crc32


def test_crc32_empty_and_golden() -> None:
    assert crc_mod.crc32(b"") == 0
    assert crc_mod.crc32(b"Hello") == 0xF7D18982
    assert crc_mod.crc32(b"123456789") == 0xCBF43926  # CRC-32/IEEE check value


@given(st.binary(max_size=4096))
def test_crc32_equals_zlib(data: bytes) -> None:
    expected = zlib.crc32(data)
    assert crc_mod.crc32(data) == expected
    assert crc_mod.crc32(bytearray(data)) == expected
    assert crc_mod.crc32(memoryview(data)) == expected


@given(st.binary(max_size=2048), st.data())
def test_crc32_memoryview_slices(data: bytes, draw: st.DataObject) -> None:
    a = draw.draw(st.integers(0, len(data)))
    b = draw.draw(st.integers(a, len(data)))
    with memoryview(data) as mv:
        assert crc_mod.crc32(mv[a:b]) == zlib.crc32(data[a:b])
        assert body_crc(mv[a:b]) == (zlib.crc32(data[a:b]) & 0x7FFFFFFF)


def test_crc32_mmap_slice(tmp_path) -> None:
    data = bytes(range(256)) * 64
    p = tmp_path / "f"
    p.write_bytes(data)
    with open(p, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        mv = memoryview(m)
        try:
            for a, b in ((0, 0), (1, 1025), (4000, len(data)), (17, 9999)):
                assert crc_mod.crc32(mv[a:b]) == zlib.crc32(data[a:b])
        finally:
            mv.release()


@given(st.binary(max_size=1024), st.binary(max_size=1024), st.integers(0, 0xFFFFFFFF))
def test_crc32_start_value(head: bytes, tail: bytes, start: int) -> None:
    assert crc_mod.crc32(tail, start) == zlib.crc32(tail, start)
    # continuing from the CRC of a prefix is the CRC of the whole
    assert crc_mod.crc32(tail, crc_mod.crc32(head)) == zlib.crc32(head + tail)


def test_fallback_without_isal(monkeypatch: pytest.MonkeyPatch) -> None:
    # A platform without an isal wheel: the module falls back to zlib.crc32, same values.
    monkeypatch.setitem(sys.modules, "isal", None)
    monkeypatch.setitem(sys.modules, "isal.isal_zlib", None)
    try:
        mod = importlib.reload(crc_mod)
        assert mod.crc32 is zlib.crc32
        assert mod.body_crc(b"Hello") == 0x77D18982
        assert mod.body_crc(b"") == 0
    finally:
        monkeypatch.undo()
        importlib.reload(crc_mod)
    try:
        import isal.isal_zlib
    except ImportError:
        assert crc_mod.crc32 is zlib.crc32
    else:
        assert crc_mod.crc32 is isal.isal_zlib.crc32
