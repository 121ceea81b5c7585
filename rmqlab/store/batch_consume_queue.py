"""BatchConsumeQueue: one BatchCQ topic/queue's index of 46-byte units (RocketMQ 5.x, spec §3.8).

Layout (bytes in ``rmqlab.codec.batch_consume_queue_unit``)::

    unit = commitLogOffset (>i8) | size (>i4) | tagsCode (>i8) | storeTime (>i8)
         | msgBaseOffset (>i8) | batchSize (>i2) | compactedOffset (>i4, -1) | reserved (>i4, 0)

Unlike the plain ConsumeQueue, a unit is *not* found by arithmetic on its queue offset: one unit
stands for a whole commit-log record holding ``batchSize`` messages, queue offsets
``msgBaseOffset .. msgBaseOffset + batchSize - 1``. Files (``<root>/<topic>/<queueId>/``, named by
the byte offset of their first unit in the run of files) are appended strictly in order with no
pre-blank units, and lookups binary-search ``msgBaseOffset`` (by queue offset) or ``storeTime``
(by time) inside the one file picked by its first unit.

Units of measure: *queue offset* = messages (``msgBaseOffset`` space); *logic offset* = bytes in
the run of files (what file names count); *phy* = bytes in the CommitLog; a *global unit
index* counts units over the loaded files in order (what :meth:`BatchConsumeQueue.units` and
:meth:`~BatchConsumeQueue.find_unit` use).

RocketMQ keeps the answers in fields (``maxOffsetInQueue``, ``minOffsetInQueue``,
``maxMsgPhyOffsetInCommitLog``) that only some operations revise; so does this class, so that it
answers what the broker answers *between* those operations too (e.g. after ``load()`` without
``recover()``, or a put into a recovered empty first file). Where the broker answers oddly the
method says so; where it would crash (a NullPointerException) the method returns the "none"
value of that method and says which.

RocketMQ also keeps two lookup caches (``searchBcqByCacheEnable``, default true): each file's
first ``msgBaseOffset`` and first ``storeTime`` -> file, refreshed by ``correctMinOffset`` (which
the store runs on every queue at load) and extended as a new file gets its first unit. Lookups
that miss the last file take the file of the *floor* key there. rmqlab computes the same floor
over the files it holds (a later file wins a tie, as a later ``put`` into the map does), which is
what the broker's cache holds in every state the store reaches (the refresh at load follows any
truncation).

Rules read from RocketMQ 5.x's ``store/.../queue/BatchConsumeQueue.java`` (the version with
``BoundaryType`` and ``isPutConsumeQueueDataByFileChannel``), re-expressed here; byte positions
there are unit indices here (the same steps: positions are multiples of 46).
``estimateMessageCount`` is :meth:`BatchConsumeQueue.estimate_message_count` (the scan shared with
the ConsumeQueue's, :func:`rmqlab.store.consume_queue.estimate_over_files`, with batch sizes as
weights), reached through :meth:`MessageStore.estimate_message_count`.

What a unit's msgBaseOffset / batchSize come from: the record's INNER_BASE / INNER_NUM, parsed
by 5.x ``checkMessageAndReturnSize`` (``setBatchSizeIfNeeded``, inside its try) when both are there
(``codec.walk.batch_fields``). A pair ``parseLong`` / ``parseShort`` rejects fails the record
without a size: recovery ends the CommitLog there, the live reput stops there (a master skips the
rest of the data read from that file: ``ReputMessageService._unparsable``). A pair that parses to a
negative value, or a record without both, is dispatched and :meth:`put_message_position_info_wrapper`
writes no unit for it (``tests/store/test_reput_inner_batch_fields.py``).

Multi-dispatch (LMQ): none here, as in 5.x. ``BatchConsumeQueue.assignQueueOffset`` /
``increaseQueueOffset`` set INNER_BASE and move the queue offset by INNER_NUM without reading
INNER_MULTI_DISPATCH (no LMQ offset is assigned or moved, the properties stay as sent), and
``putMessagePositionInfoWrapper`` never calls ``multiDispatchLmqQueue``: an inner batch naming LMQ
queues gets its one unit here and none in them, live and when recovery re-dispatches
(``tests/store/test_batch_cq_multi_dispatch.py``).

Thread-safety: as RocketMQ's, one thread appends (the dispatcher) while others read; readers hold
the mapped file while they read. Recovery, truncation and deletion are not safe against
concurrent appends (RocketMQ runs them before dispatch starts, or from the clean-up thread).
"""

from __future__ import annotations

import bisect
import logging
import os
import struct
from typing import TYPE_CHECKING, Any

import numpy as np

from rmqlab.codec.batch_consume_queue_unit import (
    BCQ_FILE_SIZE,
    BCQ_STORE_UNIT_SIZE,
    BCQ_UNIT_DTYPE,
    MSG_BASE_OFFSET_INDEX,
    MSG_BATCH_SIZE_INDEX,
    MSG_STORE_TIME_OFFSET_INDEX,
    is_valid_unit,
    pack_unit,
    units_view,
    unpack_unit,
    valid_prefix,
)
from rmqlab.codec.consume_queue_unit import first_in_chunks
from rmqlab.codec.names import validate_topic
from rmqlab.errors import ConfigError, ReadOnlyStore
from rmqlab.events import EventBus, RecoveryStep
from rmqlab.files.mapped_file_queue import MappedFileQueue
from rmqlab.store.consume_queue import estimate_over_files

if TYPE_CHECKING:
    from rmqlab.files.mapped_file import MappedFile, SelectMappedBufferResult
    from rmqlab.store.message_filter import MessageFilter

__all__ = ["BCQ_STORE_UNIT_SIZE", "LOWER", "PHASE", "UPPER", "BatchConsumeQueue"]

log = logging.getLogger(__name__)

_UNIT = BCQ_STORE_UNIT_SIZE
_LONG = struct.Struct(">q")
_SHORT = struct.Struct(">h")
_TOPIC_DIR_MAX = 255
_SHORT_MAX = 0x7FFF
LOWER = "LOWER"  # BoundaryType.LOWER
UPPER = "UPPER"  # BoundaryType.UPPER
PHASE = "batch_consume_queue"  # RecoveryStep.phase of every step this class reports


def _long_at(buf: Any, pos: int) -> int:
    return _LONG.unpack_from(buf, pos)[0]


def _search_base(buf: Any, right: int, target: int) -> int:
    """``BatchConsumeQueue.binarySearch`` over units ``[0, right]`` of ``buf`` on msgBaseOffset:
    the unit holding queue offset ``target`` (the last unit whose base is <= it, on ordered
    units), or -1. Unit indices here; Java's byte positions are the same steps times 46."""
    left, max_right = 0, right
    while left <= right:
        mid = (left + right) // 2
        value = _long_at(buf, mid * _UNIT + MSG_BASE_OFFSET_INDEX)
        if value == target:
            return mid
        if value > target:
            right = mid - 1
        elif mid == left:
            # converging on the left: the next unit may be the one (Java's own comment)
            if mid + 1 <= max_right and _long_at(buf, (mid + 1) * _UNIT + MSG_BASE_OFFSET_INDEX) <= target:
                return mid + 1
            return mid
        else:
            left = mid
    return -1


def _search_time(buf: Any, right: int, target: int, boundary: str) -> int:
    """``BatchConsumeQueue.binarySearchRight`` over units ``[0, right]`` on storeTime, exactly.

    Meant as "the first unit whose time is >= target (LOWER) / the last one equal (UPPER)"; LOWER
    is that (on ordered times). UPPER is not: its two-unit endgame returns the *left* unit
    whenever that one is >= target, so it can stop short of the last equal unit (times
    5,5,9,9,9 and target 5 give unit 0), and when no time equals the target it answers the next
    later unit or -1 (times 0,2,4 and target 1 give -1). rmqlab answers as the broker does."""
    left = 0
    while left <= right:
        mid = (left + right) // 2
        value = _long_at(buf, mid * _UNIT + MSG_STORE_TIME_OFFSET_INDEX)
        if mid == right:
            return mid if value >= target else -1
        if mid == left:
            if value >= target:
                return mid
            left = mid + 1
        elif boundary == LOWER:
            if value < target:
                left = mid + 1
            else:
                right = mid
        elif value <= target:
            left = mid
        else:
            right = mid - 1
    return -1


class BatchConsumeQueue:
    """One topic/queue's batch consume queue (RocketMQ 5.x ``BatchConsumeQueue``).

    State kept between calls, as RocketMQ's fields: ``max_msg_phy_offset_in_commit_log`` (start
    offset of the last unit appended or recovered, -1 none), ``min_offset_in_queue`` (-1 none),
    ``max_offset_in_queue`` (0 none) and ``min_logic_offset`` (the first file's start once
    revised; 0 before, -1 once revised with no file). Every file's positions are multiples of 46.
    """

    def __init__(
        self,
        topic: str,
        queue_id: int,
        store_path: str,
        mapped_file_size: int = BCQ_FILE_SIZE,
        *,
        read_only: bool = False,
        bus: EventBus | None = None,
    ) -> None:
        validate_topic(topic, max_length=_TOPIC_DIR_MAX)
        if isinstance(queue_id, bool) or not isinstance(queue_id, int) or queue_id < 0:
            raise ValueError(f"queue id must be a non-negative int, got {queue_id!r}")
        if mapped_file_size <= 0 or mapped_file_size % _UNIT:
            # RocketMQ takes mapperFileSizeBatchConsumeQueue as configured (no rounding, unlike the
            # ConsumeQueue's getter): with a size not a multiple of 46, a file's last unit does
            # not fit, the file never counts as full, and every put fails from then on
            raise ConfigError(
                f"batch consume queue file size must be a positive multiple of {_UNIT}, not {mapped_file_size}"
            )
        self.topic = topic
        self.queue_id = queue_id
        self.store_path = store_path
        self.mapped_file_size = mapped_file_size
        self.read_only = read_only
        self.bus = bus
        self.queue_dir = os.path.join(os.fspath(store_path), topic, str(queue_id))
        self.name = f"batchconsumequeue/{topic}/{queue_id}"
        self.mapped_file_queue = MappedFileQueue(
            self.queue_dir, mapped_file_size, None, read_only=read_only, bus=bus, name=self.name
        )
        self.max_msg_phy_offset_in_commit_log = -1
        self.min_logic_offset = 0
        self.max_offset_in_queue = 0
        self.min_offset_in_queue = -1
        self.duplicates_skipped = 0
        #: BatchCQ topics have no ConsumeQueueExt (RocketMQ); None, as on a ConsumeQueue without one
        self.consume_queue_ext = None
        # (files list the keys were computed for, {field: (sorted keys, file index per key)}):
        # the floor lookups' view of RocketMQ's offset/time caches, over all files but the last
        self._floor_memo: tuple[list[MappedFile], dict[int, tuple[list[int], list[int]]]] | None = None

    def __repr__(self) -> str:
        return (
            f"BatchConsumeQueue({self.topic!r}, {self.queue_id}, min={self.min_offset_in_queue}, "
            f"max={self.max_offset_in_queue}, files={len(self.mapped_file_queue.mapped_files)})"
        )

    def _check_writable(self, what: str) -> None:
        if self.read_only:
            raise ReadOnlyStore(f"{self.name}: cannot {what} a read-only batch consume queue")

    def _label(self, mf: MappedFile) -> str:
        return f"{self.name}/{mf.name}"

    def _publish(self, steps: list[RecoveryStep]) -> None:
        bus = self.bus
        if bus is not None and bus.active:
            for step in steps:
                bus.publish(step)

    # --- reading single units of a file ----------------------------------------------------------

    @staticmethod
    def _units_in(mf: MappedFile) -> int:
        """Whole units below the file's read position."""
        return max(mf.read_position, 0) // _UNIT

    @staticmethod
    def _unit_field(mf: MappedFile, index: int, field: int) -> int | None:
        """The long at ``field`` of unit ``index`` (``getBatchOffsetIndexByPos``), None when the
        unit is not below the read position or the file is going away (Java: NPE)."""
        sbr = mf.select_mapped_buffer(index * _UNIT, _UNIT)
        if sbr is None:
            return None
        with sbr:
            return _long_at(sbr.buffer, field)

    def _first_key(self, mf: MappedFile, field: int) -> int | None:
        """``getMinMsgOffset``: the first unit's msgBaseOffset/storeTime; None for a new file
        (read position below one unit)."""
        if self._units_in(mf) == 0:
            return None
        return self._unit_field(mf, 0, field)

    def _last_unit(self, mf: MappedFile | None) -> tuple[int, int] | None:
        """``getMaxMsgOffset(file, batchSize=true)``: (msgBaseOffset, batchSize) of the unit just
        below the read position, None when there is none."""
        if mf is None:
            return None
        n = self._units_in(mf)
        if n == 0:
            return None
        sbr = mf.select_mapped_buffer((n - 1) * _UNIT, _UNIT)
        if sbr is None:
            return None
        with sbr:
            return _long_at(sbr.buffer, MSG_BASE_OFFSET_INDEX), _SHORT.unpack_from(sbr.buffer, MSG_BATCH_SIZE_INDEX)[0]

    # --- revise (RocketMQ keeps min/max in fields and revises them at these points) -------------

    def _revise_min_offset_in_queue(self) -> None:
        first = self.mapped_file_queue.get_first_mapped_file()
        if first is None:
            self.max_offset_in_queue = 0
            self.min_offset_in_queue = -1
            self.min_logic_offset = -1
            return
        self.min_logic_offset = first.file_from_offset
        key = self._first_key(first, MSG_BASE_OFFSET_INDEX)
        self.min_offset_in_queue = -1 if key is None else key

    def _revise_max_offset_in_queue(self) -> None:
        files = self.mapped_file_queue.mapped_files
        last = self._last_unit(files[-1] if files else None)
        if last is None and len(files) >= 2:
            # the last file is new (created, nothing written yet): its predecessor holds the max
            last = self._last_unit(files[-2])
        self.max_offset_in_queue = 0 if last is None else last[0] + last[1]

    def _revise_max_and_min_offset_in_queue(self) -> None:
        self._revise_min_offset_in_queue()
        self._revise_max_offset_in_queue()

    # --- load / recover --------------------------------------------------------------------------

    def load(self) -> bool:
        """Map every file of the queue dir (each gets wrote = committed = flushed = fileSize).

        Offsets are not revised here (RocketMQ: only ``recover``, truncation, puts and
        ``correct_min_offset`` revise them): until then min is -1 and max 0."""
        self._floor_memo = None
        return self.mapped_file_queue.load()

    def recover(self) -> list[RecoveryStep]:
        """Find the end of valid units and cut there (spec §3.8, the ConsumeQueue's 3-file walk).

        Walks from the third-to-last file (earlier files are trusted) while files are wholly
        valid; a unit is valid when ``offset >= 0 and size > 0 and msgBaseOffset >= 0 and
        batchSize > 0``. The end of the valid units becomes ``flushed_where``/``committed_where``;
        the file holding it gets its positions there and every later file is deleted (a
        read-only queue only drops them from its list). ``max_msg_phy_offset_in_commit_log`` is
        the start offset of the last valid unit seen; min/max offsets are then revised (max
        from the second-to-last file when the last holds no unit).

        Returns what was kept and cut, each step naming the file and the logic offset (also
        published on the bus). Units kept out of order (a msgBaseOffset not continuing the
        previous unit's batch, a commit log offset not increasing) are reported: RocketMQ does
        not check, and its binary searches assume the order.
        """
        mfq = self.mapped_file_queue
        files = mfq.mapped_files
        self._floor_memo = None
        if not files:
            return []
        steps: list[RecoveryStep] = []
        index = max(0, len(files) - 3)
        if index:
            steps.append(RecoveryStep(
                PHASE, self._label(files[0]), files[0].file_from_offset, "trusted",
                f"{self.name}: {index} file(s) before {files[index].name} are not scanned (only the last 3 are)",
            ))
        size = self.mapped_file_size
        walked: list[tuple[MappedFile, int]] = []
        while True:
            mf = files[index]
            units = units_view(mf.buffer[:size])
            count = valid_prefix(units)
            walked.append((mf, count))
            if count:
                self.max_msg_phy_offset_in_commit_log = int(units["commit_log_offset"][count - 1])
            mf_offset = count * _UNIT
            if mf_offset != size:
                steps.append(self._end_step(mf, units, count))
                break
            index += 1
            if index >= len(files):
                steps.append(RecoveryStep(
                    PHASE, self._label(mf), mf.file_from_offset + size, "keep",
                    f"{self.name}: the last file is full of valid units",
                ))
                break
        del units  # no view of a mapping outlives this point (files may be unmapped below)
        process_offset = mf.file_from_offset + mf_offset
        steps += self._order_steps(walked)
        for later in files[index + 1:]:
            lost = valid_prefix(units_view(later.buffer[:size]))
            steps.append(RecoveryStep(
                PHASE, self._label(later), later.file_from_offset, "delete" if not self.read_only else "drop",
                f"{self.name}: starts past the end of valid units ({process_offset:,}); "
                f"{lost} valid-looking unit(s) in it are lost"
                + (" (read-only: dropped from the view, the file is untouched)" if self.read_only else ""),
            ))
        mfq.flushed_where = process_offset
        mfq.committed_where = process_offset
        if self.read_only:
            self._truncate_in_memory(process_offset)
        else:
            mfq.truncate_dirty_files(process_offset)
        self._revise_max_and_min_offset_in_queue()
        start = walked[0][0]
        if self.max_msg_phy_offset_in_commit_log == -1 and files[0] is not start:
            steps.append(self._trusted_max_phy(files, start))
        steps.append(RecoveryStep(
            PHASE, self._label(mf), process_offset, "recovered",
            f"{self.name}: min offset {self.min_offset_in_queue}, max offset {self.max_offset_in_queue}, "
            f"max physic offset {self.max_msg_phy_offset_in_commit_log}",
        ))
        self._publish(steps)
        return steps

    def _trusted_max_phy(self, files: list[MappedFile], start: MappedFile) -> RecoveryStep:
        """The walk found no valid unit, yet files before it (trusted, not walked) hold units.

        RocketMQ leaves ``maxMsgPhyOffsetInCommitLog`` at -1 then, so its idempotence test lets
        every re-dispatched record in again: the records of the trusted files would be appended
        a second time. rmqlab takes the last unit of the last trusted file instead."""
        before = files[: files.index(start)]
        last = before[-1]
        n = self._units_in(last)
        value = self._unit_field(last, n - 1, 0) if n else None
        if value is not None:
            self.max_msg_phy_offset_in_commit_log = value
        return RecoveryStep(
            PHASE, self._label(last), last.file_from_offset + max(n - 1, 0) * _UNIT,
            "max physic offset from a trusted file",
            f"{self.name}: no valid unit in the scanned files; max physic offset {value} taken from the last unit of "
            f"{last.name} (RocketMQ keeps -1, and would append the re-dispatched records of the trusted files again)",
        )

    def _end_step(self, mf: MappedFile, units: np.ndarray, count: int) -> RecoveryStep:
        """Say why the walk ended inside ``mf``: unwritten bytes, or an invalid unit."""
        pos = count * _UNIT
        if count == len(units):  # a short file (read-only view of a trimmed copy)
            return RecoveryStep(PHASE, self._label(mf), mf.file_from_offset + pos, "keep",
                                f"{self.name}: the file ends after {count} valid units (shorter than "
                                f"{self.mapped_file_size:,} bytes)")
        raw = bytes(mf.buffer[pos : pos + _UNIT])
        if raw == bytes(_UNIT):
            return RecoveryStep(PHASE, self._label(mf), mf.file_from_offset + pos, "keep",
                                f"{self.name}: {count} valid units, then unwritten bytes (end of data)")
        u = unpack_unit(raw, 0)
        rest = units[count + 1 :]
        later_valid = int(np.count_nonzero(
            (rest["commit_log_offset"] >= 0) & (rest["size"] > 0) & (rest["msg_base_offset"] >= 0)
            & (rest["batch_size"] > 0)
        ))
        lost = f"; {later_valid} valid-looking unit(s) after it in this file are cut too" if later_valid else ""
        return RecoveryStep(
            PHASE, self._label(mf), mf.file_from_offset + pos, "truncate",
            f"{self.name}: invalid unit at byte {pos} of {mf.name} (offset={u[0]}, size={u[1]}, "
            f"msgBaseOffset={u[4]}, batchSize={u[5]}): damaged, the queue ends before it{lost}",
        )

    def _order_steps(self, walked: list[tuple[MappedFile, int]]) -> list[RecoveryStep]:
        """Report the first break of order among the recovered units of the walked files (file
        by file, with the boundary between files checked on its own: no copy of the files)."""
        checks = ("msgBaseOffset does not continue the previous unit's batch", "commit log offset does not increase")
        first: list[tuple[MappedFile, int] | None] = [None, None]
        counts = [0, 0]
        prev: tuple[int, int] | None = None  # (end of the previous unit's batch, its commit log offset)
        for mf, count in walked:
            if not count:
                continue
            units = units_view(mf.buffer[: count * _UNIT])
            base = units["msg_base_offset"].astype(np.int64)
            end = base + units["batch_size"].astype(np.int64)
            phy = units["commit_log_offset"].astype(np.int64)
            for c, bad in enumerate((base[1:] != end[:-1], phy[1:] <= phy[:-1])):
                hits = np.flatnonzero(bad)
                at_start = prev is not None and (int(base[0]) != prev[0] if c == 0 else int(phy[0]) <= prev[1])
                counts[c] += int(hits.size) + at_start
                if first[c] is None and (at_start or hits.size):
                    first[c] = (mf, 0 if at_start else int(hits[0]) + 1)
            prev = (int(end[-1]), int(phy[-1]))
            del units, base, end, phy
        steps = []
        for c, what in enumerate(checks):
            hit = first[c]
            if hit is None:
                continue
            mf, i = hit
            steps.append(RecoveryStep(
                PHASE, self._label(mf), mf.file_from_offset + i * _UNIT, "kept out of order",
                f"{self.name}: unit at byte {i * _UNIT} of {mf.name}: {what} ({counts[c]} such unit(s) in the "
                "scanned files); RocketMQ keeps it and its binary searches assume the order, so lookups "
                "near it may pick another unit",
            ))
        return steps

    def _truncate_in_memory(self, offset: int) -> None:
        """``truncateDirtyFiles`` for a read-only queue: same positions; files past ``offset``
        are unmapped and dropped from the list, not deleted (the disk is untouched)."""
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

    @staticmethod
    def _set_positions(mf: MappedFile, pos: int) -> None:
        mf.set_wrote_position(pos)
        mf.set_committed_position(pos)
        mf.set_flushed_position(pos)

    # --- append ----------------------------------------------------------------------------------

    def put_batch_message_position_info(self, offset: int, size: int, tags_code: int, store_timestamp: int,
                                        msg_base_offset: int, batch_size: int) -> bool:
        """Append one unit for the record at commit log ``offset`` (``putBatchMessagePositionInfo``).

        Idempotent as RocketMQ's: a record starting at or before the last unit's record
        (``offset <= max_msg_phy_offset_in_commit_log``: the start offset, not the end as in the
        ConsumeQueue) is taken as already there; returns True without writing. Otherwise the unit
        goes at the end of the last file (a new file when there is none or it is full) whatever
        its msgBaseOffset. False only when the append did not fit.

        Beyond RocketMQ: a unit recovery would reject (``offset < 0``, ``size <= 0``,
        ``msg_base_offset < 0``, ``batch_size`` not in 1..32767) raises ValueError. RocketMQ writes
        it (its dispatch refuses only negative values), and the next recovery ends the queue
        there, losing every later unit.
        """
        if offset <= self.max_msg_phy_offset_in_commit_log:
            self.duplicates_skipped += 1
            return True
        self._check_writable("append to")
        if not is_valid_unit(offset, size, msg_base_offset, batch_size) or batch_size > _SHORT_MAX:
            raise ValueError(
                f"{self.name}: refusing unit offset={offset} size={size} msgBaseOffset={msg_base_offset} "
                f"batchSize={batch_size}: recovery would end the queue at it"
            )
        mfq = self.mapped_file_queue
        mf = mfq.get_last_mapped_file_for(mfq.get_max_offset())
        if mf is None:
            return False
        is_new = mf.read_position < _UNIT
        ok = mf.append_message(pack_unit(offset, size, tags_code, store_timestamp, msg_base_offset, batch_size))
        if ok:
            self.max_msg_phy_offset_in_commit_log = offset
            self.max_offset_in_queue = msg_base_offset + batch_size
            # RocketMQ: "only the first time need to correct the minOffsetInQueue"; a recovered
            # empty first file is not "first created", so min stays -1 until correct_min_offset
            if mf.first_create_in_queue and self.min_offset_in_queue == -1:
                self._revise_min_offset_in_queue()
            if is_new:
                self._floor_memo = None
        return bool(ok)

    def put_message_position_info_wrapper(self, offset: int, size: int, tags_code: int, store_timestamp: int,
                                          msg_base_offset: int, batch_size: int) -> bool:
        """The dispatch of a record's unit (``putMessagePositionInfoWrapper``): a negative
        msgBaseOffset or batchSize is logged and skipped, as RocketMQ does ("[NOTIFYME]unexpected
        dispatch request"); so is a batchSize of 0 (RocketMQ writes that unit, and its next
        recovery ends the queue there). Returns False for a skipped record, else what
        :meth:`put_batch_message_position_info` returns. RocketMQ retries a failed put 30 times,
        a second apart, then marks the logic queues in error: the caller's business here."""
        if msg_base_offset < 0 or batch_size <= 0:
            log.warning("[NOTIFYME]unexpected dispatch request in batch consume queue topic:%s queue:%d offset:%d "
                        "(msgBaseOffset %d, batchSize %d)", self.topic, self.queue_id, offset, msg_base_offset,
                        batch_size)
            return False
        return self.put_batch_message_position_info(offset, size, tags_code, store_timestamp, msg_base_offset,
                                                    batch_size)

    # --- offsets ---------------------------------------------------------------------------------

    def get_max_physic_offset(self) -> int:
        """``maxMsgPhyOffsetInCommitLog``: start offset of the last unit's record (-1 none; after
        a truncation that kept nothing, the truncation offset - 1)."""
        return self.max_msg_phy_offset_in_commit_log

    @property
    def max_physic_offset(self) -> int:
        """:meth:`get_max_physic_offset` under ``ConsumeQueue``'s attribute name, for code that
        takes the max over all queues (RocketMQ does: ``getMaxPhysicOffset`` of each, each in its
        own meaning: a ConsumeQueue's is a record's end, a BatchConsumeQueue's a record's start)."""
        return self.max_msg_phy_offset_in_commit_log

    def get_min_logic_offset(self) -> int:
        return self.min_logic_offset

    def get_min_offset_in_queue(self) -> int:
        """The first unit's msgBaseOffset (moved past expired units by ``correct_min_offset``),
        -1 when none."""
        return self.min_offset_in_queue

    def get_max_offset_in_queue(self) -> int:
        """The last unit's msgBaseOffset + batchSize, 0 when none."""
        return self.max_offset_in_queue

    def get_message_total_in_queue(self) -> int:
        """max - min, as RocketMQ computes it: an empty queue (min -1, max 0) reports 1."""
        return self.max_offset_in_queue - self.min_offset_in_queue

    def estimate_message_count(
        self,
        from_offset: int,
        to_offset: int,
        message_filter: MessageFilter,
        *,
        max_consume_queue_scan: int = 20_000,
        sample_count_threshold: int = 5_000,
    ) -> int:
        """5.x ``BatchConsumeQueue.estimateMessageCount(from, to, filter)``: messages (not units)
        in units that match ``message_filter``, or -1 ("don't know", which
        :meth:`MessageStore.estimate_message_count` turns into ``to - from``).

        The range is units, not offsets: from the unit ``getBatchMsgIndexBuffer(from)`` selects
        (:meth:`find_unit`: the unit whose batch holds ``from``, counted whole) up to, not
        including, the one it selects for ``to``. So ``to`` at or past ``max_offset_in_queue``
        (or ``from`` below the first file) selects no unit and the answer is -1: a filtered
        estimate up to the end of a BatchConsumeQueue is always ``to - from`` at the facade, as
        in 5.3.3. ``from`` and ``to`` in one unit scan nothing (0), or find no file (-1) when that
        unit opens its file (``MappedFileQueue.range`` of an empty range at a file start).

        The scan is the ConsumeQueue's (:func:`estimate_over_files`) with batch sizes as weights:
        ``match``/``raw`` add each unit's batch size, while both limits count units
        (``max_consume_queue_scan`` units scanned, more than ``sample_count_threshold`` units
        matched); sampled, ``(long) (match * (to - from) * 1.0 / raw)``. The filter sees the
        stored tags code (BatchCQ topics have no ext run). RocketMQ never releases the two
        buffers ``getBatchMsgIndexBuffer`` hands it (each call leaves two holds on the files);
        rmqlab holds nothing past the call.
        """
        first = self._locate(from_offset)
        if first is None:
            return -1
        last = self._locate(to_offset)
        if last is None:
            return -1
        phys_from = first[0][first[1]].file_from_offset + first[2] * _UNIT
        phys_to = last[0][last[1]].file_from_offset + last[2] * _UNIT

        def read_units(buf: Any) -> tuple[list[int | None], list[int] | None]:
            units = units_view(bytes(buf))
            return units["tags_code"].tolist(), units["batch_size"].tolist()

        return estimate_over_files(
            self.mapped_file_queue.mapped_files, phys_from, phys_to, _UNIT, read_units, message_filter,
            to_offset - from_offset, max_consume_queue_scan, sample_count_threshold,
        )

    def get_last_offset(self) -> int:
        """Commit log end (offset + size) of the unit ``get(max - 1)`` selects; -1 when there is
        none (RocketMQ: NullPointerException)."""
        unit = self.get(self.max_offset_in_queue - 1)
        return -1 if unit is None else unit[0] + unit[1]

    def get_earliest_unit(self) -> tuple[int, int, int, int, int, int, int, int] | None:
        """``getEarliestUnit``: ``get(min_offset_in_queue)``."""
        return self.get(self.min_offset_in_queue)

    def get_latest_unit(self) -> tuple[int, int, int, int, int, int, int, int] | None:
        """``getLatestUnit``: ``get(max_offset_in_queue - 1)``."""
        return self.get(self.max_offset_in_queue - 1)

    def roll_next_file(self, next_begin_offset: int) -> int:
        """``rollNextFile``: RocketMQ's BatchConsumeQueue answers 0 whatever the offset (so a
        pull that finds no unit at its offset is told to go on from 0; the broker's caller
        decides what to do with that)."""
        return 0

    def is_first_file_available(self) -> bool:
        first = self.mapped_file_queue.get_first_mapped_file()
        return first is not None and first.is_available()

    def is_first_file_exist(self) -> bool:
        return self.mapped_file_queue.get_first_mapped_file() is not None

    def get_total_size(self) -> int:
        """Bytes of all files (``getTotalFileSize``: whole files, written or not)."""
        return self.mapped_file_size * len(self.mapped_file_queue.mapped_files)

    @staticmethod
    def get_unit_size() -> int:
        return _UNIT

    # --- lookups by queue offset -----------------------------------------------------------------

    def _floor_keys(self, files: list[MappedFile], field: int) -> tuple[list[int], list[int]]:
        """Sorted first-unit keys (msgBaseOffset or storeTime) of every file but the last that
        holds a unit, with the file index of each; a later file wins a tie (RocketMQ's cache)."""
        memo = self._floor_memo
        if memo is None or memo[0] is not files:
            memo = (files, {})
            self._floor_memo = memo
        found = memo[1].get(field)
        if found is None:
            table: dict[int, int] = {}
            for i, mf in enumerate(files[:-1]):
                key = self._first_key(mf, field)
                if key is not None:
                    table[key] = i
            keys = sorted(table)
            found = (keys, [table[k] for k in keys])
            memo[1][field] = found
        return found

    def _file_for(self, files: list[MappedFile], value: int, field: int) -> int | None:
        """The file RocketMQ searches for ``value``: the last file when its first key is <= value,
        else the file of the floor key (None when every key is above ``value``)."""
        first_of_last = self._first_key(files[-1], field)
        if first_of_last is not None and first_of_last <= value:
            return len(files) - 1
        keys, where = self._floor_keys(files, field)
        i = bisect.bisect_right(keys, value) - 1
        return where[i] if i >= 0 else None

    def _locate(self, queue_offset: int) -> tuple[list[MappedFile], int, int] | None:
        """``getBatchMsgIndexBuffer``: (files snapshot, file index, unit index in that file)."""
        if queue_offset >= self.max_offset_in_queue:
            return None
        files = self.mapped_file_queue.mapped_files
        if not files:
            return None
        k = self._file_for(files, queue_offset, MSG_BASE_OFFSET_INDEX)
        if k is None:
            return None
        mf = files[k]
        sbr = mf.select_mapped_buffer(0)
        if sbr is None:
            return None
        with sbr:
            n = sbr.size // _UNIT
            if n == 0:
                return None
            i = _search_base(sbr.buffer, n - 1, queue_offset)
        return None if i < 0 else (files, k, i)

    @staticmethod
    def _global_index(files: list[MappedFile], k: int, i: int) -> int:
        return sum(BatchConsumeQueue._units_in(mf) for mf in files[:k]) + i

    def find_unit(self, queue_offset: int) -> int | None:
        """Global index of the unit RocketMQ's ``getBatchMsgIndexBuffer(queue_offset)`` selects.

        None at or past ``max_offset_in_queue``, below the first file's first msgBaseOffset, or
        with no files. Inside the queue: the unit whose batch holds ``queue_offset`` (the last
        unit whose msgBaseOffset is <= it; on a gap between batches, the unit before the gap).
        Offsets below ``min_offset_in_queue`` that are still in the files are found, as in
        RocketMQ (the caller compares with the min offset).
        """
        found = self._locate(queue_offset)
        if found is None:
            return None
        files, k, i = found
        return self._global_index(files, k, i)

    def get(self, queue_offset: int) -> tuple[int, int, int, int, int, int, int, int] | None:
        """The unit :meth:`find_unit` selects, unpacked: ``(commit_log_offset, size, tags_code,
        store_timestamp, msg_base_offset, batch_size, compacted_offset, reserved)``; or None."""
        found = self._locate(queue_offset)
        if found is None:
            return None
        files, k, i = found
        sbr = files[k].select_mapped_buffer(i * _UNIT, _UNIT)
        if sbr is None:
            return None
        with sbr:
            return unpack_unit(sbr.buffer, 0)

    def units_from(self, queue_offset: int, max_units: int) -> np.ndarray:
        """A copy of up to ``max_units`` units from the one :meth:`find_unit` selects, within its
        file (RocketMQ's iterator ends at the file's read position; readers move on to the next
        file by asking again at the next queue offset). Empty where ``find_unit`` is None."""
        found = self._locate(queue_offset)
        if found is None or max_units <= 0:
            return np.empty(0, dtype=BCQ_UNIT_DTYPE)
        files, k, i = found
        sbr = files[k].select_mapped_buffer(i * _UNIT)
        if sbr is None:
            return np.empty(0, dtype=BCQ_UNIT_DTYPE)
        with sbr:
            count = min(max_units, sbr.size // _UNIT)
            return units_view(sbr.buffer[: count * _UNIT]).copy()

    def get_index_buffer(self, queue_offset: int) -> SelectMappedBufferResult | None:
        """``getBatchMsgIndexBuffer``: the units from the one :meth:`find_unit` selects to its
        file's read position, zero-copy; release it (or use ``with``)."""
        found = self._locate(queue_offset)
        if found is None:
            return None
        files, k, i = found
        return files[k].select_mapped_buffer(i * _UNIT)

    def units(self, start_index: int | None = None, end_index: int | None = None) -> np.ndarray:
        """Units ``[start_index, end_index)`` by global index (all files' units below their read
        positions, in file order) as a ``BCQ_UNIT_DTYPE`` copy, for inspection and tests. Python
        slice rules."""
        files = self.mapped_file_queue.mapped_files
        counts = [self._units_in(mf) for mf in files]
        lo, hi, _ = slice(start_index, end_index).indices(sum(counts))
        out = np.empty(max(hi - lo, 0), dtype=BCQ_UNIT_DTYPE)  # (np.concatenate would go native-endian)
        at = first = 0
        for mf, n in zip(files, counts, strict=True):
            a, b = max(lo - first, 0), min(hi - first, n)
            first += n
            if a >= b:
                continue
            sbr = mf.select_mapped_buffer(a * _UNIT, (b - a) * _UNIT)
            if sbr is None:  # going away under us: what is left of the answer stays empty
                return out[:at]
            with sbr:
                out[at : at + b - a] = units_view(sbr.buffer)
            at += b - a
        return out[:at]

    # --- by time ---------------------------------------------------------------------------------

    def get_offset_in_queue_by_time(self, timestamp: int, boundary: str = LOWER, *,
                                    commit_log_min_offset: int | None = None,
                                    pickup_store_timestamp: object = None) -> int:
        """The queue offset for store time ``timestamp`` (ms), exactly as RocketMQ 5.x answers.

        File: the last file if its first unit's time is <= ``timestamp``; else the file whose
        first unit's time is the floor of ``timestamp`` among the others; else the first file.
        In the file: a ``timestamp`` at or past its last unit's time answers that unit's
        msgBaseOffset (for LOWER and UPPER alike, and even when earlier units share that time);
        otherwise :func:`_search_time` picks a unit and its msgBaseOffset is the answer; -1 when
        it finds none (or the file holds no unit). Units below the min offset are not skipped.

        Surprises kept from RocketMQ: a time between two files' ranges answers the *earlier*
        file's last unit (not the later file's first); a time past everything answers the last
        unit's msgBaseOffset (not the max offset); see :func:`_search_time` for UPPER. The
        broker clamps the answer into [min, max] (``DefaultMessageStore``); this method does not.
        No file at all: -1 (RocketMQ: NullPointerException).

        ``commit_log_min_offset`` and ``pickup_store_timestamp`` are accepted and ignored, so a
        caller can ask every kind of queue alike: a unit holds its store time, and RocketMQ's
        BatchConsumeQueue does not skip units below the commit log's min offset.
        """
        if boundary not in (LOWER, UPPER):
            raise ValueError(f"boundary must be {LOWER!r} or {UPPER!r}, not {boundary!r}")
        files = self.mapped_file_queue.mapped_files
        if not files:
            return -1
        k = self._file_for(files, timestamp, MSG_STORE_TIME_OFFSET_INDEX)
        mf = files[0 if k is None else k]  # the cache's miss answer: the first file
        sbr = mf.select_mapped_buffer(0)
        if sbr is None:
            return -1
        with sbr:
            buf = sbr.buffer
            n = sbr.size // _UNIT
            if n == 0:
                return -1
            right = n - 1
            if timestamp >= _long_at(buf, right * _UNIT + MSG_STORE_TIME_OFFSET_INDEX):
                return _long_at(buf, right * _UNIT + MSG_BASE_OFFSET_INDEX)
            mid = _search_time(buf, right, timestamp, boundary)
            return -1 if mid < 0 else _long_at(buf, mid * _UNIT + MSG_BASE_OFFSET_INDEX)

    # --- truncate / min offset / delete ----------------------------------------------------------

    def truncate_dirty_logic_files(self, phy_offset: int) -> list[RecoveryStep]:
        """Drop units whose record starts at or past ``phy_offset`` (the CommitLog's new end).

        Works backwards from the last file, as RocketMQ: a last file whose first unit starts at
        or past ``phy_offset`` is deleted and the next last file examined; otherwise its
        positions end after the last kept unit (kept: valid, starting below ``phy_offset``).
        ``max_msg_phy_offset_in_commit_log`` ends as the last kept unit's offset, or
        ``phy_offset - 1`` when nothing was kept; min/max offsets are revised. Bytes are not
        zeroed. The routine steps (file deleted, positions set) are published on the bus.

        Beyond RocketMQ (returned, and published, as steps naming file and offset):

        * a last file whose first unit is not valid (the zeros of an empty last file, which
          recovery leaves in place) is deleted and the file before it examined, as if its first
          unit started past ``phy_offset``: RocketMQ keeps unit 0 untested, so it would keep a
          zero unit there, read the queue's max offset (0) and max physic offset (0) from it,
          leave the units of the file before untruncated, and lose the units appended after the
          zero unit at the next recovery;
        * a unit whose record starts below ``phy_offset`` but ends past it is cut (it can only be
          garbage: recovery cuts the log between records), as ``ConsumeQueue`` does.
        """
        self._check_writable("truncate")
        mfq = self.mapped_file_queue
        self._floor_memo = None
        self.max_msg_phy_offset_in_commit_log = phy_offset - 1
        cuts: list[RecoveryStep] = []
        routine: list[RecoveryStep] = []
        while True:
            mf = mfq.get_last_mapped_file()
            if mf is None:
                break
            self._set_positions(mf, 0)
            units = units_view(mf.buffer[: self.mapped_file_size])
            kept, cut, drop = self._truncation_point(units, phy_offset)
            if cut is not None:
                cuts.append(self._cut_step(mf, units, cut, phy_offset))
            if drop:
                # first unit at or past the end (RocketMQ), ending past it or not valid: the file goes
                del units
                routine.append(RecoveryStep(PHASE, self._label(mf), mf.file_from_offset, "delete",
                                            f"{self.name}: first unit starts at or past {phy_offset}"))
                mfq.delete_last_mapped_file()
                continue
            self._set_positions(mf, kept * _UNIT)
            self.max_msg_phy_offset_in_commit_log = int(units["commit_log_offset"][kept - 1])
            del units
            routine.append(RecoveryStep(PHASE, self._label(mf), mf.file_from_offset + kept * _UNIT, "truncate",
                                        f"{self.name}: units starting below {phy_offset} kept"))
            break
        self._revise_max_and_min_offset_in_queue()
        self._publish(routine + cuts)
        return cuts

    @staticmethod
    def _truncation_point(units: np.ndarray, phy_offset: int) -> tuple[int, int | None, bool]:
        """(units kept, index of a unit cut beyond RocketMQ's rules or None, delete the file)."""
        n = len(units)
        if n == 0:  # a file shorter than one unit (only a read-only view can meet one)
            return 0, None, False
        off, size = units["commit_log_offset"], units["size"]
        base, batch = units["msg_base_offset"], units["batch_size"]
        o0, s0 = int(off[0]), int(size[0])
        if o0 >= phy_offset:
            return 0, None, True
        if not is_valid_unit(o0, s0, int(base[0]), int(batch[0])):
            return 0, 0, True
        if o0 + s0 > phy_offset:
            return 0, 0, True

        def stops(lo: int, hi: int) -> np.ndarray:
            o, z = off[lo:hi].astype(np.int64), size[lo:hi].astype(np.int64)
            invalid = (o < 0) | (z <= 0) | (base[lo:hi] < 0) | (batch[lo:hi] <= 0)
            return invalid | (o >= phy_offset) | (o + z > phy_offset)

        k = first_in_chunks(n, stops, start=1)
        if k == n:
            return n, None, False
        o, z = int(off[k]), int(size[k])
        valid = is_valid_unit(o, z, int(base[k]), int(batch[k]))
        return k, (k if valid and o < phy_offset < o + z else None), False

    def _cut_step(self, mf: MappedFile, units: np.ndarray, i: int, phy_offset: int) -> RecoveryStep:
        u = units[i]
        o, z = int(u["commit_log_offset"]), int(u["size"])
        if is_valid_unit(o, z, int(u["msg_base_offset"]), int(u["batch_size"])):
            why = (f"points at {o} with size {z}, ending at {o + z}, past the log's end {phy_offset}: garbage, "
                   f"cut there (RocketMQ keeps it, and consumers would read a record the log no longer holds)")
        else:
            why = (f"is not a valid unit (offset={o}, size={z}, msgBaseOffset={int(u['msg_base_offset'])}, "
                   f"batchSize={int(u['batch_size'])}): the file holds no unit and is deleted (RocketMQ keeps "
                   "unit 0 untested, reads the queue's max offset from it, stops there without truncating the "
                   "file before, and its next recovery drops the units appended after it)")
        return RecoveryStep(PHASE, self._label(mf), mf.file_from_offset + i * _UNIT,
                            "truncate at a unit RocketMQ keeps", f"{self.name}: unit {i} of {mf.name} {why}")

    def units_past_log(self, phy_offset: int) -> list[RecoveryStep]:
        """The steps :meth:`truncate_dirty_logic_files` would return, changing nothing (for a
        dry-run recovery plan, and for read-only views)."""
        cuts: list[RecoveryStep] = []
        for mf in reversed(self.mapped_file_queue.mapped_files):
            units = units_view(mf.buffer[: self.mapped_file_size])
            _, cut, drop = self._truncation_point(units, phy_offset)
            if cut is not None:
                cuts.append(self._cut_step(mf, units, cut, phy_offset))
            del units
            if not drop:
                break
        return cuts

    def correct_min_offset(self, min_phy: int) -> None:
        """``correctMinOffset(phyMinOffset)``: revise the min offset from the first file's first
        unit, then move it past the first file's units whose record starts below ``min_phy``
        (to the last such unit's msgBaseOffset + batchSize). Only the first file is looked at.
        Also refreshes the lookup caches (here: forgets the memo)."""
        self._revise_min_offset_in_queue()
        self._floor_memo = None
        first = self.mapped_file_queue.get_first_mapped_file()
        if first is None:
            return
        sbr = first.select_mapped_buffer(0)
        if sbr is None:
            return  # RocketMQ logs "Correct min offset found null cq file"
        with sbr:
            units = units_view(sbr.buffer)
            offsets = units["commit_log_offset"]
            k = first_in_chunks(len(units), lambda lo, hi: offsets[lo:hi] >= min_phy)
            if k > 0:
                self.min_offset_in_queue = int(units["msg_base_offset"][k - 1]) + int(units["batch_size"][k - 1])

    def delete_expired_file(self, min_phy: int, now_ms: int | None = None) -> int:
        """Delete leading files whose last unit's record starts below ``min_phy`` (never the
        last file), then ``correct_min_offset(min_phy)``; returns the number deleted. ``now_ms``
        (the store's clock) times the forced destroy of a file a reader still holds."""
        self._check_writable("delete files of")
        count = self.mapped_file_queue.delete_expired_file_by_offset(min_phy, _UNIT, now_ms)
        self.correct_min_offset(min_phy)
        return int(count)

    # --- flush / lifecycle -----------------------------------------------------------------------

    def flush(self, flush_least_pages: int) -> bool:
        """Flush the file holding ``flushed_where``; True iff nothing moved (RocketMQ's result)."""
        return bool(self.mapped_file_queue.flush(flush_least_pages))

    def destroy(self) -> None:
        """Delete every file and reset the offsets (``destroy``: min -1, max 0, max physic -1;
        ``min_logic_offset`` is left as it was, as in RocketMQ)."""
        self._check_writable("destroy")
        self.max_msg_phy_offset_in_commit_log = -1
        self.min_offset_in_queue = -1
        self.max_offset_in_queue = 0
        self._floor_memo = None
        self.mapped_file_queue.destroy()

    def shutdown(self) -> None:
        """Mark the files unavailable; each is unmapped once its last reader releases it.
        Nothing is deleted; open a new queue to use the files again."""
        self._floor_memo = None
        self.mapped_file_queue.shutdown(0)
