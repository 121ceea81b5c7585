"""The 46-byte BatchConsumeQueue unit of RocketMQ 5.x (spec §3.8).

A topic with ``queue.type=BatchCQ`` keeps one unit per commit-log record under
``batchconsumequeue/<topic>/<queueId>/``; a record may hold many messages (an inner batch), so a
unit names the queue offsets ``msg_base_offset .. msg_base_offset + batch_size - 1``.

Layout (big-endian)::

    0   8  commitLogOffset   long   where the record starts in the commitlog
    8   4  size              int    the record's TOTALSIZE
    12  8  tagsCode          long   Java hash of TAGS (or a delay due-time)
    20  8  storeTime         long   the record's store timestamp (by-time lookups search it)
    28  8  msgBaseOffset     long   queue offset of the record's first message (lookups search it)
    36  2  batchSize         short  messages in the record (1 unless an inner batch)
    38  4  compactedOffset   int    written as -1 (``INVALID_POS``)
    42  4  reserved          int    0

Files hold 300,000 units (13,800,000 bytes) and are appended strictly in order, with no pre-blank
units: a used unit has ``offset >= 0 and size > 0 and msgBaseOffset >= 0 and batchSize > 0``.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from rmqlab.codec.consume_queue_unit import first_in_chunks

__all__ = [
    "BCQ_FILE_SIZE",
    "BCQ_STORE_UNIT_SIZE",
    "BCQ_UNIT_DTYPE",
    "INVALID_POS",
    "MSG_BASE_OFFSET_INDEX",
    "MSG_BATCH_SIZE_INDEX",
    "MSG_COMPACT_OFFSET_INDEX",
    "MSG_STORE_TIME_OFFSET_INDEX",
    "is_valid_unit",
    "pack_unit",
    "pack_unit_into",
    "units_view",
    "unpack_unit",
    "valid_prefix",
]

BCQ_STORE_UNIT_SIZE = 46
MSG_STORE_TIME_OFFSET_INDEX = 20
MSG_BASE_OFFSET_INDEX = 28
MSG_BATCH_SIZE_INDEX = 36
MSG_COMPACT_OFFSET_INDEX = 38
INVALID_POS = -1  # what 5.x writes as compactedOffset
BCQ_FILE_SIZE = 300_000 * BCQ_STORE_UNIT_SIZE  # MessageStoreConfig.mapperFileSizeBatchConsumeQueue

BCQ_UNIT_DTYPE = np.dtype([
    ("commit_log_offset", ">i8"), ("size", ">i4"), ("tags_code", ">i8"), ("store_timestamp", ">i8"),
    ("msg_base_offset", ">i8"), ("batch_size", ">i2"), ("compacted_offset", ">i4"), ("reserved", ">i4"),
])
assert BCQ_UNIT_DTYPE.itemsize == BCQ_STORE_UNIT_SIZE

_UNIT = struct.Struct(">qiqqqhii")
assert _UNIT.size == BCQ_STORE_UNIT_SIZE

Unit = tuple[int, int, int, int, int, int, int, int]


def pack_unit(offset: int, size: int, tags_code: int, store_timestamp: int, msg_base_offset: int,
              batch_size: int, compacted_offset: int = INVALID_POS, reserved: int = 0) -> bytes:
    """The 46 bytes of one unit, as ``putBatchMessagePositionInfo`` writes it."""
    return _UNIT.pack(offset, size, tags_code, store_timestamp, msg_base_offset, batch_size,
                      compacted_offset, reserved)


def pack_unit_into(buf: Any, pos: int, offset: int, size: int, tags_code: int, store_timestamp: int,
                   msg_base_offset: int, batch_size: int) -> None:
    """Write one unit (compacted offset -1, reserved 0) at byte ``pos`` of ``buf``."""
    _UNIT.pack_into(buf, pos, offset, size, tags_code, store_timestamp, msg_base_offset, batch_size,
                    INVALID_POS, 0)


def unpack_unit(buf: Any, pos: int) -> Unit:
    """``(commit_log_offset, size, tags_code, store_timestamp, msg_base_offset, batch_size,
    compacted_offset, reserved)`` of the unit at byte ``pos``."""
    return _UNIT.unpack_from(buf, pos)  # type: ignore[return-value]


def is_valid_unit(offset: int, size: int, msg_base_offset: int, batch_size: int) -> bool:
    """The recovery test for a used unit (``BatchConsumeQueue.recover``)."""
    return offset >= 0 and size > 0 and msg_base_offset >= 0 and batch_size > 0


def units_view(buf: Any) -> np.ndarray:
    """Zero-copy structured array over the whole units in ``buf`` (partial tail ignored)."""
    return np.frombuffer(buf, dtype=BCQ_UNIT_DTYPE, count=len(buf) // BCQ_STORE_UNIT_SIZE)


def valid_prefix(units: np.ndarray, first_chunk: int = 1024) -> int:
    """How many leading units pass :func:`is_valid_unit`: where recovery ends a file."""
    off, size = units["commit_log_offset"], units["size"]
    base, batch = units["msg_base_offset"], units["batch_size"]

    def bad(lo: int, hi: int) -> np.ndarray:
        return (off[lo:hi] < 0) | (size[lo:hi] <= 0) | (base[lo:hi] < 0) | (batch[lo:hi] <= 0)

    return first_in_chunks(len(units), bad, first_chunk=first_chunk)
