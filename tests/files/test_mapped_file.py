"""MappedFile: pointers, page rules, zero-copy reads, refcount/destroy, read-only, warm-up."""

from __future__ import annotations

import os

import pytest

from rmqlab.config import ASYNC_FLUSH, SYNC_FLUSH
from rmqlab.errors import MappedFileError, ReadOnlyStore
from rmqlab.events import EventBus, EventRecorder, FileCreated, FileWarmed
from rmqlab.files.mapped_file import OS_PAGE_SIZE, MappedFile

SIZE = 64 * 1024  # 16 pages


@pytest.fixture
def mf(tmp_path):
    f = MappedFile(str(tmp_path / f"{SIZE * 3:020d}"), SIZE)
    yield f
    f.close()


def test_creates_sparse_file_named_by_offset(
    tmp_path, bus: EventBus, recorder: EventRecorder
) -> None:
    path = str(tmp_path / f"{SIZE:020d}")
    f = MappedFile(path, SIZE, bus=bus, queue_name="q")
    assert os.path.getsize(path) == SIZE
    assert f.name == f"{SIZE:020d}"
    assert f.file_name == path
    assert f.file_from_offset == SIZE
    assert (f.wrote_position, f.committed_position, f.flushed_position) == (0, 0, 0)
    assert f.read_position == 0
    assert not f.is_full()
    assert recorder.of(FileCreated) == [FileCreated("q", path, SIZE, SIZE, False)]
    f.close()
    MappedFile(path, SIZE, bus=bus).close()  # opening an existing file publishes nothing
    assert len(recorder.of(FileCreated)) == 1


def test_index_style_and_bad_names(tmp_path) -> None:
    f = MappedFile(str(tmp_path / "20240101120000123"), 4096)
    assert f.file_from_offset == 20240101120000123
    f.close()
    with pytest.raises(MappedFileError):
        MappedFile(str(tmp_path / "abc"), 4096)


def test_append_message_and_full(mf: MappedFile) -> None:
    assert mf.append_message(b"a" * 1000)
    assert mf.wrote_position == 1000
    assert mf.read_position == 1000
    assert bytes(mf.buffer[:1000]) == b"a" * 1000
    assert not mf.append_message(b"b" * (SIZE - 999))  # does not fit: nothing written
    assert mf.wrote_position == 1000
    assert mf.append_message(b"c" * (SIZE - 1000))
    assert mf.is_full()
    assert not mf.append_message(b"x")


def test_append_with_hot_path_contract(mf: MappedFile) -> None:
    seen = []

    def fn(buf, pos, max_blank, file_from_offset):
        seen.append((pos, max_blank, file_from_offset))
        buf[pos : pos + 10] = b"0123456789"
        return 10

    assert mf.append_with(fn) == 10
    assert mf.append_with(fn) == 10
    assert seen == [(0, SIZE, SIZE * 3), (10, SIZE - 10, SIZE * 3)]
    assert bytes(mf.buffer[:20]) == b"0123456789" * 2
    assert mf.append_with(lambda buf, pos, mb, off: mb) == SIZE - 20  # e.g. a blank EOF fill
    assert mf.is_full()
    assert mf.append_with(fn) == -1  # full: fn not called
    assert len(seen) == 2


def test_commit_without_write_buffer_returns_wrote(mf: MappedFile) -> None:
    mf.append_message(b"x" * 5000)
    assert mf.commit(0) == 5000
    assert mf.committed_position == 0  # RocketMQ does not maintain it without a write buffer
    assert mf.read_position == 5000


@pytest.mark.parametrize(
    ("wrote", "flushed", "least", "expected"),
    [
        (0, 0, 0, False),
        (1, 0, 0, True),  # leastPages 0: anything new
        (4096, 4096, 0, False),
        (4095, 0, 1, False),  # less than one whole page boundary crossed
        (4096, 0, 1, True),
        (8191, 4000, 1, True),  # 1 - 0 pages
        (8191, 4096, 1, False),  # 1 - 1 pages
        (4 * 4096 - 1, 0, 4, False),
        (4 * 4096, 0, 4, True),
        (SIZE, SIZE, 4, True),  # full file: always allowed
    ],
)
def test_flush_page_rule(
    mf: MappedFile, wrote: int, flushed: int, least: int, expected: bool
) -> None:
    mf.set_wrote_position(wrote)
    mf.set_flushed_position(flushed)
    assert mf.is_able_to_flush(least) is expected
    before = mf.flushed_position
    assert mf.flush(least) == (wrote if expected else before)


def test_flush_writes_to_disk_and_captures_read_position(mf: MappedFile) -> None:
    mf.append_message(b"hello")
    assert mf.flush(0) == 5
    with open(mf.file_name, "rb") as f:
        assert f.read(5) == b"hello"
    assert mf.flush(0) == 5  # nothing new


def test_select_mapped_buffer_is_zero_copy_and_bounded(mf: MappedFile) -> None:
    mf.append_message(b"abcdefgh")
    r = mf.select_mapped_buffer(2, 4)
    assert r is not None
    assert r.start_offset == mf.file_from_offset + 2
    assert r.size == 4
    assert r.mapped_file is mf
    assert bytes(r.buffer) == b"cdef"
    mf.buffer[3] = ord("Z")  # mutate the mapping: the view sees it
    assert bytes(r.buffer) == b"cZef"
    with open(mf.file_name, "r+b") as f:  # mutate the file itself
        f.seek(4)
        f.write(b"Y")
    assert bytes(r.buffer) == b"cZYf"
    assert mf.ref_count == 2
    r.release()
    r.release()  # idempotent
    assert mf.ref_count == 1
    with mf.select_mapped_buffer(5) as rest:  # to the read position
        assert bytes(rest.buffer) == b"fgh"
        assert rest.size == 3
    assert mf.ref_count == 1
    assert mf.select_mapped_buffer(8) is None
    assert mf.select_mapped_buffer(4, 5) is None
    assert mf.select_mapped_buffer(-1, 2) is None
    assert mf.select_mapped_buffer(0, 8) is not None


def test_destroy_while_held_then_forced(tmp_path) -> None:
    path = str(tmp_path / f"{0:020d}")
    f = MappedFile(path, SIZE)
    f.append_message(b"data")
    before = MappedFile.total_mapped_files()
    r = f.select_mapped_buffer(0)
    assert r is not None
    assert f.destroy(1000, now_ms=10_000) is False  # a reader holds it
    assert not f.is_available()
    assert os.path.exists(path)
    assert f.select_mapped_buffer(0) is None  # unavailable: no new readers
    assert f.destroy(1000, now_ms=10_500) is False  # interval not yet passed
    assert f.destroy(1000, now_ms=11_000) is True  # forced
    assert not os.path.exists(path)
    assert bytes(r.buffer) == b"data"  # the reader's view stays valid in Python
    assert MappedFile.total_mapped_files() == before - 1
    r.release()
    assert f.is_cleanup_over()


def test_destroy_after_reader_releases(tmp_path) -> None:
    path = str(tmp_path / f"{0:020d}")
    f = MappedFile(path, SIZE)
    f.append_message(b"x")
    r = f.select_mapped_buffer(0)
    assert f.destroy(120_000, now_ms=0) is False
    r.release()  # last reference: unmapped now
    assert f.is_cleanup_over()
    assert os.path.exists(path)
    assert f.destroy(120_000, now_ms=1) is True
    assert not os.path.exists(path)


def test_destroy_unheld_deletes_at_once(tmp_path) -> None:
    path = str(tmp_path / f"{0:020d}")
    f = MappedFile(path, SIZE)
    vm = MappedFile.total_mapped_virtual_memory()
    assert f.destroy(1000) is True
    assert not os.path.exists(path)
    assert MappedFile.total_mapped_virtual_memory() == vm - SIZE
    assert f.hold() is False


def test_close_keeps_file(tmp_path) -> None:
    path = str(tmp_path / f"{0:020d}")
    f = MappedFile(path, SIZE)
    f.append_message(b"keep")
    f.flush(0)
    f.close()
    f.close()
    assert os.path.getsize(path) == SIZE
    g = MappedFile(path, SIZE)
    assert bytes(g.buffer[:4]) == b"keep"
    g.close()


def test_read_only_short_file_and_writes_rejected(tmp_path) -> None:
    path = str(tmp_path / f"{0:020d}")
    with open(path, "wb") as f:
        f.write(b"short sample")
    ro = MappedFile(path, SIZE, read_only=True)
    assert ro.mapped_length == 12
    assert ro.read_only
    assert ro.wrote_position == ro.read_position == 12
    with ro.select_mapped_buffer(0) as r:
        assert bytes(r.buffer) == b"short sample"
    with pytest.raises(ReadOnlyStore):
        ro.append_message(b"x")
    with pytest.raises(ReadOnlyStore):
        ro.append_with(lambda *a: 0)
    with pytest.raises(ReadOnlyStore):
        ro.destroy(0)
    with pytest.raises(ReadOnlyStore):
        ro.warm_mapped_file(ASYNC_FLUSH, 1)
    with pytest.raises(TypeError):
        ro.buffer[0] = 1
    assert ro.flush(0) == 12  # never forces, never writes
    ro.close()
    assert os.path.getsize(path) == 12
    with pytest.raises(MappedFileError):
        MappedFile(str(tmp_path / f"{SIZE:020d}"), SIZE, read_only=True)  # never creates
    assert not os.path.exists(tmp_path / f"{SIZE:020d}")


def test_read_only_empty_file(tmp_path) -> None:
    path = str(tmp_path / f"{0:020d}")
    open(path, "wb").close()
    ro = MappedFile(path, SIZE, read_only=True)
    assert ro.mapped_length == 0
    assert ro.select_mapped_buffer(0) is None
    ro.close()


@pytest.mark.parametrize(
    ("flush_type", "pages", "flushes"), [(ASYNC_FLUSH, 4, 0), (SYNC_FLUSH, 4, 4)]
)
def test_warm_mapped_file(tmp_path, bus, recorder, flush_type, pages, flushes) -> None:
    f = MappedFile(str(tmp_path / f"{0:020d}"), SIZE, bus=bus, queue_name="commitlog")
    res = f.warm_mapped_file(flush_type, pages)
    # 16 pages; SYNC forces after pages 4, 8, 12 and at the end (RocketMQ's loop)
    assert res.pages == SIZE // OS_PAGE_SIZE
    assert res.flushes == flushes
    assert isinstance(res.mlocked, bool)
    assert isinstance(res.madvised, bool)
    assert recorder.of(FileWarmed) == [FileWarmed("commitlog", f.file_name, 16, res.mlocked)]
    assert bytes(f.buffer) == bytes(SIZE)
    assert os.stat(f.file_name).st_blocks * 512 >= SIZE  # every page touched -> allocated
    f.close()


def test_warm_mlock_refused_is_reported(tmp_path, monkeypatch) -> None:
    import rmqlab.files.mapped_file as mod

    monkeypatch.setattr(mod, "try_mlock", lambda buf, n: False)
    f = MappedFile(str(tmp_path / f"{0:020d}"), SIZE)
    assert f.warm_mapped_file(SYNC_FLUSH, 0).mlocked is False  # pages=0: force every page
    f.close()


def test_store_timestamp_and_mtime(mf: MappedFile) -> None:
    mf.store_timestamp = 123
    assert mf.store_timestamp == 123
    os.utime(mf.file_name, ns=(5_000_000_000, 5_000_000_000))
    assert mf.get_last_modified_timestamp() == 5000


@pytest.mark.parametrize("error", [OSError(12, "Cannot allocate memory"), KeyboardInterrupt()])
def test_a_failed_or_interrupted_mapping_leaves_no_descriptor_open(tmp_path, monkeypatch, error) -> None:
    """The descriptor opened for the mapping is closed when mmap fails or is interrupted."""
    import mmap as mmap_module

    def refuse(*args, **kwargs):
        raise error

    before = set(os.listdir("/proc/self/fd"))
    monkeypatch.setattr(mmap_module, "mmap", refuse)
    with pytest.raises((MappedFileError, KeyboardInterrupt)):
        MappedFile(str(tmp_path / f"{0:020d}"), 4096)
    monkeypatch.undo()
    assert set(os.listdir("/proc/self/fd")) <= before
