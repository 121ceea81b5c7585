"""TransientStorePool: a few locked, file-sized memory buffers that new CommitLog files write into.

RocketMQ (spec §7.5) allocates ``transientStorePoolSize`` direct buffers of the CommitLog file size
and ``mlock``s them. A new file borrows one as its *write buffer*: appends go to the buffer, the
commit service copies ``buffer[committed:wrote]`` into the file with a channel write, readers see
only committed bytes, and the buffer goes back to the pool once the whole file is committed.

Here each buffer is an anonymous ``mmap`` (page aligned, so ``mlock`` works on it); a failed
``mlock`` is reported by :attr:`TransientStorePool.mlocked` and is otherwise harmless.

Deviation from RocketMQ: a returned buffer is zeroed (``zero_on_return=True``) so that the bytes
after a file's end-of-file blank record are zero in TSP mode as in mmap mode (RocketMQ leaves the
previous file's stale bytes there); files written with and without the pool are then identical.

Thread-safety: ``borrow_buffer``/``return_buffer`` may be called from any thread.
"""

from __future__ import annotations

import ctypes
import mmap
import threading
from collections import deque

from rmqlab.files.fs import address_of, try_mlock, try_munlock

__all__ = ["TransientStorePool"]


class TransientStorePool:
    """``pool_size`` write buffers of ``file_size`` bytes each; call :meth:`init` before use."""

    def __init__(self, pool_size: int, file_size: int, *, zero_on_return: bool = True) -> None:
        self.pool_size = pool_size
        self.file_size = file_size
        self.zero_on_return = zero_on_return
        self.mlocked = False
        self._maps: list[mmap.mmap] = []
        self._views: dict[int, tuple[mmap.mmap, memoryview]] = {}  # id(view) -> (map, view)
        self._available: deque[memoryview] = deque()
        self._lock = threading.Lock()

    def init(self) -> None:
        """Allocate and (try to) ``mlock`` every buffer."""
        locked = True
        for _ in range(self.pool_size):
            mm = mmap.mmap(-1, self.file_size)
            locked = try_mlock(mm, self.file_size) and locked
            view = memoryview(mm)
            self._maps.append(mm)
            self._views[id(view)] = (mm, view)
            self._available.append(view)
        self.mlocked = locked and self.pool_size > 0

    def borrow_buffer(self) -> memoryview | None:
        """Take a buffer (last returned first, like ``pollFirst``); None if none is left."""
        with self._lock:
            return self._available.popleft() if self._available else None

    def return_buffer(self, buf: memoryview) -> None:
        """Give a buffer back (zeroed first when ``zero_on_return``)."""
        entry = self._views.get(id(buf))
        if entry is None or entry[1] is not buf:
            raise ValueError("buffer does not belong to this TransientStorePool")
        with self._lock:
            if any(b is buf for b in self._available):
                # two files would write into one buffer: refuse rather than corrupt
                raise ValueError("buffer given back to the TransientStorePool twice")
        if self.zero_on_return:
            ctypes.memset(address_of(entry[0]), 0, self.file_size)
        with self._lock:
            self._available.appendleft(buf)

    def available_buffer_nums(self) -> int:
        """Buffers left to borrow (RocketMQ's ``availableBufferNums``)."""
        return len(self._available)

    def destroy(self) -> None:
        """Unlock and unmap every buffer; buffers still borrowed become unusable."""
        with self._lock:
            views = list(self._views.values())
            self._views.clear()
            self._available.clear()
            self._maps.clear()
        for mm, view in views:
            try:
                view.release()
            except BufferError:
                pass
            if self.mlocked:
                try_munlock(mm, self.file_size)
            try:
                mm.close()
            except BufferError:
                pass  # a borrower still exports a slice; the map goes away with it
