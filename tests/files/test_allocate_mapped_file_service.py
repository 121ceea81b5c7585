"""AllocateMappedFileService: stepped and threaded, next + next-next preallocation, warm-up."""

from __future__ import annotations

import os
import time

import pytest

from rmqlab.config import SYNC_FLUSH
from rmqlab.events import EventBus, EventRecorder, FileCreated, FileDeleted, FileWarmed
from rmqlab.files.allocate_mapped_file_service import AllocateMappedFileService, AllocateRequest
from rmqlab.files.mapped_file_queue import MappedFileQueue
from rmqlab.files.transient_store_pool import TransientStorePool

SIZE = 16 * 1024


def _name(offset: int) -> str:
    return f"{offset:020d}"


def _paths(d, k: int) -> tuple[str, str]:
    return os.path.join(d, _name(k * SIZE)), os.path.join(d, _name((k + 1) * SIZE))


def test_priority_order() -> None:
    reqs = [
        AllocateRequest("/d/00000000000000000200", 10),
        AllocateRequest("/d/00000000000000000100", 10),
        AllocateRequest("/d/00000000000000000300", 20),
    ]
    ordered = sorted(reqs, key=AllocateRequest.sort_key)
    assert [os.path.basename(r.file_path) for r in ordered] == [
        "00000000000000000300",  # larger size first
        "00000000000000000100",  # then smaller offset
        "00000000000000000200",
    ]


def test_stepped_creates_next_now_and_next_next_on_step(tmp_path, bus, recorder) -> None:
    svc = AllocateMappedFileService(bus=bus, threaded=False, mapped_file_size_commit_log=SIZE)
    nxt, nxt_nxt = _paths(str(tmp_path), 0)
    mf = svc.put_request_and_return_mapped_file(nxt, nxt_nxt, SIZE)
    assert mf is not None
    assert mf.file_name == nxt
    assert os.path.exists(nxt)
    assert not os.path.exists(nxt_nxt)
    assert [r.file_path for r in svc.pending_requests()] == [nxt_nxt]
    assert svc.run_once() is True
    assert os.path.exists(nxt_nxt)
    assert svc.run_once() is False
    created = recorder.of(FileCreated)
    assert [(e.file, e.preallocated) for e in created] == [(nxt, False), (nxt_nxt, True)]
    # the roll: next is the preallocated file, handed out without new creation
    nxt2, nxt_nxt2 = _paths(str(tmp_path), 1)
    assert nxt2 == nxt_nxt
    mf2 = svc.put_request_and_return_mapped_file(nxt2, nxt_nxt2, SIZE)
    assert mf2 is not None
    assert mf2.file_name == nxt2
    assert [r.file_path for r in svc.pending_requests()] == [nxt_nxt2]
    assert not os.path.exists(nxt_nxt2)  # queued, not created yet
    svc.run_once()
    svc.shutdown()  # destroys the unclaimed preallocated file
    assert not os.path.exists(nxt_nxt2)
    assert [e.file for e in recorder.of(FileDeleted)] == [nxt_nxt2]
    mf.close()
    mf2.close()


def test_queue_with_stepped_service_rolls(tmp_path) -> None:
    d = tmp_path / "commitlog"
    os.makedirs(d)
    svc = AllocateMappedFileService(threaded=False, mapped_file_size_commit_log=SIZE)
    q = MappedFileQueue(str(d), SIZE, svc)
    first = q.get_last_mapped_file_for(0)
    assert first.first_create_in_queue
    svc.run_once()
    first.append_message(b"x" * SIZE)
    second = q.get_last_mapped_file_for(0)
    assert second.file_from_offset == SIZE
    assert not second.first_create_in_queue
    svc.run_once()
    assert sorted(os.listdir(d)) == [_name(0), _name(SIZE), _name(2 * SIZE)]
    svc.shutdown()
    assert sorted(os.listdir(d)) == [_name(0), _name(SIZE)]
    q.close()


def _wait(cond, timeout: float = 30.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.005)
    return cond()


def test_threaded_next_next_exists_after_roll(
    tmp_path, bus: EventBus, recorder: EventRecorder
) -> None:
    d = tmp_path / "commitlog"
    os.makedirs(d)
    svc = AllocateMappedFileService(bus=bus, mapped_file_size_commit_log=SIZE, timeout_ms=30_000)
    svc.start()
    try:
        q = MappedFileQueue(str(d), SIZE, svc, bus=bus)
        f0 = q.get_last_mapped_file_for(0)
        assert f0 is not None
        assert f0.name == _name(0)
        assert _wait(lambda: os.path.exists(d / _name(SIZE)))
        f0.append_message(b"y" * SIZE)
        f1 = q.get_last_mapped_file_for(0)
        assert f1.name == _name(SIZE)
        assert _wait(lambda: os.path.exists(d / _name(2 * SIZE)))
        assert _wait(lambda: all(r.mapped_file is not None for r in svc.pending_requests()))
    finally:
        svc.shutdown()
    assert not os.path.exists(d / _name(2 * SIZE))
    assert {e.file for e in recorder.of(FileCreated) if e.preallocated} == {
        str(d / _name(SIZE)),
        str(d / _name(2 * SIZE)),
    }
    q.close()


def test_threaded_not_started_times_out(tmp_path) -> None:
    svc = AllocateMappedFileService(timeout_ms=50, mapped_file_size_commit_log=SIZE)
    nxt, nxt_nxt = _paths(str(tmp_path), 0)
    assert svc.put_request_and_return_mapped_file(nxt, nxt_nxt, SIZE) is None
    assert len(svc.pending_requests()) == 2  # left for a later call, as in RocketMQ
    svc.shutdown()


def test_warm_when_enabled_and_big_enough(tmp_path, bus, recorder) -> None:
    svc = AllocateMappedFileService(
        bus=bus,
        threaded=False,
        warm_mapped_file_enable=True,
        flush_disk_type=SYNC_FLUSH,
        flush_least_pages_when_warm_mapped_file=2,
        mapped_file_size_commit_log=SIZE,
    )
    nxt, nxt_nxt = _paths(str(tmp_path), 0)
    mf = svc.put_request_and_return_mapped_file(nxt, nxt_nxt, SIZE)
    (warm,) = recorder.of(FileWarmed)
    assert warm.file == nxt
    assert warm.pages == SIZE // 4096
    assert isinstance(warm.mlocked, bool)
    small = svc.put_request_and_return_mapped_file(
        os.path.join(tmp_path, "small", _name(0)),
        os.path.join(tmp_path, "small", _name(4096)),
        4096,
    )
    assert small is None  # the directory does not exist: creation fails, caller gets None
    assert svc.has_exception
    svc.shutdown()
    mf.close()


def test_tsp_fast_fail_capacity(tmp_path) -> None:
    pool = TransientStorePool(1, SIZE)
    pool.init()
    svc = AllocateMappedFileService(
        transient_store_pool=pool,
        fast_fail_if_no_buffer_in_store_pool=True,
        threaded=False,
        mapped_file_size_commit_log=SIZE,
    )
    nxt, nxt_nxt = _paths(str(tmp_path), 0)
    mf = svc.put_request_and_return_mapped_file(nxt, nxt_nxt, SIZE)
    assert mf is not None
    assert mf.write_buffer is not None
    assert svc.pending_requests() == []  # capacity 1: no preallocation
    n2, nn2 = _paths(str(tmp_path), 1)
    assert svc.put_request_and_return_mapped_file(n2, nn2, SIZE) is None  # pool exhausted
    svc.shutdown()
    mf.close()
    pool.destroy()


@pytest.mark.parametrize("threaded", [True, False])
def test_shutdown_idempotent(threaded: bool) -> None:
    svc = AllocateMappedFileService(threaded=threaded)
    svc.start()
    svc.shutdown()
    svc.shutdown()
