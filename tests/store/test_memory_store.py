"""MemoryMessageStore: records held in RAM, threshold, eviction order, get_message statuses."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rmqlab.clock import ManualClock
from rmqlab.codec import flags
from rmqlab.codec.message import MessageRecord, decode_message
from rmqlab.config import MessageStoreConfig
from rmqlab.events import EventBus, EventRecorder, MemoryEvicted, MemoryPut
from rmqlab.store.memory_store import MemoryMessageStore, MemoryQueueStats, available_memory
from rmqlab.store.message import Message
from rmqlab.store.message_filter import TagFilter
from rmqlab.store.message_store import MessageStore
from rmqlab.store.results import GetMessageStatus as S
from rmqlab.store.results import PutMessageStatus

BODY = b"x" * 64


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_700_000_000_000)


@pytest.fixture
def disk_store(tmp_path: Path, clock: ManualClock) -> Iterator[MessageStore]:
    store = MessageStore.open(tmp_path, MessageStoreConfig.small(str(tmp_path)), clock=clock, threaded=False)
    yield store
    store.shutdown()


@pytest.fixture
def make(disk_store: MessageStore, clock: ManualClock) -> Callable[..., MemoryMessageStore]:
    def _make(*, probe: Callable[[], int] | None = None, bus: EventBus | None = None,
              **changes: Any) -> MemoryMessageStore:
        changes.setdefault("memory_store_max_bytes", 1 << 20)
        config = disk_store.config.with_(memory_topic_enable=True, **changes)
        return MemoryMessageStore(disk_store.commit_log, config, clock=clock, bus=bus or EventBus(),
                                  memory_probe=probe)

    return _make


def msg(topic: str = "MemA", queue_id: int = 0, tags: str | None = "TagA", **kw: Any) -> Message:
    return Message(topic, kw.pop("body", BODY), tags=tags, queue_id=queue_id, **kw)


def record_size(make: Callable[..., MemoryMessageStore]) -> int:
    probe = make()
    assert probe.put_message(msg()).ok
    return probe.message_total_size


def held_offsets(ms: MemoryMessageStore, topic: str, queue_id: int) -> list[int]:
    lo = ms.get_min_offset_in_queue(topic, queue_id)
    r = ms.get_message("g", topic, queue_id, lo, 10_000)
    return [m.queue_offset for m in r.messages]


# ---------------------------------------------------------------------------------- put / get
def test_put_get_round_trip(make: Callable[..., MemoryMessageStore], clock: ManualClock) -> None:
    ms = make()
    results = [ms.put_message(msg(body=f"m{i}".encode(), keys=f"k{i}")) for i in range(3)]
    assert [r.status for r in results] == [PutMessageStatus.PUT_OK] * 3
    assert [r.queue_offset for r in results] == [0, 1, 2]
    assert {r.wrote_offset for r in results} == {-1}
    assert {r.store_timestamp for r in results} == {clock.now_ms()}
    assert ms.get_min_offset_in_queue("MemA", 0) == 0
    assert ms.get_max_offset_in_queue("MemA", 0) == 3
    assert ms.topics() == ["MemA"]
    assert ms.message_count == 3

    with ms.get_message("g", "MemA", 0, 0, 32) as r:
        assert r.status is S.FOUND
        assert (r.next_begin_offset, r.min_offset, r.max_offset) == (3, 0, 3)
        assert r.commit_log_offsets == [-1, -1, -1]
        assert r.buffer_total_size == ms.message_total_size == sum(m.size for m in r.messages)
        for i, (m, put) in enumerate(zip(r.messages, results, strict=True)):
            rec = decode_message(m.buffer, 0, check_crc=True)
            assert isinstance(rec, MessageRecord)
            assert (rec.topic, rec.queue_id, rec.queue_offset, rec.commit_log_offset) == ("MemA", 0, i, -1)
            assert rec.body == f"m{i}".encode()
            assert rec.keys == [f"k{i}"]
            assert rec.store_timestamp == clock.now_ms()
            assert rec.uniq_key == put.msg_id
            assert m.body == rec.body
            assert m.tags == "TagA"
            assert m.buffer.readonly


def test_records_are_the_bytes_a_commit_log_writes(make: Callable[..., MemoryMessageStore],
                                                   disk_store: MessageStore) -> None:
    m = msg(uniq_key="7F00000100002A9F0000000000000001", born_timestamp=1_699_999_999_000, keys="k")
    ms = make()
    assert ms.put_message(m).ok
    on_disk = disk_store.commit_log.put_message(m)
    assert on_disk.ok
    assert on_disk.queue_offset == 0
    sel = disk_store.commit_log.get_message(on_disk.wrote_offset, on_disk.wrote_bytes)
    assert sel is not None
    try:
        expected = bytearray(sel.buffer)
    finally:
        sel.release()
    expected[28:36] = (-1).to_bytes(8, "big", signed=True)  # PHYSICALOFFSET: not in the CommitLog
    with ms.get_message("g", "MemA", 0, 0, 1) as r:
        assert bytes(r.messages[0].buffer) == bytes(expected)


def test_statuses_and_next_begin_offsets(make: Callable[..., MemoryMessageStore]) -> None:
    ms = make()
    r = ms.get_message("g", "MemA", 0, 5, 32)
    assert (r.status, r.next_begin_offset, r.max_offset) == (S.NO_MESSAGE_IN_QUEUE, 0, 0)
    for _ in range(3):
        ms.put_message(msg())
    r = ms.get_message("g", "MemA", 1, 0, 32)  # another queue of the same topic: never written
    assert r.status is S.NO_MESSAGE_IN_QUEUE
    r = ms.get_message("g", "MemA", 0, 3, 32)
    assert (r.status, r.next_begin_offset) == (S.OFFSET_OVERFLOW_ONE, 3)
    r = ms.get_message("g", "MemA", 0, 9, 32)
    assert (r.status, r.next_begin_offset) == (S.OFFSET_OVERFLOW_BADLY, 3)
    r = ms.get_message("g", "MemA", 0, 1, 32)
    assert (r.status, r.next_begin_offset, r.message_count) == (S.FOUND, 3, 2)


def test_max_msg_nums_and_in_memory_transfer_limits(make: Callable[..., MemoryMessageStore]) -> None:
    size = record_size(make)
    ms = make()
    for _ in range(10):
        ms.put_message(msg())
    r = ms.get_message("g", "MemA", 0, 0, 4)
    assert (r.message_count, r.next_begin_offset) == (4, 4)

    ms = make(max_transfer_count_on_message_in_memory=3)
    for _ in range(10):
        ms.put_message(msg())
    r = ms.get_message("g", "MemA", 0, 2, 32)
    assert (r.message_count, r.next_begin_offset) == (3, 5)

    ms = make(max_transfer_bytes_on_message_in_memory=size * 5 // 2)
    for _ in range(10):
        ms.put_message(msg())
    r = ms.get_message("g", "MemA", 0, 0, 32)
    assert (r.message_count, r.next_begin_offset, r.buffer_total_size) == (2, 2, 2 * size)


def test_tag_filter(make: Callable[..., MemoryMessageStore]) -> None:
    ms = make()
    for tag in ("A", "B", "A", "B", None):
        ms.put_message(msg(tags=tag))
    r = ms.get_message("g", "MemA", 0, 0, 32, TagFilter("A"))
    assert r.status is S.FOUND
    assert [m.queue_offset for m in r.messages] == [0, 2]
    assert (r.next_begin_offset, r.filtered_count) == (5, 3)
    # unit 1 filtered, unit 2 taken, unit 3 makes the batch full and is not counted
    r = ms.get_message("g", "MemA", 0, 1, 1, TagFilter("A || C"))
    assert ([m.queue_offset for m in r.messages], r.next_begin_offset) == ([2], 3)
    r = ms.get_message("g", "MemA", 0, 0, 32, TagFilter("C"))
    assert (r.status, r.next_begin_offset, r.message_count) == (S.NO_MATCHED_MESSAGE, 5, 0)
    r = ms.get_message("g", "MemA", 0, 0, 32, TagFilter("*"))
    assert r.message_count == 5


def test_filter_window_is_the_consume_queue_window(make: Callable[..., MemoryMessageStore]) -> None:
    ms = make(memory_store_max_bytes=10 << 20)
    for _ in range(900):
        ms.put_message(msg(tags="B", body=b""))
    r = ms.get_message("g", "MemA", 0, 0, 32, TagFilter("A"))
    # max(16000, 32*20) bytes of 20-byte units = 800 units scanned per call
    assert (r.status, r.next_begin_offset) == (S.NO_MATCHED_MESSAGE, 800)


# ---------------------------------------------------------------------------------- eviction
def test_offsets_keep_counting_across_evictions(make: Callable[..., MemoryMessageStore]) -> None:
    size = record_size(make)
    ms = make(memory_store_max_bytes=3 * size)
    results = [ms.put_message(msg()) for _ in range(10)]
    assert [r.queue_offset for r in results] == list(range(10))
    assert (ms.get_min_offset_in_queue("MemA", 0), ms.get_max_offset_in_queue("MemA", 0)) == (7, 10)
    assert (ms.evicted_count, ms.message_count, ms.message_total_size) == (7, 3, 3 * size)
    r = ms.get_message("g", "MemA", 0, 0, 32)
    assert (r.status, r.next_begin_offset, r.min_offset, r.max_offset) == (S.OFFSET_TOO_SMALL, 7, 7, 10)
    r = ms.get_message("g", "MemA", 0, 6, 32)
    assert (r.status, r.next_begin_offset) == (S.OFFSET_TOO_SMALL, 7)
    r = ms.get_message("g", "MemA", 0, 7, 32)
    assert r.status is S.FOUND
    assert [m.queue_offset for m in r.messages] == [7, 8, 9]
    assert r.messages[0].uniq_key == results[7].msg_id


def test_eviction_prefers_the_same_topic_then_the_oldest_overall(make: Callable[..., MemoryMessageStore]) -> None:
    size = record_size(make)
    bus = EventBus()
    rec = EventRecorder(bus)
    ms = make(memory_store_max_bytes=5 * size, bus=bus)
    # store order: A/q1#0, B#0, A/q0#0, B#1, A/q0#1  (full: 5 records)
    for m in (msg("MemA", 1), msg("MemB"), msg("MemA", 0), msg("MemB"), msg("MemA", 0)):
        assert ms.put_message(m).ok
    assert ms.message_total_size == ms.threshold

    assert ms.put_message(msg("MemA", 0)).ok  # oldest of MemA is in queue 1, older than any B
    assert ms.put_message(msg("MemA", 0)).ok  # now MemA's oldest is A/q0#0, though B#0 is older
    assert ms.put_message(msg("MemC")).ok  # MemC holds nothing: oldest overall, B#0
    evicted = [(e.topic, e.queue_id, e.queue_offset) for e in rec.of(MemoryEvicted)]
    assert evicted == [("MemA", 1, 0), ("MemA", 0, 0), ("MemB", 0, 0)]
    assert {e.size for e in rec.of(MemoryEvicted)} == {size}
    assert held_offsets(ms, "MemA", 0) == [1, 2, 3]
    assert held_offsets(ms, "MemA", 1) == []
    assert held_offsets(ms, "MemB", 0) == [1]
    assert held_offsets(ms, "MemC", 0) == [0]
    r = ms.get_message("g", "MemA", 1, 0, 32)
    assert (r.status, r.next_begin_offset, r.min_offset, r.max_offset) == (S.OFFSET_TOO_SMALL, 1, 1, 1)
    r = ms.get_message("g", "MemA", 1, 1, 32)
    assert r.status is S.OFFSET_OVERFLOW_ONE
    assert ms.evicted_count == 3
    assert ms.evicted_bytes == 3 * size


def test_eviction_falls_through_to_other_topics_until_it_fits(make: Callable[..., MemoryMessageStore]) -> None:
    size = record_size(make)
    ms = make(memory_store_max_bytes=4 * size + 10)
    for m in (msg("MemB"), msg("MemA"), msg("MemB"), msg("MemB")):
        ms.put_message(m)
    big = msg("MemA", body=BODY + b"y" * (2 * size))  # needs three records' room
    assert ms.put_message(big).ok
    # MemA's one message first, then the oldest overall (B#0, B#1)
    assert held_offsets(ms, "MemA", 0) == [1]
    assert held_offsets(ms, "MemB", 0) == [2]
    assert ms.message_total_size <= ms.threshold


def test_events_only_when_someone_listens(make: Callable[..., MemoryMessageStore]) -> None:
    size = record_size(make)
    bus = EventBus()
    ms = make(memory_store_max_bytes=size, bus=bus)
    ms.put_message(msg())
    ms.put_message(msg())
    assert ms.evicted_count == 1
    rec = EventRecorder(bus)
    ms.put_message(msg())
    assert rec.of(MemoryEvicted) == [MemoryEvicted("MemA", 0, 1, size)]
    assert rec.of(MemoryPut) == [MemoryPut("MemA", 0, 2, 1, size)]
    assert [type(e) for e in rec.events] == [MemoryEvicted, MemoryPut]  # eviction first, then the put


def test_queue_stats_track_bytes_held_through_evictions(make: Callable[..., MemoryMessageStore]) -> None:
    size = record_size(make)
    ms = make(memory_store_max_bytes=3 * size + 100)
    assert ms.queue_stats() == []
    assert all(ms.put_message(m).ok for m in (msg("MemB", 1), msg("MemA", 0), msg("MemA", 0)))
    assert ms.queue_stats() == [MemoryQueueStats("MemA", 0, 0, 2, 2 * size), MemoryQueueStats("MemB", 1, 0, 1, size)]
    big = msg("MemB", 1, body=BODY + b"z" * 100)  # evicts MemB's only message: then it fits
    assert ms.put_message(big).ok
    stats = ms.queue_stats()
    assert stats == [MemoryQueueStats("MemA", 0, 0, 2, 2 * size), MemoryQueueStats("MemB", 1, 1, 2, size + 100)]
    bigger = msg("MemB", 1, body=BODY + b"z" * 300)  # MemB's one message is not enough: MemA's oldest too
    assert ms.put_message(bigger).ok
    stats = ms.queue_stats()
    assert stats == [MemoryQueueStats("MemA", 0, 1, 2, size), MemoryQueueStats("MemB", 1, 2, 3, size + 300)]
    assert sum(q.held_bytes for q in stats) == ms.message_total_size


def test_oversize_message_is_refused_and_evicts_nothing(make: Callable[..., MemoryMessageStore]) -> None:
    size = record_size(make)
    ms = make(memory_store_max_bytes=2 * size)
    ms.put_message(msg())
    r = ms.put_message(msg(body=b"z" * (2 * size)))
    assert r.status is PutMessageStatus.MESSAGE_ILLEGAL
    assert "threshold" in r.reason
    assert (ms.message_count, ms.evicted_count, ms.get_max_offset_in_queue("MemA", 0)) == (1, 0, 1)


# ---------------------------------------------------------------------------------- threshold
def test_threshold_from_an_injected_probe(make: Callable[..., MemoryMessageStore]) -> None:
    available = [1 << 20]
    ms = make(memory_store_max_bytes=None, memory_store_max_ratio=0.75, probe=lambda: available[0])
    assert ms.threshold == 786432
    available[0] = 2 << 20
    assert ms.threshold == 786432  # read once, not on every put
    assert ms.refresh_threshold() == ms.threshold == 1572864
    assert make(memory_store_max_bytes=1000, probe=lambda: 1 << 30).threshold == 1000


def test_threshold_fills_then_evicts(make: Callable[..., MemoryMessageStore]) -> None:
    size = record_size(make)
    ms = make(memory_store_max_bytes=None, memory_store_max_ratio=0.5, probe=lambda: 8 * size)
    for _ in range(6):
        ms.put_message(msg())
    assert (ms.message_count, ms.evicted_count) == (4, 2)


def test_default_probe_reports_memory() -> None:
    assert available_memory() > 0


# ---------------------------------------------------------------------------------- refusals, batches
def test_refusals(make: Callable[..., MemoryMessageStore]) -> None:
    ms = make()
    assert ms.put_message(msg("bad topic")).status is PutMessageStatus.MESSAGE_ILLEGAL
    assert ms.put_message(msg(delay_time_level=3)).status is PutMessageStatus.MESSAGE_ILLEGAL
    r = ms.put_message(msg(sys_flag=flags.TRANSACTION_PREPARED_TYPE))
    assert r.status is PutMessageStatus.MESSAGE_ILLEGAL
    assert "PREPARED" in r.reason
    assert ms.put_message(msg(sys_flag=flags.TRANSACTION_COMMIT_TYPE)).ok
    assert ms.message_count == 1


def test_batch(make: Callable[..., MemoryMessageStore]) -> None:
    ms = make()
    ms.put_message(msg())
    r = ms.put_messages([msg(body=f"b{i}".encode()) for i in range(3)])
    assert r.ok
    assert r.queue_offset == 1
    assert r.append_result is not None
    assert r.append_result.msg_num == 3
    got = ms.get_message("g", "MemA", 0, 1, 32)
    assert r.msg_id == ",".join(m.uniq_key for m in got.messages)
    assert [m.body for m in got.messages] == [b"b0", b"b1", b"b2"]
    assert len({m.store_timestamp for m in got.messages}) == 1
    bad = ms.put_messages([msg(), msg(queue_id=1)])
    assert bad.status is PutMessageStatus.MESSAGE_ILLEGAL
    assert ms.put_messages([]).status is PutMessageStatus.MESSAGE_ILLEGAL
    assert ms.message_count == 4


# ---------------------------------------------------------------------------------- threads
def test_concurrent_puts_and_gets_keep_the_invariants(make: Callable[..., MemoryMessageStore]) -> None:
    size = record_size(make)
    ms = make(memory_store_max_bytes=60 * size)
    topics = ("MemA", "MemB")
    per_thread, writers = 150, 6
    errors: list[BaseException] = []
    done = threading.Event()

    def writer(n: int) -> None:
        try:
            for i in range(per_thread):
                r = ms.put_message(msg(topics[(n + i) % 2], i % 4))
                assert r.ok, r.reason
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    def reader() -> None:
        try:
            while not done.is_set():
                for t in topics:
                    for q in range(4):
                        r = ms.get_message("g", t, q, ms.get_min_offset_in_queue(t, q), 32)
                        offsets = [m.queue_offset for m in r.messages]
                        assert offsets == list(range(offsets[0], offsets[0] + len(offsets))) if offsets else True
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(writers)]
    readers = [threading.Thread(target=reader) for _ in range(2)]
    for t in readers + threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    for t in readers:
        t.join()
    assert not errors, errors

    total_put = sum(ms.get_max_offset_in_queue(t, q) for t in topics for q in range(4))
    assert total_put == writers * per_thread
    assert ms.evicted_count + ms.message_count == total_put
    assert ms.message_total_size == ms.message_count * size <= ms.threshold
    for t in topics:
        for q in range(4):
            lo, hi = ms.get_min_offset_in_queue(t, q), ms.get_max_offset_in_queue(t, q)
            assert held_offsets(ms, t, q) == list(range(lo, hi))
