"""The three files of 5.x's TimerMessageStore, as the engine writes them (spec 1.1).

* :class:`TimerWheel` -- ``timerwheel``: created sparse at its full 38,707,200 bytes (RocketMQ's
  ``setLength``), never written whole. RocketMQ works on a copy of the wheel in memory and writes
  the slots that differ into the mapping only at ``flush()`` (every ``timerFlushIntervalMs``,
  not at shutdown: ``TimerWheel.shutdown(false)``). rmqlab keeps the changed slots in a dict over
  the mapping instead of a 38 MB copy: same bytes on disk at the same moments, so a crash or a
  clean stop loses exactly the slot changes RocketMQ loses (recovery rebuilds their ``lastPos``).
* :class:`TimerLog` -- ``timerlog/``: a MappedFileQueue of 52-byte units with the 16-byte
  end-of-file blank (``TimerLog.append``).
* :class:`TimerCheckpointFile` -- ``config/timercheck``: seven longs in a mapped 4096-byte page;
  setting a value changes memory only, ``flush()`` writes them (``TimerCheckpoint``).
"""

from __future__ import annotations

import mmap
import os
from typing import Any

import numpy as np

from rmqlab.codec.timer_checkpoint import TIMER_CHECKPOINT_FILE_SIZE, TimerCheckpoint
from rmqlab.codec.timer_log import (
    UNIT_SIZE,
    TimerLogUnit,
    encode_timer_log_blank,
    needs_blank,
    offset_for_last_unit,
)
from rmqlab.codec.timer_wheel import (
    SLOT_DTYPE,
    SLOT_SIZE,
    SLOTS_TOTAL,
    TimerSlot,
    check_wheel_length,
    wheel_length,
)
from rmqlab.errors import MappedFileError
from rmqlab.events import EventBus
from rmqlab.files.fs import sparse_create
from rmqlab.files.mapped_file import MappedFile
from rmqlab.files.mapped_file_queue import MappedFileQueue

__all__ = ["TimerCheckpointFile", "TimerLog", "TimerWheel"]

class TimerWheel:
    """``TimerWheel``: slot ``(time_ms // precision) % 1,209,600``, valid for a time only when its
    tick field equals ``time_ms // precision``."""

    def __init__(self, path: str, precision_ms: int, slots_total: int = SLOTS_TOTAL) -> None:
        self.path = path
        self.precision_ms = precision_ms
        self.slots_total = slots_total
        self.length = wheel_length(slots_total)
        if os.path.exists(path):
            check_wheel_length(os.path.getsize(path), path, slots_total)
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        sparse_create(path, self.length)
        fd = os.open(path, os.O_RDWR)
        try:
            self._mm: mmap.mmap | None = mmap.mmap(fd, self.length)
        finally:
            os.close(fd)
        self._times = np.frombuffer(self._mm, dtype=SLOT_DTYPE)["time"]
        self._dirty: dict[int, TimerSlot] = {}  # slots changed since the last flush (RocketMQ's copy)

    def index(self, time_ms: int) -> int:
        return (time_ms // self.precision_ms) % (2 * self.slots_total)

    def raw_slot(self, index: int) -> TimerSlot:
        slot = self._dirty.get(index)
        if slot is not None:
            return slot
        if self._mm is None:
            raise MappedFileError(self.path, "timer wheel is closed")
        return TimerSlot.unpack(self._mm, index)

    def get_slot(self, time_ms: int) -> TimerSlot | None:
        """``getSlot``: the slot of ``time_ms``, or None when it holds another tick (RocketMQ's
        ``Slot(-1, -1, -1)``)."""
        slot = self.raw_slot(self.index(time_ms))
        return slot if slot.time == time_ms // self.precision_ms else None

    def put_slot(self, time_ms: int, first_pos: int, last_pos: int, num: int, magic: int) -> None:
        self._dirty[self.index(time_ms)] = TimerSlot(time_ms // self.precision_ms, first_pos, last_pos, num, magic)

    def revise_slot(self, time_ms: int, last_pos: int) -> None:
        """``reviseSlot(time, IGNORE, lastPos, force=true)``: a slot of another tick becomes this
        tick's with ``firstPos = lastPos`` (its ``num``/``magic`` bytes kept, as the 3-argument
        ``putSlot`` leaves them); a slot of this tick gets the new ``lastPos``."""
        idx = self.index(time_ms)
        old = self.raw_slot(idx)
        tick = time_ms // self.precision_ms
        if old.time != tick:
            self._dirty[idx] = TimerSlot(tick, last_pos, last_pos, old.num, old.magic)
        else:
            self._dirty[idx] = TimerSlot(tick, old.first_pos, last_pos, old.num, old.magic)

    def _valid_slots(self, time_start_ms: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(first_pos, last_pos, num)`` of the slots valid in the 14 days from ``time_start_ms``
        (slot ``i`` holds the tick ``start + (i - start % n) % n`` of that window), as in memory:
        dirty slots over the file.

        A never-written slot holds tick 0, which only slot 0 can be expected to hold, so the file is
        read through the raw ``time`` words once (a non-zero test needs no byte swap) and the other
        fields only where a slot could be valid: ~1 ms per open instead of ~25 for whole columns
        of the 1,209,600 slots.
        """
        if self._mm is None:
            raise MappedFileError(self.path, "timer wheel is closed")
        n = 2 * self.slots_total
        start = time_start_ms // self.precision_ms
        slots = np.frombuffer(self._mm, dtype=SLOT_DTYPE)
        idx = slots["time"].view(np.uint64).nonzero()[0]  # (flatnonzero would copy the strided view)
        if not len(idx) or idx[0] != 0:
            idx = np.concatenate((np.zeros(1, np.int64), idx))
        if self._dirty:
            idx = idx[~np.isin(idx, np.fromiter(self._dirty, dtype=np.int64, count=len(self._dirty)))]

        def window_tick(i: Any) -> Any:  # the tick slot(s) ``i`` hold when valid (ints or arrays)
            return start + (i - start % n) % n

        keep = slots["time"][idx].astype(np.int64) == window_tick(idx)
        idx = idx[keep]
        cols = [slots[c][idx].astype(np.int64) for c in ("first_pos", "last_pos", "num")]
        if self._dirty:
            mine = [s for i, s in self._dirty.items() if s.time == window_tick(i)]
            extra = ([s.first_pos for s in mine], [s.last_pos for s in mine], [s.num for s in mine])
            cols = [np.concatenate((c, np.array(e, np.int64))) for c, e in zip(cols, extra, strict=True)]
        return cols[0], cols[1], cols[2]

    def check_phy_pos(self, time_start_ms: int, max_offset: int) -> int:
        """``checkPhyPos``: the smallest ``firstPos`` among slots valid from ``time_start_ms`` whose
        ``lastPos`` lies past ``max_offset`` (Long.MAX_VALUE when none)."""
        first, last, _ = self._valid_slots(time_start_ms)
        hit = last > max_offset
        return int(first[hit].min()) if hit.any() else 2**63 - 1

    def get_all_num(self, time_start_ms: int) -> int:
        """``getAllNum``: the ``num`` of every slot valid from ``time_start_ms`` summed."""
        return int(self._valid_slots(time_start_ms)[2].sum())

    def next_slot_ms(self, start_ms: int, end_ms: int) -> int | None:
        """The first time in ``[start_ms, end_ms)`` (tick steps) whose slot is valid, or None: the
        empty ticks ``dequeue`` would step over one by one, skipped in vectorised chunks."""
        p = self.precision_ms
        t0, t1 = start_ms // p, -(-end_ms // p)
        n = 2 * self.slots_total
        best = None
        for idx, s in self._dirty.items():
            if t0 <= s.time < t1 and s.time % n == idx and (best is None or s.time < best):
                best = s.time
        limit = t1 if best is None else best
        dirty = np.fromiter(self._dirty, dtype=np.int64, count=len(self._dirty)) if self._dirty else None
        t, chunk = t0, 4096
        while t < limit:
            hi = min(limit, t + chunk)
            ticks = np.arange(t, hi, dtype=np.int64)
            idx = ticks % n
            hit = self._times[idx] == ticks
            if dirty is not None:
                hit &= ~np.isin(idx, dirty)
            k = np.flatnonzero(hit)
            if len(k):
                return int(ticks[k[0]]) * p
            t, chunk = hi, min(chunk * 4, n)
        return None if best is None else best * p

    @property
    def dirty_slots(self) -> int:
        return len(self._dirty)

    def flush(self) -> None:
        """Write the changed slots into the mapping and force it (``TimerWheel.flush``)."""
        mm = self._mm
        if mm is None:
            return
        dirty, self._dirty = self._dirty, {}
        for idx, slot in sorted(dirty.items()):
            slot.pack_into(mm, idx)
        if dirty:
            lo, hi = min(dirty) * SLOT_SIZE, (max(dirty) + 1) * SLOT_SIZE
            lo -= lo % mmap.PAGESIZE
            mm.flush(lo, hi - lo)

    def close(self) -> None:
        """Unmap without writing the changed slots (``shutdown(false)``; a crash loses them too)."""
        self._dirty = {}
        mm, self._mm = self._mm, None
        if mm is not None:
            self._times = np.zeros(0, dtype=np.int64)
            mm.close()


class TimerLog:
    """``TimerLog``: the ``timerlog/`` MappedFileQueue and its append rule."""

    def __init__(self, path: str, file_size: int, bus: EventBus | None = None) -> None:
        self.file_size = file_size
        self.mapped_file_queue = MappedFileQueue(path, file_size, bus=bus, name="timerlog")

    def load(self) -> bool:
        return self.mapped_file_queue.load()

    def append(self, unit: bytes) -> int:
        """Append one unit; its absolute offset (-1 if it could not be written). A unit that does
        not fit with 16 bytes to spare ends the file with the blank and goes to the next one."""
        mfq = self.mapped_file_queue
        mf = mfq.get_last_mapped_file_for(0)
        if mf is None:
            return -1
        if needs_blank(mf.wrote_position, self.file_size, len(unit)):
            if not mf.append_message(encode_timer_log_blank(self.file_size - mf.wrote_position)):
                return -1
            mf.wrote_position = self.file_size
            mf = mfq.get_last_mapped_file_for(0)
            if mf is None:
                return -1
        pos = mf.file_from_offset + mf.wrote_position
        return pos if mf.append_message(unit) else -1

    def unit_at(self, offset: int) -> TimerLogUnit | None:
        """The unit at an absolute offset, or None when no file holds 52 written bytes there."""
        mf = self.mapped_file_queue.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        if pos < 0 or pos + UNIT_SIZE > mf.read_position:
            return None
        return TimerLogUnit.unpack(mf.buffer, pos)

    def files(self) -> list[MappedFile]:
        return list(self.mapped_file_queue.mapped_files)

    def delete_expired_files(self, min_commit_log_offset: int) -> list[str]:
        """``deleteExpiredFileByOffsetForTimerLog``: every file but the last whose last unit's
        commit log offset lies below ``min_commit_log_offset`` (its messages are gone), from the
        first on, stopping at the first that does not qualify. Returns their names."""
        mfq = self.mapped_file_queue
        check = offset_for_last_unit(self.file_size)
        gone: list[MappedFile] = []
        for mf in mfq.mapped_files[:-1]:
            if check < 0 or check + UNIT_SIZE > mf.read_position:
                break
            unit = TimerLogUnit.unpack(mf.buffer, check)
            if unit.size != UNIT_SIZE or (unit.magic | 0xF) != 0xF or unit.offset_py >= min_commit_log_offset:
                break
            if not mf.destroy(60_000):
                break
            gone.append(mf)
        if gone:
            mfq.delete_files(gone)
        return [mf.name for mf in gone]


class TimerCheckpointFile:
    """``TimerCheckpoint`` over ``config/timercheck``; ``values`` is what memory holds."""

    def __init__(self, path: str) -> None:
        self.path = path
        existed = os.path.exists(path)
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        sparse_create(path, TIMER_CHECKPOINT_FILE_SIZE)
        fd = os.open(path, os.O_RDWR)
        try:
            self._mm: mmap.mmap | None = mmap.mmap(fd, TIMER_CHECKPOINT_FILE_SIZE)
        finally:
            os.close(fd)
        self.values = TimerCheckpoint.unpack(self._mm, 0, path) if existed else TimerCheckpoint()

    def flush(self) -> None:
        mm = self._mm
        if mm is None:
            return
        self.values.pack_into(mm, 0)
        mm.flush(0, TIMER_CHECKPOINT_FILE_SIZE)

    def close(self, flush: bool = True) -> None:
        if flush:
            self.flush()
        mm, self._mm = self._mm, None
        if mm is not None:
            mm.close()

