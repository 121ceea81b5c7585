"""Properties string codec: Java parsing semantics, HashMap order, broker pipelines."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rmqlab.codec.properties import (
    broker_properties,
    crc32_property,
    decode_properties,
    encode_broker_properties,
    encode_broker_properties_and_map,
    encode_properties,
    java_hashmap_capacity,
    java_hashmap_order,
    trailing_separator_for,
)


def _java_string2message_properties(s: str) -> dict[str, str]:
    """Literal transcription of MessageDecoder.string2messageProperties (spec 2.6)."""
    out: dict[str, str] = {}
    index = 0
    n = len(s)
    while index < n:
        end = s.find("\x02", index)
        if end < 0:
            end = n
        if end - index >= 3:
            kv = s.find("\x01", index)
            if index < kv < end - 1:
                out[s[index:kv]] = s[kv + 1 : end]
        index = end + 1
    return out


def test_golden_24_edge_case() -> None:
    assert decode_properties("a\x01b\x02\x01x\x02cc\x01\x02dd\x01e") == {"a": "b", "dd": "e"}
    assert decode_properties(b"a\x01b\x02\x01x\x02cc\x01\x02dd\x01e") == {"a": "b", "dd": "e"}


@pytest.mark.parametrize(
    ("s", "expected"),
    [
        ("", {}),
        ("k\x01v", {"k": "v"}),  # no trailing separator (4.9.8 on disk)
        ("k\x01v\x02", {"k": "v"}),
        ("\x01v\x02", {}),  # empty key
        ("k\x01\x02", {}),  # empty value
        ("k\x01v\x02k\x01w\x02", {"k": "w"}),  # later duplicate wins
        ("k\x01a\x01b\x02", {"k": "a\x01b"}),  # value may contain 0x01
        ("ab\x02c\x01d", {"c": "d"}),
    ],
)
def test_decode_edge_cases(s: str, expected: dict[str, str]) -> None:
    assert decode_properties(s) == expected == _java_string2message_properties(s)


@given(st.text(alphabet="ab\x01\x02", max_size=30))
def test_decode_matches_java_loop(s: str) -> None:
    assert decode_properties(s) == _java_string2message_properties(s)


_token = st.text(
    alphabet=st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)),
    min_size=1,
    max_size=12,
)


@given(st.dictionaries(_token, _token, max_size=8), st.booleans())
def test_round_trip(props: dict[str, str], trailing: bool) -> None:
    data = encode_properties(props, trailing_separator=trailing)
    assert decode_properties(data) == props
    assert list(decode_properties(data)) == list(props)  # order preserved
    if props:
        assert data.endswith(b"\x02") is trailing


def test_encode_skips_none_and_keeps_order() -> None:
    assert encode_properties({"B": "1", "A": None, "C": "2"}) == b"B\x011\x02C\x012\x02"  # type: ignore[dict-item]
    assert encode_properties({}) == b""
    assert encode_properties({}, trailing_separator=False) == b""
    assert encode_properties({"K": "v"}, trailing_separator=False) == b"K\x01v"


def test_hashmap_order_golden_23() -> None:
    keys = ["KEYS", "TAGS", "UNIQ_KEY", "WAIT", "CLUSTER"]
    assert java_hashmap_order(keys, 128) == ["UNIQ_KEY", "CLUSTER", "TAGS", "KEYS", "WAIT"]
    assert java_hashmap_order(["KEYS", "TAGS", "UNIQ_KEY", "WAIT"]) == [
        "KEYS",
        "UNIQ_KEY",
        "WAIT",
        "TAGS",
    ]
    client = {"KEYS": "k1", "TAGS": "TagA", "UNIQ_KEY": "U", "WAIT": "true"}
    assert list(broker_properties(client, "4.9.8", "C")) == ["KEYS", "UNIQ_KEY", "CLUSTER", "TAGS"]
    assert list(broker_properties(client, "5.3.3", "C")) == [
        "UNIQ_KEY",
        "CLUSTER",
        "TAGS",
        "KEYS",
        "WAIT",
    ]


def test_broker_pipelines_bytes() -> None:
    client = {"KEYS": "k1", "TAGS": "TagA", "WAIT": "true"}
    assert encode_broker_properties(client, "4.9.8", "C") == (
        b"KEYS\x01k1\x02CLUSTER\x01C\x02TAGS\x01TagA"
    )
    v5 = encode_broker_properties(client, "5.3.3", "C", uniq_key="U1")
    assert v5.endswith(b"\x02")
    assert decode_properties(v5) == {**client, "UNIQ_KEY": "U1", "CLUSTER": "C"}
    assert trailing_separator_for("5.3.3")
    assert not trailing_separator_for("4.9.8")
    with pytest.raises(ValueError, match="unsupported"):
        broker_properties(client, "3.0.0")


def test_hashmap_capacity_growth() -> None:
    assert java_hashmap_capacity(12) == 16
    assert java_hashmap_capacity(13) == 32
    assert java_hashmap_capacity(0, 128) == 128
    assert java_hashmap_capacity(97, 128) == 256
    assert java_hashmap_capacity(1, 10) == 16  # tableSizeFor rounds up


@given(st.lists(_token, max_size=20, unique=True))
def test_hashmap_order_is_a_stable_fixpoint(keys: list[str]) -> None:
    once = java_hashmap_order(keys)
    assert sorted(once) == sorted(keys)
    assert java_hashmap_order(once) == once


def test_crc32_property_golden_9() -> None:
    assert crc32_property(1774740973).hex() == "5f5f435243333223013337393034373437373102"
    assert crc32_property(42) == b"__CRC32#\x012400000000\x02"


_any_text = st.text(alphabet="ab\x01\x02é", max_size=6)


@given(
    st.dictionaries(_any_text, _any_text, max_size=6),
    st.sampled_from(["4.9.8", "5.3.3"]),
    st.one_of(st.none(), _any_text),
)
def test_encode_and_map_agree_with_the_slow_pipeline_and_the_parser(
    props: dict[str, str], version: str, cluster: str | None
) -> None:
    data, parsed = encode_broker_properties_and_map(props, version, cluster, uniq_key="U1")
    ordered = broker_properties(props, version, cluster, uniq_key="U1")
    assert data == encode_properties(ordered, trailing_separator=trailing_separator_for(version))
    if parsed is not None:  # when offered, the map is exactly what a reader parses back
        assert parsed == decode_properties(data)
        assert list(parsed) == list(decode_properties(data))


def test_encode_and_map_offers_the_map_for_ordinary_properties() -> None:
    props = {"KEYS": "k1 k2", "TAGS": "TagA", "WAIT": "true", "UNIQ_KEY": "ABC"}
    data, parsed = encode_broker_properties_and_map(props, "4.9.8", "DefaultCluster")
    assert parsed is not None
    assert parsed == decode_properties(data)
    assert "WAIT" not in parsed
