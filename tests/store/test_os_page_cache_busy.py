"""OS_PAGECACHE_BUSY: puts refused while another put holds the CommitLog lock too long.

RocketMQ's ``checkStoreStatus`` refuses a put with OS_PAGECACHE_BUSY (the broker's
"[PC_SYNCHRONIZED]broker busy") when the put now holding the lock took it more than
``osPageCacheBusyTimeOutMills`` (1 s) ago: ``beginTimeInLock`` is set with the store timestamp
right after the lock is taken and reset to 0 when it is released. The classic cause is a put
waiting, lock held, for the next CommitLog file; here the file allocator is held up for real
while the store's (manual) clock moves on.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from rmqlab.clock import ManualClock
from rmqlab.config import MessageStoreConfig
from rmqlab.store.message import Message
from rmqlab.store.message_store import MessageStore
from rmqlab.store.results import PutMessageStatus
from rmqlab.testing.stalls import FileCreationStall

_BODY = b"b" * 1024


@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
def test_put_waiting_for_a_new_file_makes_the_store_busy(tmp_path: Path, version: str) -> None:
    clock = ManualClock(1_700_000_000_000)
    config = MessageStoreConfig.small(str(tmp_path / "s"), rocketmq_version=version)
    store = MessageStore.open(str(tmp_path / "s"), config, clock=clock, threaded=True)
    done: list[PutMessageStatus] = []

    def producer() -> None:  # three files' worth: a put at a roll waits for its file
        for i in range(3 * 64):
            done.append(store.put_message(Message("Busy", _BODY, keys=[f"k{i}"])).status)

    a = threading.Thread(target=producer, daemon=True)
    try:
        with FileCreationStall(store) as stall:
            a.start()
            assert stall.wait_until_a_put_waits(), "the producer should wait for its file, put lock held"
            assert store.commit_log.begin_time_in_lock == clock.now_ms()
            assert all(s is PutMessageStatus.PUT_OK for s in done)
            assert not store.is_os_page_cache_busy()
            clock.advance(1000)
            assert store.lock_time_mills() == 1000
            assert not store.is_os_page_cache_busy()  # more than the timeout, not as much
            clock.advance(1)
            assert store.is_os_page_cache_busy()
            refused = store.put_message(Message("Other", b"x"))  # returns at once: no wait for the lock
            assert refused.status is PutMessageStatus.OS_PAGECACHE_BUSY
            assert "1001 ms" in refused.reason
            assert "[PC_SYNCHRONIZED]broker busy" in refused.reason
            batch = store.put_messages([Message("Other", b"y"), Message("Other", b"z")])
            assert batch.status is PutMessageStatus.OS_PAGECACHE_BUSY
            assert store.get_max_offset_in_queue("Other", 0) == 0
        a.join(30)
        assert not a.is_alive()
        assert done == [PutMessageStatus.PUT_OK] * (3 * 64)  # the waiting put went in once its file came
        assert store.commit_log.begin_time_in_lock == 0
        assert store.lock_time_mills() == 0
        assert not store.is_os_page_cache_busy()
        assert store.put_message(Message("Other", b"x")).ok
        assert "_create" not in vars(store.allocate_service)  # the stall is gone with its block
    finally:
        store.shutdown()


def test_a_stall_needs_a_threaded_store(tmp_path: Path) -> None:
    config = MessageStoreConfig.small(str(tmp_path / "s"))
    with MessageStore.open(str(tmp_path / "s"), config, threaded=False) as store, \
            pytest.raises(ValueError, match="threaded store"):
        FileCreationStall(store)


def test_lock_is_free_again_after_every_kind_of_put(tmp_path: Path) -> None:
    clock = ManualClock(1_700_000_000_000)
    config = MessageStoreConfig.small(str(tmp_path / "s"))
    with MessageStore.open(str(tmp_path / "s"), config, clock=clock, threaded=False) as store:
        cl = store.commit_log
        assert store.put_message(Message("T", b"fast path", keys=["k"])).ok
        assert cl.begin_time_in_lock == 0
        assert store.put_message(Message("T", b"exact path", properties={"user": "p"})).ok
        assert cl.begin_time_in_lock == 0
        assert store.put_messages([Message("T", b"a"), Message("T", b"b")]).ok
        assert cl.begin_time_in_lock == 0
        too_big = store.put_message(Message("T", b"x" * (config.max_message_size + 1)))
        assert too_big.status is PutMessageStatus.MESSAGE_ILLEGAL
        cl.writeable, cl.not_writeable_reason = False, "test: read-only"
        assert store.put_message(Message("T", b"refused in the lock")).status is \
            PutMessageStatus.SERVICE_NOT_AVAILABLE
        assert cl.begin_time_in_lock == 0
        cl.writeable = True
        clock.advance(60_000)
        assert store.lock_time_mills() == 0
        assert not store.is_os_page_cache_busy()
