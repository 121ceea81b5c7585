"""The async flush's wait and who wakes it (spec §7.4, ``handleDiskFlush``).

RocketMQ's FlushRealTimeService ``Thread.sleep``s between rounds when ``flushCommitLogTimed``
(the default), so nothing cuts its wait short: data waits up to ``flushIntervalCommitLog`` for
the next round. With False it waits interruptibly and an async put wakes it: 4.9.8 always, 5.x
only with ``wakeFlushWhenPutMessage``. With the transient store pool a put wakes the commit
service instead (5.x: ``wakeCommitWhenPutMessage``), and every commit wakes the flush, which
again runs at once only when it does not sleep. What a power loss keeps is what was flushed,
so these choices decide how much an async store loses.

The flush interval here is a minute, so "flushed within seconds" can only come from a wake
and "not flushed after half a second" holds on any machine.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from rmqlab.config import MessageStoreConfig
from rmqlab.errors import ConfigError
from rmqlab.store.message import Message
from rmqlab.store.message_store import MessageStore
from rmqlab.testing.crash import simulate_power_loss
from tests.waits import until

_MINUTE = 60_000
_BODY = b"x" * 1024


def _open(root: Path, **changes: Any) -> MessageStore:
    config = MessageStoreConfig.small(str(root), flush_interval_commit_log=_MINUTE,
                                      flush_commit_log_thorough_interval=_MINUTE, **changes)
    return MessageStore.open(str(root), config, threaded=True)


def _put_pages(store: MessageStore, pages: int = 6) -> int:
    """Puts more than ``flush_commit_log_least_pages`` (4) pages of 1 KiB messages; returns the end."""
    for _ in range(pages * 4):
        assert store.put_message(Message("FlushTopic", _BODY, keys=["k"])).ok
    return store.get_max_phy_offset()


@pytest.mark.parametrize(("version", "changes"), [
    ("4.9.8", {}),  # 4.9.8 always wakes the flush after an async put
    ("5.3.3", {"wake_flush_when_put_message": True}),
])
def test_untimed_flush_woken_by_puts_runs_at_once(tmp_path: Path, version: str, changes: dict[str, Any]) -> None:
    store = _open(tmp_path / "s", rocketmq_version=version, flush_commit_log_timed=False, **changes)
    try:
        mfq = store.commit_log.mapped_file_queue
        end = _put_pages(store)
        # flush(4 pages) moves the flushed position to the written position of the moment
        assert until(lambda: mfq.flushed_where >= end - 4 * 4096), (mfq.flushed_where, end)
        assert mfq.flushed_where > 0
    finally:
        store.shutdown()


@pytest.mark.parametrize(("version", "changes"), [
    ("4.9.8", {"flush_commit_log_timed": True}),  # the default: the wake is lost in Thread.sleep
    ("5.3.3", {"flush_commit_log_timed": True, "wake_flush_when_put_message": True}),
    ("5.3.3", {"flush_commit_log_timed": False}),  # 5.x's default: puts do not wake it
])
def test_flush_not_woken_waits_for_its_interval(tmp_path: Path, version: str, changes: dict[str, Any]) -> None:
    store = _open(tmp_path / "s", rocketmq_version=version, **changes)
    mfq = store.commit_log.mapped_file_queue
    try:
        end = _put_pages(store)
        time.sleep(0.5)
        assert mfq.flushed_where == 0, "the data must wait for the next round, a minute away"
        started = time.monotonic()
    finally:
        store.shutdown()
    # a shutdown ends a sleeping flush's wait (and flushes everything)
    assert time.monotonic() - started < 30
    assert mfq.flushed_where == end


@pytest.mark.parametrize("timed", [True, False])
def test_pool_commit_wakes_the_flush_only_when_it_does_not_sleep(tmp_path: Path, timed: bool) -> None:
    store = _open(tmp_path / "s", transient_store_pool_enable=True, transient_store_pool_size=4,
                  flush_commit_log_timed=timed)
    mfq = store.commit_log.mapped_file_queue
    try:
        end = _put_pages(store)
        # the put woke the commit service (4.9.8 always does), which commits 4 pages at a time
        assert until(lambda: mfq.committed_where >= end - 4 * 4096), (mfq.committed_where, end)
        if timed:
            time.sleep(0.5)
            assert mfq.flushed_where == 0, "a sleeping flush must not be cut short by the commit"
        else:
            assert until(lambda: mfq.flushed_where >= mfq.committed_where - 4 * 4096 > 0), \
                (mfq.flushed_where, mfq.committed_where)
    finally:
        store.shutdown()


@pytest.mark.parametrize("wake", [True, False])
def test_5x_wake_commit_when_put_message(tmp_path: Path, wake: bool) -> None:
    store = _open(tmp_path / "s", rocketmq_version="5.3.3", transient_store_pool_enable=True,
                  transient_store_pool_size=4, wake_commit_when_put_message=wake,
                  commit_interval_commit_log=_MINUTE, commit_commit_log_thorough_interval=_MINUTE)
    mfq = store.commit_log.mapped_file_queue
    try:
        end = _put_pages(store)
        if wake:
            assert until(lambda: mfq.committed_where >= end - 4 * 4096), (mfq.committed_where, end)
        else:
            time.sleep(0.5)
            assert mfq.committed_where == 0, "without the wake the pool waits for the commit round"
    finally:
        store.shutdown()


@pytest.mark.parametrize("timed", [True, False])
def test_power_loss_keeps_what_the_woken_flush_wrote(tmp_path: Path, timed: bool) -> None:
    # The teaching point: the same async store loses everything since the last round when its
    # flush sleeps, and at most the least-pages window when puts wake it.
    root = tmp_path / "s"
    store = _open(root, flush_commit_log_timed=timed)
    mfq = store.commit_log.mapped_file_queue
    n = 40  # ~45 KiB: 11 pages
    for i in range(n):
        assert store.put_message(Message("FlushTopic", _BODY, keys=[f"k{i}"])).ok
    end = store.get_max_phy_offset()
    if timed:
        time.sleep(0.5)
    else:
        assert until(lambda: mfq.flushed_where >= end - 4 * 4096)
    report = simulate_power_loss(store)
    config = MessageStoreConfig.small(str(root))
    with MessageStore.open(str(root), config, threaded=False) as reopened:
        kept = reopened.get_max_offset_in_queue("FlushTopic", 0)
        mode = reopened.recovery_plan.mode
    assert kept * 1024 < report.flushed_where + 1024 * 2  # nothing past the flushed position
    if timed:
        assert kept == 0
        assert report.flushed_where == 0
        assert mode == "empty"  # no CommitLog byte was ever flushed: every file goes
    else:
        assert mode == "abnormal"
        assert kept >= n - (4 * 4096) // 1024, (kept, report.flushed_where, end)


def test_498_refuses_not_waking_the_commit(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"wake_commit_when_put_message=False.*4\.9\.8"):
        MessageStoreConfig.small(str(tmp_path), wake_commit_when_put_message=False)
    MessageStoreConfig.small(str(tmp_path), rocketmq_version="5.3.3", wake_commit_when_put_message=False)


def test_stepped_store_flushes_every_step_whatever_the_wait(tmp_path: Path) -> None:
    # Stepped stores run each service once per step(): the wait rules are a threaded matter.
    config = MessageStoreConfig.small(str(tmp_path / "s"), flush_commit_log_least_pages=0)
    with MessageStore.open(str(tmp_path / "s"), config, threaded=False) as store:
        assert store.put_message(Message("FlushTopic", _BODY)).ok
        store.step()
        assert store.commit_log.mapped_file_queue.flushed_where == store.get_max_phy_offset()
