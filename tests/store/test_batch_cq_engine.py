"""The engine side of 5.x BatchConsumeQueue (topics with ``queue.type=BatchCQ``, spec §3.8): a 5.x
store with BatchCQ topics opens, recovers, takes puts (a batch becomes ONE inner-batch record)
and answers get/min/max/by-time as 5.3.3 does; a 4.9.8 store ignores the attribute as 4.9.8 does."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from rmqlab.clock import ManualClock
from rmqlab.codec.batch import MessageBatch, decode_messages
from rmqlab.codec.batch_consume_queue_unit import pack_unit
from rmqlab.codec.flags import INNER_BATCH_FLAG, NEED_UNWRAP_FLAG
from rmqlab.codec.java_hash import java_hash
from rmqlab.codec.message import encode_message
from rmqlab.codec.properties import java_hashmap_order
from rmqlab.config import MessageStoreConfig
from rmqlab.errors import NotAStore, RmqlabError
from rmqlab.inspect import open_snapshot
from rmqlab.inspect.checks import verify
from rmqlab.store.message import Message
from rmqlab.store.message_filter import MessageFilter
from rmqlab.store.message_store import MessageStore
from rmqlab.store.results import GetMessageStatus, PutMessageStatus
from rmqlab.store.topic_config import TopicConfig
from rmqlab.testing.crash import simulate_power_loss
from tests.tree import tree_digest

V5 = "5.3.3"
BCQ_FILE = 46 * 64  # 64 units a file: files roll


def _cfg(root: str, version: str = V5, **kw: object) -> MessageStoreConfig:
    return MessageStoreConfig.small(root, rocketmq_version=version, mapper_file_size_batch_consume_queue=BCQ_FILE,
                                    **kw)


def _open(root: str, clock: ManualClock | None = None, version: str = V5) -> MessageStore:
    return MessageStore.open(root, _cfg(root, version), threaded=False, clock=clock)


class _TagFilter(MessageFilter):
    def __init__(self, tag: str) -> None:
        self.code = java_hash(tag)

    def is_matched_by_consume_queue(self, tags_code: int | None) -> bool:
        return tags_code is None or tags_code == self.code

    def is_matched_by_commit_log(self, buf: object) -> bool:
        return True


def _units(store: MessageStore, topic: str, qid: int) -> list[tuple[int, int, int, int]]:
    bcq = store.consume_queue_store.find_batch_queue(topic, qid, create=False)
    assert bcq is not None
    u = bcq.units()
    return list(zip(u["commit_log_offset"].tolist(), u["size"].tolist(), u["msg_base_offset"].tolist(),
                    u["batch_size"].tolist(), strict=True))


def test_a_batch_is_one_inner_batch_record_and_its_unit_bytes(tmp_path: Path) -> None:
    root = str(tmp_path / "s")
    clock = ManualClock()
    with _open(root, clock) as store:
        cfg = store.create_topic("B", queue_type="BatchCQ")
        assert cfg.attributes == {"queue.type": "BatchCQ"}
        msgs = [Message("B", f"body-{i}".encode(), tags="ta", keys=f"k{i}") for i in range(3)]
        r1 = store.put_messages(msgs)
        assert r1.ok
        assert r1.append_result.logics_offset == 0
        clock.advance(5)
        r2 = store.put_messages([Message("B", b"x" * 10), Message("B", b"y")])
        assert r1.append_result.msg_num == 3
        assert r2.ok
        assert r2.append_result.logics_offset == 3
        assert store.commit_log.topic_queue_table["B-0"] == 5
        store.step()
        rec1 = store.look_message_by_offset(r1.wrote_offset)
        rec2 = store.look_message_by_offset(r2.wrote_offset)
        assert rec1 is not None
        assert rec2 is not None
        assert rec1.sys_flag & (INNER_BATCH_FLAG | NEED_UNWRAP_FLAG) == INNER_BATCH_FLAG | NEED_UNWRAP_FLAG
        assert rec1.queue_offset == 0
        assert rec2.queue_offset == 3
        assert rec1.properties["INNER_NUM"] == "3"
        assert rec1.properties["INNER_BASE"] == "0"
        assert rec2.properties["INNER_NUM"] == "2"
        assert rec2.properties["INNER_BASE"] == "3"
        assert rec1.properties["CLUSTER"] == store.config.broker_cluster_name
        assert "UNIQ_KEY" in rec1.properties
        assert "TAGS" not in rec1.properties  # the batch message has no tags: tags code 0
        # the BODY is the batch as a producer encodes it (encodeMessages): the inner messages
        inner = decode_messages(bytes(rec1.body))
        assert [bytes(e.body) for e in inner] == [m.body for m in msgs]
        assert [e.properties["TAGS"] for e in inner] == ["ta"] * 3
        assert [e.properties["KEYS"] for e in inner] == ["k0", "k1", "k2"]
        draws = iter([*(e.properties["UNIQ_KEY"] for e in inner), rec1.properties["UNIQ_KEY"]])
        assert bytes(rec1.body) == MessageBatch.from_messages(msgs, draws.__next__).body  # a 5.x producer's bytes
        # 5.x properties string: one HashMap(128) that took the batch's own pairs, CLUSTER,
        # INNER_NUM, INNER_BASE, serialised in its iteration order, trailing 0x02
        raw = store.commit_log.get_message(r1.wrote_offset, r1.wrote_bytes)
        assert raw is not None
        with raw:
            assert bytes(raw.buffer).endswith(b"\x02")
        wire = java_hashmap_order(["WAIT", "UNIQ_KEY"])
        assert list(rec1.properties) == java_hashmap_order([*wire, "CLUSTER", "INNER_NUM", "INNER_BASE"], 128)
        # the whole record, encoded independently from the spec's layout (§2.1) with those fields
        expected = encode_message(
            topic="B", body=bytes(rec1.body), queue_id=0, flag=0, queue_offset=0, commit_log_offset=r1.wrote_offset,
            sys_flag=INNER_BATCH_FLAG | NEED_UNWRAP_FLAG, born_timestamp=rec1.born_timestamp,
            born_host=("127.0.0.1", 0), store_timestamp=rec1.store_timestamp, store_host=rec1.store_host,
            properties={k: rec1.properties[k] for k in rec1.properties})
        with store.commit_log.get_message(r1.wrote_offset, r1.wrote_bytes) as raw2:
            assert bytes(raw2.buffer) == expected
        # the unit, byte for byte (spec §3.8): compacted offset -1, reserved 0
        qfile = Path(root, "batchconsumequeue", "B", "0", "00000000000000000000").read_bytes()
        assert qfile[:46] == pack_unit(r1.wrote_offset, r1.wrote_bytes, 0, rec1.store_timestamp, 0, 3)
        assert qfile[46:92] == pack_unit(r2.wrote_offset, r2.wrote_bytes, 0, rec2.store_timestamp, 3, 2)
        assert qfile[38:46] == b"\xff\xff\xff\xff\x00\x00\x00\x00"
        assert not Path(root, "consumequeue", "B").exists()
    topics = json.loads(Path(root, "config", "topics.json").read_text())
    assert topics["topicConfigTable"]["B"]["attributes"] == {"queue.type": "BatchCQ"}


def test_a_message_batch_from_a_5x_producer_and_one_from_a_4x_producer(tmp_path: Path) -> None:
    root = str(tmp_path / "s")
    with _open(root) as store:
        store.create_topic("B", queue_type="BatchCQ")
        n = iter(range(1000))
        b5 = MessageBatch.from_messages([Message("B", b"a"), Message("B", b"b")], lambda: f"U{next(n):030d}")
        r = store.put_messages(b5)
        assert r.ok
        assert store.commit_log.topic_queue_table["B-0"] == 2
        # a 4.x producer's batch has no UNIQ_KEY of its own: a 5.3.3 broker stores separate records,
        # which carry no INNER_BASE, so its BatchConsumeQueue skips them (msgBaseOffset -1) and no
        # consumer can read them: rmqlab refuses the batch and says so
        b4 = MessageBatch.from_messages([Message("B", b"c"), Message("B", b"d")], lambda: f"V{next(n):030d}",
                                        client_version="4.9.8")
        r = store.put_messages(b4)
        assert r.status is PutMessageStatus.MESSAGE_ILLEGAL
        assert "skipped by its BatchConsumeQueue" in r.reason
        assert store.commit_log.topic_queue_table["B-0"] == 2
        store.step()
        assert [(b, k) for _o, _s, b, k in _units(store, "B", 0)] == [(0, 2)]
        assert store.get_max_offset_in_queue("B", 0) == 2


def test_java_refusals_and_single_puts(tmp_path: Path) -> None:
    root = str(tmp_path / "s")
    with _open(root) as store:
        store.create_topic("B", queue_type="BatchCQ")
        store.create_topic("P")
        # INNER_NUM on a message that is not an inner batch: MESSAGE_ILLEGAL (5.x asyncPutMessage)
        r = store.put_message(Message("P", b"x", properties={"INNER_NUM": "2"}))
        assert r.status is PutMessageStatus.MESSAGE_ILLEGAL
        assert "not an inner batch" in r.reason
        # an inner batch for a topic that is not BatchCQ: MESSAGE_ILLEGAL
        r = store.put_message(Message("P", b"x", sys_flag=INNER_BATCH_FLAG, properties={"INNER_NUM": "2"}))
        assert r.status is PutMessageStatus.MESSAGE_ILLEGAL
        assert "BatchCQ" in r.reason
        r = store.put_message(Message("B", b"x", sys_flag=INNER_BATCH_FLAG, properties={"INNER_NUM": "x"}))
        assert r.status is PutMessageStatus.MESSAGE_ILLEGAL
        # a user-made inner batch for the BatchCQ topic: INNER_BASE added, offset moves by INNER_NUM
        r = store.put_message(Message("B", b"x", tags="red", sys_flag=INNER_BATCH_FLAG, properties={"INNER_NUM": "4"}))
        assert r.ok
        assert r.append_result.logics_offset == 0
        # a plain single message to a BatchCQ topic: 5.3.3 stores it with the next queue offset but
        # dispatches it with msgBaseOffset -1, so it gets NO unit and is never consumed: refused
        r = store.put_message(Message("B", b"single"))
        assert r.status is PutMessageStatus.MESSAGE_ILLEGAL
        assert "queue.type=BatchCQ" in r.reason
        assert store.commit_log.topic_queue_table["B-0"] == 4
        r = store.put_messages([Message("B", b"single")])  # a batch of one: an inner batch
        assert r.ok
        assert r.append_result.logics_offset == 4
        r = store.put_messages([Message("B", b"p"), Message("B", b"q")])
        assert r.ok
        assert r.append_result.logics_offset == 5
        store.step()
        units = _units(store, "B", 0)
        assert [(b, k) for _o, _s, b, k in units] == [(0, 4), (4, 1), (5, 2)]
        rec = store.look_message_by_offset(units[0][0])
        assert rec is not None
        assert rec.properties["INNER_BASE"] == "0"
        assert rec.properties["TAGS"] == "red"
        assert store.get_max_offset_in_queue("B", 0) == 7
        assert store.get_min_offset_in_queue("B", 0) == 0
        # the unit's tags code is the record's: a tag filter passes the red batch only
        g = store.get_message("g", "B", 0, 0, 32, _TagFilter("red"))
        with g:
            assert g.status is GetMessageStatus.FOUND
            assert g.batch_sizes == [4]
            assert g.message_count == 4
            assert g.filtered_count == 2  # the batch of one and the batch of two
            assert g.next_begin_offset == 7
        g = store.get_message("g", "B", 0, 0, 32, _TagFilter("blue"))
        assert g.status is GetMessageStatus.NO_MATCHED_MESSAGE
        assert g.next_begin_offset == 7
        assert not g.messages
    # after a restart the queue offset comes from the BatchConsumeQueue (5.x batchTopicQueueTable)
    with _open(root) as store:
        assert store.commit_log.topic_queue_table["B-0"] == 7


def _fill(store: MessageStore, clock: ManualClock, rng: random.Random, n_batches: int
          ) -> dict[tuple[str, int], list[tuple[int, int, int, int, int]]]:
    """Batches of 1..16 messages into B/0, B/1 and plain puts into P: per BCQ queue, the
    expected units (offset, size, base, batch, store ts)."""
    expected: dict[tuple[str, int], list[tuple[int, int, int, int, int]]] = {("B", 0): [], ("B", 1): []}
    base = {q: store.commit_log.topic_queue_table.get(f"B-{q}", 0) for q in (0, 1)}
    for i in range(n_batches):
        qid = rng.randrange(2)
        k = rng.randint(1, 16)
        clock.advance(rng.randint(0, 3))
        msgs = [Message("B", os.urandom(rng.randint(1, 120)), tags=f"t{j % 3}", queue_id=qid) for j in range(k)]
        r = store.put_messages(msgs)
        assert r.ok, r
        assert r.append_result.logics_offset == base[qid]
        expected[("B", qid)].append((r.wrote_offset, r.wrote_bytes, base[qid], k, clock.now_ms()))
        base[qid] += k
        if i % 3 == 0:
            assert store.put_message(Message("P", b"plain-%d" % i, tags="p")).ok
        if i % 50 == 0:
            store.step()
    store.step()
    return expected


def _check_answers(store: MessageStore, expected: dict[tuple[str, int], list[tuple[int, int, int, int, int]]]
                   ) -> None:
    for (topic, qid), units in expected.items():
        assert [(o, s, b, k) for o, s, b, k, _t in units] == _units(store, topic, qid)
        end = units[-1][2] + units[-1][3]
        assert store.get_max_offset_in_queue(topic, qid) == end
        assert store.get_min_offset_in_queue(topic, qid) == 0
        # every queue offset: the record of the batch holding it
        for o, _s, b, k, t in units:
            for q in (b, b + k - 1):
                assert store.get_commit_log_offset_in_queue(topic, qid, q) == o
                assert store.get_message_store_timestamp(topic, qid, q) == t
        # by time (LOWER): the first record stored at or after the time
        firsts: dict[int, int] = {}
        for _o, _s, b, _k, t in units:
            firsts.setdefault(t, b)
        for t, b in list(firsts.items())[::7]:
            assert store.get_offset_in_queue_by_time(topic, qid, t) == b
        assert store.get_offset_in_queue_by_time(topic, qid, 0) == 0
        assert store.get_offset_in_queue_by_time(topic, qid, units[-1][4] + 10_000) == units[-1][2]
        # a consumer pulling 32 at a time from 0 sees every record once, in order
        offset, seen, count = 0, [], 0
        while offset < end:
            g = store.get_message("g", topic, qid, offset, 32)
            with g:
                assert g.status is GetMessageStatus.FOUND, (offset, g.status)
                assert g.message_count <= 32 or len(g.messages) == 1
                seen += g.commit_log_offsets
                count += g.message_count
                assert offset < g.next_begin_offset
                offset = g.next_begin_offset
        assert seen == [u[0] for u in units]
        assert count == end
        g = store.get_message("g", topic, qid, end, 32)
        assert g.status is GetMessageStatus.OFFSET_OVERFLOW_ONE
        assert g.next_begin_offset == end
        # from inside a batch: its whole record comes back, and the pull goes on after the batch
        o, _s, b, k, _t = next(u for u in units if u[3] > 2)
        g = store.get_message("g", topic, qid, b + 1, 1)
        with g:
            assert g.commit_log_offsets == [o]
            assert g.batch_sizes == [k]
            assert g.next_begin_offset == b + k
            rec = g.messages[0].decode()
            assert int(rec.properties["INNER_BASE"]) == b
            assert len(decode_messages(bytes(rec.body))) == k


def test_thousands_of_messages_in_batches_reopen_and_answer(tmp_path: Path) -> None:
    root = str(tmp_path / "s")
    clock = ManualClock()
    rng = random.Random(7)
    with _open(root, clock) as store:
        store.create_topic("B", queue_type="BatchCQ")
        expected = _fill(store, clock, rng, 400)
        assert sum(u[3] for us in expected.values() for u in us) > 3000
        assert len(os.listdir(Path(root, "batchconsumequeue", "B", "0"))) > 1  # files rolled
        assert len(os.listdir(Path(root, "commitlog"))) > 1
        _check_answers(store, expected)
    with _open(root, clock) as store:  # clean reopen: normal recovery
        _check_answers(store, expected)
        # dispatch resumes after the last record a batch queue holds (not at its start, the
        # queue's max physic offset): that record is not indexed twice
        last = max(u[0] for us in expected.values() for u in us)
        rec = store.look_message_by_offset(last)
        assert rec is not None
        assert store.query_message("B", rec.properties["UNIQ_KEY"]).phy_offsets == [last]
        assert store.commit_log.topic_queue_table["B-0"] == expected[("B", 0)][-1][2] + expected[("B", 0)][-1][3]
        more = _fill(store, clock, rng, 30)
        for key, units in more.items():
            expected[key] = expected[key] + units
        store.abandon()
    with _open(root, clock) as store:  # abnormal recovery re-dispatches
        assert not store.last_exit_ok
        _check_answers(store, expected)
    # the BCQ files a 5.x store wrote are what verify expects (no errors)
    with open_snapshot(root) as snap:
        errors = [f for f in verify(snap) if f.severity == "error"]
    assert errors == []


def test_rebuilt_from_the_commit_log_when_the_queue_files_are_gone(tmp_path: Path) -> None:
    root = str(tmp_path / "s")
    clock = ManualClock()
    with _open(root, clock) as store:
        store.create_topic("B", queue_type="BatchCQ")
        expected = _fill(store, clock, random.Random(3), 120)
        store.abandon()
    for d in Path(root, "batchconsumequeue", "B").iterdir():
        for f in d.iterdir():
            f.unlink()
    with _open(root, clock) as store:
        _check_answers(store, expected)


def test_a_commit_log_cut_mid_batch_drops_the_units_past_it(tmp_path: Path) -> None:
    root = str(tmp_path / "s")
    clock = ManualClock()
    with _open(root, clock) as store:
        store.create_topic("B", queue_type="BatchCQ")
        expected = _fill(store, clock, random.Random(11), 200)
        store.abandon()
    units = sorted(expected[("B", 0)] + expected[("B", 1)])
    victim = units[len(units) // 2 + 3]
    cut = victim[0] + victim[1] // 2  # inside the record of a batch
    file_size = 64 * 1024
    name = Path(root, "commitlog", f"{cut - cut % file_size:020d}")
    data = bytearray(name.read_bytes())
    data[cut % file_size :] = bytes(len(data) - cut % file_size)
    name.write_bytes(bytes(data))
    for later in sorted(Path(root, "commitlog").iterdir()):
        if int(later.name) > int(name.name):
            later.unlink()
    with open_snapshot(root) as snap:
        plan = snap.explain_recovery(rocketmq_version=V5)
    assert plan.process_offset == victim[0]
    assert any(s.phase == "batch_consume_queue" for s in plan.steps)
    with _open(root, clock) as store:
        assert store.recovery_plan is not None
        assert store.recovery_plan.process_offset == victim[0]
        assert any(s.phase == "batch_consume_queue" for s in store.recovery_plan.steps)
        for key in expected:
            kept = [u for u in expected[key] if u[0] < victim[0]]
            assert _units(store, *key) == [(o, s, b, k) for o, s, b, k, _t in kept]
            end = kept[-1][2] + kept[-1][3] if kept else 0
            assert store.get_max_offset_in_queue(*key) == end
            assert store.commit_log.topic_queue_table[f"{key[0]}-{key[1]}"] == end
        # the queue offset is restored: the next batch of the cut queue starts where the queue ends
        qid = 0 if victim in expected[("B", 0)] else 1
        r = store.put_messages([Message("B", b"again", queue_id=qid)] * 2)
        assert r.ok
        assert r.append_result.logics_offset == victim[2]
        store.step()
        assert _units(store, "B", qid)[-1] == (r.wrote_offset, r.wrote_bytes, victim[2], 2)


def test_load_refuses_a_queue_of_the_wrong_kind(tmp_path: Path) -> None:
    root = str(tmp_path / "s")
    with _open(root) as store:
        store.create_topic("P")
        assert store.put_message(Message("P", b"x")).ok
    path = Path(root, "config", "topics.json")
    obj = json.loads(path.read_text())
    obj["topicConfigTable"]["P"]["attributes"] = {"queue.type": "BatchCQ"}
    path.write_text(json.dumps(obj))
    with pytest.raises(NotAStore, match="queue type of topic: P should be SimpleCQ, but is BatchCQ"):
        _open(root)
    obj["topicConfigTable"]["P"]["attributes"] = {}
    path.write_text(json.dumps(obj))
    qdir = Path(root, "batchconsumequeue", "Q", "0")
    qdir.mkdir(parents=True)
    (qdir / "00000000000000000000").write_bytes(bytes(BCQ_FILE))
    with pytest.raises(NotAStore, match="queue type of topic: Q should be BatchCQ, but is SimpleCQ"):
        _open(root)


def test_a_topic_config_made_batch_cq_by_hand_opens(tmp_path: Path) -> None:
    root = str(tmp_path / "s")
    with _open(root) as store:
        store.topic_config_manager.update(TopicConfig("Batched", attributes={"queue.type": "BatchCQ"}))
        assert store.put_messages([Message("Batched", b"a"), Message("Batched", b"b")]).ok
    with _open(root) as store:
        assert store.get_max_offset_in_queue("Batched", 0) == 2
        assert store.consume_queue_store.find_consume_queue("Batched", 0, create=False) is None


def test_4_9_8_ignores_the_attribute_as_its_topic_config_does(tmp_path: Path) -> None:
    root = str(tmp_path / "s")
    with _open(root, version="4.9.8") as store:
        store.create_topic("Batched", queue_type="BatchCQ")
        store.topic_config_manager.update(TopicConfig("Batched", attributes={"queue.type": "BatchCQ"}))
        assert store.put_message(Message("Batched", b"y")).ok
        r = store.put_messages([Message("Batched", b"a"), Message("Batched", b"b")])
        assert r.ok
        assert r.append_result.msg_num == 2
        # 4.9.8 has no inner-batch checks: INNER_NUM on a plain message is stored
        assert store.put_message(Message("Batched", b"z", properties={"INNER_NUM": "3"})).ok
        store.step()
        assert store.get_max_offset_in_queue("Batched", 0) == 4
        g = store.get_message("g", "Batched", 0, 0, 32)
        with g:
            assert g.message_count == 4
            assert g.batch_sizes == []
    assert not Path(root, "batchconsumequeue").exists()
    assert Path(root, "consumequeue", "Batched", "0").is_dir()
    with _open(root, version="4.9.8") as store:
        assert store.get_max_offset_in_queue("Batched", 0) == 4


@pytest.mark.parametrize("clean", [True, False], ids=["clean-exit", "abnormal-exit"])
def test_a_5x_store_with_batch_queues_opened_as_4_9_8_is_refused(tmp_path: Path, clean: bool) -> None:
    """4.9.8 knows no batchconsumequeue/: its reput would dispatch the batch topic's records into
    a new consumequeue/Batched/, after which 5.x refuses the store for good. rmqlab refuses the
    4.9.8 open instead (naming the file and the version to use), changes no byte, and the store
    opens as 5.3.3 with every answer as before; the dry run's first note says the same."""
    root = str(tmp_path / "s")
    store = _open(root)
    store.create_topic("Batched", 1, queue_type="BatchCQ")
    for i in range(4):
        assert store.put_message(Message("Plain", b"p", keys=[f"p{i}"])).ok
        assert store.put_messages([Message("Batched", b"b%d" % j) for j in range(3)]).ok
    store.step()
    if clean:
        store.shutdown()
    else:
        store.abandon()

    before = tree_digest(root)
    with pytest.raises(NotAStore) as e:
        _open(root, version="4.9.8")
    first = Path(root, "batchconsumequeue", "Batched", "0", "00000000000000000000")
    assert f"{first}: a BatchConsumeQueue file, which only RocketMQ 5.x writes" in str(e.value)
    assert "Open it with rocketmq_version='5.3.3'" in str(e.value)
    assert tree_digest(root) == before
    assert not Path(root, "consumequeue", "Batched").exists()
    with open_snapshot(root) as snap:
        assert snap.explain_recovery(rocketmq_version="4.9.8").notes[0].startswith(f"{first}: a BatchConsumeQueue")
        assert not any("BatchConsumeQueue file" in n for n in snap.explain_recovery(rocketmq_version=V5).notes)
    with _open(root) as store:
        assert store.get_max_offset_in_queue("Batched", 0) == 12
        assert store.get_max_offset_in_queue("Plain", 0) == 4


def test_cleanup_and_topic_deletion_cover_batch_queues(tmp_path: Path) -> None:
    root = str(tmp_path / "s")
    clock = ManualClock()
    with _open(root, clock) as store:
        store.create_topic("B", queue_type="BatchCQ")
        expected = _fill(store, clock, random.Random(5), 300)
        units = expected[("B", 0)]
        files = sorted(os.listdir(Path(root, "batchconsumequeue", "B", "0")))
        assert len(files) >= 3
        # every unit of the first file points below this offset: the first file is expired
        cut = units[64][0]
        plan = store.clean_consume_queue.plan(min_offset=cut)
        assert plan.queue_files["B-0"] == files[:1]
        assert store.consume_queue_store.delete_expired_files(cut) >= 1
        assert sorted(os.listdir(Path(root, "batchconsumequeue", "B", "0"))) == files[1:]
        assert store.get_min_offset_in_queue("B", 0) == units[64][2]
        g = store.get_message("g", "B", 0, 0, 8)
        assert g.status is GetMessageStatus.OFFSET_TOO_SMALL
        assert g.next_begin_offset == units[64][2]
        assert store.clean_unused_topic({"P"}) == ["B"]
        assert not Path(root, "batchconsumequeue", "B").exists()
        assert store.get_max_offset_in_queue("B", 0) == 0
        assert "B-0" not in store.commit_log.topic_queue_table


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_threaded_store_puts_and_dispatches_batches(tmp_path: Path, flush: str) -> None:
    root = str(tmp_path / "s")
    with MessageStore.open(root, _cfg(root, flush_disk_type=flush), threaded=True) as store:
        store.create_topic("B", queue_type="BatchCQ")
        total = 0
        for i in range(200):
            k = i % 7 + 1
            r = store.put_messages([Message("B", b"t%d" % j) for j in range(k)])
            assert r.ok
            assert r.append_result.logics_offset == total
            total += k
            assert store.put_message(Message("P", b"p")).ok
        assert store.wait_dispatched(10)
        assert store.get_max_offset_in_queue("B", 0) == total
        assert store.get_max_offset_in_queue("P", 0) == 200
        g = store.get_message("g", "B", 0, 0, 32)
        with g:
            assert g.status is GetMessageStatus.FOUND
            assert g.message_count == sum(g.batch_sizes) <= 32
    with _open(root) as store:
        assert store.get_max_offset_in_queue("B", 0) == total


@pytest.mark.parametrize("flush_mode", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_a_power_loss_keeps_every_flushed_batch(tmp_path: Path, flush_mode: str) -> None:
    """A power cut (every byte past each file's flushed position zeroed, batch queue files
    included) loses no batch whose record was flushed (SYNC_FLUSH: none acknowledged), and the
    batch queues recovered from what is left answer as if only those batches had been put."""
    root = str(tmp_path / "s")
    clock = ManualClock()
    rng = random.Random(11)
    cfg = _cfg(root, flush_disk_type=flush_mode)
    store = MessageStore.open(root, cfg, threaded=False, clock=clock)
    store.create_topic("B", queue_type="BatchCQ")
    expected = _fill(store, clock, rng, 200)
    more = _fill(store, clock, rng, 7)  # the last few, some not flushed (ASYNC_FLUSH), queues not built
    flushed = store.commit_log.mapped_file_queue.flushed_where
    cut = simulate_power_loss(store)
    # the batch queues lose their unflushed tail too (their last files were never flushed here)
    assert any("batchconsumequeue" in p for p in [*cut.zeroed, *cut.deleted])
    for key, units in more.items():
        kept = [u for u in units if u[0] + u[1] <= flushed]
        if flush_mode == "SYNC_FLUSH":
            assert kept == units  # acknowledged = flushed
        expected[key] = expected[key] + kept
    with MessageStore.open(root, cfg, threaded=False, clock=clock) as store:
        assert not store.last_exit_ok
        _check_answers(store, expected)


def test_a_memory_topic_cannot_be_batch_cq(tmp_path: Path) -> None:
    root = str(tmp_path / "s")
    with MessageStore.open(root, _cfg(root, memory_topic_enable=True), threaded=False) as store:
        with pytest.raises(RmqlabError, match="memory topic cannot be BatchCQ"):
            store.create_topic("M", memory=True, queue_type="BatchCQ")
        assert "M" not in store.topic_config_manager
        store.create_topic("M", memory=True)  # a plain memory topic still is
        assert store.put_messages([Message("M", b"x")] * 3).ok


def test_delay_and_timer_properties_in_a_batch_for_a_batch_cq_topic(tmp_path: Path) -> None:
    """A delay level in a batch is refused as RocketMQ's client refuses it; a timer property
    (TIMER_DELAY_SEC) of the messages of a batch stays inside the record's body, where 5.3.3's
    timer hook, which reads the record's own properties, never sees it: the batch is stored and
    readable at once, as a 5.3.3 broker stores it."""
    root = str(tmp_path / "s")
    with _open(root) as store:
        store.create_topic("B", queue_type="BatchCQ")
        r = store.put_messages([Message("B", b"x", delay_time_level=3) for _ in range(3)])
        assert r.status is PutMessageStatus.MESSAGE_ILLEGAL
        assert "TimeDelayLevel is not supported for batching" in r.reason
        r = store.put_messages([Message("B", b"t%d" % i, properties={"TIMER_DELAY_SEC": "10"}) for i in range(3)])
        assert r.ok
        store.step()
        with store.get_message("g", "B", 0, 0, 32) as got:
            assert got.status is GetMessageStatus.FOUND
            assert got.batch_sizes == [3]
            rec = got.messages[0].decode()
            assert "TIMER_DELAY_SEC" not in rec.properties
            inner = decode_messages(bytes(rec.body))
            assert [m.properties["TIMER_DELAY_SEC"] for m in inner] == ["10"] * 3
