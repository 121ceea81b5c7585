"""BatchConsumeQueue under random sequences of operations, against a model of RocketMQ's fields.

Puts, duplicate re-puts, reopen (load + recover), truncation to a commit log end, min offset
correction and expired-file deletion, in any order; after each step every answer is compared
with :class:`FieldModel`, which keeps RocketMQ's fields (``minOffsetInQueue``, ``maxOffsetInQueue``,
``maxMsgPhyOffsetInCommitLog``) and revises them where RocketMQ does, over plain lists of units.
"""

from __future__ import annotations

import bisect
import os
from itertools import takewhile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqlab.store.batch_consume_queue import LOWER, UPPER, BatchConsumeQueue
from tests.store.test_batch_consume_queue import FILE, PER_FILE, UNIT, Model, U, make_units

STREAM = make_units(400, batches=[1, 3, 1, 40, 2, 7], time_steps=[0, 1, 0, 3, 1], phy_gaps=[0, 0, 13])


class FieldModel:
    """RocketMQ's fields over plain lists. ``disk`` holds each file's units as written (truncation
    moves positions, it does not zero bytes: a reopen walks the bytes and finds them again,
    as RocketMQ's recovery does); ``pos`` is each file's position in units."""

    def __init__(self) -> None:
        self.disk: list[list[U]] = []
        self.pos: list[int] = []
        self.first_created = False  # the first file was created (not loaded) in this session
        self.min = -1
        self.max = 0
        self.max_phy = -1

    @property
    def files(self) -> list[list[U]]:
        return [d[:p] for d, p in zip(self.disk, self.pos, strict=True)]

    @property
    def units(self) -> list[U]:
        return [u for f in self.files for u in f]

    def revise_min(self) -> None:
        if not self.disk:
            self.max, self.min = 0, -1
            return
        self.min = self.disk[0][0].base if self.pos[0] else -1

    def revise_max(self) -> None:
        files = self.files
        last = files[-1][-1] if files and files[-1] else None
        if last is None and len(files) >= 2 and files[-2]:
            last = files[-2][-1]
        self.max = last.base + last.batch if last else 0

    def put(self, u: U) -> None:
        if u.phy <= self.max_phy:
            return
        if not self.disk or self.pos[-1] == PER_FILE:
            if not self.disk:
                self.first_created = True
            self.disk.append([])
            self.pos.append(0)
        d, p = self.disk[-1], self.pos[-1]
        if p < len(d):
            d[p] = u
        else:
            d.append(u)
        self.pos[-1] = p + 1
        self.max_phy = u.phy
        self.max = u.base + u.batch
        if self.first_created and len(self.disk) == 1 and self.min == -1:
            self.revise_min()

    def reopen(self) -> None:
        self.first_created = False
        self.max, self.min, self.max_phy = 0, -1, -1  # a new object
        if not self.disk:
            return
        self.pos = [len(d) for d in self.disk]  # every unit on disk is valid, stale ones too
        self.max_phy = next((d[-1].phy for d in reversed(self.disk[-3:]) if d), -1)
        self.revise_min()
        self.revise_max()

    def truncate(self, phy: int) -> None:
        self.max_phy = phy - 1
        while self.disk:
            d = self.disk[-1]
            keep = list(takewhile(lambda u: u.phy + u.size <= phy, d))  # scans the bytes, not the position
            if not keep:
                self.disk.pop()
                self.pos.pop()
                continue
            self.pos[-1] = len(keep)
            self.max_phy = keep[-1].phy
            break
        if not self.disk:
            self.first_created = False
        self.revise_min()
        self.revise_max()

    def correct_min(self, min_phy: int) -> None:
        self.revise_min()
        if self.disk:
            below = list(takewhile(lambda u: u.phy < min_phy, self.files[0]))
            if below:
                self.min = below[-1].base + below[-1].batch

    def expire(self, min_phy: int) -> int:
        n = 0
        while len(self.disk) > 1 and self.disk[0][-1].phy < min_phy:
            self.disk.pop(0)
            self.pos.pop(0)
            n += 1
        self.correct_min(min_phy)
        return n


def check(q: BatchConsumeQueue, fm: FieldModel) -> None:
    assert q.get_min_offset_in_queue() == fm.min
    assert q.get_max_offset_in_queue() == fm.max
    assert q.get_max_physic_offset() == fm.max_phy
    units = fm.units
    got = q.units()
    assert [tuple(int(x) for x in r) for r in got.tolist()] == [u.packed() for u in units]
    names = sorted(os.listdir(q.queue_dir)) if os.path.isdir(q.queue_dir) else []
    assert len(names) == len(fm.files)
    if not units:
        return
    # lookups: RocketMQ answers from the files and the max field (not the min field)
    m = Model(units, files=fm.files)
    bases = [u.base for u in units]
    lo = units[0].base
    for qo in range(lo - 2, max(fm.max, lo) + 2):
        expect = None if qo >= fm.max or qo < lo else bisect.bisect_right(bases, qo) - 1
        assert q.find_unit(qo) == expect, qo
    for t in sorted({u.time for u in units[:: max(1, len(units) // 20)]} | {units[-1].time + 5, 0}):
        for b in (LOWER, UPPER):
            assert q.get_offset_in_queue_by_time(t, b) == m.by_time(t, b), (t, b)


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.integers(1, 60)),
        st.tuples(st.just("dup"), st.integers(1, 5)),
        st.tuples(st.just("reopen"), st.just(0)),
        st.tuples(st.just("truncate"), st.integers(0, 1000)),
        st.tuples(st.just("correct"), st.integers(0, 1000)),
        st.tuples(st.just("expire"), st.integers(0, 1000)),
    ),
    min_size=1, max_size=25,
)


def _phy_at(fm: FieldModel, cursor: int, pick: int) -> int:
    """A commit log offset chosen by ``pick`` (per mille): a unit's start, inside a record, or past all."""
    top = max(cursor, 1)
    u = STREAM[min(pick * top // 1000, len(STREAM) - 1)]
    return [u.phy, u.phy + 1, u.phy + u.size, STREAM[min(top, len(STREAM) - 1)].phy + 10][pick % 4]


def _record_start(cursor: int, pick: int) -> int:
    """A commit log end recovery can produce: a record's start, or past everything."""
    top = max(cursor, 1)
    u = STREAM[min(pick * top // 1000, len(STREAM) - 1)]
    return u.phy if pick % 3 else STREAM[min(cursor, len(STREAM) - 1)].phy  # the log's end


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(ops=OPS)
def test_operation_sequences(tmp_path_factory, ops):
    root = str(tmp_path_factory.mktemp("bcq") / "batchconsumequeue")
    q = BatchConsumeQueue("TopicB", 1, root, FILE)
    fm = FieldModel()
    cursor = 0  # next unit of STREAM to dispatch
    for op, arg in ops:
        if op == "put":
            for u in STREAM[cursor : cursor + arg]:
                assert q.put_batch_message_position_info(*u.args())
                fm.put(u)
            cursor = min(cursor + arg, len(STREAM))
        elif op == "dup":
            for u in STREAM[max(0, cursor - arg) : cursor]:  # skipped, unless state was lost
                assert q.put_batch_message_position_info(*u.args())
                fm.put(u)
        elif op == "reopen":
            q.flush(0)
            q.shutdown()
            q = BatchConsumeQueue("TopicB", 1, root, FILE)
            assert q.load()
            q.recover()
            fm.reopen()
        elif op == "truncate":
            phy = _record_start(cursor, arg)  # (a cut inside a record: test_batch_consume_queue.py)
            assert q.truncate_dirty_logic_files(phy) == []
            fm.truncate(phy)
            # the log ends at phy: dispatch resumes with the records from there
            cursor = min(cursor, next((i for i, u in enumerate(STREAM) if u.phy >= phy), len(STREAM)))
        elif op == "correct":
            phy = _phy_at(fm, cursor, arg)
            q.correct_min_offset(phy)
            fm.correct_min(phy)
        else:
            phy = _phy_at(fm, cursor, arg)
            assert q.delete_expired_file(phy, now_ms=0) == fm.expire(phy)
        check(q, fm)
    assert UNIT * PER_FILE == FILE
