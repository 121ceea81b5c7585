"""MappedFileQueue: the ordered run of same-sized MappedFiles in one directory (a CommitLog, a CQ).

Mirrors RocketMQ's ``MappedFileQueue`` (spec §7.1-§7.3, §6.4, §3.6, §8). Files are named by the
absolute offset of their first byte (20 digits); file *k* of a contiguous queue starts at
``first.from + k * mapped_file_size``. The queue tracks two absolute offsets, ``flushed_where`` and
``committed_where``, and a ``store_timestamp`` (the last flushed file's, after ``flush(0)``).

Thread-safety: ``mapped_files`` is copy-on-write — every add/remove replaces the list object under
a lock — so readers take ``q.mapped_files`` once and iterate that snapshot without locking. One
writer thread creates files (``get_last_mapped_file_for``); flush/commit/cleanup threads may run
concurrently, as in RocketMQ.
"""

from __future__ import annotations

import itertools
import os
import struct
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from rmqlab.clock import SystemClock
from rmqlab.codec.names import offset_to_file_name
from rmqlab.errors import DiskFull, ReadOnlyStore
from rmqlab.events import Committed, EventBus, FileDeleted, FileTruncated, Flushed
from rmqlab.files.allocate_mapped_file_service import AllocateMappedFileService
from rmqlab.files.mapped_file import MappedFile
from rmqlab.files.transient_store_pool import TransientStorePool

__all__ = ["DELETE_FILES_BATCH_MAX", "Gap", "LoadError", "MappedFileQueue"]

DELETE_FILES_BATCH_MAX = 10
_LONG_MAX = (1 << 63) - 1
_system_clock = SystemClock()


@dataclass(frozen=True, slots=True)
class LoadError:
    """Why :meth:`MappedFileQueue.load` refused a directory (a file of the wrong length)."""

    file: str
    actual_size: int
    expected_size: int
    #: the one length every file of the directory has, when there are several and they agree:
    #: most likely a store written with that mapped file size, not damage
    uniform_size: int | None = None
    #: a refusal that is not about the length (then ``__str__`` says this instead)
    reason: str | None = None

    def __str__(self) -> str:
        if self.reason is not None:
            return f"{self.file}: {self.reason}"
        text = (
            f"{self.file}: length {self.actual_size} does not match the configured mapped file "
            f"size {self.expected_size}"
        )
        if self.uniform_size is not None:
            text += f" (every file here is {self.uniform_size:,} bytes)"
        return text


@dataclass(frozen=True, slots=True)
class Gap:
    """Two adjacent files whose start offsets are not one file size apart (``checkSelf``)."""

    prev_file: str
    file: str
    expected_offset: int
    actual_offset: int

    def __str__(self) -> str:
        return (
            f"adjacent files do not match: {os.path.basename(self.prev_file)} is followed by "
            f"{os.path.basename(self.file)} (expected offset {self.expected_offset})"
        )


class MappedFileQueue:
    """The files of one directory; see the module docstring for invariants and threading."""

    def __init__(
        self,
        store_path: str,
        mapped_file_size: int,
        allocate_mapped_file_service: AllocateMappedFileService | None = None,
        *,
        read_only: bool = False,
        bus: EventBus | None = None,
        name: str = "",
        transient_store_pool: TransientStorePool | None = None,
    ) -> None:
        self.store_path = store_path
        self.mapped_file_size = mapped_file_size
        self.allocate_mapped_file_service = allocate_mapped_file_service
        self.read_only = read_only
        self.bus = bus
        self.name = name or os.path.basename(os.path.normpath(store_path))
        self.transient_store_pool = transient_store_pool
        self.mapped_files: list[MappedFile] = []
        self.load_error: LoadError | None = None
        self._flushed_where = 0
        self._committed_where = 0
        self._store_timestamp = 0
        self._lock = threading.Lock()
        # commits may come from the commit service and a caller at once (flush(),
        # wait_dispatched()): one at a time, or both could see a full file and give its write
        # buffer back to the pool twice
        self._commit_lock = threading.Lock()

    # ---------------------------------------------------------------------------------------
    # the list (copy-on-write)

    def _add(self, mf: MappedFile) -> None:
        with self._lock:
            self.mapped_files = [*self.mapped_files, mf]

    def delete_files(self, files: Iterable[MappedFile]) -> None:
        """Drop ``files`` from the list (RocketMQ ``deleteExpiredFile(List)``); does not destroy."""
        drop = {id(f) for f in files}
        if drop:
            with self._lock:
                self.mapped_files = [f for f in self.mapped_files if id(f) not in drop]

    def _publish_deleted(self, mf: MappedFile, reason: str) -> None:
        bus = self.bus
        if bus is not None and bus.active:
            bus.publish(FileDeleted(self.name, mf.file_name, mf.file_from_offset, reason))

    def _check_writable(self, what: str) -> None:
        if self.read_only:
            raise ReadOnlyStore(f"{self.store_path}: read-only queue, refusing to {what}")

    # ---------------------------------------------------------------------------------------
    # load and checks

    def load(self) -> bool:
        """Map every numeric-named regular file of the directory, sorted by name (spec §7.3).

        A zero-length *last* file is deleted (5.x; in read-only mode it is skipped). Any other
        file whose length is not ``mapped_file_size`` fails the load: returns False and sets
        :attr:`load_error`. Read-only mode accepts a shorter last file (a trimmed sample). Every
        loaded file gets wrote = committed = flushed = its length. A missing directory loads empty.
        """
        self.load_error = None
        try:
            entries = sorted(os.scandir(self.store_path), key=lambda e: e.name)
        except FileNotFoundError:
            return True
        candidates = [e for e in entries if e.name.isdigit() and e.is_file(follow_symlinks=True)]
        if candidates and candidates[-1].stat().st_size == 0:
            if not self.read_only:
                os.unlink(candidates[-1].path)  # 5.x: a crash right after creating the file
            candidates.pop()
        loaded: list[MappedFile] = []
        for i, entry in enumerate(candidates):
            last = i == len(candidates) - 1
            length = entry.stat().st_size
            if int(entry.name) > _LONG_MAX:
                self.load_error = LoadError(entry.path, length, self.mapped_file_size, reason=(
                    "file name is an offset past Long.MAX_VALUE (RocketMQ's parseLong fails on it: "
                    "the broker does not start); move the file out of the store"))
                for mf in loaded:
                    mf.close()
                return False
            if length != self.mapped_file_size and not (
                self.read_only and last and length < self.mapped_file_size
            ):
                sizes = {e.stat().st_size for e in candidates}
                uniform = length if len(candidates) > 1 and len(sizes) == 1 else None
                self.load_error = LoadError(entry.path, length, self.mapped_file_size, uniform)
                for mf in loaded:
                    mf.close()
                return False
            mf = MappedFile(
                entry.path,
                self.mapped_file_size,
                read_only=self.read_only,
                bus=self.bus,
                queue_name=self.name,
            )
            pos = min(self.mapped_file_size, mf.mapped_length)
            mf.wrote_position = mf.committed_position = mf.flushed_position = pos
            loaded.append(mf)
        with self._lock:
            self.mapped_files = [*self.mapped_files, *loaded]
        return True

    def gaps(self) -> list[Gap]:
        """Adjacent files whose offsets are not ``mapped_file_size`` apart (empty = healthy)."""
        files = self.mapped_files
        return [
            Gap(
                prev.file_name,
                cur.file_name,
                prev.file_from_offset + self.mapped_file_size,
                cur.file_from_offset,
            )
            for prev, cur in itertools.pairwise(files)
            if cur.file_from_offset - prev.file_from_offset != self.mapped_file_size
        ]

    def check_self(self) -> list[str]:
        """RocketMQ ``checkSelf``: the problems as messages (empty = healthy)."""
        return [str(g) for g in self.gaps()]

    # ---------------------------------------------------------------------------------------
    # lookups

    def get_first_mapped_file(self) -> MappedFile | None:
        files = self.mapped_files
        return files[0] if files else None

    def get_last_mapped_file(self) -> MappedFile | None:
        files = self.mapped_files
        return files[-1] if files else None

    def get_last_mapped_file_for(
        self, start_offset: int, need_create: bool = True
    ) -> MappedFile | None:
        """Java ``getLastMappedFile(startOffset, needCreate)``: the last file, creating one if the
        queue is empty (the file containing ``start_offset``) or the last file is full."""
        last = self.get_last_mapped_file()
        create_offset = -1
        if last is None:
            create_offset = start_offset - start_offset % self.mapped_file_size
        elif last.is_full():
            create_offset = last.file_from_offset + self.mapped_file_size
        if create_offset == -1 or not need_create:
            return last
        self._check_writable("create files")
        return self._create(create_offset)

    def _create(self, create_offset: int) -> MappedFile | None:
        next_path = os.path.join(self.store_path, offset_to_file_name(create_offset))
        service = self.allocate_mapped_file_service
        if service is not None:
            next_next = os.path.join(
                self.store_path, offset_to_file_name(create_offset + self.mapped_file_size)
            )
            mf = service.put_request_and_return_mapped_file(
                next_path, next_next, self.mapped_file_size
            )
        else:
            os.makedirs(self.store_path, exist_ok=True)
            mf = MappedFile(
                next_path,
                self.mapped_file_size,
                transient_store_pool=self.transient_store_pool,
                bus=self.bus,
                queue_name=self.name,
            )
        if mf is not None:
            try:
                mf.reserve(1)  # its first pages: on a full disk no file is kept that nothing was written to
            except DiskFull:
                mf.destroy(0)  # (a ConsumeQueue would take it for the file of the next offset it writes)
                raise
            with self._lock:
                if not self.mapped_files:
                    mf.first_create_in_queue = True
                self.mapped_files = [*self.mapped_files, mf]
        return mf

    def find_mapped_file_by_offset(
        self, offset: int, return_first_on_not_found: bool = False
    ) -> MappedFile | None:
        """The file holding absolute ``offset``; index arithmetic relative to the first file
        (works after head files were deleted) with a linear fallback for gaps."""
        files = self.mapped_files
        if not files:
            return None
        first, last, size = files[0], files[-1], self.mapped_file_size
        if first.file_from_offset <= offset < last.file_from_offset + size:
            index = offset // size - first.file_from_offset // size
            if 0 <= index < len(files):
                target = files[index]
                if target.file_from_offset <= offset < target.file_from_offset + size:
                    return target
            for mf in files:
                if mf.file_from_offset <= offset < mf.file_from_offset + size:
                    return mf
        return first if return_first_on_not_found else None

    def get_mapped_file_by_time(self, timestamp_ms: int) -> MappedFile | None:
        """The first file whose mtime is >= ``timestamp_ms``, else the last file (None if empty)."""
        files = self.mapped_files
        for mf in files:
            if mf.get_last_modified_timestamp() >= timestamp_ms:
                return mf
        return files[-1] if files else None

    # ---------------------------------------------------------------------------------------
    # offsets

    def get_min_offset(self) -> int:
        first = self.get_first_mapped_file()
        return first.file_from_offset if first is not None else -1

    def get_max_offset(self) -> int:
        last = self.get_last_mapped_file()
        return last.file_from_offset + last.read_position if last is not None else 0

    def get_max_wrote_position(self) -> int:
        last = self.get_last_mapped_file()
        return last.file_from_offset + last.wrote_position if last is not None else 0

    def remain_how_many_data_to_commit(self) -> int:
        return self.get_max_wrote_position() - self._committed_where

    def remain_how_many_data_to_flush(self) -> int:
        return self.get_max_offset() - self._flushed_where

    @property
    def flushed_where(self) -> int:
        return self._flushed_where

    @flushed_where.setter
    def flushed_where(self, value: int) -> None:
        self._flushed_where = value

    @property
    def committed_where(self) -> int:
        return self._committed_where

    @committed_where.setter
    def committed_where(self, value: int) -> None:
        self._committed_where = value

    @property
    def store_timestamp(self) -> int:
        return self._store_timestamp

    def get_mapped_memory_size(self) -> int:
        """Bytes of files still available (not being destroyed)."""
        return sum(self.mapped_file_size for mf in self.mapped_files if mf.is_available())

    def how_much_fall_behind(self) -> int:
        """Bytes written but not flushed, measured from ``flushed_where`` (0 if never flushed)."""
        if not self.mapped_files or self._flushed_where == 0:
            return 0
        last = self.get_last_mapped_file()
        if last is None:
            return 0
        return last.file_from_offset + last.wrote_position - self._flushed_where

    # ---------------------------------------------------------------------------------------
    # flush / commit (spec §7.2)

    def flush(self, flush_least_pages: int) -> bool:
        """Flush the file holding ``flushed_where``; True iff nothing moved. ``flush(0)`` records
        that file's store timestamp as the queue's. One call never crosses into the next file.
        Calls may overlap in several threads (see ``MappedFile.flush``)."""
        where0 = self._flushed_where
        mf = self.find_mapped_file_by_offset(where0, where0 == 0) or self._first_past_deleted(where0)
        if mf is None:
            return True
        ts = mf.store_timestamp
        where = mf.file_from_offset + mf.flush(flush_least_pages)
        with self._lock:  # flushes may overlap (SYNC_FLUSH): the flushed offset never moves back
            if where >= self._flushed_where:
                self._flushed_where = where
                if flush_least_pages == 0:
                    self._store_timestamp = ts
            else:
                where = self._flushed_where
        moved = where != where0
        bus = self.bus
        if moved and bus is not None and bus.active:
            bus.publish(Flushed(self.name, where, self._store_timestamp))
        return not moved

    def commit(self, commit_least_pages: int) -> bool:
        """Commit the file holding ``committed_where``; True iff nothing moved."""
        with self._commit_lock:
            where0 = self._committed_where
            mf = self.find_mapped_file_by_offset(where0, where0 == 0) or self._first_past_deleted(where0)
            if mf is None:
                return True
            where = mf.file_from_offset + mf.commit(commit_least_pages)
            self._committed_where = where
        moved = where != where0
        bus = self.bus
        if moved and bus is not None and bus.active:
            bus.publish(Committed(self.name, where))
        return not moved

    def _first_past_deleted(self, where: int) -> MappedFile | None:
        """The first file, when the files holding ``where`` and up to it were deleted.

        Cleanup deletes expired files without looking at the flush or commit pointer. Once a
        pointer is behind the first file, RocketMQ 4.9.8 and 5.x look it up, find no file ("Offset
        not matched") and never flush (or commit) again until a restart. This happens with a
        flush that lags a whole file behind, e.g. a stepped store with small files and a forced
        cleanup. The deleted bytes need no flushing, so rmqlab goes on from the first file that
        is left.
        """
        first = self.get_first_mapped_file()
        if first is None or where >= first.file_from_offset:
            return None
        return first

    # ---------------------------------------------------------------------------------------
    # truncation and deletion

    def truncate_dirty_files(self, offset: int) -> None:
        """Spec §6.4: the file holding ``offset`` gets all positions = ``offset % size``; files
        wholly past ``offset`` are destroyed (1 s) and dropped; earlier files are untouched."""
        self._check_writable("truncate files")
        remove = []
        for mf in self.mapped_files:
            if mf.file_from_offset + self.mapped_file_size <= offset:
                continue
            if offset >= mf.file_from_offset:
                pos = offset % self.mapped_file_size
                mf.wrote_position = mf.committed_position = mf.flushed_position = pos
                bus = self.bus
                if bus is not None and bus.active:
                    bus.publish(FileTruncated(self.name, mf.file_name, pos, "truncate_dirty_files"))
            else:
                mf.destroy(1000)
                remove.append(mf)
                self._publish_deleted(mf, "truncate_dirty_files")
        self.delete_files(remove)

    def delete_last_mapped_file(self) -> None:
        """Destroy (1 s) and drop the last file."""
        self._check_writable("delete files")
        last = self.get_last_mapped_file()
        if last is not None:
            last.destroy(1000)
            self.delete_files([last])
            self._publish_deleted(last, "delete_last_mapped_file")

    def delete_expired_file_by_time(
        self,
        expired_time_ms: int,
        delete_files_interval_ms: int,
        interval_forcibly_ms: int,
        clean_immediately: bool,
        now_ms: int | None = None,
        batch_max: int = DELETE_FILES_BATCH_MAX,
        sleep: Callable[[float], None] | None = None,
    ) -> int:
        """CommitLog expiry (RocketMQ ``deleteExpiredFileByTime``): walk files oldest first, never
        the last; a file whose mtime + ``expired_time_ms`` <= now (or any, if
        ``clean_immediately``) is destroyed; stop at the first file that is not expired or not
        deleted (still held), or after ``batch_max`` deletions. ``sleep(ms)`` (default: real
        sleep) runs between deletions. Returns the number deleted."""
        self._check_writable("delete files")
        now = _system_clock.now_ms() if now_ms is None else now_ms
        pause = sleep if sleep is not None else _system_clock.sleep_ms
        files = self.mapped_files
        candidates = len(files) - 1
        deleted: list[MappedFile] = []
        for i in range(max(candidates, 0)):
            mf = files[i]
            if not (now >= mf.get_last_modified_timestamp() + expired_time_ms or clean_immediately):
                break  # never delete files in the middle
            if not mf.destroy(interval_forcibly_ms, now):
                break
            deleted.append(mf)
            self._publish_deleted(mf, "expired")
            if len(deleted) >= batch_max:
                break
            if delete_files_interval_ms > 0 and i + 1 < candidates:
                pause(delete_files_interval_ms)
        self.delete_files(deleted)
        return len(deleted)

    def delete_expired_file_by_offset(
        self, offset: int, unit_size: int, now_ms: int | None = None
    ) -> int:
        """ConsumeQueue expiry (spec §3.6): for each file but the last, oldest first, read the long
        at the start of its last unit (``size - unit_size``: the CommitLog offset); below
        ``offset`` (or an unreadable, already-destroyed file) -> destroy (60 s); else stop."""
        self._check_writable("delete files")
        deleted: list[MappedFile] = []
        files = self.mapped_files
        for mf in files[:-1]:
            result = mf.select_mapped_buffer(self.mapped_file_size - unit_size)
            if result is not None:
                with result:
                    (max_offset_in_logic_queue,) = struct.unpack_from(">q", result.buffer, 0)
                destroy = max_offset_in_logic_queue < offset
            elif not mf.is_available():
                destroy = True  # a hanged file: a previous destroy did not finish
            else:
                break
            if not (destroy and mf.destroy(60_000, now_ms)):
                break
            deleted.append(mf)
            self._publish_deleted(mf, "expired_by_offset")
        self.delete_files(deleted)
        return len(deleted)

    def retry_delete_first_file(self, interval_forcibly_ms: int, now_ms: int | None = None) -> bool:
        """Destroy again a first file whose earlier destroy did not finish; True if deleted now."""
        first = self.get_first_mapped_file()
        if first is None or first.is_available():
            return False
        self._check_writable("delete files")
        if first.destroy(interval_forcibly_ms, now_ms):
            self.delete_files([first])
            self._publish_deleted(first, "retry_delete_first_file")
            return True
        return False

    def reset_offset(self, offset: int) -> bool:
        """RocketMQ ``resetOffset``: refuse (False) if ``offset`` is more than two files behind the
        end; else drop files starting after ``offset`` (not destroyed, as in RocketMQ) and set
        the positions of the file holding it."""
        self._check_writable("reset offsets")
        last = self.get_last_mapped_file()
        if (
            last is not None
            and last.file_from_offset + last.wrote_position - offset > 2 * self.mapped_file_size
        ):
            return False
        remove = []
        for mf in reversed(self.mapped_files):
            if offset >= mf.file_from_offset:
                pos = offset % mf.file_size
                mf.flushed_position = mf.wrote_position = mf.committed_position = pos
                break
            remove.append(mf)
        self.delete_files(remove)
        return True

    # ---------------------------------------------------------------------------------------
    # lifecycle

    def shutdown(self, interval_forcibly_ms: int, now_ms: int | None = None) -> None:
        """Mark every file unavailable (readers finish; files stay on disk)."""
        for mf in self.mapped_files:
            mf.shutdown(interval_forcibly_ms, now_ms)

    def close(self) -> None:
        """Unmap every file without deleting anything (read-only snapshots, tests)."""
        files = self.mapped_files
        with self._lock:
            self.mapped_files = []
        for mf in files:
            mf.close()

    def destroy(self) -> None:
        """Delete every file and then the directory (if it is left empty); ``flushed_where = 0``."""
        self._check_writable("destroy the queue")
        files = self.mapped_files
        for mf in files:
            mf.destroy(3000)
            self._publish_deleted(mf, "destroy")
        with self._lock:
            self.mapped_files = []
        self._flushed_where = 0
        try:
            os.rmdir(self.store_path)
        except OSError:
            pass

    def __repr__(self) -> str:
        return (
            f"MappedFileQueue({self.store_path!r}, files={len(self.mapped_files)}, "
            f"flushed_where={self._flushed_where}, committed_where={self._committed_where})"
        )
