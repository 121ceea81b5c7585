"""Snapshot frames against the reference stores' manifests (what the real RocketMQ wrote/answered)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rmqlab.inspect import open_snapshot

STORES = ("clean-small", "crash-tail")


@pytest.mark.parametrize("name", STORES)
def test_messages_equal_manifest(name: str, reference_store: Callable[[str], Path],
                                 reference_manifest: Callable[[str], dict[str, Any]]) -> None:
    want = reference_manifest(name)["messages"]
    with open_snapshot(reference_store(name)) as snap:
        df = snap.messages()
    assert len(df) == len(want)
    df = df.astype(object).where(df.notna(), None)
    for row, m in zip(df.itertuples(index=False), want, strict=True):
        assert (row.commit_log_offset, row.store_size, row.topic, row.queue_id, row.queue_offset) == (
            m["commitLogOffset"], m["storeSize"], m["topic"], m["queueId"], m["queueOffset"])
        assert (row.msg_id, row.uniq_key, row.keys, row.body_crc, row.store_timestamp) == (
            m["msgId"], m["uniqKey"], m["keys"], m["bodyCRC"], m["storeTimestamp"])
        assert row.tags == m["tags"]


def test_messages_filters(reference_store: Callable[[str], Path]) -> None:
    with open_snapshot(reference_store("clean-small")) as snap:
        all_ = snap.messages()
        a1 = snap.messages("TopicA", queue_id=1)
        assert len(a1) == ((all_.topic == "TopicA") & (all_.queue_id == 1)).sum()
        start = int(all_.commit_log_offset[100])
        tail = snap.messages(start=start, limit=5)
        assert list(tail.commit_log_offset) == list(all_.commit_log_offset[100:105])


@pytest.mark.parametrize("name", STORES)
def test_consume_queue_units_equal_cq_entries_at_write(name: str, reference_store: Callable[[str], Path],
                                                       reference_manifest: Callable[[str], dict[str, Any]]) -> None:
    msgs = [m for m in reference_manifest(name)["messages"] if m["cqEntryAtWrite"]]
    with open_snapshot(reference_store(name)) as snap:
        frames = {k: snap.consume_queue(*k).set_index("queue_offset") for k in snap.consume_queues}
    for m in msgs:
        row = frames[(m["topic"], m["queueId"])].loc[m["queueOffset"]]
        e = m["cqEntryAtWrite"]
        assert (row.commit_log_offset, row["size"], row.tags_code) == (e["commitLogOffset"], e["size"], e["tagsCode"])
    assert sum(len(f) for f in frames.values()) == len(msgs)


@pytest.mark.parametrize("name", STORES)
def test_topics_counts_and_lag(name: str, reference_store: Callable[[str], Path],
                               reference_manifest: Callable[[str], dict[str, Any]]) -> None:
    man = reference_manifest(name)
    per_queue = Counter((m["topic"], m["queueId"]) for m in man["messages"])
    lagging = Counter((m["topic"], m["queueId"]) for m in man["messages"] if not m["dispatchedBeforeEnd"])
    with open_snapshot(reference_store(name)) as snap:
        t = snap.topics()
    got = {(r.topic, r.queue_id): (r.messages, r.lag, r.cq_units) for r in t.itertuples()}
    assert got == {k: (n, lagging[k], n - lagging[k]) for k, n in per_queue.items()}
    assert t.lag.sum() == man["generator"]["undispatchedTail"]


@pytest.mark.parametrize("name", STORES)
def test_index_chain_reproduces_query_message(name: str, reference_store: Callable[[str], Path],
                                              reference_manifest: Callable[[str], dict[str, Any]]) -> None:
    man = reference_manifest(name)
    # the reference answers come after reopening: recovery indexed the undispatched tail first
    tail = {m["commitLogOffset"] for m in man["messages"] if not m["dispatchedBeforeEnd"]}
    with open_snapshot(reference_store(name)) as snap:
        for q in man["reopen"]["afterReopen"]["queryMessage"]:
            chain = snap.index_chain(q["topic"], q["key"], q["begin"], q["end"])
            hits = [int(x) for x in chain[chain.hash_matches & chain.time_in_window].phy_offset]
            want = [o for o in q["resultCommitLogOffsets"] if o not in tail]
            assert sorted(hits[: q["maxNum"]]) == sorted(want), q
            if len(hits) <= q["maxNum"] and q["begin"] == 0 and q["end"] == 2**63 - 1:
                exact = set(chain[chain.message_has_key & chain.time_in_window].phy_offset)
                assert exact == set(q["manifestMessagesWithThisTopicAndKey"]) - tail, q


def test_key_indexed_twice_is_not_a_collision(reference_store: Callable[[str], Path],
                                              reference_manifest: Callable[[str], dict[str, Any]]) -> None:
    # TopicB k-42-410-0: one message carries the key twice in KEYS, so the store returns it twice.
    q = next(q for q in reference_manifest("clean-small")["reopen"]["afterReopen"]["queryMessage"]
             if q["key"] == "k-42-410-0")
    with open_snapshot(reference_store("clean-small")) as snap:
        chain = snap.index_chain(q["topic"], q["key"])
    hits = chain[chain.hash_matches]
    assert list(hits.phy_offset) == q["resultCommitLogOffsets"]
    assert hits.message_has_key.all()
    assert not chain.collision.any()


def test_index_chain_marks_hash_collisions(tmp_path: Path) -> None:
    from rmqlab.clock import ManualClock
    from rmqlab.config import MessageStoreConfig
    from rmqlab.store.message import Message
    from rmqlab.store.message_store import MessageStore

    root = str(tmp_path / "s")
    clock = ManualClock()
    with MessageStore.open(root, MessageStoreConfig.small(root), clock=clock, threaded=False) as store:
        # "Aa" and "BB" have the same Java hashCode, so TopicX#Aa and TopicX#BB share hash and slot
        store.put_message(Message("TopicX", b"one", keys=["Aa"]))
        store.put_message(Message("TopicX", b"two", keys=["BB"]))
        store.step()
    with open_snapshot(root) as snap:
        chain = snap.index_chain("TopicX", "BB")
        verify = list(snap.verify())
    hits = chain[chain.hash_matches]
    assert len(hits) == 2
    assert list(hits.collision) == [False, True]  # newest first: "BB", then the colliding "Aa"
    assert [f for f in verify if f.severity != "info"] == []


@pytest.mark.parametrize("name", STORES)
def test_files_index_and_checkpoint_frames(name: str, reference_store: Callable[[str], Path],
                                           reference_manifest: Callable[[str], dict[str, Any]]) -> None:
    man = reference_manifest(name)
    with open_snapshot(reference_store(name)) as snap:
        files = snap.files()
        idx = snap.index_files()
        slots = snap.index_slots(idx.name[0])
        cp = snap.checkpoint().iloc[0]
        assert (snap.hash_slot_num, snap.index_num) == (64, 256)
    assert set(files.kind) >= {"commitlog", "consumequeue", "index", "checkpoint"}
    cl = files[files.kind == "commitlog"]
    assert int(cl.wrote_position.iloc[-1]) + int(cl.file_from_offset.iloc[-1]) >= man["writePhase"]["maxPhyOffset"] or \
        name == "crash-tail"
    assert (idx["items"] == idx.index_count - 1).all()
    assert slots.chain_length.sum() == idx["items"][0]
    want = man["reopen"]["beforeReopen"]["checkpoint"]
    assert (cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp, cp.min_timestamp) == (
        want["physicMsgTimestamp"], want["logicsMsgTimestamp"], want["indexMsgTimestamp"], want["minTimestamp"])


@pytest.mark.parametrize("name", STORES)
def test_explain_recovery_matches_reopen(name: str, reference_store: Callable[[str], Path],
                                         reference_manifest: Callable[[str], dict[str, Any]]) -> None:
    man = reference_manifest(name)
    with open_snapshot(reference_store(name)) as snap:
        plan = snap.explain_recovery()
    assert plan.mode == ("abnormal" if man["reopen"]["beforeReopen"]["abortFileExists"] else "normal")
    assert plan.process_offset == man["reopen"]["afterReopen"]["maxPhyOffset"]


def test_explain_cleanup(reference_store: Callable[[str], Path]) -> None:
    import datetime as dt

    with open_snapshot(reference_store("clean-small")) as snap:
        at_four = snap.explain_cleanup(now=dt.datetime(2040, 1, 1, 4, tzinfo=dt.UTC), disk_ratio=0.1)
        at_noon = snap.explain_cleanup(now=dt.datetime(2040, 1, 1, 12, tzinfo=dt.UTC), disk_ratio=0.1)
    assert at_four.to_delete == [mf for mf in at_four.to_delete]
    assert len(at_four.to_delete) == len(at_four.files) - 1  # the newest file is never deleted
    assert at_noon.to_delete == []


@pytest.mark.parametrize("ratio", [1.5, -0.1, float("nan")])
def test_explain_cleanup_refuses_a_ratio_that_is_no_share(reference_store: Callable[[str], Path],
                                                          ratio: float) -> None:
    from rmqlab.errors import ConfigError

    # 1.5 would read as "disk full" and plan a forced cleanup of every file but the newest
    with open_snapshot(reference_store("clean-small")) as snap, pytest.raises(ConfigError, match="disk_ratio"):
        snap.explain_cleanup(disk_ratio=ratio)


def test_index_layout_must_be_known(tmp_path: Path, reference_store: Callable[[str], Path]) -> None:
    import shutil

    from rmqlab.errors import ConfigError

    dst = tmp_path / "s"
    shutil.copytree(reference_store("clean-small"), dst)
    for p in (dst / "index").iterdir():
        with open(p, "ab") as f:
            f.write(b"\0" * 20)
    with open_snapshot(dst) as snap:
        assert snap.index_error
        with pytest.raises(ConfigError):
            snap.index_files()
        assert any(f.kind == "index_layout_unknown" for f in snap.verify())
    with open_snapshot(dst, hash_slot_num=64, index_num=257) as snap:
        assert len(snap.index_files()) == 6


def test_a_layout_no_file_has_is_refused_with_the_one_that_fits(reference_store: Callable[[str], Path]) -> None:
    from rmqlab.errors import ConfigError

    with open_snapshot(reference_store("clean-small"), hash_slot_num=32, index_num=256) as snap:
        assert "they fit 64/256" in snap.index_error
        with pytest.raises(ConfigError, match="do not match this store"):
            snap.index_chain("TopicA", "k-42-0-0")
        assert [f.kind for f in snap.verify() if f.file == "index"] == ["index_layout_unknown"]
    with open_snapshot(reference_store("clean-small"), hash_slot_num=64, index_num=256) as snap:
        assert not snap.index_error
        assert len(snap.index_files()) == 6
