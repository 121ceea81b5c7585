"""Memory topics against a plain model: eviction order, offsets that never restart, routing.

Random puts to two memory topics (and one disk topic beside them) under a small byte threshold,
gets anywhere in or around each queue, and reopens. The model holds per queue its base offset
and its messages with their store sequence, and evicts as the design says (``memory_store``):
before a put that would pass the threshold, the oldest message of the same topic, then the
oldest of the whole store, until the new one fits; a record larger than the threshold is
refused and evicts nothing. Memory topics live in RAM only: a reopen starts them empty, at
offset 0, while the disk topic keeps every message.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from rmqlab import Message, MessageStore, MessageStoreConfig
from rmqlab.clock import ManualClock
from rmqlab.store.results import GetMessageStatus, PutMessageStatus

MEMORY = ("MemA", "MemB")
DISK = "Disk"
QUEUES = 2
THRESHOLD = 20_000


@dataclass
class Held:
    seq: int
    body: bytes
    size: int


class MemoryModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = tempfile.mkdtemp(prefix="rmqlab-memory-model-")
        self.config = MessageStoreConfig.small(self.root, memory_topic_enable=True, memory_store_max_bytes=THRESHOLD)
        self.clock = ManualClock()
        self._open()
        for topic in MEMORY:
            self.store.create_topic(topic, memory=True)
        self.disk: list[bytes] = []

    def _open(self) -> None:
        self.store = MessageStore.open(self.root, self.config, clock=self.clock, threaded=False)
        self.queues: dict[tuple[str, int], list[Held]] = {(t, q): [] for t in MEMORY for q in range(QUEUES)}
        self.base: dict[tuple[str, int], int] = dict.fromkeys(self.queues, 0)
        self.seq = 0

    def teardown(self) -> None:
        self.store.shutdown()
        shutil.rmtree(self.root, ignore_errors=True)

    def _total(self) -> int:
        return sum(h.size for q in self.queues.values() for h in q)

    def _evict_one(self, topic: str) -> None:
        heads = [(q[0].seq, key) for key, q in self.queues.items() if q and key[0] == topic]
        if not heads:
            heads = [(q[0].seq, key) for key, q in self.queues.items() if q]
        _, key = min(heads)
        self.queues[key].pop(0)
        self.base[key] += 1

    @rule(topic=st.sampled_from(MEMORY), queue_id=st.integers(0, QUEUES - 1),
          size=st.one_of(st.integers(0, 3000), st.just(THRESHOLD + 1)))
    def put(self, topic: str, queue_id: int, size: int) -> None:
        body = bytes([self.seq % 251]) * size
        before = self._total()
        r = self.store.put_message(Message(topic, body, tags="T", keys=[f"k{self.seq}"], queue_id=queue_id))
        if size > THRESHOLD:
            assert r.status is PutMessageStatus.MESSAGE_ILLEGAL
            assert self._total() == before  # nothing evicted
            return
        assert r.status is PutMessageStatus.PUT_OK, r
        record = r.wrote_bytes
        while self._total() + record > THRESHOLD:
            self._evict_one(topic)
        key = (topic, queue_id)
        assert r.queue_offset == self.base[key] + len(self.queues[key])
        self.queues[key].append(Held(self.seq, body, record))
        self.seq += 1
        self.clock.advance(3)

    @rule(size=st.integers(0, 2000))
    def put_disk(self, size: int) -> None:
        body = bytes([len(self.disk) % 251]) * size
        assert self.store.put_message(Message(DISK, body, queue_id=0)).ok
        self.disk.append(body)

    @rule()
    def reopen(self) -> None:
        self.store.shutdown()
        self._open()

    @rule(topic=st.sampled_from(MEMORY), queue_id=st.integers(0, QUEUES - 1), delta=st.integers(-5, 40),
          n=st.integers(1, 32))
    def get(self, topic: str, queue_id: int, delta: int, n: int) -> None:
        key = (topic, queue_id)
        low, held = self.base[key], self.queues[key]
        high = low + len(held)
        offset = max(0, low + delta)
        with self.store.get_message("g", topic, queue_id, offset, n) as got:
            assert (got.min_offset, got.max_offset) == (low, high)
            if high == 0:
                assert got.status is GetMessageStatus.NO_MESSAGE_IN_QUEUE
            elif offset < low:
                assert got.status is GetMessageStatus.OFFSET_TOO_SMALL
                assert got.next_begin_offset == low
            elif offset == high:
                assert got.status is GetMessageStatus.OFFSET_OVERFLOW_ONE
            elif offset > high:
                assert got.status is GetMessageStatus.OFFSET_OVERFLOW_BADLY
            else:
                want = held[offset - low : offset - low + n]
                assert got.status is GetMessageStatus.FOUND
                assert got.next_begin_offset == offset + len(want)
                assert [(m.queue_offset, m.body, m.topic) for m in got.messages] == [
                    (offset + i, h.body, topic) for i, h in enumerate(want)]

    @invariant()
    def held(self) -> None:
        assert self.store.memory_store.message_total_size == self._total() <= THRESHOLD
        for (topic, queue_id), held in self.queues.items():
            low = self.base[(topic, queue_id)]
            assert self.store.get_min_offset_in_queue(topic, queue_id) == low
            assert self.store.get_max_offset_in_queue(topic, queue_id) == low + len(held)
        self.store.wait_dispatched()
        assert self.store.get_max_offset_in_queue(DISK, 0) == len(self.disk)  # the disk topic loses nothing


TestMemoryModel = MemoryModel.TestCase
TestMemoryModel.settings = settings(max_examples=100, stateful_step_count=80, deadline=None,
                                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
