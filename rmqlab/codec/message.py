"""CommitLog record codec, V1 and V2, plus the 8-byte end-of-file blank record (spec 2.1-2.4).

Layout of one record (big-endian; BH/SH = 8 for an IPv4 host, 20 for IPv6; TL = 1 (V1) or 2 (V2))::

    off        size  field
    0          4     TOTALSIZE            whole record, this field included
    4          4     MAGICCODE            V1 0xDAA320A7 | V2 0xDAA320AB | blank 0xCBD43194
    8          4     BODYCRC              crc32(body) & 0x7FFFFFFF
    12         4     QUEUEID
    16         4     FLAG                 user flag
    20         8     QUEUEOFFSET          consume-queue offset (0 for PREPARED/ROLLBACK)
    28         8     PHYSICALOFFSET       this record's own commitlog offset
    36         4     SYSFLAG              bits in codec.flags
    40         8     BORNTIMESTAMP        ms
    48         BH    BORNHOST             ip (4|16) + int port
    48+BH      8     STORETIMESTAMP       ms
    56+BH      SH    STOREHOSTADDRESS     ip (4|16) + int port
    56+BH+SH   4     RECONSUMETIMES
    60+BH+SH   8     PREPAREDTRANSACTIONOFFSET
    68+BH+SH   4     BODYLENGTH  B
    72+BH+SH   B     BODY
    ...        TL    TOPICLENGTH T        signed byte (V1) / signed short (V2)
    ...        T     TOPIC                UTF-8
    ...        2     PROPERTIESLENGTH P   signed short
    ...        P     PROPERTIES           name 0x01 value 0x02 ...

    TOTALSIZE = 74 + BH + SH + TL + B + T + P     (91 + B + T + P for V1 with two IPv4 hosts)

    blank (end of file):  int remaining-bytes-of-file, int 0xCBD43194   (8 bytes, rest untouched)

Decoding is sans-IO: it takes any buffer (bytes, bytearray, memoryview, mmap) and an offset and
returns a value or raises :class:`~rmqlab.errors.CorruptRecord` / ``TruncatedRecord`` naming the
offset and a reason. Encoding packs each fixed section with one precompiled ``struct.Struct``.
"""

from __future__ import annotations

import hashlib
import socket
import struct
from collections.abc import Mapping
from dataclasses import dataclass, fields, make_dataclass
from functools import lru_cache
from itertools import repeat
from typing import Any

from rmqlab.codec._frozen import fast_constructor
from rmqlab.codec.crc import body_crc as _body_crc
from rmqlab.codec.crc import crc32 as _crc32
from rmqlab.codec.flags import (
    BLANK_MAGIC_CODE,
    BORNHOST_V6_FLAG,
    END_FILE_MIN_BLANK_LENGTH,
    KEY_SEPARATOR,
    MESSAGE_MAGIC_CODE_V1,
    MESSAGE_MAGIC_CODE_V2,
    NAME_VALUE_SEPARATOR,
    PROPERTY_KEYS,
    PROPERTY_SEPARATOR,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    STOREHOSTADDRESS_V6_FLAG,
    transaction_type,
)
from rmqlab.codec.java_hash import tags_code as _tags_code
from rmqlab.codec.msg_id import create_offset_msg_id, ip_to_bytes
from rmqlab.codec.properties import decode_properties, encode_properties
from rmqlab.codec.properties import raw_property_value as _raw_property_value
from rmqlab.errors import CorruptRecord, TruncatedRecord

__all__ = [
    "BODY_CRC_POSITION",
    "BORN_HOST_POSITION",
    "MAGIC_CODE_POSITION",
    "MIN_RECORD_SIZE",
    "PHYSICAL_OFFSET_POSITION",
    "QUEUE_OFFSET_POSITION",
    "SYSFLAG_POSITION",
    "BlankRecord",
    "EndOfData",
    "MessageRecord",
    "calc_msg_length",
    "decode_message",
    "encode_blank",
    "encode_into",
    "encode_message",
    "encode_message_parts",
    "head_struct",
    "host_length",
    "needs_blank",
    "store_timestamp_position",
    "topic_field",
]

MAGIC_CODE_POSITION = 4
BODY_CRC_POSITION = 8
QUEUE_OFFSET_POSITION = 20
PHYSICAL_OFFSET_POSITION = 28
SYSFLAG_POSITION = 36
BORN_HOST_POSITION = 48
MAX_TOPIC_LENGTH_V1 = 127  # signed byte
MAX_TOPIC_LENGTH_V2 = 32767  # signed short
MAX_PROPERTIES_LENGTH = 32767

_HEAD = struct.Struct(">iiiiiqqiq")  # total .. born timestamp: 48 bytes
_HEAD_V4V4 = struct.Struct(">iiiiiqqiq4siq4siiqi")  # the common case in one call: 88 bytes
_TOTAL_MAGIC = struct.Struct(">ii")
_HOST4 = struct.Struct(">4si")
_HOST6 = struct.Struct(">16si")
_Q = struct.Struct(">q")
_I = struct.Struct(">i")
_H = struct.Struct(">h")
_B = struct.Struct(">b")
_TAIL = struct.Struct(">iqi")  # reconsume times, prepared tx offset, body length

MIN_RECORD_SIZE = 91  # V1, two IPv4 hosts, empty body/topic/properties


def host_length(sys_flag: int, v6_flag: int) -> int:
    """8 (IPv4: 4-byte ip + int port) or 20 (IPv6) for the host guarded by ``v6_flag``."""
    return 20 if sys_flag & v6_flag else 8


def store_timestamp_position(sys_flag: int) -> int:
    """Byte position of STORETIMESTAMP: ``48 + BH`` (56 for an IPv4 born host, 68 for IPv6)."""
    return 68 if sys_flag & BORNHOST_V6_FLAG else 56


def calc_msg_length(
    version: int, sys_flag: int, body_len: int, topic_len: int, props_len: int
) -> int:
    """``calMsgLength``: the TOTALSIZE the fields imply; negative lengths count as 0."""
    bh = 20 if sys_flag & BORNHOST_V6_FLAG else 8
    sh = 20 if sys_flag & STOREHOSTADDRESS_V6_FLAG else 8
    tl = 1 if version == 1 else 2
    return 74 + bh + sh + tl + max(body_len, 0) + max(topic_len, 0) + max(props_len, 0)


def encode_blank(size: int) -> bytes:
    """The 8-byte end-of-file record: ``int size`` (bytes left in the file), blank magic."""
    return _TOTAL_MAGIC.pack(size, BLANK_MAGIC_CODE)


def needs_blank(record_len: int, max_blank: int) -> bool:
    """True when a record of ``record_len`` does not fit in the ``max_blank`` bytes left in a file.

    The writer keeps room for the 8-byte blank: ``record_len + 8 > max_blank`` means write the
    blank and move to the next file (spec 2.4, golden #22).
    """
    return record_len + END_FILE_MIN_BLANK_LENGTH > max_blank


@dataclass(frozen=True, slots=True)
class BlankRecord:
    """End-of-file filler: ``size`` is the declared remaining length of the file (>= 8)."""

    size: int


@dataclass(frozen=True, slots=True)
class EndOfData:
    """Unwritten space (TOTALSIZE 0 and magic 0) at ``offset``: the log ends here."""

    offset: int


@lru_cache(maxsize=1024)
def _ip_str(raw: bytes) -> str:
    if len(raw) == 4:
        return socket.inet_ntoa(raw)
    return socket.inet_ntop(socket.AF_INET6, raw)


@dataclass(frozen=True, slots=True)
class MessageRecord:
    """One decoded record; ``properties`` in on-disk order, ``properties_raw`` as stored.

    Derived values (tags, keys, uniq_key, msg_id, tags_code, version, transaction_type) are
    computed on access from the stored fields, and so is ``crc_ok`` (``body_crc`` against the
    body): RocketMQ's readers never check the CRC on a get, and a CRC32 of every returned body
    would be a tenth of a decode (``decode_message(check_crc=True)`` checks it up front).

    ``properties`` is parsed from ``properties_raw`` on first access when the decoder left it
    unparsed (see :class:`_LazyProperties`; building the dict was a third of a decode), and
    ``tags``/``keys``/``uniq_key`` read their one value straight from the raw bytes until then.
    To every reader it is a plain field holding a ``dict``: equality, repr, pickling, hashing,
    ``dataclasses.replace``/``asdict`` see the parsed map.
    """

    store_size: int
    magic: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    commit_log_offset: int
    sys_flag: int
    born_timestamp: int
    born_host: tuple[str, int]
    store_timestamp: int
    store_host: tuple[str, int]
    reconsume_times: int
    prepared_transaction_offset: int
    body: bytes
    topic: str
    properties: dict[str, str]
    properties_raw: bytes

    @property
    def crc_ok(self) -> bool:
        return _body_crc(self.body) == self.body_crc

    @property
    def version(self) -> int:
        return 2 if self.magic == MESSAGE_MAGIC_CODE_V2 else 1

    @property
    def transaction_type(self) -> int:
        return transaction_type(self.sys_flag)

    @property
    def tags(self) -> str | None:
        p = self._properties_slot  # type: ignore[attr-defined]
        if p is not _UNPARSED:
            return p.get(PROPERTY_TAGS)
        # raw_property_value's common case inlined: the last "TAGS\x01" starts a pair (byte 0 or
        # after 0x02) and its value is non-empty; anything else takes the full search.
        head, key, value = self.properties_raw.rpartition(_TAGS_KEY)
        if key and (not head or head[-1] == 2):
            value = value.partition(b"\x02")[0]
            if value:
                return value.decode("utf-8", "replace")
        return _raw_property_value(self.properties_raw, _TAGS_KEY) if key else None

    @property
    def tags_code(self) -> int:
        """Plain tags code (Java hash of TAGS, 0 if none); no delay-level override (see walk)."""
        return _tags_code(self.tags)

    @property
    def keys(self) -> list[str]:
        """KEYS split on single spaces, empty tokens dropped (what the index dispatcher indexes)."""
        p = self._properties_slot  # type: ignore[attr-defined]
        if p is not _UNPARSED:
            raw = p.get(PROPERTY_KEYS)
        else:  # as in tags
            head, key, value = self.properties_raw.rpartition(_KEYS_KEY)
            if key and (not head or head[-1] == 2) and (value := value.partition(b"\x02")[0]):
                raw = value.decode("utf-8", "replace")
            else:
                raw = _raw_property_value(self.properties_raw, _KEYS_KEY) if key else None
        if not raw:
            return []
        keys = raw.split(KEY_SEPARATOR)
        return [k for k in keys if k] if "" in keys else keys

    @property
    def uniq_key(self) -> str | None:
        p = self._properties_slot  # type: ignore[attr-defined]
        if p is _UNPARSED:
            return _raw_property_value(self.properties_raw, _UNIQ_KEY_KEY)
        return p.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    @property
    def msg_id(self) -> str:
        """Offset msgId: store host + this record's commitlog offset (spec 2.8)."""
        return create_offset_msg_id(self.store_host[0], self.store_host[1], self.commit_log_offset)

    @property
    def end_offset(self) -> int:
        """Commitlog offset just past this record."""
        return self.commit_log_offset + self.store_size

    def to_dict(self, *, body: str = "summary") -> dict[str, Any]:
        """JSON-friendly dict. ``body``: "summary" (length + sha256), "none", or "hex"."""
        d: dict[str, Any] = {
            "msg_id": self.msg_id,
            "uniq_key": self.uniq_key,
            "topic": self.topic,
            "queue_id": self.queue_id,
            "queue_offset": self.queue_offset,
            "commit_log_offset": self.commit_log_offset,
            "store_size": self.store_size,
            "version": self.version,
            "magic": self.magic,
            "body_crc": self.body_crc,
            "crc_ok": self.crc_ok,
            "flag": self.flag,
            "sys_flag": self.sys_flag,
            "transaction_type": self.transaction_type,
            "born_timestamp": self.born_timestamp,
            "born_host": f"{self.born_host[0]}:{self.born_host[1]}",
            "store_timestamp": self.store_timestamp,
            "store_host": f"{self.store_host[0]}:{self.store_host[1]}",
            "reconsume_times": self.reconsume_times,
            "prepared_transaction_offset": self.prepared_transaction_offset,
            "tags": self.tags,
            "tags_code": self.tags_code,
            "keys": self.keys,
            "properties": dict(self.properties),
            "body_length": len(self.body),
        }
        if body == "summary":
            d["body_sha256"] = hashlib.sha256(self.body).hexdigest()
        elif body == "hex":
            d["body"] = self.body.hex()
        return d


_split = str.split
_NAME_VALUE = repeat(NAME_VALUE_SEPARATOR)  # endless: shared by every map() below
_MAXSPLIT_1 = repeat(1)


class _Unparsed:
    """Type of :data:`_UNPARSED`, what a decoder stores in the ``properties`` slot to defer it."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<properties not parsed yet>"

    def __reduce__(self) -> str:
        return "_UNPARSED"  # a singleton, should one ever be pickled


_UNPARSED = _Unparsed()


class _LazyProperties:
    """``MessageRecord.properties``: a data descriptor over the field's own slot.

    A decoder may store :data:`_UNPARSED` in the slot; the first read parses ``properties_raw``
    (:func:`decode_properties`, Java's rules) and stores the dict in the slot, so every read
    (attribute access, the dataclass ``__eq__``/``__repr__``/``__hash__``/``__getstate__``,
    ``replace``, ``asdict``) sees a ``dict``. Writes go to the slot: the frozen ``__setattr__``
    still refuses them, ``__init__``/``__setstate__`` (``object.__setattr__``) reach it. Two
    threads parsing at once store equal dicts.
    """

    __slots__ = ("_delete", "_set")

    def __init__(self, slot: Any) -> None:
        self._set, self._delete = slot.__set__, slot.__delete__

    def __get__(self, obj: MessageRecord | None, owner: type | None = None) -> Any:
        if obj is None:
            return self
        p = obj._properties_slot  # type: ignore[attr-defined]
        if p is not _UNPARSED:
            return p
        raw = obj.properties_raw
        if raw:  # decode_properties(raw), its fast path inlined: a third less on a 4-pair record
            parts = raw.decode("utf-8", "replace").split(PROPERTY_SEPARATOR)
            if not parts[-1]:
                parts.pop()
            try:
                p = dict(map(_split, parts, _NAME_VALUE, _MAXSPLIT_1))
            except ValueError:  # a part without 0x01
                p = decode_properties(raw)
            else:
                if len(p) != len(parts) or "" in p or "" in p.values():
                    p = decode_properties(raw)
        else:
            p = {}
        self._set(obj, p)
        return p

    def __set__(self, obj: MessageRecord, value: dict[str, str]) -> None:
        self._set(obj, value)

    def __delete__(self, obj: MessageRecord) -> None:
        self._delete(obj)


# The slot's own member descriptor stays reachable as ``_properties_slot`` (a C-level read of the
# raw slot for tags/keys/uniq_key); ``properties`` becomes the lazy descriptor over it.
MessageRecord._properties_slot = MessageRecord.__dict__["properties"]  # type: ignore[attr-defined]
MessageRecord.properties = _LazyProperties(MessageRecord.__dict__["properties"])  # type: ignore[assignment,misc]
_TAGS_KEY = PROPERTY_TAGS.encode() + b"\x01"
_KEYS_KEY = PROPERTY_KEYS.encode() + b"\x01"
_UNIQ_KEY_KEY = PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX.encode() + b"\x01"

_new_message_record = fast_constructor(MessageRecord)
# The same unfrozen twin as fast_constructor's, for _decode to fill slot by slot and re-label
# (no call with 18 arguments per record); the probe fails at import if CPython refuses the layout.
_new_object = object.__new__
_RecordBuilder = make_dataclass(
    "_RecordBuilder", [(f.name, f.type) for f in fields(MessageRecord)], slots=True
)
if _RecordBuilder.__slots__ != MessageRecord.__slots__:  # type: ignore[attr-defined]
    raise TypeError("MessageRecord: builder slots differ")
object.__new__(_RecordBuilder).__class__ = MessageRecord


# --- decoding --------------------------------------------------------------------------------


def decode_message(
    buf: Any,
    offset: int = 0,
    *,
    check_crc: bool = False,
    allow_v2: bool = True,
    file: str | None = None,
) -> MessageRecord | BlankRecord | EndOfData:
    """Decode the record starting at ``offset`` of ``buf``.

    Returns a :class:`MessageRecord`, a :class:`BlankRecord` (end of file) or :class:`EndOfData`
    (TOTALSIZE and magic both 0). Raises ``TruncatedRecord`` when the buffer ends before the
    record (fewer than 8 bytes left, or TOTALSIZE past the end) and ``CorruptRecord`` with reason
    ``bad_magic``, ``size_out_of_range`` (TOTALSIZE below the 91-byte minimum),
    ``length_mismatch`` (fields disagree with TOTALSIZE), ``bad_field`` (negative length, invalid
    UTF-8 topic) or, only when ``check_crc``, ``crc_mismatch``. ``allow_v2=False`` reads like
    4.9.8, where the V2 magic is illegal.
    """
    return _decode(buf, offset, len(buf), check_crc, allow_v2, file)


_V6_HOSTS = BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG
# The 88-byte head with each IPv4 host kept as its raw 8 bytes (ip + port) read as one unsigned
# 64-bit int: one cached lookup turns it into the (ip string, port) tuple (an int key: no bytes
# object to make and hash per host).
_unpack_v4v4_raw_hosts = struct.Struct(">iiiiiqqiqQqQiqi").unpack_from


def _decode(
    buf: Any, offset: int, limit: int, check_crc: bool, allow_v2: bool, file: str | None
) -> MessageRecord | BlankRecord | EndOfData:
    """:func:`_decode_exact` with a fast path for the common record: a byte memoryview (what
    every mapped-file read hands out), V1 or V2, two IPv4 hosts, every field consistent.

    One struct call for the 88-byte head, lengths read by indexing, ``tobytes`` copies (about 3x
    cheaper than ``bytes(view)``) and the properties left unparsed (:class:`_LazyProperties`
    parses them on first access). It returns only a record every check of the exact decoder
    accepts -- TOTALSIZE equal to what the lengths imply, no length negative, topic valid UTF-8,
    CRC when asked -- and hands anything else (blank, end of data, IPv6, damage, other buffer
    types) to :func:`_decode_exact`, which decides and names the error. Equivalence:
    ``tests/codec/test_message_fast_decode.py``.
    """
    if type(buf) is not memoryview or offset < 0 or limit - offset < MIN_RECORD_SIZE or buf.format != "B":
        return _decode_exact(buf, offset, limit, check_crc, allow_v2, file)
    (
        total, magic, crc, queue_id, flag, queue_offset, phys, sys_flag, born_ts,
        born_host, store_ts, store_host, reconsume, prepared, body_len,
    ) = _unpack_v4v4_raw_hosts(buf, offset)  # fmt: skip
    if (
        sys_flag & _V6_HOSTS
        or body_len < 0
        or total > limit - offset
        or total < 91 + body_len
        or not (magic == MESSAGE_MAGIC_CODE_V1 or (magic == MESSAGE_MAGIC_CODE_V2 and allow_v2))
    ):
        return _decode_exact(buf, offset, limit, check_crc, allow_v2, file)
    pos = offset + 88 + body_len  # TOPICLENGTH: inside the record (total >= 91 + body_len)
    body = buf[offset + 88 : pos].tobytes()
    if check_crc and (_crc32(body) & 0x7FFFFFFF) != crc:  # body_crc(): crc32 of b"" is 0 as well
        return _decode_exact(buf, offset, limit, check_crc, allow_v2, file)
    # The rest of the record, TOPICLENGTH .. PROPERTIES, in one copy (>= 3 bytes, see above):
    # bytes index and slice cheaper than the view's.
    tail = buf[pos : offset + total].tobytes()
    if magic == MESSAGE_MAGIC_CODE_V1:
        topic_len = tail[0]
        pos = 1
        if topic_len > MAX_TOPIC_LENGTH_V1:  # a negative signed byte
            return _decode_exact(buf, offset, limit, check_crc, allow_v2, file)
    else:
        if len(tail) < 4:
            return _decode_exact(buf, offset, limit, check_crc, allow_v2, file)
        topic_len = tail[0] << 8 | tail[1]
        pos = 2
        if topic_len > MAX_TOPIC_LENGTH_V2:
            return _decode_exact(buf, offset, limit, check_crc, allow_v2, file)
    props_at = pos + topic_len
    if len(tail) < props_at + 2:  # PROPERTIESLENGTH would lie past the record
        return _decode_exact(buf, offset, limit, check_crc, allow_v2, file)
    # TOTALSIZE == what the lengths imply (also rejects a negative short)
    if len(tail) != props_at + 2 + (tail[props_at] << 8 | tail[props_at + 1]):
        return _decode_exact(buf, offset, limit, check_crc, allow_v2, file)
    try:
        topic = tail[pos:props_at].decode()
    except UnicodeDecodeError:
        return _decode_exact(buf, offset, limit, check_crc, allow_v2, file)
    # _new_message_record(...) inlined: slot stores on the unfrozen twin (no 18-argument call),
    # then re-labelled; every field of MessageRecord is set (tests/codec/test_message_fast_decode.py).
    rec = _new_object(_RecordBuilder)
    rec.store_size = total
    rec.magic = magic
    rec.body_crc = crc
    rec.queue_id = queue_id
    rec.flag = flag
    rec.queue_offset = queue_offset
    rec.commit_log_offset = phys
    rec.sys_flag = sys_flag
    rec.born_timestamp = born_ts
    rec.born_host = _hosts_get(born_host) or _host4(born_host)
    rec.store_timestamp = store_ts
    rec.store_host = _hosts_get(store_host) or _host4(store_host)
    rec.reconsume_times = reconsume
    rec.prepared_transaction_offset = prepared
    rec.body = body
    rec.topic = topic
    rec.properties = _UNPARSED
    rec.properties_raw = tail[props_at + 2 :]
    rec.__class__ = MessageRecord
    return rec


# raw 8-byte IPv4 host field (as an unsigned big-endian int) -> (ip, port): a plain dict (a store
# sees few distinct hosts; a dict.get is cheaper than an lru_cache call), cleared if it grows large.
_hosts: dict[int, tuple[str, int]] = {}
_hosts_get = _hosts.get


def _host4(raw: int) -> tuple[str, int]:
    ip, port = _HOST4.unpack(raw.to_bytes(8, "big"))
    if len(_hosts) >= 4096:
        _hosts.clear()
    host = _hosts[raw] = (_ip_str(ip), port)
    return host


def _decode_exact(
    buf: Any, offset: int, limit: int, check_crc: bool, allow_v2: bool, file: str | None
) -> MessageRecord | BlankRecord | EndOfData:
    # Every check in order, for any buffer type: the reference the fast path defers to.
    if offset < 0 or limit - offset < 8:
        raise TruncatedRecord(file, offset, f"{max(limit - offset, 0)} bytes left, need 8")
    total, magic = _TOTAL_MAGIC.unpack_from(buf, offset)
    if magic == MESSAGE_MAGIC_CODE_V1:
        version = 1
    elif magic == MESSAGE_MAGIC_CODE_V2 and allow_v2:
        version = 2
    elif magic == BLANK_MAGIC_CODE:
        return BlankRecord(total)
    elif magic == 0 and total == 0:
        return EndOfData(offset)
    else:
        raise CorruptRecord(file, offset, "bad_magic", f"magic 0x{magic & 0xFFFFFFFF:08X}")
    if total < MIN_RECORD_SIZE:
        raise CorruptRecord(file, offset, "size_out_of_range", f"TOTALSIZE {total}")
    if total > limit - offset:
        raise TruncatedRecord(
            file, offset, f"TOTALSIZE {total} but only {limit - offset} bytes left"
        )
    end = offset + total

    # total >= MIN_RECORD_SIZE (91) bytes are there, so the 88-byte IPv4/IPv4 head always
    # unpacks; it is the answer unless SYSFLAG says a host is IPv6 (then re-read below).
    (
        _t, _m, crc, queue_id, flag, queue_offset, phys, sys_flag, born_ts,
        born_ip, born_port, store_ts, store_ip, store_port,
        reconsume, prepared, body_len,
    ) = _HEAD_V4V4.unpack_from(buf, offset)  # fmt: skip
    if not sys_flag & (BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG):
        pos = offset + 88
    else:
        # An IPv6 host widens the head by 12 bytes: a record shorter than the emptiest record
        # with these hosts (91..) ends inside the head, so its fields cannot even be read.
        shortest = calc_msg_length(version, sys_flag, 0, 0, 0)
        if shortest > total:
            head_len = shortest - (1 if version == 1 else 2) - 2  # less TOPICLENGTH, PROPERTIESLENGTH
            raise CorruptRecord(
                file, offset, "length_mismatch", f"TOTALSIZE {total} is too short for a {head_len}-byte IPv6 head"
            )
        (_t, _m, crc, queue_id, flag, queue_offset, phys, sys_flag, born_ts) = _HEAD.unpack_from(
            buf, offset
        )
        pos = offset + 48
        hs = _HOST6 if sys_flag & BORNHOST_V6_FLAG else _HOST4
        born_ip, born_port = hs.unpack_from(buf, pos)
        pos += hs.size
        store_ts = _Q.unpack_from(buf, pos)[0]
        pos += 8
        hs = _HOST6 if sys_flag & STOREHOSTADDRESS_V6_FLAG else _HOST4
        store_ip, store_port = hs.unpack_from(buf, pos)
        pos += hs.size
        reconsume, prepared, body_len = _TAIL.unpack_from(buf, pos)
        pos += 16

    if body_len < 0:
        raise CorruptRecord(file, offset, "bad_field", f"negative BODYLENGTH {body_len}")
    tl = 1 if version == 1 else 2
    if pos + body_len + tl > end:
        raise CorruptRecord(
            file, offset, "length_mismatch", f"BODYLENGTH {body_len} overruns TOTALSIZE {total}"
        )
    body = bytes(buf[pos : pos + body_len])
    pos += body_len
    topic_len = (_B if version == 1 else _H).unpack_from(buf, pos)[0]
    pos += tl
    if topic_len < 0:
        raise CorruptRecord(file, offset, "bad_field", f"negative TOPICLENGTH {topic_len}")
    if pos + topic_len + 2 > end:
        raise CorruptRecord(
            file, offset, "length_mismatch", f"TOPICLENGTH {topic_len} overruns TOTALSIZE {total}"
        )
    try:
        topic = str(buf[pos : pos + topic_len], "utf-8")
    except UnicodeDecodeError:
        raise CorruptRecord(file, offset, "bad_field", "topic is not valid UTF-8") from None
    pos += topic_len
    props_len = _H.unpack_from(buf, pos)[0]
    pos += 2
    if props_len < 0:
        raise CorruptRecord(file, offset, "bad_field", f"negative PROPERTIESLENGTH {props_len}")
    expect = calc_msg_length(version, sys_flag, body_len, topic_len, props_len)
    if expect != total:
        raise CorruptRecord(
            file, offset, "length_mismatch", f"TOTALSIZE {total} but fields imply {expect}"
        )
    props_raw = bytes(buf[pos : pos + props_len])
    if check_crc and _body_crc(body) != crc:
        raise CorruptRecord(file, offset, "crc_mismatch", f"stored BODYCRC {crc}")
    return _new_message_record(
        total, magic, crc, queue_id, flag, queue_offset, phys, sys_flag, born_ts,
        (_ip_str(born_ip), born_port), store_ts, (_ip_str(store_ip), store_port),
        reconsume, prepared, body, topic, decode_properties(props_raw) if props_raw else {},
        props_raw,
    )  # fmt: skip


# --- encoding --------------------------------------------------------------------------------


def _java_length(s: str) -> int:
    """``String.length()``: UTF-16 code units."""
    if s.isascii():
        return len(s)
    return len(s.encode("utf-16-le")) // 2


@lru_cache(maxsize=4096)
def _topic_field(topic: str, version: int | None) -> tuple[int, int, bytes]:
    """``(version, magic, TOPICLENGTH + TOPIC bytes)`` of a topic; cached per topic (hot path).

    ``version`` None picks V2 only when the topic has more than 127 Java chars. Raises
    ValueError when the length does not fit the version's field.
    """
    topic_b = topic.encode("utf-8")
    if version is None:
        version = 2 if _java_length(topic) > MAX_TOPIC_LENGTH_V1 else 1
    if version == 1:
        if len(topic_b) > MAX_TOPIC_LENGTH_V1:
            raise ValueError(
                f"V1 topic is {len(topic_b)} UTF-8 bytes; at most 127 can be read back"
            )
        return 1, MESSAGE_MAGIC_CODE_V1, _B.pack(len(topic_b)) + topic_b
    if version == 2:
        if len(topic_b) > MAX_TOPIC_LENGTH_V2:
            raise ValueError(f"topic is {len(topic_b)} UTF-8 bytes; at most 32767")
        return 2, MESSAGE_MAGIC_CODE_V2, _H.pack(len(topic_b)) + topic_b
    raise ValueError(f"version must be 1 or 2, not {version!r}")


def topic_field(topic: str, version: int | None) -> tuple[int, int, bytes]:
    """``(version, magic, TOPICLENGTH + TOPIC bytes)`` as :func:`encode_message_parts` writes
    them (cached per topic); raises ValueError when the topic does not fit the version."""
    return _topic_field(topic, version)


@lru_cache(maxsize=8)
def head_struct(born_ip_len: int, store_ip_len: int) -> struct.Struct:
    """The fixed head, TOTALSIZE .. BODYLENGTH, as one ``struct.Struct`` for hosts with
    ``born_ip_len``/``store_ip_len``-byte addresses (4 or 16): fields in record order, the two
    hosts as ``(ip bytes, port)`` pairs. Lets a writer pack the whole head with one call."""
    if born_ip_len not in (4, 16) or store_ip_len not in (4, 16):
        raise ValueError(f"ip lengths must be 4 or 16, not {born_ip_len}/{store_ip_len}")
    return struct.Struct(f">iiiiiqqiq{born_ip_len}siq{store_ip_len}siiqi")


def encode_message(
    *,
    topic: str,
    body: bytes,
    queue_id: int = 0,
    flag: int = 0,
    queue_offset: int = 0,
    commit_log_offset: int = 0,
    sys_flag: int = 0,
    born_timestamp: int = 0,
    born_host: tuple[str, int] = ("127.0.0.1", 0),
    store_timestamp: int = 0,
    store_host: tuple[str, int] = ("127.0.0.1", 10911),
    reconsume_times: int = 0,
    prepared_transaction_offset: int = 0,
    properties: Mapping[str, str] | bytes = b"",
    body_crc: int | None = None,
    version: int | None = None,
) -> bytes:
    """Encode one record. The V6 sys-flag bits are set from the hosts' address families.

    ``properties`` is a mapping (serialised in its iteration order, trailing 0x02 included) or
    the exact bytes to store. ``body_crc`` None computes it. ``version`` None picks V2 only when
    the topic has more than 127 Java chars (5.x ``autoMessageVersionOnTopicLen``). Raises
    ValueError when a length does not fit its field.
    """
    props_b = (
        bytes(properties) if isinstance(properties, bytes | bytearray | memoryview)
        else encode_properties(properties)
    )  # fmt: skip
    return encode_message_parts(
        topic, body, queue_id, flag, queue_offset, commit_log_offset, sys_flag, born_timestamp,
        ip_to_bytes(born_host[0]), born_host[1], store_timestamp, ip_to_bytes(store_host[0]),
        store_host[1], reconsume_times, prepared_transaction_offset, props_b,
        _body_crc(body) if body_crc is None else body_crc, version,
    )  # fmt: skip


def encode_message_parts(
    topic: str,
    body: bytes,
    queue_id: int,
    flag: int,
    queue_offset: int,
    commit_log_offset: int,
    sys_flag: int,
    born_timestamp: int,
    born_ip: bytes,
    born_port: int,
    store_timestamp: int,
    store_ip: bytes,
    store_port: int,
    reconsume_times: int,
    prepared_transaction_offset: int,
    properties: bytes,
    body_crc: int,
    version: int | None,
) -> bytes:
    """:func:`encode_message` with positional, pre-computed inputs: packed ip bytes (4 or 16),
    the properties bytes and the body CRC. The writer's hot path (one call, no keywords)."""
    sys_flag &= ~(BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG)
    if len(born_ip) == 16:
        sys_flag |= BORNHOST_V6_FLAG
    if len(store_ip) == 16:
        sys_flag |= STOREHOSTADDRESS_V6_FLAG
    version, magic, topic_field = _topic_field(topic, version)
    props_len = len(properties)
    if props_len > MAX_PROPERTIES_LENGTH:
        raise ValueError(f"properties are {props_len} bytes; at most 32767")
    body_len = len(body)
    if not sys_flag & (BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG):
        # 72 fixed + 8 + 8 (two IPv4 hosts) + topic field (TL + T) + 2 + B + P
        total = 90 + body_len + len(topic_field) + props_len
        head = _HEAD_V4V4.pack(
            total, magic, body_crc, queue_id, flag, queue_offset, commit_log_offset, sys_flag,
            born_timestamp, born_ip, born_port, store_timestamp, store_ip, store_port,
            reconsume_times, prepared_transaction_offset, body_len,
        )  # fmt: skip
    else:
        total = calc_msg_length(version, sys_flag, body_len, len(topic_field) - version, props_len)
        head = b"".join((
            _HEAD.pack(total, magic, body_crc, queue_id, flag, queue_offset, commit_log_offset,
                       sys_flag, born_timestamp),
            (_HOST6 if len(born_ip) == 16 else _HOST4).pack(born_ip, born_port),
            _Q.pack(store_timestamp),
            (_HOST6 if len(store_ip) == 16 else _HOST4).pack(store_ip, store_port),
            _TAIL.pack(reconsume_times, prepared_transaction_offset, body_len),
        ))  # fmt: skip
    return b"".join((head, body, topic_field, _H.pack(props_len), properties))


def encode_into(buf: Any, offset: int, **fields: Any) -> int:
    """Encode like :func:`encode_message` into ``buf`` at ``offset``; returns the length."""
    data = encode_message(**fields)
    n = len(data)
    if offset < 0 or offset + n > len(buf):
        raise ValueError(
            f"record of {n} bytes does not fit at {offset} in a {len(buf)}-byte buffer"
        )
    buf[offset : offset + n] = data
    return n
