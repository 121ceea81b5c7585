"""Every OS call of the files layer beyond open/mmap: fsync, lock file, mlock, madvise, disk usage.

LevelDB keeps all of these behind ``Env``; rmqlab keeps them here so the safety promises
("inspection never writes", "a second writer gets a clear error") are checkable in one place, and
so every call that may be refused (``mlock`` beyond ``RLIMIT_MEMLOCK``, ``madvise`` on an old
kernel) degrades to a ``False`` result instead of an exception.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import fcntl
import gc
import mmap
import os
import sys
import threading
from typing import Any, Protocol

import numpy as np

from rmqlab.errors import StoreLocked

__all__ = [
    "DiskUsageProbe",
    "FileLock",
    "FixedDiskUsage",
    "address_of",
    "dledger_commit_log",
    "fsync_dir",
    "madvise_populate_write",
    "madvise_willneed",
    "msync_range",
    "sparse_create",
    "system_disk_usage",
    "try_mlock",
    "try_munlock",
    "used_percent",
]


# --------------------------------------------------------------------------------------------
# fsync, sparse files


def fsync_dir(path: str) -> None:
    """Force a directory's entries (new/removed file names) to disk; ignored where unsupported."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def dledger_commit_log(root: str) -> str | None:
    """The first ``dledger-<selfId>/data`` directory under ``root`` that holds files, or None. A
    broker with ``enableDLegerCommitLog`` keeps its messages there as DLedger entries, not in
    ``commitlog/`` (RocketMQ's DLedgerCommitLog sets DLedger's ``storeBaseDir`` to the store
    root); rmqlab reads neither the entries' framing nor their positions."""
    try:
        names = sorted(n for n in os.listdir(root) if n.startswith("dledger-"))
    except OSError:
        return None
    for name in names:
        data = os.path.join(root, name, "data")
        try:
            with os.scandir(data) as it:
                if next(it, None) is not None:
                    return data
        except OSError:
            continue
    return None


def sparse_create(path: str, size: int) -> bool:
    """Create ``path`` (or extend it) to ``size`` bytes without writing them (``ftruncate``).

    A file already at least ``size`` bytes long is left as it is (never shrunk). Returns True
    when the file did not exist before.
    """
    created = not os.path.exists(path)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if os.fstat(fd).st_size < size:
            os.ftruncate(fd, size)
    finally:
        os.close(fd)
    return created


# --------------------------------------------------------------------------------------------
# mlock / madvise

_libc: Any = None
_libc_lock = threading.Lock()


def _load_libc() -> Any:
    global _libc
    with _libc_lock:
        if _libc is None:
            try:
                _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
                for name in ("mlock", "munlock"):
                    fn = getattr(_libc, name)
                    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
                    fn.restype = ctypes.c_int
                for name in ("msync", "madvise"):
                    fn = getattr(_libc, name)
                    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
                    fn.restype = ctypes.c_int
            except (OSError, AttributeError):
                _libc = False
        return _libc


def address_of(buf: Any) -> int:
    """Address of the first byte of a buffer (mmap, memoryview, bytearray), read-only ones too.

    numpy is used because ``ctypes.c_char.from_buffer`` refuses read-only buffers; the temporary
    array is dropped at once so it does not pin the mapping (an exported buffer blocks ``close``).
    """
    arr = np.frombuffer(buf, dtype=np.uint8)
    try:
        return int(arr.ctypes.data)
    finally:
        del arr


def _lock_call(name: str, buf: Any, length: int) -> bool:
    if length <= 0:
        return False
    libc = _load_libc()
    if not libc:
        return False
    try:
        addr = address_of(buf)
    except (TypeError, ValueError):
        return False
    return int(getattr(libc, name)(addr, length)) == 0


def try_mlock(buf: Any, length: int) -> bool:
    """``mlock`` the first ``length`` bytes of ``buf``; False (never an error) when refused.

    Unprivileged processes are limited by ``RLIMIT_MEMLOCK`` (often 8 MiB); RocketMQ ignores a
    failed mlock too (it only logs the return code).
    """
    return _lock_call("mlock", buf, length)


def try_munlock(buf: Any, length: int) -> bool:
    """``munlock`` the first ``length`` bytes of ``buf``; False when it fails."""
    return _lock_call("munlock", buf, length)


# MS_SYNC: 4 on Linux, 0x10 on the BSDs and macOS (Python's mmap module does not export it).
_MS_SYNC = 4 if sys.platform.startswith("linux") else (0x10 if sys.platform == "darwin" else 0)


_msync: Any = None  # libc's msync once loaded (False: unavailable)


def msync_range(mm: mmap.mmap, addr: int, offset: int, length: int) -> None:
    """Force ``[offset, offset + length)`` of the shared mapping ``mm`` to disk (``MS_SYNC``).

    ``offset`` must be a multiple of ``mmap.PAGESIZE``; ``addr`` is the mapping's address
    (:func:`address_of`, 0 = unknown). The call goes through libc so the GIL is released while
    the disk works (``mmap.flush`` holds it in CPython <= 3.12, which stalls every producer
    thread during a sync flush); where libc is unavailable it falls back to ``mm.flush``.
    Raises ``OSError`` like ``mmap.flush``.
    """
    global _msync
    if length <= 0:
        return
    msync = _msync
    if msync is None:  # loaded once: no lock per call on the sync-flush path
        libc = _load_libc() if _MS_SYNC else None
        msync = _msync = libc.msync if libc else False
    if not addr or not msync:
        mm.flush(offset, length)
        return
    if msync(addr + offset, length, _MS_SYNC) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def madvise_willneed(mm: mmap.mmap) -> bool:
    """``madvise(MADV_WILLNEED)`` over the whole mapping; False where unsupported or refused."""
    advice = getattr(mmap, "MADV_WILLNEED", None)
    if advice is None or not hasattr(mm, "madvise"):
        return False
    try:
        mm.madvise(advice)
    except (OSError, ValueError):
        return False
    return True


# MADV_POPULATE_WRITE (Linux >= 5.14; Python's mmap module exports it only from 3.13 on).
_MADV_POPULATE_WRITE = 23 if sys.platform.startswith("linux") else 0
_madvise: Any = None  # libc's madvise once loaded (False: unavailable)


def madvise_populate_write(addr: int, length: int) -> bool:
    """Pre-fault ``[addr, addr + length)`` of a mapping writable (``MADV_POPULATE_WRITE``).

    Does what a first write to each page would do -- allocate the page-cache page, map it
    writable (for a shared file mapping: the file system's ``page_mkwrite``) -- without writing
    a byte, so the page keeps what the file holds (zeros past the data). ``addr`` must be page
    aligned. The call goes through libc, so the GIL is released while the kernel works (~1 us
    per 4 KiB page) and another thread can do it while producers run. False (never an error)
    where unsupported -- not Linux, no libc, a kernel older than 5.14 (``EINVAL``) -- or refused
    (a range not mapped, a full disk): callers then stop trying. True for ``length <= 0``.
    """
    return populate_write(addr, length) == 0


def populate_write(addr: int, length: int) -> int:
    """:func:`madvise_populate_write` with the reason: 0 when the pages are writable now,
    ``errno.EFAULT`` when writing them would raise SIGBUS (no space left for their blocks: the
    kernel kills a process that writes there), another errno when refused for another reason,
    and -1 where ``MADV_POPULATE_WRITE`` does not exist (not Linux, no libc, kernel < 5.14)."""
    global _madvise
    if length <= 0:
        return 0  # nothing to do
    if not addr:
        return -1
    madvise = _madvise
    if madvise is None:
        libc = _load_libc() if _MADV_POPULATE_WRITE else None
        madvise = _madvise = libc.madvise if libc else False
    if not madvise:
        return -1
    if int(madvise(addr, length, _MADV_POPULATE_WRITE)) == 0:
        return 0
    err = ctypes.get_errno()
    return -1 if err in (0, errno.EINVAL, errno.ENOSYS) else err  # EINVAL: kernel < 5.14 (or a bad range)


# --------------------------------------------------------------------------------------------
# the store's ``lock`` file

# POSIX record locks belong to the process: a second lock taken by the same process succeeds and
# closing *any* descriptor of the file drops the lock. The registry makes a second FileLock in the
# same process fail like a second broker would, and keeps the one descriptor open.
_held: dict[tuple[int, int], str] = {}
_held_lock = threading.RLock()  # reentrant: a collection inside it may run FileLock.__del__
_kept_open: list[int] = []  # descriptors that must never be closed (see FileLock.acquire)


class FileLock:
    """An exclusive, non-blocking lock on byte 0 of a store's ``lock`` file (spec §5.3).

    Like ``FileChannel.tryLock(0, 1, false)`` it is a POSIX record lock (``fcntl``/``lockf``), so a
    real RocketMQ broker and rmqlab exclude each other. ``acquire`` writes ``b"lock"`` at
    position 0 and forces it, as RocketMQ does at every start; contention raises
    :class:`~rmqlab.errors.StoreLocked`. ``FileLock(path)`` alone does not lock: call
    :meth:`acquire` or use it as a context manager. Thread-safe.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None
        self._key: tuple[int, int] | None = None

    @property
    def locked(self) -> bool:
        return self._fd is not None

    def acquire(self) -> FileLock:
        if self._fd is not None:
            return self
        if self._held_here():
            # Held in this process: by a live store, or by one nothing refers to any more (an
            # open interrupted by KeyboardInterrupt before it could hand the store back). A
            # collection releases the latter (__del__), so the store opens again.
            gc.collect()
        with _held_lock:
            # Check the registry *before* opening: closing a second descriptor of a file this
            # process already locks would silently drop that lock (POSIX record-lock rule), so a
            # refused in-process open used to unlock the store for other processes.
            if self._held_here():
                raise StoreLocked(self.path)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            st = os.fstat(fd)
            key = (st.st_dev, st.st_ino)
            if key in _held:  # renamed onto a held file between stat and open (very rare):
                _kept_open.append(fd)  # closing fd would drop the holder's lock, so keep it
                raise StoreLocked(self.path)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
            except OSError as exc:
                os.close(fd)
                raise StoreLocked(self.path) from exc
            self._fd, self._key = fd, key  # first: release() undoes what follows (interrupts)
            _held[key] = self.path
        try:
            os.pwrite(fd, b"lock", 0)
            os.fsync(fd)
        except BaseException:
            self.release()
            raise
        return self

    def _held_here(self) -> bool:
        """Whether a FileLock of this process holds the file at ``path`` (by device and inode)."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return False
        return (st.st_dev, st.st_ino) in _held

    def release(self) -> None:
        fd, key = self._fd, self._key
        if fd is None:
            return
        with _held_lock:
            if self._fd != fd:
                return  # another thread released it first
            # Forgotten only once unlocked and out of the registry, so a release cut short (an
            # interrupt) is done again by the next call; closed last (a descriptor number
            # closed twice could by then name another file).
            try:
                fcntl.lockf(fd, fcntl.LOCK_UN, 1, 0)
            except OSError:
                pass
            if key is not None:
                _held.pop(key, None)
            self._fd = self._key = None
            os.close(fd)

    def __del__(self) -> None:
        # a lock nothing refers to any more (see acquire) must not keep its store locked
        if getattr(self, "_fd", None) is not None:  # None too if __init__ was cut short
            with contextlib.suppress(Exception):
                self.release()

    def __enter__(self) -> FileLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"FileLock({self.path!r}, locked={self.locked})"


# --------------------------------------------------------------------------------------------
# disk usage


class DiskUsageProbe(Protocol):
    """Returns RocketMQ's ``usedPercent`` for a path (0.0-1.0, or -1.0 on error)."""

    def __call__(self, path: str) -> float: ...


def used_percent(total: int, free: int, usable: int) -> float:
    """RocketMQ ``UtilAll.getDiskPartitionSpaceUsedPercent`` on already-read numbers (spec §8.1).

    ``used = total - free`` (root-reserved blocks count as used), ``entire = used + usable``;
    ``ceil(used * 100 / entire) / 100`` in integer arithmetic; -1.0 when ``total <= 0`` or the
    division is impossible. Golden: ``used_percent(1000, 250, 200) == 0.79``.
    """
    if total <= 0:
        return -1.0
    used = total - free
    entire = used + usable
    if entire <= 0:
        return -1.0
    pct = used * 100 // entire + (1 if (used * 100) % entire else 0)
    return pct / 100.0


class FixedDiskUsage:
    """A disk probe that always reports ``ratio`` (0.0-1.0): a simulated disk.

    Teaching stores (notebooks, ``rmqlab demo``) use it so that the machine's own disk cannot change
    the story: on a laptop whose disk is more than 90 % full, the real probe makes the store refuse
    every put (RocketMQ's disk-full rule), and above 85 % cleanup deletes files. Mutable on purpose:
    set ``probe.ratio = 0.86`` to fill the simulated disk.
    """

    def __init__(self, ratio: float) -> None:
        if not 0.0 <= ratio <= 1.0:
            raise ValueError(f"disk usage ratio must be within 0.0-1.0, got {ratio!r}")
        self.ratio = float(ratio)

    def __call__(self, path: str) -> float:
        return self.ratio

    def __repr__(self) -> str:
        return f"FixedDiskUsage({self.ratio:.2f})"


def system_disk_usage(path: str) -> float:
    """``used_percent`` of the file system holding ``path`` (``statvfs``); -1.0 if it is missing."""
    try:
        if not os.path.exists(path):
            return -1.0
        st = os.statvfs(path)
    except OSError:
        return -1.0
    return used_percent(
        st.f_blocks * st.f_frsize, st.f_bfree * st.f_frsize, st.f_bavail * st.f_frsize
    )
