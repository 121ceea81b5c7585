"""The client batch wire format (``MessageDecoder.encodeMessages``) and :class:`MessageBatch`."""

from __future__ import annotations

import itertools
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqlab.codec import flags
from rmqlab.codec.batch import (
    BatchEntry,
    MessageBatch,
    client_properties,
    decode_messages,
    encode_client_properties,
    encode_message,
    encode_messages,
)
from rmqlab.store.message import Message


def _uniqs() -> Any:
    counter = itertools.count()
    return lambda: f"C0A8000100002A9F{next(counter):016X}"


def test_encode_message_layout_is_java_encode_message() -> None:
    """int totalSize | int magic 0 | int bodyCRC 0 | int flag | int bodyLen | body | short propsLen | props."""
    got = encode_message(7, b"hello", b"A\x01b\x02")
    assert got == struct.pack(">iiiii", 4 + 4 + 4 + 4 + 4 + 5 + 2 + 4, 0, 0, 7, 5) + b"hello" + b"\x00\x04A\x01b\x02"


def test_client_properties_string_is_hashmap_order_with_trailing_separators() -> None:
    # java.util.HashMap(16) buckets: KEYS 7, UNIQ_KEY 12, WAIT 13, TAGS 14
    m = Message("T", b"x", tags="TagA", keys=["k1", "", "k2"], uniq_key="U1")
    props = client_properties(m, None)
    assert list(props) == ["KEYS", "TAGS", "WAIT", "UNIQ_KEY"]  # insertion order (the client's)
    assert encode_client_properties(props) == b"KEYS\x01k1 k2\x02UNIQ_KEY\x01U1\x02WAIT\x01true\x02TAGS\x01TagA\x02"
    # a 4.9.x client's messageProperties2String drops the last separator
    last_dropped = b"KEYS\x01k1 k2\x02UNIQ_KEY\x01U1\x02WAIT\x01true\x02TAGS\x01TagA"
    assert encode_client_properties(props, "4.9.8") == last_dropped


def test_batch_level_properties() -> None:
    """generateFromList: WAIT of the first message; a 5.x producer then gives the batch its own
    UNIQ_KEY (drawn after the messages'), a 4.9.x one does not."""
    msgs = [Message("T", b"a", wait_store_msg_ok=False), Message("T", b"b", wait_store_msg_ok=False)]
    b5 = MessageBatch.from_messages(msgs, _uniqs())
    assert b5.uniq_keys == ("C0A8000100002A9F0000000000000000", "C0A8000100002A9F0000000000000001")
    assert b5.properties == {"WAIT": "false", "UNIQ_KEY": "C0A8000100002A9F0000000000000002"}
    b4 = MessageBatch.from_messages(msgs, _uniqs(), client_version="4.9.8")
    assert b4.properties == {"WAIT": "false"}
    assert b4.entries() == b5.entries()  # the same maps; only the strings' last separator differs
    assert b4.body[b4.properties_slices[0]] + b"\x02" == b5.body[b5.properties_slices[0]]
    with pytest.raises(ValueError, match="batch its own UNIQ_KEY"):
        MessageBatch.from_messages([Message("T", b"a", uniq_key="U")])
    got = MessageBatch.from_body("T", 0, b4.body, properties={"WAIT": "true", "x": "y"})
    assert got.properties == {"WAIT": "true", "x": "y"}
    assert MessageBatch.from_body("T", 0, b4.body).properties == {}


def test_uniq_key_rule() -> None:
    """Set per message when missing; a message's own UNIQ_KEY (field or property) is kept."""
    msgs = [Message("T", b"a"), Message("T", b"b", uniq_key="MINE"), Message("T", b"c", properties={"UNIQ_KEY": "P"}),
            Message("T", b"d")]  # fmt: skip
    batch = MessageBatch.from_messages(msgs, _uniqs())
    assert batch.uniq_keys == ("C0A8000100002A9F0000000000000000", "MINE", "P", "C0A8000100002A9F0000000000000001")
    assert [e.properties["UNIQ_KEY"] for e in batch.entries()] == list(batch.uniq_keys)
    with pytest.raises(ValueError, match="uniq_key"):
        MessageBatch.from_messages([Message("T", b"a")], client_version="4.9.8")
    assert MessageBatch.from_messages([Message("T", b"a", uniq_key="U")], client_version="4.9.8").uniq_keys == ("U",)


@pytest.mark.parametrize(
    ("msgs", "match"),
    [
        ([Message("A", b""), Message("B", b"")], "share"),
        ([Message("A", b""), Message("A", b"", queue_id=1)], "share"),
        ([Message("A", b""), Message("A", b"", wait_store_msg_ok=False)], "share"),
        ([Message("A", b""), Message("A", b"", born_host="1.2.3.4:5")], "share"),
        ([Message("A", b"", delay_time_level=2)], "TimeDelayLevel"),
        ([Message("%RETRY%g", b"")], "Retry"),
        ([Message("A", b"", prepared_transaction_offset=5)], "prepared"),
    ],
)
def test_client_refusals(msgs: list[Message], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        MessageBatch.from_messages(msgs, _uniqs())


def test_empty_batch_needs_a_topic() -> None:
    with pytest.raises(ValueError, match="topic"):
        MessageBatch.from_messages([])
    b = MessageBatch.from_messages([], topic="T")
    assert (len(b), b.body, b.topic, b.rows) == (0, b"", "T", [])


def test_header_fields_are_batch_level() -> None:
    msgs = [Message("T", b"x", queue_id=3, born_host="10.0.0.1:9", born_timestamp=5, sys_flag=1, reconsume_times=2,
                    uniq_key=f"U{i}") for i in range(3)]  # fmt: skip
    b = MessageBatch.from_messages(msgs, client_version="4.9.8")
    assert (b.topic, b.queue_id, b.born_host, b.born_timestamp, b.sys_flag, b.reconsume_times) == (
        "T", 3, "10.0.0.1:9", 5, 1, 2)


_text = st.text(st.characters(min_codepoint=32, max_codepoint=0x2FFF, exclude_characters="\x7f"), max_size=8)
_msg = st.builds(
    Message,
    topic=st.just("TopicA"),
    body=st.binary(max_size=200),
    tags=st.one_of(st.none(), _text),
    keys=st.one_of(st.lists(_text, max_size=3), _text),
    properties=st.one_of(st.none(), st.dictionaries(st.sampled_from(["a", "b", "颜色"]), _text.filter(bool))),
    flag=st.integers(-(2**31), 2**31 - 1),
    uniq_key=st.one_of(st.none(), _text.filter(bool)),
)


@settings(max_examples=150, deadline=None)
@given(msgs=st.lists(_msg, max_size=6))
def test_encode_decode_round_trip(msgs: list[Message]) -> None:
    """decodeMessages(encodeMessages(x)) gives every flag, body and (well-formed) property back;
    the positions computed at encode time are those a parse of the bytes finds."""
    batch = MessageBatch.from_messages(msgs, _uniqs(), topic="TopicA")
    body, uniqs = encode_messages(msgs, _uniqs())
    assert body == batch.body
    assert uniqs == list(batch.uniq_keys)
    if msgs:
        assert batch.properties[flags.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] not in batch.uniq_keys
    parsed = MessageBatch(batch.topic, batch.queue_id, batch.body)
    assert parsed.rows == batch.rows
    assert parsed.uniq_keys == batch.uniq_keys
    assert parsed.length_body_slices == batch.length_body_slices
    entries = decode_messages(batch.body)
    assert entries == batch.entries() == parsed.entries()
    assert len(entries) == len(batch) == len(msgs)
    for m, e, u, lb, bl in zip(msgs, entries, batch.uniq_keys, batch.length_body_slices, batch.body_lengths,
                               strict=True):  # fmt: skip
        expected = {k: v for k, v in client_properties(m, u).items() if v}
        assert isinstance(e, BatchEntry)
        assert (e.flag, e.body, e.properties) == (m.flag, m.body, expected)
        assert batch.body[lb] == struct.pack(">i", len(m.body)) + m.body
        assert bl == len(m.body)


@pytest.mark.parametrize("cut", [1, 5, 21, 26])
def test_cut_bodies_are_refused(cut: int) -> None:
    body = MessageBatch.from_messages([Message("T", b"abcd", uniq_key="U")], client_version="4.9.8").body
    with pytest.raises(ValueError, match=r"length|truncated"):
        MessageBatch.from_body("T", 0, body[:-cut])
    with pytest.raises(ValueError, match=r"length|truncated"):
        decode_messages(body + body[:cut])


def test_a_negative_length_is_refused() -> None:
    bad = struct.pack(">iiiii", 22, 0, 0, 0, -1) + b"\x00\x00"
    with pytest.raises(ValueError, match="body length"):
        MessageBatch.from_body("T", 0, bad)
