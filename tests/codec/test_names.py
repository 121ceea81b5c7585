"""File-name rules and topic validation (golden #2, #16, #21)."""

from __future__ import annotations

import os
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rmqlab.codec.names import (
    consume_queue_path,
    index_file_name,
    infer_file_size,
    offset_to_file_name,
    parse_index_file_name,
    parse_offset_file_name,
    roll_next_file,
    validate_topic,
)
from rmqlab.errors import InvalidTopic

UTC = ZoneInfo("UTC")
SHANGHAI = ZoneInfo("Asia/Shanghai")


def test_golden_2_offset_names() -> None:
    assert offset_to_file_name(1073741824) == "00000000001073741824"
    assert offset_to_file_name(0) == "00000000000000000000"
    assert offset_to_file_name(6000000) == "00000000000006000000"
    assert parse_offset_file_name("00000000001073741824") == 1073741824
    for bad in ("1073741824", "0000000000107374182x", "000000000010737418240", "abort",
                "09223372036854775808", "99999999999999999999"):  # past Long.MAX_VALUE: parseLong throws
        assert parse_offset_file_name(bad) is None
    assert parse_offset_file_name("09223372036854775807") == (1 << 63) - 1
    with pytest.raises(ValueError, match="non-negative"):
        offset_to_file_name(-1)


@given(st.integers(0, (1 << 63) - 1))
def test_offset_name_round_trip(offset: int) -> None:
    assert parse_offset_file_name(offset_to_file_name(offset)) == offset


def test_golden_16_index_names() -> None:
    assert index_file_name(1700000000123, UTC) == "20231114221320123"
    assert index_file_name(1700000000123, SHANGHAI) == "20231115061320123"
    assert parse_index_file_name("20231115061320123", SHANGHAI) == 1700000000123
    assert parse_index_file_name("20231399061320123", UTC) is None
    assert parse_index_file_name("2023111506132012", UTC) is None


@given(st.integers(0, 253370764799999), st.sampled_from([UTC, SHANGHAI]))
def test_index_name_round_trip(ms: int, tz: ZoneInfo) -> None:
    assert parse_index_file_name(index_file_name(ms, tz), tz) == ms


def test_golden_21_rolls() -> None:
    assert roll_next_file(1073741900, 1073741824) == 2147483648
    assert roll_next_file(300001, 300000) == 600000


@pytest.mark.parametrize("topic", ["TopicTest", "%RETRY%group", "a|b", "A-_9", "x" * 127])
def test_valid_topics(topic: str) -> None:
    validate_topic(topic)


@pytest.mark.parametrize(
    ("topic", "why"),
    [
        ("", "blank"),
        ("   ", "blank"),
        ("../x", "illegal"),
        ("a/b", "illegal"),
        (".", "illegal"),
        ("a b", "illegal"),
        ("标签", "illegal"),
        ("x" * 128, "longer"),
    ],
)
def test_invalid_topics(topic: str, why: str) -> None:
    with pytest.raises(InvalidTopic, match=why) as ei:
        validate_topic(topic)
    assert ei.value.topic == topic


def test_consume_queue_path() -> None:
    assert consume_queue_path("/s", "TopicA", 3) == os.path.join(
        "/s", "consumequeue", "TopicA", "3"
    )
    assert consume_queue_path("/s", "%RETRY%" + "g" * 150, 0).endswith("0")  # broker-made, V2
    with pytest.raises(InvalidTopic):
        consume_queue_path("/s", "../../etc", 0)
    with pytest.raises(ValueError, match="queue id"):
        consume_queue_path("/s", "TopicA", -1)


def _dir(size: int, n: int, lengths: dict[int, int] | None = None, start: int = 0) -> tuple[list[str], list[int]]:
    """n consecutive files of ``size`` from ``start``; ``lengths`` overrides some files' lengths."""
    names = [offset_to_file_name(start + i * size) for i in range(n)]
    return names, [(lengths or {}).get(i, size) for i in range(n)]


def test_infer_file_size_ignores_one_damaged_file() -> None:
    # a file grown by bytes appended, or cut short, is one voice against its siblings'
    assert infer_file_size([_dir(1280, 1, {0: 5449})] + [_dir(1280, 1)] * 11, 0) == 1280
    assert infer_file_size([_dir(65536, 9, {3: 70000})], 0) == 65536
    assert infer_file_size([_dir(65536, 2, {0: 100})], 0) == 65536
    # the distance between names holds even when most files are damaged
    assert infer_file_size([_dir(65536, 3, {0: 1, 1: 2, 2: 3})], 0) == 65536


def test_infer_file_size_gaps_first_then_lengths() -> None:
    # a deleted file doubles one distance: the most common distance, on a tie the smallest
    names = [offset_to_file_name(o) for o in (0, 1280, 3840)]
    assert infer_file_size([(names, [1280] * 3)], 0) == 1280
    # one file per queue: the most common length, on a tie the longest (a trimmed last file)
    assert infer_file_size([_dir(1280, 1), _dir(1280, 1, {0: 400})], 0) == 1280
    assert infer_file_size([_dir(1280, 1, {0: 400}), _dir(1280, 1, {0: 400}), _dir(1280, 1)], 0) == 400
    assert infer_file_size([_dir(65536, 1, {0: 30000})], 0) == 30000  # alone, it cannot be told
    assert infer_file_size([], 42) == 42
    assert infer_file_size([([], [])], 42) == 42
    assert infer_file_size([_dir(1280, 1, {0: 0})], 42) == 42  # empty files say nothing


@given(st.integers(1, 1 << 30), st.integers(2, 12), st.data())
def test_infer_file_size_holds_against_a_damaged_minority(size: int, n: int, data: st.DataObject) -> None:
    bad = data.draw(st.lists(st.integers(0, n - 1), max_size=(n - 1) // 2, unique=True))
    lengths = {i: data.draw(st.integers(1, 2 * size)) for i in bad}
    assert infer_file_size([_dir(size, n, lengths, start=size * data.draw(st.integers(0, 50)))], 0) == size

