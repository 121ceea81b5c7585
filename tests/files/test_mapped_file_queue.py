"""MappedFileQueue: load rules, lookups, flush/commit, truncation and every delete rule."""

from __future__ import annotations

import os
import struct

import pytest

from rmqlab.errors import ReadOnlyStore
from rmqlab.events import (
    Committed,
    EventBus,
    EventRecorder,
    FileDeleted,
    FileTruncated,
    Flushed,
)
from rmqlab.files.mapped_file import MappedFile
from rmqlab.files.mapped_file_queue import MappedFileQueue
from rmqlab.files.transient_store_pool import TransientStorePool

SIZE = 8 * 1024  # two pages per file


def _name(offset: int) -> str:
    return f"{offset:020d}"


def _make_dir(path, offsets, size=SIZE) -> None:
    os.makedirs(path, exist_ok=True)
    for off in offsets:
        with open(os.path.join(path, _name(off)), "wb") as f:
            f.truncate(size)


def _filled_queue(path, n_files: int, bus: EventBus | None = None) -> MappedFileQueue:
    q = MappedFileQueue(str(path), SIZE, bus=bus)
    for i in range(n_files):
        mf = q.get_last_mapped_file_for(i * SIZE)
        assert mf is not None
        mf.append_message(bytes([i + 1]) * SIZE)
    return q


@pytest.fixture
def qdir(tmp_path):
    return tmp_path / "commitlog"


# --- load ------------------------------------------------------------------------------------


def test_load_sorted_skips_dirs_and_non_numeric(qdir) -> None:
    _make_dir(qdir, [2 * SIZE, 0, SIZE])
    os.makedirs(qdir / "00000000000000099999")
    (qdir / "notes.txt").write_text("hello")
    q = MappedFileQueue(str(qdir), SIZE)
    assert q.load()
    assert q.load_error is None
    assert [mf.file_from_offset for mf in q.mapped_files] == [0, SIZE, 2 * SIZE]
    for mf in q.mapped_files:
        assert mf.wrote_position == mf.committed_position == mf.flushed_position == SIZE
    assert q.get_min_offset() == 0
    assert q.get_max_offset() == 3 * SIZE
    assert q.gaps() == []
    assert q.check_self() == []
    q.close()


def test_load_missing_dir_is_empty(qdir) -> None:
    q = MappedFileQueue(str(qdir), SIZE)
    assert q.load()
    assert q.mapped_files == []
    assert q.get_min_offset() == -1
    assert q.get_max_offset() == 0
    assert q.get_first_mapped_file() is None
    assert q.get_last_mapped_file() is None


def test_load_rejects_size_mismatch_with_reason(qdir) -> None:
    _make_dir(qdir, [0])
    _make_dir(qdir, [SIZE], size=SIZE - 20)
    _make_dir(qdir, [2 * SIZE])
    q = MappedFileQueue(str(qdir), SIZE)
    assert q.load() is False
    err = q.load_error
    assert err is not None
    assert err.file.endswith(_name(SIZE))
    assert (err.actual_size, err.expected_size) == (SIZE - 20, SIZE)
    assert "does not match" in str(err)
    assert str(SIZE - 20) in str(err)
    assert q.mapped_files == []


def test_load_refuses_a_file_named_past_long_max(qdir) -> None:
    """RocketMQ's parseLong throws on such a name and the broker does not start: refused, named."""
    _make_dir(qdir, [0])
    (qdir / "99999999999999999999").write_bytes(b"\0" * SIZE)
    q = MappedFileQueue(str(qdir), SIZE)
    assert q.load() is False
    assert q.load_error is not None
    assert q.load_error.file.endswith("99999999999999999999")
    assert "Long.MAX_VALUE" in str(q.load_error)
    assert q.mapped_files == []


def test_load_error_names_the_size_every_file_shares(qdir) -> None:
    # a store written with another mapped file size: not damage, and the error says what size
    _make_dir(qdir, [0, 2 * SIZE, 4 * SIZE], size=2 * SIZE)
    q = MappedFileQueue(str(qdir), SIZE)
    assert q.load() is False
    assert q.load_error.uniform_size == 2 * SIZE
    assert str(q.load_error).endswith(f"(every file here is {2 * SIZE:,} bytes)")


def test_load_error_guesses_no_size_from_one_file_or_mixed_lengths(qdir) -> None:
    _make_dir(qdir, [0], size=SIZE - 20)  # one damaged file: its length says nothing
    q = MappedFileQueue(str(qdir), SIZE)
    assert q.load() is False
    assert q.load_error.uniform_size is None
    assert "every file" not in str(q.load_error)
    _make_dir(qdir, [SIZE])  # and a good one after it: two lengths
    q = MappedFileQueue(str(qdir), SIZE)
    assert q.load() is False
    assert q.load_error.uniform_size is None


def test_load_deletes_zero_length_last_file(qdir) -> None:
    _make_dir(qdir, [0])
    _make_dir(qdir, [SIZE], size=0)
    q = MappedFileQueue(str(qdir), SIZE)
    assert q.load()
    assert len(q.mapped_files) == 1
    assert not (qdir / _name(SIZE)).exists()
    q.close()


def test_load_zero_length_middle_file_fails(qdir) -> None:
    _make_dir(qdir, [0, 2 * SIZE])
    _make_dir(qdir, [SIZE], size=0)
    q = MappedFileQueue(str(qdir), SIZE)
    assert q.load() is False
    assert q.load_error.actual_size == 0


def test_load_read_only_accepts_short_last_file(qdir) -> None:
    _make_dir(qdir, [0])
    _make_dir(qdir, [SIZE], size=100)
    _make_dir(qdir, [2 * SIZE], size=0)
    q = MappedFileQueue(str(qdir), SIZE, read_only=True)
    assert q.load()
    assert [mf.read_position for mf in q.mapped_files] == [SIZE, 100]
    assert (qdir / _name(2 * SIZE)).exists()  # read-only never deletes
    assert q.get_max_offset() == SIZE + 100
    with pytest.raises(ReadOnlyStore):
        q.truncate_dirty_files(0)
    assert q.get_last_mapped_file_for(0) is q.mapped_files[-1]  # not full: nothing to create
    with pytest.raises(ReadOnlyStore):
        MappedFileQueue(str(qdir / "empty"), SIZE, read_only=True).get_last_mapped_file_for(0)
    assert not (qdir / "empty").exists()
    q.close()
    # writable load of the same dir refuses the short file
    assert MappedFileQueue(str(qdir), SIZE).load() is False


def test_gaps_reported(qdir) -> None:
    _make_dir(qdir, [0, SIZE, 3 * SIZE])
    q = MappedFileQueue(str(qdir), SIZE)
    assert q.load()
    (gap,) = q.gaps()
    assert gap.expected_offset == 2 * SIZE
    assert gap.actual_offset == 3 * SIZE
    assert q.check_self() == [str(gap)]
    # lookups still work across the gap (linear fallback)
    assert q.find_mapped_file_by_offset(3 * SIZE + 5).file_from_offset == 3 * SIZE
    assert q.find_mapped_file_by_offset(2 * SIZE + 5) is None
    q.close()


# --- creating files --------------------------------------------------------------------------


def test_get_last_mapped_file_for_creates_right_names(qdir) -> None:
    q = MappedFileQueue(str(qdir), SIZE)
    assert q.get_last_mapped_file_for(0, need_create=False) is None
    first = q.get_last_mapped_file_for(SIZE * 5 + 123)  # empty queue: file containing the offset
    assert first.name == _name(SIZE * 5)
    assert first.first_create_in_queue
    assert q.get_last_mapped_file_for(0) is first  # not full: same file
    first.append_message(b"x" * SIZE)
    second = q.get_last_mapped_file_for(0)
    assert second.name == _name(SIZE * 6)
    assert not second.first_create_in_queue
    assert sorted(os.listdir(qdir)) == [_name(SIZE * 5), _name(SIZE * 6)]
    assert q.get_last_mapped_file() is second
    q.close()


def test_queue_uses_pool_when_creating_synchronously(qdir) -> None:
    pool = TransientStorePool(1, SIZE)
    pool.init()
    q = MappedFileQueue(str(qdir), SIZE, transient_store_pool=pool)
    mf = q.get_last_mapped_file_for(0)
    assert mf.write_buffer is not None
    mf.append_message(b"abc")
    assert q.get_max_offset() == 0
    assert q.get_max_wrote_position() == 3
    assert q.remain_how_many_data_to_commit() == 3
    assert q.commit(0) is False
    assert q.committed_where == 3
    assert q.get_max_offset() == 3
    assert q.commit(0) is True
    q.close()
    pool.destroy()


def test_overlapping_commits_give_a_full_files_buffer_back_once(qdir, monkeypatch) -> None:
    # The commit service and a caller (flush(), wait_dispatched()) may commit at once. Both used
    # to copy a full file's buffer and then both gave it back to the pool: two later files would
    # have shared one write buffer.
    import threading
    import time

    pool = TransientStorePool(2, SIZE)
    pool.init()
    q = MappedFileQueue(str(qdir), SIZE, transient_store_pool=pool)
    mf = q.get_last_mapped_file_for(0)
    assert mf.append_message(b"x" * SIZE)
    slow = MappedFile._commit0

    def slow_commit0(self, wb):  # keep the first commit inside its copy while the second starts
        time.sleep(0.2)
        slow(self, wb)

    monkeypatch.setattr(MappedFile, "_commit0", slow_commit0)
    errors: list[BaseException] = []

    def commit() -> None:
        try:
            q.commit(0)
        except BaseException as e:  # the pool refuses a buffer given back twice
            errors.append(e)

    threads = [threading.Thread(target=commit) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert q.committed_where == SIZE
    assert pool.available_buffer_nums() == 2
    q.close()
    pool.destroy()


def test_flush_goes_on_once_cleanup_deleted_the_files_it_had_not_reached(qdir, bus, recorder) -> None:
    # The flush lags a whole file behind; cleanup deletes expired files without looking at it.
    # RocketMQ then finds no file at flushedWhere and never flushes again; rmqlab goes on from the
    # first file that is left (the deleted bytes need no flushing).
    q = _filled_queue(qdir, 4, bus=bus)
    assert q.flush(0) is False
    assert q.flushed_where == SIZE  # one file per call, as RocketMQ flushes
    assert q.delete_expired_file_by_time(0, 0, 0, True, now_ms=10**13, batch_max=2) == 2
    assert q.get_min_offset() == 2 * SIZE > q.flushed_where
    assert q.flush(0) is False  # moved: the first file left was flushed
    assert q.flushed_where == 3 * SIZE
    assert q.mapped_files[0].flushed_position == SIZE
    assert q.flush(0) is False
    assert q.flushed_where == 4 * SIZE
    assert all(mf.flushed_position == SIZE for mf in q.mapped_files)
    assert [e.flushed_where for e in recorder.of(Flushed)] == [SIZE, 3 * SIZE, 4 * SIZE]
    assert q.flush(0) is True  # nothing left to flush
    q.close()


def test_commit_goes_on_once_cleanup_deleted_the_files_it_had_not_reached(qdir) -> None:
    pool = TransientStorePool(4, SIZE)
    pool.init()
    q = MappedFileQueue(str(qdir), SIZE, transient_store_pool=pool)
    for i in range(3):
        assert q.get_last_mapped_file_for(i * SIZE).append_message(bytes([i + 1]) * SIZE)
    assert q.commit(0) is False
    assert q.committed_where == SIZE
    assert q.delete_expired_file_by_time(0, 0, 0, True, now_ms=10**13, batch_max=2) == 2
    assert q.get_min_offset() == 2 * SIZE
    assert q.commit(0) is False
    assert q.committed_where == 3 * SIZE
    assert q.get_max_offset() == 3 * SIZE
    with open(q.mapped_files[0].file_name, "rb") as f:
        assert f.read() == bytes([3]) * SIZE  # the last file's bytes reached it
    q.close()
    pool.destroy()


def test_the_pool_refuses_a_buffer_given_back_twice() -> None:
    pool = TransientStorePool(1, SIZE)
    pool.init()
    buf = pool.borrow_buffer()
    pool.return_buffer(buf)
    with pytest.raises(ValueError, match="twice"):
        pool.return_buffer(buf)
    assert pool.available_buffer_nums() == 1
    pool.destroy()


# --- lookups ---------------------------------------------------------------------------------


def test_find_by_offset_after_deleting_head_files(qdir) -> None:
    q = _filled_queue(qdir, 5)
    q.get_last_mapped_file_for(0)  # sixth, empty file
    assert q.delete_expired_file_by_time(0, 0, 0, True, now_ms=0, batch_max=2) == 2
    assert q.get_min_offset() == 2 * SIZE
    # index = offset // size - first.from // size
    for off in (2 * SIZE, 3 * SIZE + 7, 6 * SIZE - 1):
        assert q.find_mapped_file_by_offset(off).file_from_offset == off - off % SIZE
    assert q.find_mapped_file_by_offset(SIZE) is None  # deleted
    assert (
        q.find_mapped_file_by_offset(SIZE, return_first_on_not_found=True).file_from_offset
        == 2 * SIZE
    )
    assert q.find_mapped_file_by_offset(6 * SIZE) is None  # past the last file
    q.close()


def test_get_mapped_file_by_time(qdir) -> None:
    q = _filled_queue(qdir, 3)
    for i, mf in enumerate(q.mapped_files):
        t = (1000 + i * 100) * 1_000_000
        os.utime(mf.file_name, ns=(t, t))
    assert q.get_mapped_file_by_time(0).file_from_offset == 0
    assert q.get_mapped_file_by_time(1050).file_from_offset == SIZE
    assert q.get_mapped_file_by_time(1200).file_from_offset == 2 * SIZE
    assert q.get_mapped_file_by_time(99_999).file_from_offset == 2 * SIZE  # none: last
    q.close()


# --- flush / commit --------------------------------------------------------------------------


def test_queue_flush_per_file_and_events(qdir, bus: EventBus, recorder: EventRecorder) -> None:
    q = MappedFileQueue(str(qdir), SIZE, bus=bus, name="commitlog")
    mf = q.get_last_mapped_file_for(0)
    mf.append_message(b"a" * 100)
    mf.store_timestamp = 777
    assert q.flush(1) is True  # less than a page: nothing moves
    assert q.flush(0) is False
    assert q.flushed_where == 100
    assert q.store_timestamp == 777
    mf.append_message(b"b" * (SIZE - 100))
    nxt = q.get_last_mapped_file_for(0)
    nxt.append_message(b"c" * 10)
    assert q.remain_how_many_data_to_flush() == SIZE + 10 - 100
    assert q.how_much_fall_behind() == SIZE + 10 - 100
    assert q.flush(2) is False
    assert q.flushed_where == SIZE
    assert q.flush(2) is True  # next file: 10 bytes, under two pages
    assert q.flush(0) is False
    assert q.flushed_where == SIZE + 10
    assert [e.flushed_where for e in recorder.of(Flushed)] == [100, SIZE, SIZE + 10]
    assert recorder.of(Committed) == []
    assert q.commit(0) is False
    assert q.committed_where == SIZE
    assert q.commit(0) is False
    assert q.committed_where == SIZE + 10
    assert q.commit(0) is True
    assert recorder.of(Committed) == [
        Committed("commitlog", SIZE),
        Committed("commitlog", SIZE + 10),
    ]
    q.close()


def test_flushed_and_committed_where_are_settable(qdir) -> None:
    q = _filled_queue(qdir, 2)
    q.flushed_where = SIZE
    q.committed_where = SIZE
    assert q.remain_how_many_data_to_flush() == SIZE
    assert q.remain_how_many_data_to_commit() == SIZE
    assert q.flush(0) is False
    assert q.flushed_where == 2 * SIZE
    assert q.mapped_files[0].flushed_position == 0
    assert q.flush(0) is True  # full file: allowed, but nothing moves
    q.close()


# --- truncation and deletion -----------------------------------------------------------------


def test_truncate_dirty_files(qdir, bus: EventBus, recorder: EventRecorder) -> None:
    q = _filled_queue(qdir, 4, bus=bus)
    q.truncate_dirty_files(SIZE + 300)
    assert [mf.file_from_offset for mf in q.mapped_files] == [0, SIZE]
    first, second = q.mapped_files
    assert first.wrote_position == SIZE  # files below offset untouched
    assert second.wrote_position == second.committed_position == second.flushed_position == 300
    assert bytes(second.buffer[300:301]) == b"\x02"  # no bytes zeroed
    assert sorted(os.listdir(qdir)) == [_name(0), _name(SIZE)]
    assert recorder.of(FileTruncated) == [
        FileTruncated(q.name, second.file_name, 300, "truncate_dirty_files")
    ]
    assert [e.start_offset for e in recorder.of(FileDeleted)] == [2 * SIZE, 3 * SIZE]
    q.truncate_dirty_files(SIZE)  # exactly at a file start: that file keeps position 0
    assert [mf.wrote_position for mf in q.mapped_files] == [SIZE, 0]
    q.close()


def test_delete_last_mapped_file(qdir) -> None:
    q = _filled_queue(qdir, 2)
    q.delete_last_mapped_file()
    assert len(q.mapped_files) == 1
    assert os.listdir(qdir) == [_name(0)]
    q.close()


def test_delete_expired_by_time_rules(qdir, bus, recorder) -> None:
    q = _filled_queue(qdir, 15, bus=bus)
    now = 10_000_000
    for i, mf in enumerate(q.mapped_files):  # files 0..11 old, 12.. fresh
        t = (now - (100_000 if i < 12 else 0)) * 1_000_000
        os.utime(mf.file_name, ns=(t, t))
    sleeps: list[float] = []
    n = q.delete_expired_file_by_time(50_000, 100, 1000, False, now_ms=now, sleep=sleeps.append)
    assert n == 10  # batch limit
    assert sleeps == [100] * 9  # between deletions, not after the batch limit
    assert q.get_min_offset() == 10 * SIZE
    assert (
        q.delete_expired_file_by_time(50_000, 0, 1000, False, now_ms=now, sleep=sleeps.append) == 2
    )
    assert q.get_min_offset() == 12 * SIZE  # stops at the first fresh file
    # clean immediately: everything but the last file
    assert q.delete_expired_file_by_time(50_000, 0, 1000, True, now_ms=now, batch_max=99) == 2
    assert len(q.mapped_files) == 1
    assert q.get_min_offset() == 14 * SIZE
    assert q.delete_expired_file_by_time(0, 0, 0, True, now_ms=now) == 0  # never the last file
    assert len(recorder.of(FileDeleted)) == 14
    assert os.listdir(qdir) == [_name(14 * SIZE)]
    q.close()


def test_delete_expired_by_time_stops_at_held_file_then_retry(qdir) -> None:
    q = _filled_queue(qdir, 3)
    reader = q.mapped_files[0].select_mapped_buffer(0, 10)
    assert q.delete_expired_file_by_time(0, 0, 1000, True, now_ms=5000) == 0
    assert not q.mapped_files[0].is_available()
    assert q.retry_delete_first_file(1000, now_ms=5500) is False  # held, interval not passed
    assert q.retry_delete_first_file(1000, now_ms=6000) is True  # forced
    assert q.get_min_offset() == SIZE
    reader.release()
    assert q.retry_delete_first_file(1000) is False  # first file is available
    q.close()


def _cq_like_queue(path, last_offsets: list[int]) -> MappedFileQueue:
    """Files whose last 20-byte unit holds the given CommitLog offset."""
    q = MappedFileQueue(str(path), SIZE)
    for i, phy in enumerate(last_offsets):
        mf = q.get_last_mapped_file_for(i * SIZE)
        mf.append_message(bytes(SIZE - 20) + struct.pack(">qiq", phy, 100, 0))
    return q


def test_delete_expired_by_offset(qdir) -> None:
    q = _cq_like_queue(qdir, [1000, 2000, 3000, 4000])
    assert q.delete_expired_file_by_offset(2500, 20) == 2  # units 1000, 2000 < 2500
    assert q.get_min_offset() == 2 * SIZE
    assert q.delete_expired_file_by_offset(10**9, 20) == 1  # never the last file
    assert len(q.mapped_files) == 1
    q.close()


def test_delete_expired_by_offset_unreadable_non_last_file_stops(qdir) -> None:
    q = _cq_like_queue(qdir, [1000, 2000])
    q.mapped_files[0].wrote_position = 40  # last unit not readable, file available
    assert q.delete_expired_file_by_offset(5000, 20) == 0
    q.close()


def test_reset_offset(qdir) -> None:
    q = _filled_queue(qdir, 4)
    assert q.reset_offset(0) is False  # more than two files behind the end
    assert q.reset_offset(2 * SIZE + 10) is True
    assert [mf.file_from_offset for mf in q.mapped_files] == [0, SIZE, 2 * SIZE]
    assert q.get_last_mapped_file().wrote_position == 10
    q.close()


def test_mapped_memory_size_shutdown_and_destroy(qdir) -> None:
    q = _filled_queue(qdir, 3)
    assert q.get_mapped_memory_size() == 3 * SIZE
    q.shutdown(1000, now_ms=0)
    assert q.get_mapped_memory_size() == 0
    q.destroy()
    assert q.mapped_files == []
    assert q.flushed_where == 0
    assert not qdir.exists()


def test_destroy_keeps_dir_with_foreign_entries(qdir) -> None:
    q = _filled_queue(qdir, 1)
    (qdir / "keep.me").write_text("x")
    q.destroy()
    assert os.listdir(qdir) == ["keep.me"]


def test_total_mapped_counters_follow_queue(qdir) -> None:
    before = MappedFile.total_mapped_files()
    q = _filled_queue(qdir, 2)
    assert MappedFile.total_mapped_files() == before + 2
    q.close()
    assert MappedFile.total_mapped_files() == before


def test_delete_expired_by_offset_hanged_file(qdir) -> None:
    q = _cq_like_queue(qdir, [1000, 2000, 3000])
    head = q.mapped_files[0]
    reader = head.select_mapped_buffer(0, 20)
    assert head.destroy(60_000, now_ms=0) is False  # held: destroy hangs, file unavailable
    # unavailable + unreadable -> "hanged" branch: destroy again, forced after 60 s
    assert q.delete_expired_file_by_offset(0, 20, now_ms=59_999) == 0
    assert q.delete_expired_file_by_offset(0, 20, now_ms=60_000) == 1
    assert q.get_min_offset() == SIZE
    reader.release()
    q.close()
