"""fs: used_percent golden, disk probe, sparse files, lock contention, mlock/madvise fallbacks."""

from __future__ import annotations

import mmap
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rmqlab.errors import StoreLocked
from rmqlab.files.fs import (
    FileLock,
    fsync_dir,
    madvise_willneed,
    sparse_create,
    system_disk_usage,
    try_mlock,
    try_munlock,
    used_percent,
)


def test_used_percent_golden_18() -> None:
    # spec §12 golden #18: used 750, entire 950, 78.9 -> ceil 79 -> 0.79
    assert used_percent(1000, 250, 200) == 0.79


@pytest.mark.parametrize(
    ("total", "free", "usable", "expected"),
    [
        (1000, 250, 250, 0.75),  # exact: no rounding up
        (1000, 1000, 1000, 0.0),
        (1000, 0, 0, 1.0),
        (1000, 999, 999, 0.01),  # 0.1 % rounds up to 1 %
        (0, 0, 0, -1.0),
        (1000, 1000, 0, -1.0),  # entire == 0: Java's division fails -> -1
    ],
)
def test_used_percent_cases(total: int, free: int, usable: int, expected: float) -> None:
    assert used_percent(total, free, usable) == expected


def test_system_disk_usage(tmp_path) -> None:
    pct = system_disk_usage(str(tmp_path))
    assert 0.0 <= pct <= 1.0
    assert system_disk_usage(str(tmp_path / "missing")) == -1.0


def test_sparse_create_extends_without_writing(tmp_path) -> None:
    path = str(tmp_path / "f")
    assert sparse_create(path, 1 << 20) is True
    st = os.stat(path)
    assert st.st_size == 1 << 20
    assert st.st_blocks * 512 < 1 << 20  # sparse: not all blocks allocated
    assert sparse_create(path, 4096) is False  # never shrinks
    assert os.path.getsize(path) == 1 << 20


def test_fsync_dir_tolerates_missing(tmp_path) -> None:
    fsync_dir(str(tmp_path))
    fsync_dir(str(tmp_path / "nope"))


def test_file_lock_writes_lock_and_excludes_same_process(tmp_path) -> None:
    path = str(tmp_path / "lock")
    with FileLock(path) as lock:
        assert lock.locked
        with open(path, "rb") as f:
            assert f.read(4) == b"lock"
        with pytest.raises(StoreLocked) as info:
            FileLock(path).acquire()
        assert info.value.path == path
    assert not lock.locked
    with FileLock(path):  # released: can be taken again
        pass


def test_file_lock_excludes_other_process(tmp_path) -> None:
    path = str(tmp_path / "lock")
    script = textwrap.dedent(
        f"""
        from rmqlab.errors import StoreLocked
        from rmqlab.files.fs import FileLock
        try:
            FileLock({path!r}).acquire()
        except StoreLocked:
            print("locked")
        else:
            print("acquired")
        """
    )

    def other() -> str:
        out = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, check=True
        )
        return out.stdout.strip()

    with FileLock(path):
        assert other() == "locked"
    assert other() == "acquired"


def test_mlock_and_madvise_never_raise() -> None:
    mm = mmap.mmap(-1, 64 * 1024)
    locked = try_mlock(mm, len(mm))
    assert isinstance(locked, bool)
    if locked:
        assert try_munlock(mm, len(mm))
    assert try_mlock(mm, 0) is False
    assert isinstance(madvise_willneed(mm), bool)
    ro = mmap.mmap(-1, 4096, prot=mmap.PROT_READ)
    assert isinstance(try_mlock(ro, 4096), bool)  # read-only buffers are accepted too
    mm.close()
    ro.close()


def test_msync_range_forces_a_dirty_range_and_falls_back_without_an_address(tmp_path: Path) -> None:
    from rmqlab.files.fs import address_of, msync_range

    _mmap = mmap

    path = tmp_path / "f"
    path.write_bytes(bytes(3 * _mmap.PAGESIZE))
    with open(path, "r+b") as f:
        mm = _mmap.mmap(f.fileno(), 0)
    try:
        mm[10:15] = b"hello"
        msync_range(mm, address_of(mm), 0, 15)  # libc msync, GIL released
        mm[_mmap.PAGESIZE : _mmap.PAGESIZE + 3] = b"abc"
        msync_range(mm, 0, _mmap.PAGESIZE, 3)  # no address: mmap.flush
        msync_range(mm, address_of(mm), 0, 0)  # nothing to force
        assert path.read_bytes()[10:15] == b"hello"
        assert path.read_bytes()[_mmap.PAGESIZE : _mmap.PAGESIZE + 3] == b"abc"
        with pytest.raises(OSError, match="Invalid argument"):
            msync_range(mm, address_of(mm), 1, 10)  # not page aligned: EINVAL, as mmap.flush
    finally:
        mm.close()


def test_fixed_disk_usage_reports_its_ratio_and_refuses_nonsense() -> None:
    from rmqlab.files import FixedDiskUsage

    probe = FixedDiskUsage(0.4)
    assert probe("/anywhere") == 0.4
    probe.ratio = 0.86
    assert probe("/anywhere") == 0.86
    assert repr(probe) == "FixedDiskUsage(0.86)"
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match=r"within 0\.0-1\.0"):
            FixedDiskUsage(bad)
