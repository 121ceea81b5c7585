"""The fast path of ``_decode`` (byte memoryview, IPv4 hosts) against the exact decoder.

Every record -- valid, with odd properties, or damaged byte by byte -- must give the same
record (field for field) or the same error class and reason from both.
"""

from __future__ import annotations

import dataclasses
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqlab.codec.flags import (
    BORNHOST_V6_FLAG,
    MESSAGE_MAGIC_CODE_V1,
    MESSAGE_MAGIC_CODE_V2,
    STOREHOSTADDRESS_V6_FLAG,
)
from rmqlab.codec.message import MessageRecord, _decode, _decode_exact, decode_message, encode_message
from rmqlab.errors import CorruptRecord, TruncatedRecord

hosts = st.sampled_from([("10.0.0.7", 4242), ("127.0.0.1", 10911), ("::1", 9876), ("fe80::1", 1)])
text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
prop_bytes = st.one_of(
    st.dictionaries(text.filter(lambda k: "\x01" not in k and "\x02" not in k), text, max_size=5).map(
        lambda d: "".join(f"{k}\x01{v}\x02" for k, v in d.items()).encode()
    ),
    st.binary(max_size=40),  # anything: separators in odd places, empty keys/values, bad UTF-8
    st.lists(st.sampled_from([b"\x01", b"\x02", b"a", b"KEYS", b"\xff", b"\x01\x01"]), max_size=12).map(b"".join),
)


def outcome(fn, buf, offset, limit, check_crc, allow_v2):  # type: ignore[no-untyped-def]
    try:
        return fn(buf, offset, limit, check_crc, allow_v2, "f")
    except CorruptRecord as e:
        return ("corrupt", e.reason, e.offset)
    except TruncatedRecord as e:
        return ("truncated", e.offset)


def same(buf: memoryview, offset: int, limit: int, check_crc: bool = False, allow_v2: bool = True) -> object:
    fast = outcome(_decode, buf, offset, limit, check_crc, allow_v2)
    exact = outcome(_decode_exact, buf, offset, limit, check_crc, allow_v2)
    assert fast == exact
    assert type(fast) is type(exact)
    return fast


@st.composite
def records(draw: st.DrawFn) -> bytes:
    return encode_message(
        topic=draw(st.sampled_from(["T", "TopicA", "é-topic", "x" * 127, "y" * 130])),
        body=draw(st.binary(max_size=300)),
        queue_id=draw(st.integers(0, 2**31 - 1)),
        flag=draw(st.integers(-(2**31), 2**31 - 1)),
        queue_offset=draw(st.integers(0, 2**63 - 1)),
        commit_log_offset=draw(st.integers(0, 2**63 - 1)),
        sys_flag=draw(st.integers(0, 0xFF)),
        born_timestamp=draw(st.integers(0, 2**62)),
        born_host=draw(hosts),
        store_timestamp=draw(st.integers(0, 2**62)),
        store_host=draw(hosts),
        reconsume_times=draw(st.integers(0, 100)),
        prepared_transaction_offset=draw(st.integers(0, 2**40)),
        properties=draw(prop_bytes),
        body_crc=draw(st.one_of(st.none(), st.integers(0, 2**31 - 1))),
        version=draw(st.sampled_from([None, 2])),
    )


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rec=records(), pad=st.integers(0, 9), check_crc=st.booleans(), allow_v2=st.booleans())
def test_valid_records_decode_identically(rec: bytes, pad: int, check_crc: bool, allow_v2: bool) -> None:
    buf = memoryview(b"\0" * pad + rec + b"\0" * 8)
    got = same(buf, pad, len(buf), check_crc, allow_v2)
    if not isinstance(got, tuple):  # a record: all fields equal, and the raw properties too
        assert got == _decode_exact(buf, pad, len(buf), check_crc, allow_v2, "f")
        assert got.properties_raw == _decode_exact(buf, pad, len(buf), check_crc, allow_v2, "f").properties_raw


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rec=records(), data=st.data())
def test_damaged_records_fail_or_decode_identically(rec: bytes, data: st.DataObject) -> None:
    ba = bytearray(rec)
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(ba) - 1))
        ba[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(ba)))
    buf = memoryview(bytes(ba[:cut] if data.draw(st.booleans()) else ba))
    same(buf, 0, len(buf), data.draw(st.booleans()), data.draw(st.booleans()))


@settings(max_examples=200, deadline=None)
@given(body_len=st.integers(-5, 400), topic_len=st.integers(0, 70000), props_len=st.integers(0, 70000),
       total_delta=st.integers(-4, 4), v2=st.booleans())
def test_inconsistent_lengths(body_len: int, topic_len: int, props_len: int, total_delta: int, v2: bool) -> None:
    """Length fields that disagree with TOTALSIZE (or point past it) go to the exact decoder."""
    rec = bytearray(encode_message(topic="T", body=b"b" * 20, properties=b"K\x01V", version=2 if v2 else None))
    struct.pack_into(">i", rec, 84, body_len)
    pos = 88 + max(body_len, 0)
    if pos + 4 <= len(rec):
        if v2:
            struct.pack_into(">H", rec, pos, topic_len & 0xFFFF)
        else:
            rec[pos] = topic_len & 0xFF
    if len(rec) - 4 >= 0:
        struct.pack_into(">H", rec, len(rec) - 5, props_len & 0xFFFF)
    struct.pack_into(">i", rec, 0, len(rec) + total_delta)
    buf = memoryview(bytes(rec) + bytes(16))
    same(buf, 0, len(buf))


def test_other_buffer_types_and_formats_take_the_exact_path() -> None:
    rec = encode_message(topic="TopicA", body=b"hello", properties={"TAGS": "a", "KEYS": "k1 k2"})
    ref = decode_message(rec)
    assert decode_message(bytearray(rec)) == ref
    assert decode_message(memoryview(rec)) == ref
    assert decode_message(memoryview(rec).cast("b")) == ref  # signed bytes: exact path
    assert decode_message(memoryview(rec).cast("c")) == ref


@pytest.mark.parametrize("magic", [MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2])
def test_fast_path_fields(magic: int, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_exact(*a: object) -> None:
        raise AssertionError("a valid IPv4 record on a memoryview must not need the exact decoder")

    monkeypatch.setattr("rmqlab.codec.message._decode_exact", no_exact)
    rec = encode_message(topic="TopicA", body=b"\x00\x01body", queue_id=3, queue_offset=7, commit_log_offset=4096,
                         born_host=("10.0.0.7", 4242), properties=b"TAGS\x01a\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01U",
                         version=1 if magic == MESSAGE_MAGIC_CODE_V1 else 2)
    r = decode_message(memoryview(rec))
    assert (r.magic, r.topic, r.body, r.queue_id, r.queue_offset, r.commit_log_offset) == (
        magic, "TopicA", b"\x00\x01body", 3, 7, 4096)
    assert r.born_host == ("10.0.0.7", 4242)
    assert r.store_host == ("127.0.0.1", 10911)
    assert r.properties == {"TAGS": "a", "KEYS": "k1 k2", "UNIQ_KEY": "U"}
    assert r.crc_ok
    assert r.tags == "a"
    assert r.keys == ["k1", "k2"]
    assert r.uniq_key == "U"
    assert isinstance(r.body, bytes)
    assert isinstance(r.properties_raw, bytes)


@settings(max_examples=300, deadline=None)
@given(ips=st.lists(st.ip_addresses(v=4).map(str), min_size=2, max_size=2),
       ports=st.lists(st.integers(-(2**31), 2**31 - 1), min_size=2, max_size=2))
def test_ipv4_hosts_through_the_host_cache(ips: list[str], ports: list[int]) -> None:
    """Hosts are cached by their raw 8 bytes read as an unsigned int: any ip, any int port
    (negative ones too) decodes as the exact decoder does, first time and from the cache."""
    rec = encode_message(topic="T", body=b"b", born_host=(ips[0], ports[0]), store_host=(ips[1], ports[1]))
    for _ in range(2):
        got = same(memoryview(rec), 0, len(rec))
        assert isinstance(got, MessageRecord)
        assert (got.born_host, got.store_host) == ((ips[0], ports[0]), (ips[1], ports[1]))


@pytest.mark.parametrize("version", [1, 2])
def test_fast_record_sets_every_field(version: int) -> None:
    """The fast path fills the record slot by slot: every dataclass field is there and equal."""
    rec = encode_message(topic="TopicA", body=b"xyz", queue_id=1, flag=2, queue_offset=3, commit_log_offset=4,
                         sys_flag=0, born_timestamp=5, store_timestamp=6, reconsume_times=7,
                         prepared_transaction_offset=8, properties=b"TAGS\x01a", version=version)
    fast = _decode(memoryview(rec), 0, len(rec), False, True, None)
    exact = _decode_exact(rec, 0, len(rec), False, True, None)
    assert type(fast) is MessageRecord
    for f in dataclasses.fields(MessageRecord):
        assert getattr(fast, f.name) == getattr(exact, f.name), f.name
    assert fast == exact
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.topic = "other"  # type: ignore[misc]


@pytest.mark.parametrize("sys_flag", [BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG,
                                      BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG])
@pytest.mark.parametrize("after", [0, 64])
def test_ipv6_flags_on_a_record_too_short_for_their_head(sys_flag: int, after: int) -> None:
    """A damaged 91-byte record whose SYSFLAG claims an IPv6 host: its head would end past the
    record (found by hypothesis: the exact decoder let a struct.error out when the buffer ended
    with the record). Both decoders name the record and the reason, whatever follows it."""
    rec = bytearray(91)
    struct.pack_into(">ii", rec, 0, 91, MESSAGE_MAGIC_CODE_V1)
    struct.pack_into(">i", rec, 36, sys_flag)
    buf = memoryview(bytes(rec) + b"\0" * after)
    assert same(buf, 0, len(buf)) == ("corrupt", "length_mismatch", 0)
    with pytest.raises(CorruptRecord, match=r"too short for a 1(00|12)-byte IPv6 head"):
        decode_message(buf, 0, file="00000000000000000000")
