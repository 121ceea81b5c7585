"""Walk commitlog records in a buffer; RocketMQ's ``checkMessageAndReturnSize`` (spec 2.12).

Two views of the same bytes:

* :func:`check_message_and_return_size` reproduces the Java result codes exactly, because
  recovery and reput decide where the log ends from them: ``(0, True, None)`` at a blank,
  ``(-1, False, None)`` for anything unreadable, ``(total, False, None)`` for a "half message"
  whose TOTALSIZE disagrees with its fields, else ``(total, True, DispatchRequest)``.
* :func:`iter_records` is the strict walker for inspection, Spark and tests: it yields every
  record and raises :class:`~rmqlab.errors.CorruptRecord` naming the exact offset and reason.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, cast

from rmqlab.codec._frozen import fast_constructor
from rmqlab.codec.crc import body_crc
from rmqlab.codec.flags import (
    BLANK_MAGIC_CODE,
    BORNHOST_V6_FLAG,
    MESSAGE_MAGIC_CODE_V1,
    MESSAGE_MAGIC_CODE_V2,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_INNER_BASE,
    PROPERTY_INNER_NUM,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    SCHEDULE_TOPIC,
    STOREHOSTADDRESS_V6_FLAG,
)
from rmqlab.codec.java_hash import tags_code as _tags_code
from rmqlab.codec.message import BlankRecord, EndOfData, MessageRecord, _decode, calc_msg_length
from rmqlab.codec.prop_crc import MISMATCH, MISSING, check_prop_crc
from rmqlab.codec.properties import decode_properties
from rmqlab.errors import CorruptRecord

__all__ = [
    "DispatchRequest",
    "batch_fields",
    "check_message_and_return_size",
    "compute_tags_code",
    "iter_records",
    "new_dispatch_request",
    "parse_java_int",
    "parse_java_long",
]

_HEAD = struct.Struct(">iiiiiqqiq")  # total .. born timestamp
_TOTAL_MAGIC = struct.Struct(">ii")
_Q = struct.Struct(">q")
_TAIL = struct.Struct(">iqi")
_B = struct.Struct(">b")
_H = struct.Struct(">h")
_JAVA_INT = re.compile(r"[+-]?\d+")
_VERSIONS = ("4.9.8", "5.3.3")


@dataclass(frozen=True, slots=True)
class DispatchRequest:
    """What reput hands to the CQ and index dispatchers for one record (RocketMQ's DispatchRequest).

    ``keys`` is "" when the record has no properties and None when it has properties but no KEYS
    (a Java quirk kept on purpose); ``properties`` is None when there are none.
    """

    topic: str
    queue_id: int
    commit_log_offset: int
    msg_size: int
    tags_code: int
    store_timestamp: int
    consume_queue_offset: int
    keys: str | None
    uniq_key: str | None
    sys_flag: int
    prepared_transaction_offset: int
    properties: dict[str, str] | None
    success: bool = True


#: ``DispatchRequest(*fields)`` without the frozen ``__init__`` (hot: one per dispatched record).
new_dispatch_request = fast_constructor(DispatchRequest)


def parse_java_int(s: str) -> int:
    """``Integer.parseInt``: optional sign and digits only, int32 range; ValueError otherwise."""
    if not _JAVA_INT.fullmatch(s):
        raise ValueError(s)
    v = int(s)
    if not -(2**31) <= v < 2**31:
        raise ValueError(s)
    return v


def parse_java_long(s: str) -> int:
    """``Long.parseLong``: optional sign and digits only, int64 range; ValueError otherwise."""
    if not _JAVA_INT.fullmatch(s):
        raise ValueError(s)
    v = int(s)
    if not -(2**63) <= v < 2**63:
        raise ValueError(s)
    return v


def parse_java_short(s: str) -> int:
    """``Short.parseShort``: optional sign and digits only, int16 range; ValueError otherwise."""
    if not _JAVA_INT.fullmatch(s):
        raise ValueError(s)
    v = int(s)
    if not -(2**15) <= v < 2**15:
        raise ValueError(s)
    return v


def batch_fields(properties: dict[str, str] | None) -> tuple[int, int]:
    """``(msg_base_offset, batch_size)`` of a 5.x record: what ``CommitLog.setBatchSizeIfNeeded``
    sets on its DispatchRequest (spec §3.8). With both ``INNER_NUM`` and ``INNER_BASE`` (an inner
    batch: the broker puts INNER_NUM, the store INNER_BASE = the record's queue offset) they are
    ``Long.parseLong(INNER_BASE)`` and ``Short.parseShort(INNER_NUM)``; otherwise the request's
    defaults, -1 and 1 -- so a record without them (a plain message sent to a BatchCQ topic) is
    skipped by ``BatchConsumeQueue.putMessagePositionInfoWrapper``, as in 5.3.3. Raises
    ValueError where Java's parse throws (``check_message_and_return_size`` then fails the record).
    """
    if properties is None:
        return -1, 1
    num = properties.get(PROPERTY_INNER_NUM)
    if num is None:
        return -1, 1
    base = properties.get(PROPERTY_INNER_BASE)
    if base is None:
        return -1, 1
    return parse_java_long(base), parse_java_short(num)


def compute_tags_code(
    topic: str,
    properties: dict[str, str],
    store_timestamp: int,
    delay_level_table: dict[int, int] | None = None,
    max_delay_level: int = 0,
) -> int:
    """tagsCode (spec 2.10): hash of TAGS, or the due time for a delayed SCHEDULE_TOPIC record.

    ``max_delay_level`` 0 reproduces 4.9.8's load-time quirk (table not parsed yet: plain hash).
    Raises ValueError for a DELAY value Java's ``parseInt`` rejects.
    """
    code = _tags_code(properties.get(PROPERTY_TAGS))
    if topic == SCHEDULE_TOPIC:
        t = properties.get(PROPERTY_DELAY_TIME_LEVEL)
        if t is not None:
            level = min(parse_java_int(t), max_delay_level)
            if level > 0:
                delay = (delay_level_table or {}).get(level)
                code = store_timestamp + (delay if delay is not None else 1000)
    return code


def check_message_and_return_size(
    buf: Any,
    offset: int,
    *,
    check_crc: bool,
    read_body: bool = True,
    rocketmq_version: str = "4.9.8",
    delay_level_table: dict[int, int] | None = None,
    max_delay_level: int = 0,
    force_verify_prop_crc: bool = False,
) -> tuple[int, bool, DispatchRequest | None]:
    """``CommitLog.checkMessageAndReturnSize`` on the record at ``offset`` of ``buf`` (spec 2.12).

    The buffer's end plays the part of the Java ByteBuffer's limit: reading past it is the
    "exception" case, ``(-1, False, None)``. 4.9.8 accepts only the V1 magic; 5.3.3 also V2 and
    fails early when fewer bytes remain than TOTALSIZE promises. Never raises for bad data.

    ``force_verify_prop_crc`` (5.x ``forceVerifyPropCRC``; only with ``check_crc`` on 5.3.3): the
    body CRC is not checked; once the properties are parsed, and before the length check, the
    record must carry ``__CRC32#`` holding the CRC of its first ``TOTALSIZE - 20`` bytes
    (:func:`rmqlab.codec.prop_crc.check_prop_crc`), else ``(-1, False, None)``. A record whose
    CRC really is 0 (the property says 0) is accepted here, as RocketMQ does since the fix of its
    issue 9121; brokers without it (``expectedCRC > 0``) fail it -- recovery notes that.
    """
    if rocketmq_version not in _VERSIONS:
        raise ValueError(f"unsupported RocketMQ version {rocketmq_version!r}")
    v5 = rocketmq_version != "4.9.8"
    limit = len(buf)
    prop_crc = check_crc and v5 and force_verify_prop_crc
    try:
        return _check(
            buf, offset, limit, v5, check_crc and not prop_crc, read_body, delay_level_table, max_delay_level,
            prop_crc,
        )
    except (struct.error, ValueError, IndexError):
        return -1, False, None


def _check(
    buf: Any,
    offset: int,
    limit: int,
    v5: bool,
    check_crc: bool,
    read_body: bool,
    delay_level_table: dict[int, int] | None,
    max_delay_level: int,
    prop_crc: bool = False,
) -> tuple[int, bool, DispatchRequest | None]:
    remaining = limit - offset
    if offset < 0 or remaining < 8 or (v5 and remaining <= 4):
        return -1, False, None
    total, magic = _TOTAL_MAGIC.unpack_from(buf, offset)
    if v5 and remaining - 4 < total - 4:
        return -1, False, None
    if magic == MESSAGE_MAGIC_CODE_V1:
        version = 1
    elif magic == MESSAGE_MAGIC_CODE_V2 and v5:
        version = 2
    elif magic == BLANK_MAGIC_CODE:
        return 0, True, None
    else:
        return -1, False, None
    # Java copies the hosts, the body (when read), the topic and the properties into
    # ``byte[] bytesContent = new byte[totalSize]``: a negative TOTALSIZE, or a field longer than
    # it, throws inside the try (-1), before the half-message test could answer (total, False).
    if total < 0:
        return -1, False, None  # NegativeArraySizeException
    (_t, _m, crc, queue_id, _flag, queue_offset, phys, sys_flag, _born_ts) = _HEAD.unpack_from(
        buf, offset
    )
    born_len = 20 if sys_flag & BORNHOST_V6_FLAG else 8
    store_len = 20 if sys_flag & STOREHOSTADDRESS_V6_FLAG else 8
    if max(born_len, store_len) > total:
        return -1, False, None  # IndexOutOfBoundsException copying a host into bytesContent
    pos = offset + 48 + born_len
    store_ts = _Q.unpack_from(buf, pos)[0]
    pos += 8 + store_len
    _reconsume, prepared, body_len = _TAIL.unpack_from(buf, pos)
    pos += 16
    if body_len > 0:
        if pos + body_len > limit or (read_body and body_len > total):
            return -1, False, None  # BufferUnderflowException / IndexOutOfBoundsException
        if read_body and check_crc and body_crc(buf[pos : pos + body_len]) != crc:
            return -1, False, None
        pos += body_len
    if version == 1:
        topic_len = _B.unpack_from(buf, pos)[0]
        pos += 1
    else:
        topic_len = _H.unpack_from(buf, pos)[0]
        pos += 2
    if topic_len < 0 or pos + topic_len > limit or topic_len > total:
        return -1, False, None  # NegativeArraySizeException / underflow
    topic = bytes(buf[pos : pos + topic_len]).decode("utf-8", errors="replace")
    pos += topic_len
    props_len = _H.unpack_from(buf, pos)[0]
    pos += 2
    keys: str | None = ""
    uniq_key: str | None = None
    tags_code = 0
    properties: dict[str, str] | None = None
    if props_len > 0:
        if pos + props_len > limit or props_len > total:
            return -1, False, None
        properties = decode_properties(buf[pos : pos + props_len])
        keys = properties.get(PROPERTY_KEYS)
        uniq_key = properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        tags_code = compute_tags_code(
            topic, properties, store_ts, delay_level_table, max_delay_level
        )
    if prop_crc and check_prop_crc(buf, offset, total, properties) in (MISSING, MISMATCH):
        return -1, False, None  # 5.x forceVerifyPropCRC: before the length check
    if total != calc_msg_length(version, sys_flag, body_len, topic_len, props_len):
        return total, False, None  # "half message"
    if v5 and properties is not None and PROPERTY_INNER_NUM in properties:
        # 5.x setBatchSizeIfNeeded, after the length check and inside checkMessageAndReturnSize's
        # try: an INNER_BASE or INNER_NUM Java cannot parse fails the record (ValueError -> -1)
        batch_fields(properties)
    req = new_dispatch_request(
        topic, queue_id, phys, total, tags_code, store_ts, queue_offset, keys, uniq_key,
        sys_flag, prepared, properties,
    )  # fmt: skip
    return total, True, req


def iter_records(
    buf: Any,
    start: int = 0,
    end: int | None = None,
    *,
    check_crc: bool = False,
    file: str | None = None,
    base_offset: int = 0,
) -> Iterator[tuple[int, MessageRecord | BlankRecord]]:
    """Yield ``(offset, record)`` from ``start`` until a blank (yielded), end-of-data or ``end``.

    ``end`` (default: buffer length) bounds the walk like a write position: a record may not cross
    it. Offsets yielded and reported in errors are ``position + base_offset``. Damage raises
    ``CorruptRecord``/``TruncatedRecord`` at the exact offset; a tail of fewer than 8 bytes that is
    all zero counts as end-of-data.
    """
    limit = len(buf) if end is None else min(end, len(buf))
    pos = start
    while pos < limit:
        if limit - pos < 8 and not any(bytes(buf[pos:limit])):
            return
        try:
            rec = _decode(buf, pos, limit, check_crc, True, file)
        except CorruptRecord as e:
            if base_offset:
                raise e.with_file(cast(str, e.file), base_offset) from None
            raise
        if isinstance(rec, EndOfData):
            return
        yield pos + base_offset, rec
        if isinstance(rec, BlankRecord):
            return
        pos += rec.store_size
