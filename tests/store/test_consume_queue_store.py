"""ConsumeQueueStore: the table, load rules, store-wide operations, and the reference stores.

The reference checks compare with what the real RocketMQ 4.9.8 reported after reopening the
fixture (``tests/fixtures/*/manifest.json``, camelCase keys); fixtures are copied to tmp first.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from rmqlab.store.consume_queue import ConsumeQueue
from rmqlab.store.consume_queue_store import ConsumeQueueStore

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
UNIT = 20
FILE = 8 * UNIT


def make_store(root: Path, version: str = "4.9.8", size: int = FILE) -> ConsumeQueueStore:
    return ConsumeQueueStore(str(root), size, rocketmq_version=version)


def put_many(store: ConsumeQueueStore, topic: str, queue_id: int, phys: list[int]) -> None:
    for i, phy in enumerate(phys):
        assert store.put_message_position_info(topic, queue_id, phy, 100, 0, i)


# --- the table ---------------------------------------------------------------------------------


def test_find_and_put(tmp_path):
    store = make_store(tmp_path / "consumequeue")
    assert store.find_consume_queue("TopicA", 0, create=False) is None
    cq = store.find_consume_queue("TopicA", 0)
    assert isinstance(cq, ConsumeQueue)
    assert store.find_consume_queue("TopicA", 0) is cq
    assert store.find_consume_queue("TopicA", 0, create=False) is cq
    assert not os.path.exists(cq.queue_dir)  # no file until the first unit
    put_many(store, "TopicA", 1, [0, 300, 600])
    put_many(store, "TopicB", 0, [100, 400])
    pairs = [(t, q) for t, q, _ in store.all_queues()]
    assert pairs == [("TopicA", 0), ("TopicA", 1), ("TopicB", 0)]
    assert store.get_max_phy_offset_in_consume_queue() == 700
    assert store.find_consume_queue("TopicA", 1).get_max_offset_in_queue() == 3


def test_load_skips_non_directories_and_non_int_queue_dirs(tmp_path):
    root = tmp_path / "consumequeue"
    writer = make_store(root)
    put_many(writer, "TopicA", 0, [0, 100])
    put_many(writer, "TopicA", 7, [200])
    writer.flush(0)
    writer.shutdown()
    # 5.x RocksDB files directly in consumequeue/, and junk inside a topic dir
    for name in ("CURRENT", "MANIFEST-000005", "000012.sst", "OPTIONS-000007", "LOG"):
        (root / name).write_bytes(b"rocksdb")
    (root / "TopicA" / "abc").mkdir()
    (root / "TopicA" / "1x").mkdir()
    (root / "TopicA" / "2").write_bytes(b"a file, not a queue dir")
    (root / "bad.topic" / "0").mkdir(parents=True)  # not a valid topic name: skipped, listed
    store = make_store(root)
    assert store.load()
    assert sorted(store.consume_queue_table) == ["TopicA"]
    assert sorted(store.consume_queue_table["TopicA"]) == [0, 7]
    assert [p for p, _ in store.skipped] == [str(root / "bad.topic")]
    assert store.recover() == 300
    assert store.recover_topic_queue_table(0) == {"TopicA-0": 2, "TopicA-7": 1}


def test_load_fails_on_a_wrong_sized_file(tmp_path):
    root = tmp_path / "consumequeue"
    (root / "TopicA" / "0").mkdir(parents=True)
    (root / "TopicA" / "0" / "00000000000000000000").write_bytes(bytes(FILE - 20))
    assert make_store(root).load() is False


def test_load_missing_root_is_empty(tmp_path):
    store = make_store(tmp_path / "nowhere")
    assert store.load()
    assert store.recover() == -1
    assert store.recover_topic_queue_table(0) == {}


def test_store_wide_truncate_correct_delete_flush_destroy(tmp_path):
    root = tmp_path / "consumequeue"
    store = make_store(root)
    # two interleaved queues over a commit log of 100-byte records, 3 CQ files each
    put_many(store, "TopicA", 0, [200 * i for i in range(20)])
    put_many(store, "TopicB", 0, [200 * i + 100 for i in range(20)])
    put_many(store, "TopicC", 0, [5000])
    assert store.flush(0) is False
    while not store.flush(0):
        pass
    sleeps = []
    assert store.delete_expired_files(1600, sleep_between=lambda: sleeps.append(1)) == 2
    assert len(sleeps) == 2  # once per queue that deleted something
    a = store.find_consume_queue("TopicA", 0)
    b = store.find_consume_queue("TopicB", 0)
    c = store.find_consume_queue("TopicC", 0)
    assert (a.get_min_offset_in_queue(), b.get_min_offset_in_queue()) == (8, 8)
    store.truncate_dirty_logic_files(2500)  # the commit log now ends at 2500
    assert (a.get_max_offset_in_queue(), b.get_max_offset_in_queue()) == (13, 12)
    assert (a.max_physic_offset, b.max_physic_offset) == (2500, 2400)
    assert (c.get_max_offset_in_queue(), c.max_physic_offset) == (0, 2500)  # all gone
    assert store.get_max_phy_offset_in_consume_queue() == 2500
    store.correct_min_offsets(2100)
    assert (a.get_min_offset_in_queue(), b.get_min_offset_in_queue()) == (11, 10)
    store.destroy()
    assert store.consume_queue_table == {}
    assert not any(p.is_file() for p in root.rglob("*"))


# --- reference stores ----------------------------------------------------------------------------


def _manifest(scenario: str) -> dict:
    return json.loads((FIXTURES / scenario / "manifest.json").read_text(encoding="utf-8"))


def _copy_store(tmp_path: Path, scenario: str) -> Path:
    dst = tmp_path / scenario
    shutil.copytree(FIXTURES / scenario / "store" / "consumequeue", dst / "consumequeue")
    return dst


def _loaded(store_root: Path, manifest: dict) -> ConsumeQueueStore:
    size = manifest["messageStoreConfig"]["mappedFileSizeConsumeQueue"]
    store = ConsumeQueueStore(str(store_root / "consumequeue"), int(size), rocketmq_version="4.9.8")
    assert store.load()
    return store


def test_reference_clean_small_min_max_offsets(tmp_path):
    manifest = _manifest("clean-small")
    after = manifest["reopen"]["afterReopen"]
    store = _loaded(_copy_store(tmp_path, "clean-small"), manifest)
    cq_max = store.recover()
    queues = after["queues"]
    assert cq_max == max(q["cqMaxPhysicOffset"] for q in queues)
    table = store.recover_topic_queue_table(after["minPhyOffset"])
    assert len(table) == len(queues)
    for q in queues:
        cq = store.find_consume_queue(q["topic"], q["queueId"], create=False)
        assert cq is not None, q
        got = {
            "minOffsetInQueue": cq.get_min_offset_in_queue(),
            "maxOffsetInQueue": cq.get_max_offset_in_queue(),
            "cqMaxPhysicOffset": cq.max_physic_offset,
            "cqMinLogicOffset": cq.min_logic_offset,
        }
        assert got == {k: q[k] for k in got}, (q["topic"], q["queueId"])
        assert table[f"{q['topic']}-{q['queueId']}"] == q["maxOffsetInQueue"]
    store.shutdown()


def test_reference_clean_small_units_match_messages(tmp_path):
    manifest = _manifest("clean-small")
    store = _loaded(_copy_store(tmp_path, "clean-small"), manifest)
    store.recover()
    for m in manifest["messages"]:
        cq = store.find_consume_queue(m["topic"], m["queueId"], create=False)
        entry = m["cqEntryAtWrite"]
        expected = (entry["commitLogOffset"], entry["size"], entry["tagsCode"])
        assert cq.get_unit(m["queueOffset"]) == expected, m["index"]
    store.shutdown()


def test_reference_clean_small_offset_by_time_4_9_8(tmp_path):
    manifest = _manifest("clean-small")
    after = manifest["reopen"]["afterReopen"]
    store_root = _copy_store(tmp_path, "clean-small")
    store = _loaded(store_root, manifest)
    store.recover()
    store.recover_topic_queue_table(after["minPhyOffset"])
    # 4.9.8 picks the CQ file by mtime: restore the mtimes the real store saw at query time
    for rel, ms in after["consumeQueueFileMtimesAtQuery"].items():
        os.utime(store_root / rel, ns=(ms * 1_000_000, ms * 1_000_000))
    records = {m["commitLogOffset"]: m["storeTimestamp"] for m in manifest["messages"]}
    cl_min, cl_max = after["minPhyOffset"], after["maxPhyOffset"]

    def pickup(phy: int, size: int) -> int:
        if phy < cl_min or phy + size > cl_max or phy not in records:
            return -1
        return records[phy]

    mismatches = []
    for case in after["getOffsetInQueueByTime"]:
        cq = store.find_consume_queue(case["topic"], case["queueId"], create=False)
        got = cq.get_offset_in_queue_by_time(
            case["timestamp"], commit_log_min_offset=cl_min, pickup_store_timestamp=pickup
        )
        if got != case["offset"]:
            mismatches.append((case, got))
    assert len(after["getOffsetInQueueByTime"]) == 48
    assert mismatches == []
    store.shutdown()


def test_reference_crash_tail_consume_queues_lag(tmp_path):
    """crash-tail: the CQ files hold only the dispatched messages; recovery of the CQs alone (no
    commitlog re-dispatch) ends each queue right after its last dispatched unit."""
    manifest = _manifest("crash-tail")
    store = _loaded(_copy_store(tmp_path, "crash-tail"), manifest)
    cq_max = store.recover()
    expected: dict[tuple[str, int], tuple[int, int]] = {}
    for m in manifest["messages"]:
        if m["dispatchedBeforeEnd"]:
            key = (m["topic"], m["queueId"])
            count, end = expected.get(key, (0, -1))
            expected[key] = (count + 1, max(end, m["commitLogOffset"] + m["storeSize"]))
    got = {
        (t, q): (cq.get_max_offset_in_queue(), cq.max_physic_offset)
        for t, q, cq in store.all_queues()
    }
    assert got == expected
    assert cq_max == max(end for _, end in expected.values())
    store.shutdown()


@pytest.mark.parametrize("scenario", ["clean-small", "crash-tail"])
def test_reference_read_only_load_matches(tmp_path, scenario):
    """A read-only store over the same files recovers the same offsets and changes no byte."""
    manifest = _manifest(scenario)
    root = _copy_store(tmp_path, scenario)
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    size = int(manifest["messageStoreConfig"]["mappedFileSizeConsumeQueue"])
    ro = ConsumeQueueStore(str(root / "consumequeue"), size, read_only=True)
    rw = ConsumeQueueStore(str(root / "consumequeue"), size)
    assert ro.load()
    assert rw.load()
    assert ro.recover() == rw.recover()
    assert [(t, q, c.get_max_offset_in_queue()) for t, q, c in ro.all_queues()] == [
        (t, q, c.get_max_offset_in_queue()) for t, q, c in rw.all_queues()
    ]
    ro.shutdown()
    rw.shutdown()
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before
