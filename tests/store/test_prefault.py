"""CommitLog pre-faulting (``CommitLog.prefault_ahead``, run by ``CommitLogPrefaultService``).

Two stores get the same puts, one pre-faulting and one not: every CommitLog, ConsumeQueue and
index file must be byte-for-byte the same (pre-faulted pages stay zeros), in stepped and threaded
mode with small files that roll. Recovery after an abnormal stop finds the same max offset, and a
kernel that refuses ``MADV_POPULATE_WRITE`` switches pre-faulting off without failing a put.
"""

from __future__ import annotations

import logging
import os
import random
import sys
import time
from pathlib import Path

import pytest

from rmqlab.clock import ManualClock
from rmqlab.config import MessageStoreConfig
from rmqlab.store.commit_log import CommitLog
from rmqlab.store.message import Message
from rmqlab.store.message_store import MessageStore

START = 1_700_000_000_000
DIRS = ("commitlog", "consumequeue", "index")

linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux") or tuple(map(int, os.uname().release.split(".")[:2])) < (5, 14),
    reason="MADV_POPULATE_WRITE needs Linux >= 5.14",
)


def _messages(n: int, seed: int) -> list[Message]:
    rng = random.Random(seed)
    return [
        Message(
            rng.choice(("TopicA", "TopicB")),
            rng.randbytes(rng.choice([1, rng.randint(100, 1000), rng.randint(1000, 3000)])),
            tags=rng.choice((None, "TagA", "TagB")),
            keys=[f"k{i}", "shared"][: rng.randint(0, 2)],
            queue_id=rng.randrange(3),
            born_host=("10.0.0.1", 40000),
            born_timestamp=START - 5,
            uniq_key=f"C0FFEE{i:026X}",
        )
        for i in range(n)
    ]


def _open(root: Path, threaded: bool, prefault: bool | int) -> MessageStore:
    store = MessageStore.open(root, MessageStoreConfig.small(str(root)), clock=ManualClock(START), threaded=threaded)
    if prefault is False:
        store.commit_log.prefault_enabled = False
    elif prefault is not True:
        store.commit_log.prefault_bytes = prefault  # the instance's own distance ahead
    return store


def _write(store: MessageStore, msgs: list[Message]) -> None:
    clock = store.clock
    assert isinstance(clock, ManualClock)
    i = 0
    while i < len(msgs):
        if i % 37 == 5:
            batch = [m for m in msgs[i : i + 3] if (m.topic, m.queue_id) == (msgs[i].topic, msgs[i].queue_id)]
            r = store.put_messages(batch)
            i += len(batch)
        else:
            r = store.put_message(msgs[i])
            i += 1
        assert r.ok, r
        clock.advance(i % 3)
        if not store.threaded and i % 20 == 0:
            store.step()


def _files(root: Path) -> dict[str, bytes]:
    out = {}
    for d in DIRS:
        for dirpath, _, names in os.walk(root / d):
            for n in names:
                p = Path(dirpath) / n
                out[str(p.relative_to(root))] = p.read_bytes()
    return out


def _wait_prefaulted(store: MessageStore) -> None:
    """Threaded: the pre-fault service runs every ~1 ms, so give it a round or two."""
    mf = store.commit_log.mapped_file_queue.get_last_mapped_file()
    assert mf is not None
    deadline = time.monotonic() + 30
    # past what the writer's own reserve() makes writable (1/128 of a file): the service's work
    want = min(mf.file_size, mf.wrote_position + store.commit_log.prefault_bytes // 2)
    while mf.prefaulted_position < want and time.monotonic() < deadline:
        if store.threaded:
            store.runner.wakeup("prefault_commit_log")
            time.sleep(0.002)
        else:
            store.step()


@linux_only
@pytest.mark.parametrize("threaded", [False, True], ids=["stepped", "threaded"])
@pytest.mark.parametrize("ahead", [True, 8192], ids=["default-ahead", "8KiB-ahead"])
def test_files_are_byte_identical_with_and_without_prefaulting(tmp_path: Path, threaded: bool, ahead: bool | int,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = CommitLog.prefault_ahead

    def counting(self: CommitLog) -> int:
        done = real(self)
        if done > 0:
            calls.append(done)
        return done

    monkeypatch.setattr(CommitLog, "prefault_ahead", counting)
    msgs = _messages(700, seed=7)
    roots = {}
    for on in (True, False):
        root = tmp_path / ("on" if on else "off")
        store = _open(root, threaded, ahead if on else False)
        before = len(calls)
        try:
            _write(store, msgs)
            assert store.wait_dispatched()
            if on:
                _wait_prefaulted(store)
                mf = store.commit_log.mapped_file_queue.get_last_mapped_file()
                assert mf is not None
                assert mf.prefaulted_position > mf.wrote_position
                assert bytes(mf.buffer[mf.wrote_position : mf.prefaulted_position]) == bytes(
                    mf.prefaulted_position - mf.wrote_position
                )
                assert store.commit_log.prefault_enabled
            else:
                assert len(calls) == before  # switched off: never pre-faults
        finally:
            store.shutdown()
        roots[on] = root
        if on and not threaded:  # threaded, the writer's own reserve() may leave the service nothing to do
            assert calls, "nothing was pre-faulted"
    on_files, off_files = _files(roots[True]), _files(roots[False])
    assert sum(1 for k in on_files if k.startswith("commitlog")) > 5  # the commit log rolled
    assert sum(1 for k in on_files if k.startswith("index")) > 1
    if threaded:
        # an index file is named by the clock when it rolls, which the reput thread reaches at
        # its own pace while the puts advance the clock: compare the contents in name order
        for files in (on_files, off_files):
            index = [files.pop(k) for k in sorted(k for k in files if k.startswith("index"))]
            files.update({f"index #{i}": data for i, data in enumerate(index)})
    assert on_files.keys() == off_files.keys()
    for name, data in on_files.items():
        assert data == off_files[name], name


@linux_only
@pytest.mark.parametrize("threaded", [False, True], ids=["stepped", "threaded"])
def test_abnormal_recovery_finds_the_same_max_offset(tmp_path: Path, threaded: bool) -> None:
    msgs = _messages(400, seed=11)
    got = {}
    for on in (True, False):
        root = tmp_path / ("on" if on else "off")
        store = _open(root, threaded, on)
        _write(store, msgs)
        assert store.wait_dispatched()
        if on:
            _wait_prefaulted(store)
        max_offset = store.commit_log.get_max_offset()
        store.flush()
        store.abandon()  # the abort file stays: the reopen recovers abnormally
        assert (root / "abort").exists()
        mf_name = sorted(os.listdir(root / "commitlog"))[-1]
        data = (root / "commitlog" / mf_name).read_bytes()
        pos = max_offset - int(mf_name)
        assert data[pos:] == bytes(len(data) - pos)  # pre-faulted pages past the writer are zeros
        store = _open(root, threaded, on)
        try:
            assert not store.last_exit_ok
            assert store.commit_log.get_max_offset() == max_offset
            assert store.wait_dispatched()
            got[on] = (max_offset, store.get_max_offset_in_queue("TopicA", 0),
                       store.get_max_offset_in_queue("TopicB", 2))
            r = store.put_message(msgs[0])
            assert r.ok
            assert r.wrote_offset == max_offset
        finally:
            store.shutdown()
    assert got[True] == got[False]


@pytest.mark.parametrize("threaded", [False, True], ids=["stepped", "threaded"])
def test_a_refusing_kernel_switches_prefaulting_off(tmp_path: Path, threaded: bool, monkeypatch: pytest.MonkeyPatch,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    calls: list[int] = []

    def refuse(addr: int, length: int) -> int:
        calls.append(length)
        return -1  # a kernel older than 5.14: MADV_POPULATE_WRITE does not exist

    monkeypatch.setattr("rmqlab.files.mapped_file.populate_write", refuse)
    monkeypatch.setattr("rmqlab.files.mapped_file._can_populate", True)  # restored after the test
    caplog.set_level(logging.DEBUG, logger="rmqlab.store.commit_log")
    msgs = _messages(200, seed=3)
    store = _open(tmp_path / "s", threaded, True)
    try:
        _write(store, msgs)
        assert store.wait_dispatched()
        deadline = time.monotonic() + 30
        while store.commit_log.prefault_enabled and time.monotonic() < deadline:
            store.step() if not threaded else time.sleep(0.002)
        assert not store.commit_log.prefault_enabled
        assert len(calls) == 1  # tried once (by the writer's reserve or the service), then never again
        assert "pre-faulting off" in caplog.text
        r = store.put_message(msgs[1])
        assert r.ok
        assert store.wait_dispatched()
        rec = store.look_message_by_offset(r.wrote_offset)
        assert rec is not None
        assert rec.uniq_key == msgs[1].uniq_key
        assert rec.body == msgs[1].body
        assert store.get_max_offset_in_queue(msgs[1].topic, msgs[1].queue_id) == r.queue_offset + 1
    finally:
        store.shutdown()
    assert len(calls) == 1


def test_no_prefaulting_with_the_transient_store_pool_or_after_shutdown(tmp_path: Path) -> None:
    root = tmp_path / "tsp"
    config = MessageStoreConfig.small(str(root), transient_store_pool_enable=True, transient_store_pool_size=2)
    store = MessageStore.open(root, config, clock=ManualClock(START), threaded=False)
    try:
        assert store.transient_store_pool is not None
        assert not store.commit_log.prefault_enabled
        _write(store, _messages(50, seed=5))
        store.step()
        assert store.commit_log.prefault_ahead() == 0
        mf = store.commit_log.mapped_file_queue.get_last_mapped_file()
        assert mf is not None
        assert mf.prefaulted_position == 0
    finally:
        store.shutdown()
    store = _open(tmp_path / "plain", False, True)
    assert store.commit_log.prefault_enabled
    store.shutdown()
    assert store.commit_log.prefault_ahead() == 0  # not writeable any more


@linux_only
def test_the_service_tops_the_window_up_once_half_of_it_is_used(tmp_path: Path) -> None:
    """One round pre-faults up to ``prefault_bytes`` ahead of the writer; the next rounds do
    nothing until the writer has used half of it (one ``madvise`` per half window, not per put)."""
    store = MessageStore.open(tmp_path, MessageStoreConfig(store_path_root_dir=str(tmp_path)), threaded=False)
    try:
        assert store.prefault is not None
        names = [s.name for s in store.services()]
        assert names[0] == "prefault_commit_log"
        assert names.index("reput") < names.index("flush_commit_log")
        cl = store.commit_log
        cl.prefault_bytes = 1 << 20  # past what the writer's own reserve() makes writable (256 KiB)
        msgs = _messages(1000, seed=3)
        assert store.put_message(msgs[0]).ok
        mf = cl.mapped_file_queue.get_last_mapped_file()
        assert mf is not None
        first = store.step()["prefault_commit_log"]
        assert first > 0
        assert mf.prefaulted_position == (mf.wrote_position + cl.prefault_bytes) // 4096 * 4096
        assert store.step()["prefault_commit_log"] == 0  # still ahead: one comparison
        mark, i = mf.prefaulted_position, 1
        while mark - mf.wrote_position >= cl.prefault_bytes // 2:
            assert store.step()["prefault_commit_log"] == 0
            assert store.put_message(msgs[i]).ok
            i += 1
        again = store.step()["prefault_commit_log"]
        assert again == mf.prefaulted_position - mark > 0
        assert mf.prefaulted_position == (mf.wrote_position + cl.prefault_bytes) // 4096 * 4096
        assert store.prefault.prefaulted_bytes == first + again
    finally:
        store.shutdown()


@linux_only
def test_prefaulting_runs_while_a_put_loop_holds_the_gil(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A put loop never blocks, so a thread that does (a timed wait, a ctypes call) gets the GIL
    back only when CPython forces a switch. The reput service, which used to pre-fault, ran
    only a few rounds during such a loop; the pre-fault service still tops the window up."""
    calls: list[int] = []
    real = CommitLog.prefault_ahead
    looping = [False]

    def counting(self: CommitLog) -> int:
        done = real(self)
        if done > 0 and looping[0]:
            calls.append(done)
        return done

    monkeypatch.setattr(CommitLog, "prefault_ahead", counting)
    store = MessageStore.open(tmp_path, MessageStoreConfig(store_path_root_dir=str(tmp_path)), threaded=True)
    try:
        store.commit_log.prefault_bytes = 1 << 20
        msg = Message("TopicA", bytes(1000), tags="TagA", keys=["k"], born_host=("10.0.0.1", 40000))
        for _ in range(2_000):  # past the services' first rounds (imports, new CQ and index files)
            store.put_message(msg)
        assert store.wait_dispatched()
        looping[0] = True
        for _ in range(20_000):  # ~20 MiB: 40 half windows
            store.put_message(msg)
        looping[0] = False
        # the reput service, which pre-faulted before, ran 2 rounds during such loops
        assert len(calls) >= 3, calls
        assert store.wait_dispatched()
        assert store.get_max_offset_in_queue("TopicA", 0) == 22_000
    finally:
        store.shutdown()
