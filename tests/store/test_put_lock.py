"""The put lock goes to threads that run Python, so producers are not slowed to a GIL hand-off
per put (``rmqlab.store.put_lock``)."""

from __future__ import annotations

import itertools
import threading
from pathlib import Path

from rmqlab import Message, MessageStore, MessageStoreConfig
from rmqlab.store.put_lock import wait_until_free


def test_wait_until_free_returns_once_the_lock_is_released_and_never_takes_it() -> None:
    lock = threading.Lock()
    lock.acquire()
    freed = threading.Event()

    def waiter() -> None:
        wait_until_free(lock, spins=10**9)  # never gives up waiting
        freed.set()

    t = threading.Thread(target=waiter)
    t.start()
    assert not freed.wait(0.05)  # held: the waiter keeps yielding
    lock.release()
    assert freed.wait(10)
    t.join()
    assert not lock.locked()  # it waited for the lock, it did not take it


def test_wait_until_free_gives_up_after_its_spins() -> None:
    lock = threading.Lock()
    lock.acquire()
    wait_until_free(lock, spins=3)  # returns although the lock stays taken
    assert lock.locked()
    lock.release()


def test_producers_put_in_runs_while_other_threads_are_busy(tmp_path: Path) -> None:
    """Four producers and two threads polling the store in a loop. With a queueing lock, each
    release hands the lock to a waiter that must first win the GIL back, so consecutive records
    come from different producers (runs of ~1 record) and every put waits out a GIL switch. The
    lock taken by the thread holding the GIL lets a producer put on through its time slice:
    runs of many records."""
    root = tmp_path / "store"
    store = MessageStore.open(root, MessageStoreConfig.small(str(root), mapped_file_size_commit_log=1 << 22),
                              threaded=False)
    offsets: list[list[int]] = [[] for _ in range(4)]
    stop = threading.Event()
    start = threading.Barrier(6)

    def produce(p: int) -> None:
        start.wait()
        for i in range(400):
            r = store.put_message(Message("TopicA", b"x" * 200, keys=[f"p{p}-{i}"], queue_id=p))
            assert r.ok
            offsets[p].append(r.wrote_offset)

    def poll() -> None:
        start.wait()
        while not stop.is_set():
            store.get_message("g", "TopicA", 0, 0, 8).release()

    pollers = [threading.Thread(target=poll) for _ in range(2)]
    producers = [threading.Thread(target=produce, args=(p,)) for p in range(4)]
    for t in pollers + producers:
        t.start()
    for t in producers:
        t.join()
    stop.set()
    for t in pollers:
        t.join()
    try:
        order = sorted((o, p) for p, offs in enumerate(offsets) for o in offs)
        assert len(order) == 1600
        switches = sum(1 for a, b in itertools.pairwise(order) if a[1] != b[1])
        assert 1600 / (switches + 1) >= 8, f"mean run {1600 / (switches + 1):.1f} records"
    finally:
        store.shutdown()
