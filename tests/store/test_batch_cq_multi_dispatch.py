"""Multi-dispatch (LMQ) properties on an inner batch of a 5.x BatchCQ topic, as 5.x stores them.

A batch for a BatchCQ topic goes into the store as ONE message (``asyncPutMessage``); its queue's
``BatchConsumeQueue.assignQueueOffset`` only sets INNER_BASE and the queue offset, and
``increaseQueueOffset`` moves the BatchCQ offset by INNER_NUM: neither looks at
INNER_MULTI_DISPATCH (the LMQ offsets are ``ConsumeQueue.assignQueueOffset``'s, the plain queue's).
So the record keeps the properties as sent (no INNER_MULTI_QUEUE_OFFSET added, WAIT kept) and no
LMQ offset moves. ``BatchConsumeQueue.putMessagePositionInfoWrapper`` writes the one BatchCQ unit
and never calls ``multiDispatchLmqQueue``: the LMQ queues get no unit, even when the producer
sent offsets that parse -- live, and when recovery re-dispatches after a kill or a power loss.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqlab.clock import ManualClock
from rmqlab.codec.batch import MessageBatch
from rmqlab.codec.flags import INNER_BATCH_FLAG
from rmqlab.config import MessageStoreConfig
from rmqlab.store.message import Message
from rmqlab.store.message_store import MessageStore
from rmqlab.store.results import PutMessageStatus
from rmqlab.testing.crash import simulate_power_loss, simulate_process_kill
from tests.store.test_dispatch_batch import queue_and_index_bytes

NAMED = "%LMQ%room-1,%LMQ%room-2"


def _open(root: Path, clock: ManualClock, **kw: object) -> MessageStore:
    config = MessageStoreConfig.small(str(root), rocketmq_version="5.3.3", enable_multi_dispatch=True,
                                      enable_lmq=True, **kw)
    return MessageStore.open(str(root), config, clock=clock, threaded=False)


def _batch(n: int, uniq: str, props: dict[str, str], queue_id: int = 0) -> MessageBatch:
    """A 5.x producer's batch of ``n`` messages for topic B whose own properties carry ``props``."""
    b = MessageBatch.from_messages([Message("B", b"m%d" % i, tags="t", queue_id=queue_id) for i in range(n)],
                                   lambda: uniq)
    return MessageBatch("B", queue_id, b.body, properties={**b.properties, **props})


def _lmq_queues(store: MessageStore) -> list[tuple[str, int]]:
    return sorted((t, q) for t, q, _cq in store.consume_queue_store.all_queues() if t.startswith("%LMQ%"))


def _put_workload(store: MessageStore, clock: ManualClock) -> list[int]:
    """Batches naming LMQ queues (with and without offsets of the producer's), a single inner
    message naming them, a plain message naming them; returns the batches' record offsets."""
    store.create_topic("B", queue_type="BatchCQ")
    offsets = []
    for i, (n, props) in enumerate([
        (3, {"INNER_MULTI_DISPATCH": NAMED}),
        (2, {"INNER_MULTI_DISPATCH": NAMED, "INNER_MULTI_QUEUE_OFFSET": "5,7"}),  # offsets that parse
        (4, {"INNER_MULTI_DISPATCH": "%LMQ%room-1"}),
    ]):
        r = store.put_messages(_batch(n, f"U{i:030d}", props))
        assert r.ok, r
        offsets.append(r.wrote_offset)
        clock.advance(10)
    inner = Message("B", _batch(2, "V" * 31, {}).body, sys_flag=INNER_BATCH_FLAG, uniq_key="W" * 31,
                    properties={"INNER_NUM": "2", "INNER_MULTI_DISPATCH": NAMED})
    r = store.put_message(inner)  # an inner batch as a proxy hands it over: the same way in
    assert r.ok, r
    offsets.append(r.wrote_offset)
    return offsets


def _check(store: MessageStore, offsets: list[int]) -> None:
    bcq = store.consume_queue_store.find_batch_queue("B", 0, create=False)
    assert bcq is not None
    u = bcq.units()
    assert u["commit_log_offset"].tolist() == offsets
    assert u["msg_base_offset"].tolist() == [0, 3, 5, 9]  # moved by INNER_NUM, as ever
    assert u["batch_size"].tolist() == [3, 2, 4, 2]
    assert store.get_max_offset_in_queue("B", 0) == 11
    assert _lmq_queues(store) == []  # no LMQ unit: BatchConsumeQueue never multi-dispatches
    assert store.get_max_offset_in_queue("%LMQ%room-1", 0) == 0
    assert not any(k.startswith("%LMQ%") for k in store.commit_log.topic_queue_table)


def test_an_inner_batch_keeps_its_lmq_properties_and_gets_no_lmq_unit(tmp_path: Path) -> None:
    clock = ManualClock()
    with _open(tmp_path / "s", clock) as store:
        offsets = _put_workload(store, clock)
        recs = [store.look_message_by_offset(o) for o in offsets]
        assert all(r is not None for r in recs)
        props = [r.properties for r in recs]  # type: ignore[union-attr]
        assert "INNER_MULTI_QUEUE_OFFSET" not in props[0]  # not assigned (ConsumeQueue's job only)
        assert props[0]["WAIT"] == "true"  # not dropped either
        assert props[0]["INNER_MULTI_DISPATCH"] == NAMED
        assert props[1]["INNER_MULTI_QUEUE_OFFSET"] == "5,7"  # the producer's, as sent
        assert [p["INNER_BASE"] for p in props] == ["0", "3", "5", "9"]
        store.step()
        _check(store, offsets)
        # a plain message naming the same LMQ queue starts at 0: the batches moved no LMQ offset
        r = store.put_message(Message("Chat", b"x", properties={"INNER_MULTI_DISPATCH": "%LMQ%room-1"}))
        assert r.ok
        store.step()
        rec = store.look_message_by_offset(r.wrote_offset)
        assert rec is not None
        assert rec.properties["INNER_MULTI_QUEUE_OFFSET"] == "0"
        assert _lmq_queues(store) == [("%LMQ%room-1", 0)]
        assert store.get_max_offset_in_queue("%LMQ%room-1", 0) == 1
        with store.get_message("g", "%LMQ%room-1", 0, 0, 32) as got:
            assert [m.decode().body for m in got.messages] == [b"x"]


@pytest.mark.parametrize("crash", ["kill", "power-loss"])
def test_recovery_redispatches_them_the_same_way(tmp_path: Path, crash: str) -> None:
    """Undispatched (kill) or flushed then cut (power loss): the re-dispatch after the crash
    leaves the BatchCQ units and no LMQ queue, and the files equal a live dispatch's."""
    clock = ManualClock()
    live = tmp_path / "live"
    with _open(live, clock) as store:
        offsets = _put_workload(store, clock)
        store.step()
    root = tmp_path / "s"
    clock = ManualClock()
    store = _open(root, clock)
    assert _put_workload(store, clock) == offsets
    if crash == "kill":
        simulate_process_kill(store)  # never dispatched
    else:
        store.commit_log.mapped_file_queue.commit(0)  # the records are on disk, the queues are not
        store.commit_log.mapped_file_queue.flush(0)
        simulate_power_loss(store)
    with _open(root, ManualClock()) as again:
        assert again.get_max_phy_offset() == offsets[-1] + again.look_message_by_offset(offsets[-1]).store_size
        again.step()
        _check(again, offsets)
    assert queue_and_index_bytes(root)["batchconsumequeue/B/0/00000000000000000000"] == \
        queue_and_index_bytes(live)["batchconsumequeue/B/0/00000000000000000000"]
    assert not (root / "consumequeue" / "%LMQ%room-1").exists()


def test_past_the_lmq_limit_a_batch_naming_lmq_queues_is_refused_as_a_single_put_is(tmp_path: Path) -> None:
    """``checkLmqMessage`` runs in ``asyncPutMessage``, the way an inner batch goes in: rmqlab
    refuses there as for any message naming queues (5.x tests the wrong status, as 4.9.8 does)."""
    clock = ManualClock()
    with _open(tmp_path / "s", clock, max_lmq_consume_queue_num=1) as store:
        store.create_topic("B", queue_type="BatchCQ")
        for name in ("%LMQ%a", "%LMQ%b"):  # two LMQ queues: past the limit of 1
            assert store.put_message(Message("Chat", b"x", properties={"INNER_MULTI_DISPATCH": name})).ok
            store.step()
        r = store.put_messages(_batch(3, "U" * 31, {"INNER_MULTI_DISPATCH": "%LMQ%a"}))
        assert r.status is PutMessageStatus.LMQ_CONSUME_QUEUE_NUM_EXCEEDED
        assert store.get_max_offset_in_queue("B", 0) == 0
        assert store.put_messages(_batch(3, "V" * 31, {})).ok  # one naming none goes in
