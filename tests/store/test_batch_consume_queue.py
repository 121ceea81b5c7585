"""BatchConsumeQueue against spec §3.8 and RocketMQ 5.x's BatchConsumeQueue: real files, tiny sizes.

Files hold 8 units (368 bytes) unless a test says otherwise, so queues roll after a few puts.
Every answer is compared with :class:`Model`, plain Python over the list of units put (split into
files of ``per_file`` units), written from RocketMQ's rules rather than from the class.
"""

from __future__ import annotations

import bisect
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqlab.codec.batch_consume_queue_unit import BCQ_FILE_SIZE, BCQ_UNIT_DTYPE, pack_unit, unpack_unit
from rmqlab.errors import ConfigError, InvalidTopic, ReadOnlyStore
from rmqlab.events import EventBus, EventRecorder, RecoveryStep
from rmqlab.store.batch_consume_queue import LOWER, PHASE, UPPER, BatchConsumeQueue

UNIT = 46
PER_FILE = 8
FILE = PER_FILE * UNIT
SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@dataclass(frozen=True)
class U:
    phy: int
    size: int
    tags: int
    time: int
    base: int
    batch: int

    def args(self) -> tuple[int, int, int, int, int, int]:
        return self.phy, self.size, self.tags, self.time, self.base, self.batch

    def packed(self) -> tuple[int, ...]:
        return (*self.args(), -1, 0)


def make_units(n: int, *, batches=None, phy0: int = 0, base0: int = 0, time0: int = 1_700_000_000_000,
               time_steps=None, phy_gaps=None) -> list[U]:
    out, phy, base, t = [], phy0, base0, time0
    for i in range(n):
        batch = batches[i % len(batches)] if batches else 1 + (i * 7) % 13
        size = 100 + (i * 31) % 400
        out.append(U(phy, size, (i * 2654435761) % (1 << 31) - (1 << 30), t, base, batch))
        phy += size + (phy_gaps[i % len(phy_gaps)] if phy_gaps else 0)
        base += batch
        t += time_steps[i % len(time_steps)] if time_steps else 1
    return out


class Model:
    """RocketMQ's answers for a queue holding ``units`` in files of ``per_file`` units (ordered
    units: bases increasing, commit log offsets increasing, times non-decreasing)."""

    def __init__(self, units: list[U], per_file: int = PER_FILE, files: list[list[U]] | None = None) -> None:
        self.units = list(units)
        self.files = files if files is not None else [self.units[i : i + per_file]
                                                      for i in range(0, len(self.units), per_file)]
        self.bases = [u.base for u in self.units]

    @property
    def min(self) -> int:
        return self.files[0][0].base if self.files and self.files[0] else -1

    @property
    def max(self) -> int:
        return self.units[-1].base + self.units[-1].batch if self.units else 0

    @property
    def max_phy(self) -> int:
        return self.units[-1].phy if self.units else -1

    def find(self, q: int) -> int | None:
        # the unit whose batch holds q (the last base <= q), inside [first base, max)
        if not self.units or q >= self.max or q < self.units[0].base:
            return None
        return bisect.bisect_right(self.bases, q) - 1

    def file_of(self, index: int) -> tuple[int, int]:
        k, i = 0, index
        while i >= len(self.files[k]):
            i -= len(self.files[k])
            k += 1
        return k, i

    def units_from(self, q: int, m: int) -> list[U]:
        g = self.find(q)
        if g is None:
            return []
        k, i = self.file_of(g)
        return self.files[k][i : i + m]

    def by_time(self, ts: int, boundary: str) -> int:
        files = [f for f in self.files]
        if not files:
            return -1
        last = files[-1]
        if last and last[0].time <= ts:
            f = last
        else:
            # RocketMQ's time cache: first time of each file -> file (later wins), floor; else file 0
            table = {}
            for fl in files[:-1]:
                if fl:
                    table[fl[0].time] = fl
            keys = [k for k in table if k <= ts]
            f = table[max(keys)] if keys else files[0]
        if not f:
            return -1
        if ts >= f[-1].time:
            return f[-1].base
        times = [u.time for u in f]
        if boundary == LOWER:
            return f[bisect.bisect_left(times, ts)].base  # the first unit at or after ts
        i = java_upper(times, ts)
        return -1 if i < 0 else f[i].base


def java_upper(times: list[int], target: int) -> int:
    """``binarySearchRight(..., UPPER)`` written out over a list (see the class's docstring)."""
    left, right = 0, len(times) - 1
    while left <= right:
        mid = (left + right) // 2
        v = times[mid]
        if mid == right:
            return mid if v >= target else -1
        if mid == left:
            if v >= target:
                return mid
            left = mid + 1
        elif v <= target:
            left = mid
        else:
            right = mid - 1
    return -1


def root_of(tmp_path: Path) -> str:
    return str(tmp_path / "batchconsumequeue")


def make(root: str, size: int = FILE, **kw) -> BatchConsumeQueue:
    return BatchConsumeQueue("TopicB", 3, root, size, **kw)


def put_all(q: BatchConsumeQueue, units: list[U]) -> None:
    for u in units:
        assert q.put_batch_message_position_info(*u.args())


def reopen(q: BatchConsumeQueue, **kw) -> tuple[BatchConsumeQueue, list[RecoveryStep]]:
    if not q.read_only:
        q.flush(0)
    q.shutdown()
    new = make(q.store_path, q.mapped_file_size, **kw)
    assert new.load()
    return new, new.recover()


def file_names(q: BatchConsumeQueue) -> list[str]:
    return sorted(os.listdir(q.queue_dir)) if os.path.isdir(q.queue_dir) else []


def tree_hash(path: str) -> dict[str, str]:
    out = {}
    for dirpath, _, names in os.walk(path):
        for n in names:
            p = os.path.join(dirpath, n)
            out[os.path.relpath(p, path)] = hashlib.sha256(Path(p).read_bytes()).hexdigest()
    return out


def write_at(q: BatchConsumeQueue, file_index: int, unit_index: int, raw: bytes) -> None:
    """Byte surgery on disk (the queue is closed)."""
    path = os.path.join(q.queue_dir, file_names(q)[file_index])
    with open(path, "r+b") as f:
        f.seek(unit_index * UNIT)
        f.write(raw)


def check_against(q: BatchConsumeQueue, m: Model, *, queue_offsets=None, times=None) -> None:
    assert q.get_min_offset_in_queue() == m.min
    assert q.get_max_offset_in_queue() == m.max
    assert q.get_message_total_in_queue() == m.max - m.min
    assert q.get_max_physic_offset() == m.max_phy
    got = q.units()
    assert [tuple(int(x) for x in r) for r in got.tolist()] == [u.packed() for u in m.units]
    last = m.units[m.find(m.max - 1)] if m.find(m.max - 1) is not None else None
    assert q.get_last_offset() == (last.phy + last.size if last else -1)
    if queue_offsets is None:
        lo = m.units[0].base if m.units else 0
        queue_offsets = range(lo - 3, m.max + 3)
    for qo in queue_offsets:
        g = m.find(qo)
        assert q.find_unit(qo) == g, qo
        assert q.get(qo) == (None if g is None else m.units[g].packed()), qo
        if g is not None and qo % 5 == 0:
            got_from = q.units_from(qo, 5)
            assert [tuple(int(x) for x in r) for r in got_from.tolist()] == [u.packed() for u in m.units_from(qo, 5)]
    if times is None:
        ts = sorted({u.time for u in m.units})
        times = {t + d for t in ts for d in (-1, 0, 1)} | {0, -5, (ts[-1] + 1000) if ts else 1}
    for t in sorted(times):
        for b in (LOWER, UPPER):
            assert q.get_offset_in_queue_by_time(t, b) == m.by_time(t, b), (t, b)


# --- layout and bytes ---------------------------------------------------------------------------


def test_files_are_byte_exact(tmp_path):
    q = make(root_of(tmp_path))
    units = make_units(21)
    put_all(q, units)
    q.flush(0)
    assert q.queue_dir == os.path.join(root_of(tmp_path), "TopicB", "3")
    names = file_names(q)
    assert names == [f"{k * FILE:020d}" for k in range(3)]
    for k, name in enumerate(names):
        data = Path(q.queue_dir, name).read_bytes()
        assert len(data) == FILE
        chunk = units[k * PER_FILE : (k + 1) * PER_FILE]
        expect = b"".join(pack_unit(*u.args()) for u in chunk)
        assert data == expect + bytes(FILE - len(expect))
    # compacted offset -1, reserved 0, big-endian (the 46 bytes of a known unit)
    raw = pack_unit(0x0102030405060708, 187, -2, 1_700_000_000_000, 5, 3)
    assert raw.hex() == ("0102030405060708" "000000bb" "fffffffffffffffe" "0000018bcfe56800"
                         "0000000000000005" "0003" "ffffffff" "00000000")
    assert unpack_unit(raw, 0)[6:] == (-1, 0)


def test_default_file_size_and_bad_arguments(tmp_path):
    q = BatchConsumeQueue("T", 0, root_of(tmp_path))
    assert q.mapped_file_size == BCQ_FILE_SIZE == 13_800_000
    with pytest.raises(ConfigError):
        BatchConsumeQueue("T", 0, root_of(tmp_path), 100)
    with pytest.raises(InvalidTopic):
        BatchConsumeQueue("../x", 0, root_of(tmp_path), FILE)
    with pytest.raises(ValueError, match="queue id"):
        BatchConsumeQueue("T", -1, root_of(tmp_path), FILE)


def test_empty_queue_answers_like_rocketmq(tmp_path):
    q = make(root_of(tmp_path))
    assert q.load()
    assert q.recover() == []
    assert (q.get_min_offset_in_queue(), q.get_max_offset_in_queue()) == (-1, 0)
    assert q.get_message_total_in_queue() == 1  # RocketMQ: 0 - (-1)
    assert q.get_max_physic_offset() == -1
    assert q.find_unit(0) is None
    assert q.get(0) is None
    assert len(q.units_from(0, 4)) == 0
    assert q.get_last_offset() == -1
    assert q.get_offset_in_queue_by_time(123) == -1
    assert len(q.units()) == 0


def test_first_put_sets_min_and_max(tmp_path):
    q = make(root_of(tmp_path))
    assert q.put_batch_message_position_info(5000, 300, 1, 10, 1000, 7)
    assert (q.get_min_offset_in_queue(), q.get_max_offset_in_queue()) == (1000, 1007)
    assert q.get_min_logic_offset() == 0
    assert file_names(q) == ["0" * 20]
    assert [q.find_unit(x) for x in (999, 1000, 1006, 1007)] == [None, 0, 0, None]


def test_put_refuses_units_recovery_would_reject(tmp_path):
    q = make(root_of(tmp_path))
    # a negative offset is never written: it is <= the max physic offset (-1 at least), a duplicate
    assert q.put_batch_message_position_info(-1, 10, 0, 0, 0, 1)
    for bad in [(0, 0, 0, 0, 0, 1), (0, 10, 0, 0, -1, 1), (0, 10, 0, 0, 0, 0),
                (0, 10, 0, 0, 0, 40000)]:
        with pytest.raises(ValueError, match="recovery would end the queue"):
            q.put_batch_message_position_info(*bad)
    assert file_names(q) == []


# --- the model, over many units, reopened ---------------------------------------------------------


def test_thousands_of_units_reopened(tmp_path):
    per_file = 256
    q = make(root_of(tmp_path), per_file * UNIT)
    units = make_units(3000, batches=[1, 1, 3, 17, 2, 1, 9, 5, 1, 30], base0=12_345,
                       time_steps=[0, 1, 0, 0, 2, 7, 0, 1])
    put_all(q, units)
    m = Model(units, per_file)
    q, steps = reopen(q)
    assert [s.decision for s in steps] == ["trusted", "keep", "recovered"]
    assert len(file_names(q)) == 12
    check_against(q, m)  # every queue offset from below the min to past the max


def test_huge_batches(tmp_path):
    q = make(root_of(tmp_path))
    units = make_units(40, batches=[32767, 1, 1000, 32767, 5])
    put_all(q, units)
    q, _ = reopen(q)
    m = Model(units)
    edges = sorted({u.base + d for u in units for d in (-1, 0, 1, u.batch - 1, u.batch)})
    check_against(q, m, queue_offsets=edges)


@st.composite
def unit_lists(draw, max_units=90):
    n = draw(st.integers(0, max_units))
    batches = draw(st.lists(st.integers(1, 40), min_size=1, max_size=8))
    steps = draw(st.lists(st.sampled_from([0, 0, 1, 2, 10]), min_size=1, max_size=6))
    gaps = draw(st.lists(st.integers(0, 50), min_size=1, max_size=3))
    return make_units(n, batches=batches, base0=draw(st.integers(0, 10_000)), time_steps=steps,
                      phy0=draw(st.integers(0, 1 << 40)), phy_gaps=gaps)


@SETTINGS
@given(units=unit_lists())
def test_model_live_and_reopened(tmp_path_factory, units):
    root = root_of(tmp_path_factory.mktemp("bcq"))
    q = make(root)
    put_all(q, units)
    m = Model(units)
    check_against(q, m)
    q, _ = reopen(q)
    check_against(q, m)


def test_queue_offsets_on_a_gap_take_the_unit_before(tmp_path):
    q = make(root_of(tmp_path))
    units = [U(0, 10, 0, 1, 0, 2), U(10, 10, 0, 2, 5, 1), U(20, 10, 0, 3, 6, 4)]
    put_all(q, units)
    assert [q.find_unit(x) for x in range(-1, 11)] == [None, 0, 0, 0, 0, 0, 1, 2, 2, 2, 2, None]


# --- by time: RocketMQ's surprises, spelled out ------------------------------------------------------


def _timed(tmp_path, times: list[int], per_file: int = PER_FILE) -> tuple[BatchConsumeQueue, list[U]]:
    q = make(root_of(tmp_path), per_file * UNIT)
    units = [U(100 * i, 100, 0, t, 10 * i, 10) for i, t in enumerate(times)]
    put_all(q, units)
    return q, units


def test_by_time_past_everything_answers_the_last_units_base(tmp_path):
    q, _ = _timed(tmp_path, [5, 6, 7, 7, 7])
    # not the max offset (50), and not the first unit stored at 7 (20): the last unit's base
    assert q.get_offset_in_queue_by_time(99, LOWER) == 40
    assert q.get_offset_in_queue_by_time(7, LOWER) == 40
    assert q.get_offset_in_queue_by_time(7, UPPER) == 40
    assert q.get_offset_in_queue_by_time(6, LOWER) == 10
    assert q.get_offset_in_queue_by_time(0, LOWER) == 0
    assert q.get_offset_in_queue_by_time(0, UPPER) == 0


def test_by_time_upper_is_not_the_last_equal_unit(tmp_path):
    q, _ = _timed(tmp_path, [1, 5, 5, 5, 9])
    assert q.get_offset_in_queue_by_time(5, LOWER) == 10
    assert q.get_offset_in_queue_by_time(5, UPPER) == 30
    # no equal unit: UPPER may answer the next later unit, as LOWER does ...
    assert q.get_offset_in_queue_by_time(3, UPPER) == q.get_offset_in_queue_by_time(3, LOWER) == 10


def test_by_time_upper_quirks(tmp_path):
    q, _ = _timed(tmp_path, [5, 5, 9, 9, 9, 12])
    assert q.get_offset_in_queue_by_time(5, UPPER) == 0  # stops short of unit 1, also stored at 5
    q.destroy()
    q, _ = _timed(tmp_path, [0, 2, 4])
    assert q.get_offset_in_queue_by_time(1, UPPER) == -1  # ... or answer nothing
    assert q.get_offset_in_queue_by_time(1, LOWER) == 10


def test_by_time_between_files_answers_the_earlier_files_last_unit(tmp_path):
    q, _ = _timed(tmp_path, [1, 2, 3, 4, 20, 21, 22, 23, 40], per_file=4)
    assert q.get_offset_in_queue_by_time(10, LOWER) == 30  # unit 3 (time 4), not unit 4 (time 20)
    assert q.get_offset_in_queue_by_time(30, LOWER) == 70
    assert q.get_offset_in_queue_by_time(40, LOWER) == 80


def test_by_time_equal_times_across_files_pick_the_later_file(tmp_path):
    q, units = _timed(tmp_path, [7] * 10, per_file=4)
    # the last file starts at time 7 <= 7: the search stays in it
    assert q.get_offset_in_queue_by_time(7, LOWER) == 90
    assert q.get_offset_in_queue_by_time(6, LOWER) == Model(units, 4).by_time(6, LOWER)


def test_by_time_rejects_unknown_boundary(tmp_path):
    q, _ = _timed(tmp_path, [1])
    with pytest.raises(ValueError, match="boundary"):
        q.get_offset_in_queue_by_time(1, "MIDDLE")


# --- recover -------------------------------------------------------------------------------------------


def _closed(tmp_path, n: int, **kw) -> tuple[BatchConsumeQueue, list[U]]:
    q = make(root_of(tmp_path))
    units = make_units(n, **kw)
    put_all(q, units)
    q.flush(0)
    q.shutdown()
    return q, units


def test_recover_zero_tail(tmp_path):
    q, units = _closed(tmp_path, 20)
    q, steps = reopen(q)
    check_against(q, Model(units))
    assert steps[0].decision == "keep"
    assert steps[0].offset == 2 * FILE + 4 * UNIT
    assert "end of data" in steps[0].reason


def test_recover_garbage_tail_in_last_file(tmp_path):
    q, units = _closed(tmp_path, 20)
    garbage = pack_unit(5, -3, 0, 0, 7, 1)
    write_at(q, 2, 4, garbage + pack_unit(99_999, 10, 0, 0, 500, 1))
    bus = EventBus()
    rec = EventRecorder(bus)
    q, steps = reopen(q, bus=bus)
    check_against(q, Model(units))
    cut = [s for s in steps if s.decision == "truncate"]
    assert len(cut) == 1
    assert cut[0].file.endswith(f"{2 * FILE:020d}")
    assert cut[0].offset == 2 * FILE + 4 * UNIT
    assert "1 valid-looking unit" in cut[0].reason
    assert rec.of(RecoveryStep) == steps
    assert all(s.phase == PHASE for s in steps)
    # appending goes on right after the last valid unit, over the garbage
    nxt = make_units(21)[20]
    assert q.put_batch_message_position_info(*nxt.args())
    check_against(q, Model([*units, nxt]))


def test_recover_bad_unit_in_middle_file_deletes_later_files(tmp_path):
    q, units = _closed(tmp_path, 21)
    write_at(q, 1, 3, bytes(8) + (0).to_bytes(4, "big"))  # size 0
    q, steps = reopen(q)
    assert file_names(q) == [f"{0:020d}", f"{FILE:020d}"]
    check_against(q, Model(units[:11]))
    deleted = [s for s in steps if s.decision == "delete"]
    assert [s.offset for s in deleted] == [2 * FILE]
    assert "5 valid-looking unit(s) in it are lost" in deleted[0].reason
    assert q.get_max_physic_offset() == units[10].phy


def test_recover_empty_last_file_takes_max_from_the_one_before(tmp_path):
    q, units = _closed(tmp_path, 16)
    Path(q.queue_dir, f"{2 * FILE:020d}").write_bytes(bytes(FILE))  # created, never written
    q, _ = reopen(q)
    assert len(q.mapped_file_queue.mapped_files) == 3
    m = Model(units, files=[units[:8], units[8:], []])
    check_against(q, m)
    nxt = make_units(17)[16]
    assert q.put_batch_message_position_info(*nxt.args())
    assert file_names(q)[-1] == f"{2 * FILE:020d}"
    check_against(q, Model([*units, nxt]))


def test_recover_only_walks_the_last_three_files(tmp_path):
    q, units = _closed(tmp_path, 40)  # 5 files
    bad = pack_unit(-7, 0, 0, 0, 0, 0)
    write_at(q, 0, 2, bad)  # not walked: trusted and kept as it is
    q, steps = reopen(q)
    assert steps[0].decision == "trusted"
    assert "2 file(s)" in steps[0].reason
    assert len(file_names(q)) == 5
    assert q.get_max_offset_in_queue() == Model(units).max
    assert tuple(q.units()[2].tolist()) == unpack_unit(bad, 0)
    q.shutdown()
    write_at(q, 0, 2, pack_unit(*units[2].args()))
    write_at(q, 2, 5, bad)  # the third-to-last file is walked
    q, _ = reopen(q)
    check_against(q, Model(units[:21]))


@pytest.mark.parametrize("n_files", [1, 2, 3])
def test_recover_with_few_files_walks_from_the_first(tmp_path, n_files):
    q, units = _closed(tmp_path, PER_FILE * n_files - 3)
    write_at(q, 0, 4, pack_unit(1, 1, 0, 0, -1, 1))  # bad msgBaseOffset in file 0
    q, _ = reopen(q)
    check_against(q, Model(units[:4]))
    assert file_names(q) == [f"{0:020d}"]


def test_recover_full_last_file(tmp_path):
    q, units = _closed(tmp_path, 16)
    q, steps = reopen(q)
    check_against(q, Model(units))
    assert steps[0].decision == "keep"
    assert "full" in steps[0].reason
    nxt = make_units(17)[16]
    assert q.put_batch_message_position_info(*nxt.args())
    assert file_names(q)[-1] == f"{2 * FILE:020d}"


def test_recover_reports_units_out_of_order(tmp_path):
    q = make(root_of(tmp_path))
    put_all(q, [U(0, 10, 0, 1, 0, 2), U(10, 10, 0, 2, 2, 2), U(20, 10, 0, 3, 9, 1)])
    q, steps = reopen(q)
    odd = [s for s in steps if s.decision == "kept out of order"]
    assert len(odd) == 1
    assert odd[0].offset == 2 * UNIT
    assert "msgBaseOffset" in odd[0].reason


# --- idempotence -----------------------------------------------------------------------------------------


def test_reput_at_or_below_max_physic_offset_writes_nothing(tmp_path):
    q = make(root_of(tmp_path))
    units = make_units(13)
    put_all(q, units)
    q.flush(0)
    before = tree_hash(root_of(tmp_path))
    for u in units:
        assert q.put_batch_message_position_info(*u.args())
    # only the start offset counts: a different unit at the last start offset is skipped too
    assert q.put_batch_message_position_info(units[-1].phy, 1, 1, 1, 10**6, 1)
    q.flush(0)
    assert tree_hash(root_of(tmp_path)) == before
    assert q.duplicates_skipped == 14
    q, _ = reopen(q)
    put_all(q, units)  # the re-dispatch after a restart
    q.flush(0)
    assert tree_hash(root_of(tmp_path)) == before
    check_against(q, Model(units))


# --- truncate_dirty_logic_files --------------------------------------------------------------------------


def _cut_model(units: list[U], phy: int) -> Model:
    return Model([u for u in units if u.phy < phy])


@pytest.mark.parametrize("where", ["inside", "file_start", "past", "zero", "first_unit"])
def test_truncate_dirty_logic_files(tmp_path, where):
    q = make(root_of(tmp_path))
    units = make_units(21)
    put_all(q, units)
    phy = {"inside": units[11].phy, "file_start": units[16].phy, "past": units[-1].phy + 10**6,
           "zero": 0, "first_unit": units[0].phy + 1}[where]
    if where == "first_unit":
        phy = units[1].phy
    cuts = q.truncate_dirty_logic_files(phy)
    assert cuts == []
    m = _cut_model(units, phy)
    expect_files = (len(m.units) + PER_FILE - 1) // PER_FILE
    assert len(file_names(q)) == expect_files
    if m.units:
        check_against(q, m)
    else:
        assert (q.get_min_offset_in_queue(), q.get_max_offset_in_queue()) == (-1, 0)
        assert q.get_max_physic_offset() == phy - 1
        assert q.get_min_logic_offset() == -1
    # re-dispatch from the cut refills the queue exactly
    for u in units:
        if u.phy >= phy:
            assert q.put_batch_message_position_info(*u.args())
    check_against(q, Model(units))
    q, _ = reopen(q)
    check_against(q, Model(units))


def test_truncate_cuts_a_unit_ending_past_the_log(tmp_path):
    q = make(root_of(tmp_path))
    units = make_units(12)
    put_all(q, units)
    phy = units[10].phy + 1  # inside unit 10's record
    cuts = q.truncate_dirty_logic_files(phy)
    assert len(cuts) == 1
    assert cuts[0].offset == FILE + 2 * UNIT
    assert "past the log's end" in cuts[0].reason
    check_against(q, Model(units[:10]))
    # unit 0 of a file ending past the log: the file goes
    cuts = q.truncate_dirty_logic_files(units[8].phy + 1)
    assert len(cuts) == 1
    assert cuts[0].offset == FILE
    assert len(file_names(q)) == 1
    check_against(q, Model(units[:8]))


def test_truncate_keeps_no_zero_unit_in_an_empty_last_file(tmp_path):
    q, units = _closed(tmp_path, 16)
    Path(q.queue_dir, f"{2 * FILE:020d}").write_bytes(bytes(FILE))
    q, _ = reopen(q)
    cuts = q.truncate_dirty_logic_files(units[-1].phy + 1000)
    assert len(cuts) == 1
    assert "not a valid unit" in cuts[0].reason
    assert len(file_names(q)) == 2
    check_against(q, Model(units))
    # and the file before is truncated too
    Path(q.queue_dir, f"{2 * FILE:020d}").write_bytes(bytes(FILE))
    q, _ = reopen(q)
    q.truncate_dirty_logic_files(units[13].phy)
    check_against(q, Model(units[:13]))


def test_truncate_publishes_routine_steps(tmp_path):
    bus = EventBus()
    rec = EventRecorder(bus)
    q = make(root_of(tmp_path), bus=bus)
    units = make_units(20)
    put_all(q, units)
    q.truncate_dirty_logic_files(units[12].phy)
    decisions = [s.decision for s in rec.of(RecoveryStep)]
    assert decisions == ["delete", "truncate"]


# --- correct_min_offset / delete_expired_file --------------------------------------------------------------


def test_correct_min_offset(tmp_path):
    q = make(root_of(tmp_path))
    units = make_units(20, base0=50)
    put_all(q, units)
    q.correct_min_offset(0)
    assert q.get_min_offset_in_queue() == 50
    q.correct_min_offset(units[3].phy)  # units 0..2 expired
    assert q.get_min_offset_in_queue() == units[3].base
    q.correct_min_offset(units[3].phy - 1)  # starts again from the first unit each time
    assert q.get_min_offset_in_queue() == units[3].base
    q.correct_min_offset(units[12].phy)  # only the first file is looked at
    assert q.get_min_offset_in_queue() == units[7].base + units[7].batch == units[8].base
    # lookups below the min still find units that are in the files (RocketMQ's getBatchMsgIndexBuffer)
    assert q.find_unit(units[1].base) == 1


@pytest.mark.parametrize("k", [0, 3, 8, 9, 16, 19, 40])
def test_delete_expired_file(tmp_path, k):
    q = make(root_of(tmp_path))
    units = make_units(20)
    put_all(q, units)
    min_phy = units[k].phy if k < len(units) else units[-1].phy + 10**6
    deleted = q.delete_expired_file(min_phy, now_ms=0)
    files = [units[i : i + PER_FILE] for i in range(0, 20, PER_FILE)]
    expect = 0
    for f in files[:-1]:
        if f[-1].phy < min_phy:
            expect += 1
        else:
            break
    assert deleted == expect
    assert len(file_names(q)) == 3 - expect
    first = files[expect]
    below = [u for u in first if u.phy < min_phy]
    assert q.get_min_offset_in_queue() == (below[-1].base + below[-1].batch if below else first[0].base)
    assert q.get_min_logic_offset() == expect * FILE
    assert q.get_max_offset_in_queue() == Model(units).max
    # what is left answers as a queue of the remaining files
    rest = [u for f in files[expect:] for u in f]
    for u in rest:
        assert q.get(u.base) == u.packed()
    assert q.find_unit(units[0].base) == (None if expect else 0)


# --- read-only ---------------------------------------------------------------------------------------------


def test_read_only_never_changes_a_byte(tmp_path):
    q, units = _closed(tmp_path, 21)
    write_at(q, 1, 3, pack_unit(5, -3, 0, 0, 7, 1))  # damage: the writable recovery would delete file 2
    before = tree_hash(root_of(tmp_path))
    ro = make(root_of(tmp_path), read_only=True)
    assert ro.load()
    steps = ro.recover()
    assert [s.decision for s in steps if s.decision in ("drop", "truncate")] == ["truncate", "drop"]
    check_against(ro, Model(units[:11]))
    with pytest.raises(ReadOnlyStore):
        ro.put_batch_message_position_info(10**9, 1, 0, 0, 10**6, 1)
    for call in (lambda: ro.truncate_dirty_logic_files(0), lambda: ro.delete_expired_file(10**9), ro.destroy):
        with pytest.raises(ReadOnlyStore):
            call()
    ro.correct_min_offset(units[2].phy)
    assert ro.get_min_offset_in_queue() == units[2].base
    ro.shutdown()
    assert tree_hash(root_of(tmp_path)) == before
    # the writable recovery then gives the same answers
    q, _ = reopen(make(root_of(tmp_path)))
    check_against(q, Model(units[:11]))


def test_read_only_re_put_of_a_known_unit_is_still_true(tmp_path):
    _q, units = _closed(tmp_path, 5)
    ro = make(root_of(tmp_path), read_only=True)
    ro.load()
    ro.recover()
    assert ro.put_batch_message_position_info(*units[2].args())  # idempotence before the mode check


# --- lifecycle ------------------------------------------------------------------------------------------------


def test_destroy_and_flush(tmp_path):
    q = make(root_of(tmp_path))
    put_all(q, make_units(10))
    assert q.flush(0) is False  # something moved (one file a call)
    assert q.flush(0) is False
    assert q.flush(0) is True
    q.destroy()
    assert file_names(q) == []
    assert (q.get_min_offset_in_queue(), q.get_max_offset_in_queue(), q.get_max_physic_offset()) == (-1, 0, -1)
    units = make_units(3)
    put_all(q, units)
    check_against(q, Model(units))


def test_index_buffer_is_a_window_to_the_files_end(tmp_path):
    q = make(root_of(tmp_path))
    units = make_units(12)
    put_all(q, units)
    sbr = q.get_index_buffer(units[9].base + 1)
    with sbr:
        assert sbr.size == 3 * UNIT
        assert sbr.start_offset == FILE + UNIT
        got = np.frombuffer(bytes(sbr.buffer), dtype=q.units().dtype)
    assert int(got["msg_base_offset"][0]) == units[9].base
    assert q.get_index_buffer(Model(units).max) is None


def test_recover_reports_units_out_of_order_across_files(tmp_path):
    q = make(root_of(tmp_path))
    units = make_units(12)
    units[8] = U(units[8].phy, units[8].size, 0, units[8].time, units[8].base + 1, units[8].batch)
    units[10] = U(units[9].phy, units[10].size, 0, units[10].time, units[10].base, units[10].batch)
    put_all(q, units[:10])
    assert q.put_batch_message_position_info(*units[10].args())  # start offset not above: skipped
    q, steps = reopen(q)
    odd = {s.reason.split(": ")[2].split(" (")[0]: s for s in steps if s.decision == "kept out of order"}
    assert odd["msgBaseOffset does not continue the previous unit's batch"].offset == FILE
    assert "commit log offset does not increase" not in odd
    assert "(2 such unit(s)" in odd["msgBaseOffset does not continue the previous unit's batch"].reason


def test_wrapper_skips_what_rocketmq_skips(tmp_path):
    q = make(root_of(tmp_path))
    assert not q.put_message_position_info_wrapper(0, 10, 0, 0, -1, 1)
    assert not q.put_message_position_info_wrapper(0, 10, 0, 0, 0, -2)
    assert not q.put_message_position_info_wrapper(0, 10, 0, 0, 0, 0)
    assert file_names(q) == []
    assert q.put_message_position_info_wrapper(0, 10, 0, 0, 0, 2)
    assert q.put_message_position_info_wrapper(0, 10, 0, 0, 0, 2)  # a duplicate
    assert q.get_max_offset_in_queue() == 2


def test_arrays_keep_the_big_endian_unit_dtype(tmp_path):
    q = make(root_of(tmp_path))
    put_all(q, make_units(20))
    for arr in (q.units(), q.units(3, 17), q.units_from(0, 4), q.units_from(10**9, 4), q.units(5, 2)):
        assert arr.dtype == BCQ_UNIT_DTYPE
    assert len(q.units(5, 2)) == 0
    assert [int(x) for x in q.units(-3)["msg_base_offset"]] == [u.base for u in make_units(20)[-3:]]


def test_read_only_trimmed_last_file(tmp_path):
    q, units = _closed(tmp_path, 12)
    last = Path(q.queue_dir, f"{FILE:020d}")
    last.write_bytes(last.read_bytes()[: 3 * UNIT + 10])  # a sample cut mid-unit
    before = tree_hash(root_of(tmp_path))
    ro = make(root_of(tmp_path), read_only=True)
    assert ro.load()
    steps = ro.recover()
    assert steps[0].offset == FILE + 3 * UNIT
    assert "shorter than" in steps[0].reason
    check_against(ro, Model(units[:11]))
    ro.shutdown()
    assert tree_hash(root_of(tmp_path)) == before
    assert not make(root_of(tmp_path)).load()  # a writable open refuses the short file


def test_by_time_picks_the_file_by_the_floor_of_first_times(tmp_path):
    # the clock went back between files: RocketMQ's time cache is keyed by each file's first
    # store time, so the floor key picks the file, whatever the files' order
    times = [20 + i for i in range(4)] + [10 + i for i in range(4)] + [30, 31]
    q, units = _timed(tmp_path, times, per_file=4)
    assert q.get_offset_in_queue_by_time(12, LOWER) == units[6].base  # in the second file
    assert q.get_offset_in_queue_by_time(21, LOWER) == units[1].base  # in the first file
    assert q.get_offset_in_queue_by_time(25, LOWER) == units[3].base  # past the first file's last unit
    assert q.get_offset_in_queue_by_time(5, LOWER) == units[0].base  # below every key: the first file
    m = Model(units, 4)
    for t in range(0, 40):
        for b in (LOWER, UPPER):
            assert q.get_offset_in_queue_by_time(t, b) == m.by_time(t, b)


def test_recover_takes_max_physic_offset_from_a_trusted_file_when_the_walk_finds_nothing(tmp_path):
    q, units = _closed(tmp_path, 36)  # 5 files: the walk starts at file 2
    write_at(q, 2, 0, bytes(UNIT))
    q, steps = reopen(q)
    assert file_names(q) == [f"{k * FILE:020d}" for k in range(3)]
    step = next(s for s in steps if s.decision == "max physic offset from a trusted file")
    assert step.offset == FILE + 7 * UNIT
    # RocketMQ would keep -1 and take every re-dispatched record again
    assert q.get_max_physic_offset() == units[15].phy
    assert q.get_max_offset_in_queue() == units[15].base + units[15].batch
    assert q.put_batch_message_position_info(*units[3].args())  # a duplicate: skipped
    check_against(q, Model(units[:16], files=[units[:8], units[8:16], []]))


def test_consume_queue_alike_attributes(tmp_path):
    q, units = _timed(tmp_path, [3, 4, 5])
    assert q.consume_queue_ext is None
    assert q.max_physic_offset == q.get_max_physic_offset() == units[-1].phy
    assert q.get_offset_in_queue_by_time(4, commit_log_min_offset=10**9, pickup_store_timestamp=None,
                                         boundary=UPPER) == units[1].base
    assert q.roll_next_file(17) == 0
    assert q.get_earliest_unit() == units[0].packed()
    assert q.get_latest_unit() == units[-1].packed()
    assert q.is_first_file_exist()
    assert q.is_first_file_available()
    assert q.get_total_size() == FILE
    assert q.get_unit_size() == UNIT


def test_put_into_a_recovered_empty_first_file_leaves_min_at_minus_one(tmp_path):
    root = root_of(tmp_path)
    qdir = Path(root, "TopicB", "3")
    qdir.mkdir(parents=True)
    (qdir / ("0" * 20)).write_bytes(bytes(FILE))  # created, never written (a crash right after)
    q = make(root)
    assert q.load()
    q.recover()
    assert (q.get_min_offset_in_queue(), q.get_max_offset_in_queue()) == (-1, 0)
    units = make_units(3, base0=40)
    put_all(q, units)
    # RocketMQ revises the min only for a file created in this run ("first create in queue")
    assert q.get_min_offset_in_queue() == -1
    assert q.get_max_offset_in_queue() == Model(units).max
    assert q.get_message_total_in_queue() == Model(units).max + 1
    assert q.find_unit(40) == 0  # lookups do not depend on the min
    q.correct_min_offset(0)  # the store's next correction fixes it
    assert q.get_min_offset_in_queue() == 40


def test_load_without_recover_answers_nothing(tmp_path):
    q, _ = _closed(tmp_path, 5)
    q = make(q.store_path)
    assert q.load()
    # RocketMQ revises min/max only in recover, truncation, puts and correctMinOffset
    assert (q.get_min_offset_in_queue(), q.get_max_offset_in_queue()) == (-1, 0)
    assert q.find_unit(0) is None
