"""The sync-flush benchmark's bare Python group commit is a real group commit: every record it
acknowledges was forced by an ``msync`` whose range covers it, forces are shared between writers,
and the mapping holds what was appended. (A baseline that skipped forcing would flatter itself and
make the store's ratio against it meaningless.)"""

from __future__ import annotations

import mmap
import sys
from pathlib import Path

import pytest

from rmqlab.files import fs

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
bench_durability = pytest.importorskip("bench_durability")


@pytest.fixture
def msyncs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """The (start, end) range of every msync the baselines make, in call order."""
    ranges: list[tuple[int, int]] = []
    real = fs.msync_range

    def recording(mm: mmap.mmap, addr: int, offset: int, length: int) -> None:
        real(mm, addr, offset, length)
        ranges.append((offset, offset + length))

    monkeypatch.setattr(fs, "msync_range", recording)
    return ranges


def test_every_acknowledged_record_is_forced_and_forces_are_shared(
        tmp_path: Path, msyncs: list[tuple[int, int]]) -> None:
    rate, per_flush, unforced = bench_durability.bare_group_commit(str(tmp_path), 6, 0.4)
    assert rate > 0
    assert unforced == 0
    assert msyncs, "no msync at all"
    # each force starts at or below the page of the end forced before it: no gap is left unforced
    forced = 0
    for start, end in msyncs:
        assert start % mmap.PAGESIZE == 0
        assert start <= forced
        forced = max(forced, end)
    assert forced % 1024 == 0  # whole records
    assert per_flush >= 1.0
    # six writers share forces: fewer msyncs than records (one each would be 1.0 per flush)
    assert forced // 1024 > len(msyncs)


def test_a_single_writer_forces_each_record_once(tmp_path: Path, msyncs: list[tuple[int, int]]) -> None:
    _, per_flush, unforced = bench_durability.bare_group_commit(str(tmp_path), 1, 0.2)
    assert unforced == 0
    assert per_flush == 1.0  # nobody to share with
    assert [end for _, end in msyncs] == [1024 * (i + 1) for i in range(len(msyncs))]


def test_the_bare_loop_forces_every_append_on_its_own(tmp_path: Path, msyncs: list[tuple[int, int]]) -> None:
    rate = bench_durability.bare_sync_loop(str(tmp_path), 3, 0.3)
    assert rate > 0
    ends = sorted(end for _, end in msyncs)
    assert ends == [1024 * (i + 1) for i in range(len(ends))]  # one msync per append, none skipped


def test_timeline_counts_busy_time_and_gaps_once_where_msyncs_overlap() -> None:
    us = 1_000
    # 0-100 and 50-150 overlap (busy 150), idle 150-200 (a gap of 50), 200-300 alone; sizes
    events = [(50 * us, 150 * us, 8192), (0, 100 * us, 4096), (200 * us, 300 * us, 4096)]
    st = bench_durability.timeline_stats(events)
    assert st["busy"] == pytest.approx(250 / 300)
    assert st["gap50"] == pytest.approx(50)
    assert st["per_s"] == pytest.approx(3 / 300e-6)
    assert st["p50"] == pytest.approx(100)
    assert st["bytes"] == 4096
    assert bench_durability.timeline_stats(events[:1]) == {}


def test_timeline_sees_the_stores_msyncs_and_puts_the_real_call_back(tmp_path: Path) -> None:
    from rmqlab import Message, MessageStore, MessageStoreConfig
    from rmqlab.files import mapped_file

    real = fs.msync_range
    root = str(tmp_path / "s")
    config = MessageStoreConfig(store_path_root_dir=root, flush_disk_type="SYNC_FLUSH",
                                mapped_file_size_commit_log=1 << 20)  # fmt: skip
    with MessageStore.open(root, config, threaded=False) as store, bench_durability.msync_timeline() as events:
        for _ in range(3):
            assert store.put_message(Message("T", b"x" * 100)).ok
    assert len(events) >= 3
    assert all(t1 >= t0 and n > 0 for t0, t1, n in events)
    assert fs.msync_range is real
    assert mapped_file.msync_range is real


def test_cpu_ledger_counts_faults_and_each_service_threads_cpu(tmp_path: Path) -> None:
    """The sync-flush CPU table is read against its numbers: the ledger must see page faults the
    block makes, CPU a service thread burns inside the block, and nothing from before it."""
    from rmqlab import Message, MessageStore, MessageStoreConfig

    root = str(tmp_path / "s")
    config = MessageStoreConfig(store_path_root_dir=root, mapped_file_size_commit_log=1 << 20)
    with MessageStore.open(root, config, threaded=True) as store:
        pages = 256
        mm = mmap.mmap(-1, pages * mmap.PAGESIZE)
        with bench_durability.cpu_ledger() as ledger:
            for i in range(pages):  # a first write to each anonymous page faults once
                mm[i * mmap.PAGESIZE] = 1
            for i in range(3000):  # work for the reput thread
                assert store.put_message(Message("T", b"x" * 200, keys=[f"k{i}"])).ok
            assert store.wait_dispatched(60)
        mm.close()
    assert ledger["faults"] >= pages
    assert ledger["user"] + ledger["sys"] > 0
    assert ledger["switches"] >= 0
    assert "rmqlab-reput user" in ledger
    assert "rmqlab-reput sys" in ledger
    assert ledger["rmqlab-reput user"] + ledger["rmqlab-reput sys"] <= ledger["user"] + ledger["sys"] + 0.02
    row = bench_durability._ledger_row("  store", 1, ledger, 3000)
    assert row.split()[:2] == ["store", "1"]
    assert len(row.split()) >= 12
