"""StoreStatsService: put counts, TPS, latency distribution and sizes, as RocketMQ reports them.

Latency buckets follow RocketMQ's ``putMessageDistributeTime`` (ms): [0], (0,10], (10,50],
(50,100], (100,200], (200,500], (500,1000], (1000,2000], (2000,3000], (3000,4000], (4000,5000],
(5000,10000], >10000. TPS is computed from samples taken by ``run_once`` against the clock.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass

from rmqlab.clock import Clock

__all__ = ["StoreStats", "StoreStatsService"]

_BUCKETS_MS = (0, 10, 50, 100, 200, 500, 1000, 2000, 3000, 4000, 5000, 10000)
BUCKET_LABELS = ("=0ms", "0~10ms", "10~50ms", "50~100ms", "100~200ms", "200~500ms", "500ms~1s",
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
    name = "store_stats"

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self.put_times = 0
        self.put_size = 0
        self.put_failed = 0
        self.get_times = 0
        self.get_found = 0
        self.latency = [0] * len(BUCKET_LABELS)
        self.latency_max_ms = 0.0
        self._samples: deque[tuple[int, int]] = deque(maxlen=60)

    def interval_ms(self) -> float:
        return 1000.0

    def record_put(self, ok: bool, size: int, count: int, started_ns: int) -> None:
        elapsed_ns = time.perf_counter_ns() - started_ns
        elapsed_ms = elapsed_ns / 1e6
        if 0 < elapsed_ns <= 10_000_000:  # nearly every put: the (0, 10 ms] bucket, no search
            i = 1
        else:
            i = 0
            while i < len(_BUCKETS_MS) and elapsed_ms > _BUCKETS_MS[i]:
                i += 1
        with self._lock:
            if ok:
                self.put_times += count
                self.put_size += size
            else:
                self.put_failed += count
            self.latency[i] += 1
            if elapsed_ms > self.latency_max_ms:
                self.latency_max_ms = elapsed_ms

    def record_get(self, found: int) -> None:
        self.get_times += 1
        self.get_found += found

    def run_once(self) -> None:
        self._samples.append((self.clock.now_ms(), self.put_times))

    def snapshot(self) -> StoreStats:
        tps = 0.0
        if len(self._samples) >= 2:
            (t0, n0), (t1, n1) = self._samples[0], self._samples[-1]
            if t1 > t0:
                tps = (n1 - n0) * 1000.0 / (t1 - t0)
        return StoreStats(
            self.put_times, self.put_size, self.put_failed, self.get_times, self.get_found, tps,
            dict(zip(BUCKET_LABELS, self.latency, strict=True)), self.latency_max_ms,
            self.put_size / self.put_times if self.put_times else 0.0,
        )
