"""StoreStatsService: put counts, TPS, latency distribution and sizes, as RocketMQ reports them.

Latency buckets are RocketMQ's ``putMessageDistributeTime``: the put's time in whole
milliseconds (Java takes the difference of two ``currentTimeMillis``; here the elapsed time
rounded down), counted as <= 0, < 10, < 50, < 100, < 200, < 500, < 1000, < 2000, < 3000, < 4000,
< 5000, < 10000 or more, with RocketMQ's labels. A put under a millisecond counts as 0 ms, so
nearly every put of a healthy store lands in ``<=0ms``, as on a broker. TPS is computed from
samples taken by ``run_once`` against the clock.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_right
from collections import deque
from dataclasses import dataclass

from rmqlab.clock import Clock

__all__ = ["StoreStats", "StoreStatsService"]

_perf_ns = time.perf_counter_ns
_FOLD_AT = 1 << 14  # fast puts kept unfolded at most (bounded memory when nothing reads stats)
_BOUNDS_MS = (10, 50, 100, 200, 500, 1000, 2000, 3000, 4000, 5000, 10000)  # "value < bound" of each bucket
# StoreStatsService.PUT_MESSAGE_ENTIRE_TIME_MAX_DESC, without the brackets
BUCKET_LABELS = ("<=0ms", "0~10ms", "10~50ms", "50~100ms", "100~200ms", "200~500ms", "500ms~1s",
                 "1~2s", "2~3s", "3~4s", "4~5s", "5~10s", "10s~")


@dataclass(frozen=True)
class StoreStats:
    put_message_times_total: int
    put_message_size_total: int
    put_message_failed_times: int
    get_message_times_total: int
    get_message_found_total: int
    put_tps: float
    put_latency_distribution: dict[str, int]
    put_latency_max_ms: float
    average_message_size: float


class StoreStatsService:
    """Put/get counters. A successful put faster than 1 ms (nearly all of them) costs two list
    appends and no lock: ``list.append`` is atomic under the GIL, and the lists are folded into
    the totals (under the lock) whenever the totals are read, by ``run_once`` and when they
    grow long. Everything else (failures, slow puts) takes the lock."""

    name = "store_stats"

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._put_times = 0
        self._put_size = 0
        self.put_failed = 0
        self.get_times = 0
        self.get_found = 0
        self._latency = [0] * len(BUCKET_LABELS)
        self._latency_max_ns = 0
        # successful puts under 1 ms not folded in yet: sizes, elapsed ns, and count - 1 of
        # the batches among them (each list is folded on its own, so a put caught between two
        # appends by a fold is complete at the next one)
        self._fast_sizes: list[int] = []
        self._fast_elapsed: list[int] = []
        self._fast_extra: list[int] = []
        self._samples: deque[tuple[int, int]] = deque(maxlen=60)

    def interval_ms(self) -> float:
        return 1000.0

    def record_put(self, ok: bool, size: int, count: int, started_ns: int) -> None:
        elapsed_ns = _perf_ns() - started_ns
        if ok and elapsed_ns < 1_000_000:  # nearly every put: 0 whole ms, the <=0ms bucket
            sizes = self._fast_sizes
            sizes.append(size)
            self._fast_elapsed.append(elapsed_ns)
            if count != 1:
                self._fast_extra.append(count - 1)
            if len(sizes) >= _FOLD_AT:
                self._fold()
            return
        value = elapsed_ns // 1_000_000  # whole ms, as RocketMQ's value
        i = 0 if value <= 0 else 1 + bisect_right(_BOUNDS_MS, value)
        with self._lock:
            if ok:
                self._put_times += count
                self._put_size += size
            else:
                self.put_failed += count
            self._latency[i] += 1
            if elapsed_ns > self._latency_max_ns:
                self._latency_max_ns = elapsed_ns

    def _fold(self) -> None:
        """Move the appended fast puts into the totals. Appends racing with this land past
        ``n`` and stay for the next fold (only this method removes items, under the lock)."""
        with self._lock:
            sizes, elapsed, extra = self._fast_sizes, self._fast_elapsed, self._fast_extra
            n, k, m = len(sizes), len(elapsed), len(extra)
            if n:
                self._put_size += sum(sizes[:n])
                del sizes[:n]
            if m:
                self._put_times += sum(extra[:m])
                del extra[:m]
            self._put_times += n
            if k:
                self._latency[0] += k
                top = max(elapsed[:k])
                del elapsed[:k]
                if top > self._latency_max_ns:
                    self._latency_max_ns = top

    @property
    def put_times(self) -> int:
        self._fold()
        return self._put_times

    @property
    def put_size(self) -> int:
        self._fold()
        return self._put_size

    @property
    def latency(self) -> list[int]:
        self._fold()
        return self._latency

    @property
    def latency_max_ms(self) -> float:
        self._fold()
        return self._latency_max_ns / 1e6

    def record_get(self, found: int) -> None:
        self.get_times += 1
        self.get_found += found

    def run_once(self) -> None:
        self._samples.append((self.clock.now_ms(), self.put_times))

    def snapshot(self) -> StoreStats:
        self._fold()
        tps = 0.0
        if len(self._samples) >= 2:
            (t0, n0), (t1, n1) = self._samples[0], self._samples[-1]
            if t1 > t0:
                tps = (n1 - n0) * 1000.0 / (t1 - t0)
        times, size = self._put_times, self._put_size
        return StoreStats(
            times, size, self.put_failed, self.get_times, self.get_found, tps,
            dict(zip(BUCKET_LABELS, self._latency, strict=True)), self._latency_max_ns / 1e6,
            size / times if times else 0.0,
        )
