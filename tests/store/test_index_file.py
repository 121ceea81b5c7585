"""IndexFile on real files: golden #12-#15, chain walking vs a model, collisions, events."""

from __future__ import annotations

import os
import struct
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqlab.codec.index_layout import index_key_hash
from rmqlab.errors import ReadOnlyStore
from rmqlab.events import EventBus, EventRecorder, IndexPut
from rmqlab.store.index_file import LONG_MAX, ChainStep, IndexFile

GOLDEN_15 = bytes.fromhex(
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
GOLDEN_15_PUTS = [
    ("TopicTest#k1", 1000, 1700000000123),
    ("TopicTest#k2", 1187, 1700000005999),
    ("TopicTest#k1", 1374, 1700000010500),
    ("TopicTest#k9", 1561, 1700000011000),
]


def _name(tmp_path: Path, n: int = 20231114221320123) -> str:
    return str(tmp_path / str(n))


def _query(
    f: IndexFile, key: str, max_num: int = 64, begin: int = 0, end: int = LONG_MAX
) -> list[int]:
    out: list[int] = []
    f.select_phy_offset(out, key, max_num, begin, end)
    return out


# --- golden vectors -------------------------------------------------------------------------------


def test_golden_15_small_file_bytes_and_queries(tmp_path: Path) -> None:
    path = _name(tmp_path)
    f = IndexFile(path, 8, 5)
    assert f.file_size == 172
    assert [f.put_key(*p) for p in GOLDEN_15_PUTS] == [True] * 4
    assert f.is_write_full()
    assert f.put_key("TopicTest#k1", 1748, 1700000012000) is False
    # the header is written through on every change, so the bytes are final before flush ...
    assert Path(path).read_bytes() == GOLDEN_15
    f.flush()
    # ... and the flush rewrites the same header
    assert Path(path).read_bytes() == GOLDEN_15
    assert (f.begin_timestamp, f.end_timestamp) == (1700000000123, 1700000011000)
    assert (f.begin_phy_offset, f.end_phy_offset) == (1000, 1561)
    assert (f.hash_slot_count, f.index_count) == (2, 5)
    assert _query(f, "TopicTest#k1") == [1374, 1000]
    assert _query(f, "TopicTest#k1", begin=1700000005000) == [1374]
    assert _query(f, "TopicTest#k2") == [1187]
    assert _query(f, "TopicTest#k9") == [1561]
    assert _query(f, "TopicTest#k1", max_num=1) == [1374]
    assert _query(f, "TopicTest#nope") == []
    f.shutdown()


def test_golden_15_reloaded_from_disk(tmp_path: Path) -> None:
    path = _name(tmp_path)
    Path(path).write_bytes(GOLDEN_15)
    f = IndexFile(path, 8, 5)
    assert f.header.pack() == GOLDEN_15[:40]
    assert _query(f, "TopicTest#k1") == [1374, 1000]
    f.shutdown()
    assert Path(path).read_bytes() == GOLDEN_15


def test_golden_12_13_default_sizes(tmp_path: Path) -> None:
    path = _name(tmp_path)
    f = IndexFile(path, 5_000_000, 20_000_000)
    assert os.path.getsize(path) == 420_000_040
    assert f.put_key("TopicTest#KEY1", 0, 1700000000123)
    assert f.put_key("TopicTest#k1", 187, 1700000000124)
    f.flush()
    with open(path, "rb") as fh:
        fh.seek(7_878_104)
        assert struct.unpack(">i", fh.read(4))[0] == 1  # slot 1,969,516 -> item 1
        fh.seek(10_984_136)
        assert struct.unpack(">i", fh.read(4))[0] == 2  # slot 2,746,024 -> item 2
        fh.seek(20_000_060)
        assert struct.unpack(">iqii", fh.read(20)) == (1656969516, 0, 0, 0)
    f.shutdown()


def test_full_file_holds_index_num_minus_one_items(tmp_path: Path) -> None:
    f = IndexFile(_name(tmp_path), 4, 6)
    assert sum(f.put_key(f"t#{i}", i, 1000 + i) for i in range(10)) == 5
    assert f.index_count == 6
    f.shutdown()


def test_golden_14_min_value_hash_goes_to_slot_0(tmp_path: Path) -> None:
    path = _name(tmp_path)
    f = IndexFile(path, 8, 5)
    assert f.put_key("polygenelubricants", 42, 1700000000000)
    f.flush()
    data = Path(path).read_bytes()
    assert struct.unpack_from(">i", data, 40)[0] == 1
    assert struct.unpack_from(">iqii", data, 40 + 8 * 4 + 20) == (0, 42, 0, 0)
    assert _query(f, "polygenelubricants") == [42]
    f.shutdown()


# --- header rules ---------------------------------------------------------------------------------


def test_new_file_inherits_end_values_and_first_diff_quirk(tmp_path: Path) -> None:
    path = _name(tmp_path)
    f = IndexFile(path, 8, 5, end_phy_offset=5000, end_timestamp=1700000000000)
    data = Path(path).read_bytes()
    assert struct.unpack_from(">qqqqii", data, 0) == (
        1700000000000, 1700000000000, 5000, 5000, 0, 0)  # counts stay 0 until put/flush
    assert f.index_count == 1
    # first item: diff relative to the *inherited* begin (7 s), then begin := its own time
    assert f.put_key("t#a", 6000, 1700000007500)
    assert f.begin_timestamp == 1700000007500
    assert f.read_item(1) == (index_key_hash("t#a"), 6000, 7, 0)
    # so its reconstructed time is 7 s in the future: a window ending at its real time misses it
    assert _query(f, "t#a", end=1700000007500) == []
    assert _query(f, "t#a", begin=1700000014500) == [6000]
    f.shutdown()


def test_zero_values_are_not_inherited(tmp_path: Path) -> None:
    f = IndexFile(_name(tmp_path), 8, 5, end_phy_offset=0, end_timestamp=0)
    assert f.header.pack() == bytes(40)[:32] + struct.pack(">ii", 0, 1)
    f.shutdown()


def test_existing_file_with_zero_index_count_loads_as_one(tmp_path: Path) -> None:
    path = _name(tmp_path)
    Path(path).write_bytes(bytes(172))
    f = IndexFile(path, 8, 5, end_phy_offset=99, end_timestamp=99)  # ignored: file exists
    assert (f.index_count, f.begin_phy_offset, f.begin_timestamp) == (1, 0, 0)
    assert _query(f, "x") == []
    f.shutdown()


def test_time_diff_clamps(tmp_path: Path) -> None:
    f = IndexFile(_name(tmp_path), 8, 10)
    assert f.put_key("t#a", 1, 10_000)
    assert f.put_key("t#a", 2, 9_000)  # before begin -> 0
    assert f.put_key("t#a", 3, 10_000 + (2**31 + 5) * 1000)  # -> Integer.MAX_VALUE
    assert [f.read_item(n)[2] for n in (1, 2, 3)] == [0, 0, 2**31 - 1]
    f.shutdown()


def test_is_time_matched(tmp_path: Path) -> None:
    f = IndexFile(_name(tmp_path), 8, 10)
    f.put_key("t#a", 1, 10_000)
    f.put_key("t#a", 2, 20_000)
    assert f.is_time_matched(0, LONG_MAX)
    assert f.is_time_matched(15_000, 16_000)
    assert f.is_time_matched(0, 10_000)
    assert f.is_time_matched(20_000, 30_000)
    assert not f.is_time_matched(0, 9_999)
    assert not f.is_time_matched(20_001, 30_000)
    assert f.is_time_matched(9_999, 20_000)  # end == hdr.end counts
    assert f.is_time_matched(9_999, 20_001)  # covers the whole file
    f.shutdown()


# --- chains, collisions, damage -------------------------------------------------------------------


def test_hash_collision_returns_both_offsets(tmp_path: Path) -> None:
    assert index_key_hash("TopicTest#Aa") == index_key_hash("TopicTest#BB")
    f = IndexFile(_name(tmp_path), 64, 16)
    f.put_key("TopicTest#Aa", 100, 1700000000000)
    f.put_key("TopicTest#BB", 200, 1700000001000)
    f.put_key("TopicTest#Cd", 300, 1700000002000)
    # RocketMQ compares only hashes: callers must re-check the keys of the decoded messages
    assert _query(f, "TopicTest#Aa") == [200, 100]
    assert _query(f, "TopicTest#BB") == [200, 100]
    assert f.hash_slot_count == 2
    f.shutdown()


def test_walk_chain_describes_each_step(tmp_path: Path) -> None:
    f = IndexFile(_name(tmp_path), 8, 5)
    for p in GOLDEN_15_PUTS:
        f.put_key(*p)
    h1, h9 = index_key_hash("TopicTest#k1"), index_key_hash("TopicTest#k9")
    assert f.walk_chain("TopicTest#k1") == [
        ChainStep(4, h9, 1561, 10, 3, False, True, 1700000010123),
        ChainStep(3, h1, 1374, 10, 1, True, True, 1700000010123),
        ChainStep(1, h1, 1000, 0, 0, True, True, 1700000000123, "end_of_chain"),
    ]
    steps = f.walk_chain("TopicTest#k1", begin=1700000005000)
    assert [s.item for s in steps] == [4, 3, 1]
    assert [s.time_in_window for s in steps] == [True, True, False]
    assert steps[-1].stop == "end_of_chain"  # end_of_chain is checked before before_begin
    assert f.walk_chain("TopicTest#zz") == []
    f.shutdown()


def test_damaged_chain_self_loop_stops(tmp_path: Path) -> None:
    path = _name(tmp_path)
    f = IndexFile(path, 8, 5)
    for p in GOLDEN_15_PUTS:
        f.put_key(*p)
    struct.pack_into(">i", f.mapped_file.buffer, 40 + 32 + 3 * 20 + 16, 3)  # item 3 prev -> 3
    assert _query(f, "TopicTest#k1") == [1374]
    assert f.walk_chain("TopicTest#k1")[-1].stop == "self_loop"
    struct.pack_into(">i", f.mapped_file.buffer, 40 + 32 + 3 * 20 + 16, 77)  # prev > count
    assert f.walk_chain("TopicTest#k1")[-1].stop == "prev_out_of_range"
    struct.pack_into(">i", f.mapped_file.buffer, 40 + 32 + 3 * 20 + 12, -1)  # negative diff
    assert _query(f, "TopicTest#k1") == []
    f.shutdown()


def _item_field(f: IndexFile, item: int, at: int, value: int) -> None:
    """Set the int at byte ``at`` of item ``item`` (0 key hash, 12 time diff, 16 prev)."""
    struct.pack_into(">i", f.mapped_file.buffer, 40 + 8 * 4 + item * 20 + at, value)


@pytest.mark.timeout(10)
def test_damaged_chain_cycle_answers_as_rocketmq_would_without_spinning(tmp_path: Path) -> None:
    # the k1 slot's chain is 4 (k9) -> 3 (k1, 1374) -> 1 (k1, 1000); item 1's prev -> 4 closes
    # a cycle. RocketMQ goes round it appending the k1 items until max_num, and so do we
    f = IndexFile(_name(tmp_path), 8, 5)
    for p in GOLDEN_15_PUTS:
        f.put_key(*p)
    _item_field(f, 1, 16, 4)
    assert _query(f, "TopicTest#k1", max_num=5) == [1374, 1000, 1374, 1000, 1374]
    assert _query(f, "TopicTest#k1", max_num=2) == [1374, 1000]
    assert _query(f, "TopicTest#k9", max_num=3) == [1561, 1561, 1561]
    steps = f.walk_chain("TopicTest#k1")
    assert [(s.item, s.stop) for s in steps] == [(4, ""), (3, ""), (1, "cycle")]
    # a cycle with no item of the key: Java's loop would spin for ever; the walk ends, empty
    _item_field(f, 3, 0, 12345)
    _item_field(f, 1, 0, 12345)
    assert _query(f, "TopicTest#k1") == []
    assert f.walk_chain("TopicTest#k1")[-1].stop == "cycle"
    f.shutdown()


# --- events, read-only, lifecycle -----------------------------------------------------------------


def test_index_put_events_only_with_subscribers(tmp_path: Path) -> None:
    bus = EventBus()
    f = IndexFile(_name(tmp_path), 8, 5, bus=bus)
    f.put_key("TopicTest#k1", 1000, 1700000000123)  # nobody listens yet
    rec = EventRecorder(bus)
    f.put_key("TopicTest#k9", 1561, 1700000011000)
    assert rec.of(IndexPut) == [IndexPut(f.name, "TopicTest#k9", 0, 2, 1, 1561)]
    f.shutdown()


def test_read_only_file(tmp_path: Path) -> None:
    path = _name(tmp_path)
    Path(path).write_bytes(GOLDEN_15)
    f = IndexFile(path, 8, 5, read_only=True)
    assert _query(f, "TopicTest#k1") == [1374, 1000]
    bigger = IndexFile(path, 8, 6, read_only=True)  # expects 192 bytes, maps the 172 there are
    with pytest.raises(ReadOnlyStore):
        bigger.put_key("t#x", 1, 1)
    bigger.shutdown()
    f.flush()  # a no-op
    f.shutdown()
    assert Path(path).read_bytes() == GOLDEN_15


def test_destroy_deletes_the_file(tmp_path: Path) -> None:
    path = _name(tmp_path)
    f = IndexFile(path, 8, 5)
    assert f.destroy(0)
    assert not os.path.exists(path)


# --- model-based ----------------------------------------------------------------------------------

KEYS = ["t#Aa", "t#BB", "t#k1", "t#k2", "t#k9", "t#x", "t#y", "u#Aa", "polygenelubricants"]
_puts = st.lists(
    st.tuples(st.sampled_from(KEYS), st.integers(1, 500), st.integers(-3000, 4000)),
    min_size=1, max_size=40,
)


def _model_items(puts: list[tuple[str, int, int]]) -> list[tuple[str, int, int, int]]:
    """(key, key_hash, phy, reconstructed time) per item, from the spec's arithmetic."""
    items = []
    phy, ts, begin = 0, 1_700_000_000_000, 0
    for key, size, dt in puts:
        ts += dt
        diff = 0 if begin <= 0 else min(max((ts - begin) // 1000, 0), 2**31 - 1)
        if not items:
            begin = ts
        items.append((key, index_key_hash(key), phy, diff))
        phy += size
    return [(k, h, p, begin + d * 1000) for k, h, p, d in items]


@settings(max_examples=150, deadline=None)
@given(puts=_puts, qkey=st.sampled_from(KEYS), max_num=st.integers(1, 50),
       window=st.tuples(st.integers(-5000, 60000), st.integers(-5000, 60000)))
def test_select_matches_chain_model(
    puts: list[tuple[str, int, int]], qkey: str, max_num: int, window: tuple[int, int]
) -> None:
    slots = 4  # few slots: unrelated keys share chains
    items = _model_items(puts)
    begin = 1_700_000_000_000 + window[0]
    end = begin + abs(window[1])
    with tempfile.TemporaryDirectory() as d:
        f = IndexFile(os.path.join(d, "1"), slots, 64)
        phy, ts = 0, 1_700_000_000_000
        for key, size, dt in puts:
            ts += dt
            assert f.put_key(key, phy, ts)
            phy += size
        h = index_key_hash(qkey)
        # model: a slot's chain is its items newest first
        chain = [it for it in reversed(items) if it[1] % slots == h % slots]
        expected: list[int] = []
        for _, ih, iphy, t in chain:
            if len(expected) >= max_num:
                break
            if ih == h and begin <= t <= end:
                expected.append(iphy)
            if t < begin:
                break
        assert _query(f, qkey, max_num, begin, end) == expected
        # whole time range: simply every item with this hash, newest first, capped
        everything = [p for _, ih, p, _ in reversed(items) if ih == h]
        assert _query(f, qkey, max_num, 0, LONG_MAX) == everything[:max_num]
        f.shutdown()
