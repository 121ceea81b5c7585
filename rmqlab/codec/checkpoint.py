"""StoreCheckpoint file layout: five big-endian longs in a 4096-byte page (spec 5.1).

::

    0   physicMsgTimestamp    8   logicsMsgTimestamp    16  indexMsgTimestamp
    24  masterFlushedOffset (5.x)    32  confirmPhyOffset (5.x)    40..4095 zero
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from rmqlab.errors import TruncatedRecord

__all__ = ["CHECKPOINT_DATA_SIZE", "CHECKPOINT_FILE_SIZE", "Checkpoint"]

CHECKPOINT_FILE_SIZE = 4096
CHECKPOINT_DATA_SIZE = 40
_LAYOUT = struct.Struct(">qqqqq")


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """The checkpoint values (ms timestamps, byte offsets); 4.9.8 leaves the last two at 0."""

    physic_msg_timestamp: int = 0
    logics_msg_timestamp: int = 0
    index_msg_timestamp: int = 0
    master_flushed_offset: int = 0
    confirm_phy_offset: int = 0

    @property
    def min_timestamp(self) -> int:
        """``max(0, min(physic, logics) - 3000)``: abnormal recovery start (golden #17)."""
        return max(0, min(self.physic_msg_timestamp, self.logics_msg_timestamp) - 3000)

    @property
    def min_timestamp_index(self) -> int:
        """``min(min_timestamp, index_msg_timestamp)``: the index-safe variant."""
        return min(self.min_timestamp, self.index_msg_timestamp)

    def pack(self) -> bytes:
        """The whole 4096-byte file: the five longs, then zeros."""
        buf = bytearray(CHECKPOINT_FILE_SIZE)
        self.pack_into(buf, 0)
        return bytes(buf)

    def pack_into(self, buf: Any, pos: int = 0) -> None:
        """Write the 40 data bytes at ``pos`` (the rest of the page is left alone)."""
        _LAYOUT.pack_into(
            buf, pos, self.physic_msg_timestamp, self.logics_msg_timestamp,
            self.index_msg_timestamp, self.master_flushed_offset, self.confirm_phy_offset,
        )  # fmt: skip

    @classmethod
    def unpack(cls, buf: Any, pos: int = 0) -> Checkpoint:
        """Read the five longs; ``TruncatedRecord`` when fewer than 40 bytes are available."""
        if len(buf) - pos < CHECKPOINT_DATA_SIZE:
            raise TruncatedRecord(None, pos, "checkpoint needs 40 bytes")
        return cls(*_LAYOUT.unpack_from(buf, pos))
