"""Open each real RocketMQ 4.9.8 store with MessageStore and reproduce its manifest's answers.

The manifest records what a second, real ``DefaultMessageStore`` reported after ``load()`` +
``start()`` on a copy: offsets, per-queue bounds, key queries, offsets by time (with the CQ file
mtimes it saw restored, since 4.9.8's lookup depends on them) and ``getMessage`` results.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from rmqlab.config import MessageStoreConfig
from rmqlab.store.message_filter import TagFilter
from rmqlab.store.message_store import MessageStore

FIXTURES = Path(__file__).parent.parent / "fixtures"


def _config(manifest: dict[str, Any], root: str) -> MessageStoreConfig:
    c = manifest["messageStoreConfig"]
    return MessageStoreConfig(
        store_path_root_dir=root,
        mapped_file_size_commit_log=c["mappedFileSizeCommitLog"],
        mapped_file_size_consume_queue=c["mappedFileSizeConsumeQueue"],
        max_hash_slot_num=c["maxHashSlotNum"],
        max_index_num=c["maxIndexNum"],
        file_reserved_time=c["fileReservedTime"],
        store_host=manifest["storeHost"],
        broker_cluster_name=manifest["brokerClusterName"],
    )


@pytest.fixture(scope="module", params=["clean-small", "crash-tail"])
def opened(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
           reference_manifest: Any) -> Any:
    name = request.param
    manifest = reference_manifest(name)
    root = tmp_path_factory.mktemp(name) / "store"
    shutil.copytree(FIXTURES / name / "store", root)
    store = MessageStore.open(str(root), _config(manifest, str(root)), threaded=False)
    after = manifest["reopen"]["afterReopen"]
    for rel, mtime_ms in after["consumeQueueFileMtimesAtQuery"].items():
        path = root / rel
        if path.exists():
            os.utime(path, ns=(mtime_ms * 1_000_000, mtime_ms * 1_000_000))
    yield name, store, manifest, root
    store.shutdown()


def test_recovery_mode_and_phy_offsets(opened: Any) -> None:
    name, store, manifest, _ = opened
    after = manifest["reopen"]["afterReopen"]
    assert store.recovery_plan.mode == ("normal" if name == "clean-small" else "abnormal")
    assert store.get_min_phy_offset() == after["minPhyOffset"]
    assert store.get_max_phy_offset() == after["maxPhyOffset"]
    assert store.dispatch_behind_bytes() == after["dispatchBehindBytes"]


def test_queue_bounds(opened: Any) -> None:
    _, store, manifest, _ = opened
    for q in manifest["reopen"]["afterReopen"]["queues"]:
        cq = store.consume_queue_store.find_consume_queue(q["topic"], q["queueId"], create=False)
        assert cq is not None, q
        got = (store.get_min_offset_in_queue(q["topic"], q["queueId"]),
               store.get_max_offset_in_queue(q["topic"], q["queueId"]),
               cq.max_physic_offset, cq.min_logic_offset)
        want = (q["minOffsetInQueue"], q["maxOffsetInQueue"], q["cqMaxPhysicOffset"], q["cqMinLogicOffset"])
        assert got == want, q


def test_every_message_is_where_the_manifest_says(opened: Any) -> None:
    _, store, manifest, _ = opened
    for m in manifest["messages"]:
        rec = store.look_message_by_offset(m["commitLogOffset"])
        assert rec is not None
        assert (rec.msg_id, rec.uniq_key) == (m["msgId"], m["uniqKey"])
        entry = m["afterReopen"]["cqEntryAfterRecovery"]
        unit = store.consume_queue_store.find_consume_queue(m["topic"], m["queueId"]).get_unit(m["queueOffset"])
        assert unit == (entry["commitLogOffset"], entry["size"], entry["tagsCode"]), m["index"]


def test_query_message(opened: Any) -> None:
    _, store, manifest, _ = opened
    for q in manifest["reopen"]["afterReopen"]["queryMessage"]:
        r = store.query_message(q["topic"], q["key"], q["maxNum"], q["begin"], q["end"])
        assert r.phy_offsets == q["resultCommitLogOffsets"], q
        assert r.index_last_update_timestamp == q["indexLastUpdateTimestamp"], q
        assert r.index_last_update_phyoffset == q["indexLastUpdatePhyoffset"], q
        # exact-key filtering: every returned message really carries the key
        want = set(q["manifestMessagesWithThisTopicAndKey"])
        assert {m.commit_log_offset for m in r.messages} <= want
        assert r.collisions_discarded == 0


def test_offset_in_queue_by_time(opened: Any) -> None:
    _, store, manifest, _ = opened
    for q in manifest["reopen"]["afterReopen"]["getOffsetInQueueByTime"]:
        got = store.get_offset_in_queue_by_time(q["topic"], q["queueId"], q["timestamp"])
        assert got == q["offset"], q


def test_get_message(opened: Any) -> None:
    _, store, manifest, _ = opened
    for q in manifest["reopen"]["afterReopen"]["getMessage"]:
        filt = TagFilter(q["filterTag"]) if q["filterTag"] else None
        with store.get_message(q["group"], q["topic"], q["queueId"], q["offset"], q["maxMsgNums"], filt) as r:
            got = (r.status.name, r.next_begin_offset, r.min_offset, r.max_offset, r.message_count,
                   r.buffer_total_size, r.commit_log_offsets)
        want = (q["status"], q["nextBeginOffset"], q["minOffset"], q["maxOffset"], q["messageCount"],
                q["bufferTotalSize"], q["commitLogOffsets"])
        assert got == want, q


def test_earliest_message_time(opened: Any) -> None:
    """getEarliestMessageTime(): per queue, the store time of the record its min-offset unit
    points at (-1 for a queue the store lacks); for the whole store 4.9.8 reads 2 x
    maxMessageSize (8 MiB) at the min offset, more than these 64 KiB files hold: -1."""
    _, store, manifest, _ = opened
    after = manifest["reopen"]["afterReopen"]
    c = manifest["messageStoreConfig"]
    assert c["maxMessageSize"] * 2 > c["mappedFileSizeCommitLog"]
    assert store.get_earliest_message_time() == -1
    by_queue = {(m["topic"], m["queueId"], m["queueOffset"]): m for m in manifest["messages"]}
    for q in after["queues"]:
        want = by_queue[q["topic"], q["queueId"], q["minOffsetInQueue"]]["storeTimestamp"]
        assert store.get_earliest_message_time(q["topic"], q["queueId"]) == want, q
    assert store.get_earliest_message_time("NoSuchTopic", 0) == -1
