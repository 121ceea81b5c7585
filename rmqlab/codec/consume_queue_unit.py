"""The 20-byte consume-queue unit and the ext-address encoding of its tags code (spec 3.1, 3.7).

Layout (big-endian)::

    0   8  commitLogOffset   long   where the record starts in the commitlog
    8   4  size              int    the record's TOTALSIZE (not the body size)
    12  8  tagsCode          long   Java hash of TAGS, a delay due-time, or an ext address

    pre-blank unit (fills a queue's first file up to its first real unit): (0, 0x7FFFFFFF, 0)
    end of data: an all-zero unit (offset 0, size 0)
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = [
    "CQ_STORE_UNIT_SIZE",
    "CQ_UNIT_DTYPE",
    "MAX_ADDR",
    "MSG_TAG_OFFSET_INDEX",
    "PRE_BLANK_UNIT",
    "decorate",
    "first_in_chunks",
    "is_ext_addr",
    "is_valid_unit",
    "pack_unit",
    "pack_unit_into",
    "undecorate",
    "units_view",
    "unpack_unit",
    "valid_prefix",
]

CQ_STORE_UNIT_SIZE = 20
MSG_TAG_OFFSET_INDEX = 12
CQ_UNIT_DTYPE = np.dtype([("commit_log_offset", ">i8"), ("size", ">i4"), ("tags_code", ">i8")])
assert CQ_UNIT_DTYPE.itemsize == CQ_STORE_UNIT_SIZE

_UNIT = struct.Struct(">qiq")
PRE_BLANK_UNIT = _UNIT.pack(0, 0x7FFFFFFF, 0)

_LONG_MIN = -(2**63)
MAX_ADDR = -(2**31) - 1  # Integer.MIN_VALUE - 1: every ext address is <= this


def pack_unit(offset: int, size: int, tags_code: int) -> bytes:
    """The 20 bytes of one unit."""
    return _UNIT.pack(offset, size, tags_code)


def pack_unit_into(buf: Any, pos: int, offset: int, size: int, tags_code: int) -> None:
    """Write one unit at byte ``pos`` of ``buf``."""
    _UNIT.pack_into(buf, pos, offset, size, tags_code)


def unpack_unit(buf: Any, pos: int) -> tuple[int, int, int]:
    """``(commit_log_offset, size, tags_code)`` of the unit at byte ``pos``."""
    return _UNIT.unpack_from(buf, pos)  # type: ignore[return-value]


def is_valid_unit(offset: int, size: int) -> bool:
    """The recovery test for a used unit: ``offset >= 0 and size > 0`` (pre-blank units pass)."""
    return offset >= 0 and size > 0


def units_view(buf: Any) -> np.ndarray:
    """Zero-copy structured array over the whole units in ``buf`` (partial tail ignored)."""
    n = len(buf) // CQ_STORE_UNIT_SIZE
    return np.frombuffer(buf, dtype=CQ_UNIT_DTYPE, count=n)


def first_in_chunks(n: int, hits: Callable[[int, int], np.ndarray], start: int = 0,
                    first_chunk: int = 1024) -> int:
    """The first index in ``[start, n)`` where ``hits(lo, hi)`` (a boolean array for units
    ``[lo, hi)``) is true, or ``n``; looked for in chunks growing 4x, so a file that is mostly
    unwritten (a queue with a few units in a 6 MB file) costs microseconds, and a full file
    about one pass."""
    step = first_chunk
    while start < n:
        hi = min(start + step, n)
        found = np.flatnonzero(hits(start, hi))
        if found.size:
            return start + int(found[0])
        start = hi
        step *= 4
    return n


def valid_prefix(units: np.ndarray, first_chunk: int = 1024) -> int:
    """How many leading units are valid (``offset >= 0 and size > 0``): where RocketMQ's
    ``ConsumeQueue.recover`` ends a file (:func:`first_in_chunks`)."""
    offsets, sizes = units["commit_log_offset"], units["size"]
    return first_in_chunks(len(units), lambda lo, hi: (offsets[lo:hi] < 0) | (sizes[lo:hi] <= 0),
                           first_chunk=first_chunk)  # fmt: skip


def is_ext_addr(tags_code: int) -> bool:
    """True when the tags code is a ConsumeQueueExt address (``<= MAX_ADDR``), not a hash."""
    return tags_code <= MAX_ADDR


def decorate(offset: int) -> int:
    """Ext file offset -> the address stored in the CQ: ``offset + Long.MIN_VALUE``."""
    return offset + _LONG_MIN


def undecorate(address: int) -> int:
    """Stored ext address -> real ext offset: ``address - Long.MIN_VALUE``."""
    return address - _LONG_MIN
