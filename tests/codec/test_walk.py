"""checkMessageAndReturnSize result codes (spec 2.12) and the strict record walker."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rmqlab.codec import flags
from rmqlab.codec.message import BlankRecord, MessageRecord, encode_blank, encode_message
from rmqlab.codec.walk import DispatchRequest, batch_fields, check_message_and_return_size, iter_records
from rmqlab.errors import CorruptRecord, TruncatedRecord

DELAY_TABLE = {1: 1000, 2: 5000, 3: 10000, 18: 7200000}


def _rec(**kw: object) -> bytes:
    base: dict[str, object] = dict(topic="TopicA", body=b"hello", store_timestamp=1700000000123)
    base.update(kw)
    return encode_message(**base)  # type: ignore[arg-type]


def test_success_fields() -> None:
    props = {"TAGS": "TagA", "KEYS": "a b", "UNIQ_KEY": "U1"}
    data = _rec(queue_id=3, queue_offset=7, commit_log_offset=500, properties=props, sys_flag=8,
                prepared_transaction_offset=42)  # fmt: skip
    size, ok, req = check_message_and_return_size(data, 0, check_crc=True)
    assert (size, ok) == (len(data), True)
    assert req == DispatchRequest(
        topic="TopicA", queue_id=3, commit_log_offset=500, msg_size=len(data), tags_code=2598919,
        store_timestamp=1700000000123, consume_queue_offset=7, keys="a b", uniq_key="U1",
        sys_flag=8, prepared_transaction_offset=42, properties=props, success=True,
    )  # fmt: skip


def test_keys_empty_string_without_properties_none_without_keys() -> None:
    _, _, req = check_message_and_return_size(_rec(), 0, check_crc=False)
    assert req is not None
    assert req.keys == ""
    assert req.uniq_key is None
    assert req.properties is None
    assert req.tags_code == 0
    _, _, req = check_message_and_return_size(_rec(properties={"TAGS": ""}), 0, check_crc=False)
    assert req is not None
    assert req.keys is None
    assert req.tags_code == 0


def test_blank_and_garbage() -> None:
    assert check_message_and_return_size(encode_blank(64) + bytes(56), 0, check_crc=True) == (
        0,
        True,
        None,
    )
    assert check_message_and_return_size(encode_blank(8), 0, check_crc=False) == (0, True, None)
    assert check_message_and_return_size(bytes(100), 0, check_crc=False) == (-1, False, None)
    assert check_message_and_return_size(b"\x00\x00", 0, check_crc=False) == (-1, False, None)


def test_crc_checked_only_when_asked() -> None:
    data = bytearray(_rec())
    data[88] ^= 1
    assert check_message_and_return_size(data, 0, check_crc=True) == (-1, False, None)
    assert check_message_and_return_size(data, 0, check_crc=False)[1] is True
    assert check_message_and_return_size(data, 0, check_crc=True, read_body=False)[1] is True


def test_half_message_returns_total_false() -> None:
    data = bytearray(_rec(properties={"TAGS": "x"}) + bytes(40))
    struct.pack_into(">i", data, 0, len(data) - 40 + 8)  # TOTALSIZE disagrees with the fields
    assert check_message_and_return_size(data, 0, check_crc=True) == (len(data) - 32, False, None)


# Java copies the hosts, the body (read_body), the topic and the properties into
# ``byte[] bytesContent = new byte[totalSize]`` (4.9.8 and 5.x): a negative TOTALSIZE, or a field
# longer than TOTALSIZE, throws inside the try -> (-1, False), not the half-message (total, False).
_SHORT_TOTALS = [
    pytest.param(-5, {}, id="negative-total"),
    pytest.param(6, {}, id="born-host-longer-than-total"),
    pytest.param(40, dict(body=b"b" * 60), id="body-longer-than-total"),
    pytest.param(40, dict(topic="T" * 50, body=b""), id="topic-longer-than-total"),
    pytest.param(40, dict(body=b"", properties={"KEYS": "k" * 60}), id="properties-longer-than-total"),
]


@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
@pytest.mark.parametrize(("total", "kw"), _SHORT_TOTALS)
def test_a_field_longer_than_total_size_is_minus_one(total: int, kw: dict[str, object], version: str) -> None:
    data = bytearray(_rec(**kw))
    struct.pack_into(">i", data, 0, total)
    got = check_message_and_return_size(data, 0, check_crc=False, rocketmq_version=version)
    assert got == (-1, False, None)


def test_a_body_longer_than_total_size_is_skipped_when_not_read() -> None:
    # read_body=False moves the position past the body (no copy): the record ends as a half message
    data = bytearray(_rec(body=b"b" * 100))
    struct.pack_into(">i", data, 0, 80)
    assert check_message_and_return_size(data, 0, check_crc=False, read_body=False) == (80, False, None)
    assert check_message_and_return_size(data, 0, check_crc=False, read_body=True) == (-1, False, None)


def test_truncated_buffer_is_minus_one() -> None:
    data = _rec(properties={"TAGS": "x"})
    for cut in (3, 8, 60, 95, len(data) - 1):
        for version in ("4.9.8", "5.3.3"):
            got = check_message_and_return_size(data[:cut], 0, check_crc=False,
                                                rocketmq_version=version)  # fmt: skip
            assert got == (-1, False, None), (cut, version)


def test_v2_only_in_5x() -> None:
    data = _rec(topic="T" * 130)
    assert check_message_and_return_size(data, 0, check_crc=True)[:2] == (-1, False)
    size, ok, req = check_message_and_return_size(data, 0, check_crc=True, rocketmq_version="5.3.3")
    assert ok
    assert size == len(data)
    assert req is not None
    assert req.topic == "T" * 130


@pytest.mark.parametrize(
    ("delay", "max_level", "expected"),
    [
        ("3", 18, 1700000000123 + 10000),  # golden #19
        ("40", 18, 1700000000123 + 7200000),  # clamped to level 18
        ("4", 18, 1700000000123 + 1000),  # level missing from the table
        ("3", 0, 2598919),  # 4.9.8 load-time quirk: table not parsed -> plain tags hash
        ("0", 18, 2598919),
    ],
)
def test_schedule_topic_tags_code(delay: str, max_level: int, expected: int) -> None:
    data = _rec(topic=flags.SCHEDULE_TOPIC, properties={"TAGS": "TagA", "DELAY": delay})
    _, ok, req = check_message_and_return_size(
        data, 0, check_crc=True, delay_level_table=DELAY_TABLE, max_delay_level=max_level
    )
    assert ok
    assert req is not None
    assert req.tags_code == expected


def test_bad_delay_level_is_an_exception_in_java() -> None:
    data = _rec(topic=flags.SCHEDULE_TOPIC, properties={"DELAY": " 3"})
    assert check_message_and_return_size(
        data, 0, check_crc=True, delay_level_table=DELAY_TABLE, max_delay_level=18
    ) == (-1, False, None)


def test_unknown_version_rejected() -> None:
    with pytest.raises(ValueError, match="unsupported"):
        check_message_and_return_size(b"", 0, check_crc=False, rocketmq_version="4.0")


# --- iter_records ----------------------------------------------------------------------------


def _file(records: list[bytes], size: int, blank: bool = True) -> bytearray:
    buf = bytearray(size)
    pos = 0
    for r in records:
        buf[pos : pos + len(r)] = r
        pos += len(r)
    if blank:
        buf[pos : pos + 8] = encode_blank(size - pos)
    return buf


def test_walk_to_blank_and_to_end_of_data() -> None:
    recs = [_rec(body=bytes([i]) * i, commit_log_offset=1000) for i in range(5)]
    buf = _file(recs, 1024)
    got = list(iter_records(buf, base_offset=4096))
    assert [o for o, _ in got][:5] == [4096 + sum(map(len, recs[:i])) for i in range(5)]
    assert got[-1][1] == BlankRecord(1024 - sum(map(len, recs)))
    assert all(isinstance(r, MessageRecord) for _, r in got[:-1])
    unblanked = _file(recs, 1024, blank=False)
    assert len(list(iter_records(unblanked))) == 5  # stops at zeros without yielding
    assert len(list(iter_records(unblanked, start=len(recs[0])))) == 4
    assert (
        list(iter_records(unblanked, end=len(recs[0]) + len(recs[1])))
        == list(iter_records(unblanked))[:2]
    )


@given(st.lists(st.binary(max_size=40), max_size=8), st.integers(0, 64))
def test_walk_round_trip(bodies: list[bytes], slack: int) -> None:
    recs = [_rec(body=b) for b in bodies]
    buf = _file(recs, sum(map(len, recs)) + 8 + slack)
    out = list(iter_records(buf, check_crc=True))
    assert [r.body for _, r in out[:-1]] == bodies  # type: ignore[union-attr]
    assert isinstance(out[-1][1], BlankRecord)


@pytest.mark.parametrize(
    ("pos", "raw", "reason"),
    [
        (4, b"\x01\x02\x03\x04", "bad_magic"),
        (0, struct.pack(">i", 4), "size_out_of_range"),
        (0, struct.pack(">i", 91 + 6 + 5 + 1), "length_mismatch"),
        (88, b"X", "crc_mismatch"),
    ],
)
def test_walk_reports_damage_at_exact_offset(pos: int, raw: bytes, reason: str) -> None:
    recs = [_rec(), _rec(), _rec()]
    buf = _file(recs, 512)
    second = len(recs[0])
    buf[second + pos : second + pos + len(raw)] = raw
    it = iter_records(buf, check_crc=True, file="00000000000000065536", base_offset=65536)
    first = next(it)
    assert first[0] == 65536
    with pytest.raises(CorruptRecord) as ei:
        next(it)
    assert ei.value.offset == 65536 + second
    assert ei.value.reason == reason
    assert ei.value.file == "00000000000000065536"


def test_walk_truncated_record_and_short_tail() -> None:
    rec = _rec()
    buf = rec + rec[:50]
    with pytest.raises(TruncatedRecord) as ei:
        list(iter_records(buf))
    assert ei.value.offset == len(rec)
    assert len(list(iter_records(rec + b"\x00" * 5))) == 1  # short all-zero tail = end of data
    with pytest.raises(TruncatedRecord):
        list(iter_records(rec + b"\x00\x01"))
    # a record crossing the end bound (e.g. the write position) is truncated too
    with pytest.raises(TruncatedRecord) as ei:
        list(iter_records(rec + rec, end=len(rec) + 20))
    assert ei.value.offset == len(rec)


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        (None, (-1, 1)),
        ({"TAGS": "a"}, (-1, 1)),  # a plain record: DispatchRequest's defaults (5.3.3)
        ({"INNER_NUM": "5"}, (-1, 1)),  # both are needed (setBatchSizeIfNeeded)
        ({"INNER_BASE": "9"}, (-1, 1)),
        ({"INNER_NUM": "5", "INNER_BASE": "9"}, (9, 5)),
        ({"INNER_NUM": "+32767", "INNER_BASE": "-1"}, (-1, 32767)),
    ],
)
def test_batch_fields(props: dict[str, str] | None, expected: tuple[int, int]) -> None:
    assert batch_fields(props) == expected


@pytest.mark.parametrize(("num", "base"), [("32768", "0"), ("x", "0"), ("2", "1.5"), ("-", "0")])
def test_an_inner_batch_java_cannot_parse_fails_the_record_in_5x_only(num: str, base: str) -> None:
    data = _rec(properties={"INNER_NUM": num, "INNER_BASE": base}, sys_flag=flags.INNER_BATCH_FLAG)
    assert check_message_and_return_size(data, 0, check_crc=False, rocketmq_version="5.3.3") == (-1, False, None)
    size, ok, req = check_message_and_return_size(data, 0, check_crc=False, rocketmq_version="4.9.8")
    assert (size, ok) == (len(data), True)
    assert req is not None


def test_an_inner_batch_record_parses_with_its_batch_fields() -> None:
    data = _rec(properties={"INNER_NUM": "7", "INNER_BASE": "40"}, queue_offset=40,
                sys_flag=flags.INNER_BATCH_FLAG | flags.NEED_UNWRAP_FLAG)
    size, ok, req = check_message_and_return_size(data, 0, check_crc=True, rocketmq_version="5.3.3")
    assert (size, ok) == (len(data), True)
    assert req is not None
    assert batch_fields(req.properties) == (40, 7)


def test_the_length_check_comes_before_the_inner_batch_parse() -> None:
    data = bytearray(_rec(properties={"INNER_NUM": "bad", "INNER_BASE": "0"}))
    struct.pack_into(">i", data, 0, len(data) - 1)  # TOTALSIZE disagrees with the fields
    assert check_message_and_return_size(bytes(data), 0, check_crc=False, rocketmq_version="5.3.3")[:2] == (
        len(data) - 1, False)
