"""ConsumeQueueExt: one topic/queue's extension file run under ``consumequeue_ext/`` (spec §3.7).

With ``enable_consume_queue_ext`` (RocketMQ ``enableConsumeQueueExt``, default off) dispatch
writes each record's real tags code and store time (and the broker's filter bitmap, which
rmqlab never computes: ``enableCalcFilterBitMap`` is a broker option, default off) to this run,
and the CQ unit's tags code field holds the unit's *address* (``decorate(ext offset)``).
Readers resolve the address back (:meth:`ConsumeQueueExt.get`). Byte layout and addresses:
:mod:`rmqlab.codec.consume_queue_ext_unit`.

RocketMQ calls the extension "weakly reliable", and it is: units are appended before their CQ
unit, the CQ is flushed before its ext run, and only CQ recovery trims the run (to the last
address the recovered CQ holds). An address whose unit is gone resolves to nothing, and every
reader then treats the unit as matching any tag filter.

Thread-safety: as RocketMQ's, ``put`` is not thread-safe (the dispatcher is the one writer);
``get`` may run concurrently with it (readers hold the file through a SelectMappedBufferResult).
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

import numpy as np

from rmqlab.codec.consume_queue_ext_unit import (
    END_BLANK_DATA_LENGTH,
    END_MARKER,
    MAX_ADDR,
    MAX_EXT_UNIT_SIZE,
    MAX_REAL_OFFSET,
    MIN_EXT_UNIT_SIZE,
    CqExtUnit,
    decode_at,
    decorate,
    encode,
    fits,
    gather_units,
    is_ext_addr,
    undecorate,
    units_end,
)
from rmqlab.errors import ConfigError, CorruptRecord, DiskFull, MappedFileError, ReadOnlyStore
from rmqlab.events import EventBus, FileDeleted, RecoveryStep
from rmqlab.files.mapped_file_queue import MappedFileQueue

if TYPE_CHECKING:
    from rmqlab.files.mapped_file import MappedFile

__all__ = ["PUT_FAILED", "ConsumeQueueExt"]

log = logging.getLogger(__name__)

#: what ``put`` answers when nothing was written (RocketMQ returns 1: not an address)
PUT_FAILED = 1
_PUT_RETRIES = 3
_PHASE = "consume_queue_ext"  # the RecoveryStep phase of what load does to an ext run


class ConsumeQueueExt:
    """RocketMQ ``ConsumeQueueExt`` for one topic/queue.

    Invariants: units are whole and contiguous from byte 0 of each file up to its write position;
    a file that ended early has ``short -1`` at the end of its units and write position =
    ``mapped_file_size``; an address is ``decorate(file_from + position)`` of a unit's first byte.
    """

    def __init__(
        self,
        topic: str,
        queue_id: int,
        store_path: str,
        mapped_file_size: int,
        bit_map_length: int = 64,
        *,
        read_only: bool = False,
        bus: EventBus | None = None,
    ) -> None:
        if mapped_file_size < MIN_EXT_UNIT_SIZE + END_BLANK_DATA_LENGTH:
            # RocketMQ takes any size and then fails every put (a unit never fits); say so instead
            raise ConfigError(f"consume queue ext file size {mapped_file_size} cannot hold one unit "
                              f"({MIN_EXT_UNIT_SIZE} bytes + the 4 it keeps for its end marker)")
        self.topic = topic
        self.queue_id = queue_id
        self.store_path = store_path
        self.mapped_file_size = mapped_file_size
        self.bit_map_length = bit_map_length  # bits; RocketMQ sizes a scratch buffer with it
        self.read_only = read_only
        self.bus = bus
        self.name = f"consumequeue_ext/{topic}/{queue_id}"
        self.queue_dir = os.path.join(os.fspath(store_path), topic, str(queue_id))
        self.mapped_file_queue = MappedFileQueue(
            self.queue_dir, mapped_file_size, None, read_only=read_only, bus=bus, name=self.name
        )
        self.put_failures = 0  # puts that answered PUT_FAILED (RocketMQ only logs them)

    def __repr__(self) -> str:
        return (f"ConsumeQueueExt({self.topic!r}, {self.queue_id}, files={len(self.mapped_file_queue.mapped_files)}, "
                f"max_address={self.get_max_address()})")

    # --- load / recover ----------------------------------------------------------------------

    def load(self) -> bool:
        """Map every file (each gets wrote = committed = flushed = fileSize until recovery)."""
        return self.mapped_file_queue.load()

    #: set by a read-only :meth:`recover` whose last file ends inside a unit: (file, unit offset, length)
    cut_short: tuple[str, int, int] | None = None

    def recover(self) -> list[RecoveryStep]:
        """Walk every file from the first (``size > 0``: skip ``size`` bytes; else the next file)
        and cut the last file where its units end; earlier files keep their full positions.
        Returns what it did, a step a file and one for the end (the recovery plan shows them).

        Only the last file's walk decides the end; the walks of earlier files matter only in
        that a unit running past its file's end raises CorruptRecord (naming the file and
        offset) where RocketMQ's throws and the broker does not start.
        """
        mfq = self.mapped_file_queue
        files = mfq.mapped_files
        if not files:
            return []
        steps = []
        end = 0
        for i, mf in enumerate(files):
            buf = mf.buffer[: self.mapped_file_size]
            try:
                end = units_end(buf)
            except CorruptRecord as exc:
                # Inspection reads a last file whose units run past its end as a copy cut short
                # (the broker never writes a unit across a file's end: it writes the end marker):
                # the run ends where it is cut, and cut_short says so. Else RocketMQ's throw.
                if not (self.read_only and i == len(files) - 1 and exc.reason in ("truncated", "size_out_of_range")):
                    raise exc.with_file(mf.file_name) from None
                end = exc.offset
                self.cut_short = (mf.file_name, end, len(buf))
                why = f"the file's end at {len(buf)}: it is cut short, inside the unit at {end}"
            else:
                why = "the end marker (short -1): the next unit did not fit" \
                    if bytes(buf[end : end + 2]) == END_MARKER else "a size of 0 (unwritten bytes)"
            role = "the run's end" if i == len(files) - 1 else "only the last file's end counts"
            steps.append(RecoveryStep(_PHASE, self._file_label(mf), mf.file_from_offset + end, f"units end at {end}",
                                      f"{self.name}: walked from byte 0 to {why}; {role}"))
        process_offset = files[-1].file_from_offset + end
        mfq.flushed_where = process_offset
        mfq.committed_where = process_offset
        self._truncate_files(process_offset)
        steps.append(RecoveryStep(_PHASE, self._file_label(files[-1]), process_offset, f"positions set to {end}",
                                  f"{self.name}: the run ends at {process_offset:,}"))
        return steps

    def _file_label(self, mf: MappedFile) -> str:
        return f"{self.name}/{mf.name}"

    def _truncate_files(self, offset: int) -> list[MappedFile]:
        """Positions of the file holding ``offset`` set to it, later files deleted (dropped from
        the list only when read-only: inspection); returns the files dropped."""
        mfq = self.mapped_file_queue
        later = [mf for mf in mfq.mapped_files if offset < mf.file_from_offset]
        if not self.read_only:
            mfq.truncate_dirty_files(offset)
            return later
        # a read-only run (inspection): the same positions, later files dropped from the list only
        for mf in mfq.mapped_files:
            if mf.file_from_offset <= offset < mf.file_from_offset + self.mapped_file_size:
                pos = offset % self.mapped_file_size
                mf.wrote_position = mf.committed_position = mf.flushed_position = pos
        for mf in later:
            mf.close()
        mfq.delete_files(later)
        return later

    # --- write -------------------------------------------------------------------------------

    def put(self, unit: CqExtUnit) -> int:
        """Append ``unit``; its address (``<= MAX_ADDR``), or ``PUT_FAILED`` (1) when it is too big,
        the address space is used up, or three tries found no room (RocketMQ logs and answers 1;
        the caller then stores the plain tags code). A unit that does not fit in the last file
        ends that file with the ``short -1`` marker and goes to the next file."""
        if self.read_only:
            raise ReadOnlyStore(f"{self.name}: cannot append to a read-only consume queue ext")
        size = unit.size
        if size > MAX_EXT_UNIT_SIZE:
            log.error("Size of cq ext unit is greater than %d, %r", MAX_EXT_UNIT_SIZE, unit)
            return self._failed()
        mfq = self.mapped_file_queue
        if mfq.get_max_offset() + size > MAX_REAL_OFFSET:
            log.warning("Capacity of ext is maximum! %d, %d", mfq.get_max_offset(), size)
            return self._failed()
        data = encode(unit)
        try:
            for _ in range(_PUT_RETRIES):
                mf = mfq.get_last_mapped_file()
                if mf is None or mf.is_full():
                    mf = mfq.get_last_mapped_file_for(0)
                if mf is None:
                    log.error("Create mapped file when save consume queue extend, %r", unit)
                    continue
                wrote = mf.wrote_position
                if not fits(size, self.mapped_file_size, wrote):
                    self._fill_to_end(mf, wrote)
                    log.info("No enough space(need:%d, has:%d) of file %s, so fill to end",
                             size, self.mapped_file_size - wrote - END_BLANK_DATA_LENGTH, mf.file_name)
                    continue
                if mf.append_message(data):
                    return decorate(mf.file_from_offset + wrote)
        except (DiskFull, MappedFileError, OSError) as exc:  # RocketMQ catches Throwable here
            log.error("Save consume queue extend error, %r: %s", unit, exc)
        return self._failed()

    def _failed(self) -> int:
        self.put_failures += 1
        return PUT_FAILED

    def _fill_to_end(self, mf: MappedFile, wrote: int) -> None:
        """``fullFillToEnd``: ``short -1`` at the write position, then the file counts as full."""
        assert mf.wrote_position == wrote
        mf.append_message(END_MARKER)
        mf.set_wrote_position(self.mapped_file_size)

    # --- read --------------------------------------------------------------------------------

    def get(self, address: int) -> CqExtUnit | None:
        """The unit at ``address``, or None: not an ext address, no file holds it, at or past the
        write position, or zeros/the end marker there. Like RocketMQ, address 0 (``decorate(0)``)
        falls back to the first file when no file holds offset 0 (its first head was deleted).
        A unit cut off by the write position raises CorruptRecord naming file and offset (Java
        throws a BufferUnderflowException there)."""
        if not is_ext_addr(address):
            return None
        real = undecorate(address)
        mf = self.mapped_file_queue.find_mapped_file_by_offset(real, real == 0)
        if mf is None:
            return None
        pos = real % self.mapped_file_size
        sbr = mf.select_mapped_buffer(pos)
        if sbr is None:
            log.warning("[BUG] Consume queue extend unit(%d) is not found!", real)
            return None
        try:
            return decode_at(sbr.buffer, 0)
        except CorruptRecord as exc:
            raise exc.with_file(mf.file_name, pos) from None
        finally:
            sbr.release()

    def resolve(self, addresses: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(found, tags_code)`` for many addresses at once (int64; values that are not ext
        addresses are not found): one hold and one numpy gather per ext file they fall in.

        ``found`` holds only where :meth:`get` returns a unit -- everywhere it does but for
        address 0 once the run's first file is deleted, which ``get`` reads from the first file
        -- and ``tags_code`` is then that unit's. Every other address is left to :meth:`get`,
        which answers it (that fallback, None, or the CorruptRecord of a unit cut off by the
        write position), so those rules stay in one place. A tag filter over a get_message
        window costs ~0.1 us a unit this way instead of ~2 us through ``get``.
        """
        addr = np.asarray(addresses, dtype=np.int64)
        is_addr = addr <= MAX_ADDR
        found = np.zeros(len(addr), dtype=bool)
        tags = np.zeros(len(addr), dtype=np.int64)
        if not is_addr.any():
            return found, tags
        # undecorate in int64: for a negative address, address - Long.MIN_VALUE clears the sign bit
        real = addr & np.int64(undecorate(-1))
        size = self.mapped_file_size
        starts = np.where(is_addr, real - real % size, -1)
        candidates = starts[is_addr]
        lo, hi = int(candidates.min()), int(candidates.max())
        # (a reader's window nearly always falls in one file: np.unique costs more than the gather)
        mfq = self.mapped_file_queue
        for start in [lo] if lo == hi else np.unique(candidates).tolist():
            mf = mfq.find_mapped_file_by_offset(start)
            # (file names are multiples of the file size: the file holding ``start`` then holds
            # every real offset of [start, start + size), as get finds it)
            if mf is None or mf.file_from_offset != start or not mf.hold():
                continue
            try:
                # get's view: from the unit to the read position (select_mapped_buffer)
                hit, t, _ = gather_units(mf.buffer[: mf.read_position], np.where(starts == start, real - start, -1),
                                         whole=True)
            finally:
                mf.release()
            if lo == hi:
                return hit, t
            found |= hit
            tags = np.where(hit, t, tags)
        return found, tags

    def get_max_address(self) -> int:
        """The address the next unit would get in the last file (``decorate(0)`` when empty)."""
        mf = self.mapped_file_queue.get_last_mapped_file()
        if mf is None:
            return decorate(0)
        return decorate(mf.file_from_offset + mf.wrote_position)

    def get_min_address(self) -> int:
        """The address of the first file's first byte (``decorate(0)`` when empty)."""
        mf = self.mapped_file_queue.get_first_mapped_file()
        return decorate(0) if mf is None else decorate(mf.file_from_offset)

    def get_total_size(self) -> int:
        return len(self.mapped_file_queue.mapped_files) * self.mapped_file_size

    # --- truncate / delete -------------------------------------------------------------------

    def truncate_by_max_address(self, max_address: int) -> list[RecoveryStep]:
        """Cut the run just after the unit at ``max_address`` (files past it deleted). Nothing
        happens when ``max_address`` is not an ext address or resolves to no unit (RocketMQ logs
        "[BUG] address ... not found" then). Returns what it did (one step, and one a deleted
        file), for the recovery plan."""
        if not is_ext_addr(max_address):
            return [RecoveryStep(_PHASE, self.name, 0, "nothing cut",
                                 f"{self.name}: no ext address among the consume queue units recovery kept")]
        real = undecorate(max_address)
        unit = self.get(max_address)
        if unit is None:
            log.error("[BUG] address %d of consume queue extend not found!", max_address)
            return [RecoveryStep(_PHASE, self.name, real, "nothing cut",
                                 f"{self.name}: the consume queue's last ext address {max_address} (offset {real:,}) "
                                 "resolves to no unit ([BUG] address not found)")]
        end = real + unit.size
        before = self.mapped_file_queue.get_max_offset()
        dropped = self._truncate_files(end)
        mf = self.mapped_file_queue.find_mapped_file_by_offset(real)
        label = self._file_label(mf) if mf is not None else self.name
        gone = f"{before - end:,} byte(s) of units after it dropped" if before > end else "nothing after it"
        steps = [RecoveryStep(_PHASE, label, end, f"cut at {end % self.mapped_file_size}",
                              f"{self.name}: truncate by max address: the run ends after the unit at offset {real:,} "
                              f"({unit.size} B), the last ext address the recovered consume queue holds; {gone}")]
        steps += [RecoveryStep(_PHASE, self._file_label(f), f.file_from_offset, "delete file",
                               f"{self.name}: starts after the unit at the last address") for f in dropped]
        return steps

    def truncate_by_min_address(self, min_address: int) -> list[RecoveryStep]:
        """Delete every file that ends before ``min_address``'s offset (``fileFrom + fileSize <
        real offset``, strictly; dropped from the list only when read-only: inspection); returns
        one step per file, for the recovery plan. Not an ext address: nothing happens."""
        if not is_ext_addr(min_address):
            return []
        real = undecorate(min_address)
        doomed = [mf for mf in self.mapped_file_queue.mapped_files
                  if mf.file_from_offset + self.mapped_file_size < real]
        if self.read_only:
            for mf in doomed:
                mf.close()
        else:
            doomed = [mf for mf in doomed if mf.destroy(1000)]
            if self.bus is not None and self.bus.active:
                for mf in doomed:
                    self.bus.publish(FileDeleted(self.name, mf.file_name, mf.file_from_offset, "ext_min_address"))
        self.mapped_file_queue.delete_files(doomed)
        return [RecoveryStep(_PHASE, self._file_label(mf), mf.file_from_offset, "delete file",
                             f"{self.name}: ends before offset {real:,}, the ext address of the consume queue's "
                             "first unit at or past the CommitLog's min offset (correctMinOffset: "
                             "truncateByMinAddress)") for mf in doomed]

    # --- flush / lifecycle -------------------------------------------------------------------

    def flush(self, flush_least_pages: int) -> bool:
        """Flush the file holding ``flushed_where``; True iff nothing moved."""
        return bool(self.mapped_file_queue.flush(flush_least_pages))

    def destroy(self) -> None:
        """Delete every file and the queue directory."""
        self.mapped_file_queue.destroy()

    def shutdown(self) -> None:
        """Unmap the files once their readers release them; nothing is deleted."""
        self.mapped_file_queue.shutdown(0)

    def close(self) -> None:
        """Unmap every file now (read-only views)."""
        self.mapped_file_queue.close()
