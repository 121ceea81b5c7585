"""TransientStorePool + MappedFile in write-buffer mode: borrow/return, commit, visibility."""

from __future__ import annotations

import pytest

from rmqlab.files.mapped_file import MappedFile
from rmqlab.files.transient_store_pool import TransientStorePool

SIZE = 64 * 1024


@pytest.fixture
def pool():
    p = TransientStorePool(2, SIZE)
    p.init()
    yield p
    p.destroy()


def test_borrow_and_return(pool: TransientStorePool) -> None:
    assert pool.available_buffer_nums() == 2
    a = pool.borrow_buffer()
    b = pool.borrow_buffer()
    assert a is not None
    assert b is not None
    assert len(a) == SIZE
    assert pool.borrow_buffer() is None
    a[0:3] = b"abc"
    pool.return_buffer(a)
    assert pool.available_buffer_nums() == 1
    again = pool.borrow_buffer()
    assert again is a
    assert bytes(again[0:3]) == bytes(3)
    with pytest.raises(ValueError, match="does not belong"):
        pool.return_buffer(memoryview(bytearray(SIZE)))
    assert isinstance(pool.mlocked, bool)


def test_tsp_file_sees_only_committed_bytes(tmp_path, pool: TransientStorePool) -> None:
    f = MappedFile(str(tmp_path / f"{0:020d}"), SIZE, transient_store_pool=pool)
    assert f.write_buffer is not None
    assert pool.available_buffer_nums() == 1
    assert f.append_message(b"x" * 100)
    assert (f.wrote_position, f.committed_position, f.read_position) == (100, 0, 0)
    assert bytes(f.buffer[:100]) == bytes(100)  # not in the file yet
    assert f.select_mapped_buffer(0) is None
    assert f.flush(0) == 0  # nothing readable to flush
    assert f.commit(0) == 100
    assert f.read_position == 100
    with f.select_mapped_buffer(0) as r:
        assert bytes(r.buffer) == b"x" * 100
    assert f.flush(0) == 100  # fdatasync through the descriptor
    with open(f.file_name, "rb") as fh:
        assert fh.read(100) == b"x" * 100
    f.close()


@pytest.mark.parametrize(
    ("wrote", "least", "committed"),
    [(4095, 1, 0), (4096, 1, 4096), (3 * 4096, 4, 0), (4 * 4096, 4, 4 * 4096), (10, 0, 10)],
)
def test_commit_page_rule(tmp_path, pool, wrote: int, least: int, committed: int) -> None:
    f = MappedFile(str(tmp_path / f"{0:020d}"), SIZE, transient_store_pool=pool)
    f.append_message(b"y" * wrote)
    assert f.commit(least) == committed
    f.close()


def test_full_commit_returns_buffer(tmp_path, pool: TransientStorePool) -> None:
    f = MappedFile(str(tmp_path / f"{0:020d}"), SIZE, transient_store_pool=pool)
    f.append_message(b"z" * 10)
    f.append_with(lambda buf, pos, max_blank, off: max_blank)  # fill to the end
    assert f.is_full()
    assert f.commit(4) == SIZE  # full: always allowed
    assert f.write_buffer is None
    assert pool.available_buffer_nums() == 2
    assert f.read_position == SIZE  # wrote, now that no buffer is held
    assert f.flush(4) == SIZE
    f.close()


def test_no_buffer_left_writes_to_mmap(tmp_path, pool: TransientStorePool) -> None:
    files = [
        MappedFile(str(tmp_path / f"{i * SIZE:020d}"), SIZE, transient_store_pool=pool)
        for i in range(3)
    ]
    assert files[2].write_buffer is None
    files[2].append_message(b"direct")
    assert files[2].read_position == 6
    assert bytes(files[2].buffer[:6]) == b"direct"
    for f in files:
        f.close()
    assert pool.available_buffer_nums() == 2  # closing returns borrowed buffers


def test_destroy_before_full_commit_returns_buffer(tmp_path, pool: TransientStorePool) -> None:
    f = MappedFile(str(tmp_path / f"{0:020d}"), SIZE, transient_store_pool=pool)
    f.append_message(b"q")
    assert pool.available_buffer_nums() == 1
    assert f.destroy(0)
    assert pool.available_buffer_nums() == 2
