"""The contention benchmark's baseline really is the blocking acquire, and every row puts."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from rmqlab.store import commit_log, put_lock

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
bench_contention = pytest.importorskip("bench_contention")


@pytest.mark.parametrize("yielding", [False, True])
def test_rows_put_with_the_acquire_they_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, yielding: bool) -> None:
    used: list[str] = []
    blocking = bench_contention._blocking

    def spy_blocking(lock: threading.Lock, spins: int = 0) -> None:
        used.append("blocking")
        blocking(lock)

    def spy_yielding(lock: threading.Lock, spins: int = put_lock.SPINS) -> None:
        used.append("yielding")
        put_lock.wait_until_free(lock, spins)

    monkeypatch.setattr(bench_contention, "_blocking", spy_blocking)
    monkeypatch.setattr(commit_log, "wait_until_free", spy_yielding)
    rate = bench_contention.run(str(tmp_path), producers=3, pollers=1, seconds=0.5, yielding=yielding)
    assert rate > 0
    assert commit_log.wait_until_free is spy_yielding  # put back after the row
    if yielding:  # the lock is rarely found taken: that is the point
        assert set(used) <= {"yielding"}
    else:  # the convoy: 3 producers find it taken all the time
        assert set(used) == {"blocking"}
