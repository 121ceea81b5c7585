"""Batched dispatch leaves exactly the bytes per-record dispatch leaves.

``ReputMessageService`` dispatches records in batches (``dispatch_batch``: CQ units written per
queue, index keys hashed together and written a file's worth at a time); recovery re-dispatches
the same way. Every test here runs the same workload twice, batched and one record at a time
(``batching`` forced off), and compares consume queue files, index files, the checkpoint,
duplicate counters and what listeners saw. The building blocks are compared with their
per-item reference on random inputs too.
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqlab import Message, MessageStore, MessageStoreConfig
from rmqlab.clock import ManualClock
from rmqlab.codec import flags
from rmqlab.codec.batch import MessageBatch
from rmqlab.codec.index_layout import index_key_hash
from rmqlab.codec.java_hash import java_hash, java_hash_extend, java_hash_extend_many
from rmqlab.store import dispatch
from rmqlab.store.consume_queue import ConsumeQueue
from rmqlab.store.dispatch import ReputMessageService
from rmqlab.store.index_file import IndexFile

_KEY_CHARS = "abcXYZ019-_ #%üж标😀"


def queue_and_index_bytes(root: Path) -> dict[str, bytes]:
    """Every ConsumeQueue and index file's bytes, by path under ``root``."""
    out = {}
    for sub in ("consumequeue", "batchconsumequeue", "index"):
        for p in sorted((root / sub).rglob("*")):
            if p.is_file():
                out[str(p.relative_to(root))] = p.read_bytes()
    return out


def _snapshot(root: Path) -> dict[str, bytes]:
    out = queue_and_index_bytes(root)
    out["checkpoint"] = (root / "checkpoint").read_bytes()[:40]
    return out


def _message(rng: random.Random, i: int) -> Message:
    kind = rng.random()
    # explicit UNIQ_KEYs: generated ones differ from run to run (process-wide counter)
    kw: dict[str, object] = {"uniq_key": f"7F000001{os.getpid() % 1:04X}{i:020X}"}
    if kind < 0.08:
        kw["delay_time_level"] = rng.randint(1, 5)
    elif kind < 0.2:
        kw["sys_flag"] = rng.choice([flags.TRANSACTION_PREPARED_TYPE, flags.TRANSACTION_ROLLBACK_TYPE,
                                     flags.TRANSACTION_COMMIT_TYPE])
    elif kind < 0.24:
        kw["uniq_key"] = rng.choice(["UNIQ-FIXED", "ключ-uniq", "x" * 70])
    keys: object = rng.choice([
        (), [f"k{i}"], [f"k{i}", "dup", "dup"], f"a  b{i} ", ["ключ", "标签😀"], [f"c{rng.randint(0, 5)}"],
        ["".join(rng.choice(_KEY_CHARS) for _ in range(rng.randint(1, 80)))],
    ])
    return Message(rng.choice(["TopicA", "TopicB", "T-e%", "x" * 19]), os.urandom(rng.choice([0, 5, 300])),
                   tags=rng.choice([None, "TagA", "标签"]), keys=keys, queue_id=rng.randint(0, 3),
                   **kw)  # type: ignore[arg-type]


def _put_inner_batch(store: MessageStore, rng: random.Random, i: int) -> None:
    """A 5.x producer's batch for the BatchCQ topic ``BQ`` (one inner-batch record), with a
    UNIQ_KEY of its own that is the same in every run."""
    msgs = [Message("BQ", os.urandom(rng.choice([0, 40])), tags=rng.choice([None, "TagB"]),
                    keys=rng.choice([(), [f"b{i}"]]), queue_id=i % 2) for _ in range(rng.randint(1, 6))]
    batch = MessageBatch.from_messages(msgs, lambda: f"BQ{i:030X}", client_version=store.config.rocketmq_version)
    assert store.put_messages(batch).ok


def _config(root: Path, version: str, slots: int, items: int, cq_units: int) -> MessageStoreConfig:
    return MessageStoreConfig.small(str(root), rocketmq_version=version, max_hash_slot_num=slots,
                                    max_index_num=items, mapped_file_size_consume_queue=20 * cq_units)


def _run(root: Path, config: MessageStoreConfig, seed: int, batched: bool, monkeypatch: pytest.MonkeyPatch,
         drop_hints: bool, bcq: bool = False) -> tuple[dict[str, bytes], list[object], dict[object, int]]:
    if not batched:
        monkeypatch.setattr(ReputMessageService, "batching", lambda self: False)
    else:  # every round batched, however few records are behind (small rounds go one by one)
        monkeypatch.setattr(dispatch, "SMALL_ROUND_RECORDS", 0)
        monkeypatch.setattr(dispatch, "SMALL_ROUND_BYTES", 0)
    rng = random.Random(seed)
    seen: list[object] = []
    store = MessageStore.open(str(root), config, clock=ManualClock(), threaded=False)
    try:
        if seed % 2:  # a listener needs exact requests: records without hints are then parsed one by one
            store.reput.listeners.append(seen.append)
        if bcq:  # 5.x: records of a BatchCQ topic among the others go the per-record way
            store.create_topic("BQ", queue_type="BatchCQ")
        for i in range(rng.randint(50, 400)):
            if bcq and rng.random() < 0.2:
                _put_inner_batch(store, rng, i)
            r = store.put_message(_message(rng, i))
            assert r.ok
            store.clock.advance(rng.choice([0, 1, 700, 1500]))  # type: ignore[attr-defined]
            if rng.random() < (0.5 if drop_hints else 0.0):  # runs and lone records without hints
                store.commit_log.dispatch_hints.pop(r.wrote_offset, None)
            if rng.random() < 0.1:
                store.step()
        store.wait_dispatched()
        dups = {(t, q): cq.duplicates_skipped for t, q, cq in store.consume_queue_store.all_queues()}
        store.checkpoint.flush()
    finally:
        store.shutdown()
        monkeypatch.undo()
    return _snapshot(root), seen, dups


@pytest.mark.parametrize("seed", range(10))
def test_batched_reput_equals_one_by_one(tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(1000 + seed)
    version = "4.9.8" if seed % 2 == 0 else "5.3.3"
    slots, items, cq_units = rng.choice([1, 2, 7, 64]), rng.choice([2, 3, 5, 17, 256]), rng.choice([1, 3, 64])
    results = []
    for batched in (True, False):
        root = tmp_path / f"b{batched}"
        results.append(_run(root, _config(root, version, slots, items, cq_units), seed, batched, monkeypatch,
                            drop_hints=seed % 3 != 0, bcq=seed % 4 in (1, 2) and version != "4.9.8"))
    (fast, fast_seen, fast_dups), (slow, slow_seen, slow_dups) = results
    assert fast.keys() == slow.keys()
    for k in fast:
        assert fast[k] == slow[k], k
    assert fast_seen == slow_seen
    assert fast_dups == slow_dups


@pytest.mark.parametrize("seed", range(6))
def test_batched_recovery_rebuild_equals_one_by_one(tmp_path: Path, seed: int,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Abnormal recovery with the index destroyed (and CQs partly cut) re-dispatches in batches."""
    rng = random.Random(2000 + seed)
    version = "4.9.8" if seed % 2 == 0 else "5.3.3"
    slots, items, cq_units = rng.choice([3, 64]), rng.choice([5, 256, 4096]), rng.choice([7, 64])
    src = tmp_path / "src"
    config = _config(src, version, slots, items, cq_units)
    bcq = version != "4.9.8" and seed % 4 == 1
    with MessageStore.open(str(src), config, clock=ManualClock(), threaded=False) as store:
        if bcq:  # 5.x: records of a BatchCQ topic among the others
            store.create_topic("BQ", queue_type="BatchCQ")
        for i in range(rng.randint(100, 500)):
            if bcq and rng.random() < 0.2:
                _put_inner_batch(store, rng, i)
            assert store.put_message(_message(rng, i)).ok
            store.clock.advance(rng.choice([0, 900]))  # type: ignore[attr-defined]
        store.wait_dispatched()
    (src / "abort").write_bytes(b"")
    from rmqlab.codec.checkpoint import Checkpoint

    with open(src / "checkpoint", "r+b") as fh:
        fh.write(Checkpoint(index_msg_timestamp=0).pack()[:40])
    if seed % 3 == 0:
        for q in sorted((src / "consumequeue").rglob("0*")):
            if q.is_file() and rng.random() < 0.5:
                size = q.stat().st_size
                at = rng.randrange(max(size // 2, 1)) // 20 * 20
                with open(q, "r+b") as fh:
                    fh.seek(at)
                    fh.write(b"\0" * min(400, size - at))
    snaps = []
    for batched in (True, False):
        root = tmp_path / f"r{batched}"
        shutil.copytree(src, root)
        if not batched:
            monkeypatch.setattr(ReputMessageService, "batching", lambda self: False)
        store = MessageStore.open(str(root), _config(root, version, slots, items, cq_units), clock=ManualClock(),
                                  threaded=False, start=False)
        try:
            dups = {(t, q): cq.duplicates_skipped for t, q, cq in store.consume_queue_store.all_queues()}
            logics = store.checkpoint.logics_msg_timestamp
        finally:
            store.abandon()
            monkeypatch.undo()
        snaps.append((_snapshot(root), dups, logics))
    (fast, fd, fl), (slow, sd, sl) = snaps
    assert fast.keys() == slow.keys()
    for k in fast:
        if k != "checkpoint":
            assert fast[k] == slow[k], k
    assert fd == sd
    assert fl == sl


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["T#", "TopicA#", "ü#", ""]), st.text(alphabet=_KEY_CHARS, max_size=90)),
                max_size=40))
def test_java_hash_extend_many(pairs: list[tuple[str, str]]) -> None:
    prefixes = np.array([java_hash(p) for p, _ in pairs], dtype=np.int64)
    suffixes = [s for _, s in pairs]
    got = java_hash_extend_many(prefixes, suffixes).tolist()
    assert got == [java_hash_extend(int(h), s) for h, s in zip(prefixes, suffixes, strict=True)]
    assert got == [java_hash(p + s) for p, s in pairs]
    lengths = np.array([len(s) for s in suffixes], dtype=np.int64)
    assert java_hash_extend_many(prefixes, suffixes, lengths).tolist() == got  # lengths given
    assert lengths.tolist() == [len(s) for s in suffixes]  # and left as they were


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.integers(1, 9),
    st.integers(2, 12),
    st.lists(st.tuples(st.integers(-(2**31), 2**31 - 1), st.integers(0, 3000)), min_size=1, max_size=30),
    st.integers(0, 1),
    st.lists(st.integers(-5, 40), max_size=9),
)
def test_put_items_equals_put_key(tmp_path_factory: pytest.TempPathFactory, slots: int, index_num: int,
                                  items: list[tuple[int, int]], inherit: int, garbage: list[int]) -> None:
    d = tmp_path_factory.mktemp("idx")
    hashes = np.array([0 if h == -(2**31) else abs(h) for h, _ in items], dtype=np.int64)
    ts0 = 1_700_000_000_000
    phy = np.arange(len(items), dtype=np.int64) * 100 + 7
    ts = ts0 + np.cumsum([gap for _, gap in items]).astype(np.int64) - 1500
    files = []
    for name in ("20230101000000000", "20230101000000001"):
        f = IndexFile(str(d / name), slots, index_num, 5 if inherit else 0, ts0 if inherit else 0)
        for s, v in enumerate(garbage[:slots]):  # stale slot values (some > index_count)
            f._buf[40 + 4 * s : 44 + 4 * s] = v.to_bytes(4, "big", signed=True)
        files.append(f)
    a, b = files
    split = len(items) // 2
    written = a.put_items(hashes[:split], phy[:split], ts[:split])
    written += a.put_items(hashes[split:], phy[split:], ts[split:])
    n = 0
    for i in range(len(items)):
        if not b.put_key("unused", int(phy[i]), int(ts[i]), int(hashes[i])):
            break
        n += 1
    assert written == n
    assert bytes(a._buf) == bytes(b._buf)
    assert a.header_values() == b.header_values()
    for f in files:
        f.shutdown()


def test_put_items_hash_of_real_keys(tmp_path: Path) -> None:
    a = IndexFile(str(tmp_path / "20230101000000000"), 5, 50)
    b = IndexFile(str(tmp_path / "20230101000000001"), 5, 50)
    keys = [f"TopicA#k{i}" for i in range(30)]
    hashes = np.array([index_key_hash(k) for k in keys], dtype=np.int64)
    assert a.put_items(hashes, np.arange(30) * 10, np.full(30, 1_700_000_000_000)) == 30
    for i, k in enumerate(keys):
        assert b.put_key(k, i * 10, 1_700_000_000_000)
    assert bytes(a._buf) == bytes(b._buf)
    a.shutdown()
    b.shutdown()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(1, 5), st.lists(st.sampled_from([1, 1, 1, 1, 0, 2, -1, 5]), min_size=1, max_size=40),
       st.integers(0, 9), st.integers(-1, 500))
def test_put_units_equals_put_message_position_info(tmp_path_factory: pytest.TempPathFactory, units: int,
                                                    steps: list[int], start_q: int, max_phy: int) -> None:
    d = tmp_path_factory.mktemp("cq")
    queues = [ConsumeQueue("TopicA", 0, str(d / name), 20 * units) for name in ("a", "b")]
    for cq in queues:
        cq.max_physic_offset = max_phy
    q = start_q
    offsets, sizes, codes, qoffs = [], [], [], []
    off = 0
    for step in steps:
        offsets.append(off)
        sizes.append(90 + step % 3)
        codes.append(step * 1000 - 7)
        qoffs.append(max(q, 0))
        off += 100
        q += step
    a, b = queues
    arr = [np.array(x, dtype=np.int64) for x in (offsets, sizes, codes, qoffs)]
    last = a.put_units(*arr)
    expect = -1
    for i in range(len(offsets)):
        if b.put_message_position_info(offsets[i], sizes[i], codes[i], qoffs[i]):
            expect = i
    assert last == expect
    assert a.max_physic_offset == b.max_physic_offset
    assert a.min_logic_offset == b.min_logic_offset
    assert a.duplicates_skipped == b.duplicates_skipped
    assert a.order_warnings == b.order_warnings
    fa = [(mf.name, mf.wrote_position, bytes(mf.buffer)) for mf in a.mapped_file_queue.mapped_files]
    fb = [(mf.name, mf.wrote_position, bytes(mf.buffer)) for mf in b.mapped_file_queue.mapped_files]
    assert fa == fb
    for cq in queues:
        cq.shutdown()


_PROP_PIECES = ["KEYS", "UNIQ_KEY", "TAGS", "XKEYS", "k1 k2", " ", "", "ü", "\x01", "\x02", "v", "a  b", "KEYS\x01"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.tuples(st.sampled_from(_PROP_PIECES), st.sampled_from(_PROP_PIECES)), max_size=5),
                min_size=1, max_size=12), st.booleans(), st.booleans())
def test_property_values_equal_scan_properties(records: list[list[tuple[str, str]]], glue: bool,
                                               long: bool) -> None:
    from rmqlab.codec.scan import _properties
    from rmqlab.store.fast_walk import property_values

    if long:  # wider than the 2-D gather: the slice-and-join path
        records = [[*records[0], ("LONG", "x" * 600)], *records[1:]]
    raws = [("" if glue else "\x02").join(f"{k}\x01{v}\x02" for k, v in rec).encode() for rec in records]
    blob = b"##" + b"".join(raws)
    starts = 2 + np.cumsum([0] + [len(r) for r in raws[:-1]])
    props, fb, ranges = property_values(blob, starts, np.array([len(r) for r in raws]), (b"KEYS", b"UNIQ_KEY",
                                                                                          b"TAGS"))
    tags, keys, uniq, _ = _properties(raws, False)
    for i, raw in enumerate(raws):
        if fb[i]:
            continue
        for (vs, ve), exact in zip(ranges, (keys[i], uniq[i], tags[i]), strict=True):
            got = None if vs[i] < 0 else props[vs[i] : ve[i]].tobytes().decode()
            assert got == exact, (raw, got, exact)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(alphabet="abcXYZ019-_ #", max_size=40), min_size=1, max_size=30))
def test_java_hash_ranges(values: list[str]) -> None:
    from rmqlab.codec.java_hash import java_hash_ranges

    data = np.frombuffer(b"".join(v.encode() for v in values) or b"\0", dtype=np.uint8)
    ends = np.cumsum([len(v) for v in values])
    starts = ends - np.array([len(v) for v in values])
    prefixes = np.array([java_hash(f"T{i % 3}#") for i in range(len(values))], dtype=np.int64)
    got = java_hash_ranges(data, starts, ends, prefixes).tolist()
    assert got == [java_hash(f"T{i % 3}#{v}") for i, v in enumerate(values)]


def test_small_rounds_go_one_by_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A trickle of puts is not batched (a batch round's fixed numpy cost would dominate); a
    backlog is, and both give the same files (the tests above)."""
    batches: list[int] = []
    real = ReputMessageService.dispatch_batch

    def spy(self: ReputMessageService, batch: object) -> None:
        batches.append(len(batch.offset))  # type: ignore[attr-defined]
        real(self, batch)  # type: ignore[arg-type]

    monkeypatch.setattr(ReputMessageService, "dispatch_batch", spy)
    with MessageStore.open(str(tmp_path), MessageStoreConfig.small(str(tmp_path)), clock=ManualClock(),
                           threaded=False) as store:
        rng = random.Random(7)
        for i in range(dispatch.SMALL_ROUND_RECORDS - 1):
            assert store.put_message(_message(rng, i)).ok
        store.wait_dispatched()
        assert batches == []
        assert store.reput.reput_from_offset == store.get_max_phy_offset()  # dispatched all the same
        for i in range(200):
            assert store.put_message(_message(rng, i)).ok
        store.wait_dispatched()
        assert sum(batches) >= 150
