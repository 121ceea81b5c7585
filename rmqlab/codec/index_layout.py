"""IndexFile layout: 40-byte header, 4-byte hash slots, 20-byte items (spec 4.1-4.2).

::

    0                      40-byte header (IndexHeader)
    40 + slot*4            int: number of the newest item in the slot, 0 = empty
    40 + slots*4 + n*20    item n (n >= 1; item 0 is never used):
                             +0 int keyHash +4 long phyOffset +12 int timeDiff(s) +16 int prevIndex

    file size = 40 + hashSlotNum*4 + indexNum*20    (defaults: 420,000,040 bytes)
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from rmqlab.codec.java_hash import java_hash
from rmqlab.errors import TruncatedRecord

__all__ = [
    "HASH_SLOT_SIZE",
    "INDEX_HEADER_SIZE",
    "INDEX_ITEM_DTYPE",
    "INDEX_PRESETS",
    "INDEX_SIZE",
    "INVALID_INDEX",
    "IndexHeader",
    "choose_index_layout",
    "index_file_size",
    "index_hash_of",
    "index_key",
    "index_key_hash",
    "item_position",
    "pack_item",
    "pack_item_into",
    "slot_of",
    "slot_position",
    "unpack_item",
]

INDEX_HEADER_SIZE = 40
HASH_SLOT_SIZE = 4
INDEX_SIZE = 20
INVALID_INDEX = 0
#: (hash_slot_num, index_num) recognised from an index file's size: RocketMQ's defaults, and
#: ``MessageStoreConfig.small``'s (the reference stores')
INDEX_PRESETS = ((5_000_000, 5_000_000 * 4), (64, 256))

_HEADER = struct.Struct(">qqqqii")
_ITEM = struct.Struct(">iqii")
INDEX_ITEM_DTYPE = np.dtype(
    [("key_hash", ">i4"), ("phy_offset", ">i8"), ("time_diff", ">i4"), ("prev_index", ">i4")]
)
assert INDEX_ITEM_DTYPE.itemsize == INDEX_SIZE


@dataclass(frozen=True, slots=True)
class IndexHeader:
    """The 40-byte header. ``index_count`` is the next free item number (starts at 1)."""

    begin_timestamp: int = 0
    end_timestamp: int = 0
    begin_phy_offset: int = 0
    end_phy_offset: int = 0
    hash_slot_count: int = 0
    index_count: int = 0

    def pack(self) -> bytes:
        return _HEADER.pack(
            self.begin_timestamp, self.end_timestamp, self.begin_phy_offset,
            self.end_phy_offset, self.hash_slot_count, self.index_count,
        )  # fmt: skip

    def pack_into(self, buf: Any, pos: int = 0) -> None:
        _HEADER.pack_into(
            buf, pos, self.begin_timestamp, self.end_timestamp, self.begin_phy_offset,
            self.end_phy_offset, self.hash_slot_count, self.index_count,
        )  # fmt: skip

    @classmethod
    def unpack(cls, buf: Any, pos: int = 0) -> IndexHeader:
        """Read the header at ``pos``; ``TruncatedRecord`` if fewer than 40 bytes are there."""
        if len(buf) - pos < INDEX_HEADER_SIZE:
            raise TruncatedRecord(None, pos, "index header needs 40 bytes")
        return cls(*_HEADER.unpack_from(buf, pos))


def index_key(topic: str, key: str) -> str:
    """The string that is hashed and indexed: ``topic#key``."""
    return f"{topic}#{key}"


def index_key_hash(key: str) -> int:
    """``indexKeyHashMethod``: ``abs(javaHash)``, and 0 for Integer.MIN_VALUE (golden #14)."""
    return index_hash_of(java_hash(key))


def index_hash_of(h: int) -> int:
    """:func:`index_key_hash` from an already computed signed ``java_hash`` value ``h``."""
    return 0 if h == -(2**31) else abs(h)


def slot_of(key_hash: int, hash_slot_num: int) -> int:
    """Slot number of a (non-negative) key hash."""
    return key_hash % hash_slot_num


def slot_position(slot: int) -> int:
    """Byte position of a slot word."""
    return INDEX_HEADER_SIZE + slot * HASH_SLOT_SIZE


def item_position(hash_slot_num: int, n: int) -> int:
    """Byte position of item number ``n`` (1-based in use; 0 is never written)."""
    return INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE + n * INDEX_SIZE


def index_file_size(hash_slot_num: int, index_num: int) -> int:
    """``40 + slots*4 + items*20``."""
    return INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE + index_num * INDEX_SIZE


def pack_item(key_hash: int, phy_offset: int, time_diff: int, prev_index: int) -> bytes:
    return _ITEM.pack(key_hash, phy_offset, time_diff, prev_index)


def pack_item_into(
    buf: Any, pos: int, key_hash: int, phy_offset: int, time_diff: int, prev_index: int
) -> None:
    _ITEM.pack_into(buf, pos, key_hash, phy_offset, time_diff, prev_index)


def unpack_item(buf: Any, pos: int) -> tuple[int, int, int, int]:
    """``(key_hash, phy_offset, time_diff, prev_index)`` of the item at byte ``pos``."""
    return _ITEM.unpack_from(buf, pos)  # type: ignore[return-value]


def choose_index_layout(
    sizes: list[int], hash_slot_num: int | None = None, index_num: int | None = None
) -> tuple[int, int, str]:
    """``(hash_slot_num, index_num, error)`` for a store's index files of ``sizes`` bytes.

    Index files do not record their layout. Given both values, they are checked against the
    files; else the preset most files fit wins (one damaged file must not hide the others).
    ``error`` is empty when the layout is usable, else one sentence for the user: no file fits
    a preset, or no file has the size of the layout given. Files shorter than the chosen layout
    (torn or truncated) are the caller's to skip and report."""
    present = sorted({n for n in sizes if n})
    if hash_slot_num and index_num:
        slots, items = hash_slot_num, index_num
    else:
        votes = [sum(n == index_file_size(*preset) for n in sizes) for preset in INDEX_PRESETS]
        slots, items = INDEX_PRESETS[votes.index(max(votes))]
        if max(votes) == 0 and present:
            return slots, items, (
                f"index file size(s) {present} match no known layout (40 + slots*4 + items*20 for "
                f"{' or '.join(f'{s}/{n}' for s, n in INDEX_PRESETS)}): pass hash_slot_num and index_num"
            )
    expected = index_file_size(slots, items)
    if present and expected not in present:  # only a layout given by hand: a wrong one, say so once
        fits = [f"{s}/{n}" for s, n in INDEX_PRESETS if index_file_size(s, n) in present]
        return slots, items, (
            f"no index file is {expected:,} bytes, the size of a {slots}/{items} index file (sizes here: "
            f"{', '.join(f'{n:,}' for n in present)}{'; they fit ' + ' or '.join(fits) if fits else ''}): "
            "hash_slot_num and index_num do not match this store"
        )
    return slots, items, ""
