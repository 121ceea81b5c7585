"""verify(snapshot) -> a stream of findings: do CommitLog, ConsumeQueues and index agree?

Checks, in one pass per CommitLog file (memory: one file's record columns, plus each queue's
valid units and each index file's item columns as numpy arrays, zero-copy where possible):

* layout — file names are start offsets, sizes equal the file size (a shorter *last* CommitLog
  file is ``info``), no gaps; index files have a known layout;
* CommitLog — every record decodes (damage: ``commitlog_<reason>`` at the exact offset, the
  walk of that file stops there, like recovery; a file whose name + file size is past
  ``Long.MAX_VALUE``, which no broker wrote, is ``commitlog_offset_overflow`` at its start,
  none of its records read); the stored physical offset equals the position (stale records
  of a reused file); blank records only at file ends; a non-last file ends with a blank;
  with ``check_crc`` each body CRC (``commitlog_crc_mismatch``; the walk goes on), and the
  whole-record CRC of each record carrying the 5.x ``__CRC32#`` property in its last 20 bytes
  (a store written with ``enabledAppendPropCRC``), whatever the store's config:
  ``commitlog_prop_crc_mismatch`` (damage outside the body, which the body CRC cannot see;
  recovery with ``force_verify_prop_crc`` cuts the log there; the walk goes on);
* CQ -> log — every unit points at a record start with the same topic, queue, queue offset,
  size and tags code, or is a multi-dispatch (LMQ) unit: the record names the unit's queue and
  queue offset in ``INNER_MULTI_DISPATCH``/``INNER_MULTI_QUEUE_OFFSET`` (``cq_unit_no_record``,
  ``cq_unit_mismatch``; units past the end of the readable log, ``cq_units_past_log_end``);
* ConsumeQueueExt — a unit whose tags code is an ext address is checked with the tags code of
  the ext unit it resolves to (``consumequeue_ext/``, sizes and gaps checked like CQ files);
  an address that resolves to no unit is ``cq_ext_unit_missing`` (a warning: RocketMQ then
  passes a null tags code, which every tag filter matches);
* log -> CQ — every record (except PREPARED/ROLLBACK transaction records) has its unit:
  ``not_in_consume_queue`` (warning: dispatch lag, re-dispatched by recovery) or
  ``consume_queue_points_elsewhere`` (error);
* index -> log — every item points at a record start (``index_item_no_record``) whose
  ``topic#key`` / ``topic#uniq_key`` hashes include the item's hash (``index_item_wrong_key``);
* index chains — every slot names an existing item of its own slot (``index_slot_bad``), every
  item's ``prev`` an older item of its slot (``index_prev_bad``: a query would loop or walk
  another slot's chain), and every item is reached from its slot (``index_items_unreachable``:
  an error when queries can no longer find a key of a record, ``info`` when each such item's
  record and key are reached through another item, as after an indexing cut short and redone);
* checkpoint — present, timestamps not after the newest record by more than 3 s; ``abort``
  present is reported as ``info``;
* 5.x timer files (none in a 4.9.8 store) — what ``snap.timers()`` reports: a ``timerwheel`` of
  the wrong length or a short ``config/timercheck`` (``timer_length_mismatch``,
  ``timer_truncated``), damaged ``timerlog/`` files (``timer_<reason>``), and each pending unit
  whose chain breaks or whose record is missing or does not match (``timer_unit_problem``; the
  offset is the absolute timerlog offset, or the byte in the ``rmq_sys_wheel_timer`` queue).

Offsets: for CommitLog findings the absolute log offset (= file name + position); for CQ and
index findings the byte position inside the named file. Nothing is ever raised for bad data.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from rmqlab.codec.consume_queue_unit import CQ_STORE_UNIT_SIZE, MAX_ADDR
from rmqlab.codec.flags import INNER_BATCH_FLAG, SCHEDULE_TOPIC, TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE
from rmqlab.codec.index_layout import HASH_SLOT_SIZE, INDEX_HEADER_SIZE, INDEX_SIZE, index_file_size
from rmqlab.codec.multi_dispatch import MultiDispatchPairs, is_multi_dispatch_unit
from rmqlab.codec.names import COMPACTION_DIR, LONG_MAX, offset_overflow, parse_offset_file_name
from rmqlab.inspect.frames import index_items, index_slots

if TYPE_CHECKING:
    from rmqlab.files.mapped_file import MappedFile
    from rmqlab.inspect.snapshot import StoreSnapshot

__all__ = ["CHECKPOINT_SLACK_MS", "SEVERITIES", "Finding", "verify"]

SEVERITIES = ("error", "warning", "info")
CHECKPOINT_SLACK_MS = 3000
_PRE_BLANK_SIZE = 0x7FFFFFFF
_MAX_PER_KIND = 1000  # per-unit/per-item findings of one kind per file beyond this are summarised


@dataclass(frozen=True)
class Finding:
    """One thing verify noticed. ``file`` is relative to the store dir."""

    severity: str  # "error" | "warning" | "info"
    kind: str
    file: str
    offset: int
    message: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ------------------------------------------------------------------------------------ helpers
class _Queue:
    """A queue's valid units as native int64 columns, and where each unit lives on disk."""

    def __init__(self, snap: StoreSnapshot, key: tuple[str, int]) -> None:
        q = snap.consume_queues[key]
        self.files = q.files
        self.file_size = snap.consume_queue_file_size
        self.base, units = q.units()
        self.off = units["commit_log_offset"].astype(np.int64)
        self.size = units["size"].astype(np.int64)
        self.tags = units["tags_code"].astype(np.int64)
        # ext addresses: the ext unit's tags code where it resolves; ext_lost where it does not
        self.ext_lost = np.zeros(len(self.tags), dtype=bool)
        is_addr = self.tags <= MAX_ADDR
        if is_addr.any():
            sel = np.flatnonzero(is_addr)
            ext = snap.consume_queue_exts.get(key)
            if ext is not None:
                found, real, _ = ext.resolve(self.tags[sel])
                self.tags[sel[found]] = real[found]
            else:
                found = np.zeros(len(sel), dtype=bool)
            self.ext_lost[sel[~found]] = True
        self.real = self.size != _PRE_BLANK_SIZE
        self.sorted = bool(np.all(np.diff(self.off[self.real]) >= 0)) if self.real.any() else True
        self.first_path = os.path.relpath(self.files[0].file_name, snap.path) if self.files else ""
        self.root = snap.path

    def where(self, i: int) -> tuple[str, int]:
        """(relative file, byte position) of unit ``i``."""
        logical = (self.base + i) * CQ_STORE_UNIT_SIZE
        first = self.files[0].file_from_offset
        k = min((logical - first) // self.file_size, len(self.files) - 1)
        mf = self.files[k]
        return os.path.relpath(mf.file_name, self.root), logical - mf.file_from_offset

    def in_range(self, lo: int, hi: int) -> np.ndarray:
        """Indexes of real units with ``lo <= offset < hi``."""
        if self.sorted:
            idx = np.flatnonzero(self.real)
            offs = self.off[idx]
            return idx[np.searchsorted(offs, lo, "left"): np.searchsorted(offs, hi, "left")]
        return np.flatnonzero(self.real & (self.off >= lo) & (self.off < hi))


class _Index:
    def __init__(self, snap: StoreSnapshot, f: Any) -> None:
        items = index_items(f)
        self.name = os.path.relpath(f.file_name, snap.path)
        self.hash = items["key_hash"].astype(np.int64)
        self.phy = items["phy_offset"].astype(np.int64)
        self.prev = items["prev_index"].astype(np.int64)
        self.slots = index_slots(f).astype(np.int64)
        self.hash_slot_num = f.hash_slot_num
        self.sorted = bool(np.all(np.diff(self.phy) >= 0))
        self.item_base = INDEX_HEADER_SIZE + f.hash_slot_num * HASH_SLOT_SIZE

    def position(self, i: int) -> int:
        return self.item_base + (i + 1) * INDEX_SIZE

    def in_range(self, lo: int, hi: int) -> np.ndarray:
        if self.sorted:
            return np.arange(np.searchsorted(self.phy, lo, "left"), np.searchsorted(self.phy, hi, "left"))
        return np.flatnonzero((self.phy >= lo) & (self.phy < hi))


@dataclass
class _FileRecords:
    """Columns of one CommitLog file's records (walk order = offset order)."""

    offs: np.ndarray
    qkey: np.ndarray
    qo: np.ndarray
    size: np.ndarray
    tags: np.ndarray
    check: np.ndarray  # False for PREPARED/ROLLBACK (no CQ unit expected)
    sched: np.ndarray  # SCHEDULE_TOPIC: tags code is a due time
    pairs: np.ndarray  # (offset - file start) << 31 | index key hash, sorted
    end: int  # absolute offset where the walk stopped
    newest_ts: int
    multi: dict[int, tuple[MultiDispatchPairs, int]]  # offset -> multi-dispatch pairs, record's queue id
    #: offsets of 5.x inner-batch records (INNER_BATCH_FLAG: one record holds INNER_NUM messages), sorted
    inner: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))


# ------------------------------------------------------------------------------------ verify
def store_notes(snap: StoreSnapshot) -> Iterator[Finding]:
    """The store-level findings that come before any file is checked: parts of a 5.x store that
    are not read (so their absence elsewhere is no damage), and an ``abort`` file. Shared by
    :func:`verify` and the Spark audit."""
    if snap.rocksdb_consume_queue:
        beside = ("the file consume queues beside it are checked" if snap.consume_queues else
                  "there are no file consume queues, so records are not checked against any")
        yield Finding("warning", "rocksdb_consume_queue_not_read", "consumequeue/CURRENT", 0,
                      "5.x RocksDB consume queue (storeType=defaultRocksDB or rocksdbCQDoubleWriteEnable) is "
                      f"not read by rmqlab: {beside}; MessageStore.open refuses the store")
    if snap.dledger_commit_log:
        yield Finding("warning", "dledger_commit_log_not_read", os.path.relpath(snap.dledger_commit_log, snap.path), 0,
                      "DLedger CommitLog (enableDLegerCommitLog): the broker's messages are DLedger entries here, "
                      "which rmqlab does not read, so consume queue units past commitlog/'s end are not damage; "
                      "MessageStore.open refuses the store")
    if snap.compaction_files:
        yield Finding("info", "compaction_not_read", snap.compaction_files[0], 0,
                      f"5.x compaction store ({len(snap.compaction_files)} files under {COMPACTION_DIR}/, topics "
                      "with cleanup.policy=COMPACTION) is not read: those topics' compacted messages are only "
                      "shown while their commit log records last")
    if snap.abort_present:
        yield Finding("info", "abort_present", "abort", 0,
                      "abort file present: the last exit was not clean; opening runs abnormal recovery")


def verify(snap: StoreSnapshot, *, check_crc: bool = False,
           progress: Callable[[int], None] | None = None) -> Iterator[Finding]:
    """Yield findings one at a time (see the module docstring); never raises for bad data."""
    from rmqlab.inspect import batch_checks as bc

    yield from _check_layout(snap)
    yield from store_notes(snap)
    queue_ids = {k: i for i, k in enumerate(snap.consume_queues)}
    batch_ids = bc.batch_queue_ids(snap, len(queue_ids))
    batches = {i: bc.BatchQueue(snap, k) for k, i in batch_ids.items()}
    yield from bc.bcq_gaps(batches)
    queues: dict[int, _Queue] = {}
    for k, i in queue_ids.items():
        queues[i] = _Queue(snap, k)
        if not queues[i].sorted:
            yield Finding("warning", "cq_not_monotonic", queues[i].first_path, 0,
                          f"consume queue {k[0]}/{k[1]}: commit log offsets are not increasing")
    indexes: list[_Index] = []
    if not snap.index_error:
        for f in snap.index_files_opened():
            indexes.append(_Index(snap, f))
    yield from _index_chains(indexes)
    for k, i in queue_ids.items():
        yield from _ext_lost(queues[i], f"{k[0]}/{k[1]}", k in snap.consume_queue_exts)
    newest_ts = 0
    log_files = snap.commit_log_files
    from rmqlab.inspect.snapshot import scan_end

    # (a file ending past a long is not read: no data of its own makes an older file non-last)
    last_data = max((i for i, mf in enumerate(log_files) if scan_end(mf.buffer) > 0
                     and not offset_overflow(mf.file_from_offset, mf.file_size)), default=-1)
    for n, mf in enumerate(log_files):
        found: list[Finding] = []
        recs = _walk_file(snap, mf, queue_ids | batch_ids, check_crc, last=n >= last_data, out=found)
        yield from found
        newest_ts = max(newest_ts, recs.newest_ts)
        # (ends at most Long.MAX_VALUE, as the Spark audit's LongType columns hold them: only a file
        # ending past a long, none of it read, has its end cut, and no offset lies past it)
        lo, hi = mf.file_from_offset, min(mf.file_from_offset + snap.commit_log_file_size, LONG_MAX)
        if not (snap.rocksdb_consume_queue and not queues):  # (the queues are in RocksDB)
            yield from _log_to_cq(snap, mf, recs, queues, skip=set(batches))
        yield from _cq_to_log(snap, recs, queues, queue_ids, lo, hi)
        yield from bc.log_to_bcq(snap, mf, recs, batches)
        yield from bc.bcq_to_log(snap, recs, batches, lo, hi)
        yield from _index_to_log(recs, indexes, lo, hi)
        if progress is not None:
            progress(mf.mapped_length)
    end = min(log_files[-1].file_from_offset + snap.commit_log_file_size, LONG_MAX) if log_files else 0
    if not snap.dledger_commit_log:  # (else the units point into the DLedger log)
        yield from _outside_log(snap, queues, queue_ids, indexes, end)
        yield from bc.bcq_outside_log(snap, batches, end)
    yield from _check_checkpoint(snap, newest_ts)
    yield from _check_timers(snap)


def _check_layout(snap: StoreSnapshot) -> Iterator[Finding]:
    yield from _check_files("commitlog", snap.commit_log_dir, snap.commit_log_files, snap.commit_log_file_size,
                            snap.path, short_last_ok=True)
    for (topic, qid), q in snap.consume_queues.items():
        qdir = os.path.join(snap.path, "consumequeue", topic, str(qid))
        yield from _check_files(f"consumequeue {topic}/{qid}", qdir, q.files, snap.consume_queue_file_size,
                                snap.path, short_last_ok=False)
    for (topic, qid), b in snap.batch_consume_queues.items():
        qdir = os.path.join(snap.batch_consume_queue_dir, topic, str(qid))
        yield from _check_files(f"batchconsumequeue {topic}/{qid}", qdir, b.files, snap.batch_consume_queue_file_size,
                                snap.path, short_last_ok=False)
    for (topic, qid), e in snap.consume_queue_exts.items():
        qdir = os.path.join(snap.consume_queue_ext_dir, topic, str(qid))
        yield from _check_files(f"consumequeue_ext {topic}/{qid}", qdir, e.files, e.file_size, snap.path,
                                short_last_ok=False)
    yield from _index_strays(snap)
    if snap.index_error:
        yield Finding("warning", "index_layout_unknown", "index", 0, snap.index_error + "; index not checked")
        return
    for path, size in snap.index_short:
        yield Finding("error", "file_size_mismatch", os.path.relpath(path, snap.path), 0,
                      f"index file is {size} bytes, expected {index_file_size(snap.hash_slot_num, snap.index_num)}"
                      " (too short to read: not checked)")
    for f in snap.index_files_opened():
        rel = os.path.relpath(f.file_name, snap.path)
        if f.mapped_file.mapped_length != f.file_size:
            yield Finding("error", "file_size_mismatch", rel, 0,
                          f"index file is {f.mapped_file.mapped_length} bytes, expected {f.file_size}")
        if not 1 <= f.index_count <= f.index_num:
            yield Finding("error", "index_header_bad", rel, 36,
                          f"index_count {f.index_count} outside 1..{f.index_num}")


def _index_strays(snap: StoreSnapshot) -> Iterator[Finding]:
    """Entries of index/ that are not index files (regular files named by a timestamp): RocketMQ's
    IndexService.load opens every entry there as an index file, so a directory or a special file
    stops the broker's start, and a stray file is read as an index file."""
    try:
        names = sorted(os.listdir(snap.index_dir)) if os.path.isdir(snap.index_dir) else []
    except OSError:
        names = []
    for name in names:
        full = os.path.join(snap.index_dir, name)
        if name.isdigit() and os.path.isfile(full):
            continue
        what = ("a directory" if os.path.isdir(full) else "a regular file" if os.path.isfile(full)
                else "a symlink to nothing" if os.path.islink(full) and not os.path.exists(full) else "a special file")
        severity = "warning" if os.path.isfile(full) else "error"
        yield Finding(severity, "unexpected_file", os.path.relpath(full, snap.path), 0,
                      f"index: {name!r} is {what}, not an index file (a timestamp-named regular file); RocketMQ's "
                      "IndexService opens every entry of index/ as an index file")


def _ext_lost(q: _Queue, name: str, has_run: bool) -> Iterator[Finding]:
    """``cq_ext_unit_missing`` for every real unit whose ext address resolves to no unit."""
    lost = np.flatnonzero(q.ext_lost & q.real)
    found: list[Finding] = []
    for i in lost.tolist():
        f, p = q.where(i)
        where = "no unit there" if has_run else "the store has no consumequeue_ext run for this queue"
        found.append(Finding("warning", "cq_ext_unit_missing", f, p,
                             f"{name} queue offset {q.base + i}: tags code {int(q.tags[i])} is a ConsumeQueueExt "
                             f"address (ext offset {int(q.tags[i]) & ((1 << 63) - 1)}), {where}: RocketMQ reads a "
                             "null tags code, which every tag filter matches"))
    if found:
        yield from _capped(found, "cq_ext_unit_missing", found[0].file, found[0].offset, "units")


def _check_files(what: str, directory: str, files: list[MappedFile], file_size: int, root: str,
                 *, short_last_ok: bool) -> Iterator[Finding]:
    if os.path.isdir(directory):
        for name in sorted(os.listdir(directory)):
            full = os.path.join(directory, name)
            if parse_offset_file_name(name) is None:
                yield Finding("warning", "unexpected_file", os.path.relpath(full, root), 0,
                              f"{what}: {name!r} is not an offset file name (20 digits, at most Long.MAX_VALUE)")
            else:
                try:
                    size = os.path.getsize(full)
                except OSError as e:  # a dangling or looping symlink: RocketMQ's load fails on it
                    yield Finding("error", "unexpected_file", os.path.relpath(full, root), 0,
                                  f"{what}: {name!r} cannot be read ({e.strerror or e})")
                    continue
                if size == 0:
                    yield Finding("warning", "empty_file", os.path.relpath(full, root), 0, f"{what}: empty file")
    prev: MappedFile | None = None
    for i, mf in enumerate(files):
        rel = os.path.relpath(mf.file_name, root)
        if mf.file_from_offset % file_size:
            yield Finding("error", "file_name_misaligned", rel, mf.file_from_offset,
                          f"{what}: start offset {mf.file_from_offset} is not a multiple of the file size {file_size}")
        if prev is not None and mf.file_from_offset != prev.file_from_offset + file_size:
            kind = "file_gap" if mf.file_from_offset > prev.file_from_offset + file_size else "file_overlap"
            yield Finding("error", kind, rel, mf.file_from_offset,
                          f"{what}: file starts at {mf.file_from_offset}, previous file ends at "
                          f"{prev.file_from_offset + file_size}")
        size = os.path.getsize(mf.file_name)
        if size != file_size:
            last = i == len(files) - 1
            if last and short_last_ok and size < file_size:
                yield Finding("info", "short_last_file", rel, mf.file_from_offset + size,
                              f"{what}: last file is {size} of {file_size} bytes "
                              "(trimmed; the rest reads as unwritten)")
            else:
                yield Finding("error", "file_size_mismatch", rel, mf.file_from_offset,
                              f"{what}: file is {size} bytes, expected {file_size}")
        prev = mf


def _walk_file(snap: StoreSnapshot, mf: MappedFile, queue_ids: dict[tuple[str, int], int], check_crc: bool,
               *, last: bool, out: list[Finding]) -> _FileRecords:
    """Scan one file's records into columns; damage and record-level problems go to ``out``.

    Columnar (:func:`rmqlab.codec.scan.scan_records`): per-record findings are found with
    vectorised comparisons and emitted in offset order (per record: physical offset, then CRC).
    """
    rel = os.path.relpath(mf.file_name, snap.path)
    base = mf.file_from_offset
    extra = len(queue_ids)
    unknown: dict[tuple[str, int], int] = {}
    cols: dict[str, list[np.ndarray]] = {k: [] for k in ("offs", "qkey", "qo", "size", "tags", "check", "sched",
                                                         "pairs", "inner")}
    newest = 0
    last_cols = None
    multi: dict[int, tuple[MultiDispatchPairs, int]] = {}
    for c in snap.scan_file(mf, 0, with_properties=False, with_crc=check_crc, with_multi_dispatch=True):
        last_cols = c
        if not c.n:
            continue
        offs = c.offset
        if c.multi_dispatch is not None:
            for i, md in enumerate(c.multi_dispatch):
                if md:
                    multi[int(offs[i])] = (md, int(c.queue_id[i]))
        stale = c.commit_log_offset != offs
        bad_crc = ~c.crc_ok if check_crc and c.crc_ok is not None else np.zeros(c.n, bool)
        bad_prop = c.prop_crc == 0 if check_crc and c.prop_crc is not None else np.zeros(c.n, bool)
        flagged = stale | bad_crc | bad_prop
        for i in np.flatnonzero(flagged).tolist():
            off = int(offs[i])
            if stale[i]:
                out.append(Finding("error", "commitlog_phys_offset_mismatch", rel, off,
                                   f"record at {off} says its physical offset is {int(c.commit_log_offset[i])} "
                                   "(a stale record of a reused file?)"))
            if bad_crc[i]:
                out.append(Finding("error", "commitlog_crc_mismatch", rel, off,
                                   f"body CRC {int(c.body_crc[i])} does not match the body of "
                                   f"{int(c.body_length[i])} bytes "
                                   "(recovery with checkCRCOnRecover cuts the log here)"))
            if bad_prop[i]:
                out.append(Finding("error", "commitlog_prop_crc_mismatch", rel, off,
                                   f"__CRC32# property is not the CRC of the record's first "
                                   f"{int(c.store_size[i]) - 20} bytes: damage outside the body, which the body "
                                   "CRC cannot see (recovery with force_verify_prop_crc cuts the log here)"))
        # (topic, queue) -> queue number, one dict lookup per distinct pair
        codes: dict[str, int] = {}
        tcode = np.array([codes.setdefault(t, len(codes)) for t in c.topic], np.int64)
        names = list(codes)
        pair = (tcode << 32) | (c.queue_id & 0xFFFFFFFF)
        uniq, first, inv = np.unique(pair, return_index=True, return_inverse=True)
        ids = np.empty(len(uniq), np.int64)
        for g in np.argsort(first, kind="stable").tolist():  # first-appearance order, like the walk
            k = (names[int(uniq[g]) >> 32], int(c.queue_id[first[g]]))
            qid = queue_ids.get(k)
            if qid is None:
                qid = unknown.setdefault(k, extra + len(unknown))
            ids[g] = qid
        cols["offs"].append(offs)
        cols["qkey"].append(ids[inv.ravel()])
        cols["qo"].append(c.queue_offset)
        cols["size"].append(c.store_size)
        cols["tags"].append(c.tags_code)
        tx = c.sys_flag & 0xC
        cols["check"].append((tx != TRANSACTION_PREPARED_TYPE) & (tx != TRANSACTION_ROLLBACK_TYPE))
        cols["inner"].append(offs[(c.sys_flag & INNER_BATCH_FLAG) != 0])
        sched_code = codes.get(SCHEDULE_TOPIC)
        cols["sched"].append(tcode == sched_code if sched_code is not None else np.zeros(c.n, bool))
        rows, hashes = c.index_key_hashes()
        cols["pairs"].append(((offs[rows] - base) << 31) | hashes)
        newest = max(newest, int(c.store_timestamp.max()))
    assert last_cols is not None
    end = base
    offs_all = _cat(cols["offs"], np.int64)
    if len(offs_all):
        end = int(offs_all[-1]) + int(cols["size"][-1][-1])
    if last_cols.blank is not None:
        off, bsize = last_cols.blank
        end = off + bsize
        if off + bsize != base + snap.commit_log_file_size:
            out.append(Finding("error", "blank_not_at_file_end", rel, off,
                               f"blank record of {bsize} bytes ends at {off + bsize}, the file at "
                               f"{base + snap.commit_log_file_size}"))
    err = last_cols.error
    if err is not None:
        end = err.offset
        out.append(Finding("error", f"commitlog_{err.reason}", rel, err.offset,
                           f"{err.detail or err.reason}; the walk of this file stops here"
                           + ("" if last else f" ({base + mf.mapped_length - err.offset} bytes not read)")))
    if last_cols.blank is None and err is None and not last and mf.mapped_length:
        out.append(Finding("error", "file_not_full", rel, end,
                           "the records stop before the end of a file that is not the last (no blank record); "
                           "recovery would end the log here"))
    return _FileRecords(
        offs_all, _cat(cols["qkey"], np.int64), _cat(cols["qo"], np.int64), _cat(cols["size"], np.int64),
        _cat(cols["tags"], np.int64), _cat(cols["check"], bool), _cat(cols["sched"], bool),
        np.unique(_cat(cols["pairs"], np.int64)), end, newest, multi, _cat(cols["inner"], np.int64),
    )


def _cat(parts: list[np.ndarray], dtype: Any) -> np.ndarray:
    if not parts:
        return np.empty(0, dtype)
    return parts[0].astype(dtype, copy=False) if len(parts) == 1 else np.concatenate(parts).astype(dtype, copy=False)


def _capped(findings: list[Finding], kind: str, file: str, offset: int, what: str) -> Iterator[Finding]:
    yield from findings[:_MAX_PER_KIND]
    if len(findings) > _MAX_PER_KIND:
        yield Finding(findings[0].severity, kind, file, offset,
                      f"... and {len(findings) - _MAX_PER_KIND} more {what} (not listed)")


def _log_to_cq(snap: StoreSnapshot, mf: MappedFile, recs: _FileRecords, queues: dict[int, _Queue],
               skip: frozenset[int] | set[int] = frozenset()) -> Iterator[Finding]:
    rel = os.path.relpath(mf.file_name, snap.path)
    keys = list(snap.consume_queues)
    missing: list[Finding] = []
    elsewhere: list[Finding] = []
    for qid in np.unique(recs.qkey[recs.check]):
        if int(qid) in skip:  # a batch queue's records (batch_checks.log_to_bcq)
            continue
        sel = np.flatnonzero((recs.qkey == qid) & recs.check)
        q = queues.get(int(qid))
        if q is None:
            for j in sel:
                missing.append(Finding("warning", "not_in_consume_queue", rel, int(recs.offs[j]),
                                       f"record (queue offset {int(recs.qo[j])}) has no consume queue at all"))
            continue
        name = f"{keys[int(qid)][0]}/{keys[int(qid)][1]}"
        pos = recs.qo[sel] - q.base
        past = pos >= len(q.off)
        for j in sel[past]:
            missing.append(Finding("warning", "not_in_consume_queue", rel, int(recs.offs[j]),
                                   f"{name} queue offset {int(recs.qo[j])} is at or past the consume queue's end "
                                   f"{q.base + len(q.off)} (not dispatched yet; recovery re-dispatches it)"))
        inside = (pos >= 0) & ~past
        js, ps = sel[inside], pos[inside]
        wrong = q.off[ps] != recs.offs[js]
        for j, p in zip(js[wrong], ps[wrong], strict=True):
            elsewhere.append(Finding("error", "consume_queue_points_elsewhere", rel, int(recs.offs[j]),
                                     f"{name} queue offset {int(recs.qo[j])}: its unit points at "
                                     f"{int(q.off[p])}, not at this record"))
    missing.sort(key=lambda f: f.offset)
    elsewhere.sort(key=lambda f: f.offset)
    yield from _capped(missing, "not_in_consume_queue", rel, recs.end, "records missing from consume queues")
    yield from _capped(elsewhere, "consume_queue_points_elsewhere", rel, recs.end, "records")


def records_at(recs: _FileRecords, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(hit, row)``: whether a record of the file starts at each offset, and its row there."""
    j = np.searchsorted(recs.offs, offsets)
    jj = np.minimum(j, max(len(recs.offs) - 1, 0))
    hit = (j < len(recs.offs)) & (recs.offs[jj] == offsets) if len(recs.offs) else np.zeros(len(offsets), bool)
    return hit, jj


def _cq_to_log(snap: StoreSnapshot, recs: _FileRecords, queues: dict[int, _Queue],
               queue_ids: dict[tuple[str, int], int], lo: int, hi: int) -> Iterator[Finding]:
    names = {i: f"{k[0]}/{k[1]}" for k, i in queue_ids.items()}
    keys = {i: k for k, i in queue_ids.items()}
    for qid, q in queues.items():
        idx = q.in_range(lo, hi)
        if not idx.size:
            continue
        uoff = q.off[idx]
        past = uoff >= recs.end
        if past.any():
            f, p = q.where(int(idx[past][0]))
            yield Finding("error", "cq_units_past_log_end", f, p,
                          f"{names[qid]}: {int(past.sum())} unit(s) from queue offset {q.base + int(idx[past][0])} "
                          f"point at or past {recs.end}, where the readable log of this file ends")
        idx, uoff = idx[~past], uoff[~past]
        hit, jj = records_at(recs, uoff)
        bad: list[Finding] = []
        for i in idx[~hit]:
            f, p = q.where(int(i))
            bad.append(Finding("error", "cq_unit_no_record", f, p,
                               f"{names[qid]} queue offset {q.base + int(i)}: unit points at {int(q.off[i])}, "
                               "where no record starts"))
        idx, jj = idx[hit], jj[hit]
        tags_ok = (recs.tags[jj] == q.tags[idx]) | recs.sched[jj] | q.ext_lost[idx]
        checks = {
            "topic/queue": recs.qkey[jj] == qid,
            "queue offset": recs.qo[jj] == q.base + idx,
            "size": recs.size[jj] == q.size[idx],
            "tags code": tags_ok,
        }
        ok = np.logical_and.reduce(list(checks.values()))
        if recs.multi:  # a multi-dispatch (LMQ) unit: another queue's record, at the offset it names
            topic, queue_id = keys[qid]
            for n in np.flatnonzero(~ok & checks["size"] & checks["tags code"]).tolist():
                got = recs.multi.get(int(q.off[idx[n]]))
                if got is not None and is_multi_dispatch_unit(got[0], got[1], topic, queue_id, q.base + int(idx[n])):
                    ok[n] = True
        for n in np.flatnonzero(~ok):
            i, r = int(idx[n]), int(jj[n])
            what = ", ".join(k for k, v in checks.items() if not v[n])
            f, p = q.where(i)
            bad.append(Finding("error", "cq_unit_mismatch", f, p,
                               f"{names[qid]} queue offset {q.base + i} -> record at {int(q.off[i])}: {what} differ "
                               f"(unit size {int(q.size[i])} tags {int(q.tags[i])}; record queue offset "
                               f"{int(recs.qo[r])} size {int(recs.size[r])} tags {int(recs.tags[r])})"))
        if bad:
            yield from _capped(bad, bad[0].kind, bad[0].file, bad[0].offset, "units")


def _index_to_log(recs: _FileRecords, indexes: list[_Index], lo: int, hi: int) -> Iterator[Finding]:
    for ix in indexes:
        idx = ix.in_range(lo, hi)
        if not idx.size:
            continue
        phy = ix.phy[idx]
        past = phy >= recs.end
        if past.any():
            yield Finding("error", "index_items_past_log_end", ix.name, ix.position(int(idx[past][0])),
                          f"{int(past.sum())} item(s) point at or past {recs.end}, where the readable log of "
                          "this file ends")
        idx, phy = idx[~past], phy[~past]
        key = ((phy - lo) << 31) | ix.hash[idx]
        ok = np.isin(key, recs.pairs)
        bad: list[Finding] = []
        for i in idx[~ok]:
            p = int(ix.phy[i])
            j = int(np.searchsorted(recs.offs, p))
            starts = j < len(recs.offs) and int(recs.offs[j]) == p
            if starts:
                bad.append(Finding("error", "index_item_wrong_key", ix.name, ix.position(int(i)),
                                   f"item {int(i) + 1} (hash {int(ix.hash[i])}) points at the record at {p}, "
                                   "which has no key with that hash"))
            else:
                bad.append(Finding("error", "index_item_no_record", ix.name, ix.position(int(i)),
                                   f"item {int(i) + 1} points at {p}, where no record starts"))
        if bad:
            yield from _capped(bad, bad[0].kind, ix.name, bad[0].offset, "items")


def _chain_links(ix: _Index) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(bad slots, bad prevs, reachable items) of one index file.

    Item ``i`` (array row ``i - 1``) is in slot ``key_hash % hash_slot_num``. A slot value
    ``v > 0`` is a good link when item ``v`` exists and is in that slot; a ``prev`` ``p > 0`` of
    item ``i`` when ``p < i`` and item ``p`` is in the same slot (RocketMQ's query follows
    ``0 < p <= index_count``, ``p != i``). Reachability over good links, by pointer jumping:
    each item's parent is the one link naming it, and chains run from newer items to older."""
    n = len(ix.hash)
    slot_of = np.abs(ix.hash) % ix.hash_slot_num
    num = np.arange(1, n + 1, dtype=np.int64)
    k = np.arange(len(ix.slots), dtype=np.int64)
    v = ix.slots
    named = v > 0
    ok_slot = named & (v <= n)
    ok_slot[ok_slot] = slot_of[v[ok_slot] - 1] == k[ok_slot]
    bad_slots = np.flatnonzero(named & ~ok_slot)
    p = ix.prev
    linked = p > 0
    ok_prev = linked & (p < num)
    ok_prev[ok_prev] = slot_of[p[ok_prev] - 1] == slot_of[ok_prev]
    bad_prevs = np.flatnonzero(linked & ~ok_prev)
    parent = np.zeros(n + 1, dtype=np.int64)  # by item number; 0: nothing names it, -1: a slot does
    parent[p[ok_prev]] = num[ok_prev]
    parent[v[ok_slot]] = -1
    parent[0] = 0
    todo = np.flatnonzero(parent > 0)
    while todo.size:  # a parent is newer than its child: ~log2(longest chain) rounds
        parent[todo] = parent[parent[todo]]
        todo = todo[parent[todo] > 0]
    return bad_slots, bad_prevs, parent[1:] == -1


def _index_chains(indexes: list[_Index]) -> Iterator[Finding]:
    links = [_chain_links(ix) if len(ix.hash) else None for ix in indexes]
    pair = np.dtype([("phy", "<i8"), ("hash", "<i8")])

    def pairs(ix: _Index, rows: np.ndarray) -> np.ndarray:
        out = np.empty(len(rows), dtype=pair)
        out["phy"], out["hash"] = ix.phy[rows], ix.hash[rows]
        return out

    reached = None
    for ix, got in zip(indexes, links, strict=True):
        if got is None:
            continue
        bad_slots, bad_prevs, reachable = got
        if bad_slots.size:
            k = int(bad_slots[0])
            yield Finding("error", "index_slot_bad", ix.name, INDEX_HEADER_SIZE + k * HASH_SLOT_SIZE,
                          f"{bad_slots.size} slot(s) name an item that does not exist or is in another slot "
                          f"(slot {k} names item {int(ix.slots[k])} of {len(ix.hash)}): queries of their keys "
                          "miss or walk another chain")
        if bad_prevs.size:
            i = int(bad_prevs[0])
            yield Finding("error", "index_prev_bad", ix.name, ix.position(i),
                          f"{bad_prevs.size} item(s) link to an item that is not older or not in their slot "
                          f"(item {i + 1} links to {int(ix.prev[i])}): a query stops or walks another chain")
        lost = np.flatnonzero(~reachable)
        if not lost.size:
            continue
        if reached is None:  # every reachable (record, key hash) of every index file
            reached = np.concatenate([pairs(x, np.flatnonzero(g[2])) for x, g in zip(indexes, links, strict=True)
                                      if g is not None])
        again = np.isin(pairs(ix, lost), reached)
        gone = lost[~again]
        if gone.size:
            i = int(gone[0])
            yield Finding("error", "index_items_unreachable", ix.name, ix.position(i),
                          f"{gone.size} item(s) no slot chain reaches (first: item {i + 1}, record at "
                          f"{int(ix.phy[i])}): queries can no longer find those keys of those records")
        if again.any():
            i = int(lost[again][0])
            yield Finding("info", "index_items_unreachable", ix.name, ix.position(i),
                          f"{int(again.sum())} item(s) no slot chain reaches (first: item {i + 1}), each "
                          "record and key reached through another item: an indexing cut short and done again")


def _outside_log(snap: StoreSnapshot, queues: dict[int, _Queue], queue_ids: dict[tuple[str, int], int],
                 indexes: list[_Index], end: int) -> Iterator[Finding]:
    start = snap.min_offset
    names = {i: f"{k[0]}/{k[1]}" for k, i in queue_ids.items()}
    for qid, q in queues.items():
        before = np.flatnonzero(q.real & (q.off < start))
        if before.size:
            f, p = q.where(int(before[0]))
            yield Finding("info", "cq_units_before_log_start", f, p,
                          f"{names[qid]}: {before.size} unit(s) point before the first CommitLog file ({start}); "
                          "their files were cleaned up")
        after = np.flatnonzero(q.real & (q.off >= end))
        if after.size:
            f, p = q.where(int(after[0]))
            yield Finding("error", "cq_units_past_log_end", f, p,
                          f"{names[qid]}: {after.size} unit(s) point past the last CommitLog file (end {end})")
    for ix in indexes:
        before = np.flatnonzero(ix.phy < start)
        if before.size:
            yield Finding("info", "index_items_before_log_start", ix.name, ix.position(int(before[0])),
                          f"{before.size} item(s) point before the first CommitLog file ({start})")
        after = np.flatnonzero(ix.phy >= end)
        if after.size:
            yield Finding("error", "index_items_past_log_end", ix.name, ix.position(int(after[0])),
                          f"{after.size} item(s) point past the last CommitLog file (end {end})")


def _check_checkpoint(snap: StoreSnapshot, newest_ts: int) -> Iterator[Finding]:
    cp = snap.checkpoint_values()
    if cp is None:
        if snap.commit_log_files:
            yield Finding("warning", "checkpoint_missing", "checkpoint", 0,
                          "no readable checkpoint file: opening treats every timestamp as 0")
        return
    fields = (("physic_msg_timestamp", 0), ("logics_msg_timestamp", 8), ("index_msg_timestamp", 16))
    for name, pos in fields:
        value = getattr(cp, name)
        if newest_ts and value > newest_ts + CHECKPOINT_SLACK_MS:
            yield Finding("warning", "checkpoint_in_future", "checkpoint", pos,
                          f"{name} {value} is {value - newest_ts} ms after the newest record's store time "
                          f"{newest_ts}")
        elif newest_ts and value == 0 and name != "index_msg_timestamp":
            yield Finding("info", "checkpoint_zero", "checkpoint", pos,
                          f"{name} is 0 although the log holds records (never flushed?)")


def _check_timers(snap: StoreSnapshot) -> Iterator[Finding]:
    from rmqlab.codec.timer_log import TIMER_TOPIC
    from rmqlab.errors import CorruptRecord
    from rmqlab.inspect.timers import timers_frame

    try:
        df = timers_frame(snap)
    except CorruptRecord as e:  # the broker would refuse to start: nothing more to read
        yield Finding("error", f"timer_{e.reason}", e.file or "", e.offset, str(e))
        return
    if df.attrs.get("note", "").startswith("no config/timercheck"):
        yield Finding("warning", "timer_checkpoint_missing", "config/timercheck", 0, df.attrs["note"])
    for d in df.attrs.get("damage", []):
        yield Finding("error", f"timer_{d['reason']}", d["file"], int(d["offset"]), d["detail"])
    for r in df[df.problem != ""].itertuples(index=False):
        if r.stage == "wheel":
            yield Finding("error", "timer_unit_problem", "timerlog", int(r.timer_log_offset), r.problem)
        else:  # a queue unit: the CQ file holding it and the byte inside it, as for other CQ findings
            logical = int(r.queue_offset) * CQ_STORE_UNIT_SIZE
            q = snap.consume_queues[(TIMER_TOPIC, 0)]
            mf = next(f for f in reversed(q.files) if f.file_from_offset <= logical)
            yield Finding("error", "timer_unit_problem", os.path.relpath(mf.file_name, snap.path),
                          logical - mf.file_from_offset, r.problem)
