"""Offset msgId and UNIQ_KEY (golden #7, #10, #11, spec 2.8-2.9)."""

from __future__ import annotations

import datetime as dt
import ipaddress
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rmqlab.codec.msg_id import (
    InvalidMessageId,
    UniqKeyGenerator,
    create_offset_msg_id,
    decode_offset_msg_id,
    month_start_ms,
    uniq_key,
    uniq_key_fix_string,
)
from rmqlab.errors import RmqlabError

UTC = ZoneInfo("UTC")


def test_offset_msg_id_golden() -> None:
    assert create_offset_msg_id("192.168.0.1", 10911, 1073741824) == (
        "C0A8000100002A9F0000000040000000"
    )
    assert decode_offset_msg_id("C0A8000100002A9F0000000040000000") == (
        "192.168.0.1",
        10911,
        1073741824,
    )
    assert create_offset_msg_id("192.168.0.1", 10911, 0) == "C0A8000100002A9F0000000000000000"
    v6 = create_offset_msg_id("fe80::1", 10911, 1073741824)
    assert v6 == "FE80000000000000000000000000000100002A9F0000000040000000"
    assert decode_offset_msg_id(v6) == ("fe80::1", 10911, 1073741824)


@pytest.mark.parametrize("bad", ["", "C0A8", "Z" * 32, "C0A8000100002A9F00000000400000", "0" * 40])
def test_decode_rejects_bad_ids(bad: str) -> None:
    with pytest.raises(InvalidMessageId) as ei:
        decode_offset_msg_id(bad)
    assert isinstance(ei.value, ValueError)
    assert isinstance(ei.value, RmqlabError)


@given(
    st.one_of(st.ip_addresses(v=4), st.ip_addresses(v=6)),
    st.integers(0, 65535),
    st.integers(0, 2**63 - 1),
)
def test_msg_id_round_trip(
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address, port: int, offset: int
) -> None:
    mid = create_offset_msg_id(str(ip), port, offset)
    assert len(mid) == (32 if ip.version == 4 else 56)
    assert mid == mid.upper()
    got_ip, got_port, got_off = decode_offset_msg_id(mid)
    assert ipaddress.ip_address(got_ip) == ip
    assert (got_port, got_off) == (port, offset)


def test_uniq_key_golden_11() -> None:
    fix = uniq_key_fix_string("192.168.0.1", 12345, 0x1B6D3586)
    assert fix == "C0A8000130391B6D3586"
    assert uniq_key(fix, 0x0A1B2C3D, 0, 7) == "C0A8000130391B6D35860A1B2C3D0007"
    v6 = uniq_key(uniq_key_fix_string("fd00::1", 1, 2), 5, 0, 1)
    assert len(v6) == 56


def test_uniq_key_clamps_small_negative_diff_and_wraps_counter() -> None:
    assert uniq_key("F", 1000, 1500, 0x12345)[1:] == "00000000" + "2345"
    assert uniq_key("F", 0, 2_000_000, 0)[1:9] == f"{(-2_000_000) & 0xFFFFFFFF:08X}"


def test_generator_month_start_and_counter() -> None:
    gen = UniqKeyGenerator("192.168.0.1", 12345, 0x1B6D3586)
    now = 1700000000123  # 2023-11-14T22:13:20.123Z
    start = int(dt.datetime(2023, 11, 1, tzinfo=dt.UTC).timestamp() * 1000)
    k0 = gen.create(now, UTC)
    k1 = gen.create(now, UTC)
    assert k0 == f"C0A8000130391B6D3586{now - start:08X}0000"
    assert k1.endswith("0001")
    # Shanghai is UTC+8: the month started 8 hours earlier in absolute time
    sh = UniqKeyGenerator("192.168.0.1", 12345, 0x1B6D3586).create(now, ZoneInfo("Asia/Shanghai"))
    assert int(sh[20:28], 16) == now - (start - 8 * 3600 * 1000)
    # crossing into December recomputes the start
    dec = int(dt.datetime(2023, 12, 1, 0, 0, 1, tzinfo=dt.UTC).timestamp() * 1000)
    assert gen.create(dec, UTC)[20:28] == f"{1000:08X}"


def test_month_start_december_rolls_year() -> None:
    now = int(dt.datetime(2023, 12, 31, 23, tzinfo=dt.UTC).timestamp() * 1000)
    start, nxt = month_start_ms(now, UTC)
    assert start == int(dt.datetime(2023, 12, 1, tzinfo=dt.UTC).timestamp() * 1000)
    assert nxt == int(dt.datetime(2024, 1, 1, tzinfo=dt.UTC).timestamp() * 1000)
