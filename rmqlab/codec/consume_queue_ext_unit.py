"""The ConsumeQueueExt unit (``ConsumeQueueExt.CqExtUnit``), its file end marker and addresses
(spec §3.7, golden #20).

Layout (big-endian), one unit, variable length::

    0   2  size          short  20 + bitMapSize (MIN_EXT_UNIT_SIZE = 20, max Short.MAX_VALUE)
    2   8  tagsCode      long   the real tags code (Java hash of TAGS, or a delay due time)
    10  8  msgStoreTime  long   the record's store timestamp (ms)
    18  2  bitMapSize    short  bytes of filter bitmap that follow (0 without one)
    20  n  filterBitMap  bytes  the broker's bloom bitmap (enableCalcFilterBitMap, default off)

Units follow each other from byte 0 of a file. A unit that does not fit in what is left
(``size > fileSize - wrote - END_BLANK_DATA_LENGTH``) is not split: the writer puts ``short -1``
at the write position and the file counts as full; the unit goes to byte 0 of the next file.
Unwritten bytes are zeros. A reader walking a file therefore stops at the first ``size <= 0``.

The CQ stores ``decorate(fileFrom + position)`` (``offset + Long.MIN_VALUE``) in its tags code
field; every such address is ``<= MAX_ADDR`` (``Integer.MIN_VALUE - 1``), so it never collides
with a tags hash. ``decorate``/``undecorate``/``is_ext_addr`` live with the CQ unit
(:mod:`rmqlab.codec.consume_queue_unit`) and are re-exported here.

Worked example: ``encode(CqExtUnit(2598919, 1700000000123))`` is the 20 bytes
``0014 000000000027A807 0000018BCFE5687B 0000``; written at position 40 of file
``00000000000000001000`` its address is ``decorate(1040) = -9223372036854774768``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from rmqlab.codec.consume_queue_unit import MAX_ADDR, decorate, first_in_chunks, is_ext_addr, undecorate
from rmqlab.errors import CorruptRecord, TruncatedRecord

__all__ = [
    "END_BLANK_DATA_LENGTH",
    "END_MARKER",
    "MAX_ADDR",
    "MAX_EXT_UNIT_SIZE",
    "MAX_REAL_OFFSET",
    "MIN_EXT_FILE_SIZE",
    "MIN_EXT_UNIT_SIZE",
    "CqExtUnit",
    "decode_at",
    "decorate",
    "encode",
    "encode_into",
    "fits",
    "gather_units",
    "is_ext_addr",
    "undecorate",
    "unit_size_at",
    "units_end",
]

MIN_EXT_UNIT_SIZE = 20  # short size + long tagsCode + long msgStoreTime + short bitMapSize
MAX_EXT_UNIT_SIZE = 32767  # Short.MAX_VALUE: the size field is a short
END_BLANK_DATA_LENGTH = 4  # room a file always keeps for the end marker
MIN_EXT_FILE_SIZE = MIN_EXT_UNIT_SIZE + END_BLANK_DATA_LENGTH  # one unit and the end marker's room
END_MARKER = struct.pack(">h", -1)  # fullFillToEnd: short -1 where the next unit did not fit
MAX_REAL_OFFSET = MAX_ADDR - (-(2**63))  # the largest ext offset an address can encode

_HEAD = struct.Struct(">hqqh")  # size, tagsCode, msgStoreTime, bitMapSize
_HEAD_DTYPE = np.dtype([("size", ">i2"), ("tags_code", ">i8"), ("msg_store_time", ">i8"), ("bit_map_size", ">i2")])
_SIZE = struct.Struct(">h")
_HEAD_COLUMNS = np.arange(MIN_EXT_UNIT_SIZE)
assert _HEAD.size == MIN_EXT_UNIT_SIZE


@dataclass(frozen=True, slots=True)
class CqExtUnit:
    """One ext unit's values. ``filter_bit_map`` is None without a bitmap (RocketMQ's
    ``getFilterBitMap()`` answers null when ``bitMapSize < 1``)."""

    tags_code: int
    msg_store_time: int
    filter_bit_map: bytes | None = None

    @property
    def size(self) -> int:
        """Bytes the unit takes in a file (``calcUnitSize``)."""
        return MIN_EXT_UNIT_SIZE + (len(self.filter_bit_map) if self.filter_bit_map else 0)


def encode(unit: CqExtUnit) -> bytes:
    """The unit's bytes (``CqExtUnit.write``). Raises ValueError past ``MAX_EXT_UNIT_SIZE``: the
    caller (``ConsumeQueueExt.put``) checks the size first, as RocketMQ does."""
    size = unit.size
    if size > MAX_EXT_UNIT_SIZE:
        raise ValueError(f"ext unit of {size} bytes exceeds MAX_EXT_UNIT_SIZE {MAX_EXT_UNIT_SIZE}")
    bitmap = unit.filter_bit_map or b""
    return _HEAD.pack(size, unit.tags_code, unit.msg_store_time, len(bitmap)) + bitmap


def encode_into(buf: Any, pos: int, unit: CqExtUnit) -> int:
    """Write the unit at ``pos`` of ``buf``; returns its size."""
    data = encode(unit)
    buf[pos : pos + len(data)] = data
    return len(data)


def fits(size: int, file_size: int, wrote_position: int) -> bool:
    """Whether a unit of ``size`` bytes goes at ``wrote_position`` (else the end marker does):
    ``size <= fileSize - wrote - END_BLANK_DATA_LENGTH``."""
    return size <= file_size - wrote_position - END_BLANK_DATA_LENGTH


def unit_size_at(buf: Any, pos: int) -> int:
    """The short size field at ``pos`` (``readBySkip``): > 0 a unit, 0 unwritten, -1 the end
    marker. Raises TruncatedRecord when fewer than 2 bytes are left (Java's getShort throws)."""
    if pos < 0 or pos + 2 > len(buf):
        raise TruncatedRecord(None, pos, f"ext unit size needs 2 bytes, {max(len(buf) - pos, 0)} left")
    return int(_SIZE.unpack_from(buf, pos)[0])


def decode_at(buf: Any, pos: int) -> CqExtUnit | None:
    """The unit at ``pos`` (``CqExtUnit.read``), or None where there is none: fewer than 2
    bytes left, or a size field < 1 (zeros, or the end marker).

    Like RocketMQ, the size field is not checked against ``bitMapSize``: the reader takes
    ``bitMapSize`` bytes of bitmap. A unit running past the end of ``buf`` (where Java's
    ``getLong``/``get`` throw) raises TruncatedRecord at ``pos``.
    """
    if pos < 0 or pos + 2 > len(buf):
        return None
    if _SIZE.unpack_from(buf, pos)[0] < 1:
        return None
    if pos + MIN_EXT_UNIT_SIZE > len(buf):
        raise TruncatedRecord(None, pos, f"ext unit needs {MIN_EXT_UNIT_SIZE} bytes, {len(buf) - pos} left")
    _size, tags_code, store_time, bitmap_size = _HEAD.unpack_from(buf, pos)
    if bitmap_size < 1:
        return CqExtUnit(tags_code, store_time)
    end = pos + MIN_EXT_UNIT_SIZE + bitmap_size
    if end > len(buf):
        raise TruncatedRecord(None, pos, f"ext unit bitmap of {bitmap_size} bytes runs past {len(buf)}")
    return CqExtUnit(tags_code, store_time, bytes(buf[pos + MIN_EXT_UNIT_SIZE : end]))


def units_end(buf: Any, start: int = 0) -> int:
    """Where the units of a file end (``ConsumeQueueExt.recover``'s walk): from ``start``, skip
    ``size`` bytes while the size field is > 0; stop at the first ``size <= 0`` (zeros or the
    end marker). ``buf`` is the whole file.

    Raises CorruptRecord at the unit whose size leads past the end of ``buf`` (Java's
    ``position()`` or ``getShort`` throws there and the broker does not start).
    """
    pos = start
    n = len(buf)
    # A 48 MiB file holds 2.5 million 20-byte units (the only size without a filter bitmap): the
    # run of them from ``pos`` is found with one strided numpy read of their size fields (in
    # chunks growing 4x, so a file with a few units costs microseconds); the walk goes on unit by
    # unit from the first unit of another size, exactly as it would have reached it.
    count = max(0, (n - pos) // MIN_EXT_UNIT_SIZE)
    if count:
        sizes = np.ndarray((count,), dtype=">i2", buffer=buf, offset=pos, strides=(MIN_EXT_UNIT_SIZE,))
        pos += MIN_EXT_UNIT_SIZE * first_in_chunks(count, lambda lo, hi: sizes[lo:hi] != MIN_EXT_UNIT_SIZE)
    unpack = _SIZE.unpack_from
    while True:
        if pos + 2 > n:
            raise CorruptRecord(None, pos, "truncated", "ext units run to the end of the file without an end marker")
        size = unpack(buf, pos)[0]
        if size <= 0:
            return pos
        if pos + size > n:
            raise CorruptRecord(None, pos, "size_out_of_range", f"ext unit size {size} runs past the file end {n}")
        pos += size


def gather_units(buf: Any, positions: np.ndarray, *, whole: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The unit heads at ``positions`` of ``buf`` at once (inspection of millions of units, a
    reader's window of addresses): ``(found, tags_code, msg_store_time)``; ``found`` is False
    where :func:`decode_at` finds no unit (a size field < 1) or fewer than the 20 head bytes are
    left (values 0 there). With ``whole``, also where the unit's bitmap runs past ``buf``: then
    ``found`` is exactly where :func:`decode_at` returns a unit rather than None or raising, so a
    reader can take these values and leave the rest to it."""
    pos = np.asarray(positions, dtype=np.int64)
    data = np.frombuffer(buf, dtype=np.uint8)
    n = len(data)
    if n < MIN_EXT_UNIT_SIZE:
        return np.zeros(len(pos), dtype=bool), np.zeros(len(pos), dtype=np.int64), np.zeros(len(pos), dtype=np.int64)
    # Few numpy calls, none per unit: a reader's window of 64 units spends more on each call's
    # overhead than on the bytes. Rows not found read byte 0 (always there) and are masked out.
    ok = (pos >= 0) & (pos <= n - MIN_EXT_UNIT_SIZE)
    at = np.where(ok, pos, 0)
    head = data[at[:, None] + _HEAD_COLUMNS].view(_HEAD_DTYPE)[:, 0]  # (k, 20) bytes, a copy
    found = ok & (head["size"] >= 1)
    if whole:  # decode_at reads bitMapSize bytes after the head when bitMapSize >= 1
        bitmap = head["bit_map_size"].astype(np.int64)
        found &= (bitmap < 1) | (at + MIN_EXT_UNIT_SIZE + bitmap <= n)
    return found, np.where(found, head["tags_code"], 0), np.where(found, head["msg_store_time"], 0)
