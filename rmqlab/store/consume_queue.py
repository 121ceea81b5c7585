"""ConsumeQueue: one topic/queue's index of 20-byte units pointing into the CommitLog (spec §3).

Layout (spec §3.1, bytes in ``rmqlab.codec.consume_queue_unit``)::

    queue offset q  <->  logical byte offset q*20  <->  file F = q*20 - (q*20) % fileSize,
                                                        position (q*20) % fileSize
    unit = commitLogOffset (>i8) | size (>i4, the whole record's TOTALSIZE) | tagsCode (>i8)

Files live in ``<consumequeue root>/<topic>/<queueId>/`` and are named by the logical byte offset
of their first unit. An all-zero unit (``offset=0, size=0``) marks the end of data; pre-blank
units ``(0, 0x7FFFFFFF, 0)`` fill the head of a queue whose first unit lands past offset 0.

Units of measure, used consistently below: *index* / *queue offset* = entries; *logic offset* =
bytes (index * 20); *phy* / *commit log offset* = bytes in the CommitLog.

Where 4.9.8 and 5.3.3 differ (``correct_min_offset``, ``get_offset_in_queue_by_time``) both
algorithms are here, chosen by ``rocketmq_version``; everything else is identical in both.

Thread-safety: like RocketMQ's, one thread appends (the dispatcher) while others read; readers
hold the mapped file through ``SelectMappedBufferResult``. Recovery, truncation and deletion are
not safe against concurrent appends (RocketMQ runs them before the dispatcher starts, or from
the single clean-up thread).
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import chain
from typing import TYPE_CHECKING, Any

import numpy as np

from rmqlab.codec.consume_queue_ext_unit import CqExtUnit, decorate
from rmqlab.codec.consume_queue_unit import (
    CQ_STORE_UNIT_SIZE,
    CQ_UNIT_DTYPE,
    MAX_ADDR,
    PRE_BLANK_UNIT,
    first_in_chunks,
    is_ext_addr,
    pack_unit,
    units_view,
    unpack_unit,
    valid_prefix,
)
from rmqlab.codec.names import validate_topic
from rmqlab.errors import ConfigError, CorruptRecord, ReadOnlyStore
from rmqlab.events import EventBus, RecoveryStep
from rmqlab.files.mapped_file_queue import MappedFileQueue
from rmqlab.store.consume_queue_ext import ConsumeQueueExt

if TYPE_CHECKING:
    from rmqlab.files.mapped_file import MappedFile, SelectMappedBufferResult
    from rmqlab.store.message_filter import MessageFilter

__all__ = [
    "CQ_STORE_UNIT_SIZE",
    "LOWER",
    "UPPER",
    "ConsumeQueue",
    "OrderWarning",
    "PickupStoreTimestamp",
    "estimate_over_files",
    "truncation_point",
    "unit_past_log_note",
]

log = logging.getLogger(__name__)

_UNIT = CQ_STORE_UNIT_SIZE
_UNIT_STRUCT = struct.Struct(">qiq")  # one unit: commit log offset, size, tags code
_TOPIC_DIR_MAX = 255
LOWER = "LOWER"  # BoundaryType.LOWER: the first offset whose store time is >= the timestamp
UPPER = "UPPER"  # BoundaryType.UPPER: the last offset whose store time is <= the timestamp

#: ``pickup_store_timestamp(commit_log_offset, size)`` -> the record's store timestamp in ms, or
#: -1 when the record is not (or no longer) in the CommitLog (``CommitLog.pickupStoreTimestamp``).
PickupStoreTimestamp = Callable[[int, int], int]


@dataclass(frozen=True, slots=True)
class OrderWarning:
    """``[BUG]logic queue order maybe wrong``: a unit whose queue offset was not the next one.

    RocketMQ logs it and appends the unit at ``current_logic_offset`` anyway; so does rmqlab.
    Offsets are logic offsets (bytes, queue offset * 20).
    """

    expect_logic_offset: int
    current_logic_offset: int
    commit_log_offset: int
    size: int


def _first_at_or_above(buf: memoryview, min_phy: int) -> int:
    """Index of the first unit in ``buf`` whose commit log offset is >= ``min_phy``, or -1.

    The numpy views die on return, so the caller can release ``buf`` right after.
    """
    hits = np.flatnonzero(units_view(buf)["commit_log_offset"] >= min_phy)
    return int(hits[0]) if hits.size else -1


def _java_div(a: int, b: int) -> int:
    """Java's ``long / long``: truncates toward zero (``-1 / 20 == 0``, not -1)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _java_long(x: int) -> int:
    """Wrap to a signed 64-bit value, as Java ``long`` arithmetic does."""
    return ((x + (1 << 63)) & ((1 << 64) - 1)) - (1 << 63)


def _java_int(x: int) -> int:
    """Wrap to a signed 32-bit value, as Java's ``(int)`` cast of a ``long`` does."""
    return ((x + (1 << 31)) & ((1 << 32) - 1)) - (1 << 31)


def _double_to_long(x: float) -> int:
    """Java's ``(long)`` cast of a ``double``: truncates toward zero, NaN is 0, out of range saturates."""
    if x != x:
        return 0
    if x >= 2.0**63:
        return (1 << 63) - 1
    if x <= -(2.0**63):
        return -(1 << 63)
    return int(x)


#: ``read_units(window)`` -> per unit of a window of whole units (a memoryview the caller releases):
#: the tags code the filter sees and the unit's weight (messages: 1 for a ConsumeQueue unit, the
#: batch size for a BatchConsumeQueue unit). A tags code of None marks a unit where RocketMQ's loop
#: throws (a NullPointerException: see ``ConsumeQueue.estimate_message_count``).
ReadUnits = Callable[[Any], tuple[list[int | None], list[int] | None]]


def estimate_over_files(
    files: list[MappedFile],
    phys_from: int,
    phys_to: int,
    unit_size: int,
    read_units: ReadUnits,
    message_filter: MessageFilter,
    span: int,
    max_consume_queue_scan: int,
    sample_count_threshold: int,
) -> int:
    """The scan both 5.x ``estimateMessageCount`` implementations share (``ConsumeQueue`` and
    ``BatchConsumeQueue``), over logic byte offsets ``[phys_from, phys_to)`` of ``files``.

    Steps as RocketMQ's, so that the answer is the broker's in every case, odd ones included:

    * ``MappedFileQueue.range``: the files that overlap the range; none -> -1 (the caller's
      "don't know", which ``DefaultMessageStore`` turns into ``to - from``).
    * In each file a window: from ``phys_from`` (first file) to ``phys_to`` (last file), else the
      whole file. ``selectMappedBuffer(start, len)`` gives nothing when the window reaches past
      the file's read position, and that file is then skipped, not scanned in part: a range
      ending past the last unit counts nothing in the last, partly written file.
    * Unit by unit: the tags code (ext-resolved) is asked of ``message_filter`` (its consume
      queue half only); ``match``/``raw`` add the unit's weight (messages). The scan stops once
      ``max_consume_queue_scan`` units are scanned, or once more than ``sample_count_threshold``
      units matched (counting units, not messages, in a BatchConsumeQueue too).
    * Not stopped: the answer is ``match``, exact. Stopped (sampled): ``(long) (match * span *
      1.0 / raw)`` with ``span = to - from``, the Java arithmetic (the longs wrap, the
      quotient is a double truncated toward zero); ``raw == 0`` there is 0 (Java logs "[BUG]").
    """
    picked: list[MappedFile] = []
    for mf in files:  # MappedFileQueue.range (copyMappedFiles(0): none for an empty queue)
        if mf.file_from_offset + mf.file_size <= phys_from:
            continue
        if phys_to <= mf.file_from_offset:
            break
        picked.append(mf)
    if not picked:
        return -1
    sample = False
    match = raw = scanned = matched_units = 0
    for mf in picked:
        start, length = 0, mf.file_size
        if mf.file_from_offset <= phys_from:  # first file segment
            start = _java_int(phys_from - mf.file_from_offset)
            if mf.file_from_offset + mf.file_size >= phys_to:  # the file covers the whole range
                length = _java_int(phys_to - phys_from)
            else:
                length = mf.file_size - start
        if start == 0 and mf.file_from_offset + mf.file_size > phys_to:  # last file segment
            length = _java_int(phys_to - mf.file_from_offset)
        sbr = mf.select_mapped_buffer(start, length)
        if sbr is None:
            continue
        # Java reads ``length / unit`` units (ceil; the lengths are whole units here); at most
        # the units left before the scan limit are read (at least one: the check follows it)
        n = -(-length // unit_size)
        n = min(n, max(max_consume_queue_scan - scanned, 1))
        try:
            tags, weights = read_units(sbr.buffer[: n * unit_size])
        finally:
            sbr.release()
        for i, tags_code in enumerate(tags):
            if tags_code is None:
                return -1  # RocketMQ: NullPointerException out of the loop (see the callers)
            weight = 1 if weights is None else weights[i]
            if message_filter.is_matched_by_consume_queue(tags_code):
                match += weight
                matched_units += 1
            raw += weight
            scanned += 1
            if scanned >= max_consume_queue_scan or matched_units > sample_count_threshold:
                sample = True
                break
        if sample:
            break
    if not sample:
        return match
    if raw == 0:
        log.error("[BUG]. Raw should NOT be 0")
        return 0
    return _double_to_long(float(_java_long(match * _java_long(span))) / float(raw))


def truncation_point(offsets: np.ndarray, sizes: np.ndarray, phy_offset: int) -> tuple[int, int | None]:
    """How many units of a last CQ file truncation keeps (0: the file goes), and the index of
    the unit it stops at for ending past ``phy_offset`` (None when RocketMQ's rules stop it).

    RocketMQ keeps units while ``offset < phy_offset`` (and, past unit 0, ``offset >= 0`` and
    ``size > 0``). A unit starting below the log's end whose record ends past it can only be
    garbage: recovery cuts the log between records. Kept, its end becomes the queue's max
    physical offset, and dispatch would start there, past the log's end: no message written
    afterwards would reach a consume queue or the index until the log grew past it. rmqlab
    cuts at such a unit (pre-blank units ``(0, 0x7FFFFFFF)`` excepted).
    """
    n = len(offsets)
    if not n:  # a file cut short of one unit (only a read-only look can meet one)
        return 0, None
    o0, s0 = int(offsets[0]), int(sizes[0])
    if o0 >= phy_offset:
        return 0, None
    if o0 + s0 > phy_offset and not (o0 == 0 and s0 == 0x7FFFFFFF):
        return 0, 0
    # units 1.., vectorised in chunks growing 4x (first_in_chunks): a file holds up to 300,000
    # units, and a queue with a few units in it should not cost a pass over all of them (a
    # store of thousands of queues opens in their number of milliseconds otherwise)

    def stops(lo: int, hi: int) -> np.ndarray:
        o, z = offsets[lo:hi].astype(np.int64), sizes[lo:hi].astype(np.int64)
        past = (o < phy_offset) & (o + z > phy_offset) & ~((o == 0) & (z == 0x7FFFFFFF))
        return (o < 0) | (z <= 0) | (o >= phy_offset) | past

    k = first_in_chunks(n, stops, start=1)
    if k == n:
        return n, None
    o, z = int(offsets[k]), int(sizes[k])
    return k, (k if o < phy_offset < o + z and not (o == 0 and z == 0x7FFFFFFF) else None)


def unit_past_log_note(queue: str, file: str, i: int, offset: int, size: int, phy_offset: int,
                       version: str = "4.9.8/5.3.3") -> str:
    """Why a unit ending past the log is cut, and what RocketMQ would do with it."""
    return (f"{queue}: unit {i} of consumequeue file {file} (byte {i * _UNIT}) points at {offset} with size "
            f"{size}, ending at {offset + size}, past the log's end {phy_offset}: garbage, truncated there "
            f"(RocketMQ {version} keeps it, takes {offset + size} as the queue's max physical offset and starts "
            f"dispatch there, so no message written afterwards reaches a consume queue or the index until the "
            f"log grows past it)")


class ConsumeQueue:
    """One topic/queue's consume queue (RocketMQ ``ConsumeQueue``, file-based "SimpleCQ").

    Invariants kept between calls: every file's positions are multiples of 20; the queue's
    files are contiguous (``from`` values ``fileSize`` apart); ``min_logic_offset`` is a logic
    offset (bytes) and is 0 until ``fill_pre_blank``/``correct_min_offset`` move it;
    ``max_physic_offset`` is the end (``offset + size``) of the last unit appended or recovered,
    -1 when unknown.
    """

    def __init__(
        self,
        topic: str,
        queue_id: int,
        store_path: str,
        mapped_file_size: int,
        *,
        rocketmq_version: str = "4.9.8",
        read_only: bool = False,
        bus: EventBus | None = None,
        ext_store_path: str | None = None,
        ext_file_size: int = 48 * 1024 * 1024,
        bit_map_length: int = 64,
    ) -> None:
        # Like codec.names.consume_queue_dir: RocketMQ's charset (so the name is one safe path
        # component), up to 255 chars because broker-made retry/DLQ topics may exceed 127.
        validate_topic(topic, max_length=_TOPIC_DIR_MAX)
        if isinstance(queue_id, bool) or not isinstance(queue_id, int) or queue_id < 0:
            raise ValueError(f"queue id must be a non-negative int, got {queue_id!r}")
        if mapped_file_size <= 0 or mapped_file_size % _UNIT:
            raise ConfigError(
                f"consume queue file size must be a positive multiple of {_UNIT}, "
                f"not {mapped_file_size}"
            )
        if not rocketmq_version.startswith(("4.", "5.")):
            raise ConfigError(f"unknown rocketmq_version {rocketmq_version!r}")
        self.topic = topic
        self.queue_id = queue_id
        self.store_path = store_path
        self.mapped_file_size = mapped_file_size
        self.rocketmq_version = rocketmq_version
        self.read_only = read_only
        self.bus = bus
        self.queue_dir = os.path.join(os.fspath(store_path), topic, str(queue_id))
        self.name = f"consumequeue/{topic}/{queue_id}"
        self.mapped_file_queue = MappedFileQueue(
            self.queue_dir, mapped_file_size, None, read_only=read_only, bus=bus, name=self.name
        )
        self.max_physic_offset = -1
        self.min_logic_offset = 0
        self.order_warnings: list[OrderWarning] = []
        self.duplicates_skipped = 0
        # enableConsumeQueueExt: RocketMQ creates the ext run only with the flag on, so reading
        # and writing ext units go together (isExtReadEnable == isExtWriteEnable in practice)
        self.consume_queue_ext: ConsumeQueueExt | None = None
        if ext_store_path is not None:
            self.consume_queue_ext = ConsumeQueueExt(
                topic, queue_id, ext_store_path, ext_file_size, bit_map_length, read_only=read_only, bus=bus
            )
        self.ext_misses = 0  # ext addresses readers could not resolve (RocketMQ logs "[BUG]" each)
        # 5.x caches each file's first/last store time on the MappedFile (start/stopTimestamp);
        # keyed here by id(file), the file object kept alive in the value so ids are not reused.
        self._file_times: dict[int, tuple[MappedFile, int, int]] = {}

    def __repr__(self) -> str:
        files = len(self.mapped_file_queue.mapped_files)
        return (
            f"ConsumeQueue({self.topic!r}, {self.queue_id}, min={self.get_min_offset_in_queue()}, "
            f"max={self.get_max_offset_in_queue()}, files={files})"
        )

    @property
    def is_v4(self) -> bool:
        return self.rocketmq_version.startswith("4.")

    def _check_writable(self, what: str) -> None:
        if self.read_only:
            raise ReadOnlyStore(f"{self.name}: cannot {what} a read-only consume queue")

    # --- load / recover ----------------------------------------------------------------------

    def load(self) -> bool:
        """Map every file of the queue dir (each gets wrote = committed = flushed = fileSize),
        and of its ext run when there is one."""
        result = self.mapped_file_queue.load()
        if self.consume_queue_ext is not None:
            result = self.consume_queue_ext.load() and result
        return result

    def recover(self) -> list[RecoveryStep]:
        """Find the end of valid units and cut the tail there (spec §3.3); returns what was done
        to the ext run (:meth:`ConsumeQueueExt.recover`, ``truncate_by_max_address``), for the
        recovery plan.

        Only the last three files are scanned; earlier ones are trusted. A unit is valid when
        ``offset >= 0 and size > 0`` (pre-blank units are valid). Sets ``max_physic_offset`` to
        the end of the last valid unit seen, ``flushed_where``/``committed_where`` to the end of
        valid data, and truncates (logically: bytes are not zeroed) or deletes what lies after.

        With an ext run: the run is recovered, then cut after the last ext address the scanned
        units hold (the address of a later unit in scan order wins). Without CQ files nothing
        happens to the run (RocketMQ 4.9.8/5.3.3 recover it only inside the scan's branch).
        """
        mfq = self.mapped_file_queue
        files = mfq.mapped_files
        ext = self.consume_queue_ext
        if not files:
            if ext is None or not ext.mapped_file_queue.mapped_files:
                return []
            return [RecoveryStep("consume_queue_ext", ext.name, 0, "not recovered",
                                 f"{ext.name}: its consume queue has no files, and RocketMQ recovers the ext run "
                                 "only while scanning them (its files keep their full positions)")]
        index = max(0, len(files) - 3)
        mf = files[index]
        process_offset = mf.file_from_offset
        mf_offset = 0
        max_ext_addr = 1
        while True:
            valid_units, last_end = self._scan_valid_prefix(mf)
            if valid_units:
                mf_offset = valid_units * _UNIT
                self.max_physic_offset = last_end
                if self.consume_queue_ext is not None:
                    max_ext_addr = self._last_ext_addr(mf, valid_units, max_ext_addr)
            if mf_offset == self.mapped_file_size:
                index += 1
                if index >= len(files):
                    break
                mf = files[index]
                process_offset = mf.file_from_offset
                mf_offset = 0
            else:
                break
        process_offset += mf_offset
        mfq.flushed_where = process_offset
        mfq.committed_where = process_offset
        if self.read_only:
            self._truncate_in_memory(process_offset)
        else:
            mfq.truncate_dirty_files(process_offset)
        if self.bus is not None and self.bus.active:
            self.bus.publish(
                RecoveryStep(
                    "consume_queue", mf.file_name, process_offset, "truncate",
                    f"{self.name}: end of the valid units",
                )
            )
        if ext is None:
            return []
        return ext.recover() + ext.truncate_by_max_address(max_ext_addr)

    def _last_ext_addr(self, mf: MappedFile, count: int, current: int) -> int:
        """The last ext address among the first ``count`` units of ``mf``, else ``current``."""
        tags = units_view(mf.buffer[: count * _UNIT])["tags_code"]
        hits = np.flatnonzero(tags <= MAX_ADDR)
        return int(tags[hits[-1]]) if hits.size else current

    def _truncate_in_memory(self, offset: int) -> None:
        """``truncateDirtyFiles`` for a read-only queue: same positions, and the files past
        ``offset`` are unmapped and dropped from the list instead of deleted (disk untouched)."""
        mfq = self.mapped_file_queue
        dropped = []
        for mf in mfq.mapped_files:
            if mf.file_from_offset + self.mapped_file_size <= offset:
                continue
            if offset >= mf.file_from_offset:
                self._set_positions(mf, offset % self.mapped_file_size)
            else:
                mf.close()
                dropped.append(mf)
        mfq.delete_files(dropped)

    def _scan_valid_prefix(self, mf: MappedFile) -> tuple[int, int]:
        """(number of leading valid units in the whole file, end phy of the last of them).

        Vectorised over the file's units (a 6 MB file holds 300,000 of them), in growing chunks
        (``valid_prefix``): a queue with a few units costs microseconds, not a pass over the file.
        """
        units = units_view(mf.buffer[: self.mapped_file_size])
        count = valid_prefix(units)
        if count == 0:
            return 0, -1
        last = units[count - 1]
        return count, int(last["commit_log_offset"]) + int(last["size"])

    # --- append ------------------------------------------------------------------------------

    def put_message_position_info_wrapper(self, offset: int, size: int, tags_code: int, store_timestamp: int,
                                          cq_offset: int, bit_map: bytes | None = None) -> bool:
        """The dispatch of a record's own unit (``putMessagePositionInfoWrapper``): with an ext run,
        the ext unit (tags code, store time, bitmap) first and its address as the CQ unit's tags
        code; a failed ext put leaves the plain tags code (logged, as RocketMQ does)."""
        ext = self.consume_queue_ext
        if ext is not None:
            address = ext.put(CqExtUnit(tags_code, store_timestamp, bit_map))
            if is_ext_addr(address):
                tags_code = address
            else:
                log.warning("Save consume queue extend fail, So just save tagsCode! topic:%s, queueId:%d, offset:%d",
                            self.topic, self.queue_id, offset)
        return self.put_message_position_info(offset, size, tags_code, cq_offset)

    def put_message_position_info(
        self, offset: int, size: int, tags_code: int, cq_offset: int
    ) -> bool:
        """Append the unit ``(offset, size, tags_code)`` as queue offset ``cq_offset`` (spec §3.2).

        Returns True when the unit is stored or was already there (a unit ending at or before
        ``max_physic_offset``, or a queue offset below the current end, is skipped: that is how
        re-dispatch after a crash stays idempotent). A queue offset *past* the current end is
        appended at the current end anyway and recorded in ``order_warnings``. False only when
        no file could be created or the append did not fit.
        """
        # The common case first (a writable queue, its last file not full, the unit next in
        # line): the same checks and the same 20 bytes, with fewer calls (reput pays this per
        # message). Anything else takes the general code below.
        end = offset + size
        if end > self.max_physic_offset and not self.read_only:
            files = self.mapped_file_queue.mapped_files
            if files:
                mf = files[-1]
                pos = mf.wrote_position
                if pos != mf.file_size and cq_offset * _UNIT == mf.file_from_offset + pos and (
                    cq_offset == 0 or pos != 0 or not mf.first_create_in_queue
                ):
                    ok = mf.append_message(_UNIT_STRUCT.pack(offset, size, tags_code))
                    self.max_physic_offset = end  # after the unit: see _put_message_position_info_exact
                    return bool(ok)
        return self._put_message_position_info_exact(offset, size, tags_code, cq_offset)

    def _put_message_position_info_exact(self, offset: int, size: int, tags_code: int, cq_offset: int) -> bool:
        """``put_message_position_info`` without its fast path (every case)."""
        self._check_writable("append to")
        if offset + size <= self.max_physic_offset:
            self.duplicates_skipped += 1
            return True
        expect = cq_offset * _UNIT
        mf = self.mapped_file_queue.get_last_mapped_file_for(expect)
        if mf is None:
            return False
        if mf.first_create_in_queue and cq_offset != 0 and mf.wrote_position == 0:
            self.min_logic_offset = expect
            self.mapped_file_queue.flushed_where = expect
            self.mapped_file_queue.committed_where = expect
            self._fill_pre_blank(mf, expect)
        if cq_offset != 0:
            current = mf.file_from_offset + mf.wrote_position
            if expect < current:
                self.duplicates_skipped += 1
                return True
            if expect != current:
                log.warning(
                    "[BUG]logic queue order maybe wrong, expectLogicOffset: %d "
                    "currentLogicOffset: %d Topic: %s QID: %d Diff: %d",
                    expect, current, self.topic, self.queue_id, expect - current,
                )
                self.order_warnings.append(OrderWarning(expect, current, offset, size))
        ok = mf.append_message(pack_unit(offset, size, tags_code))
        # RocketMQ sets it first; set after the append, an interrupt (KeyboardInterrupt) between
        # the two leaves the unit to be written again by the re-dispatch, never skipped as done
        self.max_physic_offset = offset + size
        return bool(ok)

    def put_units(self, offsets: np.ndarray, sizes: np.ndarray, tags_codes: np.ndarray,
                  cq_offsets: np.ndarray) -> int:
        """``put_message_position_info`` for each unit in order (commit log offsets increasing),
        in bulk; returns the index of the last unit for which it would have returned True (-1).

        A leading run of units ending at or before ``max_physic_offset`` is counted as duplicates
        at once; then runs whose queue offsets continue exactly where the last file ends are
        written with one slice copy per file. Anything else -- a first file that needs pre-blank
        units, a queue offset below or past the end, a full or missing file -- goes to the
        per-unit method from that unit on, so every rule and side effect stays the same.

        Not for a queue with an ext run (it would store plain tags codes): dispatch writes those
        record by record (``ReputMessageService.batching()`` is False with the flag on).
        """
        self._check_writable("append to")
        if self.consume_queue_ext is not None:
            raise ConfigError(f"{self.name}: put_units writes plain tags codes, not ConsumeQueueExt addresses; "
                              "use put_message_position_info_wrapper per record")
        m = len(offsets)
        ends = np.asarray(offsets, dtype=np.int64) + np.asarray(sizes, dtype=np.int64)
        dup = int(np.searchsorted(ends, self.max_physic_offset, side="right"))
        last_ok = dup - 1
        self.duplicates_skipped += dup
        i = dup
        mfq = self.mapped_file_queue
        file_size = self.mapped_file_size
        while i < m:
            q = int(cq_offsets[i])
            expect = q * _UNIT
            mf = mfq.get_last_mapped_file_for(expect)
            if mf is None or mf.file_from_offset + mf.wrote_position != expect or (
                mf.first_create_in_queue and q != 0 and mf.wrote_position == 0
            ):
                break
            k = min((file_size - mf.wrote_position) // _UNIT, m - i)
            if k <= 0:
                break
            run = np.asarray(cq_offsets[i : i + k], dtype=np.int64) - q
            gaps = np.flatnonzero(run != np.arange(k))
            if len(gaps):
                k = int(gaps[0])
            block = np.empty(k, dtype=CQ_UNIT_DTYPE)
            block["commit_log_offset"] = offsets[i : i + k]
            block["size"] = sizes[i : i + k]
            block["tags_code"] = tags_codes[i : i + k]
            if not mf.append_message(block.tobytes()):  # pragma: no cover - k units fit by construction
                break
            self.max_physic_offset = int(ends[i + k - 1])  # after the units (an interrupt re-puts them)
            last_ok = i + k - 1
            i += k
        put = self.put_message_position_info
        for j in range(i, m):
            if put(int(offsets[j]), int(sizes[j]), int(tags_codes[j]), int(cq_offsets[j])):
                last_ok = j
        return last_ok

    def _fill_pre_blank(self, mf: MappedFile, until_where: int) -> None:
        """Append pre-blank units from position 0 up to ``until_where % fileSize`` (exclusive)."""
        until = until_where % self.mapped_file_size
        if until:
            mf.append_message(PRE_BLANK_UNIT * (until // _UNIT))

    # --- reading -----------------------------------------------------------------------------

    def get_index_buffer(self, start_index: int) -> SelectMappedBufferResult | None:
        """Units from queue offset ``start_index`` to the read position of *its* file.

        None when ``start_index`` is below ``min_logic_offset``, outside the loaded files, or at
        or past the file's read position. The caller must ``release()`` the result (or use it as
        a context manager). Never spans two files: readers move to the next file themselves
        (``roll_next_file``).
        """
        offset = start_index * _UNIT
        if offset < self.min_logic_offset:
            return None
        mf = self.mapped_file_queue.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        return mf.select_mapped_buffer(offset % self.mapped_file_size)

    def get_ext(self, address: int) -> CqExtUnit | None:
        """The ext unit at ``address`` (a CQ unit's tags code), or None: no ext run (the flag is
        off), not an ext address, or nothing there (``ConsumeQueue.getExt``)."""
        ext = self.consume_queue_ext
        return ext.get(address) if ext is not None else None

    def resolve_tags_code(self, tags_code: int) -> int | None:
        """What RocketMQ's readers filter with: a plain tags code as it is; an ext address
        replaced by its unit's tags code, or None when it resolves to nothing (no ext run, or
        the unit is gone; RocketMQ logs "[BUG] can't find consume queue extend file content",
        and a None tags code matches every tag filter)."""
        if tags_code > MAX_ADDR:
            return tags_code
        unit = self.get_ext(tags_code)
        if unit is not None:
            return unit.tags_code
        self.ext_misses += 1
        if self.ext_misses <= 10 or self.ext_misses % 10_000 == 0:
            log.error("[BUG] can't find consume queue extend file content! addr=%d, topic=%s, queueId=%d "
                      "(%d so far)%s", tags_code, self.topic, self.queue_id, self.ext_misses,
                      "" if self.consume_queue_ext is not None else ": enable_consume_queue_ext is off")
        return None

    def iter_units_resolved(self, buf: Any, first_chunk: int = 64) -> Iterator[tuple[int, int, int]]:
        """``(commit_log_offset, size, tags_code)`` of each whole unit in ``buf`` (a window of
        :meth:`get_index_buffer`), for a reader of tags codes: ``get_message``'s tag filter, the
        schedule service's due times.

        An ext address whose unit :meth:`ConsumeQueueExt.resolve` finds comes out as that unit's
        tags code; every other tags code comes out as stored, so a reader that resolves what is
        still an address unit by unit (``tags_code if tags_code > MAX_ADDR else
        resolve_tags_code(tags_code)``) gives exactly the answers it gives without this (a
        found unit whose own tags code is <= MAX_ADDR, as damage could make it, keeps its
        address too, so it is not taken for an address again; misses keep being counted and
        logged by the reader, and only for the units it reaches; a damaged unit raises there
        too). Resolved in chunks doubling from ``first_chunk`` units, each
        copied out of ``buf``: a pull that stops after a few messages resolves about as many
        units as it reads (64 covers a pull of 32 that matches every unit, which looks at 33;
        doubling rather than 4x, as the units resolved past the reader's stop cost ~0.2 us each
        and a chunk ~15 us), and nothing keeps ``buf`` exported once the reader releases it.
        The units come out of ``chain`` over one list a chunk (no generator frame a unit).
        """
        n = len(buf) // _UNIT
        bounds: list[tuple[int, int]] = []
        lo, step = 0, first_chunk
        while lo < n:
            bounds.append((lo, min(n, lo + step)))
            lo, step = lo + step, step * 2
        return chain.from_iterable(self._resolved_chunk(buf[lo * _UNIT : hi * _UNIT]) for lo, hi in bounds)

    def _resolved_chunk(self, buf: Any) -> list[tuple[int, int, int]]:
        units = units_view(bytes(buf))
        tags = units["tags_code"].astype(np.int64)
        ext = self.consume_queue_ext
        if ext is not None:
            found, real = ext.resolve(tags)
            take = found & (real > MAX_ADDR)
            tags[take] = real[take]
        return list(zip(units["commit_log_offset"].tolist(), units["size"].tolist(), tags.tolist(), strict=True))

    def ext_tags_codes(self, tags_codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(resolved, tags_code)`` for units' stored tags codes, for views: True where an ext
        address resolves (its unit's tags code alongside), False for every other value --
        a plain tags code, or an address that resolves to nothing (RocketMQ's null tags code,
        which matches every tag filter). No miss is counted or logged.

        Vectorised (:meth:`ConsumeQueueExt.resolve`); the one address ``get`` can find that the
        vectorised gather does not, address 0 with the run's first file deleted (it falls back
        to the first file), is asked of ``get``. A unit ``get`` finds damaged counts as not
        resolved.
        """
        codes = np.asarray(tags_codes, dtype=np.int64)
        ext = self.consume_queue_ext
        if ext is None:
            return np.zeros(len(codes), dtype=bool), np.zeros(len(codes), dtype=np.int64)
        found, tags = ext.resolve(codes)
        for i in np.flatnonzero(~found & (codes == decorate(0))).tolist():
            try:
                unit = ext.get(int(codes[i]))
            except CorruptRecord:
                continue
            if unit is not None:
                found[i], tags[i] = True, unit.tags_code
        return found, tags

    def get_unit(self, index: int) -> tuple[int, int, int] | None:
        """``(commit_log_offset, size, tags_code)`` at queue offset ``index``, or None.

        Same visibility as ``get_index_buffer`` (None below ``min_logic_offset`` and past the
        end). Tags codes that are ext addresses are returned as stored.
        """
        sbr = self.get_index_buffer(index)
        if sbr is None:
            return None
        try:
            return unpack_unit(sbr.buffer, 0)
        finally:
            sbr.release()

    def units(self, start_index: int | None = None, end_index: int | None = None) -> np.ndarray:
        """Units ``[start_index, end_index)`` as a ``CQ_UNIT_DTYPE`` array, for inspection.

        Defaults: from the first unit of the first loaded file (so pre-blank and expired units
        are included; compare with ``get_min_offset_in_queue()``) to ``get_max_offset_in_queue()``.
        The range is clipped to what the files hold and can be read. Within one file the result
        is a zero-copy view over the mapping: copy it before the file is deleted or the queue is
        shut down. A range spanning files is concatenated (a copy).
        """
        files = self.mapped_file_queue.mapped_files
        if not files:
            return np.empty(0, dtype=CQ_UNIT_DTYPE)
        first_index = files[0].file_from_offset // _UNIT
        start = first_index if start_index is None else max(start_index, first_index)
        end = self.get_max_offset_in_queue() if end_index is None else end_index
        parts: list[np.ndarray] = []
        for mf in files:
            lo = max(start * _UNIT, mf.file_from_offset)
            hi = min(end * _UNIT, mf.file_from_offset + mf.read_position)
            if lo < hi:
                a, b = lo - mf.file_from_offset, hi - mf.file_from_offset
                parts.append(units_view(mf.buffer[a:b]))
        if not parts:
            return np.empty(0, dtype=CQ_UNIT_DTYPE)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def get_min_offset_in_queue(self) -> int:
        """``minLogicOffset / 20``: the first queue offset consumers may read."""
        return self.min_logic_offset // _UNIT

    def get_max_offset_in_queue(self) -> int:
        """``(lastFile.from + lastFile.readPosition) / 20``: one past the last unit (0 if empty)."""
        return self.mapped_file_queue.get_max_offset() // _UNIT

    def get_message_total_in_queue(self) -> int:
        return self.get_max_offset_in_queue() - self.get_min_offset_in_queue()

    def estimate_message_count(
        self,
        from_offset: int,
        to_offset: int,
        message_filter: MessageFilter,
        *,
        max_consume_queue_scan: int = 20_000,
        sample_count_threshold: int = 5_000,
    ) -> int:
        """5.x ``ConsumeQueue.estimateMessageCount(from, to, filter)``: how many units of queue
        offsets ``[from_offset, to_offset)`` match ``message_filter``, or -1 ("don't know": no
        file overlaps the range, or see below). :meth:`MessageStore.estimate_message_count` adjusts
        the arguments first and turns -1 into ``to - from``.

        The units are scanned in their files (:func:`estimate_over_files`): exact up to
        ``max_consume_queue_scan`` units scanned and ``sample_count_threshold`` units matched
        (the ``MessageStoreConfig`` fields, Java defaults 20,000 and 5,000); past either, the
        share matched so far scaled to ``to - from``. Only the consume queue half of the filter
        is asked (no CommitLog read). No argument is clamped here: the range is logic bytes
        ``from * 20 .. to * 20``, and a file whose window reaches past its read position (the
        last file, when ``to`` is past the last unit) is skipped whole.

        With a ConsumeQueueExt run (``enable_consume_queue_ext``) each tags code is read through
        the ext run, as RocketMQ does (``consumeQueueExt.get(tagCode).getTagsCode()``). A unit
        whose tags code resolves to nothing (a plain tags code, or an ext unit that is gone)
        makes RocketMQ throw a NullPointerException out of the whole call; rmqlab answers -1
        there instead (what the broker's caller gets is an exception, not a count).
        """
        ext = self.consume_queue_ext

        def read_units(buf: Any) -> tuple[list[int | None], list[int] | None]:
            codes = units_view(bytes(buf))["tags_code"].astype(np.int64)
            if ext is None:
                return codes.tolist(), None
            found, real = self.ext_tags_codes(codes)
            return [int(r) if f else None for f, r in zip(found.tolist(), real.tolist(), strict=True)], None

        return estimate_over_files(
            self.mapped_file_queue.mapped_files,
            _java_long(from_offset * _UNIT),
            _java_long(to_offset * _UNIT),
            _UNIT,
            read_units,
            message_filter,
            to_offset - from_offset,
            max_consume_queue_scan,
            sample_count_threshold,
        )

    def get_last_offset(self) -> int:
        """End phy (``offset + size``) of the last valid unit of the last file, -1 if none.

        Scans forward from the unit before the last file's write position, as RocketMQ does
        (Java reads past a full file's end and throws; here the scan stops at the file end).
        """
        mf = self.mapped_file_queue.get_last_mapped_file()
        if mf is None:
            return -1
        position = max(mf.wrote_position - _UNIT, 0)
        units = units_view(mf.buffer[position : self.mapped_file_size])
        last = -1
        for off, size in zip(
            units["commit_log_offset"].tolist(), units["size"].tolist(), strict=True
        ):
            if off >= 0 and size > 0:
                last = off + size
            else:
                break
        return last

    def roll_next_file(self, index: int) -> int:
        """The first queue offset of the file after the one holding ``index`` (golden #21)."""
        units_per_file = self.mapped_file_size // _UNIT
        return index + units_per_file - index % units_per_file

    # --- min offset ----------------------------------------------------------------------------

    def correct_min_offset(self, min_phy: int) -> list[RecoveryStep]:
        """Move ``min_logic_offset`` to the first unit pointing at or past ``min_phy`` (spec §3.4).

        ``min_phy`` is the CommitLog's min offset. 4.9.8 scans the first file linearly; 5.3.3
        has early exits and a binary search (and can point past the end when every unit expired).
        The ext run's files wholly before that unit's ext address are deleted; returns a step
        for each, for the recovery plan (a read-only queue drops them from its list only).
        """
        if self.is_v4:
            return self._correct_min_offset_v4(min_phy)
        return self._correct_min_offset_v5(min_phy)

    def _correct_min_offset_v4(self, min_phy: int) -> list[RecoveryStep]:
        mf = self.mapped_file_queue.get_first_mapped_file()
        if mf is None:
            return []
        sbr = mf.select_mapped_buffer(0)
        if sbr is None:
            return []
        min_ext_addr = 1
        with sbr:
            first = _first_at_or_above(sbr.buffer, min_phy)
            if first >= 0:
                min_ext_addr = unpack_unit(sbr.buffer, first * _UNIT)[2]
        if first >= 0:
            self.min_logic_offset = mf.file_from_offset + first * _UNIT
        return self._truncate_ext_by_min(min_ext_addr)

    def _truncate_ext_by_min(self, min_ext_addr: int) -> list[RecoveryStep]:
        """Delete the ext files wholly before the new first unit's address (a plain tags code, or
        1 when no unit was found: nothing)."""
        if self.consume_queue_ext is None:
            return []
        return self.consume_queue_ext.truncate_by_min_address(min_ext_addr)

    def _correct_min_offset_v5(self, min_phy: int) -> list[RecoveryStep]:
        mfq = self.mapped_file_queue
        if self.min_logic_offset >= mfq.get_max_offset():
            return []  # "contains no valid entries"
        last = mfq.get_last_mapped_file()
        if last is None:
            return []
        read_position = last.read_position
        if read_position >= _UNIT:
            record = last.select_mapped_buffer(read_position - _UNIT, _UNIT)
            if record is not None:
                with record:
                    last_phy = unpack_unit(record.buffer, 0)[0]
                if last_phy < min_phy:
                    # Every unit expired: point past the end, keeping the largest known offset.
                    self.min_logic_offset = last.file_from_offset + read_position
                    return []
        first = mfq.get_first_mapped_file()
        if first is None:
            return []
        start = self.min_logic_offset - first.file_from_offset
        intact = start >= 0
        start = max(start, 0)
        if start > first.read_position:
            return []  # "[Bug][InconsistentState] file should have been deleted"
        sbr = first.select_mapped_buffer(start)
        if sbr is None:
            return []
        with sbr:
            if sbr.size == 0:
                return []
            buf = sbr.buffer

            def phy(pos: int) -> int:
                return unpack_unit(buf, pos)[0]

            if intact and phy(0) >= min_phy:
                return []  # the previous min offset is still valid
            low, high = 0, sbr.size - _UNIT
            while high - low > _UNIT:
                mid = (low + high) // 2 // _UNIT * _UNIT
                value = phy(mid)
                if value > min_phy:
                    high = mid
                elif value == min_phy:
                    low = high = mid
                    break
                else:
                    low = mid
            min_ext_addr = 1
            for i in range(low, high + 1, _UNIT):
                if phy(i) >= min_phy:
                    self.min_logic_offset = first.file_from_offset + start + i
                    min_ext_addr = unpack_unit(buf, i)[2]
                    break
        # 5.3.3 reaches its ext truncation only here: every early return above skips it
        return self._truncate_ext_by_min(min_ext_addr)

    # --- by time -------------------------------------------------------------------------------

    def get_offset_in_queue_by_time(
        self,
        timestamp: int,
        *,
        commit_log_min_offset: int,
        pickup_store_timestamp: PickupStoreTimestamp,
        boundary: str = LOWER,
    ) -> int:
        """The queue offset for store time ``timestamp`` (ms), exactly as RocketMQ answers.

        4.9.8 picks the file by filesystem mtime (first file with mtime >= timestamp, else the
        last) and returns the nearest match inside it; ``boundary`` must be ``"LOWER"`` (4.9.8
        has no boundary types). 5.3.3 picks the file by store times and returns the LOWER or
        UPPER boundary. Units below ``commit_log_min_offset`` are skipped by the search; a
        store time of -1 from ``pickup_store_timestamp`` ends the search with 0. Spec §3.5.
        """
        if boundary not in (LOWER, UPPER):
            raise ValueError(f"boundary must be {LOWER!r} or {UPPER!r}, not {boundary!r}")
        if self.is_v4:
            if boundary != LOWER:
                raise ValueError("RocketMQ 4.9.8 has no boundary types; use boundary='LOWER'")
            return self._offset_by_time_v4(timestamp, commit_log_min_offset, pickup_store_timestamp)
        mf = self._file_by_time_v5(timestamp, pickup_store_timestamp, boundary)
        if mf is None:
            return 0
        return self._offset_by_time_v5(
            mf, timestamp, commit_log_min_offset, pickup_store_timestamp, boundary
        )

    def _offset_by_time_v4(self, ts: int, cl_min: int, pickup: PickupStoreTimestamp) -> int:
        mf = self.mapped_file_queue.get_mapped_file_by_time(ts)
        if mf is None:
            return 0
        low = max(0, self.min_logic_offset - mf.file_from_offset)
        sbr = mf.select_mapped_buffer(0)
        if sbr is None:
            return 0
        with sbr:
            buf = sbr.buffer
            high = sbr.size - _UNIT
            target = left = right = -1
            left_value = right_value = -1
            # Nearest-match binary search; units below the CommitLog min move the search right.
            while high >= low:
                mid = (low + high) // (2 * _UNIT) * _UNIT
                phy, size, _ = unpack_unit(buf, mid)
                if phy < cl_min:
                    low, left = mid + _UNIT, mid
                    continue
                store_time = pickup(phy, size)
                if store_time < 0:
                    return 0
                if store_time == ts:
                    target = mid
                    break
                if store_time > ts:
                    high, right, right_value = mid - _UNIT, mid, store_time
                else:
                    low, left, left_value = mid + _UNIT, mid, store_time
            if target != -1:
                offset = target
            elif left_value == -1:
                offset = right
            elif right_value == -1:
                offset = left
            else:
                far_left = abs(_java_long(ts - left_value)) > abs(_java_long(ts - right_value))
                offset = right if far_left else left
            return _java_div(mf.file_from_offset + offset, _UNIT)

    def _times_of(
        self, mf: MappedFile, is_last: bool, pickup: PickupStoreTimestamp
    ) -> tuple[int, int]:
        """(startTimestamp, stopTimestamp) of a file, -1 while unknown; cached once known (>0)."""
        _, start, stop = self._file_times.get(id(mf), (mf, -1, -1))
        if start < 0:
            start = self._store_time_at(mf, 0, pickup)
        if not is_last and stop < 0:
            stop = self._store_time_at(mf, self.mapped_file_size - _UNIT, pickup)
        self._file_times[id(mf)] = (mf, start, stop)
        return start, stop

    @staticmethod
    def _store_time_at(mf: MappedFile, pos: int, pickup: PickupStoreTimestamp) -> int:
        sbr = mf.select_mapped_buffer(pos, _UNIT)
        if sbr is None:
            return -1
        with sbr:
            phy, size, _ = unpack_unit(sbr.buffer, 0)
        store_time = pickup(phy, size)
        return store_time if store_time > 0 else -1

    def _file_by_time_v5(
        self, ts: int, pickup: PickupStoreTimestamp, boundary: str
    ) -> MappedFile | None:
        """``MappedFileQueue.getConsumeQueueMappedFileByTime`` (5.x)."""
        files = list(self.mapped_file_queue.mapped_files)
        if not files:
            return None
        alive = {id(mf) for mf in files}
        for key in list(self._file_times):
            if key not in alive:
                self._file_times.pop(key, None)
        times = [(0, 0)] * len(files)
        for i in range(len(files) - 1, -1, -1):
            times[i] = self._times_of(files[i], i == len(files) - 1, pickup)
        if boundary == LOWER:
            for i in range(len(files) - 1):
                if times[i][1] >= ts:
                    return files[i]
            return files[-1]
        for i in range(len(files) - 1, -1, -1):
            if times[i][0] <= ts:  # an unknown start time (-1) matches too, as in Java
                return files[i]
        return None

    def _offset_by_time_v5(
        self,
        mf: MappedFile,
        ts: int,
        cl_min: int,
        pickup: PickupStoreTimestamp,
        boundary: str,
    ) -> int:
        """``ConsumeQueue.binarySearchInQueueByTime`` (5.x)."""
        base = mf.file_from_offset
        low = max(0, self.min_logic_offset - base)
        size_limit = self.mapped_file_size
        if mf.wrote_position not in (0, self.mapped_file_size):
            size_limit = mf.wrote_position  # the last file, still being written
        sbr = mf.select_mapped_buffer(0, size_limit)
        if sbr is None:
            return 0
        with sbr:
            buf = sbr.buffer

            def store_time(pos: int) -> int:
                phy, size, _ = unpack_unit(buf, pos)
                return pickup(phy, size)

            ceiling = sbr.size - _UNIT
            floor, high = low, ceiling
            if store_time(ceiling) < ts:
                return _java_div(base + ceiling + (_UNIT if boundary == LOWER else 0), _UNIT)
            if floor > ceiling:
                return 0  # Java positions past the buffer limit here and throws
            if store_time(floor) > ts:
                return _java_div(base, _UNIT) if boundary == LOWER else 0
            target = left = right = -1
            while high >= low:
                mid = (low + high) // (2 * _UNIT) * _UNIT
                phy, size, _ = unpack_unit(buf, mid)
                if phy < cl_min:
                    low, left = mid + _UNIT, mid
                    continue
                t = pickup(phy, size)
                if t < 0:
                    return 0
                if t == ts:
                    target = mid
                    break
                if t > ts:
                    high, right = mid - _UNIT, mid
                else:
                    low, left = mid + _UNIT, mid
            if target != -1:
                # One exact hit; neighbours may share the store time: walk to the boundary.
                offset = target
                step = -_UNIT if boundary == LOWER else _UNIT
                while floor <= offset + step <= ceiling and store_time(offset + step) == ts:
                    offset += step
            else:
                offset = right if boundary == LOWER else left
            return _java_div(base + offset, _UNIT)

    # --- truncate / delete -------------------------------------------------------------------

    def truncate_dirty_logic_files(self, phy_offset: int) -> list[RecoveryStep]:
        """Drop units pointing at or past ``phy_offset`` (the CommitLog's new end), spec §3.6.

        Works backwards from the last file: a last file whose first unit points at or past
        ``phy_offset`` is deleted and the next last file examined; otherwise the file's positions
        are set just past its last kept unit. Unit 0 of a file is kept without the ``size > 0``
        test (RocketMQ 4.9.8/5.3.3). ``max_physic_offset`` ends at the last kept unit's end, or
        ``phy_offset`` when nothing was kept. Bytes are not zeroed.

        Beyond RocketMQ (:func:`truncation_point`): a unit whose record would end past
        ``phy_offset`` is dirty too. Returns a step for each such cut, saying what RocketMQ
        would have done instead.

        The ext run is not touched. RocketMQ 4.9.8/5.3.3 end this loop with ``return`` on every
        path that keeps a unit, before their ``truncateByMaxAddress`` call, which therefore runs
        only when every file was deleted, with no address (a no-op): the ext units of the cut
        units stay, and re-dispatch appends new ones after them (apache/rocketmq#10755).
        """
        self._check_writable("truncate")
        mfq = self.mapped_file_queue
        self.max_physic_offset = phy_offset
        cuts: list[RecoveryStep] = []
        while True:
            mf = mfq.get_last_mapped_file()
            if mf is None:
                break
            self._set_positions(mf, 0)
            units = units_view(mf.buffer[: self.mapped_file_size])
            offsets = units["commit_log_offset"]
            sizes = units["size"]
            kept, past_end = truncation_point(offsets, sizes, phy_offset)
            if past_end is not None:
                cuts.append(self._past_end_step(mf, past_end, int(offsets[past_end]), int(sizes[past_end]),
                                                phy_offset))
            if kept == 0:
                if self.bus is not None and self.bus.active:
                    self.bus.publish(RecoveryStep(
                        "consume_queue", mf.file_name, mf.file_from_offset, "delete",
                        f"{self.name}: first unit points at or past {phy_offset}",
                    ))
                mfq.delete_last_mapped_file()
                continue
            self._set_positions(mf, kept * _UNIT)
            self.max_physic_offset = int(offsets[kept - 1]) + int(sizes[kept - 1])
            if self.bus is not None and self.bus.active:
                self.bus.publish(RecoveryStep(
                    "consume_queue", mf.file_name, mf.file_from_offset + kept * _UNIT,
                    "truncate", f"{self.name}: units below {phy_offset} kept",
                ))
            break
        return cuts  # published with the recovery plan's steps

    def units_past_log(self, phy_offset: int) -> list[RecoveryStep]:
        """The steps :meth:`truncate_dirty_logic_files` would report, changing nothing (the
        ``recover --dry-run`` plan)."""
        cuts: list[RecoveryStep] = []
        for mf in reversed(self.mapped_file_queue.mapped_files):
            units = units_view(mf.buffer[: self.mapped_file_size])
            kept, past_end = truncation_point(units["commit_log_offset"], units["size"], phy_offset)
            if past_end is not None:
                cuts.append(self._past_end_step(mf, past_end, int(units["commit_log_offset"][past_end]),
                                                int(units["size"][past_end]), phy_offset))
            if kept:
                break
        return cuts

    def _past_end_step(self, mf: MappedFile, i: int, offset: int, size: int, phy_offset: int) -> RecoveryStep:
        return RecoveryStep(
            "consume_queue", f"{self.name}/{mf.name}", i * _UNIT, "truncate at a unit ending past the log",
            unit_past_log_note(self.name, mf.name, i, offset, size, phy_offset),
        )

    @staticmethod
    def _set_positions(mf: MappedFile, pos: int) -> None:
        mf.set_wrote_position(pos)
        mf.set_committed_position(pos)
        mf.set_flushed_position(pos)

    def delete_expired_file(self, min_phy: int, now_ms: int | None = None) -> int:
        """Delete leading files whose last unit points below ``min_phy`` (never the last file),
        then ``correct_min_offset(min_phy)``. Returns the number of files deleted (spec §3.6).
        ``now_ms`` (the store's clock) times the forced destroy of a file a reader still holds."""
        self._check_writable("delete files of")
        count = self.mapped_file_queue.delete_expired_file_by_offset(min_phy, _UNIT, now_ms)
        self.correct_min_offset(min_phy)
        return int(count)

    # --- flush / lifecycle -----------------------------------------------------------------------

    def flush(self, flush_least_pages: int) -> bool:
        """Flush the file holding ``flushed_where``, then the ext run's (the CQ first, as RocketMQ
        does: a power loss between the two leaves CQ units whose ext units are lost); True iff
        nothing moved (RocketMQ's result)."""
        result = bool(self.mapped_file_queue.flush(flush_least_pages))
        if self.consume_queue_ext is not None:
            result = self.consume_queue_ext.flush(flush_least_pages) and result
        return result

    def destroy(self) -> None:
        """Delete every file of the queue and reset the offsets (``ConsumeQueue.destroy``)."""
        self._check_writable("destroy")
        self.max_physic_offset = -1
        self.min_logic_offset = 0
        self._file_times.clear()
        self.mapped_file_queue.destroy()
        if self.consume_queue_ext is not None:
            self.consume_queue_ext.destroy()

    def shutdown(self) -> None:
        """Mark the files unavailable; each is unmapped once its last reader releases it.

        Nothing is deleted; the queue is not usable afterwards (open a new one to reload).
        """
        self._file_times.clear()
        self.mapped_file_queue.shutdown(0)
        if self.consume_queue_ext is not None:
            self.consume_queue_ext.shutdown()
