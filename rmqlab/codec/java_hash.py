"""Java ``String.hashCode()`` with int32 wrap-around, and the consume-queue tags code.

RocketMQ hashes UTF-16 code units, not code points, so a character outside the BMP (an emoji)
contributes two units (spec conventions, golden #3 and #14).

``hashCode`` is a polynomial in 31 over the code units, ``h(s) = sum(u[i] * 31**(n-1-i))``
mod 2**32, so a concatenation extends a known prefix hash:
``h(a + b) = h(a) * 31**len(b) + h(b)`` (mod 2**32, ``len`` in UTF-16 units). The index
builder uses that for ``topic#UNIQ_KEY`` keys, which are unique (a cache never hits) but share a
long prefix (:func:`java_hash_extend`).
"""

from __future__ import annotations

import sys
from array import array
from functools import lru_cache
from operator import mul

__all__ = ["java_hash", "java_hash_extend", "tags_code"]

_MASK32 = 0xFFFFFFFF
_MOD = 1 << 32


@lru_cache(maxsize=512)
def _powers(n: int) -> tuple[int, ...]:
    """``(31**(n-1), ..., 31, 1)`` mod 2**32: the weight of each of ``n`` code units."""
    return tuple(pow(31, n - 1 - i, _MOD) for i in range(n))


def _units(s: str) -> bytes | array[int]:
    if s.isascii():
        return s.encode("ascii")
    units = array("H", s.encode("utf-16-le"))
    if sys.byteorder == "big":
        units.byteswap()
    return units


_CACHED_POWERS = 256  # longer strings take the plain loop (no big weight tuples kept)


def _poly(units: bytes | array[int]) -> int:
    """``sum(units[i] * 31**(n-1-i))`` mod 2**32: one C-level ``sum(map(mul, ...))`` for short
    inputs (about twice as fast as a Python loop for typical 10-50 char keys)."""
    n = len(units)
    if n <= _CACHED_POWERS:
        return sum(map(mul, units, _powers(n))) & _MASK32
    h = 0
    for c in units:
        h = (31 * h + c) & _MASK32
    return h


def _signed(h: int) -> int:
    return h - 0x100000000 if h & 0x80000000 else h


@lru_cache(maxsize=8192)
def java_hash(s: str) -> int:
    """``s.hashCode()`` as Java computes it: ``h = 31*h + unit`` mod 2**32, read as signed int32.

    Cached because the hot callers (tags codes, property names, index-key prefixes) repeat the
    same strings.
    """
    return _signed(_poly(_units(s)))


def java_hash_extend(h: int, suffix: str) -> int:
    """``(prefix + suffix).hashCode()`` from ``h = prefix.hashCode()`` (signed or unsigned).

    Exact for any strings: ``h * 31**len(suffix) + suffix.hashCode()`` mod 2**32, with the
    length in UTF-16 code units. Not cached (callers pass unique suffixes).
    """
    units = _units(suffix)
    n = len(units)
    w = _powers(n + 1)[0] if n < _CACHED_POWERS else pow(31, n, _MOD)  # 31**n mod 2**32
    return _signed((h * w + _poly(units)) & _MASK32)


def tags_code(tags: str | None) -> int:
    """The CQ tags code of a ``TAGS`` value: Java hash, 0 if absent/empty (spec 2.10)."""
    if not tags:
        return 0
    return java_hash(tags)
