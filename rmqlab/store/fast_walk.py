"""Vectorised record checks for recovery: the fast path in front of ``check_message_and_return_size``.

Recovery walks the CommitLog record by record (spec §6) and re-dispatches every record it keeps.
Doing that with :func:`~rmqlab.codec.walk.check_message_and_return_size` costs a full parse per
record (properties, tags hash, a ``DispatchRequest``), ~20 MB/s. This module certifies runs of
records in bulk instead and leaves every record it cannot certify to the exact per-record code,
so every result and every stop reason stays the one the slow walk gives:

* :class:`FastChecker` hops a batch of records by their TOTALSIZE (``struct``), gathers the
  fixed fields of all of them with numpy, recomputes each length (``calMsgLength``) and checks
  the body CRC with ``codec.crc.crc32`` (isal's) over a memoryview slice (C speed). A record is *certified*
  only when the slow check is bound to accept it with the same size and rmqlab's extra checks
  (``recovery._rmqlab_checks``) are bound to pass silently: V1 magic (V2 too on 5.x), lengths
  non-negative and adding up to TOTALSIZE inside the buffer, PHYSICALOFFSET equal to its
  position, properties not ending with a zero byte, CRC matching and non-zero, topic not
  ``SCHEDULE_TOPIC_XXXX`` (whose DELAY property the parser must read), and on 5.x an
  ``INNER_NUM`` / ``INNER_BASE`` pair that Java parses (5.x ``setBatchSizeIfNeeded`` runs inside
  ``checkMessageAndReturnSize``'s try, so an unparsable pair fails the record: :func:`_inner_batches`
  finds the records naming INNER_NUM with one ``re`` scan and parses just those, exactly as the slow
  path does). Anything else -- blank, zeros, damage, the rare notes -- goes to the slow path.
  With ``prop_crc`` (5.x ``forceVerifyPropCRC``) the body CRC is not checked; instead a record is
  certified only when its last 20 bytes are a ``__CRC32#`` pair written as the writer writes it
  (``"__CRC32#" 0x01``, ten ASCII digits, ``0x02``, starting the properties or after a ``0x02``,
  so the parser reads it as the last pair and its value wins) whose value is in (0, 2^31) and
  equals the CRC of the record's other bytes (:func:`rmqlab.codec.prop_crc.record_crc`); a
  value of 0 goes to the slow path, which accepts a real CRC of 0 and notes it.
* :func:`gather_dispatch_fields` gives re-dispatch what it needs to decide, without parsing
  properties, that a record is already in its consume queue and index.
"""

from __future__ import annotations

import itertools
import re
import struct
from typing import Any

import numpy as np

from rmqlab.codec.crc import crc32 as _crc32
from rmqlab.codec.flags import (
    BORNHOST_V6_FLAG,
    MESSAGE_MAGIC_CODE_V1,
    MESSAGE_MAGIC_CODE_V2,
    PROPERTY_INNER_NUM,
    SCHEDULE_TOPIC,
    STOREHOSTADDRESS_V6_FLAG,
)
from rmqlab.codec.prop_crc import CRC32_RESERVED_LEN, PROP_CRC_PREFIX
from rmqlab.codec.properties import decode_properties
from rmqlab.codec.scan import _byte_source
from rmqlab.codec.walk import batch_fields
from rmqlab.codec.windows import byte_windows

__all__ = ["BATCH", "FastChecker", "be_int", "gather_dispatch_fields", "hop"]

BATCH = 1 << 15  # records hopped and checked at once
_WINDOW_MAX = 512  # widest properties gathered as a 2-D window (else sliced and joined)
_TOTAL_MAGIC = struct.Struct(">ii")
_SCHEDULE = SCHEDULE_TOPIC.encode()
#: a property named INNER_NUM: its name and the 0x01 after it are in the properties' bytes
_INNER_NUM_PAIR = re.compile(re.escape(PROPERTY_INNER_NUM.encode() + b"\x01"))
_PREFIX = np.frombuffer(PROP_CRC_PREFIX, dtype=np.uint8)
_TENS = 10 ** np.arange(10, dtype=np.int64)  # the digits of a __CRC32# value come least-significant first


def hop(buf: Any, pos: int, limit: int, v5: bool, max_records: int) -> tuple[list[int], list[int]]:
    """Positions and sizes of up to ``max_records`` records from ``pos``, following TOTALSIZE
    while the magic is a message magic and the record lies inside ``limit``."""
    unpack = _TOTAL_MAGIC.unpack_from
    v1, v2 = MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2
    ps: list[int] = []
    append = ps.append
    end8 = limit - 8
    for _ in range(max_records):
        if pos > end8:
            break
        total, magic = unpack(buf, pos)
        if total <= 0 or pos + total > limit or (magic != v1 and (magic != v2 or not v5)):
            break
        append(pos)
        pos += total
    if not ps:
        return ps, []
    ts = [b - a for a, b in itertools.pairwise(ps)]
    ts.append(pos - ps[-1])
    return ps, ts


def be_int(arr: np.ndarray, idx: np.ndarray, width: int) -> np.ndarray:
    """Signed big-endian ints of ``width`` bytes at byte positions ``idx`` of a uint8 array
    (positions must be in range; clip them first)."""
    if width == 1:
        return arr[idx].view(np.int8).astype(np.int64)
    v = arr[idx].astype(np.uint64)
    for k in range(1, width):
        v = (v << np.uint64(8)) | arr[idx + k]
    if width == 8:
        return v.view(np.int64)
    bits = 8 * width
    v = v.astype(np.int64)
    return np.where(v >= (1 << (bits - 1)), v - (1 << bits), v)


def _layout(arr: np.ndarray, p: np.ndarray, limit: int) -> dict[str, np.ndarray]:
    """The fixed fields and field positions of the records starting at ``p`` (clipped reads:
    garbage lengths give garbage values, which the length check then rejects)."""
    hi = max(limit - 8, 0)

    def clip(x: np.ndarray) -> np.ndarray:
        return np.clip(x, 0, hi)

    magic = be_int(arr, clip(p + 4), 4)
    sys_flag = be_int(arr, clip(p + 36), 4)
    bh = np.where(sys_flag & BORNHOST_V6_FLAG, 20, 8)
    sh = np.where(sys_flag & STOREHOSTADDRESS_V6_FLAG, 20, 8)
    ts_pos = p + 48 + bh
    tail = ts_pos + 8 + sh
    body_len = be_int(arr, clip(tail + 12), 4)
    body_start = tail + 16
    v2 = magic == MESSAGE_MAGIC_CODE_V2
    tl_pos = clip(body_start + np.maximum(body_len, 0))
    topic_len = np.where(v2, be_int(arr, tl_pos, 2), be_int(arr, tl_pos, 1))
    topic_start = tl_pos + np.where(v2, 2, 1)
    props_len = be_int(arr, clip(topic_start + np.maximum(topic_len, 0)), 2)
    return {
        "magic": magic, "sys_flag": sys_flag, "bh": bh, "sh": sh, "ts_pos": ts_pos,
        "body_len": body_len, "body_start": body_start, "v2": v2, "topic_len": topic_len,
        "topic_start": topic_start, "props_len": props_len,
    }  # fmt: skip


def _inner_batches(buf: Any, p: np.ndarray, t: np.ndarray, f: dict[str, np.ndarray], ok: np.ndarray
                   ) -> list[int]:
    """Indexes of the ``ok`` records (at ``p``, sizes ``t``) whose properties hold the bytes
    ``INNER_NUM 0x01`` -- every record whose decoded properties name INNER_NUM does (separators
    and ASCII names are single bytes whatever else the UTF-8 holds), plus some that do not, which
    the caller's exact parse sorts out. One ``re`` scan of the batch's bytes (a plain store has no
    match; an inner-batch record has one), matches outside a record's properties ignored."""
    if not len(p):
        return []
    hits = [m.start() for m in _INNER_NUM_PAIR.finditer(buf, int(p[0]), int(p[-1] + t[-1]))]
    if not hits:
        return []
    h = np.asarray(hits, dtype=np.int64)
    rec = np.searchsorted(p, h, side="right") - 1
    props_pos = f["topic_start"][rec] + f["topic_len"][rec] + 2
    inside = (h >= props_pos) & (h + len(PROPERTY_INNER_NUM) + 1 <= props_pos + f["props_len"][rec])
    return [i for i in np.unique(rec[inside]).tolist() if ok[i]]


class FastChecker:
    """Certifies runs of records for ``recovery._walk`` (see the module docstring).

    ``advance(buf, pos, base)`` returns ``(new_pos, records, bytes, last_pos)``: every record in
    ``[pos, new_pos)`` is certified, ``last_pos`` is the start of the last one (-1: none). The
    record at ``new_pos`` is for the slow path; when the slow path accepts it and the walk comes
    back with the next position, the checker continues its batch without re-hopping.
    ``accepted`` collects, per file base offset, the arrays of certified positions (the walk adds
    the positions its slow path accepted), so re-dispatch needs no second hop.
    """

    def __init__(self, v5: bool, check_crc: bool, keep_positions: bool, batch: int = BATCH,
                 prop_crc: bool = False) -> None:
        self.v5 = v5
        self.batch = batch
        # forceVerifyPropCRC (5.x, with check_crc): the __CRC32# property instead of the body CRC
        self.prop_crc = prop_crc and check_crc and v5
        self.check_crc = check_crc and not self.prop_crc
        self.keep_positions = keep_positions
        self.accepted: dict[int, list[Any]] = {}
        self._buf: Any = None
        self._p: np.ndarray | None = None
        self._t: list[int] = []
        self._ps: list[int] = []
        self._ok: np.ndarray | None = None
        self._bs: list[int] = []
        self._be: list[int] = []
        self._crc: list[int] = []
        self._i = 0
        self._cum: np.ndarray | None = None

    def _load(self, buf: Any, pos: int, base: int) -> None:
        limit = len(buf)
        ps, ts = hop(buf, pos, limit, self.v5, self.batch)
        self._buf = buf
        self._i = 0
        self._t = ts
        self._ps = ps
        if not ps:
            self._p = None
            return
        p = np.asarray(ps, dtype=np.int64)
        t = np.asarray(ts, dtype=np.int64)
        arr = np.frombuffer(buf, dtype=np.uint8)
        try:
            f = _layout(arr, p, limit)
            v2 = f["v2"]
            body_len, topic_len, props_len = f["body_len"], f["topic_len"], f["props_len"]
            calc = 74 + f["bh"] + f["sh"] + np.where(v2, 2, 1) + body_len + topic_len + props_len
            ok = (body_len >= 0) & (topic_len >= 0) & (props_len >= 0) & (calc == t)
            if not self.v5:
                ok &= ~v2
            hi = max(limit - 8, 0)
            ok &= be_int(arr, np.clip(p + 28, 0, hi), 8) == base + p  # PHYSICALOFFSET (rmqlab check)
            ok &= (props_len == 0) | (arr[p + t - 1] != 0)  # torn properties (rmqlab check)
            crc = be_int(arr, np.clip(p + 8, 0, hi), 4)
            if self.check_crc:
                ok &= (body_len == 0) | (crc != 0)  # CRC 0: the slow path writes a note
            elif self.prop_crc:
                ok &= props_len >= CRC32_RESERVED_LEN
                crc = self._prop_crc_values(arr, p + t - CRC32_RESERVED_LEN, props_len, ok)
                ok &= crc > 0  # 0: the slow path (a real CRC of 0 gets a note), -1: not as written
            maybe_schedule = np.flatnonzero(ok & (topic_len == len(_SCHEDULE)))
            for i in maybe_schedule.tolist():
                a = int(f["topic_start"][i])
                if bytes(buf[a : a + len(_SCHEDULE)]) == _SCHEDULE:
                    ok[i] = False
            if self.v5:
                for i in _inner_batches(buf, p, t, f, ok):
                    a = int(f["topic_start"][i] + topic_len[i] + 2)
                    try:  # the slow path's parse (codec.walk._check): both present -> Java parses both
                        batch_fields(decode_properties(buf[a : a + int(props_len[i])]))
                    except ValueError:
                        ok[i] = False
            bs = f["body_start"]
            self._bs = bs.tolist()
            self._be = (bs + np.maximum(body_len, 0)).tolist()
            self._crc = crc.tolist()
        finally:
            del arr
        self._p = p
        self._ok = ok
        self._cum = np.concatenate(([0], np.cumsum(t)))

    @staticmethod
    def _prop_crc_values(arr: np.ndarray, tail: np.ndarray, props_len: np.ndarray, ok: np.ndarray) -> np.ndarray:
        """The value of the ``__CRC32#`` pair in the 20 bytes at ``tail`` of each record, or -1
        where they are not such a pair as the writer writes it (see the module docstring)."""
        n = len(tail)
        out = np.full(n, -1, dtype=np.int64)
        idx = np.flatnonzero(ok)
        if not len(idx):
            return out
        top = len(arr) - 1
        t = tail[idx]
        w = arr[np.clip(t[:, None] + np.arange(CRC32_RESERVED_LEN), 0, top)].astype(np.int64)
        digits = w[:, 9:19] - 48
        good = ((w[:, :9] == _PREFIX).all(axis=1) & (w[:, 19] == 2) & ((digits >= 0) & (digits <= 9)).all(axis=1)
                & ((props_len[idx] == CRC32_RESERVED_LEN) | (arr[np.clip(t - 1, 0, top)] == 2)))
        value = (np.clip(digits, 0, 9) * _TENS).sum(axis=1)
        good &= value < 2**31
        out[idx[good]] = value[good]
        return out

    def advance(self, buf: Any, pos: int, base: int) -> tuple[int, int, int, int]:
        p = self._p
        i = self._i
        if buf is not self._buf or p is None or i >= len(p) or int(p[i]) != pos:
            self._load(buf, pos, base)
            p, i = self._p, 0
            if p is None:
                return pos, 0, 0, -1
        ok = self._ok
        assert ok is not None
        assert self._cum is not None
        n = len(p)
        bad = np.flatnonzero(~ok[i:])
        j = i + int(bad[0]) if len(bad) else n
        if self.check_crc and j > i:
            crc32 = _crc32
            bs, be, crcs = self._bs, self._be, self._crc
            k = i
            while k < j:
                a, b = bs[k], be[k]
                if a != b and crc32(buf[a:b]) & 0x7FFFFFFF != crcs[k]:
                    break
                k += 1
            j = k
        elif self.prop_crc and j > i:  # the whole record but its last 20 bytes, against __CRC32#
            crc32 = _crc32
            ps, ts, crcs = self._ps, self._t, self._crc
            k = i
            while k < j:
                a = ps[k]
                if crc32(buf[a : a + ts[k] - CRC32_RESERVED_LEN]) & 0x7FFFFFFF != crcs[k]:
                    break
                k += 1
            j = k
        if j == i:
            self._i = i
            return pos, 0, 0, -1
        if self.keep_positions:
            self.accepted.setdefault(base, []).append(p[i:j])
        nbytes = int(self._cum[j] - self._cum[i])
        last = int(p[j - 1])
        # the slow path takes the record at j; if it accepts it the walk comes back at j + 1
        self._i = j + 1 if j < n else n
        return last + self._t[j - 1], j - i, nbytes, last

    def slow_accepted(self, base: int, pos: int) -> None:
        """The walk's slow path accepted the record at ``pos`` (kept for re-dispatch)."""
        if self.keep_positions:
            self.accepted.setdefault(base, []).append(pos)

    def positions(self, base: int) -> np.ndarray:
        """Every accepted position in the file starting at ``base``, in walk order."""
        parts = self.accepted.get(base, [])
        if not parts:
            return np.empty(0, dtype=np.int64)
        return np.concatenate([np.atleast_1d(np.asarray(x, dtype=np.int64)) for x in parts])


def gather_dispatch_fields(buf: Any, p: np.ndarray) -> dict[str, Any]:
    """Fields re-dispatch's pre-check needs for the (already validated) records at ``p``:
    size, queue id, sys flag, store timestamp, ``topic_id`` (index into ``topics``, the
    distinct raw topic names in first-seen order), and where the properties are (``props_pos``,
    ``props_len``)."""
    arr = np.frombuffer(buf, dtype=np.uint8)
    try:
        f = _layout(arr, p, len(buf))
        start, tl = f["topic_start"], f["topic_len"]
        width = int(tl.max()) if len(tl) else 0
        # the topic bytes of every record as one fixed-width row (zero padded) + its length
        cols = np.arange(width, dtype=np.int64)
        idx = np.minimum(start[:, None] + cols, len(arr) - 1)
        rows = np.where(cols < tl[:, None], arr[idx], 0).astype(np.uint8)
        lens = np.stack([(tl >> 8) & 0xFF, tl & 0xFF], axis=1).astype(np.uint8)
        rows = np.concatenate([rows, lens], axis=1)
        keyed = np.ascontiguousarray(rows).view(np.dtype((np.void, width + 2))).ravel()
        _, first, topic_id = np.unique(keyed, return_index=True, return_inverse=True)
        topics = []
        for i in first.tolist():
            a = int(start[i])
            topics.append(bytes(buf[a : a + int(tl[i])]))
        return {
            "size": be_int(arr, p, 4),
            "queue_id": be_int(arr, p + 12, 4),
            "sys_flag": f["sys_flag"],
            "store_ts": be_int(arr, np.clip(f["ts_pos"], 0, max(len(buf) - 8, 0)), 8),
            "topic_id": topic_id.reshape(-1),
            "topics": topics,
            "props_pos": f["topic_start"] + tl + 2,
            "props_len": f["props_len"],
        }
    finally:
        del arr


def property_values(buf: Any, starts: np.ndarray, lens: np.ndarray, names: tuple[bytes, ...]
                    ) -> tuple[np.ndarray, np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
    """Where the values of ``names`` (e.g. ``b"KEYS"``) are in the properties ``buf[starts[i] :
    starts[i] + lens[i]]`` of many records, found with numpy.

    Returns ``(props, fallback, [(value_start, value_end) per name])``: ``props`` is every
    record's properties concatenated (positions below index into it); ``value_start`` is -1
    where the name is absent. The rule is ``codec.scan._properties``'s: the *last* occurrence
    of ``name + "\x01"`` (so one of the ``0x01`` bytes, preceded by the name), which must start
    the properties or follow a ``0x02``, its value running to the next ``0x02`` or the end and
    not empty, the record all ASCII; a record breaking any of that has ``fallback`` set (its
    positions are meaningless) and must be decoded by the exact code.
    """
    n = len(starts)
    lens = lens.astype(np.int64)
    seg_end = np.cumsum(lens)
    seg_start = seg_end - lens
    st = starts.astype(np.int64)
    width = int(lens.max()) if n else 0
    if 0 < width <= _WINDOW_MAX:  # one 2-D gather of (n, width) bytes, then the padding masked out
        u8 = np.frombuffer(buf, dtype=np.uint8)
        try:
            rows = byte_windows(u8, width)[np.minimum(st, len(u8) - width)]
            shift = st - np.minimum(st, len(u8) - width)  # records ending less than width before the end
            cols = np.arange(width)
            props = rows[(cols >= shift[:, None]) & (cols < (shift + lens)[:, None])]
            del rows
        finally:
            del u8
    else:
        src = _byte_source(buf)
        props = np.frombuffer(b"".join(map(src.__getitem__, map(slice, st.tolist(), (st + lens).tolist()))),
                              dtype=np.uint8)
    total = len(props)
    fallback = np.zeros(n, dtype=bool)
    nz = np.flatnonzero(lens)
    if len(nz) and total and props.max() >= 128:
        fallback[nz] = np.maximum.reduceat(props, seg_start[nz]) >= 128
    seps = np.flatnonzero(props == 2)
    ones = np.flatnonzero(props == 1)
    out = []
    for name in names:
        m = len(name)
        vs = np.full(n, -1, dtype=np.int64)
        ve = np.full(n, -1, dtype=np.int64)
        q = ones[ones >= m]
        if len(q):
            hit = np.ones(len(q), dtype=bool)
            for k in range(m):
                hit &= props[q - m + k] == name[k]
            s = q[hit] - m
            rec = np.searchsorted(seg_start, s, side="right") - 1
            inside = s + m + 1 <= seg_end[rec]
            s, rec = s[inside], rec[inside]
            if len(s):
                last = np.append(rec[1:] != rec[:-1], True)  # the last occurrence in each record
                s, rec = s[last], rec[last]
                starts_ok = (s == seg_start[rec]) | (props[np.maximum(s - 1, 0)] == 2)
                a = s + m + 1
                j = np.searchsorted(seps, a)
                nxt = np.where(j < len(seps), seps[np.minimum(j, len(seps) - 1)], total)
                b = np.minimum(nxt, seg_end[rec])
                fallback[rec[~starts_ok | (b == a)]] = True
                vs[rec], ve[rec] = a, b
        out.append((vs, ve))
    return props, fallback, out
