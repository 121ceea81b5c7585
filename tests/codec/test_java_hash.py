"""Java String.hashCode (golden #3, #14) against a literal transcription of the Java loop."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rmqlab.codec.java_hash import java_hash, java_hash_extend, tags_code


def _reference(s: str) -> int:
    units = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i : i + 2], "big")) % 2**32
    return h - 2**32 if h >= 2**31 else h


@pytest.mark.parametrize(
    ("s", "h"),
    [
        ("TagA", 2598919),
        ("TagB", 2598920),
        ("*", 42),
        ("payment", -786681338),
        ("TopicTest#KEY1", -1656969516),
        ("TopicTest#k1", 2746024),
        ("TopicTest#k2", 2746025),
        ("TopicTest#k9", 2746032),
        ("%RETRY%group", 995971261),
        ("polygenelubricants", -(2**31)),
        ("", 0),
    ],
)
def test_golden_hashes(s: str, h: int) -> None:
    assert java_hash(s) == h


def test_tags_code_sign_extends_golden_3() -> None:
    assert tags_code("TagA").to_bytes(8, "big", signed=True).hex().upper() == "000000000027A807"
    assert tags_code("payment").to_bytes(8, "big", signed=True).hex().upper() == "FFFFFFFFD11C3206"
    assert tags_code(None) == 0
    assert tags_code("") == 0


def test_surrogate_pairs_hash_as_two_units() -> None:
    # "😀" is U+1F600 = UTF-16 D83D DE00
    assert java_hash("😀") == (31 * 0xD83D + 0xDE00)
    assert java_hash("标签-X") == _reference("标签-X")


@given(st.text(max_size=64))
def test_matches_reference(s: str) -> None:
    assert java_hash(s) == _reference(s)


@given(st.text(max_size=80), st.text(max_size=80))
def test_extend_equals_hash_of_concatenation(prefix: str, suffix: str) -> None:
    assert java_hash_extend(java_hash(prefix), suffix) == _reference(prefix + suffix)
    assert java_hash_extend(java_hash(prefix) & 0xFFFFFFFF, suffix) == _reference(prefix + suffix)


@pytest.mark.parametrize("n", [255, 256, 257, 300, 1000])
def test_long_strings_take_the_loop_and_agree(n: int) -> None:
    s = "".join(chr(0x20 + (i * 7) % 90) for i in range(n)) + "标"
    assert java_hash(s) == _reference(s)
    assert java_hash_extend(java_hash("Topic#"), s) == _reference("Topic#" + s)


def test_extend_uniq_key_suffix() -> None:
    key = "TopicTest#7F00000100002A9F0000000000000001"
    assert java_hash_extend(java_hash(key[:-12]), key[-12:]) == java_hash(key) == _reference(key)
