"""AllocateMappedFileService: creates the next CommitLog file, and the one after it, ahead of time.

Spec §7.5. ``put_request_and_return_mapped_file(next, next_next, size)`` files a request for
``next`` and (capacity permitting) one for ``next_next`` (*preallocation*), then waits for
``next``. Requests live in a table keyed by path and in a priority queue ordered larger size
first, then smaller file name (offset). While the writer fills file *k*, file *k+1* usually
already exists on disk, all zeros.

Two ways to run it:

* ``threaded=True`` (RocketMQ): :meth:`start` a daemon thread that takes requests one at a time;
  ``put_…`` waits up to ``timeout_ms`` for ``next`` (None on timeout).
* ``threaded=False`` (stepped, for tests and notebooks): ``put_…`` creates ``next`` at once by
  calling :meth:`run_once` until it exists and leaves ``next_next`` queued; a later
  ``run_once()`` (e.g. from ``store.step()``) or the next ``put_…`` creates it.

:meth:`shutdown` destroys files that were created but never handed out, as RocketMQ does.
"""

from __future__ import annotations

import heapq
import os
import threading
import time
from dataclasses import dataclass, field

from rmqlab.config import ASYNC_FLUSH
from rmqlab.errors import MappedFileError
from rmqlab.events import EventBus, FileDeleted
from rmqlab.files.mapped_file import MappedFile
from rmqlab.files.transient_store_pool import TransientStorePool
from rmqlab.wakeups import Flag

__all__ = ["AllocateMappedFileService", "AllocateRequest"]


@dataclass(eq=False)
class AllocateRequest:
    """One file to create. ``preallocated`` marks a request filed as ``next_next``."""

    file_path: str
    file_size: int
    preallocated: bool = False
    mapped_file: MappedFile | None = None
    error: str | None = None
    done: Flag = field(default_factory=Flag, repr=False)  # polled: see rmqlab.wakeups

    def sort_key(self) -> tuple[int, int]:
        # AllocateRequest.compareTo: larger fileSize first, then smaller numeric file name
        return (-self.file_size, int(os.path.basename(self.file_path)))


class AllocateMappedFileService:
    """Creates (and optionally warms) CommitLog files in order; see the module docstring."""

    name = "AllocateMappedFileService"

    def __init__(
        self,
        *,
        transient_store_pool: TransientStorePool | None = None,
        warm_mapped_file_enable: bool = False,
        flush_disk_type: str = ASYNC_FLUSH,
        flush_least_pages_when_warm_mapped_file: int = 4096,
        mapped_file_size_commit_log: int = 1024 * 1024 * 1024,
        fast_fail_if_no_buffer_in_store_pool: bool = False,
        bus: EventBus | None = None,
        threaded: bool = True,
        timeout_ms: int = 5000,
        queue_name: str = "commitlog",
    ) -> None:
        self.transient_store_pool = transient_store_pool
        self.warm_mapped_file_enable = warm_mapped_file_enable
        self.flush_disk_type = flush_disk_type
        self.flush_least_pages_when_warm_mapped_file = flush_least_pages_when_warm_mapped_file
        self.mapped_file_size_commit_log = mapped_file_size_commit_log
        self.fast_fail_if_no_buffer_in_store_pool = fast_fail_if_no_buffer_in_store_pool
        self.bus = bus
        self.threaded = threaded
        self.timeout_ms = timeout_ms
        self.queue_name = queue_name
        self.has_exception = False
        self._table: dict[str, AllocateRequest] = {}
        self._heap: list[tuple[tuple[int, int], int, AllocateRequest]] = []
        self._seq = 0
        # entered as ``with self._lock`` (a C lock), never ``with self._cond``: a producer an
        # interrupt is raised into must not leave it held (see rmqlab.wakeups)
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._stopped = False
        self._thread: threading.Thread | None = None

    # ---------------------------------------------------------------------------------------
    # requests

    def put_request_and_return_mapped_file(
        self, next_file_path: str, next_next_file_path: str, file_size: int
    ) -> MappedFile | None:
        """File requests for ``next`` and ``next_next``; return ``next`` once created (or None)."""
        can_submit = 2
        pool = self.transient_store_pool
        if pool is not None and self.fast_fail_if_no_buffer_in_store_pool:
            can_submit = pool.available_buffer_nums() - len(self._heap)
        with self._lock:
            if next_file_path not in self._table:
                if can_submit <= 0:
                    return None  # "TransientStorePool is not enough"
                self._offer(AllocateRequest(next_file_path, file_size))
                can_submit -= 1
            if next_next_file_path not in self._table and can_submit > 0:
                self._offer(AllocateRequest(next_next_file_path, file_size, preallocated=True))
            if self.has_exception and self.threaded:
                # RocketMQ: the service thread retries and clears it; stepped, this call is
                # the retry (below), so a failure once (a full disk) does not fail every roll
                return None
            req = self._table.get(next_file_path)
        if req is None:
            return None
        if not self.threaded:
            while not req.done.is_set():
                if not self.run_once():
                    # taken off the queue and never created (a run interrupted in between)
                    self._serve(req)
        # Polled: an exception raised into this thread (a notebook's interrupt) just after
        # ``Event.wait`` took its condition's lock left that lock held, and the next put,
        # waiting on the same request, blocked forever with the put lock (rmqlab.wakeups).
        deadline = time.monotonic() + self.timeout_ms / 1000.0
        while not req.done.is_set():
            if time.monotonic() >= deadline:
                return None  # "create mmap timeout"; the request stays for a later call
            time.sleep(0.0002)
        with self._lock:
            if self._table.get(next_file_path) is req:
                del self._table[next_file_path]
        return req.mapped_file

    def _offer(self, req: AllocateRequest) -> None:
        # called with self._lock held
        self._table[req.file_path] = req
        self._seq += 1
        heapq.heappush(self._heap, (req.sort_key(), self._seq, req))
        self._cond.notify_all()

    def pending_requests(self) -> list[AllocateRequest]:
        """Requests filed and not yet handed out (created or not), in priority order."""
        with self._lock:
            return sorted(self._table.values(), key=AllocateRequest.sort_key)

    # ---------------------------------------------------------------------------------------
    # the service step

    def run_once(self) -> bool:
        """Create the highest-priority queued file; False when the queue was empty."""
        with self._lock:
            if not self._heap:
                return False
            _, _, req = heapq.heappop(self._heap)
            if self._table.get(req.file_path) is not req or req.mapped_file is not None:
                return True  # expired or superseded request
        self._serve(req)
        return True

    def _serve(self, req: AllocateRequest) -> None:
        if req.mapped_file is not None:  # created, but interrupted before it was marked done
            req.done.set()
            return
        try:
            self._create(req)
        except BaseException as exc:
            # Interrupted (a KeyboardInterrupt in the thread running a stepped store's put):
            # forget the request, so the next put files it again. Left in the table, undone,
            # it made every later roll wait for it and fail (CREATE_MAPEDFILE_FAILED).
            self._fail(req, f"interrupted: {exc!r}", io_error=False)
            raise

    def _fail(self, req: AllocateRequest, error: str, *, io_error: bool = True) -> None:
        with self._lock:
            if io_error:
                self.has_exception = True
            req.error = error
            if self._table.get(req.file_path) is req:
                del self._table[req.file_path]
        req.done.set()

    def _create(self, req: AllocateRequest) -> None:
        try:
            mf = MappedFile(
                req.file_path,
                req.file_size,
                transient_store_pool=self.transient_store_pool,
                bus=self.bus,
                queue_name=self.queue_name,
                preallocated=req.preallocated,
            )
            if req.file_size >= self.mapped_file_size_commit_log and self.warm_mapped_file_enable:
                mf.warm_mapped_file(
                    self.flush_disk_type, self.flush_least_pages_when_warm_mapped_file
                )
        except (MappedFileError, OSError) as exc:
            # RocketMQ re-queues the request and retries forever; rmqlab fails it so the caller
            # sees None at once (has_exception is cleared by the next success, as in RocketMQ).
            self._fail(req, str(exc))
            return
        with self._lock:
            req.mapped_file = mf
            self.has_exception = False
        req.done.set()

    # ---------------------------------------------------------------------------------------
    # thread

    def start(self) -> None:
        """Start the background thread (threaded mode only; no-op when stepped or running)."""
        if not self.threaded or self._thread is not None:
            return
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._heap and not self._stopped:
                    self._cond.wait()
                if self._stopped:
                    return
            self.run_once()

    def shutdown(self) -> None:
        """Stop the thread and destroy files created but never handed out."""
        with self._lock:
            self._stopped = True
            self._cond.notify_all()
        if self._thread is not None:
            if self._thread.ident is not None:  # else start() was cut short before the thread ran
                self._thread.join(timeout=10)
            self._thread = None
        with self._lock:
            reqs = list(self._table.values())
            self._table.clear()
            self._heap.clear()
        for req in reqs:
            mf = req.mapped_file
            if mf is not None and mf.destroy(1000):
                bus = self.bus
                if bus is not None and bus.active:
                    bus.publish(
                        FileDeleted(
                            self.queue_name,
                            mf.file_name,
                            mf.file_from_offset,
                            "unclaimed preallocation",
                        )
                    )
