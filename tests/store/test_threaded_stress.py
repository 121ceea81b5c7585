"""A threaded store under everything at once: producers, consumers, a querier, cleanup.

Four producers put single messages, lists and producer-encoded batches into three topics of
three queues (bodies from empty to 8 KiB, so 64 KiB CommitLog files roll all the time); three
consumers pull every queue in a busy loop; a querier looks keys up; in the cleanup variants a
thread ages old files and runs both cleanup services. Every body carries its producer and
sequence number and a digest-derived pattern, so a torn or misplaced read is caught where it
happens. Afterwards: every acknowledgement has a dense queue offset, everything a consumer saw is
what was acknowledged at that place, every acknowledged message (not cleaned up) is found at its
queue offset, a clean shutdown leaves no ``abort``, and the store reopens by normal recovery to
the same offsets and passes ``verify`` with CRC checks.

The switch interval is cut to 50 us so that threads interleave far more often than the default
5 ms would let them. This harness found two bugs: the put lock convoy (``test_put_lock.py``) and
``wait_dispatched`` returning before the transient store pool's tail was committed.
"""

from __future__ import annotations

import hashlib
import os
import random
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from rmqlab import Message, MessageStore, MessageStoreConfig
from rmqlab.codec.batch import MessageBatch
from rmqlab.inspect import open_snapshot, verify
from rmqlab.store.results import GetMessageStatus as S

TOPICS = ("TopicA", "TopicB", "TopicC")
QUEUES = 3
PRODUCERS = 4
CONSUMERS = 3
SECONDS = 2.5


def body_of(pid: int, seq: int, n: int) -> bytes:
    head = f"{pid}:{seq}:{n}:".encode()
    return head + (hashlib.sha1(head).digest() * (n // 20 + 1))[:n]


def owner(body: bytes) -> tuple[int, int]:
    """(producer, sequence) of a body; AssertionError if it is not exactly what was put."""
    pid, seq, n, _ = body.split(b":", 3)
    assert body == body_of(int(pid), int(seq), int(n)), f"torn body {body[:40]!r}"
    return int(pid), int(seq)


@dataclass
class Run:
    store: MessageStore
    version: str
    lossy: bool  # cleanup or memory eviction may remove messages under the consumers
    acks: dict[tuple[int, int], tuple[str, int, int, int]] = field(default_factory=dict)
    seen: dict[tuple[str, int, int], tuple[int, int, int]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def guard(self, fn, *args) -> None:  # type: ignore[no-untyped-def]
        try:
            fn(*args)
        except BaseException as e:  # reported by the test, with the thread's name
            self.errors.append(f"{threading.current_thread().name}: {e!r}")
            self.stop.set()

    def uniq_key(self) -> str:
        return self.store.commit_log.new_uniq_key(self.store.clock.now_ms())

    # ------------------------------------------------------------------ threads
    def produce(self, pid: int) -> None:
        rnd, seq = random.Random(pid), 0
        store = self.store
        while not self.stop.is_set():
            topic, qid = rnd.choice(TOPICS), rnd.randrange(QUEUES)
            n = rnd.choice([0, 10, 100, 1000, 3000, rnd.randrange(8000)])
            kind = rnd.random()
            if kind < 0.7:
                m = Message(topic, body_of(pid, seq, n), tags=f"T{seq % 3}", keys=[f"k{pid}-{seq}"], queue_id=qid)
                r = store.put_message(m)
                assert r.ok, r
                with self.lock:
                    self.acks[(pid, seq)] = (topic, qid, r.queue_offset, r.wrote_offset)
                seq += 1
                continue
            k, n = rnd.randint(1, 8), min(n, 1500)
            msgs = [Message(topic, body_of(pid, seq + i, n), tags=f"T{(seq + i) % 3}", keys=[f"k{pid}-{seq + i}"],
                            queue_id=qid) for i in range(k)]  # fmt: skip
            if kind < 0.85:
                r = store.put_messages(msgs)
            else:
                r = store.put_messages(MessageBatch.from_messages(msgs, self.uniq_key, client_version=self.version))
            assert r.ok, r
            with self.lock:
                for i in range(k):
                    self.acks[(pid, seq + i)] = (topic, qid, r.queue_offset + i, -1)
            seq += k

    def consume(self, cid: int) -> None:
        rnd = random.Random(100 + cid)
        nexts = {(t, q): 0 for t in TOPICS for q in range(QUEUES)}
        while not self.stop.is_set():
            t, q = rnd.choice(list(nexts))
            off = nexts[(t, q)]
            with self.store.get_message(f"g{cid}", t, q, off, rnd.choice([1, 8, 32])) as r:
                if r.status is S.FOUND:
                    if not self.lossy:
                        assert r.next_begin_offset == off + len(r.messages)
                    for i, m in enumerate(r.messages):
                        rec = m.decode()
                        assert (rec.topic, rec.queue_id) == (t, q)
                        if not self.lossy:
                            assert rec.queue_offset == off + i
                        pid, seq = owner(bytes(rec.body))
                        assert list(rec.keys) == [f"k{pid}-{seq}"]
                        with self.lock:
                            first = self.seen.setdefault((t, q, rec.queue_offset), (pid, seq, m.commit_log_offset))
                        assert first[:2] == (pid, seq), ((t, q, rec.queue_offset), first, (pid, seq))
                    nexts[(t, q)] = r.next_begin_offset
                elif r.status in (S.OFFSET_OVERFLOW_ONE, S.NO_MESSAGE_IN_QUEUE):
                    pass
                else:
                    assert self.lossy, r.status
                    assert r.status in (S.OFFSET_TOO_SMALL, S.OFFSET_FOUND_NULL, S.NO_MATCHED_MESSAGE,
                                        S.MESSAGE_WAS_REMOVING), r.status
                    nexts[(t, q)] = r.next_begin_offset

    def query(self) -> None:
        rnd = random.Random(7)
        while not self.stop.is_set():
            with self.lock:
                recent = list(self.acks.items())[-500:]
            if not recent:
                time.sleep(0.001)
                continue
            (pid, seq), (t, _q, _qo, _w) = rnd.choice(recent)
            for rec in self.store.query_message(t, f"k{pid}-{seq}", 32).messages:
                assert owner(bytes(rec.body)) == (pid, seq)  # exact-key filtering
            time.sleep(0.0005)

    def age_and_clean(self) -> None:
        """Age all CommitLog files but the newest three, ask for a manual delete and run both
        cleanup services here (their own threads start a minute in, as RocketMQ's do)."""
        services = [s for s in self.store.services() if s.name in ("clean_commit_log", "clean_consume_queue")]
        while not self.stop.is_set():
            time.sleep(0.1)
            old = time.time() - 100 * 3600
            for mf in list(self.store.commit_log.mapped_file_queue.mapped_files)[:-3]:
                try:
                    os.utime(mf.file_name, (old, old))
                except FileNotFoundError:
                    pass
            self.store.execute_delete_files_manually()
            for s in services:
                s.run_once()


@pytest.fixture
def busy_switching() -> Iterator[None]:
    interval = sys.getswitchinterval()
    sys.setswitchinterval(5e-5)
    yield
    sys.setswitchinterval(interval)


VARIANTS = {
    "async-4.9.8": ("4.9.8", {}),
    "sync-5.3.3": ("5.3.3", {"flush_disk_type": "SYNC_FLUSH"}),
    "pool-5.3.3": ("5.3.3", {"transient_store_pool_enable": True}),
    "pool-cleanup-4.9.8": ("4.9.8", {"transient_store_pool_enable": True, "file_reserved_time": 0}),
    "cleanup-5.3.3": ("5.3.3", {"file_reserved_time": 0}),
    "memory-topic-4.9.8": ("4.9.8", {"memory_topic_enable": True, "memory_store_max_bytes": 400_000}),
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_threaded_store_under_load(tmp_path: Path, variant: str, busy_switching: None) -> None:
    version, changes = VARIANTS[variant]
    root = tmp_path / "store"
    config = MessageStoreConfig.small(str(root), rocketmq_version=version, max_message_size=16384, **changes)
    store = MessageStore.open(root, config, threaded=True)
    cleanup, memory = "cleanup" in variant, "memory" in variant
    if memory:
        store.create_topic("TopicC", QUEUES, memory=True)
    run = Run(store, version, lossy=cleanup or memory)
    threads = [threading.Thread(target=run.guard, args=(run.produce, p), name=f"producer-{p}")
               for p in range(PRODUCERS)]  # fmt: skip
    threads += [threading.Thread(target=run.guard, args=(run.consume, c), name=f"consumer-{c}")
                for c in range(CONSUMERS)]  # fmt: skip
    threads.append(threading.Thread(target=run.guard, args=(run.query,), name="querier"))
    if cleanup:
        threads.append(threading.Thread(target=run.guard, args=(run.age_and_clean,), name="cleaner"))
    try:
        for t in threads:
            t.start()
        run.stop.wait(SECONDS)
        # A slow machine (a busy CI box; a slow disk under SYNC_FLUSH) did less in that time: it
        # runs on until the run did something (and cleanup really removed a file), 60 s at most.
        deadline = time.monotonic() + 60
        while not run.stop.is_set() and time.monotonic() < deadline and not (
                len(run.acks) > 100 and (not cleanup or store.get_min_phy_offset() > 0)):
            time.sleep(0.05)
        run.stop.set()
        for t in threads:
            t.join()
        assert run.errors == []
        assert store.wait_dispatched(30)
        assert len(run.acks) > 100  # the run did something

        per_queue: dict[tuple[str, int], list[int]] = {}
        for t, q, qo, _w in run.acks.values():
            per_queue.setdefault((t, q), []).append(qo)
        for (t, q), offsets in per_queue.items():
            assert sorted(offsets) == list(range(len(offsets))), (t, q)  # dense, none given twice
            if not memory:  # all of them dispatched
                assert store.get_max_offset_in_queue(t, q) == len(offsets), (t, q)
        for (t, q, qo), (pid, seq, _) in run.seen.items():
            assert run.acks[(pid, seq)][:3] == (t, q, qo)  # consumers saw what was acknowledged there
        if cleanup:
            assert store.get_min_phy_offset() > 0  # cleanup really ran under the load
        found = 0
        for (pid, seq), (t, q, qo, wrote) in ([] if memory else run.acks.items()):
            with store.get_message("final", t, q, qo, 1) as r:
                at = r.messages[0].decode().queue_offset if r.status is S.FOUND else None
                if at != qo:  # only below what cleanup kept, never past the end
                    assert cleanup, (t, q, qo, r.status)
                    # A queue's min offset moves only to a unit that points into a file left: one whose
                    # newest units all went with the deleted files keeps its old min, and a get there
                    # skips to the next message left (FOUND further on) or, with none, says
                    # MESSAGE_WAS_REMOVING, as RocketMQ does (a slow run: few units per queue).
                    assert r.status in (S.OFFSET_TOO_SMALL, S.OFFSET_FOUND_NULL, S.MESSAGE_WAS_REMOVING,
                                        S.FOUND), (t, q, qo, r.status)
                    assert at is None or at > qo, (t, q, qo, at)
                    assert wrote < store.get_min_phy_offset(), (t, q, qo, wrote, r.status)  # in a deleted file
                    continue
                m = r.messages[0]
                assert owner(bytes(m.decode().body)) == (pid, seq)
                assert wrote < 0 or m.commit_log_offset == wrote
                found += 1
        # (a share of what was acked, as this once read, depends on the machine: the cleaner deletes
        # about a file per 0.1 s round whatever the producers' speed, so on a slow machine it kept up
        # with them and only the newest three files were left; what was not found lay in a
        # deleted file, checked above)
        assert memory or found > 0

        max_phy = store.get_max_phy_offset()
        store.shutdown()
        assert not (root / "abort").exists()
        with MessageStore.open(root, config, threaded=False) as again:
            assert again.recovery_plan.mode == "normal"
            assert again.get_max_phy_offset() == max_phy
            if not memory:
                for (t, q), offsets in per_queue.items():
                    assert again.get_max_offset_in_queue(t, q) == len(offsets)
        if not cleanup:
            with open_snapshot(root) as snap:
                assert [f for f in verify(snap, check_crc=True) if f.severity != "info"] == []
    finally:
        run.stop.set()
        store.shutdown()
