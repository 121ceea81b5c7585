"""IndexFile layout: golden #12-#15, header/item round trips."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from rmqlab.codec.index_layout import (
    INDEX_HEADER_SIZE,
    INDEX_ITEM_DTYPE,
    IndexHeader,
    choose_index_layout,
    index_file_size,
    index_key,
    index_key_hash,
    item_position,
    pack_item,
    pack_item_into,
    slot_of,
    slot_position,
    unpack_item,
)

GOLDEN_15_HEX = (
    "0000018bcfe5687b0000018bcfe592f800000000"
    "000003e800000000000006190000000200000005"
    "0000000400000002000000000000000000000000"
    "0000000000000000000000000000000000000000"
    "0000000000000000000000000029e6a800000000"
    "000003e800000000000000000029e6a900000000"
    "000004a300000005000000000029e6a800000000"
    "0000055e0000000a000000010029e6b000000000"
    "000006190000000a00000003"
)


def test_golden_12_sizes() -> None:
    assert index_file_size(5_000_000, 20_000_000) == 420_000_040
    assert item_position(5_000_000, 1) == 20_000_060
    assert INDEX_HEADER_SIZE == 40
    assert INDEX_ITEM_DTYPE.itemsize == 20


def test_golden_13_14_slots() -> None:
    h = index_key_hash(index_key("TopicTest", "KEY1"))
    assert h == 1656969516
    assert slot_of(h, 5_000_000) == 1_969_516
    assert slot_position(1_969_516) == 7_878_104
    assert slot_position(slot_of(index_key_hash("TopicTest#k1"), 5_000_000)) == 10_984_136
    assert index_key_hash("polygenelubricants") == 0  # abs(MIN_VALUE) stays negative -> 0


class _TinyIndex:
    """IndexFile.putKey / selectPhyOffset (spec 4.3-4.4) over the codec helpers only."""

    def __init__(self, slots: int, items: int) -> None:
        self.slots, self.items = slots, items
        self.buf = bytearray(index_file_size(slots, items))
        self.h = IndexHeader(index_count=1)

    def put(self, key: str, phy: int, ts: int) -> bool:
        h = self.h
        if h.index_count >= self.items:
            return False
        kh = index_key_hash(key)
        sp = slot_position(slot_of(kh, self.slots))
        slot_value = int.from_bytes(self.buf[sp : sp + 4], "big", signed=True)
        if slot_value <= 0 or slot_value > h.index_count:
            slot_value = 0
        diff = (
            0
            if h.begin_timestamp <= 0
            else max(0, min((ts - h.begin_timestamp) // 1000, 2**31 - 1))
        )
        pack_item_into(
            self.buf, item_position(self.slots, h.index_count), kh, phy, diff, slot_value
        )
        self.buf[sp : sp + 4] = h.index_count.to_bytes(4, "big")
        first = h.index_count <= 1
        self.h = IndexHeader(
            begin_timestamp=ts if first else h.begin_timestamp,
            end_timestamp=ts,
            begin_phy_offset=phy if first else h.begin_phy_offset,
            end_phy_offset=phy,
            hash_slot_count=h.hash_slot_count + (slot_value == 0),
            index_count=h.index_count + 1,
        )
        return True

    def flush(self) -> bytes:
        self.h.pack_into(self.buf, 0)
        return bytes(self.buf)

    def select(self, key: str, begin: int, end: int) -> list[int]:
        hdr = IndexHeader.unpack(self.buf)
        kh = index_key_hash(key)
        sp = slot_position(slot_of(kh, self.slots))
        n = int.from_bytes(self.buf[sp : sp + 4], "big", signed=True)
        out: list[int] = []
        if n <= 0 or n > hdr.index_count or hdr.index_count <= 1:
            return out
        while True:
            h, phy, diff, prev = unpack_item(self.buf, item_position(self.slots, n))
            t = hdr.begin_timestamp + diff * 1000
            if h == kh and begin <= t <= end:
                out.append(phy)
            if prev <= 0 or prev > hdr.index_count or prev == n or t < begin:
                return out
            n = prev


def test_golden_15_small_index_file() -> None:
    idx = _TinyIndex(8, 5)
    assert idx.put("TopicTest#k1", 1000, 1700000000123)
    assert idx.put("TopicTest#k2", 1187, 1700000005999)
    assert idx.put("TopicTest#k1", 1374, 1700000010500)
    assert idx.put("TopicTest#k9", 1561, 1700000011000)
    assert not idx.put("TopicTest#k9", 1748, 1700000012000)
    data = idx.flush()
    assert len(data) == 172
    assert data.hex() == GOLDEN_15_HEX
    assert IndexHeader.unpack(data) == IndexHeader(1700000000123, 1700000011000, 1000, 1561, 2, 5)
    assert unpack_item(data, item_position(8, 3)) == (2746024, 1374, 10, 1)
    assert idx.select("TopicTest#k1", 0, 2**63 - 1) == [1374, 1000]
    assert idx.select("TopicTest#k1", 1700000005000, 2**63 - 1) == [1374]


_i32 = st.integers(-(2**31), 2**31 - 1)
_i64 = st.integers(-(2**63), 2**63 - 1)


@given(st.tuples(_i64, _i64, _i64, _i64, _i32, _i32))
def test_header_round_trip(fields: tuple[int, int, int, int, int, int]) -> None:
    h = IndexHeader(*fields)
    assert len(h.pack()) == 40
    assert IndexHeader.unpack(h.pack()) == h
    buf = bytearray(50)
    h.pack_into(buf, 5)
    assert IndexHeader.unpack(buf, 5) == h


@given(st.tuples(_i32, _i64, _i32, _i32))
def test_item_round_trip(fields: tuple[int, int, int, int]) -> None:
    data = pack_item(*fields)
    assert len(data) == 20
    assert unpack_item(data, 0) == fields
    row = np.frombuffer(data, dtype=INDEX_ITEM_DTYPE)[0]
    assert tuple(int(row[n]) for n in INDEX_ITEM_DTYPE.names) == fields


def test_choose_index_layout() -> None:
    small, default = index_file_size(64, 256), index_file_size(5_000_000, 20_000_000)
    assert (small, default) == (5416, 420_000_040)
    # the preset most files fit, so a cut or grown file does not hide the others
    assert choose_index_layout([small, 2143, small + 700]) == (64, 256, "")
    assert choose_index_layout([default, 2143]) == (5_000_000, 20_000_000, "")
    assert choose_index_layout([]) == (5_000_000, 20_000_000, "")  # no index yet: the default
    slots, items, error = choose_index_layout([2143, 999])
    assert error.startswith("index file size(s) [999, 2143] match no known layout")
    # a layout given by hand: used when a file has its size, refused (once) when none has
    assert choose_index_layout([1080, 500], 10, 50) == (10, 50, "")
    slots, items, error = choose_index_layout([small, small], 32, 256)
    assert (slots, items) == (32, 256)
    assert error == ("no index file is 5,288 bytes, the size of a 32/256 index file (sizes here: 5,416; "
                     "they fit 64/256): hash_slot_num and index_num do not match this store")

