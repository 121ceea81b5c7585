"""IndexFile: one hash-indexed file of ``index/`` — put a key, walk a slot's chain (spec §4.1-4.4).

Layout (``rmqlab.codec.index_layout``; sizes for ``hash_slot_num`` slots and ``index_num`` items)::

    0                 40                      40 + 4*slots             + 20*n
    | header (40 B)   | slot table (4 B each) | item 0 (unused) | item 1 | ... | item index_num-1 |
      begin/end ts,     newest item number      key_hash  >i4
      begin/end phy,    of the slot, 0 = empty  phy       >i8
      slot count,                               time_diff >i4   seconds after begin_timestamp
      index count                               prev      >i4   older item of the same slot, 0 = end

Each slot heads a LIFO chain: ``slot -> newest item -> prev -> ... -> oldest``. Keys that share a
slot share a chain; keys with the same hash are told apart by nobody (RocketMQ's callers re-check
the decoded message's keys), so a query returns every item whose ``key_hash`` and reconstructed
time (``begin_timestamp + time_diff * 1000``) match.

The header lives in memory as plain ints and is written through to the mapped buffer on every
change (one 40-byte ``pack_into``); ``flush()`` rewrites it and forces the mapping.

Thread-safety: like RocketMQ, one writer (the dispatch thread) and any number of readers without
a lock; a reader holds the mapped file (``hold``/``release``) so it cannot be unmapped under it.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from rmqlab.codec.index_layout import (
    HASH_SLOT_SIZE,
    INDEX_HEADER_SIZE,
    INDEX_ITEM_DTYPE,
    INDEX_SIZE,
    INVALID_INDEX,
    IndexHeader,
    index_file_size,
    index_key_hash,
)
from rmqlab.errors import ReadOnlyStore
from rmqlab.events import EventBus, IndexPut
from rmqlab.files.mapped_file import RESERVE_AHEAD, MappedFile

__all__ = ["LONG_MAX", "ChainStep", "IndexFile"]

LONG_MAX = 2**63 - 1  # Java Long.MAX_VALUE, the usual "no end" of a query window
_INT_MAX = 2**31 - 1

# Precompiled formats for the put path (2-3 calls per message at >100k msgs/s).
_HEADER = struct.Struct(">qqqqii")  # begin_ts, end_ts, begin_phy, end_phy, slot_count, index_count
_ITEM = struct.Struct(">iqii")  # key_hash, phy_offset, time_diff, prev_index
_INT = struct.Struct(">i")
assert _HEADER.size == INDEX_HEADER_SIZE
assert _ITEM.size == INDEX_SIZE
assert _INT.size == HASH_SLOT_SIZE

_SLOT_SHIFT = 12
_SLOT_PAGE = 1 << _SLOT_SHIFT  # the unit IndexFile tracks hash-slot pages in (made writable once)


@dataclass(frozen=True, slots=True)
class ChainStep:
    """One item visited while walking a slot's chain (newest first).

    ``time`` is the reconstructed store time ``begin_timestamp + time_diff * 1000`` that queries
    compare against; ``stop`` is empty unless the walk ends after this item, then it names the
    rule: ``end_of_chain`` (prev = 0), ``prev_out_of_range``, ``self_loop``, ``before_begin``, or
    ``cycle`` (prev is an item already visited: a damaged file; RocketMQ's walk would go round it).
    """

    item: int
    key_hash: int
    phy_offset: int
    time_diff: int
    prev_index: int
    hash_matches: bool
    time_in_window: bool
    time: int
    stop: str = ""



def _time_diff(store_timestamp: int, begin_timestamp: int) -> int:
    """An item's seconds since the file's begin timestamp, as ``IndexFile.putKey`` stores them:
    0 while the file has no begin time; Java long division truncates toward zero and negatives
    clamp to 0 either way; capped at Integer.MAX_VALUE."""
    if begin_timestamp <= 0:
        return 0
    diff = (store_timestamp - begin_timestamp) // 1000
    return _INT_MAX if diff > _INT_MAX else 0 if diff < 0 else diff

class IndexFile:
    """One index file: ``put_key`` appends an item, ``select_phy_offset`` walks a chain.

    ``end_phy_offset``/``end_timestamp`` seed a *new* file's header (begin = end = those values,
    each only if > 0), which is how a rolled file inherits the previous file's end; an existing
    file's header is read from disk instead (``index_count <= 0`` reads as 1).
    """

    def __init__(
        self,
        file_name: str,
        hash_slot_num: int,
        index_num: int,
        end_phy_offset: int = 0,
        end_timestamp: int = 0,
        *,
        read_only: bool = False,
        bus: EventBus | None = None,
    ) -> None:
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.read_only = read_only
        self._bus = bus
        existed = os.path.exists(file_name)
        self._mapped = MappedFile(
            file_name,
            index_file_size(hash_slot_num, index_num),
            read_only=read_only,
            bus=bus,
            queue_name="index",
        )
        self._buf = self._mapped.buffer
        self._item_base = INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE
        self._begin_timestamp = 0
        self._end_timestamp = 0
        self._begin_phy_offset = 0
        self._end_phy_offset = 0
        self._hash_slot_count = 0
        self._index_count = 1
        # pages of the header and hash slots made writable (1), and items below _room_items
        # (see _room: the file is sparse, and a page is made writable before it is written)
        self._slot_ready = bytearray((self._item_base + _SLOT_PAGE - 1) // _SLOT_PAGE)
        self._room_items = 0
        if existed:
            self.load()
        elif not read_only:
            self._room(1)  # the header is written now: DiskFull rather than SIGBUS
            # Java's IndexHeader setters write through, so these land in the buffer at once;
            # bytes 32..39 (counts) stay zero until the first put or flush.
            if end_phy_offset > 0:
                self._begin_phy_offset = self._end_phy_offset = end_phy_offset
            if end_timestamp > 0:
                self._begin_timestamp = self._end_timestamp = end_timestamp
            struct.pack_into(
                ">qqqq", self._buf, 0, self._begin_timestamp, self._end_timestamp,
                self._begin_phy_offset, self._end_phy_offset,
            )

    # --- identity ------------------------------------------------------------------------------
    @property
    def file_name(self) -> str:
        """Full path of the file (RocketMQ's ``getFileName``)."""
        return self._mapped.file_name

    @property
    def name(self) -> str:
        """The 17-digit base name."""
        return os.path.basename(self._mapped.file_name)

    @property
    def file_size(self) -> int:
        return self._mapped.file_size

    @property
    def mapped_file(self) -> MappedFile:
        return self._mapped

    # --- header --------------------------------------------------------------------------------
    def load(self) -> None:
        """Read the header from the buffer (``IndexHeader.load``): ``index_count <= 0`` -> 1."""
        raw = bytes(self._buf[:INDEX_HEADER_SIZE]).ljust(INDEX_HEADER_SIZE, b"\0")
        hdr = IndexHeader.unpack(raw)
        self._begin_timestamp = hdr.begin_timestamp
        self._end_timestamp = hdr.end_timestamp
        self._begin_phy_offset = hdr.begin_phy_offset
        self._end_phy_offset = hdr.end_phy_offset
        self._hash_slot_count = hdr.hash_slot_count
        self._index_count = hdr.index_count if hdr.index_count > 0 else 1

    @property
    def header(self) -> IndexHeader:
        """The in-memory header as an immutable codec value."""
        return IndexHeader(
            self._begin_timestamp,
            self._end_timestamp,
            self._begin_phy_offset,
            self._end_phy_offset,
            self._hash_slot_count,
            self._index_count,
        )

    @property
    def begin_timestamp(self) -> int:
        return self._begin_timestamp

    @property
    def end_timestamp(self) -> int:
        return self._end_timestamp

    @property
    def begin_phy_offset(self) -> int:
        return self._begin_phy_offset

    @property
    def end_phy_offset(self) -> int:
        return self._end_phy_offset

    @property
    def hash_slot_count(self) -> int:
        return self._hash_slot_count

    @property
    def index_count(self) -> int:
        """Next free item number; starts at 1, so the file holds ``index_count - 1`` items."""
        return self._index_count

    def is_write_full(self) -> bool:
        return self._index_count >= self.index_num

    def is_time_matched(self, begin: int, end: int) -> bool:
        """Whether ``[begin, end]`` overlaps or covers ``[begin_timestamp, end_timestamp]``."""
        b, e = self._begin_timestamp, self._end_timestamp
        return (begin < b and end > e) or b <= begin <= e or b <= end <= e

    # --- put -----------------------------------------------------------------------------------
    def _room(self, items: int) -> None:
        """Make the header's page and the items below number ``items`` (and ``RESERVE_AHEAD``
        bytes more) writable before a put writes there, or raise
        :class:`~rmqlab.errors.DiskFull` with nothing written: the file is sparse, and a write
        to a page the file system has no block for kills the process (SIGBUS; see
        ``MappedFile.reserve``). Hash slots are written at random: :meth:`_slot_pages` makes
        each of their pages writable the first time a slot there is written."""
        if not self._slot_ready[0]:
            self._slot_pages((0,))
        start = self._item_base + self._index_count * INDEX_SIZE
        stop = self._item_base + items * INDEX_SIZE + min(RESERVE_AHEAD, self._mapped.file_size >> 7)
        if self._mapped.populate(start, stop):
            self._room_items = max(self._room_items, min((stop - self._item_base) // INDEX_SIZE, self.index_num))

    def _slot_pages(self, pages: Iterable[int]) -> None:
        """Make these pages (numbers, ascending) of the header and hash slots writable, each run
        of adjacent pages in one call (see :meth:`_room`); DiskFull if the disk has no room."""
        ready, populate, size = self._slot_ready, self._mapped.populate, _SLOT_PAGE
        run: list[int] = []
        for page in [*pages, -2]:
            if run and page != run[-1] + 1:
                if populate(run[0] * size, (run[-1] + 1) * size):
                    ready[run[0] : run[-1] + 1] = b"\1" * len(run)
                run = []
            if page >= 0 and not ready[page]:
                run.append(page)

    def put_key(
        self, key: str, phy_offset: int, store_timestamp: int, key_hash: int | None = None
    ) -> bool:
        """Append ``key`` (already ``topic#key``) -> ``phy_offset``; False when the file is full.

        ``key_hash`` is ``index_key_hash(key)`` when the caller already has it (the dispatch path
        computes it incrementally, see ``IndexService.build_index``).

        Exactly RocketMQ's ``IndexFile.putKey``, including its quirk: the first item's
        ``time_diff`` is computed *before* ``begin_timestamp`` is set from it, i.e. against the
        begin time inherited from the previous file (0 for the very first file -> diff 0).
        """
        # Straight-line on purpose: this runs 2-3 times per message on the dispatch path.
        count = self._index_count
        if count >= self.index_num:
            return False
        if self.read_only:
            raise ReadOnlyStore(f"{self._mapped.file_name}: index file opened read-only")
        if count >= self._room_items:
            self._room(count + 1)
        buf = self._buf
        if key_hash is None:
            key_hash = index_key_hash(key)
        slot = key_hash % self.hash_slot_num
        slot_pos = INDEX_HEADER_SIZE + slot * HASH_SLOT_SIZE
        if not self._slot_ready[slot_pos >> _SLOT_SHIFT]:
            self._slot_pages((slot_pos >> _SLOT_SHIFT,))
        slot_value = _INT.unpack_from(buf, slot_pos)[0]
        if slot_value <= INVALID_INDEX or slot_value > count:
            slot_value = INVALID_INDEX
        _ITEM.pack_into(buf, self._item_base + count * INDEX_SIZE,
                        key_hash, phy_offset, _time_diff(store_timestamp, self._begin_timestamp), slot_value)
        self._index_count = count + 1  # before the slot names the item: see put_items
        if count <= 1:
            self._begin_phy_offset = phy_offset
            self._begin_timestamp = store_timestamp
        _INT.pack_into(buf, slot_pos, count)
        if slot_value == INVALID_INDEX:
            self._hash_slot_count += 1
        self._end_phy_offset = phy_offset
        self._end_timestamp = store_timestamp
        _HEADER.pack_into(
            buf, 0, self._begin_timestamp, store_timestamp, self._begin_phy_offset,
            phy_offset, self._hash_slot_count, count + 1,
        )
        bus = self._bus
        if bus is not None and bus.active:
            bus.publish(IndexPut(self.name, key, slot, count, slot_value, phy_offset))
        return True

    def put_hashes(self, key_hashes: Sequence[int], phy_offset: int, store_timestamp: int) -> int:
        """:meth:`put_key` for each of ``key_hashes`` (``index_key_hash`` values) in order, all for
        the record at ``phy_offset``, until the file is full; returns how many were written.

        Byte for byte what the same :meth:`put_key` calls leave, the header written once at the
        end. Publishes no events (callers use ``put_key`` when the bus has subscribers). One call
        per record on the reput path of small rounds.
        """
        count = self._index_count
        index_num = self.index_num
        if count >= index_num or not key_hashes:
            return 0
        if self.read_only:
            raise ReadOnlyStore(f"{self._mapped.file_name}: index file opened read-only")
        if count + len(key_hashes) > self._room_items:
            self._room(min(count + len(key_hashes), index_num))
        buf = self._buf
        slots = self.hash_slot_num
        ready = self._slot_ready  # every slot page first: a record's keys go in whole or not at all
        pages = [(INDEX_HEADER_SIZE + h % slots * HASH_SLOT_SIZE) >> _SLOT_SHIFT for h in key_hashes]
        if not all(map(ready.__getitem__, pages)):
            self._slot_pages(sorted(set(pages)))
        item_pos = self._item_base + count * INDEX_SIZE
        unpack_slot, pack_slot, pack_item = _INT.unpack_from, _INT.pack_into, _ITEM.pack_into
        begin = self._begin_timestamp
        time_diff = _time_diff(store_timestamp, begin)  # one record: changes only with begin
        used = self._hash_slot_count
        start = count
        for key_hash in key_hashes:
            if count >= index_num:
                break
            slot_pos = INDEX_HEADER_SIZE + key_hash % slots * HASH_SLOT_SIZE
            slot_value = unpack_slot(buf, slot_pos)[0]
            if slot_value <= INVALID_INDEX or slot_value > count:
                slot_value = INVALID_INDEX
                used += 1
            pack_item(buf, item_pos, key_hash, phy_offset, time_diff, slot_value)
            self._index_count = count + 1  # before the slot names the item: see put_items
            if count <= 1:
                self._begin_phy_offset = phy_offset
                self._begin_timestamp = begin = store_timestamp
                time_diff = _time_diff(store_timestamp, begin)
            pack_slot(buf, slot_pos, count)
            count += 1
            item_pos += INDEX_SIZE
        self._hash_slot_count = used
        self._end_phy_offset = phy_offset
        self._end_timestamp = store_timestamp
        _HEADER.pack_into(buf, 0, self._begin_timestamp, store_timestamp, self._begin_phy_offset,
                          phy_offset, used, count)
        return count - start

    def put_items(self, key_hashes: np.ndarray, phy_offsets: np.ndarray, store_timestamps: np.ndarray) -> int:
        """Append up to ``index_num - index_count`` items at once; returns how many were written.

        Byte for byte what the same number of :meth:`put_key` calls leaves (``key_hashes`` are
        ``index_key_hash`` values, int64): items numbered ``index_count, index_count + 1, ...``;
        each item's ``prev`` is the previous item of the batch in its slot, else the slot's
        stored value if ``0 < value <= item number`` (else 0, which counts a new used slot);
        each slot ends up holding its last item; the begin fields are set by item 1 only, after
        its own ``time_diff`` was taken against the inherited begin time. Publishes no events
        (callers use the per-key path when the bus has subscribers).
        """
        count = self._index_count
        k = min(len(key_hashes), self.index_num - count)
        if k <= 0:
            return 0
        if self.read_only:
            raise ReadOnlyStore(f"{self._mapped.file_name}: index file opened read-only")
        if count + k > self._room_items:
            self._room(count + k)
        kh = np.asarray(key_hashes[:k], dtype=np.int64)
        phy = np.asarray(phy_offsets[:k], dtype=np.int64)
        ts = np.asarray(store_timestamps[:k], dtype=np.int64)
        num = np.arange(count, count + k, dtype=np.int64)
        slots = kh % self.hash_slot_num
        pages = np.unique((INDEX_HEADER_SIZE + slots * HASH_SLOT_SIZE) >> _SLOT_SHIFT)
        if not np.frombuffer(self._slot_ready, dtype=np.uint8)[pages].all():
            self._slot_pages(pages.tolist())
        order = np.argsort(slots, kind="stable")
        s_sorted = slots[order]
        first = np.empty(k, dtype=bool)
        first[0] = True
        np.not_equal(s_sorted[1:], s_sorted[:-1], out=first[1:])
        last = np.empty(k, dtype=bool)
        last[-1] = True
        last[:-1] = first[1:]
        begin = self._begin_timestamp
        new_begin_ts = int(ts[0]) if count <= 1 else begin
        buf = self._buf
        table = np.frombuffer(buf, dtype=">i4", count=self.hash_slot_num, offset=INDEX_HEADER_SIZE)
        items = np.frombuffer(buf, dtype=INDEX_ITEM_DTYPE, count=k, offset=self._item_base + count * INDEX_SIZE)
        try:
            prev_sorted = np.empty(k, dtype=np.int64)
            prev_sorted[1:] = num[order[:-1]]
            fs = s_sorted[first]
            stored = table[fs].astype(np.int64)
            n_first = num[order[first]]
            valid = (stored > INVALID_INDEX) & (stored <= n_first)
            prev_sorted[first] = np.where(valid, stored, INVALID_INDEX)
            prev = np.empty(k, dtype=np.int64)
            prev[order] = prev_sorted
            # time_diff: item 1 of a file against the inherited begin, the rest against the new one
            begins = np.full(k, new_begin_ts, dtype=np.int64)
            if count <= 1:
                begins[0] = begin
            diff = np.clip((ts - begins) // 1000, 0, _INT_MAX)
            diff[begins <= 0] = 0
            block = np.empty(k, dtype=INDEX_ITEM_DTYPE)
            block["key_hash"] = kh
            block["phy_offset"] = phy
            block["time_diff"] = diff
            block["prev_index"] = prev
            heads, head_items = s_sorted[last], num[order[last]]
            new_slots = int(len(valid) - np.count_nonzero(valid))
            # The order makes an interrupt (KeyboardInterrupt lands between any two statements)
            # harmless: items first; then the count, so their numbers are never handed out
            # again; only then the slots that name them. A slot naming items past the count
            # would have the next put overwrite them and point them at themselves: every older
            # item of those chains lost to queries. Interrupted after the count, the items are
            # unreachable and their records indexed again (the end offset is not moved yet).
            items[:] = block
            self._index_count = count + k
            if count <= 1:
                self._begin_phy_offset = int(phy[0])
                self._begin_timestamp = new_begin_ts
            table[heads] = head_items
        finally:
            del table, items
        self._end_phy_offset = int(phy[-1])
        self._hash_slot_count += new_slots
        self._end_timestamp = int(ts[-1])
        _HEADER.pack_into(buf, 0, *self.header_values())
        return k

    # --- query ---------------------------------------------------------------------------------
    def select_phy_offset(
        self, phy_offsets: list[int], key: str, max_num: int, begin: int, end: int
    ) -> None:
        """Append the offsets of ``key``'s items with time in ``[begin, end]``, newest first.

        Stops when ``phy_offsets`` holds ``max_num`` entries, at the end of the chain, at a
        ``prev`` outside ``1..index_count`` or equal to the current item, or after the first item
        whose reconstructed time is before ``begin`` (RocketMQ's ``selectPhyOffset``).
        """
        if not self._mapped.hold():
            return
        try:
            key_hash = index_key_hash(key)
            buf = self._buf
            count = self._index_count
            slot_pos = INDEX_HEADER_SIZE + (key_hash % self.hash_slot_num) * HASH_SLOT_SIZE
            n = _INT.unpack_from(buf, slot_pos)[0]
            if n <= INVALID_INDEX or n > count or count <= 1:
                return
            item_base = self._item_base
            begin_ts = self._begin_timestamp
            limit = len(buf) - INDEX_SIZE
            # A sound chain only goes back (prev < n). Past a step forward (a damaged file) the
            # items are remembered: back at one, RocketMQ's loop would go round the cycle for
            # ever, appending its matches until max_num; that is answered at once (and a cycle
            # without matches, where Java would spin, ends the walk).
            seen: dict[int, int] | None = None
            took: list[int | None] = []
            while len(phy_offsets) < max_num:
                if seen is not None:
                    first = seen.get(n)
                    if first is not None:
                        lap = [o for o in took[first:] if o is not None]
                        while lap and len(phy_offsets) < max_num:
                            phy_offsets.extend(lap[: max_num - len(phy_offsets)])
                        break
                    seen[n] = len(took)
                pos = item_base + n * INDEX_SIZE
                if pos > limit:  # a short read-only file: Java's getInt would throw and log
                    break
                h, phy, diff, prev = _ITEM.unpack_from(buf, pos)
                if diff < 0:
                    break
                t = begin_ts + diff * 1000
                hit = h == key_hash and begin <= t <= end
                if hit:
                    phy_offsets.append(phy)
                if seen is not None:
                    took.append(phy if hit else None)
                if prev <= INVALID_INDEX or prev > count or prev == n or t < begin:
                    break
                if prev > n and seen is None:
                    seen = {}
                n = prev
        finally:
            self._mapped.release()

    def walk_chain(self, key: str, begin: int = 0, end: int = LONG_MAX) -> list[ChainStep]:
        """Every item the chain walk for ``key`` visits, with why it matched and where it stops.

        Same stop rules as :meth:`select_phy_offset` without the ``max_num`` cap; an item with a
        negative ``time_diff`` ends the walk before it is reported (as in RocketMQ).
        """
        steps: list[ChainStep] = []
        if not self._mapped.hold():
            return steps
        try:
            self._walk(key, begin, end, steps)
        finally:
            self._mapped.release()
        return steps

    def _walk(self, key: str, begin: int, end: int, steps: list[ChainStep]) -> None:
        key_hash = index_key_hash(key)
        buf = self._buf
        count = self._index_count
        slot_pos = INDEX_HEADER_SIZE + (key_hash % self.hash_slot_num) * HASH_SLOT_SIZE
        n = _INT.unpack_from(buf, slot_pos)[0]
        if n <= INVALID_INDEX or n > count or count <= 1:
            return
        limit = len(buf) - INDEX_SIZE
        visited: set[int] = set()
        while True:
            pos = self._item_base + n * INDEX_SIZE
            if pos > limit:
                break
            visited.add(n)
            h, phy, diff, prev = _ITEM.unpack_from(buf, pos)
            if diff < 0:
                break
            t = self._begin_timestamp + diff * 1000
            stop = _stop_reason(n, prev, count, t, begin) or ("cycle" if prev in visited else "")
            matches = h == key_hash
            steps.append(ChainStep(n, h, phy, diff, prev, matches, begin <= t <= end, t, stop))
            if stop:
                break
            n = prev

    def read_item(self, n: int) -> tuple[int, int, int, int]:
        """Item ``n`` as ``(key_hash, phy_offset, time_diff, prev_index)``."""
        return _ITEM.unpack_from(self._buf, self._item_base + n * INDEX_SIZE)  # type: ignore[return-value]

    def read_slot(self, slot: int) -> int:
        """The item number stored in ``slot`` (0 = empty)."""
        return _INT.unpack_from(self._buf, INDEX_HEADER_SIZE + slot * HASH_SLOT_SIZE)[0]

    # --- lifecycle -----------------------------------------------------------------------------
    def flush(self) -> None:
        """Rewrite the header into the buffer and force the mapping (``IndexFile.flush``)."""
        if self.read_only or not self._mapped.hold():
            return
        try:
            _HEADER.pack_into(self._buf, 0, *self.header_values())
            self._mapped.force()
        finally:
            self._mapped.release()

    def cut_end_phy_offset(self, phy_offset: int) -> None:
        """Lower ``end_phy_offset`` to where recovery cut the CommitLog (rmqlab, not RocketMQ).

        The end is what dispatch compares a record's offset with to skip records already
        indexed; left past the log's end, every message written up to it would be skipped."""
        self._end_phy_offset = phy_offset
        if not self.read_only:
            _HEADER.pack_into(self._buf, 0, *self.header_values())

    def header_values(self) -> tuple[int, int, int, int, int, int]:
        return (
            self._begin_timestamp, self._end_timestamp, self._begin_phy_offset,
            self._end_phy_offset, self._hash_slot_count, self._index_count,
        )

    def destroy(self, interval_ms: int, now_ms: int | None = None) -> bool:
        """Unmap and delete (``MappedFile.destroy``); True only once the file is gone.

        ``now_ms`` (default: the system clock) times the forced destroy of a file readers hold.
        """
        return self._mapped.destroy(interval_ms, now_ms)

    def shutdown(self) -> None:
        """5.x ``IndexFile.shutdown``: flush, then unmap."""
        self.flush()
        self._mapped.close()

    def __repr__(self) -> str:
        return (
            f"IndexFile({self.name}, items={self._index_count - 1}/{self.index_num - 1}, "
            f"ts=[{self._begin_timestamp}, {self._end_timestamp}], "
            f"phy=[{self._begin_phy_offset}, {self._end_phy_offset}])"
        )


def _stop_reason(n: int, prev: int, count: int, t: int, begin: int) -> str:
    if prev <= INVALID_INDEX:
        return "end_of_chain"
    if prev > count:
        return "prev_out_of_range"
    if prev == n:
        return "self_loop"
    if t < begin:
        return "before_begin"
    return ""
