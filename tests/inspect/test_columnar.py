"""The columnar inspect paths (codec.scan) give exactly what the record-by-record walk gave."""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from rmqlab.codec.flags import SCHEDULE_TOPIC, TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE
from rmqlab.codec.message import BlankRecord, MessageRecord
from rmqlab.codec.multi_dispatch import multi_dispatch_pairs
from rmqlab.errors import CorruptRecord
from rmqlab.inspect import open_snapshot
from rmqlab.inspect.checks import Finding, _FileRecords, _walk_file, verify
from rmqlab.inspect.frames import MESSAGE_COLUMNS, message_row, record_key_hashes
from rmqlab.inspect.snapshot import Damage, StoreSnapshot


def ref_messages(snap: StoreSnapshot, topic: str | None = None, start: int | None = None, limit: int | None = None,
                 *, queue_id: int | None = None, damage: list[Damage] | None = None) -> pd.DataFrame:
    """messages() as it was: one message_row per walked record (from the first message at or
    after ``start``, as messages() takes any byte)."""
    rows: list[dict[str, Any]] = []
    if start is not None:
        at = snap.record_start_at_or_after(start)
        start = start if at is None else at
    if limit is None or limit > 0:
        for file, _off, rec in snap.iter_records(start=start, damage=damage):
            if not isinstance(rec, MessageRecord):
                continue
            if (topic is not None and rec.topic != topic) or (queue_id is not None and rec.queue_id != queue_id):
                continue
            rows.append(message_row(rec, file))
            if limit is not None and len(rows) >= limit:
                break
    return pd.DataFrame(rows, columns=MESSAGE_COLUMNS)


def ref_walk_file(snap: StoreSnapshot, mf: Any, queue_ids: dict[tuple[str, int], int], check_crc: bool,
                  *, last: bool, out: list[Finding]) -> _FileRecords:
    """verify's per-file walk as it was (record by record)."""
    rel = os.path.relpath(mf.file_name, snap.path)
    base = mf.file_from_offset
    offs, qkey, qo, size, tags, check, sched, pairs = [], [], [], [], [], [], [], []
    newest = 0
    multi: dict[int, tuple[Any, int]] = {}
    damage: list[Damage] = []
    end = base
    blank = False
    extra = len(queue_ids)
    unknown: dict[tuple[str, int], int] = {}
    for _, off, rec in snap.iter_file_records(mf, 0, damage=damage):
        if isinstance(rec, BlankRecord):
            blank = True
            end = off + rec.size
            if off + rec.size != base + snap.commit_log_file_size:
                out.append(Finding("error", "blank_not_at_file_end", rel, off,
                                   f"blank record of {rec.size} bytes ends at {off + rec.size}, the file at "
                                   f"{base + snap.commit_log_file_size}"))
            continue
        assert isinstance(rec, MessageRecord)
        end = off + rec.store_size
        if rec.commit_log_offset != off:
            out.append(Finding("error", "commitlog_phys_offset_mismatch", rel, off,
                               f"record at {off} says its physical offset is {rec.commit_log_offset} "
                               "(a stale record of a reused file?)"))
        if check_crc and not rec.crc_ok:
            out.append(Finding("error", "commitlog_crc_mismatch", rel, off,
                               f"body CRC {rec.body_crc} does not match the body of {len(rec.body)} bytes "
                               "(recovery with checkCRCOnRecover cuts the log here)"))
        k = (rec.topic, rec.queue_id)
        qid = queue_ids.get(k)
        if qid is None:
            qid = unknown.setdefault(k, extra + len(unknown))
        offs.append(off)
        qkey.append(qid)
        qo.append(rec.queue_offset)
        size.append(rec.store_size)
        tags.append(rec.tags_code)
        check.append(rec.transaction_type not in (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE))
        sched.append(rec.topic == SCHEDULE_TOPIC)
        pairs.extend(((off - base) << 31) | h for h in record_key_hashes(rec))
        md = multi_dispatch_pairs(rec.properties)
        if md:
            multi[off] = (md, rec.queue_id)
        newest = max(newest, rec.store_timestamp)
    for d in damage:
        end = d.offset
        out.append(Finding("error", f"commitlog_{d.reason}", rel, d.offset,
                           f"{d.detail or d.reason}; the walk of this file stops here"
                           + ("" if last else f" ({base + mf.mapped_length - d.offset} bytes not read)")))
    if not blank and not damage and not last and mf.mapped_length:
        out.append(Finding("error", "file_not_full", rel, end,
                           "the records stop before the end of a file that is not the last (no blank record); "
                           "recovery would end the log here"))
    i64 = np.int64
    return _FileRecords(np.array(offs, i64), np.array(qkey, i64), np.array(qo, i64), np.array(size, i64),
                        np.array(tags, i64), np.array(check, bool), np.array(sched, bool),
                        np.unique(np.array(pairs, i64)), end, newest, multi)


def ref_topics_log(snap: StoreSnapshot, cq_end: dict[tuple[str, int], int]) -> dict[tuple[str, int], list[int]]:
    log: dict[tuple[str, int], list[int]] = {}
    for _, _, rec in snap.iter_records(damage=[]):
        if not isinstance(rec, MessageRecord):
            continue
        k = (rec.topic, rec.queue_id)
        s = log.setdefault(k, [0, rec.queue_offset, rec.queue_offset, 0, 0])
        s[0] += 1
        s[1] = min(s[1], rec.queue_offset)
        s[2] = max(s[2], rec.queue_offset)
        s[3] += rec.store_size
        if rec.transaction_type not in (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE) and \
                rec.queue_offset >= cq_end.get(k, 0):
            s[4] += 1
    return log


def _damaged_copies(store_copy: Callable[[str], Path]) -> list[Path]:
    """clean-small with: a stale physical offset, a flipped body byte, a bad magic mid-file, a torn record."""
    root = store_copy("clean-small")
    files = sorted((root / "commitlog").iterdir())
    with open_snapshot(root) as snap:
        recs = [(off, rec) for _, off, rec in snap.iter_records() if isinstance(rec, MessageRecord)]
    def patch(off: int, rel: int, data: bytes) -> None:
        p = root / "commitlog" / f"{off - off % 65536:020d}"
        with open(p, "r+b") as f:
            f.seek(off % 65536 + rel)
            f.write(data)
    patch(recs[5][0], 28, struct.pack(">q", 12345))  # stale physical offset
    off, rec = recs[30]
    patch(off, 88 + (24 if rec.sys_flag & 0x30 else 0), b"\xff\xfe")  # body bytes (CRC)
    patch(recs[200][0], 4, b"\x00\x01\x02\x03")  # bad magic: that file's walk stops
    patch(recs[-3][0], 0, struct.pack(">i", 70000))  # torn: TOTALSIZE past the end
    assert len(files) > 3
    return [root]


@pytest.mark.parametrize("name", ["clean-small", "crash-tail", "damaged", "lmq"])
def test_same_frames_and_walks(name: str, reference_store: Callable[[str], Path],
                               store_copy: Callable[[str], Path], tmp_path: Path) -> None:
    if name == "lmq":  # multi-dispatch units (the walk's ``multi`` column)
        from tests.multi_dispatch_store import write_multi_dispatch_store

        root = tmp_path / "lmq"
        write_multi_dispatch_store(root, messages=400)
    else:
        root = _damaged_copies(store_copy)[0] if name == "damaged" else reference_store(name)
    with open_snapshot(root) as snap:
        for kw in ({}, {"topic": "TopicA"}, {"queue_id": 1}, {"limit": 7}, {"limit": 0}, {"start": 70000},
                   {"start": 70001, "limit": 3}, {"topic": "TopicB", "limit": 5, "start": 1000}, {"limit": 10**6}):
            d1: list[Damage] = []
            d2: list[Damage] = []
            got = snap.messages(damage=d1, **kw)
            want = ref_messages(snap, damage=d2, **kw)
            pd.testing.assert_frame_equal(got, want)
            assert d1 == d2
            outcomes = []
            for fn in (ref_messages, StoreSnapshot.messages):
                try:
                    fn(snap, **kw)
                    outcomes.append(None)
                except CorruptRecord as e:
                    outcomes.append((e.offset, e.reason, str(e)))
            assert outcomes[0] == outcomes[1]
        # topics(): the log side
        topics = snap.topics()
        cq_end = {(r.topic, r.queue_id): r.max_offset for r in topics.itertuples()
                  if (r.topic, r.queue_id) in snap.consume_queues}
        log = ref_topics_log(snap, cq_end)
        for r in topics.itertuples():
            want_log = log.get((r.topic, r.queue_id), [0, -1, -1, 0, 0])
            assert [r.messages, r.min_queue_offset, r.max_queue_offset, r.bytes, r.lag] == want_log
        assert set(log) <= {(r.topic, r.queue_id) for r in topics.itertuples()}
        # verify's per-file walk
        queue_ids = {k: i for i, k in enumerate(snap.consume_queues)}
        for n, mf in enumerate(snap.commit_log_files):
            for crc in (False, True):
                o1: list[Finding] = []
                o2: list[Finding] = []
                a = _walk_file(snap, mf, queue_ids, crc, last=n == len(snap.commit_log_files) - 1, out=o1)
                b = ref_walk_file(snap, mf, queue_ids, crc, last=n == len(snap.commit_log_files) - 1, out=o2)
                assert o1 == o2
                for f in ("offs", "qkey", "qo", "size", "tags", "check", "sched", "pairs"):
                    np.testing.assert_array_equal(getattr(a, f), getattr(b, f))
                    assert getattr(a, f).dtype == getattr(b, f).dtype
                assert (a.end, a.newest_ts, a.multi) == (b.end, b.newest_ts, b.multi)
                assert bool(a.multi) == (name == "lmq")
        for crc in (False, True):
            got_all = list(verify(snap, check_crc=crc))
            import rmqlab.inspect.checks as v

            orig = v._walk_file
            v._walk_file = ref_walk_file  # type: ignore[assignment]
            try:
                want_all = list(verify(snap, check_crc=crc))
            finally:
                v._walk_file = orig
            assert got_all == want_all
            if name == "damaged":
                assert got_all
