"""MappedFile.prefault and fs.madvise_populate_write on real mapped files (tmp_path, no mocks)."""

from __future__ import annotations

import mmap
import os
import sys
from pathlib import Path

import pytest

from rmqlab.files import fs
from rmqlab.files.mapped_file import MappedFile
from rmqlab.files.transient_store_pool import TransientStorePool

PAGE = mmap.PAGESIZE
SIZE = 16 * PAGE

linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux") or tuple(map(int, os.uname().release.split(".")[:2])) < (5, 14),
    reason="MADV_POPULATE_WRITE needs Linux >= 5.14",
)


def _name(tmp_path: Path, offset: int = 0) -> str:
    return str(tmp_path / f"{offset:020d}")


@linux_only
def test_madvise_populate_write_keeps_zeros_and_refuses_a_misaligned_start(tmp_path: Path) -> None:
    mf = MappedFile(_name(tmp_path), SIZE)
    try:
        addr = fs.address_of(mf.buffer)
        assert fs.madvise_populate_write(addr, SIZE)
        assert fs.madvise_populate_write(addr, 0)  # nothing to do
        assert not fs.madvise_populate_write(addr + 1, PAGE)  # EINVAL: not page aligned
        assert not fs.madvise_populate_write(0, PAGE)
        assert bytes(mf.buffer) == bytes(SIZE)
    finally:
        mf.close()
    with open(_name(tmp_path), "rb") as f:
        assert f.read() == bytes(SIZE)


@linux_only
def test_prefault_from_the_writer_page_to_a_page_bound_and_never_past_the_file(tmp_path: Path) -> None:
    mf = MappedFile(_name(tmp_path), SIZE)
    try:
        assert mf.prefaulted_position == 0
        assert mf.append_message(b"\x07" * (PAGE + 100))
        # the append made its pages writable first, and 1/128 of the file past them (reserve)
        assert mf.prefaulted_position == mf.writable_to == 2 * PAGE
        # from there (the writer's page or past it) to upto rounded down to a page (3 * PAGE)
        assert mf.prefault(3 * PAGE + 5) == PAGE
        assert mf.prefaulted_position == 3 * PAGE
        assert mf.prefault(3 * PAGE + 5) == 0  # nothing new
        assert mf.prefault(100 * SIZE) == SIZE - 3 * PAGE  # capped at the file size
        assert mf.prefaulted_position == SIZE
        assert mf.prefault(100 * SIZE) == 0
        # the writer is unaffected and the pages past it are zeros
        assert mf.append_message(b"\x09" * 10)
        assert bytes(mf.buffer[: PAGE + 100]) == b"\x07" * (PAGE + 100)
        assert bytes(mf.buffer[PAGE + 100 : PAGE + 110]) == b"\x09" * 10
        assert bytes(mf.buffer[mf.wrote_position :]) == bytes(SIZE - mf.wrote_position)
        assert mf.flush(0) == mf.wrote_position
    finally:
        mf.close()
    with open(_name(tmp_path), "rb") as f:
        data = f.read()
    assert len(data) == SIZE
    assert data[PAGE + 110 :] == bytes(SIZE - PAGE - 110)


@linux_only
def test_prefault_of_a_size_that_is_not_a_page_multiple(tmp_path: Path) -> None:
    size = 3 * PAGE + 123
    mf = MappedFile(_name(tmp_path), size)
    try:
        assert mf.prefault(1 << 30) == size
        assert mf.prefaulted_position == size
        assert mf.prefault(1 << 30) == 0
    finally:
        mf.close()
    assert os.path.getsize(_name(tmp_path)) == size


def test_prefault_is_a_noop_for_read_only_pool_and_shut_down_files(tmp_path: Path) -> None:
    writable = MappedFile(_name(tmp_path), SIZE)
    assert writable.append_message(b"x" * 10)
    writable.flush(0)
    ro = MappedFile(_name(tmp_path), SIZE, read_only=True)
    try:
        assert ro.prefault(SIZE) == 0
        assert ro.prefaulted_position == 0
    finally:
        ro.close()

    pool = TransientStorePool(1, SIZE)
    pool.init()
    try:
        pooled = MappedFile(_name(tmp_path, SIZE), SIZE, transient_store_pool=pool)
        assert pooled.write_buffer is not None
        assert pooled.prefault(SIZE) == 0
        assert pooled.prefaulted_position == 0
        pooled.close()
    finally:
        pool.destroy()

    writable.shutdown(0)
    assert writable.prefault(SIZE) == 0
    writable.close()
    assert writable.prefault(SIZE) == 0
    gone = MappedFile(_name(tmp_path, 2 * SIZE), SIZE)
    assert gone.destroy(0)
    assert gone.prefault(SIZE) == 0


def test_prefault_reports_a_refusal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("rmqlab.files.mapped_file.populate_write", lambda addr, length: -1)  # kernel < 5.14
    monkeypatch.setattr("rmqlab.files.mapped_file._can_populate", True)  # restored after the test
    mf = MappedFile(_name(tmp_path), SIZE)
    try:
        assert mf.prefault(SIZE) == -1
        assert mf.prefaulted_position == 0
    finally:
        mf.close()
