"""MessageStore end to end: thousands of messages against a plain-Python model of what was acked.

A seeded workload (3 topics x 4 queues, bodies 1 B .. 3 KiB, tags or none, 0-3 keys including
non-ASCII and emoji, user properties, IPv6 born hosts, flags, a few batches) is written with tiny
file sizes so CommitLog, ConsumeQueue and index files all roll. Every read API is then checked
against the model, live and after a clean reopen, in stepped and threaded mode. RocketMQ 4.9.8
rules (spec §3.5, §4.4, §9) give the expected answers.
"""

from __future__ import annotations

import itertools
import os
import random
import subprocess
import sys
import textwrap
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from rmqlab.clock import ManualClock
from rmqlab.codec.flags import BLANK_MAGIC_CODE
from rmqlab.codec.index_layout import index_key_hash
from rmqlab.codec.java_hash import java_hash
from rmqlab.codec.msg_id import decode_offset_msg_id
from rmqlab.config import MessageStoreConfig
from rmqlab.errors import NotAStore, StoreLocked
from rmqlab.store.message import Message
from rmqlab.store.message_filter import TagFilter
from rmqlab.store.message_store import MessageStore
from rmqlab.store.results import GetMessageStatus, PutMessageResult, PutMessageStatus

TOPICS = ("TopicA", "TopicB", "Topic_C-3")
KEY_POOL = ("order-1", "order-2", "shared", "ключ", "键值", "emoji-😀", "🚀", "Aa", "BB")
TAG_POOL = (None, None, "TagA", "TagB", "TagC", "标签-X")
CLUSTER = "DefaultCluster"
STORE_HOST = ("127.0.0.1", 10911)
LONG_MAX = 2**63 - 1


@dataclass
class Acked:
    """One acknowledged message: what was sent and what the store answered."""

    msg: Message
    msg_id: str
    wrote_offset: int
    size: int
    queue_offset: int
    store_timestamp: int
    batch: bool = False  # one record of a put_messages batch (MessageExtBatch layout)


@dataclass
class Model:
    acked: list[Acked] = field(default_factory=list)

    def queue(self, topic: str, queue_id: int) -> list[Acked]:
        q = [a for a in self.acked if a.msg.topic == topic and a.msg.queue_id == queue_id]
        return sorted(q, key=lambda a: a.queue_offset)

    def queues(self) -> list[tuple[str, int]]:
        return sorted({(a.msg.topic, a.msg.queue_id) for a in self.acked})


# ------------------------------------------------------------------------------------------ workload
def _message(
    rng: random.Random, i: int, clock: ManualClock, topic: str | None = None, queue_id: int | None = None
) -> Message:
    size = rng.choice([1, rng.randint(1, 64), rng.randint(100, 1000), rng.randint(1000, 3072), 3072])
    props: dict[str, str] = {}
    if rng.random() < 0.3:
        props["bizSeq"] = str(i)
    if rng.random() < 0.1:
        props["地区"] = "上海😀"
    host = ("2001:db8::%x" % (i % 7 + 1), 5000 + i % 100) if i % 13 == 0 else (f"10.0.{i % 3}.{i % 250}", 40000)
    return Message(
        topic if topic is not None else rng.choice(TOPICS),
        rng.randbytes(size),
        tags=rng.choice(TAG_POOL),
        keys=rng.sample(KEY_POOL, rng.randint(0, 3)),
        properties=props or None,
        queue_id=queue_id if queue_id is not None else rng.randrange(4),
        flag=rng.choice([0, 0, 0, 0, 1, 42, -1, 2**31 - 1]),
        born_host=host,
        born_timestamp=clock.now_ms() - rng.randint(0, 50),
        uniq_key=f"C0FFEE{i:026X}" if i % 10 == 0 else None,
    )


def _ack_batch(result: PutMessageResult, msgs: list[Message]) -> list[Acked]:
    """Split a batch's PutMessageResult into one Acked per message (offsets from the msgIds)."""
    ids = result.msg_id.split(",")
    offsets = [decode_offset_msg_id(i)[2] for i in ids]
    end = result.wrote_offset + result.wrote_bytes
    sizes = [b - a for a, b in zip(offsets, [*offsets[1:], end], strict=True)]
    return [
        Acked(m, ids[k], offsets[k], sizes[k], result.queue_offset + k, result.store_timestamp, batch=True)
        for k, m in enumerate(msgs)
    ]


def write_workload(store: MessageStore, clock: ManualClock, n: int, seed: int, model: Model) -> None:
    rng = random.Random(seed)
    base = len(model.acked)
    i = 0
    while i < n:
        if i % 97 == 50:  # a batch of 3 for one topic/queue
            topic, qid = rng.choice(TOPICS), rng.randrange(4)
            msgs = [_message(rng, base + i + k, clock, topic, qid) for k in range(3)]
            r = store.put_messages(msgs)
            assert r.ok, r
            model.acked.extend(_ack_batch(r, msgs))
            i += 3
        else:
            msg = _message(rng, base + i, clock)
            r = store.put_message(msg)
            assert r.ok, r
            model.acked.append(Acked(msg, r.msg_id, r.wrote_offset, r.wrote_bytes, r.queue_offset, r.store_timestamp))
            i += 1
        clock.advance(rng.choice([0, 0, 1, 2, 300, 1000, 1700]))  # equal and distinct store times
        if not store.threaded and i % 50 == 0:
            store.step()
    assert store.wait_dispatched()


def check_record(rec: Any, a: Acked) -> None:
    m = a.msg
    got = rec  # StoredMessage or MessageRecord: same attributes
    assert got.commit_log_offset == a.wrote_offset
    assert got.store_size == a.size
    assert (got.topic, got.queue_id, got.queue_offset) == (m.topic, m.queue_id, a.queue_offset)
    assert got.body == m.body
    assert got.crc_ok
    assert got.tags == m.tags
    assert got.keys == list(m.keys)
    assert got.flag == m.flag
    assert got.born_timestamp == m.born_timestamp
    assert got.born_host == m.born_host_tuple
    assert got.store_host == STORE_HOST
    assert bool(got.sys_flag & 0x10) == (":" in m.born_host_tuple[0])
    assert got.store_timestamp == a.store_timestamp
    assert got.msg_id == a.msg_id
    props = got.properties
    assert props["CLUSTER"] == CLUSTER
    # 4.9.8 drops WAIT from a single message, but a batch record ends with the batch's own
    # properties (CLUSTER, WAIT of the first message): MessageExtBatchEncoder keeps it
    assert props.get("WAIT") == ("true" if a.batch else None)
    if a.batch:
        assert got.properties_raw.endswith(f"\x02CLUSTER\x01{CLUSTER}\x02WAIT\x01true".encode())
    assert all(props[k] == v for k, v in (m.properties or {}).items())
    assert got.uniq_key == (m.uniq_key or got.uniq_key)
    assert len(got.uniq_key) == 32


# ------------------------------------------------------------------------------------------ fixture
@dataclass
class Written:
    store: MessageStore
    model: Model
    root: Path
    config: MessageStoreConfig
    clock: ManualClock


N_MESSAGES = 3000


@pytest.fixture(
    scope="module",
    params=[(False, False), (True, False), (False, True), (True, True)],
    ids=["stepped-live", "threaded-live", "stepped-reopened", "threaded-reopened"],
)
def written(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Written:
    threaded, reopen = request.param
    root = tmp_path_factory.mktemp("ms") / "store"
    config = MessageStoreConfig.small(str(root))
    clock = ManualClock()
    store = MessageStore.open(root, config, clock=clock, threaded=threaded)
    model = Model()
    write_workload(store, clock, N_MESSAGES, seed=20240601, model=model)
    if reopen:
        store.shutdown()
        assert not (root / "abort").exists()
        store = MessageStore.open(root, config, clock=clock, threaded=threaded)
        assert store.recovery_plan is not None
        assert store.recovery_plan.mode == "normal"
        assert store.last_exit_ok
    yield Written(store, model, root, config, clock)
    store.shutdown()


def test_files_rolled(written: Written) -> None:
    root = written.root
    assert len(os.listdir(root / "commitlog")) > 20
    assert len(os.listdir(root / "index")) > 10
    assert all(len(os.listdir(root / "consumequeue" / t / "0")) >= 3 for t in TOPICS)
    assert written.store.get_max_phy_offset() == max(a.wrote_offset + a.size for a in written.model.acked)
    assert written.store.get_min_phy_offset() == 0


def test_get_message_page_walk_returns_every_message_in_order(written: Written) -> None:
    store, model = written.store, written.model
    units_per_file = written.config.consume_queue_file_size // 20
    assert len(model.queues()) == 12
    for topic, qid in model.queues():
        want = model.queue(topic, qid)
        assert [a.queue_offset for a in want] == list(range(len(want)))
        assert store.get_max_offset_in_queue(topic, qid) == len(want)
        assert store.get_min_offset_in_queue(topic, qid) == 0
        offset, got = 0, 0
        while offset < len(want):
            with store.get_message("g", topic, qid, offset, 32) as r:
                assert r.status is GetMessageStatus.FOUND
                assert (r.min_offset, r.max_offset) == (0, len(want))
                # One CQ file per call (RocketMQ reads the CQ buffer up to its file's end).
                n = min(32, len(want) - offset, units_per_file - offset % units_per_file)
                assert r.message_count == n
                assert r.next_begin_offset == offset + n
                assert r.buffer_total_size == sum(a.size for a in want[offset : offset + n])
                for sm, a in zip(r.messages, want[offset : offset + n], strict=True):
                    check_record(sm, a)
                got += n
                offset = r.next_begin_offset
        assert got == len(want)


def test_get_message_statuses_at_the_ends(written: Written) -> None:
    store, model = written.store, written.model
    topic, qid = model.queues()[0]
    n = len(model.queue(topic, qid))
    cases = [
        (n, GetMessageStatus.OFFSET_OVERFLOW_ONE, n),
        (n + 5, GetMessageStatus.OFFSET_OVERFLOW_BADLY, n),
        (-1, GetMessageStatus.OFFSET_TOO_SMALL, 0),  # offset < minOffset (0)
        (0, GetMessageStatus.FOUND, min(32, 64)),
    ]
    for offset, status, next_begin in cases:
        with store.get_message("g", topic, qid, offset, 32) as r:
            assert (r.status, r.next_begin_offset, r.max_offset) == (status, next_begin, n), offset
    for t, q in [(topic, 7), ("NoSuchTopic", 0), ("../x", 0), (topic, -1)]:
        with store.get_message("g", t, q, 3, 32) as r:
            assert (r.status, r.next_begin_offset, r.message_count) == (GetMessageStatus.NO_MESSAGE_IN_QUEUE, 0, 0)
    assert not (written.root / "consumequeue" / topic / "7").exists()
    assert not (written.root / "consumequeue" / "NoSuchTopic").exists()



def test_a_queue_the_store_lacks_answers_as_rocketmq(written: Written) -> None:
    """4.9.8's DefaultMessageStore creates an empty queue on each lookup and answers from it:
    min and max offset 0, offset by time 0, CommitLog offset of a unit 0, store times -1.
    rmqlab gives the same answers without creating a queue (or a directory)."""
    store = written.store
    for topic, qid in (("NoSuchTopic", 0), (next(iter(written.model.queues()))[0], 7)):
        got = (store.get_min_offset_in_queue(topic, qid), store.get_max_offset_in_queue(topic, qid),
               store.get_offset_in_queue_by_time(topic, qid, 1), store.get_commit_log_offset_in_queue(topic, qid, 0),
               store.get_message_store_timestamp(topic, qid, 0), store.get_earliest_message_time(topic, qid))
        assert got == (0, 0, 0, 0, -1, -1), (topic, qid)
    assert not (written.root / "consumequeue" / "NoSuchTopic").exists()

def test_tag_filter_returns_only_those_tags(written: Written) -> None:
    store, model = written.store, written.model
    wanted_tags = {"TagA", "TagB"}
    for topic, qid in model.queues():
        want = [a for a in model.queue(topic, qid) if a.msg.tags in wanted_tags]
        offset, got = 0, []
        max_offset = len(model.queue(topic, qid))
        while offset < max_offset:
            with store.get_message("g", topic, qid, offset, 16, TagFilter("TagA || TagB")) as r:
                assert r.status in (GetMessageStatus.FOUND, GetMessageStatus.NO_MATCHED_MESSAGE)
                assert r.next_begin_offset > offset
                got.extend((sm.queue_offset, sm.tags) for sm in r.messages)
                offset = r.next_begin_offset
        assert got == [(a.queue_offset, a.msg.tags) for a in want]


def _index_items(model: Model) -> dict[int, list[tuple[int, str, str]]]:
    """Key hash -> (offset, topic, key) of every index item the dispatcher wrote, oldest first
    (client-set uniq keys and KEYS tokens; broker-made uniq keys are random and left out)."""
    items: dict[int, list[tuple[int, str, str]]] = defaultdict(list)
    for a in sorted(model.acked, key=lambda a: a.wrote_offset):
        for k in [*([a.msg.uniq_key] if a.msg.uniq_key else []), *a.msg.keys]:
            items[index_key_hash(f"{a.msg.topic}#{k}")].append((a.wrote_offset, a.msg.topic, k))
    return items


def test_query_message_by_key(written: Written) -> None:
    store, model = written.store, written.model
    items = _index_items(model)
    keys_at = {a.wrote_offset: list(a.msg.keys) for a in model.acked}
    capped = collided = 0
    for topic in TOPICS:
        for key in KEY_POOL:
            chain = items[index_key_hash(f"{topic}#{key}")]  # what the hash-only index holds
            assert any(t == topic and k == key for _, t, k in chain)
            for max_num, cap in ((1000, 64), (32, 32), (5, 5)):  # maxMsgsNumBatch caps at 64
                newest = chain[-cap:]  # the chain walk is newest first; the store sorts
                r = store.query_message(topic, key, max_num)
                assert r.phy_offsets == sorted(o for o, _, _ in newest), (topic, key, max_num)
                right = sorted(o for o, t, k in newest if t == topic and key in keys_at[o])
                assert [m.commit_log_offset for m in r.messages] == right
                assert all(key in m.keys and m.topic == topic for m in r.messages)
                assert r.collisions_discarded == len(newest) - len(right)
                capped += len(chain) > cap
                collided += r.collisions_discarded > 0
        assert store.query_message(topic, "no-such-key").phy_offsets == []
    assert capped > 0
    assert collided > 0
    # uniq keys: client-set ones from the model, broker-made ones read back
    for a in model.acked[::37]:
        uniq = a.msg.uniq_key or store.look_message_by_offset(a.wrote_offset).uniq_key
        r = store.query_message(a.msg.topic, uniq)
        assert r.phy_offsets == [a.wrote_offset]
        assert r.messages[0].uniq_key == uniq


def test_look_message_by_offset(written: Written) -> None:
    store = written.store
    for a in written.model.acked:
        rec = store.look_message_by_offset(a.wrote_offset)
        assert rec is not None
        check_record(rec, a)
        assert store.look_message_by_offset(a.wrote_offset, a.size) == rec
    assert store.look_message_by_offset(store.get_max_phy_offset() + 10**6) is None


def _reference_offset_by_time_498(files: list[tuple[int, int, list[int]]], ts: int) -> int:
    """Spec §3.5, 4.9.8, written out again: ``files`` = (first queue offset, mtime ms, unit
    store times); min logic offset and CommitLog min are 0 here (nothing deleted)."""
    first, _, times = next((f for f in files if f[1] >= ts), files[-1])
    low, high = 0, (len(times) - 1) * 20
    target = left = right = -1
    left_val = right_val = -1
    while high >= low:
        mid = (low + high) // 40 * 20
        t = times[mid // 20]
        if t == ts:
            target = mid
            break
        if t > ts:
            high, right, right_val = mid - 20, mid, t
        else:
            low, left, left_val = mid + 20, mid, t
    if target != -1:
        pos = target
    elif left_val == -1:
        pos = right
    elif right_val == -1:
        pos = left
    else:
        pos = right if abs(ts - left_val) > abs(ts - right_val) else left
    return first + pos // 20


def test_offset_in_queue_by_time(written: Written) -> None:
    store, model = written.store, written.model
    store.flush()  # nothing left to write back, so the mtimes set below stay put
    per_file = written.config.consume_queue_file_size // 20
    rng = random.Random(7)
    for topic, qid in model.queues():
        times = [a.store_timestamp for a in model.queue(topic, qid)]
        files = []
        for k in range(0, len(times), per_file):
            chunk = times[k : k + per_file]
            # A real broker's CQ file mtime is about the store time of its last unit.
            path = written.root / "consumequeue" / topic / str(qid) / f"{k * 20:020d}"
            os.utime(path, ns=(chunk[-1] * 1_000_000, chunk[-1] * 1_000_000))
            files.append((k, chunk[-1], chunk))
        probes = {times[0] - 10_000, times[-1] + 10_000, times[0], times[-1]}
        for j in rng.sample(range(len(times) - 1), 40):
            probes |= {times[j], times[j] + 1, times[j] - 1, (times[j] + times[j + 1]) // 2}
        for ts in sorted(probes):
            got = store.get_offset_in_queue_by_time(topic, qid, ts)
            assert got == _reference_offset_by_time_498(files, ts), (topic, qid, ts)
            if ts in times:  # an exact hit returns a unit with that very store time
                assert times[got] == ts
        assert store.get_offset_in_queue_by_time(topic, qid, times[0] - 10_000) == 0
        assert store.get_offset_in_queue_by_time(topic, qid, times[-1] + 10_000) == len(times) - 1


# ------------------------------------------------------------------------------------------ reopen
@pytest.mark.parametrize("threaded", [False, True], ids=["stepped", "threaded"])
def test_reopen_restores_topic_queue_table(tmp_path: Path, threaded: bool) -> None:
    root = tmp_path / "store"
    config = MessageStoreConfig.small(str(root))
    clock = ManualClock()
    model = Model()
    store = MessageStore.open(root, config, clock=clock, threaded=threaded)
    write_workload(store, clock, 400, seed=1, model=model)
    store.shutdown()
    store = MessageStore.open(root, config, clock=clock, threaded=threaded)
    try:
        before = {q: len(model.queue(*q)) for q in model.queues()}
        assert {f"{t}-{q}": n for (t, q), n in before.items()} == store.commit_log.topic_queue_table
        write_workload(store, clock, 200, seed=2, model=model)
        for topic, qid in model.queues():
            want = model.queue(topic, qid)
            assert [a.queue_offset for a in want] == list(range(len(want)))
            with store.get_message("g", topic, qid, before.get((topic, qid), 0), 64) as r:
                assert [sm.commit_log_offset for sm in r.messages] == [
                    a.wrote_offset for a in want[before.get((topic, qid), 0) :][: r.message_count]
                ]
    finally:
        store.shutdown()


def test_concurrent_producers_get_dense_queue_offsets(tmp_path: Path) -> None:
    import threading

    root = tmp_path / "store"
    store = MessageStore.open(root, MessageStoreConfig.small(str(root)), threaded=True)
    results: list[tuple[int, int, int]] = []
    lock = threading.Lock()

    def produce(t: int) -> None:
        for i in range(150):
            r = store.put_message(Message("TopicA", bytes([t]) * (1 + i * 7 % 900), queue_id=i % 2, keys=[f"p{t}-{i}"]))
            assert r.ok
            with lock:
                results.append((i % 2, r.queue_offset, r.wrote_offset))

    threads = [threading.Thread(target=produce, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    try:
        assert store.wait_dispatched()
        for qid in (0, 1):
            mine = sorted((qo, wo) for q, qo, wo in results if q == qid)
            assert [qo for qo, _ in mine] == list(range(300))
            assert [wo for _, wo in mine] == sorted(wo for _, wo in mine)  # queue order == log order
            cq = store.consume_queue_store.find_consume_queue("TopicA", qid)
            assert [cq.get_unit(qo)[0] for qo, _ in mine] == [wo for _, wo in mine]
        assert len(store.query_message("TopicA", "p3-149").messages) == 1
    finally:
        store.shutdown()


# ------------------------------------------------------------------------------------------ batches
@pytest.fixture
def small_store(tmp_path: Path) -> MessageStore:
    root = tmp_path / "store"
    store = MessageStore.open(
        root, MessageStoreConfig.small(str(root), max_message_size=8192), clock=ManualClock(), threaded=False
    )
    yield store
    store.shutdown()


def _fixed(i: int, body_len: int, topic: str = "T") -> Message:
    return Message(topic, b"b" * body_len, queue_id=0, uniq_key=f"{i:032X}", born_host=("10.0.0.1", 1))


def test_put_messages_batch(small_store: MessageStore) -> None:
    small_store.put_message(_fixed(0, 10))
    msgs = [_fixed(i, 100 * i) for i in range(1, 5)]
    r = small_store.put_messages(msgs)
    assert r.ok
    assert r.queue_offset == 1
    assert r.append_result.msg_num == 4
    acked = _ack_batch(r, msgs)
    assert next(a.wrote_offset for a in acked) == r.wrote_offset
    for a, b in itertools.pairwise(acked):
        assert b.wrote_offset == a.wrote_offset + a.size
    small_store.wait_dispatched()
    for a in acked:
        rec = small_store.look_message_by_offset(a.wrote_offset)
        assert rec.store_timestamp == r.store_timestamp
        assert rec.queue_offset == a.queue_offset
        assert rec.body == a.msg.body
    assert small_store.get_max_offset_in_queue("T", 0) == 5


def _fill_until_left(store: MessageStore, left_at_least: int, left_at_most: int) -> int:
    """Put filler until the current CommitLog file has a free tail in the given range."""
    size = store.config.mapped_file_size_commit_log
    i = 1000
    while True:
        free = size - store.get_max_phy_offset() % size
        if left_at_least <= free <= left_at_most:
            return free
        # Aim for the middle of the range; when below it, a big record rolls to a fresh file.
        target = (left_at_least + left_at_most) // 2
        body = 3000 if free < left_at_least else max(1, min(3000, free - target - _record_size(store, 0)))
        assert store.put_message(_fixed(i, body, "Filler")).ok
        i += 1
        assert i < 1100, "filler did not converge"


def _blank_at(store: MessageStore, offset: int) -> tuple[int, int]:
    size = store.config.mapped_file_size_commit_log
    sel = store.commit_log.get_message(offset, 8)
    assert sel is not None
    assert offset % size + 8 <= size
    with sel:
        return int.from_bytes(sel.buffer[0:4], "big", signed=True), int.from_bytes(sel.buffer[4:8], "big", signed=True)


def test_batch_that_does_not_fit_moves_wholly_to_the_next_file(small_store: MessageStore) -> None:
    size = small_store.config.mapped_file_size_commit_log
    free = _fill_until_left(small_store, 1500, 2500)
    start = small_store.get_max_phy_offset()
    # First message alone would fit, the whole batch does not.
    msgs = [_fixed(1, 800), _fixed(2, 800), _fixed(3, 800)]
    r = small_store.put_messages(msgs)
    assert r.ok
    assert r.wrote_offset == start + free
    assert r.wrote_offset % size == 0
    assert _blank_at(small_store, start) == (free, BLANK_MAGIC_CODE)
    small_store.wait_dispatched()
    assert all(a.wrote_offset // size == r.wrote_offset // size for a in _ack_batch(r, msgs))


def test_batch_body_over_max_message_size_is_refused(small_store: MessageStore) -> None:
    before = small_store.get_max_phy_offset()
    r = small_store.put_messages([_fixed(i, 3000) for i in range(3)])  # each fits, 9000+ > 8192
    assert r.status is PutMessageStatus.MESSAGE_ILLEGAL
    assert "max_message_size" in r.reason
    assert small_store.get_max_phy_offset() == before


def _record_size(store: MessageStore, body_len: int) -> int:
    # Same shape every time (fixed uniq key length, host, no tags/keys): size = overhead + body.
    probe = store.commit_log.encode_record(_fixed(0, body_len), 0)
    return len(probe.data)


@pytest.mark.parametrize("extra", [0, 1], ids=["leaves-exactly-8", "one-byte-more"])
def test_end_of_file_blank_rule(small_store: MessageStore, extra: int) -> None:
    size = small_store.config.mapped_file_size_commit_log
    free = _fill_until_left(small_store, 3000, 4000)
    overhead = _record_size(small_store, 0)
    body = free - 8 - overhead + extra  # record length L: L + 8 == free (fits) or free + 1 (not)
    start = small_store.get_max_phy_offset()
    r = small_store.put_message(_fixed(1, body))
    assert r.ok
    assert r.wrote_bytes == overhead + body
    if extra == 0:  # golden #22: a record may end with exactly 8 bytes left in the file
        assert r.wrote_offset == start
        nxt = small_store.put_message(_fixed(2, 10))
        assert nxt.wrote_offset == start + free
        assert _blank_at(small_store, start + r.wrote_bytes) == (8, BLANK_MAGIC_CODE)
    else:
        assert r.wrote_offset == start + free
        assert r.wrote_offset % size == 0
        assert _blank_at(small_store, start) == (free, BLANK_MAGIC_CODE)
    small_store.wait_dispatched()
    assert small_store.look_message_by_offset(r.wrote_offset).body == b"b" * body


# ------------------------------------------------------------------------------------------ collision
def test_index_hash_collision_keeps_only_the_right_message(small_store: MessageStore) -> None:
    assert java_hash("T#xAa") == java_hash("T#xBB")
    r1 = small_store.put_message(Message("T", b"1", keys=["xAa"]))
    r2 = small_store.put_message(Message("T", b"2", keys=["xBB"]))
    small_store.wait_dispatched()
    q = small_store.query_message("T", "xAa")
    assert q.phy_offsets == [r1.wrote_offset, r2.wrote_offset]  # RocketMQ's store answer
    assert [m.commit_log_offset for m in q.messages] == [r1.wrote_offset]
    assert q.collisions_discarded == 1


# ------------------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize(("version", "status"), [("4.9.8", "MESSAGE_ILLEGAL"), ("5.3.3", "PROPERTIES_SIZE_EXCEEDED")])
def test_properties_longer_than_a_short(tmp_path: Path, version: str, status: str) -> None:
    root = tmp_path / "store"
    with MessageStore.open(root, MessageStoreConfig.small(str(root), rocketmq_version=version),
                           threaded=False) as store:
        assert store.put_message(Message("T", b"x", properties={"big": "v" * 33000})).status.name == status
        assert store.put_message(Message("T", b"x", properties={"big": "v" * 32000})).ok


def test_bad_input_is_refused_and_creates_nothing(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = MessageStore.open(root, MessageStoreConfig.small(str(root), max_message_size=1024), threaded=False)
    try:
        r = store.put_message(Message("T", b"x" * 1025))
        assert r.status is PutMessageStatus.MESSAGE_ILLEGAL
        assert "1025" in r.reason
        # 4.9.8: DefaultMessageStore.checkMessage counts the string's Java chars first (MESSAGE_ILLEGAL),
        # then the encoder its UTF-8 bytes (PROPERTIES_SIZE_EXCEEDED)
        r = store.put_message(Message("T", b"x", properties={"big": "v" * 33000}))
        assert r.status is PutMessageStatus.MESSAGE_ILLEGAL
        assert "33" in r.reason
        assert "chars" in r.reason
        r = store.put_message(Message("T", b"x", properties={"big": "\u00e9" * 17000}))  # 17k chars, 34k bytes
        assert r.status is PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
        for topic in ["", "../x", "a/b", "x" * 128, "a b", "..", "/abs"]:
            r = store.put_message(Message(topic, b"x"))
            assert r.status is PutMessageStatus.MESSAGE_ILLEGAL, topic
            assert r.reason, topic
        r = store.put_message(Message("T", b"x", queue_id=-1))
        assert r.status is PutMessageStatus.MESSAGE_ILLEGAL
        assert store.get_max_phy_offset() == 0
        store.wait_dispatched()
        assert sorted(os.listdir(tmp_path)) == ["store"]
        assert not (root / "consumequeue").exists() or os.listdir(root / "consumequeue") == []
        assert store.put_message(Message("T", b"ok")).ok
    finally:
        store.shutdown()
    r = store.put_message(Message("T", b"late"))
    assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE


def test_second_open_is_refused_in_process_and_from_a_subprocess(tmp_path: Path) -> None:
    root = tmp_path / "store"
    config = MessageStoreConfig.small(str(root))
    store = MessageStore.open(root, config, threaded=False)
    code = textwrap.dedent(f"""
        from rmqlab.config import MessageStoreConfig
        from rmqlab.store.message_store import MessageStore
        try:
            MessageStore.open({str(root)!r}, MessageStoreConfig.small({str(root)!r}), threaded=False).shutdown()
            print("OPENED")
        except Exception as e:
            print(type(e).__name__)
    """)

    def other_process() -> str:
        return subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
        ).stdout.strip()

    try:
        assert store.put_message(Message("T", b"x")).ok
        with pytest.raises(StoreLocked):
            MessageStore.open(root, config, threaded=False)
        # The refused in-process open must not have dropped the POSIX lock (regression).
        assert other_process() == "StoreLocked"
        assert store.put_message(Message("T", b"y")).ok
    finally:
        store.shutdown()
    assert other_process() == "OPENED"


def test_opening_a_file_is_not_a_store(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_bytes(b"hello")
    with pytest.raises(NotAStore):
        MessageStore.open(f, threaded=False)
    assert f.read_bytes() == b"hello"


def test_a_store_of_other_file_sizes_says_which_config_opens_it(tmp_path: Path) -> None:
    root = tmp_path / "s"
    small = MessageStoreConfig(mapped_file_size_commit_log=4096, mapped_file_size_consume_queue=20 * 8)
    with MessageStore.open(root, small, threaded=False) as store:
        for i in range(40):  # ~8 commit log files, several consume queue files
            assert store.put_message(Message("T", b"x" * 100, keys=[f"k{i}"])).ok
        store.step()
    with pytest.raises(NotAStore, match=r"MessageStoreConfig\(mapped_file_size_commit_log=4096\)"):
        MessageStore.open(root, threaded=False)
    wrong_cq = small.with_(mapped_file_size_consume_queue=20 * 16)
    with pytest.raises(NotAStore, match=r"MessageStoreConfig\(mapped_file_size_consume_queue=160\)"):
        MessageStore.open(root, wrong_cq, threaded=False)
    with MessageStore.open(root, small, threaded=False) as store:  # the refusals left it as it was
        assert store.get_max_offset_in_queue("T", 0) == 40


# ------------------------------------------------------------------------------------------ default sizes
def _sparse_supported(d: Path) -> bool:
    p = d / "probe"
    with open(p, "wb") as fh:
        fh.truncate(64 * 1024 * 1024)
    try:
        return os.stat(p).st_blocks * 512 < 1024 * 1024
    finally:
        p.unlink()


def test_default_sizes_are_sparse(tmp_path: Path) -> None:
    if not _sparse_supported(tmp_path):
        pytest.skip("file system does not support sparse files")
    root = tmp_path / "store"
    clock = ManualClock()
    store = MessageStore.open(root, MessageStoreConfig(), clock=clock, threaded=False)
    acked = []
    for i in range(100):
        msg = Message("TopicD", f"body-{i}".encode(), tags="TagA", keys=[f"k{i}"], queue_id=i % 2)
        r = store.put_message(msg)
        assert r.ok
        acked.append((msg, r))
        clock.advance(10)
    store.shutdown()
    store = MessageStore.open(root, MessageStoreConfig(), clock=clock, threaded=False)
    try:
        sizes = {
            "commitlog": 1024**3,
            "consumequeue/TopicD/0": 6_000_000,
            "index": 420_000_040,
        }
        for sub, expect in sizes.items():
            for name in os.listdir(root / sub):
                st = os.stat(root / sub / name)
                assert st.st_size == expect
                assert st.st_blocks * 512 < expect // 50, (sub, name)
        for msg, r in acked:
            assert store.look_message_by_offset(r.wrote_offset).body == msg.body
            q = store.query_message("TopicD", msg.keys[0])
            assert q.phy_offsets == [r.wrote_offset]
        with store.get_message("g", "TopicD", 1, 0, 100) as g:
            assert [m.commit_log_offset for m in g.messages] == [r.wrote_offset for _, r in acked[1::2]][:32]
        assert store.get_offset_in_queue_by_time("TopicD", 0, acked[10][1].store_timestamp) == 5
    finally:
        store.shutdown()


def test_shutdown_model_defaults(tmp_path: Path) -> None:
    """Queue bookkeeping after a stepped run without explicit step(): reput still catches up."""
    root = tmp_path / "store"
    clock = ManualClock()
    store = MessageStore.open(root, MessageStoreConfig.small(str(root)), clock=clock, threaded=False)
    offsets = defaultdict(list)
    for i in range(50):
        r = store.put_message(Message("T", b"x" * i, queue_id=i % 3))
        offsets[i % 3].append(r.queue_offset)
    assert all(v == list(range(len(v))) for v in offsets.values())
    assert store.dispatch_behind_bytes() > 0
    store.shutdown()  # dispatches what is left, then removes abort
    assert not (root / "abort").exists()
    store = MessageStore.open(root, MessageStoreConfig.small(str(root)), clock=clock, threaded=False)
    try:
        assert [store.get_max_offset_in_queue("T", q) for q in range(3)] == [17, 17, 16]
    finally:
        store.shutdown()


@pytest.mark.parametrize("threaded", [False, True])
def test_clean_shutdown_with_the_pool_dispatches_its_last_commit(tmp_path: Path, threaded: bool) -> None:
    # The pool's last commit used to come after dispatch had drained: the committed tail was
    # never dispatched, so the abort file stayed and the next open ran abnormal recovery.
    root = tmp_path / "s"
    config = MessageStoreConfig.small(str(root), transient_store_pool_enable=True, transient_store_pool_size=4)
    store = MessageStore.open(str(root), config, clock=ManualClock(), threaded=threaded)
    store.put_message(Message("T", b"in the pool", keys=["k"]))  # one small record: not committed yet
    store.shutdown()
    assert not (root / "abort").exists()
    with MessageStore.open(str(root), config, clock=ManualClock(), threaded=False) as reopened:
        assert reopened.recovery_plan.mode == "normal"
        with reopened.get_message("g", "T", 0, 0, 8) as got:
            assert [m.body for m in got.messages] == [b"in the pool"]


def test_wait_dispatched_with_the_pool_waits_for_the_commit(tmp_path: Path) -> None:
    # With the transient store pool, dispatch sees committed bytes only; a few small records
    # stay in the pool until the commit service's thorough interval (200 ms). wait_dispatched()
    # used to return at once, before they were visible.
    root = tmp_path / "s"
    config = MessageStoreConfig.small(str(root), transient_store_pool_enable=True, transient_store_pool_size=4,
                                      commit_commit_log_thorough_interval=60_000)
    with MessageStore.open(str(root), config, threaded=True) as store:
        for i in range(10):
            assert store.put_message(Message("T", b"in the pool", keys=[f"k{i}"])).ok
        assert store.wait_dispatched()
        assert store.get_max_offset_in_queue("T", 0) == 10
        assert store.query_message("T", "k9").messages
