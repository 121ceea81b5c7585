"""Column batches leave one hint per batch (``CommitLog.dispatch_runs``); reput trusts none blindly.

``put_messages`` of a uniform list or of a ``MessageBatch`` stores a ``HintRun`` (the batch's
columns) instead of a hint per record. Reput consumes it as a run of records: the batched path
builds a DispatchBatch from its columns, the one-by-one paths take its records one at a time,
both after checking each record's stored header. These tests run the same workload with runs
consumed by each path and with every hint dropped (every record parsed), and compare consume
queue and index bytes and the requests listeners saw; a round that ends inside a batch, a hint
the stored bytes contradict and the bound on runs are covered too.
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import pytest

from rmqlab import Message, MessageStore, MessageStoreConfig
from rmqlab.clock import ManualClock
from rmqlab.codec.batch import MessageBatch
from rmqlab.codec.msg_id import UniqKeyGenerator
from rmqlab.codec.walk import DispatchRequest, check_message_and_return_size
from rmqlab.store import commit_log as commit_log_module
from rmqlab.store import dispatch
from rmqlab.store.commit_log import HintRun
from rmqlab.store.dispatch import ReputMessageService
from tests.store.test_dispatch_batch import queue_and_index_bytes


def _open(root: Path, version: str) -> MessageStore:
    config = MessageStoreConfig.small(str(root), rocketmq_version=version)
    store = MessageStore.open(str(root), config, clock=ManualClock(), threaded=False)
    cl = store.commit_log
    cl._uniq = UniqKeyGenerator("10.1.2.3", 7, 99)  # the same UNIQ_KEY draws in every store of a test
    cl._uniq_counter = itertools.count()
    return store


def _batch(rng: random.Random, i: int, n: int) -> list[Message]:
    topic, qid, tags = rng.choice(["TopicA", "TopicB"]), rng.randint(0, 2), rng.choice([None, "TagA", "标签"])
    host = rng.choice([("10.0.0.7", 4242), ("::1", 9)])
    keys = rng.choice(["k", "two", "none"])
    return [Message(topic, bytes([j % 251]) * rng.choice([0, 7, 300]), tags=tags, queue_id=qid, born_host=host,
                    keys=[f"k{i}-{j}"] if keys == "k" else [f"a{j}", f"g{i}"] if keys == "two" else ())
            for j in range(n)]  # fmt: skip


def _uniq_source(prefix: str) -> object:
    counter = itertools.count()
    return lambda: f"{prefix}{next(counter):08X}"


def _workload(store: MessageStore, seed: int, mode: str) -> list[DispatchRequest]:
    """Batches (lists and MessageBatch objects) and single puts; ``mode`` "parse" drops every
    hint after each put, so reput parses every record."""
    rng = random.Random(seed)
    uniq = _uniq_source("ABCD0000")
    seen: list[DispatchRequest] = []
    if seed % 2:
        store.reput.listeners.append(seen.append)
    cl = store.commit_log
    for i in range(rng.randint(25, 45)):
        kind = rng.random()
        if kind < 0.2:
            r = store.put_message(Message("TopicA", b"single", tags="T", keys=f"s{i}", uniq_key=f"U{i}"))
        else:
            msgs = _batch(rng, i, rng.choice([1, 2, 5, 32, 33]))
            if kind < 0.6:
                r = store.put_messages(msgs)
            else:
                version = store.config.rocketmq_version
                r = store.put_messages(MessageBatch.from_messages(msgs, uniq, client_version=version))
        assert r.ok
        if mode == "parse":
            cl.dispatch_hints.clear()
            cl.dispatch_runs.clear()
        store.clock.advance(rng.choice([0, 1, 900]))  # type: ignore[attr-defined]
        if rng.random() < 0.3:
            store.step()
    store.wait_dispatched()
    return seen


def _patch(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if mode == "batched":  # every round batched, and rounds of 7 records: they end inside batches
        monkeypatch.setattr(dispatch, "SMALL_ROUND_RECORDS", 0)
        monkeypatch.setattr(dispatch, "SMALL_ROUND_BYTES", 0)
        monkeypatch.setattr(dispatch, "BATCH_RECORDS", 7)
    elif mode == "direct":  # one by one, hinted records straight to the CQ and the index
        monkeypatch.setattr(dispatch, "SMALL_ROUND_RECORDS", 1 << 30)
        monkeypatch.setattr(dispatch, "SMALL_ROUND_BYTES", 1 << 40)
    elif mode == "requests":  # one by one through DispatchRequests
        monkeypatch.setattr(ReputMessageService, "batching", lambda self: False)


def _run(root: Path, version: str, seed: int, mode: str, monkeypatch: pytest.MonkeyPatch) -> tuple:
    _patch(mode, monkeypatch)
    store = _open(root, version)
    try:
        seen = _workload(store, seed, mode)
        assert store.commit_log.dispatch_runs == {}
        assert store.commit_log.dispatch_hints == {}
        store.checkpoint.flush()
    finally:
        store.shutdown()
        monkeypatch.undo()
    return queue_and_index_bytes(root), [(r, list(r.properties or {})) for r in seen]


@pytest.mark.parametrize("seed", range(6))
def test_runs_dispatch_as_parsing_does(tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    version = "4.9.8" if seed % 3 == 0 else "5.3.3"
    ref = _run(tmp_path / "parse", version, seed, "parse", monkeypatch)
    assert ref[0]
    for mode in ("batched", "direct", "requests"):
        got = _run(tmp_path / mode, version, seed, mode, monkeypatch)
        assert got[0] == ref[0], mode
        assert got[1] == ref[1], mode


def test_a_round_that_ends_inside_a_run(tmp_path: Path) -> None:
    """The batched path takes a prefix of a run; the rest waits under its next offset and is
    taken by the next round (batched or one by one)."""
    for finish in ("batched", "one"):
        a, b = _open(tmp_path / f"a{finish}", "5.3.3"), _open(tmp_path / f"b{finish}", "5.3.3")
        try:
            for s in (a, b):
                assert s.put_messages(_batch(random.Random(3), 1, 32)).ok
            b.commit_log.dispatch_runs.clear()
            run = a.commit_log.dispatch_runs[0]
            assert isinstance(run, HintRun)
            assert len(run) == 32
            reput = a.reput
            sel = a.commit_log.get_data(0)
            assert sel is not None
            try:
                got = reput._run_round(sel.buffer, 0, run.offsets[10] + 3, True)  # 10 records fit
            finally:
                sel.release()
            assert got == 10
            assert reput.reput_from_offset == run.offsets[10]
            assert a.commit_log.dispatch_runs == {run.offsets[10]: run}
            assert run.start == 10
            if finish == "one":
                a.reput.batching = lambda: False  # type: ignore[method-assign]
            a.wait_dispatched()
            b.wait_dispatched()
            assert a.commit_log.dispatch_runs == {}
            for s in (a, b):
                s.checkpoint.flush()
        finally:
            a.shutdown()
            b.shutdown()
        assert queue_and_index_bytes(tmp_path / f"a{finish}") == queue_and_index_bytes(tmp_path / f"b{finish}")


@pytest.mark.parametrize("mode", ["batched", "direct", "requests"])
def test_a_run_record_the_bytes_contradict_is_parsed(tmp_path: Path, mode: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A run whose record 5 disagrees with the stored header (its size, then its queue offset
    via another run): that record is parsed (its real keys are indexed, not the hint's), the
    records around it are dispatched from the run."""
    _patch(mode, monkeypatch)
    store = _open(tmp_path / "s", "5.3.3")
    try:
        seen: list[DispatchRequest] = []
        store.reput.listeners.append(seen.append)
        cl = store.commit_log
        r1 = store.put_messages(_batch(random.Random(1), 1, 32))
        run = cl.dispatch_runs[r1.wrote_offset]
        run.sizes[5] += 1
        run.keys = list(run.keys)
        run.keys[5] = "hint-only-key"
        r2 = store.put_messages(_batch(random.Random(2), 2, 32))
        run2 = cl.dispatch_runs[r2.wrote_offset]
        run2.tags = [*run2.tags[:3], 12345, *run2.tags[4:]]
        run2.q0 += 1  # every record of the second batch contradicts its hint
        store.wait_dispatched()
        assert cl.dispatch_runs == {}
        assert len(seen) == 64
        for req in seen:
            sel = cl.get_message(req.commit_log_offset, req.msg_size)
            assert sel is not None
            with sel:
                size, ok, parsed = check_message_and_return_size(
                    sel.buffer, 0, check_crc=False, read_body=False, rocketmq_version="5.3.3",
                    delay_level_table=store.config.delay_level_table,
                    max_delay_level=max(store.config.delay_level_table),
                )  # fmt: skip
            assert ok
            assert size == req.msg_size
            assert req == parsed
        assert store.query_message(seen[5].topic, "hint-only-key").messages == []
        assert seen[35].tags_code != 12345
    finally:
        store.shutdown()
        monkeypatch.undo()


def test_runs_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(commit_log_module, "_MAX_DISPATCH_RUNS", 3)
    store = _open(tmp_path / "s", "5.3.3")
    try:
        for i in range(8):
            assert store.put_messages(_batch(random.Random(i), i, 4)).ok
            assert len(store.commit_log.dispatch_runs) <= 3
        assert len(store.commit_log.pending_hints()) == 4 * (8 % 3 or 3)
        store.wait_dispatched()
        assert store.commit_log.dispatch_runs == {}
        assert sum(store.get_max_offset_in_queue(t, q) for t in ("TopicA", "TopicB") for q in range(3)) == 32
    finally:
        store.shutdown()
