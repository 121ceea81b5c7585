"""config/delayOffset.json codec, and the properties a delayed message is stored and delivered with."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rmqlab.codec.delay_offset import DelayOffsetError, decode_delay_offsets, encode_delay_offsets
from rmqlab.codec.properties import (
    decode_properties,
    encode_scheduled_broker_properties_and_map,
    java_hashmap_order,
    reserialised_properties_and_map,
)

tables = st.dictionaries(st.integers(1, 40), st.integers(0, 2**62), max_size=20)


def test_the_4_9_8_layouts() -> None:
    # the reference stores' empty table (21 bytes), and a published one with an entry
    assert encode_delay_offsets({}, "4.9.8") == '{\n\t"offsetTable":{}\n}'
    assert len(encode_delay_offsets({}, "4.9.8").encode()) == 21
    assert encode_delay_offsets({1: 1}, "4.9.8") == '{\n\t"offsetTable":{1:1\n\t}\n}'
    assert encode_delay_offsets({3: 11, 1: 2}, "4.9.8") == '{\n\t"offsetTable":{1:2,3:11\n\t}\n}'


def test_older_and_quoted_layouts_read_back() -> None:
    old = '{\n\t"offsetTable":{1:1,2:1,3:11,4:1,15:0,16:0,17:0,18:0}\n}'
    assert decode_delay_offsets(old) == ({1: 1, 2: 1, 3: 11, 4: 1, 15: 0, 16: 0, 17: 0, 18: 0}, None)
    quoted = '{"dataVersion":{"counter":2,"stateVersion":0,"timestamp":5},"offsetTable":{"2":7}}'
    assert decode_delay_offsets(quoted) == ({2: 7}, {"counter": 2, "stateVersion": 0, "timestamp": 5})


@given(tables)
def test_round_trip_4_9_8(table: dict[int, int]) -> None:
    assert decode_delay_offsets(encode_delay_offsets(table, "4.9.8")) == (table, None)


@given(tables, st.integers(0, 1000))
def test_round_trip_5_3_3_is_standard_json(table: dict[int, int], counter: int) -> None:
    dv = {"counter": counter, "stateVersion": 0, "timestamp": 1_700_000_000_000}
    text = encode_delay_offsets(table, "5.3.3", dv)
    assert json.loads(text)["offsetTable"] == {str(k): v for k, v in table.items()}
    assert decode_delay_offsets(text) == (table, dv)


@pytest.mark.parametrize("text", ["", "[]", "{", '{"offsetTable":[1]}', '{"offsetTable":{1:"x"}}',
                                  '{"offsetTable":{1:true}}'])
def test_what_is_not_a_table_is_refused(text: str) -> None:
    with pytest.raises(DelayOffsetError):
        decode_delay_offsets(text)


client_maps = st.dictionaries(
    st.text(st.characters(min_codepoint=0x41, max_codepoint=0x7A), min_size=1, max_size=8),
    st.text(st.characters(min_codepoint=0x30, max_codepoint=0x7A), min_size=1, max_size=6),
    max_size=14,
)


@given(client_maps, st.sampled_from(["4.9.8", "5.3.3"]))
def test_a_delayed_message_map_is_java_hashmap_ordered_and_delivered_unchanged(props: dict[str, str],
                                                                              version: str) -> None:
    """The stored string is the broker's map with REAL_TOPIC/REAL_QID/DELAY put last, in HashMap
    order (4.9.8: WAIT re-put after CLUSTER); delivery parses it into a fresh map of the same
    version and writes it again: the same bytes."""
    client = {**props, "DELAY": "2", "WAIT": "true"}
    raw, parsed = encode_scheduled_broker_properties_and_map(
        client, version, "C", real_topic="Real", real_queue_id=3, delay_level="2", uniq_key="U")
    seen = decode_properties(raw)
    assert (seen["REAL_TOPIC"], seen["REAL_QID"], seen["DELAY"], seen["CLUSTER"]) == ("Real", "3", "2", "C")
    assert seen["WAIT"] == "true"  # kept by both: 4.9.8 serialises the map WAIT was put back into
    keys = [k for k in client if k != "WAIT"] + (["UNIQ_KEY"] if version != "4.9.8" and "UNIQ_KEY" not in client
                                               else []) + ["CLUSTER", "WAIT", "REAL_TOPIC", "REAL_QID"]
    if version != "4.9.8":  # 5.x: WAIT where the client put it
        keys = list(dict.fromkeys([*client, *keys]))
    assert list(seen) == java_hashmap_order(keys, 16 if version == "4.9.8" else 128, max_size=len(seen))
    assert parsed == seen
    again, _ = reserialised_properties_and_map(seen, version)
    assert again == raw
