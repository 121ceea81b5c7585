"""StoreCheckpoint: the 4096-byte ``checkpoint`` file of a store root (spec §5.1).

The byte layout lives in :mod:`rmqlab.codec.checkpoint`; this module owns the mapped file and the
RocketMQ semantics around it:

* the five fields are plain attributes; assigning one changes memory only. ``flush()`` packs all
  five at offset 0 and forces the mapping (RocketMQ's ``StoreCheckpoint.flush``), so what is on
  disk is always one consistent snapshot;
* a missing file is created (sparse, zero-filled) and a short one extended to 4096 bytes, exactly
  as mapping it ``READ_WRITE`` for 4096 bytes does in Java; an all-zero file reads as all zeros,
  a 4.9 file (bytes 24..39 zero) reads with ``master_flushed_offset = confirm_phy_offset = 0``;
* ``read_only=True`` maps an existing file ``ACCESS_READ`` (it may be shorter than 4096 bytes,
  missing bytes read as zero) and never writes: ``flush()`` raises :class:`ReadOnlyStore`.

Like Java's ``StoreCheckpoint`` (which maps the file with ``FileChannel.map`` itself, not through
``MappedFile``), this maps the file directly: ``MappedFile`` is for offset-named data files and
rejects the name ``checkpoint``.

Not thread-safe by itself: RocketMQ writes the fields from several service threads without a
lock (each is a single ``long`` store); rmqlab's services do the same, and ``flush()`` packs a
snapshot of whatever the attributes hold at that moment.
"""

from __future__ import annotations

import mmap
import os

from rmqlab.codec.checkpoint import CHECKPOINT_DATA_SIZE, CHECKPOINT_FILE_SIZE, Checkpoint
from rmqlab.errors import MappedFileError, ReadOnlyStore
from rmqlab.events import CheckpointWritten, EventBus
from rmqlab.faults import crash_point
from rmqlab.files.fs import sparse_create

__all__ = ["StoreCheckpoint"]


class StoreCheckpoint:
    """The checkpoint: three (4.9) or five (5.x) big-endian longs at the start of 4096 bytes.

    Attributes (all ``int``, milliseconds since the epoch or byte offsets):
    ``physic_msg_timestamp``, ``logics_msg_timestamp``, ``index_msg_timestamp``,
    ``master_flushed_offset``, ``confirm_phy_offset``.
    """

    def __init__(self, path: str, *, read_only: bool = False, bus: EventBus | None = None) -> None:
        self.path = path
        self.read_only = read_only
        self._bus = bus
        self._mm = _map_read_only(path) if read_only else _map_writable(path)
        # A short file opened read-only reads as if zero-padded to 40 bytes.
        raw = bytes(self._mm[:CHECKPOINT_DATA_SIZE]) if self._mm is not None else b""
        cp = Checkpoint.unpack(raw.ljust(CHECKPOINT_DATA_SIZE, b"\0"))
        self.physic_msg_timestamp: int = cp.physic_msg_timestamp
        self.logics_msg_timestamp: int = cp.logics_msg_timestamp
        self.index_msg_timestamp: int = cp.index_msg_timestamp
        self.master_flushed_offset: int = cp.master_flushed_offset
        self.confirm_phy_offset: int = cp.confirm_phy_offset
        self._closed = False

    # --- derived values (spec 5.1) -------------------------------------------------------------
    def snapshot(self) -> Checkpoint:
        """The current in-memory values as an immutable codec :class:`Checkpoint`."""
        return Checkpoint(
            self.physic_msg_timestamp,
            self.logics_msg_timestamp,
            self.index_msg_timestamp,
            self.master_flushed_offset,
            self.confirm_phy_offset,
        )

    @property
    def min_timestamp(self) -> int:
        """``max(0, min(physic, logics) - 3000)``: abnormal recovery's safe store time."""
        return self.snapshot().min_timestamp

    @property
    def min_timestamp_index(self) -> int:
        """``min(min_timestamp, index_msg_timestamp)``: the same with ``messageIndexSafe``."""
        return self.snapshot().min_timestamp_index

    # --- persistence ---------------------------------------------------------------------------
    def flush(self) -> None:
        """Write all five fields at offset 0 and force the mapping to disk."""
        if self.read_only:
            raise ReadOnlyStore(f"{self.path}: checkpoint opened read-only")
        if self._mm is None:
            raise MappedFileError(self.path, "checkpoint already shut down")
        cp = self.snapshot()
        cp.pack_into(self._mm, 0)
        crash_point("checkpoint_flush_mid")
        self._mm.flush()
        bus = self._bus
        if bus is not None and bus.active:
            bus.publish(
                CheckpointWritten(
                    cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp
                )
            )

    def shutdown(self) -> None:
        """Flush (unless read-only) and unmap. Calling it twice is harmless."""
        if self._closed:
            return
        if not self.read_only and self._mm is not None:  # None: a shutdown cut short unmapped it
            self.flush()
        mm, self._mm = self._mm, None  # forgotten first: a closed map is never written again
        if mm is not None:
            mm.close()
        self._closed = True

    def __repr__(self) -> str:
        return (
            f"StoreCheckpoint({self.path!r}, physic={self.physic_msg_timestamp}, "
            f"logics={self.logics_msg_timestamp}, index={self.index_msg_timestamp}, "
            f"master_flushed={self.master_flushed_offset}, confirm={self.confirm_phy_offset})"
        )


def _map_writable(path: str) -> mmap.mmap:
    """Create or extend the file to 4096 bytes (Java's READ_WRITE map does this) and map it."""
    try:
        sparse_create(path, CHECKPOINT_FILE_SIZE)
        fd = os.open(path, os.O_RDWR)
    except OSError as exc:
        raise MappedFileError(path, f"cannot create or open: {exc}") from exc
    try:  # its one page's block now: on a full disk, an error here rather than SIGBUS at a flush
        os.posix_fallocate(fd, 0, CHECKPOINT_FILE_SIZE)
    except OSError as exc:
        os.close(fd)
        raise MappedFileError(path, f"cannot allocate {CHECKPOINT_FILE_SIZE} bytes: {exc}") from exc
    try:
        return mmap.mmap(fd, CHECKPOINT_FILE_SIZE)
    finally:
        os.close(fd)


def _map_read_only(path: str) -> mmap.mmap | None:
    """Map an existing file ACCESS_READ (never creates it); None for an empty file."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        raise MappedFileError(path, "does not exist (read-only never creates it)") from None
    try:
        length = min(os.fstat(fd).st_size, CHECKPOINT_FILE_SIZE)
        return mmap.mmap(fd, length, access=mmap.ACCESS_READ) if length > 0 else None
    finally:
        os.close(fd)
