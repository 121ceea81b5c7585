"""The 5.x ``__CRC32#`` property (``codec/prop_crc.py``; spec §2.6, §2.12, golden #9).

Golden vectors, the digit order and Java's reading of it (against an independent formula),
reserve + seal round trips on encoded records (V1/V2, IPv4/IPv6 hosts, with and without
properties, properties with and without a trailing 0x02), and ``check_message_and_return_size``
with ``force_verify_prop_crc``: what it accepts, what it fails, and in which order.
"""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rmqlab.codec.message import MessageRecord, decode_message, encode_message
from rmqlab.codec.prop_crc import (
    MISMATCH,
    MISSING,
    OK,
    ZERO,
    check_prop_crc,
    crc32_property,
    java_expected_crc,
    prop_crc_mismatches,
    properties_length_position,
    reserve_prop_crc,
    reserved_properties_length,
    seal_prop_crc,
)
from rmqlab.codec.walk import check_message_and_return_size
from rmqlab.testing.damage import forge_crc32_window

_I = struct.Struct(">i")
_H = struct.Struct(">h")


def _java_int(x: int) -> int:
    return (x + 2**31) % 2**32 - 2**31


def test_golden_9() -> None:
    assert crc32_property(1774740973).hex() == "5f5f435243333223013337393034373437373102"
    assert crc32_property(zlib.crc32(b"Hello RocketMQ") & 0x7FFFFFFF)[9:19] == b"3790474771"
    assert crc32_property(42) == b"__CRC32#\x012400000000\x02"
    assert crc32_property(0) == b"__CRC32#\x010000000000\x02"
    assert crc32_property(2**31 - 1)[9:19] == b"7463847412"
    assert java_expected_crc("3790474771") == 1774740973
    assert java_expected_crc("2400000000") == 42


@given(st.integers(0, 2**31 - 1))
def test_digits_least_significant_first_and_read_back(crc: int) -> None:
    prop = crc32_property(crc)
    assert len(prop) == 20
    assert prop[9:19].decode() == str(crc).zfill(10)[::-1]
    assert java_expected_crc(prop[9:19].decode()) == crc


@given(st.text(max_size=14))
def test_java_reading_of_any_value(value: str) -> None:
    """Java's loop over UTF-16 units, wrapped each step, equals the exact sum wrapped once."""
    units = value.encode("utf-16-be", "surrogatepass")
    chars = [(units[i] << 8) | units[i + 1] for i in range(0, len(units), 2)]
    exact = sum((c - 48) * 10**k for k, c in enumerate(chars))
    assert java_expected_crc(value) == _java_int(exact)


def test_java_reading_wraps_and_goes_negative() -> None:
    assert java_expected_crc("9999999999") == _java_int(9_999_999_999) == 1_410_065_407
    assert java_expected_crc("6927694924") == 0  # 4294967296 = 2^32 wraps to 0
    assert java_expected_crc("8463847412") == -(2**31)  # 2147483648 wraps negative
    assert java_expected_crc("") == 0
    assert java_expected_crc("a") == 49


_HOSTS = [("127.0.0.1", 1), ("::1", 2)]


def _record(props: dict[str, str] | bytes, topic: str = "TopicA", host: tuple[str, int] = ("127.0.0.1", 1),
            body: bytes = b"Hello RocketMQ") -> bytes:
    return encode_message(topic=topic, body=body, queue_id=3, queue_offset=7, commit_log_offset=4096,
                          born_timestamp=1_700_000_000_000, born_host=host, store_host=host,
                          store_timestamp=1_700_000_000_123, properties=props)


@pytest.mark.parametrize("host", _HOSTS)
@pytest.mark.parametrize("topic", ["TopicA", "t" * 200])  # V1 and V2 (5.x picks V2 past 127 chars)
@pytest.mark.parametrize(("props", "sep"), [({"TAGS": "A", "KEYS": "k1"}, False), (b"TAGS\x01A\x02KEYS\x01k", True),
                                            (b"", False)])
def test_reserve_and_seal_round_trip(host: tuple[str, int], topic: str, props: dict[str, str] | bytes,
                                     sep: bool) -> None:
    raw = _record(props, topic, host)
    raw_plen = _H.unpack_from(raw, properties_length_position(raw))[0]
    rec = reserve_prop_crc(raw)
    at = properties_length_position(raw)
    assert rec[4:at] == raw[4:at]
    assert rec[at + 2 : len(raw)] == raw[at + 2 :]
    assert len(rec) == len(raw) + 20 + sep
    assert _I.unpack_from(rec, 0)[0] == len(rec)
    plen = _H.unpack_from(rec, properties_length_position(rec))[0]
    assert plen == raw_plen + 20 + sep == reserved_properties_length(raw_plen, raw[-1])
    if sep:
        assert rec[len(raw)] == 2
    assert rec[-20:] == bytes(20)
    crc = seal_prop_crc(rec, 0, len(rec))
    assert crc == zlib.crc32(bytes(rec[:-20])) & 0x7FFFFFFF
    assert rec[-20:] == b"__CRC32#\x01" + str(crc).zfill(10)[::-1].encode() + b"\x02"
    decoded = decode_message(bytes(rec), 0, check_crc=True)
    assert isinstance(decoded, MessageRecord)
    assert decoded.properties["__CRC32#"] == str(crc).zfill(10)[::-1]
    if isinstance(props, dict):
        assert {k: v for k, v in decoded.properties.items() if k != "__CRC32#"} == props
    assert check_prop_crc(bytes(rec), 0, len(rec), decoded.properties) == OK
    size, ok, req = check_message_and_return_size(bytes(rec), 0, check_crc=True, rocketmq_version="5.3.3",
                                                  force_verify_prop_crc=True)
    assert (size, ok) == (len(rec), True)
    assert req is not None
    assert req.properties == decoded.properties


def test_reserve_refuses_properties_past_32767() -> None:
    edge = reserve_prop_crc(_record({"X": "v" * 32744}))  # 32747 bytes: 32767 with the reserve
    assert _H.unpack_from(edge, properties_length_position(edge))[0] == 32767
    with pytest.raises(ValueError, match="32767"):
        reserve_prop_crc(_record({"X": "v" * 32745}))


def _sealed(props: dict[str, str] | bytes = b"TAGS\x01A\x02", body: bytes = b"Hello RocketMQ") -> bytearray:
    rec = reserve_prop_crc(_record(props, body=body))
    seal_prop_crc(rec, 0, len(rec))
    return rec


def _check(rec: bytes | bytearray, *, force: bool = True, crc: bool = True, version: str = "5.3.3"
           ) -> tuple[int, bool]:
    size, ok, _req = check_message_and_return_size(bytes(rec), 0, check_crc=crc, rocketmq_version=version,
                                                   force_verify_prop_crc=force)
    return size, ok


def test_header_damage_the_body_crc_cannot_see() -> None:
    rec = _sealed()
    rec[45] ^= 0x10  # BORNTIMESTAMP
    assert _check(rec, force=False) == (len(rec), True)  # the body CRC is fine
    assert _check(rec) == (-1, False)
    assert check_prop_crc(bytes(rec), 0, len(rec), decode_message(bytes(rec), 0).properties) == MISMATCH
    assert _check(rec, crc=False) == (len(rec), True)  # only with checkCRC (recovery), never the reput
    assert _check(rec, version="4.9.8") == (len(rec), True)  # 4.9.8 has no such check


def test_body_crc_is_not_checked_when_forced() -> None:
    rec = _sealed()
    rec[8:12] = _I.pack(12345)  # a wrong BODYCRC, sealed into the record's own CRC
    seal_prop_crc(rec, 0, len(rec))
    assert _check(rec, force=False) == (-1, False)
    assert _check(rec) == (len(rec), True)


def test_missing_property_fails() -> None:
    plain = _record(b"TAGS\x01A\x02")
    assert _check(plain, force=False) == (len(plain), True)
    assert _check(plain) == (-1, False)
    no_props = _record(b"")
    assert _check(no_props) == (-1, False)
    assert check_prop_crc(no_props, 0, len(no_props), None) == MISSING


def test_prop_crc_checked_before_the_length_check() -> None:
    """A record whose PROPERTIESLENGTH disagrees with TOTALSIZE is a "half message" (total, False)
    only when its __CRC32# passes; with a wrong one it is (-1, False): the order of 5.x's checks."""
    rec = _sealed()
    at = properties_length_position(rec)
    _H.pack_into(rec, at, _H.unpack_from(rec, at)[0] - 1)  # the last 0x02 falls outside the properties
    seal_prop_crc(rec, 0, len(rec))  # the value still parses (a missing last separator is tolerated)
    assert _check(rec) == (len(rec), False)
    rec[45] ^= 1
    assert _check(rec) == (-1, False)


def test_crc_zero_is_accepted() -> None:
    """A record whose CRC really is 0 (its FLAG chosen for it): rmqlab accepts it (a broker without
    the fix of RocketMQ issue 9121, ``expectedCRC > 0``, fails it; recovery notes that)."""
    rec = _sealed()
    rec[16:20] = forge_crc32_window(bytes(rec[:-20]), 16, 0)
    assert seal_prop_crc(rec, 0, len(rec)) == 0
    assert rec[-11:-1] == b"0000000000"
    assert check_prop_crc(bytes(rec), 0, len(rec), decode_message(bytes(rec), 0).properties) == ZERO
    assert _check(rec) == (len(rec), True)
    rec[-2] = ord("1")  # says 1000000000, CRC 0
    assert _check(rec) == (-1, False)


@pytest.mark.parametrize("value", [b"000000000x", b"-000000001", b"1111111111"])
def test_value_not_the_crc_fails(value: bytes) -> None:
    rec = _sealed()
    rec[-11:-1] = value
    assert _check(rec) == (-1, False)


def test_last_crc_property_wins() -> None:
    """A client's own __CRC32# before the store's (a batch's inner message keeps it): the parser
    keeps the later one, the store's."""
    rec = _sealed(b"__CRC32#\x01123\x02TAGS\x01A\x02")
    assert _check(rec) == (len(rec), True)


def test_prop_crc_mismatches() -> None:
    good, bad, plain = _sealed(), _sealed(body=b"other"), _record(b"TAGS\x01A\x02")
    bad[50] ^= 4
    buf = bytes(good + bad + plain)
    found = prop_crc_mismatches(buf, [0, len(good), len(good) + len(bad)], [len(good), len(bad), len(plain)])
    assert [(i, v) for i, v, _real in found] == [(1, bytes(bad[-11:-1]).decode())]
    assert found[0][2] == zlib.crc32(bytes(bad[:-20])) & 0x7FFFFFFF
