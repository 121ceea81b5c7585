"""verify's checks of 5.x BatchConsumeQueues (``batchconsumequeue/``, spec §3.8) against the log.

A BatchConsumeQueue unit stands for one commit-log record, which may hold many messages (an
inner batch: ``INNER_BATCH_FLAG`` and ``INNER_NUM``); its queue offsets are ``msg_base_offset ..
msg_base_offset + batch_size - 1``. The checks, per CommitLog file, with the same finding kinds
as plain queues (the message names the batch queue):

* unit -> log: the unit points at a record start (``cq_unit_no_record``) whose topic, queue,
  queue offset (= ``msg_base_offset``), size, tags code, batch size (``INNER_NUM`` for an inner
  batch, else 1) and store timestamp are the unit's (``cq_unit_mismatch``); units past the
  readable log (``cq_units_past_log_end``);
* log -> unit: every record of a batch queue has the unit starting at its queue offset
  (``not_in_consume_queue``, a warning: dispatch lag; ``consume_queue_points_elsewhere``);
* within a queue, each unit starts where the previous one's batch ends (``bcq_offsets_gap``, a
  warning: 5.3.3 leaves such holes for plain records sent to a BatchCQ topic).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from rmqlab.codec.batch_consume_queue_unit import BCQ_STORE_UNIT_SIZE
from rmqlab.codec.flags import PROPERTY_INNER_NUM
from rmqlab.inspect.checks import Finding, _capped, _FileRecords, records_at

if TYPE_CHECKING:
    from rmqlab.files.mapped_file import MappedFile
    from rmqlab.inspect.snapshot import StoreSnapshot

__all__ = ["BatchQueue", "batch_queue_ids", "bcq_gaps", "bcq_outside_log", "bcq_to_log", "log_to_bcq"]


class BatchQueue:
    """A batch queue's valid units as native int64 columns, and where each lives on disk."""

    def __init__(self, snap: StoreSnapshot, key: tuple[str, int]) -> None:
        where, units = snap.batch_consume_queues[key].units()
        self.name = f"{key[0]}/{key[1]}"
        self.off = units["commit_log_offset"].astype(np.int64)
        self.size = units["size"].astype(np.int64)
        self.tags = units["tags_code"].astype(np.int64)
        self.ts = units["store_timestamp"].astype(np.int64)
        self.base = units["msg_base_offset"].astype(np.int64)
        self.batch = units["batch_size"].astype(np.int64)
        self._files = [(os.path.relpath(mf.file_name, snap.path), n) for mf, n in where]
        self._starts = np.cumsum([0] + [n for _, n in where])
        self.sorted = bool(np.all(np.diff(self.off) >= 0) and np.all(np.diff(self.base) >= 0))

    def where(self, i: int) -> tuple[str, int]:
        """(relative file, byte position) of unit ``i``."""
        k = int(np.searchsorted(self._starts, i, side="right")) - 1
        return self._files[k][0], (i - int(self._starts[k])) * BCQ_STORE_UNIT_SIZE

    def in_range(self, lo: int, hi: int) -> np.ndarray:
        if self.sorted:
            return np.arange(np.searchsorted(self.off, lo, "left"), np.searchsorted(self.off, hi, "left"))
        return np.flatnonzero((self.off >= lo) & (self.off < hi))


def batch_queue_ids(snap: StoreSnapshot, first: int) -> dict[tuple[str, int], int]:
    """Queue numbers for the batch queues (after the plain queues' ``0 .. first - 1``); a queue
    that also has plain consume-queue files keeps its records checked against those."""
    keys = [k for k in snap.batch_consume_queues if k not in snap.consume_queues]
    return {k: first + i for i, k in enumerate(keys)}


def _inner_num(snap: StoreSnapshot, offset: int) -> int | None:
    """INNER_NUM of the inner-batch record at ``offset`` (None: unreadable or not a number)."""
    try:
        rec = snap.read_record(offset)
        return int(rec.properties.get(PROPERTY_INNER_NUM, "")) if rec is not None else None
    except (ValueError, AttributeError):
        return None


def bcq_to_log(snap: StoreSnapshot, recs: _FileRecords, queues: dict[int, BatchQueue], lo: int, hi: int
               ) -> Iterator[Finding]:
    for qid, q in queues.items():
        idx = q.in_range(lo, hi)
        if not idx.size:
            continue
        uoff = q.off[idx]
        past = uoff >= recs.end
        if past.any():
            f, p = q.where(int(idx[past][0]))
            yield Finding("error", "cq_units_past_log_end", f, p,
                          f"batch queue {q.name}: {int(past.sum())} unit(s) from queue offset "
                          f"{int(q.base[idx[past][0]])} point at or past {recs.end}, where the readable log of "
                          "this file ends")
        idx, uoff = idx[~past], uoff[~past]
        hit, jj = records_at(recs, uoff)
        bad: list[Finding] = []
        for i in idx[~hit].tolist():
            f, p = q.where(i)
            bad.append(Finding("error", "cq_unit_no_record", f, p,
                               f"batch queue {q.name} queue offset {int(q.base[i])}: unit points at "
                               f"{int(q.off[i])}, where no record starts"))
        idx, jj = idx[hit], jj[hit]
        inner = np.isin(q.off[idx], recs.inner)
        want_batch = np.ones(len(idx), np.int64)
        for n in np.flatnonzero(inner).tolist():  # INNER_NUM lives in the properties: decode those records
            got = _inner_num(snap, int(q.off[idx[n]]))
            want_batch[n] = -1 if got is None else got
        checks = {
            "topic/queue": recs.qkey[jj] == qid,
            "queue offset": recs.qo[jj] == q.base[idx],
            "size": recs.size[jj] == q.size[idx],
            "tags code": (recs.tags[jj] == q.tags[idx]) | recs.sched[jj],
            "batch size": want_batch == q.batch[idx],
        }
        ok = np.logical_and.reduce(list(checks.values()))
        for n in np.flatnonzero(~ok).tolist():
            i, r = int(idx[n]), int(jj[n])
            what = ", ".join(k for k, v in checks.items() if not v[n])
            f, p = q.where(i)
            bad.append(Finding("error", "cq_unit_mismatch", f, p,
                               f"batch queue {q.name} queue offset {int(q.base[i])} -> record at {int(q.off[i])}: "
                               f"{what} differ (unit size {int(q.size[i])} tags {int(q.tags[i])} batch "
                               f"{int(q.batch[i])}; record queue offset {int(recs.qo[r])} size {int(recs.size[r])} "
                               f"tags {int(recs.tags[r])} messages {int(want_batch[n])})"))
        if bad:
            yield from _capped(bad, bad[0].kind, bad[0].file, bad[0].offset, "units")


def log_to_bcq(snap: StoreSnapshot, mf: MappedFile, recs: _FileRecords, queues: dict[int, BatchQueue]
               ) -> Iterator[Finding]:
    rel = os.path.relpath(mf.file_name, snap.path)
    missing: list[Finding] = []
    elsewhere: list[Finding] = []
    for qid, q in queues.items():
        sel = np.flatnonzero((recs.qkey == qid) & recs.check)
        if not sel.size:
            continue
        qo = recs.qo[sel]
        end = int(q.base[-1] + q.batch[-1]) if len(q.base) else 0
        order = np.argsort(q.base, kind="stable")
        k = np.searchsorted(q.base[order], qo)
        unit = order[np.minimum(k, max(len(order) - 1, 0))] if len(order) else np.zeros(len(qo), np.int64)
        found = (k < len(order)) & (q.base[unit] == qo) if len(order) else np.zeros(len(qo), bool)
        for n in np.flatnonzero(~found).tolist():
            j = int(sel[n])
            why = (f"is at or past the batch queue's end {end} (not dispatched yet; recovery re-dispatches it)"
                   if int(qo[n]) >= end else "starts no unit of the batch queue")
            missing.append(Finding("warning", "not_in_consume_queue", rel, int(recs.offs[j]),
                                   f"batch queue {q.name} queue offset {int(qo[n])} {why}"))
        for n in np.flatnonzero(found).tolist():
            if q.off[unit[n]] == recs.offs[sel[n]]:
                continue
            j = int(sel[n])
            elsewhere.append(Finding("error", "consume_queue_points_elsewhere", rel, int(recs.offs[j]),
                                     f"batch queue {q.name} queue offset {int(qo[n])}: its unit points at "
                                     f"{int(q.off[unit[n]])}, not at this record"))
    missing.sort(key=lambda f: f.offset)
    elsewhere.sort(key=lambda f: f.offset)
    yield from _capped(missing, "not_in_consume_queue", rel, recs.end, "records missing from consume queues")
    yield from _capped(elsewhere, "consume_queue_points_elsewhere", rel, recs.end, "records")


def bcq_gaps(queues: dict[int, BatchQueue]) -> Iterator[Finding]:
    for q in queues.values():
        if len(q.base) < 2:
            continue
        gap = np.flatnonzero(q.base[1:] != q.base[:-1] + q.batch[:-1])
        if gap.size:
            i = int(gap[0]) + 1
            f, p = q.where(i)
            yield Finding("warning", "bcq_offsets_gap", f, p,
                          f"batch queue {q.name}: unit {i} starts at queue offset {int(q.base[i])}, not where the "
                          f"previous unit's batch ends ({int(q.base[i - 1] + q.batch[i - 1])}); "
                          f"{gap.size} such place(s). RocketMQ 5.3.3 leaves such holes itself when a record "
                          "that is not an inner batch is sent to a BatchCQ topic (it gets a queue offset but no "
                          "unit: see not_in_consume_queue); a wrong batch size shows as cq_unit_mismatch")


def bcq_outside_log(snap: StoreSnapshot, queues: dict[int, BatchQueue], end: int) -> Iterator[Finding]:
    start = snap.min_offset
    for q in queues.values():
        before = np.flatnonzero(q.off < start)
        if before.size:
            f, p = q.where(int(before[0]))
            yield Finding("info", "cq_units_before_log_start", f, p,
                          f"batch queue {q.name}: {before.size} unit(s) point before the first CommitLog file "
                          f"({start}); their files were cleaned up")
        after = np.flatnonzero(q.off >= end)
        if after.size:
            f, p = q.where(int(after[0]))
            yield Finding("error", "cq_units_past_log_end", f, p,
                          f"batch queue {q.name}: {after.size} unit(s) point past the last CommitLog file (end {end})")
