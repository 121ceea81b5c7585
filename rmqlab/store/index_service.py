"""IndexService: the ``index/`` directory — build the key index, roll files, answer key queries.

RocketMQ's ``IndexService`` (spec §4.4-4.5), with two deliberate differences in *how*, not *what*:

* a full file is flushed (and ``checkpoint.index_msg_timestamp`` set to its end time and the
  checkpoint flushed) synchronously inside the roll, not on a throw-away thread, so the result is
  deterministic; the bytes written are the same;
* a new file's name comes from the injected clock (``index_file_name(clock.now_ms(), clock.tz())``);
  if that name is already taken (a ManualClock that did not move) 1 ms is added until it is free,
  where Java would silently reopen the existing file.

``query_offset`` returns offsets in RocketMQ's ``IndexService`` order: newest file first, each
chain newest item first, duplicates kept. ``DefaultMessageStore.queryMessage`` then sorts them
ascending and reports ``index_last_update_*`` as 0 when nothing was found; that belongs to the
store facade, not here.

Thread-safety: one dispatch thread calls ``build_index``; queries and ``delete_expired_file`` may
run on other threads. The file list is replaced, never mutated, so readers iterate a stable list;
a lock serialises the writers.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import chain, compress, repeat
from operator import mul
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from rmqlab.codec.flags import KEY_SEPARATOR, TRANSACTION_ROLLBACK_TYPE, transaction_type
from rmqlab.codec.index_layout import INDEX_HEADER_SIZE, index_file_size, index_hash_of, index_key
from rmqlab.codec.java_hash import java_hash, java_hash_extend, java_hash_extend_many
from rmqlab.codec.names import index_file_name
from rmqlab.errors import MappedFileError, ReadOnlyStore, RmqlabError
from rmqlab.events import EventBus, IndexFileRolled
from rmqlab.faults import crash_point
from rmqlab.store.index_file import IndexFile

if TYPE_CHECKING:
    from rmqlab.clock import Clock
    from rmqlab.codec.walk import DispatchRequest
    from rmqlab.store.store_checkpoint import StoreCheckpoint

__all__ = ["IndexService", "LoadReportEntry", "QueryOffsetResult"]

MAX_TRY_IDX_CREATE = 3  # IndexService.MAX_TRY_IDX_CREATE
_RETRY_SLEEP_MS = 1000
_UNIQ_SUFFIX = 12  # UNIQ_KEY = fixed prefix + hex8(time in month) + hex4(counter)
_TX_MASK = 0xC
_INT_MIN = -(2**31)
_DESTROY_EXPIRED_INTERVAL_MS = 3000
_DESTROY_ALL_INTERVAL_MS = 3000
# Long.parseLong accepts an optional sign and ASCII digits only (Python's int() is laxer).
_JAVA_LONG = re.compile(r"[+-]?[0-9]+\Z")
# _build_one's hash caches: at most this many entries each, then cleared.
_HASH_CACHE_MAX = 4096
_MASK32 = 0xFFFFFFFF
_MOD32 = 1 << 32
_SIGN_BIT = 1 << 31
_INT_MAX = (1 << 31) - 1
# weights of a UNIQ_KEY's chars -12..-5 (the 8 time digits): 31**11 .. 31**4
_MID_WEIGHTS = tuple(pow(31, _UNIQ_SUFFIX - 1 - i, _MOD32) for i in range(_UNIQ_SUFFIX - 4))
_W_SUFFIX = pow(31, _UNIQ_SUFFIX, _MOD32)  # a prefix hash's weight before a 12-unit suffix


@dataclass(frozen=True)
class QueryOffsetResult:
    """``IndexService.queryOffset``'s answer: offsets newest first, and the newest file's end."""

    phy_offsets: list[int] = field(default_factory=list)
    index_last_update_timestamp: int = 0
    index_last_update_phyoffset: int = 0


class LoadReportEntry(NamedTuple):
    """A file ``load`` skipped or destroyed (or, read-only, kept but would destroy), and why."""

    file: str
    reason: str


class IndexService:
    """All index files of one store, oldest first; the last one takes new keys."""

    def __init__(
        self,
        store_path: str,
        *,
        hash_slot_num: int,
        index_num: int,
        checkpoint: StoreCheckpoint,
        clock: Clock,
        max_msgs_num_batch: int = 64,
        message_index_enable: bool = True,
        read_only: bool = False,
        bus: EventBus | None = None,
    ) -> None:
        self.store_path = store_path
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.checkpoint = checkpoint
        self.clock = clock
        self.max_msgs_num_batch = max_msgs_num_batch
        self.message_index_enable = message_index_enable
        self.read_only = read_only
        self._bus = bus
        self._files: list[IndexFile] = []  # replaced on change, never mutated in place
        # The offset of the last record this process indexed with every item. RocketMQ indexes
        # again the record at the last file's end_phy_offset (a crash may have cut it short); one
        # dispatched again after an interrupt (KeyboardInterrupt in a stepped store) is not when
        # it is complete (it would only get duplicate items). A new file inherits the end.
        self._complete = -1
        self._lock = threading.RLock()
        self.load_report: list[LoadReportEntry] = []
        self.load_error = ""  # why load() returned False: the file, and what was wrong with it
        self.index_file_error = False  # RunningFlags.makeIndexFileError after failed creation
        # hash caches of _build_one (dispatch thread only): "topic#UNIQ_KEY prefix" -> its Java
        # hash times 31**12 mod 2**32; topic -> KEYS string -> index hashes of its tokens
        self._uniq_prefix_hash: dict[str, int] = {}
        self._uniq_memo: tuple[str, int, str, int] = ("", -1, "", 0)
        self._keys_hash: dict[str, dict[str, tuple[int, ...]]] = {}
        self._keys_cached = 0

    # --- files ---------------------------------------------------------------------------------
    @property
    def index_files(self) -> list[IndexFile]:
        """The loaded files, oldest first (a copy)."""
        return list(self._files)

    def get_total_size(self) -> int:
        files = self._files
        return files[0].file_size * len(files) if files else 0

    def load(self, last_exit_ok: bool) -> bool:
        """Map every file of ``index/`` in name order (``IndexService.load``).

        After an abnormal exit a file whose ``end_timestamp`` is newer than the checkpoint's
        ``index_msg_timestamp`` (i.e. every file not yet full and flushed) is destroyed, to be
        rebuilt by recovery's re-dispatch (RocketMQ issues #3868/#8007). Read-only services keep
        such a file and only report it. Names ``Long.parseLong`` rejects are skipped.
        """
        try:
            names = sorted(os.listdir(self.store_path))
        except FileNotFoundError:
            return True
        loaded: list[IndexFile] = []
        for name in names:
            path = os.path.join(self.store_path, name)
            if not _JAVA_LONG.match(name):
                self.load_report.append(LoadReportEntry(path, "non_numeric_name"))
                continue
            if not os.path.isfile(path):
                self.load_report.append(LoadReportEntry(path, "not_a_file"))
                continue
            wrong = self._wrong_size(path)
            if wrong:
                self.load_report.append(LoadReportEntry(path, wrong))
                self.load_error = f"{path}: {wrong}"
                with self._lock:
                    self._files = self._files + loaded
                return False
            try:
                f = IndexFile(path, self.hash_slot_num, self.index_num,
                              read_only=self.read_only, bus=self._bus)
            except (OSError, MappedFileError) as e:
                # Java: an IOException aborts the load (files mapped so far stay loaded).
                self.load_report.append(LoadReportEntry(path, f"cannot map: {e}"))
                self.load_error = str(e) if path in str(e) else f"{path}: cannot map: {e}"
                with self._lock:
                    self._files = self._files + loaded
                return False
            if not last_exit_ok and f.end_timestamp > self.checkpoint.index_msg_timestamp:
                reason = (f"abnormal exit: end_timestamp {f.end_timestamp} > checkpoint "
                          f"index_msg_timestamp {self.checkpoint.index_msg_timestamp}")
                if self.read_only:
                    self.load_report.append(LoadReportEntry(path, reason + " (kept: read-only)"))
                else:
                    f.destroy(0, self.clock.now_ms())
                    self.load_report.append(LoadReportEntry(path, reason + "; destroyed"))
                    continue
            loaded.append(f)
        with self._lock:
            self._files = self._files + loaded
        return True

    def _wrong_size(self, path: str) -> str:
        """Why a file's length is not the configured layout's, or "". RocketMQ's IndexService
        maps every file at the configured size without looking: a shorter file grows, and a
        store written with another ``maxHashSlotNum`` is searched in the wrong slots (every key
        query answers nothing). rmqlab refuses to load it instead, saying which sizes fit."""
        size = os.path.getsize(path)
        expected = index_file_size(self.hash_slot_num, self.index_num)
        if size in (expected, 0):  # 0: killed between creating the file and sizing it, as Java can be
            return ""
        text = (f"{size:,} bytes, but max_hash_slot_num={self.hash_slot_num} and max_index_num={self.index_num} "
                f"make index files of {expected:,} bytes (RocketMQ would map it at that size unchecked")
        text += ", growing the file)" if size < expected else ")"
        fits = _index_sizes_for(size, self.hash_slot_num, self.index_num)
        if fits:
            text += "; a store written with other index sizes opens with " + " or ".join(
                f"MessageStoreConfig(max_hash_slot_num={slots}, max_index_num={num})" for slots, num in fits)
        elif size < expected:
            text += "; a damaged (cut) file: move it out of index/ to open the store (its keys will not be found)"
        else:
            text += (f"; bytes appended past its layout (damage): cut the file back to {expected:,} bytes, as RocketMQ "
                     "reads it, or move it out of index/, to open the store")
        return text

    def get_and_create_last_index_file(self) -> IndexFile:
        """The last file if it has room, else a new one that inherits the full file's end.

        The full file is then flushed and the checkpoint updated (see module docstring).
        """
        with self._lock:
            files = self._files
            prev = files[-1] if files else None
            if prev is not None and not prev.is_write_full():
                return prev
            if self.read_only:
                raise ReadOnlyStore(f"{self.store_path}: cannot create an index file read-only")
            end_phy = prev.end_phy_offset if prev is not None else 0
            end_ts = prev.end_timestamp if prev is not None else 0
            os.makedirs(self.store_path, exist_ok=True)
            path = self._free_file_name()
            try:
                new = IndexFile(path, self.hash_slot_num, self.index_num, end_phy, end_ts,
                                bus=self._bus)
                self._files = [*files, new]  # no interrupt can land between these two
            except BaseException:
                # cut short (a notebook's interrupt while the file was made): take the file
                # away, or it stays behind for good, a later roll taking a later time's name
                if self._files is files:
                    try:  # no call before the removal: a second interrupt lands after it
                        os.remove(path)
                    except OSError:
                        pass
                raise
        if prev is not None:
            crash_point("index_roll")
            self.flush_file(prev)
            bus = self._bus
            if bus is not None and bus.active:
                bus.publish(IndexFileRolled(prev.name, new.name))
        return new

    def retry_get_and_create_index_file(self) -> IndexFile | None:
        """Up to 3 attempts, 1 s (clock time) apart; on failure set ``index_file_error``."""
        for _ in range(MAX_TRY_IDX_CREATE):
            try:
                return self.get_and_create_last_index_file()
            except ReadOnlyStore:
                raise
            except (OSError, RmqlabError):
                self.clock.sleep_ms(_RETRY_SLEEP_MS)
        self.index_file_error = True
        return None

    def _free_file_name(self) -> str:
        ms = self.clock.now_ms()
        tz = self.clock.tz()
        taken = {f.name for f in self._files}
        while True:
            name = index_file_name(ms, tz)
            path = os.path.join(self.store_path, name)
            if name not in taken and not os.path.exists(path):
                return path
            ms += 1

    # --- build ---------------------------------------------------------------------------------
    def build_index(self, req: DispatchRequest) -> None:
        """Index one dispatched record (``CommitLogDispatcherBuildIndex`` + ``buildIndex``).

        Skips records below the last file's ``end_phy_offset`` (already indexed) and rolled-back
        transactions; indexes ``topic#UNIQ_KEY`` first, then ``topic#k`` for every non-empty
        token of ``KEYS.split(" ")`` (a key repeated in one message gets two items).
        """
        if self.message_index_enable:
            self._build_one(req.commit_log_offset, req.sys_flag, req.topic, req.store_timestamp, req.uniq_key,
                            req.keys)

    def _build_one(self, offset: int, sys_flag: int, topic: str, ts: int, uniq: str | None,
                   keys: str | None) -> None:
        """``build_index`` from the record's fields. The common case (the last file has room for
        every item of the record, nobody listens to index events, the record is neither below
        the file's end nor a rolled-back transaction) hashes the keys through bounded caches and
        writes the record's items with one :meth:`IndexFile.put_hashes`; anything else, and any
        record that might fill the file, takes :meth:`_build_one_exact`. Same bytes either way.
        """
        files = self._files
        if files:
            f = files[-1]
            bus = f._bus
            end = f._end_phy_offset
            if (
                (offset > end or (offset == end and self._complete != offset))
                and (sys_flag & _TX_MASK) != TRANSACTION_ROLLBACK_TYPE
                and (bus is None or not bus.active)
            ):
                hashes: list[int] = []
                if uniq is not None:
                    n = len(uniq)
                    if n > _UNIQ_SUFFIX and uniq.isascii():
                        # h("topic#" + uniq) = h("topic#" + all but the last 4 chars) * 31**4 + h(last 4),
                        # the first term kept from the last record (a producer's UNIQ_KEYs of the
                        # same millisecond share all but the 4 counter digits), else built from
                        # h("topic#" + all but the last 12) (bounded dict) and 8 more chars
                        m_topic, m_len, m_prefix, scaled = self._uniq_memo
                        if not (n == m_len and topic == m_topic and uniq.startswith(m_prefix)):
                            cut = n - _UNIQ_SUFFIX
                            prefix_key = f"{topic}#{uniq[:cut]}"
                            cached = self._uniq_prefix_hash.get(prefix_key)
                            if cached is None:
                                if len(self._uniq_prefix_hash) >= _HASH_CACHE_MAX:
                                    self._uniq_prefix_hash.clear()
                                cached = (java_hash(prefix_key) * _W_SUFFIX) & _MASK32
                                self._uniq_prefix_hash[prefix_key] = cached
                            scaled = (cached + sum(map(mul, uniq[cut : n - 4].encode(), _MID_WEIGHTS))) & _MASK32
                            self._uniq_memo = (topic, n, uniq[: n - 4], scaled)
                        b = uniq[n - 4 :].encode()
                        h = (scaled + b[0] * 29791 + b[1] * 961 + b[2] * 31 + b[3]) & _MASK32
                        # index_hash_of(signed h): abs, and 0 for Integer.MIN_VALUE
                        hashes.append(h if h < _SIGN_BIT else (_MOD32 - h) & _INT_MAX)
                    else:
                        cut = n - _UNIQ_SUFFIX if n > _UNIQ_SUFFIX else 0
                        hashes.append(index_hash_of(java_hash_extend(java_hash(f"{topic}#{uniq[:cut]}"), uniq[cut:])))
                if keys:
                    per_topic = self._keys_hash.get(topic)
                    if per_topic is None:
                        per_topic = self._keys_hash[topic] = {}
                    key_hashes = per_topic.get(keys)
                    if key_hashes is None:
                        if self._keys_cached >= _HASH_CACHE_MAX:
                            self._keys_hash.clear()
                            self._keys_cached = 0
                            per_topic = self._keys_hash[topic] = {}
                        topic_h = java_hash(f"{topic}#")
                        key_hashes = per_topic[keys] = tuple(
                            index_hash_of(java_hash_extend(topic_h, key)) for key in keys.split(KEY_SEPARATOR) if key
                        )
                        self._keys_cached += 1
                    hashes.extend(key_hashes)
                if f.index_num - f._index_count > len(hashes):  # room, and not full afterwards
                    f.put_hashes(hashes, offset, ts)
                    self._complete = offset
                    return
        self._build_one_exact(offset, sys_flag, topic, ts, uniq, keys)

    def _build_one_exact(self, offset: int, sys_flag: int, topic: str, ts: int, uniq: str | None,
                         keys: str | None) -> None:
        """The per-key path of ``build_index`` (rolls files, publishes index events)."""
        files = self._files
        if files and not files[-1].is_write_full():
            index_file: IndexFile | None = files[-1]  # the common case, without the lock
        else:
            index_file = self.retry_get_and_create_index_file()
        if index_file is None:
            return
        if offset < index_file.end_phy_offset or self._complete == offset == index_file.end_phy_offset:
            return
        if transaction_type(sys_flag) == TRANSACTION_ROLLBACK_TYPE:
            return
        # Hash ``topic#key`` incrementally: java_hash(prefix) is cached and extended by the
        # rest (java_hash_extend). UNIQ_KEYs are unique but share all but their last 12 chars
        # (time + counter), so their prefix includes the fixed part of the key.
        if uniq is not None:
            cut = len(uniq) - _UNIQ_SUFFIX if len(uniq) > _UNIQ_SUFFIX else 0
            h = java_hash_extend(java_hash(f"{topic}#{uniq[:cut]}"), uniq[cut:])
            index_file = self._put_key(index_file, index_key(topic, uniq), offset, ts, index_hash_of(h))
            if index_file is None:
                return
        if keys:
            topic_h = java_hash(f"{topic}#")
            for key in keys.split(KEY_SEPARATOR):
                if key:
                    h = index_hash_of(java_hash_extend(topic_h, key))
                    index_file = self._put_key(index_file, index_key(topic, key), offset, ts, h)
                    if index_file is None:
                        return
        self._complete = offset

    def build_index_batch(
        self,
        offsets: np.ndarray,
        store_timestamps: np.ndarray,
        sys_flags: np.ndarray,
        topics: Sequence[str],
        keys: Sequence[str | None],
        uniq_keys: Sequence[str | None],
        before_roll: Callable[[int], None] | None = None,
        items: tuple[np.ndarray, np.ndarray] | None = None,
        string_rows: np.ndarray | None = None,
    ) -> None:
        """``build_index`` for records ``0 .. n-1`` (offsets strictly increasing), in bulk.

        The files end byte-identical to one ``build_index`` per record: the same skips (offset
        below the last file's ``end_phy_offset`` when the batch starts -- later records are past
        every item written since -- and rolled-back transactions), the same items in the same
        order (``topic#UNIQ_KEY``, then every non-empty ``KEYS`` token), hashed together
        (:func:`java_hash_extend_many`) and written a file's worth at a time
        (:meth:`IndexFile.put_items`). A roll happens where the per-record code rolls: at the
        start of the record after the one that filled the file, or inside a record whose keys do
        not fit; ``before_roll(j)`` is called first with that record's number, so the caller can
        bring the consume queues up to record ``j`` (a roll flushes the checkpoint). If no file
        can be created the rest of that record is dropped and later records go one by one, as
        ``build_index`` would do. Publishes no events.

        ``items`` (record numbers ascending, key hashes in item order) are keys already hashed
        from the stored bytes for records whose ``keys``/``uniq_keys`` are None; the strings are
        then only read for ``string_rows``.
        """
        if not self.message_index_enable:
            return
        n = len(offsets)
        if n == 0:
            return
        files = self._files
        if files and not files[-1].is_write_full():
            f: IndexFile | None = files[-1]
        else:
            if before_roll is not None:
                before_roll(0)
            f = self.retry_get_and_create_index_file()
            if f is None:
                self._one_by_one(1, offsets, store_timestamps, sys_flags, topics, keys, uniq_keys, before_roll)
                return
        offs = np.asarray(offsets, dtype=np.int64)
        end = f.end_phy_offset
        after = offs > end if self._complete == end else offs >= end
        active = after & ((np.asarray(sys_flags) & _TX_MASK) != TRANSACTION_ROLLBACK_TYPE)
        act = np.flatnonzero(active)
        if items is not None:
            act = act[np.isin(act, string_rows)] if string_rows is not None else act
        item_keys, rec, lens = _items(act, keys, uniq_keys)
        key_hash = np.empty(0, dtype=np.int64)
        if item_keys:
            prefixes = {t: java_hash(f"{t}#") for t in set(topics)}
            topic_h = np.fromiter(map(prefixes.__getitem__, topics), dtype=np.int64, count=n)
            h = java_hash_extend_many(topic_h[rec], item_keys, lens)
            key_hash = np.where(h == _INT_MIN, 0, np.abs(h))
        if items is not None:
            keep = active[items[0]]
            rec = np.concatenate((items[0][keep], rec))
            key_hash = np.concatenate((items[1][keep], key_hash))
            order = np.argsort(rec, kind="stable")
            rec, key_hash = rec[order], key_hash[order]
        m = len(rec)
        if m == 0:
            return
        phy = offs[rec]
        ts = np.asarray(store_timestamps, dtype=np.int64)[rec]
        done = 0
        while True:
            k = f.put_items(key_hash[done:], phy[done:], ts[done:])
            done += k
            if k:
                last = int(rec[done - 1])
                mid_record = done < m and int(rec[done]) == last
                if not mid_record:
                    self._complete = int(phy[done - 1])
            if not f.is_write_full():
                return
            if k == 0:  # a fresh file that is already full (index_num < 2): the per-key path
                self._one_by_one(int(rec[done]), offsets, store_timestamps, sys_flags, topics, keys, uniq_keys,
                                 before_roll)
                return
            j = last if mid_record else last + 1
            if j >= n:
                return  # full after the last record: the next record rolls
            if before_roll is not None:
                before_roll(j)
            f = self.retry_get_and_create_index_file()
            if f is None:
                self._one_by_one(j + 1, offsets, store_timestamps, sys_flags, topics, keys, uniq_keys, before_roll)
                return
            if done >= m:
                return

    def _one_by_one(self, start: int, offsets: np.ndarray, store_timestamps: np.ndarray, sys_flags: np.ndarray,
                    topics: Sequence[str], keys: Sequence[str | None], uniq_keys: Sequence[str | None],
                    before_roll: Callable[[int], None] | None) -> None:
        """Records ``start..`` through the per-record code (after a failed file creation)."""
        n = len(offsets)
        if start >= n:
            return
        if before_roll is not None:
            before_roll(n - 1)
        for i in range(start, n):
            self._build_one(int(offsets[i]), int(sys_flags[i]), topics[i], int(store_timestamps[i]), uniq_keys[i],
                            keys[i])

    def _put_key(
        self, index_file: IndexFile, key: str, offset: int, ts: int, key_hash: int | None = None
    ) -> IndexFile | None:
        while not index_file.put_key(key, offset, ts, key_hash):
            new = self.retry_get_and_create_index_file()
            if new is None:
                return None
            index_file = new
        return index_file

    # --- query ---------------------------------------------------------------------------------
    def query_offset(
        self, topic: str, key: str, max_num: int, begin: int, end: int
    ) -> QueryOffsetResult:
        """Offsets of messages of ``topic`` carrying ``key`` with index time in ``[begin, end]``.

        ``max_num`` is capped at ``max_msgs_num_batch``. Files are searched newest first; the
        search stops after a file that begins before ``begin`` or once ``max_num`` offsets are
        found. The ``index_last_update_*`` values are the newest file's end, found or not.
        """
        max_num = min(max_num, self.max_msgs_num_batch)
        phy_offsets: list[int] = []
        last_ts = last_phy = 0
        files = self._files
        full_key = index_key(topic, key)
        for i in range(len(files) - 1, -1, -1):
            f = files[i]
            if i == len(files) - 1:
                last_ts = f.end_timestamp
                last_phy = f.end_phy_offset
            if f.is_time_matched(begin, end):
                f.select_phy_offset(phy_offsets, full_key, max_num, begin, end)
            if f.begin_timestamp < begin or len(phy_offsets) >= max_num:
                break
        return QueryOffsetResult(phy_offsets, last_ts, last_phy)

    # --- maintenance ---------------------------------------------------------------------------
    def flush_file(self, f: IndexFile) -> None:
        """``IndexService.flush(f)``: force ``f``; if full, put its end time in the checkpoint."""
        index_msg_timestamp = f.end_timestamp if f.is_write_full() else 0
        f.flush()
        if index_msg_timestamp > 0 and not self.read_only:
            self.checkpoint.index_msg_timestamp = index_msg_timestamp
            self.checkpoint.flush()

    def flush(self) -> None:
        """Flush every file (rmqlab; Java only has ``flush(f)``, called at roll).

        If the newest full file ends after the checkpoint's ``index_msg_timestamp``, that value
        is raised to it and the checkpoint flushed, as ``flush(f)`` would have done.
        """
        if self.read_only:
            return
        newest_full = 0
        for f in self._files:
            if f.is_write_full():
                newest_full = max(newest_full, f.end_timestamp)
            f.flush()
        if newest_full > self.checkpoint.index_msg_timestamp:
            self.checkpoint.index_msg_timestamp = newest_full
            self.checkpoint.flush()

    def delete_expired_file(self, min_offset: int) -> int:
        """Delete leading files whose ``end_phy_offset < min_offset`` (never the last one).

        Returns how many files were deleted; stops at the first file that cannot be destroyed
        yet (a reader holds it) and leaves it for the next call, as RocketMQ does.
        """
        files = self._files
        if not files or files[0].end_phy_offset >= min_offset:
            return 0
        doomed: list[IndexFile] = []
        for f in files[:-1]:
            if f.end_phy_offset >= min_offset:
                break
            doomed.append(f)
        deleted = 0
        with self._lock:
            for f in doomed:
                if not f.destroy(_DESTROY_EXPIRED_INTERVAL_MS, self.clock.now_ms()):
                    break
                self._files = [x for x in self._files if x is not f]
                deleted += 1
        return deleted

    def destroy(self) -> None:
        """Delete every index file (``IndexService.destroy``)."""
        with self._lock:
            for f in self._files:
                f.destroy(_DESTROY_ALL_INTERVAL_MS, self.clock.now_ms())
            self._files = []

    def shutdown(self) -> None:
        """Flush and unmap every file (5.x; 4.9.8's empty ``shutdown`` leaves the same bytes)."""
        with self._lock:
            for f in self._files:
                f.shutdown()
            self._files = []


def _index_sizes_for(size: int, hash_slot_num: int, index_num: int) -> list[tuple[int, int]]:
    """(max_hash_slot_num, max_index_num) pairs an index file of ``size`` bytes fits: RocketMQ's
    defaults, or one of the two configured values kept and the other solved for."""
    fits = []
    if size == index_file_size(5_000_000, 20_000_000):
        fits.append((5_000_000, 20_000_000))
    room = size - INDEX_HEADER_SIZE
    if room > hash_slot_num * 4 and (room - hash_slot_num * 4) % 20 == 0:
        fits.append((hash_slot_num, (room - hash_slot_num * 4) // 20))
    if room > index_num * 20 and (room - index_num * 20) % 4 == 0:
        fits.append(((room - index_num * 20) // 4, index_num))
    return list(dict.fromkeys(fits))


def _items(act: np.ndarray, keys: Sequence[str | None],
           uniq_keys: Sequence[str | None]) -> tuple[list[str], np.ndarray, np.ndarray | None]:
    """The index keys of records ``act`` in ``build_index`` order (UNIQ_KEY if not None, then every
    non-empty ``KEYS.split(" ")`` token), the record number of each and, when at hand, their
    lengths (int64, for ``java_hash_extend_many``; else None).

    Usually one ``" ".join(...).split(" ")`` over all records (None as "", whose empty token is
    dropped like an empty KEYS token); a UNIQ_KEY that is "" or holds a space takes the loop.
    """
    if len(act) == len(keys):
        us, ks = list(uniq_keys), list(keys)
    else:
        sel = act.tolist()
        us = [uniq_keys[i] for i in sel]
        ks = [keys[i] for i in sel]
    if "" not in us:
        if None in us:
            us = [u or "" for u in us]
        joined_u = KEY_SEPARATOR.join(us)
        if joined_u.count(KEY_SEPARATOR) == len(us) - 1:
            if None in ks:
                ks = [k or "" for k in ks]
            tokens = KEY_SEPARATOR.join(chain.from_iterable(zip(us, ks, strict=True))).split(KEY_SEPARATOR)
            counts = np.fromiter(map(str.count, ks, repeat(KEY_SEPARATOR)), dtype=np.int64, count=len(ks)) + 2
            rec = np.repeat(act.astype(np.int64), counts)
            lens = np.fromiter(map(len, tokens), dtype=np.int64, count=len(tokens))
            keep = lens > 0
            if not keep.all():
                tokens = list(compress(tokens, keep.tolist()))
                rec, lens = rec[keep], lens[keep]
            return tokens, rec, lens
    item_keys: list[str] = []
    item_rec: list[int] = []
    for i in act.tolist():
        u = uniq_keys[i]
        if u is not None:
            item_keys.append(u)
            item_rec.append(i)
        k = keys[i]
        if k:
            for t in k.split(KEY_SEPARATOR):
                if t:
                    item_keys.append(t)
                    item_rec.append(i)
    return item_keys, np.asarray(item_rec, dtype=np.int64), None
