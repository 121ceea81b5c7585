"""A SLAVE's CQ put also moves the checkpoint's physicMsgTimestamp (spec §3.2 step 6, §5.1).

``ConsumeQueue.putMessagePositionInfoWrapper`` (4.9.8 and 5.x, and the BatchConsumeQueue's in
5.x): after a successful put, ``setPhysicMsgTimestamp(storeTimestamp)`` when the broker role is
SLAVE (or DLedger), then ``setLogicsMsgTimestamp(storeTimestamp)``. A master leaves the physic
timestamp to the CommitLog flush. The records are appended raw past the reput offset, as an HA
master's bytes would leave them on a slave, and dispatched batched (columns) and one by one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqlab.clock import ManualClock
from rmqlab.codec.message import encode_message
from rmqlab.config import MessageStoreConfig
from rmqlab.store import dispatch
from rmqlab.store.dispatch import ReputMessageService
from rmqlab.store.message_store import MessageStore

T0 = 1_764_000_000_000


def _append_raw(store: MessageStore, n: int) -> None:
    cl = store.commit_log
    with cl.put_lock:
        mf = cl.mapped_file_queue.get_last_mapped_file_for(0)
        for i in range(n):
            at = mf.file_from_offset + mf.wrote_position
            rec = encode_message(topic="T", body=b"raw-%d" % i, queue_offset=i, commit_log_offset=at,
                                 store_timestamp=T0 + i, born_timestamp=T0 + i, properties={"TAGS": "t"})
            assert mf.append_message(rec)


@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
@pytest.mark.parametrize("batched", [True, False], ids=["batched", "one-by-one"])
@pytest.mark.parametrize(("role", "physic"), [("SLAVE", T0 + 4), ("ASYNC_MASTER", 0)])
def test_cq_put_sets_physic_timestamp_on_a_slave_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      version: str, batched: bool, role: str, physic: int) -> None:
    if batched:
        monkeypatch.setattr(dispatch, "SMALL_ROUND_RECORDS", 0)
        monkeypatch.setattr(dispatch, "SMALL_ROUND_BYTES", 0)
    else:
        monkeypatch.setattr(ReputMessageService, "batching", lambda self: False)
    config = MessageStoreConfig.small(str(tmp_path), rocketmq_version=version, broker_role=role)
    store = MessageStore.open(str(tmp_path), config, clock=ManualClock(T0), threaded=False)
    try:
        _append_raw(store, 5)
        store.reput.run_once()
        assert store.get_max_offset_in_queue("T", 0) == 5
        assert store.checkpoint.logics_msg_timestamp == T0 + 4
        assert store.checkpoint.physic_msg_timestamp == physic
    finally:
        store.shutdown()


@pytest.mark.parametrize("role", ["SLAVE", "ASYNC_MASTER"])
def test_direct_dispatch_of_own_puts_sets_physic_timestamp_on_a_slave_only(tmp_path: Path, role: str) -> None:
    # the store's own puts leave dispatch hints: reput writes their units the direct way
    from rmqlab.store.message import Message

    config = MessageStoreConfig.small(str(tmp_path), rocketmq_version="5.3.3", broker_role=role)
    clock = ManualClock(T0)
    store = MessageStore.open(str(tmp_path), config, clock=clock, threaded=False)
    try:
        for _ in range(3):
            clock.advance(7)
            assert store.put_message(Message("T", b"own", tags="t")).ok
        store.reput.run_once()
        assert store.get_max_offset_in_queue("T", 0) == 3
        assert store.checkpoint.logics_msg_timestamp == T0 + 21
        assert store.checkpoint.physic_msg_timestamp == (T0 + 21 if role == "SLAVE" else 0)
    finally:
        store.shutdown()
