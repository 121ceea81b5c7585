"""Lazily parsed ``MessageRecord.properties`` and the raw-bytes TAGS/KEYS/UNIQ_KEY lookups.

The fast decoder leaves ``properties`` unparsed; every reader must still see exactly what the
eager parse (Java ``string2messageProperties``, :func:`decode_properties`) gives, and the record
must behave as a plain frozen dataclass holding a dict (equality, repr, pickling, hashing,
``dataclasses`` helpers), whatever the order of access.
"""

from __future__ import annotations

import copy
import dataclasses
import mmap
import pickle

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqlab.codec.flags import PROPERTY_KEYS, PROPERTY_TAGS, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
from rmqlab.codec.java_hash import tags_code
from rmqlab.codec.message import (
    _UNPARSED,
    MessageRecord,
    _decode,
    _decode_exact,
    decode_message,
    encode_message,
)
from rmqlab.codec.properties import decode_properties, property_value, raw_property_value

NAMES = [PROPERTY_TAGS, PROPERTY_KEYS, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX]

# Property strings built from pieces that hit every rule: separators anywhere, duplicates, names
# that are suffixes/prefixes of others, empty values, 0x01 inside values, invalid UTF-8.
pieces = st.sampled_from(
    [b"\x01", b"\x02", b"TAGS", b"KEYS", b"UNIQ_KEY", b"XTAGS", b"TAG", b"a", b"b c", b" ", b"\xff", b"\xc3",
     b"\xc3\xa9", b"\xe2\x82", b"TAGS\x01", b"\x02TAGS\x01", b"KEYS\x01k1 k2", b"\x02\x02", b""]
)  # fmt: skip
raw_props = st.one_of(
    st.lists(pieces, max_size=16).map(b"".join),
    st.binary(max_size=60),
    st.dictionaries(
        st.sampled_from([*NAMES, "CLUSTER", "WAIT", "k"]), st.text(max_size=8), max_size=5
    ).map(lambda d: "".join(f"{k}\x01{v}\x02" for k, v in d.items()).encode()),
)


def _java(s: str) -> dict[str, str]:
    """Literal transcription of MessageDecoder.string2messageProperties (spec 2.6)."""
    out: dict[str, str] = {}
    index, n = 0, len(s)
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


@settings(max_examples=1500, deadline=None)
@given(raw=raw_props, name=st.one_of(st.sampled_from(NAMES), st.text(max_size=4)))
def test_property_value_is_the_eager_lookup(raw: bytes, name: str) -> None:
    eager = decode_properties(raw)
    assert eager == _java(raw.decode("utf-8", "replace"))
    assert property_value(raw, name) == eager.get(name)
    assert property_value(raw.decode("utf-8", "replace"), name) == eager.get(name)
    if name and name.isascii() and "\x01" not in name and "\x02" not in name:
        assert raw_property_value(raw, name.encode() + b"\x01") == eager.get(name)


@pytest.mark.parametrize(
    ("raw", "tags"),
    [
        (b"", None),
        (b"TAGS\x01a", "a"),
        (b"TAGS\x01a\x02", "a"),
        (b"TAGS\x01a\x02TAGS\x01b\x02", "b"),  # later duplicate wins
        (b"TAGS\x01a\x02TAGS\x01\x02", "a"),  # ... unless it is empty (skipped)
        (b"TAGS\x01a\x02XTAGS\x01b", "a"),  # XTAGS is another name
        (b"TAGS\x01a\x01b\x02", "a\x01b"),  # the value keeps a second 0x01
        (b"xTAGS\x01a", None),
        (b"\x02TAGS\x01\xff\x02", "\ufffd"),  # invalid UTF-8 replaced as Java does
        (b"TAGS\x01", None),
        (b"TAGS", None),
    ],
)
def test_tags_edge_cases(raw: bytes, tags: str | None) -> None:
    assert property_value(raw, PROPERTY_TAGS) == tags == decode_properties(raw).get(PROPERTY_TAGS)
    rec = _lazy(raw)
    assert rec.tags == tags
    assert rec.tags_code == tags_code(tags)


def _view(data: bytes) -> memoryview:
    """The record in an mmap view, as the store hands it to the fast decoder."""
    mm = mmap.mmap(-1, max(len(data), 1))
    mm[: len(data)] = data
    return memoryview(mm)[: len(data)]


def _lazy(raw: bytes, **kw: object) -> MessageRecord:
    view = _view(encode_message(topic="T", body=b"body", properties=raw, **kw))  # type: ignore[arg-type]
    rec = _decode(view, 0, len(view), False, True, None)
    assert type(rec) is MessageRecord
    assert rec._properties_slot is _UNPARSED  # type: ignore[attr-defined]
    return rec


def _eager(raw: bytes, **kw: object) -> MessageRecord:
    data = encode_message(topic="T", body=b"body", properties=raw, **kw)  # type: ignore[arg-type]
    rec = _decode_exact(data, 0, len(data), False, True, None)
    assert type(rec) is MessageRecord
    assert type(rec._properties_slot) is dict  # type: ignore[attr-defined]
    return rec


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=raw_props, order=st.permutations(["tags", "keys", "uniq_key", "tags_code", "properties", "to_dict"]))
def test_lazy_record_reads_like_the_eager_one(raw: bytes, order: list[str]) -> None:
    lazy, eager = _lazy(raw), _eager(raw)
    for attr in order:  # any access order, before and after the map is parsed
        got, want = getattr(lazy, attr), getattr(eager, attr)
        if attr == "to_dict":
            got, want = got(), want()
        assert got == want, attr
        assert type(got) is type(want)
    assert lazy.properties is lazy.properties  # parsed once, then the cached dict
    assert type(lazy.properties) is dict
    assert lazy == eager


@settings(max_examples=300, deadline=None)
@given(raw=raw_props)
def test_record_protocols_see_the_parsed_map(raw: bytes) -> None:
    eager = _eager(raw)
    assert repr(_lazy(raw)) == repr(eager)
    assert _lazy(raw) == eager
    assert eager == _lazy(raw)
    assert (_lazy(raw) != eager) is False
    for dup in (pickle.loads(pickle.dumps(_lazy(raw))), copy.copy(_lazy(raw)), copy.deepcopy(_lazy(raw))):
        assert type(dup) is MessageRecord
        assert type(dup._properties_slot) is dict  # type: ignore[attr-defined]
        assert dup == eager
    assert dataclasses.asdict(_lazy(raw)) == dataclasses.asdict(eager)
    assert dataclasses.astuple(_lazy(raw)) == dataclasses.astuple(eager)
    assert dataclasses.replace(_lazy(raw), queue_id=7) == dataclasses.replace(eager, queue_id=7)
    with pytest.raises(TypeError):  # a dict field: unhashable, as before
        hash(_lazy(raw))


def test_the_field_stays_a_frozen_dataclass_field() -> None:
    names = [f.name for f in dataclasses.fields(MessageRecord)]
    assert names[-2:] == ["properties", "properties_raw"]
    rec = _lazy(b"TAGS\x01a\x02")
    with pytest.raises(dataclasses.FrozenInstanceError):
        rec.properties = {}  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del rec.properties  # type: ignore[misc]
    assert rec._properties_slot is _UNPARSED  # type: ignore[attr-defined]  # not parsed by the attempts
    assert rec.properties == {"TAGS": "a"}
    # The public constructor stores the given map as it is.
    built = MessageRecord(*[getattr(rec, f) for f in names[:-2]], {"x": "y"}, b"TAGS\x01a\x02")
    assert built.properties == {"x": "y"}
    assert built.tags is None
    assert MessageRecord.properties is MessageRecord.__dict__["properties"]  # class access: the descriptor


def test_decode_message_on_a_view_is_lazy_and_on_bytes_eager() -> None:
    data = encode_message(topic="T", body=b"b", properties={"TAGS": "t", "KEYS": "k1  k2 "})
    lazy = decode_message(_view(data))
    eager = decode_message(data)
    assert isinstance(lazy, MessageRecord)
    assert isinstance(eager, MessageRecord)
    assert lazy.keys == eager.keys == ["k1", "k2"]
    assert lazy._properties_slot is _UNPARSED  # type: ignore[attr-defined]
    assert lazy == eager
    assert lazy.properties == {"TAGS": "t", "KEYS": "k1  k2 "}
    assert _UNPARSED is pickle.loads(pickle.dumps(_UNPARSED))
