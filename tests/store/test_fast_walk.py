"""The fast recovery paths (bulk record checks, re-dispatch pre-check) change nothing.

Random stores -- several topics, delayed (SCHEDULE_TOPIC) and transactional records, empty bodies,
a forged body CRC of 0, small files with blanks; on 5.x also a BatchCQ topic's inner-batch records
-- are damaged in random ways (an inner batch's INNER_NUM / INNER_BASE garbled in place among
them), then recovered twice: with the fast walk and fast re-dispatch, and with the per-record code
only. Plans, consume queues (batch ones too), index contents, the checkpoint and the duplicate
counters must be identical.
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest

import rmqlab.store.message_store as ms_mod
from rmqlab import Message, MessageStore, MessageStoreConfig
from rmqlab.codec import flags
from rmqlab.codec.checkpoint import Checkpoint
from rmqlab.codec.message import BlankRecord
from rmqlab.codec.walk import iter_records
from rmqlab.store.recovery import plan_recovery
from rmqlab.testing import damage

FILE = 64 * 1024
BATCH_TOPIC = "BQ"


def _config(root: Path, version: str, crc: bool, prop_crc: bool = False) -> MessageStoreConfig:
    return MessageStoreConfig(
        store_path_root_dir=str(root), mapped_file_size_commit_log=FILE, rocketmq_version=version,
        check_crc_on_recover=crc, mapped_file_size_consume_queue=20 * 64,
        mapper_file_size_batch_consume_queue=46 * 16,
        enabled_append_prop_crc=prop_crc, force_verify_prop_crc=prop_crc,
    )


def _write(root: Path, version: str, rng: random.Random, batches: bool = False, prop_crc: bool = False) -> None:
    """A random store; with ``batches`` (5.x) a BatchCQ topic takes a batch (one inner-batch
    record) before about a third of the puts; with ``prop_crc`` (5.x) every record ends with
    its ``__CRC32#`` property."""
    config = _config(root, version, True, prop_crc)
    with MessageStore.open(str(root), config, threaded=False) as store:
        if batches:
            store.create_topic(BATCH_TOPIC, queue_type="BatchCQ")
        for i in range(rng.randint(150, 400)):
            if batches and rng.random() < 0.3:
                qid = rng.randint(0, 1)
                msgs = [Message(BATCH_TOPIC, os.urandom(rng.randint(0, 60)), tags=rng.choice([None, "TagA"]),
                                queue_id=qid) for _ in range(rng.randint(1, 12))]
                r = store.put_messages(msgs)
                assert r.ok, r
            kind = rng.random()
            body = os.urandom(rng.choice([0, 1, 10, 100, 700]))
            topic = rng.choice(["TopicA", "TopicB", "T-e%", "x" * 19])
            kw: dict[str, object] = {}
            if kind < 0.1:
                kw["delay_time_level"] = rng.randint(1, 5)
            elif kind < 0.2:
                kw["sys_flag"] = rng.choice([flags.TRANSACTION_PREPARED_TYPE, flags.TRANSACTION_ROLLBACK_TYPE,
                                             flags.TRANSACTION_COMMIT_TYPE])
            elif kind < 0.22:
                prefix = os.urandom(20)
                body = prefix + damage.forge_crc32_suffix(prefix, 0)
            msg = Message(topic, body, tags=rng.choice([None, "TagA"]),
                          keys=rng.choice([(), [f"k{i}"], [f"k{i}", "dup", "dup"]]),
                          queue_id=rng.randint(0, 3), **kw)  # type: ignore[arg-type]
            assert store.put_message(msg).ok
            if rng.random() < 0.05:
                store.step()
        store.step()
        store.wait_dispatched()


def _garble_inner_field(f: Path, rng: random.Random) -> bool:
    """Overwrite the value of one inner-batch record's INNER_NUM or INNER_BASE property in ``f``
    with as many other bytes (the record's lengths and body CRC stay right). False: none there."""
    data = bytearray(f.read_bytes())
    name = rng.choice([b"INNER_NUM\x01", b"INNER_BASE\x01"])
    hits = [i for i in range(len(data)) if data.startswith(name, i)]
    if not hits:
        return False
    at = rng.choice(hits) + len(name)
    end = data.index(b"\x02", at)
    value = bytes(data[at:end])
    # Java rejects the first three; "-<digits>" and "0<digits>" still parse (then the record stays)
    data[at:end] = rng.choice([b"x" * len(value), b" " + value[1:], value[:-1] + b"!", b"-" + value[1:],
                               b"0" + value[1:]])
    f.write_bytes(bytes(data))
    return True


def _damage(root: Path, rng: random.Random, batches: bool = False) -> str:
    cl = root / "commitlog"
    files = sorted(cl.iterdir())
    f = rng.choice(files)
    size = f.stat().st_size
    if batches and rng.random() < 0.5:
        for g in [f, *reversed(files)]:
            if _garble_inner_field(g, rng):
                return f"inner fields in {g.name}"
    what = rng.choice(["none", "flip", "zero", "garbage", "cq_cut", "index_gone", "checkpoint"])
    if what == "flip":
        damage.flip_bit(f, rng.randrange(size // 2), rng.randrange(8))
    elif what == "zero":
        a = rng.randrange(size // 2)
        damage.zero_range(f, a, a + rng.randint(1, 300))
    elif what == "garbage":
        damage.overwrite_tail_with_garbage(f, rng.randrange(size // 2), rng.randrange(1000), 2000)
    elif what == "cq_cut":
        for q in [*(root / "consumequeue").rglob("0*"), *(root / "batchconsumequeue").rglob("0*")]:
            if q.is_file() and rng.random() < 0.5:
                damage.zero_range(q, rng.randrange(max(q.stat().st_size // 2, 1)))
    elif what == "index_gone":
        shutil.rmtree(root / "index", ignore_errors=True)
    return what


def _snapshot(root: Path) -> dict[str, bytes]:
    out = {}
    for sub in ("consumequeue", "batchconsumequeue", "index"):
        for i, p in enumerate(sorted((root / sub).rglob("*"))):
            if p.is_file():
                key = str(p.relative_to(root)) if sub != "index" else f"index#{i}"
                out[key] = p.read_bytes()
    out["checkpoint"] = (root / "checkpoint").read_bytes()[:24]
    return out


def _recover(root: Path, config: MessageStoreConfig, fast: bool, monkeypatch: pytest.MonkeyPatch):
    real = plan_recovery

    def planner(*a: object, **kw: object):
        return real(*a, fast=fast, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(ms_mod, "plan_recovery", planner)
    store = MessageStore.open(str(root), config, threaded=False, start=False)
    try:
        plan = store.recovery_plan.to_dict()
        dups = {(t, q): cq.duplicates_skipped for t, q, cq in store.consume_queue_store.all_queues()}
        logics = store.checkpoint.logics_msg_timestamp
    finally:
        store.abandon()
    monkeypatch.undo()
    return plan, dups, logics, _snapshot(root)


def _recover_both(tmp_path: Path, src: Path, version: str, crc: bool, monkeypatch: pytest.MonkeyPatch,
                  prop_crc: bool = False) -> tuple[tuple, tuple]:
    results = []
    for fast in (True, False):
        root = tmp_path / f"run-{fast}"
        shutil.copytree(src, root)
        results.append(_recover(root, _config(root, version, crc, prop_crc), fast, monkeypatch))
    return results[0], results[1]


def _assert_same(fast_r: tuple, slow_r: tuple, what: str) -> None:
    assert fast_r[0] == slow_r[0], what
    assert fast_r[1] == slow_r[1], what
    assert fast_r[2] == slow_r[2], what
    assert fast_r[3].keys() == slow_r[3].keys(), what
    for k in fast_r[3]:
        assert fast_r[3][k] == slow_r[3][k], (what, k)


@pytest.mark.parametrize("seed", range(12))
def test_fast_recovery_matches_slow(tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    version = "4.9.8" if seed % 2 == 0 else "5.3.3"
    src = tmp_path / "src"
    _write(src, version, rng)
    what = _damage(src, rng)
    abnormal = seed % 3 != 0
    if abnormal:
        (src / "abort").write_bytes(b"")
        if rng.random() < 0.7:
            cp = Checkpoint(index_msg_timestamp=rng.choice([0, 1 << 50]))
            with open(src / "checkpoint", "r+b") as fh:
                fh.write(cp.pack()[:40])
    crc = seed % 4 != 3
    _assert_same(*_recover_both(tmp_path, src, version, crc, monkeypatch), what)


@pytest.mark.parametrize("seed", range(8))
def test_fast_recovery_matches_slow_with_batch_queues(tmp_path: Path, seed: int,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """5.x with a BatchCQ topic: its inner-batch records are certified by the fast walk only when
    their INNER_NUM / INNER_BASE parse as the slow check parses them (half the seeds garble one)."""
    rng = random.Random(1000 + seed)
    src = tmp_path / "src"
    _write(src, "5.3.3", rng, batches=True)
    assert (src / "batchconsumequeue" / BATCH_TOPIC).is_dir()
    what = _damage(src, rng, batches=True)
    if seed % 3 != 0:
        (src / "abort").write_bytes(b"")
    _assert_same(*_recover_both(tmp_path, src, "5.3.3", seed % 4 != 3, monkeypatch), what)


def _batch_store(root: Path) -> list[int]:
    """A one-file 5.x store: batches into BQ/0 between plain puts, all dispatched. Returns the
    batch records' offsets."""
    offsets = []
    with MessageStore.open(str(root), _config(root, "5.3.3", True), threaded=False) as store:
        store.create_topic(BATCH_TOPIC, queue_type="BatchCQ")
        for i in range(40):
            r = store.put_messages([Message(BATCH_TOPIC, b"m%d-%d" % (i, k), tags="TagA") for k in range(3)])
            assert r.ok
            offsets.append(r.wrote_offset)
            assert store.put_message(Message("TopicA", b"plain %d" % i, keys=[f"k{i}"])).ok
        store.step()
        store.wait_dispatched()
    assert len(list((root / "commitlog").iterdir())) == 1
    return offsets


@pytest.mark.parametrize("abnormal", [False, True])
@pytest.mark.parametrize(("name", "garbage"), [("INNER_NUM", b"x"), ("INNER_BASE", b"3?"),
                                               ("INNER_BASE", b" 0")])
def test_a_garbled_inner_batch_field_stops_both_walks_at_its_record(
        tmp_path: Path, abnormal: bool, name: str, garbage: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    """An inner batch whose INNER_NUM (or INNER_BASE) is overwritten by as many other bytes still
    has right lengths and body CRC; 5.x fails it while building its DispatchRequest
    (``setBatchSizeIfNeeded``'s parse), so recovery cuts the log there. The fast walk must not
    certify it: same plan (offsets, steps, stop reason), same queues, index and checkpoint."""
    src = tmp_path / "src"
    offsets = _batch_store(src)
    victim = offsets[10]  # INNER_NUM "3", INNER_BASE "30"
    f = next((src / "commitlog").iterdir())
    data = bytearray(f.read_bytes())
    at = data.index(name.encode() + b"\x01", victim) + len(name) + 1
    assert len(garbage) == data.index(b"\x02", at) - at
    data[at : at + len(garbage)] = garbage
    f.write_bytes(bytes(data))
    if abnormal:
        (src / "abort").write_bytes(b"")
    fast_r, slow_r = _recover_both(tmp_path, src, "5.3.3", True, monkeypatch)
    _assert_same(fast_r, slow_r, name)
    plan = fast_r[0]
    assert plan["process_offset"] == plan["stop_offset"] == victim
    assert f"{name} {garbage.decode()!r}" in plan["stop_reason"]
    assert plan["truncate_position"] == victim
    assert plan["records_checked"] == 2 * 10
    # the batch queue lost the unit of the cut record and every later one
    with MessageStore.open(str(tmp_path / "run-True"), _config(tmp_path / "run-True", "5.3.3", True),
                           threaded=False, start=False) as store:
        assert store.get_max_offset_in_queue(BATCH_TOPIC, 0) == 30
        assert store.get_max_offset_in_queue("TopicA", 0) + store.get_max_offset_in_queue("TopicA", 1) \
            + store.get_max_offset_in_queue("TopicA", 2) + store.get_max_offset_in_queue("TopicA", 3) == 10


def test_a_parsable_inner_batch_is_certified_by_the_fast_walk(tmp_path: Path) -> None:
    """Inner batches with good INNER_NUM / INNER_BASE stay on the fast path (they are not all
    sent to the per-record check): the walk certifies the whole file in bulk."""
    from rmqlab.store.fast_walk import FastChecker

    root = tmp_path / "s"
    offsets = _batch_store(root)
    buf = next((root / "commitlog").iterdir()).read_bytes()
    fc = FastChecker(True, True, keep_positions=True)
    pos, n, _nbytes, last = fc.advance(buf, 0, 0)
    assert n == 80
    assert last > offsets[-1]  # the plain record after the last batch
    bad = bytearray(buf)
    at = bad.index(b"INNER_NUM\x01", offsets[5]) + len("INNER_NUM") + 1
    bad[at] = ord("x")
    fc = FastChecker(True, True, keep_positions=True)
    pos, n, _nbytes, _last = fc.advance(bytes(bad), 0, 0)
    assert (pos, n) == (offsets[5], 10)
    fc4 = FastChecker(False, True, keep_positions=True)  # 4.9.8 has no such parse
    assert fc4.advance(bytes(bad), 0, 0)[1] == 80


def test_fast_walk_certifies_and_falls_back(tmp_path: Path) -> None:
    """The fast path really is taken for plain records, and every note-producing record (CRC 0)
    still goes through the slow path."""
    rng = random.Random(7)
    root = tmp_path / "s"
    _write(root, "4.9.8", rng)
    (root / "abort").write_bytes(b"")
    with open(root / "checkpoint", "r+b") as fh:
        fh.write(Checkpoint().pack()[:40])
    config = _config(root, "4.9.8", True)
    store = MessageStore.open(str(root), config, threaded=False, start=False)
    try:
        plan = store.recovery_plan
        assert plan.records_checked > 100
        assert any("body CRC 0" in n for n in plan.notes)
    finally:
        store.shutdown()


def _record_offsets(root: Path) -> list[tuple[Path, int]]:
    """(file, position in it) of every record of the CommitLog."""
    out = []
    for f in sorted((root / "commitlog").iterdir()):
        for off, rec in iter_records(f.read_bytes()):
            if isinstance(rec, BlankRecord):
                break
            out.append((f, off))
    return out


@pytest.mark.parametrize("seed", range(12))
def test_fast_recovery_matches_slow_with_prop_crc(tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """5.x stores written with ``enabled_append_prop_crc`` and recovered with
    ``force_verify_prop_crc``: records whose CRC really is 0 (forged FLAG, a note each), a header
    bit flipped (the body CRC sees nothing), records written later without the property, the
    usual random damage; the fast walk certifies only what the slow check accepts silently."""
    rng = random.Random(2000 + seed)
    src = tmp_path / "src"
    _write(src, "5.3.3", rng, batches=seed % 2 == 0, prop_crc=True)
    if seed % 3 == 1:  # then written once more without the option: records lacking the property
        with MessageStore.open(str(src), _config(src, "5.3.3", True), threaded=False) as store:
            for i in range(rng.randint(1, 5)):
                assert store.put_message(Message("TopicA", b"plain %d" % i, tags="TagA")).ok
            store.step()
    recs = _record_offsets(src)
    for f, off in rng.sample(recs, 3):
        data = f.read_bytes()
        total = int.from_bytes(data[off : off + 4], "big")
        if data[off + total - 20 : off + total].startswith(b"__CRC32#\x01"):  # (not one written without it)
            damage.forge_prop_crc_zero(f, off)
    what = "crc0"
    if seed % 4 in (1, 2):
        f, off = rng.choice(recs)
        damage.flip_bit(f, off + rng.randrange(20, 48), rng.randrange(8))  # queue offset .. born time
        what = "header flip"
    elif seed % 4 == 3:
        what = _damage(src, rng, batches=seed % 2 == 0)
    if seed % 3 != 0:
        (src / "abort").write_bytes(b"")
    force = seed % 5 != 4
    fast_r, slow_r = _recover_both(tmp_path, src, "5.3.3", True, monkeypatch, prop_crc=force)
    _assert_same(fast_r, slow_r, what)


def test_fast_walk_certifies_prop_crc_records_and_leaves_crc_zero_to_the_slow_path(tmp_path: Path) -> None:
    from rmqlab.store.fast_walk import FastChecker

    root = tmp_path / "s"
    with MessageStore.open(str(root), _config(root, "5.3.3", True, True), threaded=False) as store:
        for i in range(50):
            assert store.put_message(Message("TopicA", b"m%d" % i, tags="TagA", keys=[f"k{i}"])).ok
    f = next((root / "commitlog").iterdir())
    offs = [off for _f, off in _record_offsets(root)]
    fc = FastChecker(True, True, keep_positions=True, prop_crc=True)
    assert fc.advance(f.read_bytes(), 0, 0)[1] == 50
    damage.forge_prop_crc_zero(f, offs[20])
    fc = FastChecker(True, True, keep_positions=True, prop_crc=True)
    pos, n, _nbytes, _last = fc.advance(f.read_bytes(), 0, 0)
    assert (pos, n) == (offs[20], 20)
    # without force_verify_prop_crc the property is not looked at: the body CRC certifies them all
    assert FastChecker(True, True, keep_positions=True).advance(f.read_bytes(), 0, 0)[1] == 50


def test_fast_walk_leaves_a_crc_pair_glued_to_the_previous_value_to_the_slow_path() -> None:
    """A record whose last 20 bytes look like the property but follow a value with no 0x02 in
    between: the parser reads ``A = "b__CRC32#..."`` and finds no ``__CRC32#``, so 5.x fails
    it; the fast walk must not certify it."""
    from rmqlab.codec.message import encode_message
    from rmqlab.codec.prop_crc import seal_prop_crc
    from rmqlab.codec.walk import check_message_and_return_size
    from rmqlab.store.fast_walk import FastChecker

    def record(props: bytes) -> bytearray:
        rec = bytearray(encode_message(topic="TopicA", body=b"x", store_timestamp=1, properties=props + bytes(20)))
        seal_prop_crc(rec, 0, len(rec))
        return rec

    for props, accepted in ((b"A\x01b\x02", True), (b"A\x01b", False)):
        buf = bytes(record(props)) + bytes(64)
        _size, ok, _req = check_message_and_return_size(buf, 0, check_crc=True, rocketmq_version="5.3.3",
                                                        force_verify_prop_crc=True)
        assert ok is accepted
        assert FastChecker(True, True, keep_positions=False, prop_crc=True).advance(buf, 0, 0)[1] == int(accepted)
