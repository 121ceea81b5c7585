"""CommitLog record codec: golden records (#5-#7), round trips, damage reporting."""

from __future__ import annotations

import ipaddress
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqlab.codec import flags
from rmqlab.codec.crc import body_crc
from rmqlab.codec.message import (
    PHYSICAL_OFFSET_POSITION,
    QUEUE_OFFSET_POSITION,
    SYSFLAG_POSITION,
    BlankRecord,
    EndOfData,
    MessageRecord,
    calc_msg_length,
    decode_message,
    encode_blank,
    encode_into,
    encode_message,
    needs_blank,
    store_timestamp_position,
)
from rmqlab.errors import CorruptRecord, TruncatedRecord

GOLDEN_6_PROPS = (
    b"KEYS\x01k1 k2\x02UNIQ_KEY\x01C0A800013039000000000000000A0000\x02WAIT\x01true\x02"
    b"TAGS\x01TagA\x02"
)
GOLDEN_6_HEX = (
    "000000bbdaa320a769c865ed0000000100000000000000000000000000000000"
    "00000000000000000000018bcfe56800c0a8000a0000d4310000018bcfe5687b"
    "c0a8000100002a9f0000000000000000000000000000000e48656c6c6f20526f"
    "636b65744d5109546f7069635465737400494b455953016b31206b3202554e49"
    "515f4b4559014330413830303031333033393030303030303030303030303030"
    "304130303030025741495401747275650254414753015461674102"
)
GOLDEN_6_FIELDS: dict[str, Any] = dict(
    topic="TopicTest",
    body=b"Hello RocketMQ",
    queue_id=1,
    born_timestamp=1700000000000,
    born_host=("192.168.0.10", 54321),
    store_timestamp=1700000000123,
    store_host=("192.168.0.1", 10911),
    properties=GOLDEN_6_PROPS,
)


def golden_7() -> bytes:
    return encode_message(
        topic="T" * 130,
        body=b"x",
        sys_flag=flags.TRANSACTION_COMMIT_TYPE,
        commit_log_offset=1073741824,
        born_host=("::1", 1234),
        store_host=("fe80::1", 10911),
        properties={"TAGS": "TagB"},
    )


def test_size_formula_golden_5() -> None:
    assert calc_msg_length(1, 0, 10, 9, 73) == 91 + 10 + 9 + 73
    assert calc_msg_length(2, 0, 10, 9, 73) == 92 + 10 + 9 + 73
    assert calc_msg_length(1, 0x10, 0, 0, 0) == 103
    assert calc_msg_length(1, 0x30, 0, 0, 0) == 115
    assert calc_msg_length(1, 0, -5, -1, -2) == 91  # negatives count as 0
    assert store_timestamp_position(0) == 56
    assert store_timestamp_position(flags.BORNHOST_V6_FLAG) == 68
    assert store_timestamp_position(flags.STOREHOSTADDRESS_V6_FLAG) == 56
    assert (QUEUE_OFFSET_POSITION, PHYSICAL_OFFSET_POSITION, SYSFLAG_POSITION) == (20, 28, 36)


def test_golden_6_encodes_byte_for_byte() -> None:
    rec = encode_message(**GOLDEN_6_FIELDS)
    assert len(rec) == 187
    assert rec.hex() == GOLDEN_6_HEX
    assert len(GOLDEN_6_PROPS) == 73


def test_golden_6_decodes_back() -> None:
    r = decode_message(bytes.fromhex(GOLDEN_6_HEX), check_crc=True)
    assert isinstance(r, MessageRecord)
    assert r.store_size == 187
    assert r.magic == flags.MESSAGE_MAGIC_CODE_V1
    assert r.version == 1
    assert r.body_crc == 1774740973
    assert r.crc_ok
    assert (r.queue_id, r.flag, r.queue_offset, r.commit_log_offset, r.sys_flag) == (1, 0, 0, 0, 0)
    assert r.born_timestamp == 1700000000000
    assert r.born_host == ("192.168.0.10", 54321)
    assert r.store_timestamp == 1700000000123
    assert r.store_host == ("192.168.0.1", 10911)
    assert (r.reconsume_times, r.prepared_transaction_offset) == (0, 0)
    assert r.body == b"Hello RocketMQ"
    assert r.topic == "TopicTest"
    assert list(r.properties) == ["KEYS", "UNIQ_KEY", "WAIT", "TAGS"]
    assert r.properties_raw == GOLDEN_6_PROPS
    assert r.tags == "TagA"
    assert r.tags_code == 2598919
    assert r.keys == ["k1", "k2"]
    assert r.uniq_key == "C0A800013039000000000000000A0000"
    assert r.msg_id == "C0A8000100002A9F0000000000000000"
    assert r.transaction_type == flags.TRANSACTION_NOT_TYPE
    assert r.end_offset == 187
    d = r.to_dict()
    assert d["body_length"] == 14
    assert len(d["body_sha256"]) == 64
    assert "body" not in d


def test_golden_6_from_a_mapping_in_hashmap_order() -> None:
    props = {"KEYS": "k1 k2", "UNIQ_KEY": "C0A800013039000000000000000A0000", "WAIT": "true"}
    props["TAGS"] = "TagA"
    fields = {**GOLDEN_6_FIELDS, "properties": props}
    assert encode_message(**fields).hex() == GOLDEN_6_HEX


def test_golden_7_v2_ipv6() -> None:
    rec = golden_7()
    assert len(rec) == 257 == 91 + 1 + 12 + 12 + 1 + 130 + 10
    assert rec[4:8].hex().upper() == "DAA320AB"
    assert struct.unpack_from(">i", rec, SYSFLAG_POSITION)[0] == 0x38
    r = decode_message(rec)
    assert isinstance(r, MessageRecord)
    assert r.version == 2
    assert r.topic == "T" * 130
    assert r.born_host == ("::1", 1234)
    assert r.store_host == ("fe80::1", 10911)
    assert r.transaction_type == flags.TRANSACTION_COMMIT_TYPE
    assert r.msg_id == "FE80000000000000000000000000000100002A9F0000000040000000"
    assert r.properties == {"TAGS": "TagB"}
    assert struct.unpack_from(">q", rec, 68)[0] == r.store_timestamp  # 48 + 20
    with pytest.raises(CorruptRecord) as ei:  # 4.9.8 reads V2 as an illegal magic
        decode_message(rec, allow_v2=False)
    assert ei.value.reason == "bad_magic"


def test_v6_flags_follow_address_family() -> None:
    rec = encode_message(topic="t", body=b"", sys_flag=0x30, born_host=("1.2.3.4", 1))
    assert struct.unpack_from(">i", rec, SYSFLAG_POSITION)[0] == 0  # caller's V6 bits cleared
    rec = encode_message(topic="t", body=b"", born_host=("::2", 1))
    assert struct.unpack_from(">i", rec, SYSFLAG_POSITION)[0] == flags.BORNHOST_V6_FLAG


def test_encode_limits() -> None:
    with pytest.raises(ValueError, match="V1 topic"):
        encode_message(topic="é" * 100, body=b"")  # 100 chars but 200 UTF-8 bytes
    with pytest.raises(ValueError, match="properties"):
        encode_message(topic="t", body=b"", properties=b"x" * 32768)
    with pytest.raises(ValueError, match="version"):
        encode_message(topic="t", body=b"", version=3)
    assert decode_message(encode_message(topic="é" * 100, body=b"", version=2)).topic == "é" * 100  # type: ignore[union-attr]


def test_encode_into_and_blank() -> None:
    buf = bytearray(300)
    n = encode_into(buf, 10, **GOLDEN_6_FIELDS)
    assert n == 187
    assert buf[10:197].hex() == GOLDEN_6_HEX
    with pytest.raises(ValueError, match="does not fit"):
        encode_into(buf, 200, **GOLDEN_6_FIELDS)
    assert encode_blank(824).hex().upper() == "00000338CBD43194"
    buf[197:205] = encode_blank(103)
    assert decode_message(buf, 197) == BlankRecord(103)
    assert decode_message(buf, 205) == EndOfData(205)


def test_end_of_file_rule_golden_22() -> None:
    max_blank = 1073741824 - 1073741000
    assert max_blank == 824
    assert needs_blank(900, max_blank)
    assert not needs_blank(816, max_blank)
    assert needs_blank(817, max_blank)


_hosts = st.one_of(st.ip_addresses(v=4), st.ip_addresses(v=6)).map(str)
_text = st.text(
    alphabet=st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)),
    min_size=1,
    max_size=10,
)
_int32 = st.integers(-(2**31), 2**31 - 1)
_int64 = st.integers(-(2**63), 2**63 - 1)


@settings(max_examples=150)
@given(
    topic=st.text(alphabet="abcXYZ%|_-09", min_size=1, max_size=140),
    body=st.binary(max_size=200),
    queue_id=_int32,
    flag=_int32,
    queue_offset=_int64,
    commit_log_offset=st.integers(0, 2**62),
    sys_flag=st.integers(0, 0x7CF),
    born_timestamp=_int64,
    born=st.tuples(_hosts, _int32),
    store_timestamp=_int64,
    store=st.tuples(_hosts, _int32),
    reconsume_times=_int32,
    prepared=_int64,
    props=st.dictionaries(_text, _text, max_size=6),
)
def test_round_trip(**kw: Any) -> None:
    born, store, props = kw.pop("born"), kw.pop("store"), kw.pop("props")
    prepared = kw.pop("prepared")
    data = encode_message(
        born_host=born,
        store_host=store,
        properties=props,
        prepared_transaction_offset=prepared,
        **kw,
    )
    r = decode_message(b"\x00" * 3 + data + b"\xff" * 5, 3, check_crc=True)
    assert isinstance(r, MessageRecord)
    assert r.store_size == len(data)
    assert r.version == (2 if len(kw["topic"]) > 127 else 1)
    for name in ("topic", "body", "queue_id", "flag", "queue_offset", "commit_log_offset"):
        assert getattr(r, name) == kw[name]
    assert (r.born_timestamp, r.store_timestamp) == (kw["born_timestamp"], kw["store_timestamp"])
    assert r.reconsume_times == kw["reconsume_times"]
    assert r.prepared_transaction_offset == prepared
    assert ipaddress.ip_address(r.born_host[0]) == ipaddress.ip_address(born[0])
    assert ipaddress.ip_address(r.store_host[0]) == ipaddress.ip_address(store[0])
    assert (r.born_host[1], r.store_host[1]) == (born[1], store[1])
    assert r.sys_flag & ~0x30 == kw["sys_flag"] & ~0x30
    assert r.properties == props
    assert list(r.properties) == list(props)
    assert r.body_crc == body_crc(kw["body"])
    assert r.crc_ok


# --- damage ----------------------------------------------------------------------------------


def _damaged(pos: int, raw: bytes) -> bytearray:
    buf = bytearray(bytes(16) + bytes.fromhex(GOLDEN_6_HEX) + bytes(16))
    buf[16 + pos : 16 + pos + len(raw)] = raw
    return buf


@pytest.mark.parametrize(
    ("pos", "raw", "reason"),
    [
        (4, b"\xde\xad\xbe\xef", "bad_magic"),
        (0, struct.pack(">i", 50), "size_out_of_range"),
        (0, struct.pack(">i", -1), "size_out_of_range"),
        (0, struct.pack(">i", 186), "length_mismatch"),  # TOTALSIZE one short
        (84, struct.pack(">i", 15), "length_mismatch"),  # BODYLENGTH one long
        (84, struct.pack(">i", -3), "bad_field"),
        (102, b"\xff", "bad_field"),  # V1 topic length byte 0xFF = -1
        (112, b"\x00\x48", "length_mismatch"),  # PROPERTIESLENGTH 72 instead of 73
        (103, b"\xff", "bad_field"),  # invalid UTF-8 in the topic
    ],
)
def test_damage_reasons(pos: int, raw: bytes, reason: str) -> None:
    with pytest.raises(CorruptRecord) as ei:
        decode_message(_damaged(pos, raw), 16, file="f")
    assert (ei.value.offset, ei.value.reason, ei.value.file) == (16, reason, "f")
    assert not isinstance(ei.value, TruncatedRecord)


def test_crc_mismatch_only_when_checked() -> None:
    buf = _damaged(88, b"J")  # first body byte: 'H' -> 'J'
    r = decode_message(buf, 16)
    assert isinstance(r, MessageRecord)
    assert not r.crc_ok
    with pytest.raises(CorruptRecord) as ei:
        decode_message(buf, 16, check_crc=True)
    assert (ei.value.offset, ei.value.reason) == (16, "crc_mismatch")


@pytest.mark.parametrize("cut", [0, 1, 7, 8, 100, 186])
def test_truncated(cut: int) -> None:
    data = bytes.fromhex(GOLDEN_6_HEX)[:cut]
    with pytest.raises(TruncatedRecord) as ei:
        decode_message(b"\x00" * 5 + data, 5)
    assert ei.value.offset == 5
    assert ei.value.reason == "truncated"
