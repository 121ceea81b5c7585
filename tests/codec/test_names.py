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
    for bad in ("1073741824", "0000000000107374182x", "000000000010737418240", "abort"):
        assert parse_offset_file_name(bad) is None
    with pytest.raises(ValueError, match="non-negative"):
        offset_to_file_name(-1)


@given(st.integers(0, 10**20 - 1))
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
