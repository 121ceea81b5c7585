"""A stepped ``MessageStore`` against a plain model, through random sequences of operations.

Hypothesis drives puts (single and batched, several topics and queues, bodies from empty to
large enough to roll 64 KiB CommitLog files), dispatch, clean reopens, simulated process kills
(every written byte kept, ``abort`` left: abnormal recovery) and expired-file cleanup, and after
each step checks what a consumer sees against a model that is only lists: per queue, the
messages put, and how many of them dispatch has made visible. ``get_message`` (status, offsets,
the messages and their fields), ``query_message`` by key, ``look_message_by_offset``, min/max
offsets of the queues and of the CommitLog must agree with it. After cleanup the model follows
RocketMQ's consume queue file deletion and ``correctMinOffset`` (both versions' rules, spec 3.4)
to the exact min offset of every queue. Small sizes (``MessageStoreConfig.small``) make
CommitLog, ConsumeQueue and index files roll every few dozen messages.

RocketMQ rules the model had to learn: one ``get_message`` call reads units from one
ConsumeQueue file only (a get near a file's end returns fewer messages); a query may return a
message twice after an abnormal recovery (see ``query``); abnormal recovery dispatches every
record before the load corrects the min offsets; and ``correctMinOffset`` looks at a queue's
first file only, so after a reopen a queue whose first kept message is in its second file
answers min offset 0 (4.9.8 and 5.3.3 alike). The transient store pool variant
(``StoreModelPool``) found that a clean shutdown committed the pool's tail after dispatch had
drained, leaving ``abort`` behind (fixed; ``test_message_store.py``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from rmqlab import Message, MessageStore, MessageStoreConfig
from rmqlab.clock import ManualClock
from rmqlab.store.results import GetMessageStatus
from rmqlab.testing.crash import simulate_process_kill

TOPICS = ("TopicA", "TopicB")
QUEUES = 3
KEYS = ("key-1", "key-2", "key-3", "key-4")
MAX_QUERY = 64  # RocketMQ caps a query at maxMsgsNumBatch (64)


@dataclass(frozen=True)
class Put:
    """What the model keeps of one acknowledged message."""

    offset: int  # commit log offset
    size: int
    body: bytes
    tags: str | None
    keys: tuple[str, ...]


bodies = st.one_of(st.binary(max_size=64), st.integers(0, 6000).map(lambda n: bytes([n % 251]) * n))
messages = st.tuples(st.sampled_from(TOPICS), st.integers(0, QUEUES - 1), bodies,
                     st.sampled_from([None, "TagA", "TagB"]), st.lists(st.sampled_from(KEYS), max_size=2, unique=True))


class StoreModel(RuleBasedStateMachine):
    VERSION = "4.9.8"
    CHANGES: ClassVar[Mapping[str, object]] = {}  # MessageStoreConfig changes of a variant

    def __init__(self) -> None:
        super().__init__()
        self.root = tempfile.mkdtemp(prefix="rmqlab-model-")
        self.config = MessageStoreConfig.small(self.root, rocketmq_version=self.VERSION, **self.CHANGES)
        self.clock = ManualClock()
        self.store = MessageStore.open(self.root, self.config, clock=self.clock, threaded=False)
        self.queues: dict[tuple[str, int], list[Put]] = {}
        self.visible: dict[tuple[str, int], int] = {}  # messages of each queue dispatch has made visible
        self.end = 0  # the CommitLog's max offset
        self.units_per_file = self.config.mapped_file_size_consume_queue // 20
        self.kills = 0
        self.min_phy = 0  # the CommitLog's min offset: cleanup moves it
        self.min_q: dict[tuple[str, int], int] = {}  # each queue's min offset, as RocketMQ keeps it
        self.corrected_at = 0  # the CleanConsumeQueueService's lastPhysicalMinOffset
        self.cq_first: dict[tuple[str, int], int] = {}  # each queue's first file (files are not deleted on load)

    def teardown(self) -> None:
        self.store.shutdown()
        shutil.rmtree(self.root, ignore_errors=True)

    # ------------------------------------------------------------------ changes
    def _acked(self, topic: str, queue_id: int, result: object, msgs: list[Message]) -> None:
        assert result.ok, result  # type: ignore[attr-defined]
        q = self.queues.setdefault((topic, queue_id), [])
        assert result.append_result.logics_offset == len(q)  # type: ignore[attr-defined]
        offset = result.wrote_offset  # type: ignore[attr-defined]
        size, rest = divmod(result.wrote_bytes, len(msgs))  # type: ignore[attr-defined]
        assert rest == 0  # a batch's records are all the same size (see put_batch)
        for m in msgs:
            q.append(Put(offset, size, m.body, m.tags, tuple(m.keys)))
            offset += size
        self.end = offset
        self.clock.advance(7)

    @rule(msg=messages)
    def put(self, msg: tuple) -> None:
        topic, queue_id, body, tags, keys = msg
        m = Message(topic, body, tags=tags, keys=keys, queue_id=queue_id)
        self._acked(topic, queue_id, self.store.put_message(m), [m])

    @rule(msg=messages, n=st.integers(1, 12))
    def put_batch(self, msg: tuple, n: int) -> None:
        topic, queue_id, body, tags, keys = msg
        # records of one size: the same body length, tags, keys and UNIQ_KEY length
        batch = [Message(topic, body[: 2000] + bytes([i]), tags=tags, keys=keys, queue_id=queue_id) for i in range(n)]
        self._acked(topic, queue_id, self.store.put_messages(batch), batch)

    def _check_max_phy_offset(self) -> None:
        assert self.store.get_max_phy_offset() == self.end

    @rule()
    def dispatch(self) -> None:
        assert self.store.wait_dispatched()
        self.visible = {k: len(v) for k, v in self.queues.items()}

    @rule()
    def step(self) -> None:
        self.store.step()  # one round of every service: dispatch may or may not catch up
        self._dispatched()
        self._cleaned()

    def _dispatched(self) -> None:
        """The messages dispatch has passed are visible (it may stop short of what readers see:
        a step's reput runs before its commit)."""
        upto = self.store.get_max_phy_offset() - self.store.dispatch_behind_bytes()
        counts = {k: sum(p.offset + p.size <= upto for p in q) for k, q in self.queues.items()}
        self.visible = {k: n for k, n in counts.items() if n}  # a queue with none has no consume queue yet

    def _cleaned(self) -> None:
        """A step ran the CleanConsumeQueueService (after the reput): once the CommitLog's min
        offset passed the last one it saw, it deleted each queue's leading files that point only
        below it (never the last file), then corrected every queue's min offset."""
        if self.min_phy <= self.corrected_at:
            return
        self.corrected_at = self.min_phy
        units = {k: self.store.get_max_offset_in_queue(*k) for k in self.queues}
        per = self.units_per_file
        for key, n in units.items():
            first, last = self.cq_first.get(key, 0), max(n - 1, 0) // per
            while first < last and self.queues[key][first * per + per - 1].offset < self.min_phy:
                first += 1
            self.cq_first[key] = first
        self._correct_min_offsets(units)

    def _correct_min_offsets(self, units: dict[tuple[str, int], int]) -> None:
        """``correctMinOffset(minPhy)`` of each queue holding ``units[queue]`` units (spec 3.4).

        Both versions look in the queue's first file only: 4.9.8 moves the min offset to its
        first unit at or past the min offset, if any. 5.3.3 first moves it past the end when the
        queue's last unit points below, else searches the first file from the min offset (from
        the file's start when the min offset is before it), leaving it where it is when that unit
        still points at or past the min offset or no unit there does."""
        per = self.units_per_file
        for key, n in units.items():
            model = self.queues[key]
            low = self.cq_first.get(key, 0) * per  # the first file's first unit
            high = min(n, low + per)
            at = self.min_q.get(key, 0)
            if self.VERSION != "4.9.8":
                if at >= n:
                    continue
                if model[n - 1].offset < self.min_phy:
                    self.min_q[key] = n
                    continue
                low = max(low, at)
            first = next((i for i in range(low, high) if model[i].offset >= self.min_phy), None)
            if first is not None:
                self.min_q[key] = first

    def _reopen(self, units: dict[tuple[str, int], int]) -> None:
        """Open again; the queues held ``units`` units when the load corrected their min offsets."""
        self.store = MessageStore.open(self.root, self.config, clock=self.clock, threaded=False)
        self.min_q = {}  # a loaded queue starts at 0, then recoverTopicQueueTable corrects it
        self._correct_min_offsets(units)
        self.corrected_at = 0  # a new CleanConsumeQueueService
        assert self.store.get_max_phy_offset() == self.end  # nothing acknowledged (and kept) is lost
        self.dispatch()

    @rule()
    def reopen(self) -> None:
        self.store.shutdown()  # dispatches what is left first
        self._reopen({k: len(v) for k, v in self.queues.items()})
        assert self.store.recovery_plan.mode == ("normal" if self.end else "empty")

    @rule()
    def kill(self) -> None:
        simulate_process_kill(self.store)
        self.kills += 1
        self.store.shutdown()  # a no-op on an abandoned store
        # abnormal recovery dispatches every record it walks before the min offsets are corrected
        self._reopen({k: len(v) for k, v in self.queues.items()})
        assert self.store.recovery_plan.mode == ("abnormal" if self.end else "empty")

    @rule(keep=st.integers(1, 4))
    def cleanup(self, keep: int) -> None:
        """Age all CommitLog files but the newest ``keep`` past ``file_reserved_time`` and run
        a manual delete round: RocketMQ deletes them (never the newest), then the consume queue
        and index files that only point below the new min offset."""
        self.dispatch()
        old = (self.clock.now_ms() - 100 * 3_600_000) / 1000
        for mf in self.store.commit_log.mapped_file_queue.mapped_files[:-keep]:
            os.utime(mf.file_name, (old, old))
        self.store.execute_delete_files_manually()
        self.store.step()
        files = self.store.commit_log.mapped_file_queue.mapped_files
        assert len(files) >= min(keep, len(files))
        self.min_phy = self.store.get_min_phy_offset() if self.end else 0
        assert self.min_phy == (files[0].file_from_offset if files else 0)
        self._cleaned()

    def _first_kept(self, model: list[Put]) -> int:
        """Queue offset of the queue's first message that cleanup kept (len: none kept)."""
        return next((i for i, p in enumerate(model) if p.offset >= self.min_phy), len(model))

    # ------------------------------------------------------------------ reads
    @rule(topic=st.sampled_from(TOPICS), queue_id=st.integers(0, QUEUES - 1), offset=st.integers(0, 200),
          n=st.integers(1, 32))
    def get(self, topic: str, queue_id: int, offset: int, n: int) -> None:
        model = self.queues.get((topic, queue_id), [])
        visible = self.visible.get((topic, queue_id), 0)
        first = self._first_kept(model)
        offset = min(first + offset, visible + 1)  # mostly inside the queue, sometimes at or past its end
        with self.store.get_message("g", topic, queue_id, offset, n) as got:
            assert (got.min_offset, got.max_offset) == (self.min_q.get((topic, queue_id), 0), visible)
            if visible == 0:
                assert got.status is GetMessageStatus.NO_MESSAGE_IN_QUEUE
            elif offset == visible:
                assert got.status is GetMessageStatus.OFFSET_OVERFLOW_ONE
            elif offset > visible:
                assert got.status is GetMessageStatus.OFFSET_OVERFLOW_BADLY
            else:
                # one call reads units from one ConsumeQueue file only (RocketMQ's getIndexBuffer)
                file_end = (offset // self.units_per_file + 1) * self.units_per_file
                want = model[offset : min(visible, offset + n, file_end)]
                assert got.status is GetMessageStatus.FOUND
                assert got.next_begin_offset == offset + len(want)
                assert [m.commit_log_offset for m in got.messages] == [p.offset for p in want]
                for m, p in zip(got.messages, want, strict=True):
                    rec = m.decode()
                    assert (rec.topic, rec.queue_id, rec.body, rec.tags, tuple(rec.keys)) == (
                        topic, queue_id, p.body, p.tags, p.keys)
                    assert rec.queue_offset == model.index(p)

    @precondition(lambda self: self.min_phy > 0)
    @rule(topic=st.sampled_from(TOPICS), queue_id=st.integers(0, QUEUES - 1), back=st.integers(1, 80))
    def get_removed(self, topic: str, queue_id: int, back: int) -> None:
        """Below the first kept message: never a removed message's bytes, and what RocketMQ says
        there (too small, or the next offset to pull from)."""
        model = self.queues.get((topic, queue_id), [])
        offset = max(0, self._first_kept(model) - back)
        with self.store.get_message("g", topic, queue_id, offset, 32) as got:
            assert all(m.commit_log_offset >= self.min_phy for m in got.messages)
            for m in got.messages:
                p = model[m.decode().queue_offset]
                assert (m.commit_log_offset, m.decode().body) == (p.offset, p.body)
            low = self.min_q.get((topic, queue_id), 0)
            if offset < low:
                assert got.status is GetMessageStatus.OFFSET_TOO_SMALL
                assert got.next_begin_offset == low

    @rule(topic=st.sampled_from(TOPICS), key=st.sampled_from(KEYS))
    def query(self, topic: str, key: str) -> None:
        self.dispatch()  # the index holds what dispatch has indexed
        want = {p.offset for (t, _), q in self.queues.items() if t == topic for p in q
                if key in p.keys and p.offset >= self.min_phy}
        got = [m.commit_log_offset for m in self.store.query_message(topic, key, MAX_QUERY).messages]
        # A message may come twice: after an abnormal recovery, re-dispatch indexes again the
        # message at the last index file's endPhyOffset (RocketMQ skips offsets *below* it), and
        # when that file is full its keys go into the next file a second time.
        # At most one such message per kill, so all of them fit under the cap while
        # len(want) + kills <= MAX_QUERY.
        assert len(got) - len(set(got)) <= self.kills
        if len(want) + self.kills <= MAX_QUERY:
            assert set(got) == want
        else:
            assert set(got) <= want
            assert len(got) == MAX_QUERY or set(got) == want

    @invariant()
    def offsets(self) -> None:
        self._check_max_phy_offset()
        # -1: no file yet (a kill that lost every record leaves an empty first file: 0)
        assert self.store.get_min_phy_offset() in ((self.min_phy,) if self.end else (-1, 0))
        for (topic, queue_id), visible in self.visible.items():
            assert self.store.get_max_offset_in_queue(topic, queue_id) == visible
            assert self.store.get_min_offset_in_queue(topic, queue_id) == self.min_q.get((topic, queue_id), 0)

    @precondition(lambda self: any(self.queues.values()))
    @rule(data=st.data())
    def look(self, data: st.DataObject) -> None:
        q = data.draw(st.sampled_from([q for q in self.queues.values() if q]))
        p = data.draw(st.sampled_from(q))
        self.dispatch()  # readable (the pool variant commits first)
        rec = self.store.look_message_by_offset(p.offset)
        if p.offset < self.min_phy:
            assert rec is None  # its file was deleted
            return
        assert rec is not None
        assert (rec.body, rec.store_size) == (p.body, p.size)


class StoreModel5(StoreModel):
    VERSION = "5.3.3"  # other recovery rules (start file, 5.x normal recovery's re-dispatch)


class StoreModelSync(StoreModel):
    """SYNC_FLUSH: every put returns once its record is flushed (group commit, stepped)."""

    CHANGES: ClassVar[Mapping[str, object]] = {"flush_disk_type": "SYNC_FLUSH"}

    def _acked(self, topic: str, queue_id: int, result: object, msgs: list[Message]) -> None:
        super()._acked(topic, queue_id, result, msgs)
        assert self.store.commit_log.mapped_file_queue.flushed_where >= self.end  # on disk when acked


class StoreModelPool(StoreModel):
    """Writes go to the transient store pool and reach the file when the commit service commits
    them (at least 4 pages, or every 200 ms of the store's clock): readers and dispatch see the
    committed part only, and a process kill loses what the pool held and had not committed. Files
    loaded at open are written in place (RocketMQ maps them without a pool buffer).
    ``message_index_safe``: with RocketMQ's default (false), recovery after a crash may start
    past messages whose index file it deletes (a file not yet full is rebuilt from what recovery
    re-dispatches only, spec 4.5), so their keys are lost for good; the model would see it."""

    CHANGES: ClassVar[Mapping[str, object]] = {
        "transient_store_pool_enable": True, "transient_store_pool_size": 4, "message_index_safe": True}

    def _readable_end(self) -> int:
        return self.store.commit_log.mapped_file_queue.committed_where

    def _check_max_phy_offset(self) -> None:
        # readers see a file the pool writes up to its commit, a file loaded at open (written in
        # place, RocketMQ maps loaded files without a pool buffer) up to its end
        assert self._readable_end() <= self.store.get_max_phy_offset() <= self.end

    def dispatch(self) -> None:
        for _ in range(1000):  # service rounds 250 ms of the clock apart, until all is committed
            self.clock.advance(250)
            self.store.step()
            if self.store.dispatch_behind_bytes() == 0 and self._readable_end() >= self.end:
                break
        assert self._readable_end() == self.end
        self._dispatched()
        self._cleaned()

    direct_end = 0  # files loaded at open have no pool buffer: writes below this go to the mapping

    def _reopen(self, units: dict[tuple[str, int], int]) -> None:
        super()._reopen(units)
        files = self.store.commit_log.mapped_file_queue.mapped_files
        self.direct_end = files[-1].file_from_offset + files[-1].file_size if files else 0

    def kill(self) -> None:
        kept = max(self._readable_end(), min(self.end, self.direct_end))
        simulate_process_kill(self.store)
        self.kills += 1
        self.store.shutdown()
        # What the pool held and had not committed is gone; what went straight to a mapping
        # (a file loaded at the last open) stays. Whole messages up to `kept` remain.
        self.queues = {k: [p for p in q if p.offset + p.size <= kept] for k, q in self.queues.items()}
        last = max((p for q in self.queues.values() for p in q), key=lambda p: p.offset, default=None)
        self.end = last.offset + last.size if last else 0
        size = self.config.mapped_file_size_commit_log
        if last is not None and last.offset - last.offset % size + size <= kept:
            self.end = last.offset - last.offset % size + size  # the blank that ended its file stays
        self._reopen({k: len(v) for k, v in self.queues.items()})


_SETTINGS = settings(max_examples=120, stateful_step_count=100, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
TestStoreModel = StoreModel.TestCase
TestStoreModel.settings = _SETTINGS
TestStoreModel5 = StoreModel5.TestCase
TestStoreModel5.settings = _SETTINGS
TestStoreModelPool = StoreModelPool.TestCase
TestStoreModelPool.settings = _SETTINGS
TestStoreModelSync = StoreModelSync.TestCase
TestStoreModelSync.settings = settings(_SETTINGS, max_examples=60)
