"""Idle naps of the 1 ms services (``IdleNap``): reput and CommitLog pre-faulting.

An idle threaded store used to wake ~1,900 times a second; now its reput and pre-fault services
nap (``NAP_MS`` between rounds) after ``IdleNap.after`` empty rounds, a put wakes them at once,
and the pre-fault service paces its rounds by how fast the writer eats the window's slack.
No timing asserts: a round count over a sleep is held to three times what napping gives (a
sixth of what 1 ms polling gives), and a slow machine only lowers it.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest

from rmqlab.config import MessageStoreConfig
from rmqlab.store.message import Message
from rmqlab.store.message_store import MessageStore
from rmqlab.store.services import NAP_MS, IdleNap, ThreadedRunner
from tests.waits import until

linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux") or tuple(map(int, os.uname().release.split(".")[:2])) < (5, 14),
    reason="MADV_POPULATE_WRITE needs Linux >= 5.14",
)


def test_idle_nap_counts_rounds() -> None:
    told: list[int] = []
    nap = IdleNap(after=3)
    nap.on_nap = lambda: told.append(1)
    nap.round(False)
    nap.round(False)
    assert not nap.napping
    nap.round(True)  # work resets the count
    for _ in range(2):
        nap.round(False)
    assert not nap.napping
    assert not told
    nap.round(False)
    assert nap.napping
    assert told == [1]
    assert nap.naps == 1
    nap.round(False)
    assert told == [1]  # told once per nap
    assert nap.wake()
    assert not nap.napping
    assert nap.wakes == 1
    assert not nap.wake()
    assert nap.wakes == 1
    nap.round(True)
    assert not nap.napping


def test_idle_threaded_store_naps_and_a_put_wakes_it(tmp_path: Path) -> None:
    store = MessageStore.open(tmp_path, MessageStoreConfig.small(str(tmp_path)), threaded=True)
    try:
        assert store.put_message(Message("NapTopic", b"first")).ok
        assert store.wait_dispatched(10)
        reput = store.reput
        assert until(lambda: reput.nap.napping), "an idle reput should nap"
        assert reput.interval_ms() == NAP_MS
        rounds = [0]
        run = reput.run_once

        def counted() -> int:
            rounds[0] += 1
            return run()

        reput.run_once = counted  # type: ignore[method-assign]
        time.sleep(0.4)
        # napping: ~0.4 s / 20 ms = 20 rounds; polling every 1 ms would be ~400
        assert rounds[0] < 60, rounds[0]

        wakes = reput.nap.wakes
        assert store.put_message(Message("NapTopic", b"second")).ok
        assert reput.nap.wakes == wakes + 1  # the put itself woke it
        assert until(lambda: store.get_max_offset_in_queue("NapTopic", 0) == 2)
        got = store.get_message("g", "NapTopic", 0, 1, 1)
        assert [m.body for m in got.messages] == [b"second"]
        got.release()
        assert until(lambda: reput.nap.napping)  # and idle again, it naps again
    finally:
        store.shutdown()


def test_a_busy_store_does_not_nap(tmp_path: Path) -> None:
    store = MessageStore.open(tmp_path, MessageStoreConfig.small(str(tmp_path)), threaded=False)
    try:
        reput = store.reput
        for i in range(30):
            assert store.put_message(Message("NapTopic", b"x" * 100, keys=[f"k{i}"])).ok
            assert reput.run_once() == 1
            assert not reput.nap.napping
            assert reput.interval_ms() == 1.0
        for _ in range(reput.nap.after):
            assert reput.run_once() == 0
        assert reput.nap.napping
        assert reput.interval_ms() == NAP_MS
        assert store._asleep  # told the store: its next put wakes the reput
        assert store.put_message(Message("NapTopic", b"y")).ok
        assert not reput.nap.napping
        assert not store._asleep
        assert reput.run_once() == 1
    finally:
        store.shutdown()


def test_a_commit_wakes_a_napping_reput(tmp_path: Path) -> None:
    """With a transient store pool the reput sees committed data only: the commit wakes it."""
    config = MessageStoreConfig.small(str(tmp_path), transient_store_pool_enable=True, transient_store_pool_size=2)
    store = MessageStore.open(tmp_path, config, threaded=False)
    try:
        assert store.commit_service is not None
        reput = store.reput
        for _ in range(reput.nap.after):
            reput.run_once()
        assert reput.nap.napping
        assert store._asleep
        store._on_committed()
        assert not reput.nap.napping
        assert reput.nap.wakes == 1
    finally:
        store.shutdown()


@linux_only
def test_prefault_rounds_follow_the_writers_pace(tmp_path: Path) -> None:
    store = MessageStore.open(tmp_path, MessageStoreConfig.small(str(tmp_path)), threaded=False)
    try:
        service = store.prefault
        assert service is not None
        cl = store.commit_log
        cl.prefault_bytes = 32 * 1024  # half of a 64 KiB file: room for slack in one file
        now = [1_000_000_000]
        service._now_ns = lambda: now[0]  # type: ignore[method-assign]
        assert store.put_message(Message("PaceTopic", b"a" * 100)).ok
        service.run_once()  # tops the window up: 32 KiB ahead of the writer
        slack0 = cl.prefault_slack()
        assert slack0 > 0
        before = cl.get_max_offset()

        # a slow writer: ~200 bytes in 10 ms -> the slack lasts far longer than NAP_MS
        assert store.put_message(Message("PaceTopic", b"b" * 100)).ok
        now[0] += 10_000_000
        service.run_once()
        moved = cl.get_max_offset() - before
        expected = min(max(cl.prefault_slack() * 10_000_000 / moved / 2e6, 1.0), NAP_MS)
        assert expected == NAP_MS
        assert service.interval_ms() == NAP_MS

        # a fast writer: ~8 KiB in 0.1 ms -> back to 1 ms rounds
        before = cl.get_max_offset()
        for _ in range(50):
            assert store.put_message(Message("PaceTopic", b"c" * 100)).ok
        now[0] += 100_000
        service.run_once()
        moved = cl.get_max_offset() - before
        slack = cl.prefault_slack()
        assert service.interval_ms() == min(max(slack * 100_000 / moved / 2e6, 1.0), NAP_MS) == 1.0

        # an idle writer: it naps after IdleNap.after empty rounds, and the next put wakes it
        for _ in range(service.nap.after + 1):
            now[0] += 1_000_000
            service.run_once()
        assert service.nap.napping
        assert service.interval_ms() == NAP_MS
        assert store.put_message(Message("PaceTopic", b"d")).ok
        assert not service.nap.napping
        assert service.nap.wakes == 1
    finally:
        store.shutdown()


def test_a_failing_service_is_logged_once_per_failure(caplog: pytest.LogCaptureFixture) -> None:
    """A round that fails the same way round after round (dispatch on a full disk, every
    millisecond) is logged once, and again once it changes or after a good round."""
    errors = ["disk full"] * 30 + [None] + ["disk full"] * 5 + ["other"] * 5
    done = threading.Event()

    class Failing:
        name = "failing"

        def interval_ms(self) -> float:
            return 0.1

        def run_once(self) -> None:
            if not errors:
                done.set()
                return
            e = errors.pop(0)
            if e is not None:
                raise OSError(e)

    runner = ThreadedRunner()
    with caplog.at_level("ERROR", logger="rmqlab.store.services"):
        runner.start([Failing()])
        assert done.wait(10)
        runner.shutdown()
    assert [r.exc_info[1].args[0] for r in caplog.records] == ["disk full", "disk full", "other"]
