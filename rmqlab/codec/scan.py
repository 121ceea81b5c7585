"""Columnar record scanner: the records of a buffer as numpy columns (pure, no IO).

:func:`scan_records` walks exactly like :func:`rmqlab.codec.walk.iter_records` — same records,
same stop (blank, end-of-data, ``end``), same damage (offset, reason, detail) — but returns
columns instead of one :class:`~rmqlab.codec.message.MessageRecord` per record:

1. a header hop (one ``struct`` unpack of TOTALSIZE + MAGIC per record) collects the record
   starts; it stops at anything that is not a plausible V1/V2 record;
2. the 88-byte IPv4/IPv4 head of every record is gathered in one numpy fancy-index over a
   sliding-window view of the bytes and read through a big-endian structured dtype; the few
   records with an IPv6 host are re-read with ``struct`` one by one;
3. the lengths (body, topic, properties) are checked with vectorised ``calMsgLength``; the first
   record that would not decode ends the scan, and the reference decoder
   (``message._decode``) is run on that one record so the reported damage is exactly the
   walker's;
4. per record in Python only what is variable: the topic (a cache, topics repeat), TAGS / KEYS /
   UNIQ_KEY (``bytes.rfind`` on the properties, or a full dict when ``with_properties``) and,
   when asked, the body CRC (``codec.crc.crc32``, isal's, on a memoryview slice).

Nothing of the buffer is kept: the columns are copies, so a mapped file can be closed after.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rmqlab.codec.crc import crc32 as _crc32
from rmqlab.codec.flags import (
    BORNHOST_V6_FLAG,
    CRC32_RESERVED_LEN,
    KEY_SEPARATOR,
    MESSAGE_MAGIC_CODE_V1,
    MESSAGE_MAGIC_CODE_V2,
    PROPERTY_INNER_MULTI_DISPATCH,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    STOREHOSTADDRESS_V6_FLAG,
)
from rmqlab.codec.java_hash import java_hash, java_hash_extend_many
from rmqlab.codec.message import MIN_RECORD_SIZE, BlankRecord, EndOfData, MessageRecord, _decode, _ip_str
from rmqlab.codec.multi_dispatch import MultiDispatchPairs, multi_dispatch_pairs
from rmqlab.codec.prop_crc import PROP_CRC_PREFIX, prop_crc_mismatches
from rmqlab.codec.properties import decode_properties
from rmqlab.codec.windows import byte_windows
from rmqlab.errors import CorruptRecord

__all__ = ["HEAD_V4V4_DTYPE", "RecordColumns", "header_hop", "scan_records"]

_TOTAL_MAGIC = struct.Struct(">ii")
_HEAD = struct.Struct(">iiiiiqqiq")
_HOST4 = struct.Struct(">4si")
_HOST6 = struct.Struct(">16si")
_Q = struct.Struct(">q")
_TAIL = struct.Struct(">iqi")
_V6 = BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG

#: The 88-byte head of an IPv4/IPv4 record (message.py's ``_HEAD_V4V4``) as a numpy dtype.
HEAD_V4V4_DTYPE = np.dtype([
    ("total", ">i4"), ("magic", ">i4"), ("body_crc", ">i4"), ("queue_id", ">i4"), ("flag", ">i4"),
    ("queue_offset", ">i8"), ("commit_log_offset", ">i8"), ("sys_flag", ">i4"), ("born_timestamp", ">i8"),
    ("born_ip", "V4"), ("born_port", ">i4"), ("store_timestamp", ">i8"), ("store_ip", "V4"),
    ("store_port", ">i4"), ("reconsume_times", ">i4"), ("prepared_transaction_offset", ">i8"),
    ("body_length", ">i4"),
])  # fmt: skip
assert HEAD_V4V4_DTYPE.itemsize == 88

_TAGS_K = (PROPERTY_TAGS + "\x01").encode()
_KEYS_K = (PROPERTY_KEYS + "\x01").encode()
_MULTI_K = (PROPERTY_INNER_MULTI_DISPATCH + "\x01").encode()
_UNIQ_K = (PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX + "\x01").encode()
_NOT_FOUND = object()
_INT_MIN = -(2**31)  # Integer.MIN_VALUE: index_hash_of maps it to 0


def _i64() -> np.ndarray:
    return np.empty(0, np.int64)


@dataclass(eq=False)
class RecordColumns:
    """The message records of one scan as columns (row ``i`` = the ``i``-th message in walk order).

    Integer columns are native ``int64`` arrays (``offset`` is the walk offset + ``base_offset``;
    ``commit_log_offset`` the PHYSICALOFFSET stored in the record). Hosts are kept as raw
    bytes: ``born_ip``/``store_ip`` are ``(n, 16)`` uint8 (an IPv4 host uses the first 4 bytes;
    ``sys_flag`` says which). ``tags``/``keys``/``uniq_key`` are the TAGS, KEYS (as stored) and
    UNIQ_KEY properties (None when absent); ``tags_code`` the plain tags code. ``properties``
    (dicts), ``crc_ok`` and ``body`` are None unless asked for.

    How the scan ended: ``stop`` (absolute offset of the first byte not consumed: after the last
    record, at the blank, at the damage), ``blank`` (``(offset, declared size)`` of a blank
    record, which ends the walk like ``iter_records``), ``error`` (the ``CorruptRecord`` the
    walker would raise, offset absolute and ``file`` set), ``more`` (``max_records`` reached:
    scan again from ``stop``).
    """

    n: int = 0
    offset: np.ndarray = field(default_factory=_i64)
    store_size: np.ndarray = field(default_factory=_i64)
    magic: np.ndarray = field(default_factory=_i64)
    body_crc: np.ndarray = field(default_factory=_i64)
    queue_id: np.ndarray = field(default_factory=_i64)
    flag: np.ndarray = field(default_factory=_i64)
    queue_offset: np.ndarray = field(default_factory=_i64)
    commit_log_offset: np.ndarray = field(default_factory=_i64)
    sys_flag: np.ndarray = field(default_factory=_i64)
    born_timestamp: np.ndarray = field(default_factory=_i64)
    store_timestamp: np.ndarray = field(default_factory=_i64)
    reconsume_times: np.ndarray = field(default_factory=_i64)
    prepared_transaction_offset: np.ndarray = field(default_factory=_i64)
    body_length: np.ndarray = field(default_factory=_i64)
    body_position: np.ndarray = field(default_factory=_i64)  # in the buffer (not + base_offset)
    born_ip: np.ndarray = field(default_factory=lambda: np.empty((0, 16), np.uint8))
    born_port: np.ndarray = field(default_factory=_i64)
    store_ip: np.ndarray = field(default_factory=lambda: np.empty((0, 16), np.uint8))
    store_port: np.ndarray = field(default_factory=_i64)
    topic: list[str] = field(default_factory=list)
    tags: list[str | None] = field(default_factory=list)
    keys: list[str | None] = field(default_factory=list)
    uniq_key: list[str | None] = field(default_factory=list)
    tags_code: np.ndarray = field(default_factory=_i64)
    properties: list[dict[str, str]] | None = None
    #: per row, the ``(queue, queue offset)`` pairs of a multi-dispatch (LMQ) record, ``()`` for
    #: others; None when no record of the scan has any (the usual case, found with one search)
    #: or when the scan was not asked for them (``with_multi_dispatch``)
    multi_dispatch: list[MultiDispatchPairs] | None = None
    crc_ok: np.ndarray | None = None
    #: with ``crc_ok``, per row: 1 the record's last 20 bytes are a 5.x ``__CRC32#`` property
    #: holding its CRC, 0 they are one holding something else (damage outside the body), -1
    #: they are none (a store written without ``enabledAppendPropCRC``)
    prop_crc: np.ndarray | None = None
    body: list[bytes] | None = None
    stop: int = 0
    blank: tuple[int, int] | None = None
    error: CorruptRecord | None = None
    more: bool = False

    def __len__(self) -> int:
        return self.n

    # ------------------------------------------------------------------ derived string columns
    def _hosts(self, ip: np.ndarray, port: np.ndarray, v6_flag: int) -> list[str]:
        v6 = (self.sys_flag & v6_flag) != 0
        key = (ip[:, :4].copy().view(">u4").ravel().astype(np.uint64) << np.uint64(32)) | (
            port.astype(np.uint64) & np.uint64(0xFFFFFFFF)
        )
        uniq, inv = np.unique(key, return_inverse=True)
        names = np.empty(len(uniq), object)
        for i, k in enumerate(uniq.tolist()):
            names[i] = f"{_ip_str(int(k >> 32).to_bytes(4, 'big'))}:{_signed32(k & 0xFFFFFFFF)}"
        out = names[inv.ravel()]
        for i in np.flatnonzero(v6).tolist():
            out[i] = f"{_ip_str(ip[i].tobytes())}:{int(port[i])}"
        return out.tolist()

    def born_hosts(self) -> list[str]:
        """``"ip:port"`` of each record's born host (as ``MessageRecord.born_host`` joined)."""
        return self._hosts(self.born_ip, self.born_port, BORNHOST_V6_FLAG)

    def store_hosts(self) -> list[str]:
        return self._hosts(self.store_ip, self.store_port, STOREHOSTADDRESS_V6_FLAG)

    def msg_ids(self) -> list[str]:
        """Offset msgIds: upper hex of store ip + port + PHYSICALOFFSET (``MessageRecord.msg_id``)."""
        n = self.n
        raw = np.empty((n, 16), np.uint8)
        raw[:, :4] = self.store_ip[:, :4]
        raw[:, 4:8] = self.store_port.astype(">i4").view(np.uint8).reshape(n, 4)
        raw[:, 8:] = self.commit_log_offset.astype(">i8").view(np.uint8).reshape(n, 8)
        s = raw.tobytes().hex().upper()
        out = [s[i : i + 32] for i in range(0, 32 * n, 32)]
        for i in np.flatnonzero(self.sys_flag & STOREHOSTADDRESS_V6_FLAG).tolist():
            out[i] = (self.store_ip[i].tobytes() + struct.pack(">iq", int(self.store_port[i]),
                                                               int(self.commit_log_offset[i]))).hex().upper()
        return out

    def key_lists(self) -> list[list[str]]:
        """KEYS split on single spaces, empty tokens dropped (``MessageRecord.keys``)."""
        return [[k for k in raw.split(KEY_SEPARATOR) if k] if raw else [] for raw in self.keys]

    def index_key_hashes(self) -> tuple[np.ndarray, np.ndarray]:
        """``(row, hash)`` pairs: the index key hashes each record is indexed under
        (``topic#key`` for each KEYS token and ``topic#UNIQ_KEY``), distinct per row, sorted by
        row then hash. The ``topic#`` prefix hash is computed once per topic and every token is
        hashed in one vectorised :func:`java_hash_extend_many` call."""
        rows: list[int] = []
        prefixes: list[int] = []
        tokens: list[str] = []
        add_row, add_prefix, add_token = rows.append, prefixes.append, tokens.append
        prefix: dict[str, int] = {}
        for i, (topic, raw, uk) in enumerate(zip(self.topic, self.keys, self.uniq_key, strict=True)):
            if not raw and not uk:
                continue
            h0 = prefix.get(topic)
            if h0 is None:
                h0 = prefix[topic] = java_hash(topic + "#")
            if raw:
                for k in raw.split(KEY_SEPARATOR):
                    if k:
                        add_row(i)
                        add_prefix(h0)
                        add_token(k)
            if uk:
                add_row(i)
                add_prefix(h0)
                add_token(uk)
        if not tokens:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        h = java_hash_extend_many(np.array(prefixes, np.int64), tokens)
        h = np.where(h == _INT_MIN, 0, np.abs(h))  # index_hash_of, vectorised
        pairs = (np.array(rows, np.int64) << 32) | h
        pairs.sort()  # rows already ascending: nearly sorted (np.unique hashes, ~5x slower here)
        pairs = pairs[np.concatenate(([True], pairs[1:] != pairs[:-1]))]  # distinct (row, hash)
        return pairs >> 32, pairs & 0xFFFFFFFF

    def take(self, sel: Any) -> RecordColumns:
        """The rows ``sel`` (a boolean mask, indexes or a slice); the stop fields are kept."""
        out = RecordColumns()
        idx = np.arange(self.n)[sel]
        out.n = len(idx)
        for name in _ARRAYS:
            setattr(out, name, getattr(self, name)[idx])
        lst = idx.tolist()
        for name in ("topic", "tags", "keys", "uniq_key"):
            col = getattr(self, name)
            setattr(out, name, [col[i] for i in lst])
        if self.properties is not None:
            out.properties = [self.properties[i] for i in lst]
        if self.multi_dispatch is not None:
            out.multi_dispatch = [self.multi_dispatch[i] for i in lst]
        if self.body is not None:
            out.body = [self.body[i] for i in lst]
        if self.crc_ok is not None:
            out.crc_ok = self.crc_ok[idx]
        if self.prop_crc is not None:
            out.prop_crc = self.prop_crc[idx]
        out.stop, out.blank, out.error, out.more = self.stop, self.blank, self.error, self.more
        return out


_ARRAYS = (
    "offset", "store_size", "magic", "body_crc", "queue_id", "flag", "queue_offset", "commit_log_offset",
    "sys_flag", "born_timestamp", "store_timestamp", "reconsume_times", "prepared_transaction_offset",
    "body_length", "body_position", "born_ip", "born_port", "store_ip", "store_port", "tags_code",
)


def _signed32(v: int) -> int:
    return v - 0x100000000 if v & 0x80000000 else v


def header_hop(buf: Any, start: int, limit: int, max_records: int | None = None) -> tuple[list[int], int]:
    """``(record starts, stop)``: hop TOTALSIZE by TOTALSIZE while the header is a V1/V2 magic
    with ``91 <= TOTALSIZE <= bytes left``. Straight-line struct calls on purpose (the one
    per-record Python loop of a scan)."""
    unpack = _TOTAL_MAGIC.unpack_from
    v1, v2, lo = MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2, MIN_RECORD_SIZE
    offs: list[int] = []
    app = offs.append
    pos = start
    if max_records is None:
        while limit - pos >= 8:
            total, magic = unpack(buf, pos)
            if (magic != v1 and magic != v2) or total < lo or total > limit - pos:
                break
            app(pos)
            pos += total
    else:
        while limit - pos >= 8 and len(offs) < max_records:
            total, magic = unpack(buf, pos)
            if (magic != v1 and magic != v2) or total < lo or total > limit - pos:
                break
            app(pos)
            pos += total
    return offs, pos


class _Slicer:
    """``s[a:b]`` -> bytes for a buffer whose own slices are not bytes (memoryview, bytearray)."""

    __slots__ = ("mv",)

    def __init__(self, mv: memoryview) -> None:
        self.mv = mv

    def __getitem__(self, key: slice) -> bytes:
        return self.mv[key].tobytes()


def _byte_source(buf: Any) -> Any:
    """Something whose slices are ``bytes``: the buffer, the mmap behind a whole-file view, or a
    slicer."""
    if isinstance(buf, bytes | mmap.mmap):
        return buf
    if isinstance(buf, memoryview):
        obj = buf.obj
        if (isinstance(obj, bytes | mmap.mmap) and buf.c_contiguous and buf.itemsize == 1
                and buf.nbytes == len(obj)):
            return obj  # a 1-byte-item view as long as its object is the whole object
        return _Slicer(buf)
    return _Slicer(memoryview(buf).cast("B"))


def _properties(
    praws: list[bytes], with_properties: bool, with_tags: bool = True
) -> tuple[list[str | None], list[str | None], list[str | None], list[dict[str, str]] | None]:
    """TAGS, KEYS and UNIQ_KEY of each properties string (and every dict when asked).

    Without dicts, an ASCII string is searched with ``bytes.rfind`` for the last pair of each
    key (exactly Java's "later duplicates overwrite"); anything unusual (a key inside another
    pair, an empty value, non-ASCII bytes) goes to :func:`decode_properties`.
    ``with_tags=False`` skips the TAGS search (the index needs only KEYS and UNIQ_KEY): the
    tags list then holds None throughout.
    """
    tags: list[str | None] = []
    keys: list[str | None] = []
    uniq: list[str | None] = []
    ta, ka, ua = tags.append, keys.append, uniq.append
    if with_properties:
        props = [decode_properties(r) if r else {} for r in praws]
        for d in props:
            ta(d.get(PROPERTY_TAGS))
            ka(d.get(PROPERTY_KEYS))
            ua(d.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX))
        return tags, keys, uniq, props
    tk, kk, uk_ = _TAGS_K, _KEYS_K, _UNIQ_K
    for raw in praws:
        if raw.isascii():
            # the same search inlined for each key (this loop runs once per record)
            i = raw.rfind(tk) if with_tags else -1
            if i < 0:
                tg = None
            elif i and raw[i - 1] != 2:
                tg = _NOT_FOUND
            else:
                j = raw.find(b"\x02", i)
                tg = raw[i + 5 : j if j >= 0 else None].decode("ascii") or _NOT_FOUND
            i = raw.rfind(kk)
            if i < 0:
                ky = None
            elif i and raw[i - 1] != 2:
                ky = _NOT_FOUND
            else:
                j = raw.find(b"\x02", i)
                ky = raw[i + 5 : j if j >= 0 else None].decode("ascii") or _NOT_FOUND
            i = raw.rfind(uk_)
            if i < 0:
                u = None
            elif i and raw[i - 1] != 2:
                u = _NOT_FOUND
            else:
                j = raw.find(b"\x02", i)
                u = raw[i + 9 : j if j >= 0 else None].decode("ascii") or _NOT_FOUND
            if tg is not _NOT_FOUND and ky is not _NOT_FOUND and u is not _NOT_FOUND:
                ta(tg)
                ka(ky)
                ua(u)
                continue
        d = decode_properties(raw) if raw else {}
        ta(d.get(PROPERTY_TAGS) if with_tags else None)
        ka(d.get(PROPERTY_KEYS))
        ua(d.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX))
    return tags, keys, uniq, None


def _multi_dispatch(praws: list[bytes], props: list[dict[str, str]] | None) -> list[MultiDispatchPairs] | None:
    """``RecordColumns.multi_dispatch``: one search of all the properties strings joined, and
    only when the name is there, the pairs of the records that carry it."""
    if _MULTI_K not in b"".join(praws):
        return None
    out: list[MultiDispatchPairs] = [()] * len(praws)
    for i, raw in enumerate(praws):
        if _MULTI_K in raw:
            out[i] = multi_dispatch_pairs(props[i] if props is not None else decode_properties(raw))
    return out


def scan_records(
    buf: Any,
    start: int = 0,
    end: int | None = None,
    *,
    base_offset: int = 0,
    check_crc: bool = False,
    with_properties: bool = True,
    with_crc: bool = False,
    with_body: bool = False,
    with_multi_dispatch: bool = False,
    max_records: int | None = None,
    file: str | None = None,
) -> RecordColumns:
    """Scan the message records of ``buf`` from ``start`` into :class:`RecordColumns`.

    Same walk as ``iter_records(buf, start, end, check_crc=check_crc, file=file,
    base_offset=base_offset)``: the same messages, in order; a blank ends it (``blank``), so do
    unwritten space and ``end``; damage ends it with ``error`` set to the exception the walker
    would raise (never raised here). ``with_properties``: a full properties dict per record
    (else only TAGS/KEYS/UNIQ_KEY are extracted); ``with_crc`` (implied by ``check_crc``): the
    ``crc_ok`` column; ``with_body``: the bodies as bytes; ``with_multi_dispatch``: the
    ``multi_dispatch`` column; ``max_records``: stop after that many messages (``more`` is then
    True and ``stop`` is where to go on).
    """
    limit = len(buf) if end is None else min(end, len(buf))
    out = RecordColumns()
    if start < 0:
        _finish_at(out, buf, start, limit, check_crc, file, base_offset)
        return out
    offs_list, hop_stop = header_hop(buf, start, limit, max_records)
    n = len(offs_list)
    more = max_records is not None and n >= max_records
    if n:
        n, hop_stop = _columns(out, buf, np.array(offs_list, np.int64), n, hop_stop, check_crc,
                               with_properties, with_crc, with_body, with_multi_dispatch)
        if n < len(offs_list):
            more = False  # a record failed a check: it is where the walk stops
        if base_offset:
            out.offset = out.offset + base_offset
    out.n = n
    if more:
        out.stop = hop_stop + base_offset
        out.more = True
    else:
        _finish_at(out, buf, hop_stop, limit, check_crc, file, base_offset)
    return out


def _prop_crc_column(u8: np.ndarray, offs: np.ndarray, total: np.ndarray) -> np.ndarray:
    """:attr:`RecordColumns.prop_crc` for whole records at ``offs`` of ``total`` bytes: the
    tails that look like a ``__CRC32#`` pair are found with numpy, and only those are checked."""
    out = np.full(len(offs), -1, np.int8)
    if not len(offs):
        return out
    ends = offs + total
    look = total >= CRC32_RESERVED_LEN
    e = np.where(look, ends, CRC32_RESERVED_LEN)  # a safe index where the record is too short
    look &= u8[e - 1] == 0x02  # the pair's closing separator, then its 9-byte "__CRC32#" 0x01 start
    for k, byte in enumerate(PROP_CRC_PREFIX):
        look &= u8[e - CRC32_RESERVED_LEN + k] == byte
    idx = np.flatnonzero(look)
    if idx.size:
        out[idx] = 1
        for i, _value, _real in prop_crc_mismatches(u8, offs[idx].tolist(), total[idx].tolist()):
            out[idx[i]] = 0
    return out


def _finish_at(out: RecordColumns, buf: Any, pos: int, limit: int, check_crc: bool, file: str | None,
               base_offset: int) -> None:
    """What the walker does at ``pos``, where the fast path stopped: end, blank or damage."""
    out.stop = pos + base_offset
    if pos >= limit and pos >= 0:
        return
    if pos >= 0 and limit - pos < 8 and not any(bytes(buf[pos:limit])):
        return
    try:
        rec = _decode(buf, pos, limit, check_crc, True, file)
    except CorruptRecord as e:
        # a fresh exception: no traceback holding the scan's frames (and the buffer's views)
        cls = type(e)
        out.error = cls.__new__(cls)._init_copy(e.file, e.offset + base_offset, e.reason, e.detail)  # type: ignore[arg-type]
        return
    if isinstance(rec, BlankRecord):
        out.blank = (pos + base_offset, rec.size)
    elif isinstance(rec, EndOfData):
        return
    else:
        # A whole record where the hop found none: a live store's writer appended it while
        # this scan ran. The scan ends where the hop did; with records read, the caller scans
        # on from here (``more``) and reads it, as a walk started now would.
        assert isinstance(rec, MessageRecord)
        out.more = out.n > 0


def _columns(out: RecordColumns, buf: Any, offs: np.ndarray, n: int, hop_stop: int, check_crc: bool,
             with_properties: bool, with_crc: bool, with_body: bool,
             with_multi_dispatch: bool = False) -> tuple[int, int]:
    """Fill ``out``'s columns for the hopped records; returns ``(records kept, stop position)``
    (fewer kept when a record fails a check: the stop is then that record's start)."""
    size_buf = len(buf)
    u8 = np.frombuffer(buf, np.uint8)
    try:
        raw_head = byte_windows(u8, 88)[offs]  # (n, 88) copy
        head = raw_head.view(HEAD_V4V4_DTYPE).ravel()
        total = head["total"].astype(np.int64)
        magic = head["magic"].astype(np.int64)
        sys_flag = head["sys_flag"].astype(np.int64)
        cols: dict[str, np.ndarray] = {
            name: head[name].astype(np.int64) for name in (
                "body_crc", "queue_id", "flag", "queue_offset", "commit_log_offset", "born_timestamp",
                "store_timestamp", "born_port", "store_port", "reconsume_times", "prepared_transaction_offset",
                "body_length",
            )
        }  # fmt: skip
        born_ip = np.zeros((n, 16), np.uint8)
        store_ip = np.zeros((n, 16), np.uint8)
        born_ip[:, :4] = raw_head[:, 48:52]
        store_ip[:, :4] = raw_head[:, 64:68]
        del raw_head
        body_pos = offs + 88
        ok = np.ones(n, bool)
        for i in np.flatnonzero(sys_flag & _V6).tolist():  # rare: re-read with struct
            o = int(offs[i])
            sf = int(sys_flag[i])
            p = o + 48
            hs = _HOST6 if sf & BORNHOST_V6_FLAG else _HOST4
            hs2 = _HOST6 if sf & STOREHOSTADDRESS_V6_FLAG else _HOST4
            if p + hs.size + 8 + hs2.size + 16 > size_buf:
                ok[i] = False  # the decoder's struct read would fail: let it say so
                continue
            ip, port = hs.unpack_from(buf, p)
            born_ip[i, : len(ip)] = np.frombuffer(ip, np.uint8)
            cols["born_port"][i] = port
            p += hs.size
            cols["store_timestamp"][i] = _Q.unpack_from(buf, p)[0]
            p += 8
            ip, port = hs2.unpack_from(buf, p)
            store_ip[i, :4] = 0
            store_ip[i, : len(ip)] = np.frombuffer(ip, np.uint8)
            cols["store_port"][i] = port
            p += hs2.size
            rt, pt, bl = _TAIL.unpack_from(buf, p)
            cols["reconsume_times"][i], cols["prepared_transaction_offset"][i], cols["body_length"][i] = rt, pt, bl
            body_pos[i] = p + 16
        bh = np.where(sys_flag & BORNHOST_V6_FLAG, 20, 8)
        sh = np.where(sys_flag & STOREHOSTADDRESS_V6_FLAG, 20, 8)
        v2 = magic == MESSAGE_MAGIC_CODE_V2
        tl = np.where(v2, 2, 1)
        rec_end = offs + total
        body_len = cols["body_length"]
        tlen_pos = body_pos + body_len
        ok &= (body_len >= 0) & (tlen_pos + tl <= rec_end)
        # topic length: signed byte (V1) / signed short (V2); positions clipped where not ok
        safe_tpos = np.where(ok, tlen_pos, offs)
        b0 = u8[safe_tpos].view(np.int8).astype(np.int64)
        b1 = u8[np.minimum(safe_tpos + 1, size_buf - 1)].astype(np.int64)
        topic_len = np.where(v2, (b0 << 8) | b1, b0)
        topic_pos = tlen_pos + tl
        plen_pos = topic_pos + topic_len
        ok &= (topic_len >= 0) & (plen_pos + 2 <= rec_end)
        safe_ppos = np.where(ok, plen_pos, offs)
        props_len = (u8[safe_ppos].view(np.int8).astype(np.int64) << 8) | u8[safe_ppos + 1].astype(np.int64)
        ok &= props_len >= 0
        expect = 74 + bh + sh + tl + np.maximum(body_len, 0) + np.maximum(topic_len, 0) + np.maximum(props_len, 0)
        ok &= expect == total
        bad = np.flatnonzero(~ok)
        if bad.size:
            n = int(bad[0])
            hop_stop = int(offs[n])
        # ----- per record: topic, properties, CRC (each may cut the scan shorter)
        src = _byte_source(buf)
        getitem = src.__getitem__
        raws = list(map(getitem, map(slice, topic_pos[:n].tolist(), plen_pos[:n].tolist())))
        tcache: dict[bytes, str] = {}
        topics = list(map(tcache.get, raws))
        if None in topics:
            for i, t in enumerate(topics):
                if t is None:
                    raw = raws[i]
                    t = tcache.get(raw)
                    if t is None:
                        try:
                            t = tcache[raw] = str(raw, "utf-8")
                        except UnicodeDecodeError:
                            n = i
                            hop_stop = int(offs[n])
                            break
                    topics[i] = t
        del raws
        crc_ok = prop_crc = None
        body: list[bytes] | None = None
        if check_crc or with_crc or with_body:
            bp = body_pos[:n].tolist()
            bl_list = body_len[:n].tolist()
            if with_body:
                body = list(map(getitem, map(slice, bp, (body_pos[:n] + body_len[:n]).tolist())))
            if check_crc or with_crc:
                stored = cols["body_crc"][:n].tolist()
                crc32 = _crc32
                with memoryview(buf) as mv:
                    flat = mv.cast("B") if mv.format != "B" or mv.ndim != 1 else mv
                    good = [
                        (crc32(flat[a : a + m]) & 0x7FFFFFFF if m else 0) == c
                        for a, m, c in zip(bp, bl_list, stored, strict=True)
                    ]
                    if flat is not mv:
                        flat.release()
                crc_ok = np.array(good, bool)
                if check_crc and not crc_ok.all():
                    n = int(np.argmin(crc_ok))
                    hop_stop = int(offs[n])
                crc_ok = crc_ok[:n]
                prop_crc = _prop_crc_column(u8, offs[:n], total[:n])
                if body is not None:
                    body = body[:n]
        topics = topics[:n]
        praws = list(map(getitem, map(slice, (plen_pos[:n] + 2).tolist(),
                                      (plen_pos[:n] + 2 + props_len[:n]).tolist())))
        tags, keys, uniq, props_out = _properties(praws, with_properties)
        multi = _multi_dispatch(praws, props_out) if with_multi_dispatch else None
        tcodes: dict[str | None, int] = {None: 0, "": 0}
        tc = list(map(tcodes.get, tags))
        if None in tc:
            for i, t in enumerate(tags):
                if tc[i] is None:
                    tc[i] = tcodes[t] = java_hash(t)  # type: ignore[arg-type]
    finally:
        del u8
    out.offset = offs[:n]  # base added by the caller below
    out.store_size = total[:n]
    out.magic = magic[:n]
    out.sys_flag = sys_flag[:n]
    for name, arr in cols.items():
        setattr(out, name, arr[:n])
    out.body_position = body_pos[:n]
    out.born_ip, out.store_ip = born_ip[:n], store_ip[:n]
    out.topic, out.tags, out.keys, out.uniq_key = topics, tags, keys, uniq
    out.tags_code = np.array(tc, np.int64)
    out.properties = props_out
    out.multi_dispatch = multi
    out.crc_ok = crc_ok
    out.prop_crc = prop_crc
    out.body = body
    return n, hop_stop
