"""MappedFile: one fixed-size file mapped into memory, with RocketMQ's three pointers and refcount.

Mirrors ``MappedFile`` (4.9.8) / ``DefaultMappedFile`` (5.x), spec §7.1, §7.2, §7.6. Positions are
ints relative to the file start (absolute offset = ``file_from_offset + position``)::

    0          flushed_position   committed_position   wrote_position           file_size
    |==========|==================|====================|........................|
     on disk     in the file (page  in the write buffer   free
                 cache), not forced (TSP only)

Invariants: ``0 <= flushed_position <= read_position <= wrote_position <= file_size`` where
``read_position`` is ``committed_position`` while the file holds a TransientStorePool write buffer
and ``wrote_position`` otherwise. Without a write buffer RocketMQ does not maintain
``committed_position`` (``commit`` "regards wrotePosition as committedPosition" and returns
it); rmqlab keeps that, so a plain file's ``committed_position`` stays where load/truncate put it.

Thread-safety (as in RocketMQ): one writer thread appends; one flush (and one commit) thread calls
``flush``/``commit``; any number of readers call ``select_mapped_buffer``. Pointers are plain ints
(a read sees the old or the new value, never a torn one). ``hold``/``release`` are locked.

Pre-faulting (:meth:`MappedFile.prefault`): the first write to each page of a fresh mapping takes
a page fault (~0.3-0.45 us per 1 KiB record measured, a quarter of a put). ``prefault`` lets a
service thread (``rmqlab.store.prefault``) fault the pages just ahead of the writer beforehand with
``madvise(MADV_POPULATE_WRITE)`` -- without the GIL, so on another core. The pages stay zeros
(no file byte changes) and ``flush`` still forces only ``[flushed, read position)``, so the
pre-faulted pages past the writer are never forced by a flush.

Reference counting (``ReferenceResource``): the file starts with one reference, its own.
``select_mapped_buffer`` takes another, released by the result. ``destroy`` first marks the file
unavailable and drops the file's own reference; the mapping is closed when the count reaches 0
and the file is deleted by the ``destroy`` call that finds the cleanup over. If readers still hold
references, a ``destroy`` at least ``interval_forcibly_ms`` after the first one forces the count
negative and deletes anyway. In Python a reader's memoryview keeps the pages alive even then (the
mapping is closed when the last view goes), so a forced destroy never crashes a reader.
"""

from __future__ import annotations

import errno
import mmap
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from rmqlab.clock import SystemClock
from rmqlab.config import SYNC_FLUSH
from rmqlab.errors import DiskFull, MappedFileError, ReadOnlyStore
from rmqlab.events import EventBus, FileCreated, FileWarmed
from rmqlab.files.fs import (
    address_of,
    madvise_willneed,
    msync_range,
    populate_write,
    sparse_create,
    try_mlock,
)

if TYPE_CHECKING:
    from rmqlab.files.transient_store_pool import TransientStorePool

__all__ = ["OS_PAGE_SIZE", "AppendFn", "MappedFile", "SelectMappedBufferResult", "WarmResult"]

OS_PAGE_SIZE = 4096
_PAGE = mmap.PAGESIZE  # msync needs a page-aligned start
#: how far past a write :meth:`MappedFile.reserve` makes pages writable (one call per 64 pages;
#: at most 1/128 of the file, so a 6 MB ConsumeQueue file stays sparse)
RESERVE_AHEAD = 256 * 1024
_can_populate = True  # False once the kernel said MADV_POPULATE_WRITE does not exist (< 5.14)

#: ``fn(buf, pos, max_blank, file_from_offset) -> bytes written`` (:meth:`MappedFile.append_with`)
AppendFn = Callable[[memoryview, int, int, int], int]

_system_clock = SystemClock()


@dataclass(frozen=True, slots=True)
class WarmResult:
    """What :meth:`MappedFile.warm_mapped_file` did: pages touched, forces, mlock/madvise."""

    file: str
    pages: int
    flushes: int
    mlocked: bool
    madvised: bool


class SelectMappedBufferResult:
    """A zero-copy window on a mapped file; holds one reference until :meth:`release`.

    ``start_offset`` is absolute (``file_from_offset + pos``); ``buffer`` is a memoryview slice of
    the mapping (writes to the file are visible through it). Use as a context manager or call
    ``release()`` once; after release the view is released too unless something (e.g. a numpy
    array) still exports it, in which case it stays valid for that holder.
    """

    __slots__ = ("_released", "buffer", "mapped_file", "size", "start_offset")

    def __init__(
        self, start_offset: int, buffer: memoryview, size: int, mapped_file: MappedFile
    ) -> None:
        self.start_offset = start_offset
        self.buffer = buffer
        self.size = size
        self.mapped_file = mapped_file
        self._released = False

    def release(self) -> None:
        if self._released:
            return
        self._released = True
        try:
            self.buffer.release()
        except BufferError:
            pass
        self.mapped_file.release()

    def __enter__(self) -> SelectMappedBufferResult:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"SelectMappedBufferResult(start_offset={self.start_offset}, size={self.size})"


class MappedFile:
    """One mapped file of ``file_size`` bytes named by its start offset (see module docstring).

    ``MappedFile(path, size)`` creates the file sparse at full size if missing (an existing shorter
    file is extended, like ``FileChannel.map``); positions start at 0 and the owner (queue load,
    recovery) sets them. ``read_only=True`` never creates anything: it maps an existing file with
    ``ACCESS_READ``, accepts a file shorter than ``file_size`` (``mapped_length`` is what was
    mapped), starts with all positions at ``mapped_length`` and raises
    :class:`~rmqlab.errors.ReadOnlyStore` on any write, commit, warm or destroy.
    """

    __slots__ = (
        "__weakref__",
        "_addr",
        "_available",
        "_bus",
        "_channel_written",
        "_cleanup_over",
        "_counted",
        "_fd",
        "_first_shutdown_ts",
        "_limit",
        "_lock",
        "_mm",
        "_pool",
        "_ref_count",
        "_target",
        "_write_buffer",
        "buffer",
        "committed_position",
        "file_from_offset",
        "file_name",
        "file_size",
        "first_create_in_queue",
        "flushed_position",
        "mapped_length",
        "name",
        "queue_name",
        "read_only",
        "store_timestamp",
        "writable_to",
        "wrote_position",
    )

    _total_mapped_files = 0
    _total_mapped_virtual_memory = 0
    _counter_lock = threading.Lock()

    def __init__(
        self,
        file_name: str,
        file_size: int,
        *,
        read_only: bool = False,
        transient_store_pool: TransientStorePool | None = None,
        bus: EventBus | None = None,
        queue_name: str = "",
        preallocated: bool = False,
    ) -> None:
        self.file_name = file_name
        self.name = os.path.basename(file_name)
        try:
            self.file_from_offset = int(self.name)
        except ValueError:
            raise MappedFileError(file_name, "file name is not a number") from None
        if file_size <= 0:
            raise MappedFileError(file_name, f"file size must be positive, got {file_size}")
        self.file_size = file_size
        self.read_only = read_only
        self.queue_name = queue_name
        self.store_timestamp = 0
        self.first_create_in_queue = False
        self._bus = bus
        self._lock = threading.Lock()
        self._ref_count = 1
        self._available = True
        self._cleanup_over = False
        self._counted = False
        self._first_shutdown_ts = 0
        self._channel_written = False
        self._pool = None
        self._write_buffer: memoryview | None = None
        self._fd: int | None = None
        created = False
        if read_only:
            self._mm = self._map_read_only()
            self._limit = -1  # every append takes the slow branch, which raises ReadOnlyStore
        else:
            self._mm, created = self._map_writable(transient_store_pool)
            self._limit = file_size
        self.mapped_length = len(self._mm) if self._mm is not None else 0
        # the mapping's address, for msync without the GIL (0: use mmap.flush)
        self._addr = address_of(self._mm) if self._mm is not None and not read_only else 0
        self.buffer = memoryview(self._mm) if self._mm is not None else memoryview(b"")
        self._target = self._write_buffer if self._write_buffer is not None else self.buffer
        start = self.mapped_length if read_only else 0
        self.wrote_position = self.committed_position = self.flushed_position = start
        #: pages below this offset take a write without a fault: pre-faulted (:meth:`prefault`)
        #: or made writable (:meth:`reserve`); writers check it before writing past it
        self.writable_to = 0
        with MappedFile._counter_lock:
            MappedFile._total_mapped_files += 1
            MappedFile._total_mapped_virtual_memory += self.mapped_length
            self._counted = True  # in the totals until unmapped (once, however often _unmap runs)
        if created and bus is not None and bus.active:
            bus.publish(
                FileCreated(queue_name, file_name, self.file_from_offset, file_size, preallocated)
            )

    def _map_read_only(self) -> mmap.mmap | None:
        try:
            fd = os.open(self.file_name, os.O_RDONLY)
        except FileNotFoundError:
            raise MappedFileError(
                self.file_name, "does not exist (a read-only mapping never creates files)"
            ) from None
        try:
            length = min(os.fstat(fd).st_size, self.file_size)
            return mmap.mmap(fd, length, access=mmap.ACCESS_READ) if length > 0 else None
        finally:
            os.close(fd)

    def _map_writable(self, pool: TransientStorePool | None) -> tuple[mmap.mmap, bool]:
        try:
            created = sparse_create(self.file_name, self.file_size)
            fd = os.open(self.file_name, os.O_RDWR)
        except OSError as exc:
            raise MappedFileError(self.file_name, f"cannot create or open: {exc}") from exc
        keep_fd = False
        try:  # the descriptor is closed on every way out but the one that keeps it (an interrupt too)
            try:
                mm = mmap.mmap(fd, self.file_size)
            except (OSError, ValueError) as exc:
                raise MappedFileError(
                    self.file_name, f"cannot map {self.file_size} bytes: {exc}"
                ) from exc
            if pool is not None:
                self._pool = pool
                self._write_buffer = pool.borrow_buffer()  # None: no buffer left, write to the mmap
            if self._write_buffer is not None:
                self._fd = fd  # the "file channel" commit writes through
                keep_fd = True
            return mm, created
        finally:
            if not keep_fd:
                os.close(fd)  # the mmap keeps its own descriptor

    # ---------------------------------------------------------------------------------------
    # pointers

    def set_wrote_position(self, pos: int) -> None:
        self.wrote_position = pos

    def set_committed_position(self, pos: int) -> None:
        self.committed_position = pos

    def set_flushed_position(self, pos: int) -> None:
        self.flushed_position = pos

    @property
    def read_position(self) -> int:
        """Bytes readers may see: committed with a write buffer (TSP), else wrote."""
        return self.committed_position if self._write_buffer is not None else self.wrote_position

    def is_full(self) -> bool:
        return self.wrote_position == self.file_size

    @property
    def write_buffer(self) -> memoryview | None:
        """The borrowed TransientStorePool buffer, or None (writes go to the mapping)."""
        return self._write_buffer

    @property
    def write_target(self) -> memoryview:
        """Where appends land: the write buffer if held, else :attr:`buffer` (the mapping)."""
        return self._target

    # ---------------------------------------------------------------------------------------
    # appending (hot path: keep these short; no events, no locks)

    def append_message(self, data: bytes | bytearray | memoryview) -> bool:
        """Copy ``data`` at the wrote position; False (nothing written) if it does not fit."""
        pos = self.wrote_position
        end = pos + len(data)
        if end > self._limit:
            if self.read_only:
                raise ReadOnlyStore(f"{self.file_name}: mapped read-only")
            return False
        if end > self.writable_to:
            self.reserve(end)
        self._target[pos:end] = data
        self.wrote_position = end
        return True

    def append_with(self, fn: AppendFn) -> int:
        """Let ``fn(buf, pos, max_blank, file_from_offset)`` write in place; advance by its result.

        ``buf`` is the write target (pool buffer or mapping), ``pos`` the wrote position,
        ``max_blank = file_size - pos``. Returns the count ``fn`` returned, or -1 without calling
        ``fn`` when the file is already full (RocketMQ's "UNKNOWN_ERROR" branch).
        """
        pos = self.wrote_position
        if pos >= self._limit:
            if self.read_only:
                raise ReadOnlyStore(f"{self.file_name}: mapped read-only")
            return -1
        n = fn(self._target, pos, self._limit - pos, self.file_from_offset)
        self.wrote_position = pos + n
        return n

    def advance_wrote_position(self, n: int) -> None:
        """Publish ``n`` bytes the single writer already copied into :attr:`write_target` at the
        wrote position (the in-place form of :meth:`append_with` without a callback).

        Raises ``ReadOnlyStore`` on a read-only file and ``MappedFileError`` past the file end
        (nothing moves then).
        """
        self.check_advance(n)
        self.wrote_position += n

    def check_advance(self, n: int) -> None:
        """Raise what :meth:`advance_wrote_position` would raise for ``n`` bytes, moving
        nothing: a writer that moves the position itself (as part of a larger commit) checks
        first."""
        if self.wrote_position + n > self._limit or n < 0:
            if self.read_only:
                raise ReadOnlyStore(f"{self.file_name}: mapped read-only")
            raise MappedFileError(self.file_name, f"cannot advance {n} bytes past the file end")

    # ---------------------------------------------------------------------------------------
    # room on disk: a write to a page the file system has no block for raises SIGBUS

    def reserve(self, end: int) -> None:
        """Make the pages from the writer's up to ``end`` (and up to ``RESERVE_AHEAD`` past it,
        at most 1/128 of the file) writable before an append writes there, or raise
        :class:`~rmqlab.errors.DiskFull`.

        A mapping's first write to a page of a sparse file makes the file system allocate its
        block; with no space left the kernel answers with SIGBUS, which kills the process (a
        notebook's kernel, the broker with it). ``MADV_POPULATE_WRITE`` does the allocation
        without writing and says EFAULT instead, so a full disk becomes an error here, before
        any byte is written. Pages below :attr:`writable_to` are done already (the pre-fault
        service usually keeps the writer inside them: then this is one comparison).
        A no-op for a read-only file, a TransientStorePool buffer (anonymous memory: its commit
        writes with ``pwrite``, which says ENOSPC) and where the kernel cannot populate.
        """
        if end <= self.writable_to or self._write_buffer is not None or self.read_only:
            return
        stop = min(self.file_size, end + min(RESERVE_AHEAD, self.file_size >> 7))  # a small file stays sparse
        if self.populate(self._not_writable_from(), stop):
            stop = self.file_size if stop >= self.file_size else -(-stop // _PAGE) * _PAGE
            if stop > self.writable_to:
                self.writable_to = stop

    def populate(self, start: int, end: int) -> bool:
        """Make the pages of ``[start, end)`` writable now (see :meth:`reserve`); True when
        they are (or nothing can be known: the kernel cannot populate), False when the kernel
        refused for a passing reason. Raises :class:`~rmqlab.errors.DiskFull` (naming the file
        and ``start``) when a write there would raise SIGBUS."""
        global _can_populate
        start -= start % _PAGE
        if not _can_populate:
            return True
        err = self._populate_errno(start, min(end, self.file_size))
        if err is None:
            return True
        if err == errno.EFAULT:
            raise DiskFull(self.file_name, start)
        if err < 0:
            _can_populate = False  # (the range is page aligned: EINVAL means an older kernel)
        return err <= 0

    def _not_writable_from(self) -> int:
        """Where the pages not made writable yet begin: :attr:`writable_to`, or the writer's page
        if it is past it (what :meth:`reserve` and :meth:`prefault` populate from)."""
        wrote = self.wrote_position
        return max(self.writable_to, wrote - wrote % _PAGE)

    def _populate_errno(self, start: int, end: int) -> int | None:
        """:func:`~rmqlab.files.fs.populate_write` over ``[start, end)`` under a hold (the
        mapping cannot go away meanwhile): its answer, or None when nothing was asked (an empty
        range, no mapping address, a file being shut down)."""
        if end <= start or not self._addr or not self.hold():
            return None
        try:
            if self._mm is None:
                return None
            return populate_write(self._addr + start, end - start)
        finally:
            self.release()

    # ---------------------------------------------------------------------------------------
    # pre-faulting (a service thread, ahead of the writer)

    @property
    def prefaulted_position(self) -> int:
        """Pages below this position were pre-faulted by :meth:`prefault` (0: none yet)."""
        return self.writable_to

    def prefault(self, upto: int) -> int:
        """Pre-fault writable the pages from the last mark (at first the wrote position rounded
        down to a page) up to ``upto`` rounded down to a page (the file's end if ``upto`` reaches
        it), so the writer's first touch of them costs no page fault; returns the bytes
        pre-faulted (0: nothing to do or not applicable), or -1 when the kernel does not support
        or refused ``MADV_POPULATE_WRITE`` (callers stop trying).

        Only for a writable file whose appends go to the mapping: a no-op for a read-only file,
        while a TransientStorePool buffer is the write target, and once the file is shut down or
        destroyed (a reference is held during the call, so the mapping cannot go away under it).
        Meant for one service thread while the put thread appends: it only faults pages at or
        after the writer's page, and a page faulted writable keeps its bytes (zeros there), so
        no file byte changes; nothing is forced (the kernel may write the zero pages back later).
        """
        if self.read_only or self._write_buffer is not None or not self._addr:
            return 0
        end = self.file_size if upto >= self.file_size else upto - upto % _PAGE  # page aligned
        start = self._not_writable_from()
        if not _can_populate:
            return -1
        err = self._populate_errno(start, end)
        if err is None:
            return 0
        if err:  # a full disk (EFAULT) may pass: the writer's reserve() says so, this tries again
            return 0 if err == errno.EFAULT else -1
        if end > self.writable_to:
            self.writable_to = end
        return end - start

    # ---------------------------------------------------------------------------------------
    # commit / flush (spec §7.2)

    @staticmethod
    def _page_rule(full: bool, ahead: int, behind: int, least_pages: int) -> bool:
        if full:
            return True
        if least_pages > 0:
            return ahead // OS_PAGE_SIZE - behind // OS_PAGE_SIZE >= least_pages
        return ahead > behind

    def is_able_to_commit(self, commit_least_pages: int) -> bool:
        return self._page_rule(
            self.is_full(), self.wrote_position, self.committed_position, commit_least_pages
        )

    def is_able_to_flush(self, flush_least_pages: int) -> bool:
        return self._page_rule(
            self.is_full(), self.read_position, self.flushed_position, flush_least_pages
        )

    def commit(self, commit_least_pages: int) -> int:
        """Copy ``write_buffer[committed:wrote]`` into the file (pwrite); returns committed.

        Without a write buffer returns ``wrote_position`` and changes nothing (RocketMQ). The
        buffer goes back to the pool once ``committed == file_size``.
        """
        wb = self._write_buffer
        if wb is None:
            if self.read_only:
                raise ReadOnlyStore(f"{self.file_name}: mapped read-only")
            return self.wrote_position
        if self.is_able_to_commit(commit_least_pages) and self.hold():
            try:
                self._commit0(wb)
            finally:
                self.release()
        if self.committed_position == self.file_size and self._pool is not None:
            self._write_buffer = None
            self._target = self.buffer
            self._pool.return_buffer(wb)
        return self.committed_position

    def _commit0(self, wb: memoryview) -> None:
        wrote, committed = self.wrote_position, self.committed_position
        if wrote > committed and self._fd is not None:
            view = wb[committed:wrote]
            done = 0
            while done < len(view):
                done += os.pwrite(self._fd, view[done:], committed + done)
            view.release()
            self._channel_written = True
            self.committed_position = wrote

    def flush(self, flush_least_pages: int) -> int:
        """Force the file to disk if the page rule allows; returns ``flushed_position``.

        ``flushed_position`` becomes the read position captured *before* forcing. Forcing is
        ``msync`` of the dirty range only -- from ``flushed_position`` rounded down to a page to
        that read position -- or ``fdatasync`` of the descriptor once TSP data was written
        through it. Bytes below ``flushed_position`` were forced by an earlier flush, so the
        guarantee is the one a whole-mapping ``msync`` gives, without the kernel walking
        (and the journal committing for) a whole 1 GiB file each time. A read-only file never
        forces anything.

        Safe to call from several threads at once (SYNC_FLUSH overlaps group-commit rounds):
        each call forces from the flushed position it read -- a prefix already on disk -- to its
        own read position, so its return alone proves everything below that is on disk, and the
        flushed position only ever moves forward. It moves only once the force succeeded: a
        failed ``msync`` must not let a later flush acknowledge the bytes it did not force.
        """
        if self.read_only:
            return self.flushed_position
        if self.is_able_to_flush(flush_least_pages):
            if self.hold():
                try:  # from the hold on: an interrupt anywhere below still releases it
                    value = self.read_position
                    self._force_range(self.flushed_position, value)
                    with self._lock:  # concurrent flushes (group commit): only ever move forward
                        if value > self.flushed_position:
                            self.flushed_position = value
                finally:
                    self.release()
            else:
                self.flushed_position = self.read_position
        return self.flushed_position

    def _force_range(self, start: int, end: int) -> None:
        mm = self._mm
        if mm is None:
            return
        if self._channel_written and self._fd is not None:
            os.fdatasync(self._fd)
            return
        start -= start % _PAGE
        try:
            msync_range(mm, self._addr, start, end - start)
        except OSError:
            if self._mm is not None:
                raise  # (a close() racing the flush unmapped the range: nothing left to force)

    def force(self) -> None:
        """Force every dirty page of this file to disk, whatever the pointers say (index files)."""
        if self.read_only or self._mm is None:
            return
        if self._channel_written and self._fd is not None:
            os.fdatasync(self._fd)
        else:
            self._force_range(0, self.mapped_length)

    # ---------------------------------------------------------------------------------------
    # reading

    def select_mapped_buffer(
        self, pos: int, size: int | None = None
    ) -> SelectMappedBufferResult | None:
        """A zero-copy view of ``[pos, pos+size)`` (to the read position if ``size`` is None).

        None when the range is not below the read position, ``pos`` is negative, or the file is
        being destroyed. The result holds a reference: release it (or use ``with``).
        """
        # a read-only file shorter than file_size (a trimmed last file) holds no bytes past its
        # length, whatever position recovery set (a misaligned file's range overlaps its neighbour's)
        read_pos = min(self.read_position, self.mapped_length) if self.read_only else self.read_position
        if size is None:
            if not 0 <= pos < read_pos:
                return None
            size = read_pos - pos
        elif pos < 0 or size < 0 or pos + size > read_pos:
            return None
        if not self.hold():
            return None
        return SelectMappedBufferResult(
            self.file_from_offset + pos, self.buffer[pos : pos + size], size, self
        )

    # ---------------------------------------------------------------------------------------
    # ReferenceResource (spec §7.6)

    def hold(self) -> bool:
        with self._lock:
            if self._available and self._ref_count > 0:
                self._ref_count += 1
                return True
            return False

    def release(self) -> None:
        with self._lock:
            self._ref_count -= 1
            if self._ref_count > 0:
                return
            self._cleanup_over = self._cleanup()

    @property
    def ref_count(self) -> int:
        return self._ref_count

    @property
    def first_shutdown_timestamp(self) -> int:
        """When ``shutdown``/``destroy`` was first called (ms; 0 = never): starts the forced interval."""
        return self._first_shutdown_ts

    def is_available(self) -> bool:
        return self._available

    def is_cleanup_over(self) -> bool:
        return self._ref_count <= 0 and self._cleanup_over

    def shutdown(self, interval_forcibly_ms: int, now_ms: int | None = None) -> None:
        """First call: mark unavailable and drop the file's own reference. Later calls at least
        ``interval_forcibly_ms`` after the first force the count negative (readers ignored)."""
        now = _system_clock.now_ms() if now_ms is None else now_ms
        if self._available:
            self._first_shutdown_ts = now  # before the flag: the forced interval never starts at 0
            self._available = False
            self.release()
        elif self._ref_count > 0:
            if now - self._first_shutdown_ts >= interval_forcibly_ms:
                with self._lock:
                    self._ref_count = -1000 - self._ref_count
                self.release()
        elif not self._cleanup_over:
            # The last release was cut short between its count and the unmap (an interrupt):
            # finish it, or the file could never be destroyed (and cleanup stops at it for good).
            with self._lock:
                if not self._cleanup_over:
                    self._cleanup_over = self._cleanup()

    def _cleanup(self) -> bool:
        # called with self._lock held
        if self._available:
            return False
        if self._cleanup_over:
            return True
        self._unmap()
        return True

    def _unmap(self) -> None:
        if self._write_buffer is not None and self._pool is not None:
            # rmqlab returns the buffer of a file destroyed before it was fully committed
            # (RocketMQ 4.9.8 leaks it from the pool).
            wb, self._write_buffer = self._write_buffer, None
            self._pool.return_buffer(wb)
        try:
            self.buffer.release()
        except BufferError:
            pass
        self._target = self.buffer
        mm, self._mm = self._mm, None
        if mm is not None:
            try:
                mm.close()
            except BufferError:
                pass  # a reader still holds a view; the mapping closes when it is dropped
        with MappedFile._counter_lock:  # an unmap cut short runs again: taken off the totals once
            if self._counted:
                self._counted = False
                MappedFile._total_mapped_files -= 1
                MappedFile._total_mapped_virtual_memory -= self.mapped_length

    def destroy(self, interval_forcibly_ms: int, now_ms: int | None = None) -> bool:
        """Shut down, and delete the file if the cleanup is over; True only when deleted now."""
        if self.read_only:
            raise ReadOnlyStore(f"{self.file_name}: mapped read-only, refusing to delete it")
        self.shutdown(interval_forcibly_ms, now_ms)
        if not self.is_cleanup_over():
            return False
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)
        try:
            os.unlink(self.file_name)
        except FileNotFoundError:
            pass
        return True

    def close(self) -> None:
        """Unmap without deleting (readers' live views stay valid until dropped). Idempotent."""
        with self._lock:
            if self._cleanup_over:
                return
            self._available = False
            self._ref_count = min(self._ref_count, 0)
            self._unmap()
            self._cleanup_over = True
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    # ---------------------------------------------------------------------------------------
    # misc

    def get_last_modified_timestamp(self) -> int:
        """The file's mtime in ms (0 if it no longer exists), like ``File.lastModified()``."""
        try:
            return os.stat(self.file_name).st_mtime_ns // 1_000_000
        except OSError:
            return 0

    def warm_mapped_file(self, flush_disk_type: str, pages: int) -> WarmResult:
        """Touch byte 0 of every 4 KiB page; in SYNC_FLUSH force every ``pages`` pages and at the
        end; then ``mlock`` and ``madvise(WILLNEED)``. A refused mlock is reported, not raised."""
        if self.read_only or self._mm is None:
            raise ReadOnlyStore(f"{self.file_name}: cannot warm a read-only mapping")
        n_pages = (self.file_size + OS_PAGE_SIZE - 1) // OS_PAGE_SIZE
        self.populate(0, self.file_size)  # every page is written below: DiskFull rather than SIGBUS
        arr = np.frombuffer(self._mm, dtype=np.uint8)
        flushes = 0
        try:
            if flush_disk_type == SYNC_FLUSH:
                # RocketMQ forces after touching page j whenever j - last_forced >= pages.
                step = max(pages, 1)
                start = 0
                for forced_at in range(step, n_pages, step):
                    arr[start * OS_PAGE_SIZE : forced_at * OS_PAGE_SIZE + 1 : OS_PAGE_SIZE] = 0
                    self._mm.flush()
                    flushes += 1
                    start = forced_at + 1
                arr[start * OS_PAGE_SIZE :: OS_PAGE_SIZE] = 0
                self._mm.flush()
                flushes += 1
            else:
                arr[::OS_PAGE_SIZE] = 0
        finally:
            del arr
        mlocked = try_mlock(self._mm, self.file_size)
        madvised = madvise_willneed(self._mm)
        bus = self._bus
        if bus is not None and bus.active:
            bus.publish(FileWarmed(self.queue_name, self.file_name, n_pages, mlocked))
        return WarmResult(self.file_name, n_pages, flushes, mlocked, madvised)

    @staticmethod
    def total_mapped_files() -> int:
        """Files mapped by this process and not yet unmapped."""
        return MappedFile._total_mapped_files

    @staticmethod
    def total_mapped_virtual_memory() -> int:
        """Bytes mapped by this process through MappedFile and not yet unmapped."""
        return MappedFile._total_mapped_virtual_memory

    def __repr__(self) -> str:
        flags = (", read_only" if self.read_only else "") + (
            "" if self._available else ", unavailable"
        )
        return (
            f"MappedFile({self.name}, size={self.file_size}, wrote={self.wrote_position}, "
            f"committed={self.committed_position}, flushed={self.flushed_position}{flags})"
        )
