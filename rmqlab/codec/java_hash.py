"""Java ``String.hashCode()`` with int32 wrap-around, and the consume-queue tags code.

RocketMQ hashes UTF-16 code units, not code points, so a character outside the BMP (an emoji)
contributes two units (spec conventions, golden #3 and #14).
"""

from __future__ import annotations

import sys
from array import array
from functools import lru_cache

__all__ = ["java_hash", "tags_code"]

_MASK32 = 0xFFFFFFFF


@lru_cache(maxsize=8192)
def java_hash(s: str) -> int:
    """``s.hashCode()`` as Java computes it: ``h = 31*h + unit`` mod 2**32, read as signed int32.

    Cached because the hot callers (tags codes, index keys built from a few shared keys) repeat
    the same strings; the loop itself is a tight integer loop over code units.
    """
    h = 0
    if s.isascii():
        units: bytes | array[int] = s.encode("ascii")
    else:
        units = array("H", s.encode("utf-16-le"))
        if sys.byteorder == "big":
            units.byteswap()
    for c in units:
        h = (31 * h + c) & _MASK32
    return h - 0x100000000 if h & 0x80000000 else h


def tags_code(tags: str | None) -> int:
    """The CQ tags code of a ``TAGS`` value: Java hash, 0 if absent/empty (spec 2.10)."""
    if not tags:
        return 0
    return java_hash(tags)
