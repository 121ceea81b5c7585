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

import numpy as np

__all__ = ["java_hash", "java_hash_extend", "java_hash_extend_many", "java_hash_ranges", "tags_code"]

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


_INV31 = pow(31, -1, _MOD)  # 31 is odd, so invertible mod 2**32
_tables: list[np.ndarray] = [np.ones(1, np.uint64), np.ones(1, np.uint64)]  # 31**k, 31**-k mod 2**32


def _power_tables(n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(31**k, 31**-k)`` mod 2**32 for ``k = 0 .. n`` (at least), grown by doubling and kept."""
    pw, inv = _tables
    if len(pw) <= n:
        size = max(n + 1, 2 * len(pw), 1 << 12)
        mask = np.uint64(_MASK32)
        pw = np.cumprod(np.full(size, 31, np.uint64)) & mask  # uint64 wraps mod 2**64: fine mod 2**32
        inv = np.cumprod(np.full(size, _INV31, np.uint64)) & mask
        pw = np.concatenate(([1], pw[:-1])).astype(np.uint64)
        inv = np.concatenate(([1], inv[:-1])).astype(np.uint64)
        _tables[:] = [pw, inv]
    return pw, inv


def java_hash_extend_many(prefix_hashes: np.ndarray, suffixes: list[str],
                          lengths: np.ndarray | None = None) -> np.ndarray:
    """``java_hash_extend(prefix_hashes[i], suffixes[i])`` for every ``i``, as signed int64 values.

    ASCII suffixes are hashed together from one prefix sum over their concatenation: with
    ``S[k] = sum(u[j] * 31**-(j+1), j < k)`` (31 is invertible mod 2**32),
    ``hash(u[a:b]) = 31**b * (S[b] - S[a])`` mod 2**32, then ``prefix * 31**len + hash``.
    Non-ASCII suffixes (UTF-16 units differ from characters) use the exact scalar code.
    ``lengths``: ``len()`` of every suffix when the caller has them already (int64).
    """
    n = len(suffixes)
    out = np.empty(n, dtype=np.int64)
    if n == 0:
        return out
    prefix = np.asarray(prefix_hashes, dtype=np.int64)
    joined = "".join(suffixes)
    lens = np.fromiter(map(len, suffixes), dtype=np.int64, count=n) if lengths is None else lengths.copy()
    slow: list[int] = []
    if not joined.isascii():
        slow = [i for i, s in enumerate(suffixes) if not s.isascii()]
        vec = list(suffixes)
        for i in slow:
            vec[i] = ""
        lens[slow] = 0
        joined = "".join(vec)
    raw = joined.encode("ascii")
    total = len(raw)
    pw, inv = _power_tables(total)
    mask = np.uint64(_MASK32)
    prefix_sum = np.zeros(total + 1, dtype=np.uint64)
    if total:
        np.cumsum(np.frombuffer(raw, dtype=np.uint8).astype(np.uint64) * inv[1 : total + 1], out=prefix_sum[1:])
    ends = np.cumsum(lens)
    starts = ends - lens
    poly = (((prefix_sum[ends] - prefix_sum[starts]) & mask) * pw[ends]) & mask
    h = (((prefix.astype(np.uint64) & mask) * pw[lens]) + poly) & mask
    out[:] = h.astype(np.uint32).view(np.int32)
    for i in slow:
        out[i] = java_hash_extend(int(prefix[i]), suffixes[i])
    return out


def java_hash_ranges(data: np.ndarray, starts: np.ndarray, ends: np.ndarray, prefix_hashes: np.ndarray) -> np.ndarray:
    """``java_hash_extend(prefix_hashes[i], data[starts[i]:ends[i]])`` for ASCII bytes ``data``
    (uint8), as signed int64 values, without building strings: ranges of one length are
    gathered as one ``(count, length)`` matrix and multiplied by the weights ``31**(length-1)
    .. 1`` in uint64 (exact: ``length * 255 * 2**32 < 2**64`` up to 2**24 bytes), then
    combined with the prefix as ``prefix * 31**length + poly`` mod 2**32."""
    n = len(starts)
    out = np.empty(n, dtype=np.int64)
    if n == 0:
        return out
    a = np.asarray(starts, dtype=np.int64)
    lens = np.asarray(ends, dtype=np.int64) - a
    mask = np.uint64(_MASK32)
    prefix = np.asarray(prefix_hashes, dtype=np.int64).astype(np.uint64) & mask
    pw, _inv = _power_tables(int(lens.max()))
    weights = _weight_rows
    for length in np.unique(lens).tolist():
        sel = np.flatnonzero(lens == length)
        if length:
            w = weights.get(length)
            if w is None:
                w = weights[length] = pw[length - 1 :: -1][:length].copy() if length > 1 else pw[:1].copy()
            mat = data[a[sel, None] + np.arange(length)]
            poly = (mat.astype(np.uint64) @ w) & mask
        else:
            poly = np.zeros(len(sel), dtype=np.uint64)
        out[sel] = ((prefix[sel] * pw[length] + poly) & mask).astype(np.uint32).view(np.int32)
    return out


_weight_rows: dict[int, np.ndarray] = {}


def tags_code(tags: str | None) -> int:
    """The CQ tags code of a ``TAGS`` value: Java hash, 0 if absent/empty (spec 2.10)."""
    if not tags:
        return 0
    return java_hash(tags)
