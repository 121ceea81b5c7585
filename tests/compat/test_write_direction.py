"""The write direction: what rmqlab writes is what RocketMQ 4.9.8 writes and reads back.

Two kinds of evidence:

* **Replay** — every message of a reference store (written by the real 4.9.8 store) is put again
  through ``MessageStore`` with the same fields, at the same store time (ManualClock): the
  CommitLog files, every ConsumeQueue file and the content of every index file come out
  byte-for-byte identical. (Index file *names* are the JVM's wall clock at creation and the
  checkpoint's flush timestamps depend on flush timing, so those two are compared loosely.)
* **Independent walk** — a store written by rmqlab with a mixed workload is read back without
  the engine: CommitLog files by ``codec.walk.iter_records`` (CRC checked), CQ files by numpy
  ``units_view``, index files by ``IndexFile.select_phy_offset``; every cross-reference holds.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rmqlab.clock import ManualClock
from rmqlab.codec.checkpoint import Checkpoint
from rmqlab.codec.consume_queue_unit import units_view
from rmqlab.codec.java_hash import java_hash
from rmqlab.codec.message import BlankRecord, MessageRecord
from rmqlab.codec.msg_id import decode_offset_msg_id
from rmqlab.codec.properties import encode_broker_properties
from rmqlab.codec.walk import iter_records
from rmqlab.config import MessageStoreConfig
from rmqlab.store.index_file import IndexFile
from rmqlab.store.message import Message
from rmqlab.store.message_store import MessageStore

FIXTURES = Path(__file__).parent.parent / "fixtures"
_BROKER_SET = {"KEYS", "TAGS", "UNIQ_KEY", "CLUSTER", "WAIT"}


# ------------------------------------------------------------------------------------------ helpers
def _reference_config(manifest: dict[str, Any], root: Path) -> MessageStoreConfig:
    c = manifest["messageStoreConfig"]
    return MessageStoreConfig(
        store_path_root_dir=str(root),
        mapped_file_size_commit_log=c["mappedFileSizeCommitLog"],
        mapped_file_size_consume_queue=c["mappedFileSizeConsumeQueue"],
        max_hash_slot_num=c["maxHashSlotNum"],
        max_index_num=c["maxIndexNum"],
        store_host=manifest["storeHost"],
        broker_cluster_name=manifest["brokerClusterName"],
    )


def _commit_log_records(root: Path) -> Iterator[tuple[int, MessageRecord]]:
    for name in sorted(os.listdir(root / "commitlog")):
        buf = (root / "commitlog" / name).read_bytes()
        for off, rec in iter_records(buf, base_offset=int(name), check_crc=True):
            if isinstance(rec, MessageRecord):
                yield off, rec


def _as_message(rec: MessageRecord) -> Message:
    """The producer-side message that a real client would have sent for ``rec``."""
    p = rec.properties
    return Message(
        rec.topic, rec.body, tags=p.get("TAGS"), keys=p.get("KEYS") or (),
        properties={k: v for k, v in p.items() if k not in _BROKER_SET},
        queue_id=rec.queue_id, flag=rec.flag, born_host=rec.born_host,
        born_timestamp=rec.born_timestamp, sys_flag=rec.sys_flag,
        reconsume_times=rec.reconsume_times,
        prepared_transaction_offset=rec.prepared_transaction_offset, uniq_key=p.get("UNIQ_KEY"),
    )  # fmt: skip


def _replay(name: str, root: Path, reference_manifest: Any) -> tuple[Path, Path]:
    manifest = reference_manifest(name)
    ref = FIXTURES / name / "store"
    records = list(_commit_log_records(ref))
    clock = ManualClock(records[0][1].store_timestamp)
    store = MessageStore.open(root, _reference_config(manifest, root), clock=clock, threaded=False)
    try:
        for off, rec in records:
            clock.set(rec.store_timestamp)
            r = store.put_message(_as_message(rec))
            assert r.ok, (off, r)
            assert (r.wrote_offset, r.wrote_bytes) == (off, rec.store_size)
            assert r.msg_id == rec.msg_id
            assert r.queue_offset == rec.queue_offset
            store.wait_dispatched()  # the reference generator waited for dispatch after every put
    finally:
        store.shutdown()
    return ref, root


def _nonzero_files(d: Path) -> dict[str, bytes]:
    """Name -> bytes of the files in ``d``, leaving out all-zero (preallocated) files."""
    out = {}
    for name in sorted(os.listdir(d)):
        data = (d / name).read_bytes()
        if any(data):
            out[name] = data
    return out


# ------------------------------------------------------------------------------------------ replay
@pytest.mark.parametrize("name", ["clean-small", "crash-tail"])
def test_replayed_commit_log_is_byte_identical(name: str, tmp_path: Path, reference_manifest: Any) -> None:
    ref, mine = _replay(name, tmp_path / "store", reference_manifest)
    want = _nonzero_files(ref / "commitlog")
    got = _nonzero_files(mine / "commitlog")
    assert list(got) == list(want)
    for file_name, data in want.items():
        assert got[file_name] == data, f"commitlog/{file_name} differs"


def test_replayed_consume_queues_and_index_are_byte_identical(tmp_path: Path, reference_manifest: Any) -> None:
    # clean-small only: in crash-tail the real store's CQ and index lag its CommitLog on purpose.
    ref, mine = _replay("clean-small", tmp_path / "store", reference_manifest)
    queue_dirs = sorted(p.relative_to(ref) for p in (ref / "consumequeue").glob("*/*"))
    assert queue_dirs == sorted(p.relative_to(mine) for p in (mine / "consumequeue").glob("*/*"))
    for q in queue_dirs:
        assert _nonzero_files(mine / q) == _nonzero_files(ref / q), q
    # Index names are the wall clock at creation (ours: the ManualClock), contents must match.
    want = [(ref / "index" / n).read_bytes() for n in sorted(os.listdir(ref / "index"))]
    got = [(mine / "index" / n).read_bytes() for n in sorted(os.listdir(mine / "index"))]
    assert len(got) == len(want) > 1
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g == w, f"index file #{i} differs"
    # Checkpoint: logics and index timestamps are data-determined; physic is a flush time.
    cp_ref = Checkpoint.unpack((ref / "checkpoint").read_bytes())
    cp_mine = Checkpoint.unpack((mine / "checkpoint").read_bytes())
    assert cp_mine.logics_msg_timestamp == cp_ref.logics_msg_timestamp
    assert cp_mine.index_msg_timestamp == cp_ref.index_msg_timestamp
    assert cp_mine.physic_msg_timestamp >= cp_ref.physic_msg_timestamp > 0


def test_properties_bytes_match_real_4_9_8(reference_manifest: Any) -> None:
    """Broker HashMap order and no trailing 0x02, as the real 4.9.8 broker stored them."""
    manifest = reference_manifest("clean-small")
    checked = 0
    for m in manifest["messages"]:
        props = m["properties"]
        raw = m["propertiesString"].encode("utf-8")
        assert not raw.endswith(b"\x02")
        if not ({"TAGS", "KEYS"} <= set(props) and set(props) - _BROKER_SET):
            continue
        user = {k: v for k, v in props.items() if k not in _BROKER_SET}
        # the client's insertion order: Message(topic, tags, keys, body), user props, UNIQ_KEY
        client = {"TAGS": props["TAGS"], "KEYS": props["KEYS"], **user, "UNIQ_KEY": props["UNIQ_KEY"]}
        assert encode_broker_properties(client, "4.9.8", manifest["brokerClusterName"]) == raw
        checked += 1
    assert checked > 20


# ------------------------------------------------------------------------------------------ walk
@dataclass
class _Written:
    root: Path
    config: MessageStoreConfig
    acked: list[tuple[Message, Any]]
    files_while_open: dict[str, int | None]


_KEYS = ["order-1", "order-2", "ключ", "键", "emoji-😀", "shared", "a"]
_TAGS = [None, "TagA", "TagB", "标签-X"]


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> _Written:
    rng = random.Random(4242)
    root = tmp_path_factory.mktemp("write") / "store"
    config = MessageStoreConfig.small(str(root))
    clock = ManualClock()
    store = MessageStore.open(root, config, clock=clock, threaded=False)
    acked: list[tuple[Message, Any]] = []
    for i in range(900):
        keys = rng.sample(_KEYS, rng.randint(0, 3))
        props = {"bizSeq": str(i)} if i % 3 == 0 else ({"地区": "上海"} if i % 7 == 0 else None)
        host = ("fd00::1:7", 4000 + i) if i % 11 == 0 else (f"10.0.1.{i % 250}", 40000)
        msg = Message(
            f"Topic{i % 3}",
            rng.randbytes(rng.choice([1, 17, 200, 1500, 3072])),
            tags=rng.choice(_TAGS),
            keys=keys,
            properties=props,
            queue_id=rng.randrange(4),
            flag=rng.choice([0, 0, 0, 7, -1]),
            born_host=host,
        )
        r = store.put_message(msg)
        assert r.ok, r
        acked.append((msg, r))
        clock.advance(rng.choice([0, 1, 400]))
        if i % 40 == 0:
            store.step()
    assert store.wait_dispatched()
    store.flush()
    files = {}
    for name in ("checkpoint", "abort", "lock"):
        p = root / name
        files[name] = p.stat().st_size if p.exists() else None  # stat only: never open `lock`
    store.shutdown()
    return _Written(root, config, acked, files)


def test_every_commit_log_file_walks_on_its_own(written: _Written) -> None:
    size = written.config.mapped_file_size_commit_log
    names = sorted(os.listdir(written.root / "commitlog"))
    assert len(names) > 3
    by_offset: dict[int, MessageRecord] = {}
    expected_next = 0
    for k, name in enumerate(names):
        base = int(name)
        assert base == k * size
        assert len(name) == 20
        buf = (written.root / "commitlog" / name).read_bytes()
        assert len(buf) == size
        pos = base
        last: MessageRecord | BlankRecord | None = None
        for off, rec in iter_records(buf, base_offset=base, check_crc=True):
            assert off == pos  # contiguous
            last = rec
            if isinstance(rec, BlankRecord):
                assert off + rec.size == base + size
                assert rec.size >= 8
                break
            assert rec.commit_log_offset == off
            assert rec.crc_ok
            by_offset[off] = rec
            pos += rec.store_size
        if k < len(names) - 1:
            assert isinstance(last, BlankRecord), f"full file {name} must end with a blank record"
        elif last is not None and isinstance(last, MessageRecord):
            expected_next = last.end_offset
    for msg, r in written.acked:
        rec = by_offset[r.wrote_offset]
        ip, port, off = decode_offset_msg_id(r.msg_id)
        assert (ip, port, off) == ("127.0.0.1", 10911, r.wrote_offset)
        assert rec.body == msg.body
        assert rec.topic == msg.topic
        assert rec.store_size == r.wrote_bytes
        assert rec.queue_offset == r.queue_offset
        assert rec.store_timestamp == r.store_timestamp
    assert expected_next == max(r.wrote_offset + r.wrote_bytes for _, r in written.acked)
    assert len(by_offset) == len(written.acked)


def _records(root: Path) -> dict[int, MessageRecord]:
    return dict(_commit_log_records(root))


def test_every_consume_queue_unit_points_at_its_record(written: _Written) -> None:
    records = _records(written.root)
    cq_root = written.root / "consumequeue"
    units_seen = 0
    for topic in sorted(os.listdir(cq_root)):
        for qid in sorted(os.listdir(cq_root / topic)):
            qdir = cq_root / topic / qid
            names = sorted(os.listdir(qdir))
            data = b"".join((qdir / n).read_bytes() for n in names)
            assert [int(n) for n in names] == [k * written.config.consume_queue_file_size for k in range(len(names))]
            units = units_view(data)
            valid = units[(units["commit_log_offset"] >= 0) & (units["size"] > 0)]
            assert np.all(units["size"][len(valid) :] == 0)  # nothing after the end
            for q, (phy, size, tags_code) in enumerate(valid.tolist()):
                rec = records[phy]
                assert (rec.topic, rec.queue_id, rec.queue_offset, rec.store_size) == (topic, int(qid), q, size)
                assert tags_code == (java_hash(rec.tags) if rec.tags else 0)
                units_seen += 1
    assert units_seen == len(written.acked)


def test_every_key_is_reachable_through_an_index_chain(written: _Written) -> None:
    config = written.config
    index_dir = written.root / "index"
    files = [
        IndexFile(str(index_dir / n), config.max_hash_slot_num, config.max_index_num, read_only=True)
        for n in sorted(os.listdir(index_dir))
    ]
    assert len(files) > 3
    try:
        records = _records(written.root)
        for phy, rec in records.items():
            holders = [f for f in files if f.begin_phy_offset <= phy <= f.end_phy_offset]
            assert holders, phy
            for key in [rec.uniq_key, *rec.keys]:
                assert key
                found: list[int] = []
                for f in holders:
                    f.select_phy_offset(found, f"{rec.topic}#{key}", 10**6, 0, 2**63 - 1)
                assert phy in found, (rec.topic, key, phy)
    finally:
        for f in files:
            f.shutdown()


def test_checkpoint_abort_and_lock_files(written: _Written) -> None:
    assert written.files_while_open == {"checkpoint": 4096, "abort": 0, "lock": 4}
    assert not (written.root / "abort").exists()  # clean shutdown removes it
    assert (written.root / "lock").read_bytes() == b"lock"
    cp = Checkpoint.unpack((written.root / "checkpoint").read_bytes())
    last_ts = max(r.store_timestamp for _, r in written.acked)
    assert cp.physic_msg_timestamp == cp.logics_msg_timestamp == last_ts
    assert 0 < cp.index_msg_timestamp <= last_ts


def test_properties_in_broker_order_without_trailing_separator(written: _Written) -> None:
    records = _records(written.root)
    checked = 0
    for msg, r in written.acked:
        if not (msg.tags and msg.keys and msg.properties):
            continue
        rec = records[r.wrote_offset]
        client = {"KEYS": msg.keys_string, "TAGS": msg.tags, "WAIT": "true", **msg.properties, "UNIQ_KEY": rec.uniq_key}
        assert rec.properties_raw == encode_broker_properties(client, "4.9.8", "DefaultCluster")
        assert not rec.properties_raw.endswith(b"\x02")
        assert "WAIT" not in rec.properties
        checked += 1
    assert checked > 10
