"""Decode the reference stores written by real RocketMQ 4.9.8 and match every manifest fact.

The stores in ``tests/fixtures/<scenario>/store`` are an external oracle: each commitlog file is
walked with the codec's strict walker and with the Java-faithful ``checkMessageAndReturnSize``,
and every message, CQ unit, index header/item and the checkpoint are compared with what the real
store reported (``manifest.json``).
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from rmqlab.codec import (
    BlankRecord,
    Checkpoint,
    IndexHeader,
    MessageRecord,
    check_message_and_return_size,
    decode_message,
    index_file_name,
    index_file_size,
    index_key,
    index_key_hash,
    item_position,
    iter_records,
    java_hashmap_order,
    offset_to_file_name,
    parse_index_file_name,
    parse_offset_file_name,
    tags_code,
    units_view,
    unpack_item,
)
from rmqlab.codec.properties import encode_properties

SCENARIOS = ["clean-small", "crash-tail"]
UTC = ZoneInfo("UTC")  # the writing JVM's default time zone


@dataclass
class Walked:
    store: Path
    manifest: dict[str, Any]
    file_size: int
    records: dict[int, MessageRecord]  # commit_log_offset -> record
    files: dict[str, bytes]  # commitlog file name -> content
    endings: dict[str, str]  # file name -> "blank" | "end-of-data"


_cache: dict[str, Walked] = {}


@pytest.fixture(params=SCENARIOS)
def walked(
    request: pytest.FixtureRequest,
    reference_store: Callable[[str], Path],
    reference_manifest: Callable[[str], dict[str, Any]],
) -> Walked:
    name: str = request.param
    if name not in _cache:
        store = reference_store(name)
        manifest = reference_manifest(name)
        file_size = manifest["messageStoreConfig"]["mappedFileSizeCommitLog"]
        records: dict[int, MessageRecord] = {}
        files: dict[str, bytes] = {}
        endings: dict[str, str] = {}
        for fname in sorted(os.listdir(store / "commitlog")):
            base = parse_offset_file_name(fname)
            assert base is not None
            assert base % file_size == 0
            data = (store / "commitlog" / fname).read_bytes()
            assert len(data) == file_size
            files[fname] = data
            endings[fname] = "end-of-data"
            for off, rec in iter_records(data, check_crc=True, file=fname, base_offset=base):
                if isinstance(rec, BlankRecord):
                    assert off - base + rec.size == file_size, "blank must fill the file"
                    endings[fname] = "blank"
                    continue
                assert rec.commit_log_offset == off
                records[off] = rec
        _cache[name] = Walked(store, manifest, file_size, records, files, endings)
    return _cache[name]


def test_walk_sees_exactly_the_manifest_messages(walked: Walked) -> None:
    msgs = walked.manifest["messages"]
    assert sorted(walked.records) == sorted(m["commitLogOffset"] for m in msgs)
    assert len(walked.records) == len(msgs) == walked.manifest["generator"]["count"]
    end = max(r.end_offset for r in walked.records.values())
    assert end == walked.manifest["writePhase"]["maxPhyOffset"]


def test_every_full_file_ends_with_a_blank(walked: Walked) -> None:
    names = list(walked.files)
    last_with_data = offset_to_file_name(
        max(walked.records) - max(walked.records) % walked.file_size
    )
    for name in names:
        if name < last_with_data:
            assert walked.endings[name] == "blank", name
        else:
            assert walked.endings[name] == "end-of-data", name
    if walked.manifest["scenario"] == "crash-tail":  # the pre-allocated next file: all zeros
        assert names[-1] == "00000000000000786432"
        assert not any(walked.files[names[-1]])


def _host(rec_host: tuple[str, int], expected: dict[str, Any]) -> None:
    ip = ipaddress.ip_address(rec_host[0])
    assert ip == ipaddress.ip_address(expected["ip"])
    assert ip.packed.hex() == expected["ipBytesHex"]
    assert rec_host[1] == expected["port"]


def test_every_message_matches_the_manifest(walked: Walked) -> None:
    for m in walked.manifest["messages"]:
        rec = walked.records[m["commitLogOffset"]]
        ctx = m["index"]
        assert rec.msg_id == m["msgId"] == m["putResult"]["msgId"], ctx
        assert rec.uniq_key == m["uniqKey"], ctx
        assert rec.topic == m["topic"], ctx
        assert (rec.queue_id, rec.queue_offset) == (m["queueId"], m["queueOffset"]), ctx
        assert rec.store_size == m["storeSize"] == m["putResult"]["wroteBytes"], ctx
        assert rec.tags == m["tags"], ctx
        if m.get("tagsCode") is not None:
            assert rec.tags_code == tags_code(m["tags"]) == m["tagsCode"], ctx
        assert rec.properties.get("KEYS") == m["keys"], ctx
        expected_keys = [k for k in (m["keys"] or "").split(" ") if k]
        assert rec.keys == expected_keys, ctx
        assert (rec.flag, rec.sys_flag) == (m["flag"], m["sysFlag"]), ctx
        assert rec.body_crc == m["bodyCRC"], ctx
        assert rec.crc_ok, ctx
        assert rec.reconsume_times == m["reconsumeTimes"], ctx
        assert rec.prepared_transaction_offset == m["preparedTransactionOffset"], ctx
        assert rec.born_timestamp == m["bornTimestamp"], ctx
        assert rec.store_timestamp == m["storeTimestamp"] == m["putResult"]["storeTimestamp"]
        _host(rec.born_host, m["bornHost"])
        _host(rec.store_host, m["storeHost"])
        assert rec.properties == m["properties"], ctx
        assert rec.properties_raw.decode("utf-8") == m["propertiesString"], ctx
        assert len(rec.body) == m["bodyLength"], ctx
        assert hashlib.sha256(rec.body).hexdigest() == m["bodySha256"], ctx
        assert rec.version == 1, ctx


def test_on_disk_property_order_is_java_hashmap_order(walked: Walked) -> None:
    """4.9.8 stores HashMap(16) order, and without a trailing 0x02 after the last pair."""
    for rec in walked.records.values():
        keys = list(rec.properties)
        assert java_hashmap_order(keys, 16) == keys
        assert encode_properties(rec.properties, trailing_separator=False) == rec.properties_raw
        assert not rec.properties_raw.endswith(b"\x02")


def test_decode_message_at_each_offset_and_java_check(walked: Walked) -> None:
    fs = walked.file_size
    for m in walked.manifest["messages"]:
        off = m["commitLogOffset"]
        data = walked.files[offset_to_file_name(off - off % fs)]
        rec = decode_message(data, off % fs, check_crc=True, allow_v2=False)
        assert rec == walked.records[off]
        size, ok, req = check_message_and_return_size(data, off % fs, check_crc=True)
        assert (size, ok) == (m["storeSize"], True)
        assert req is not None
        assert (req.topic, req.queue_id, req.commit_log_offset) == (m["topic"], m["queueId"], off)
        assert (req.msg_size, req.consume_queue_offset) == (m["storeSize"], m["queueOffset"])
        assert req.tags_code == m["tagsCode"]
        assert req.keys == m["keys"]  # properties always exist here, so None when no KEYS
        assert req.uniq_key == m["uniqKey"]
        assert req.store_timestamp == m["storeTimestamp"]
        assert (req.sys_flag, req.prepared_transaction_offset) == (m["sysFlag"], 0)
        assert req.properties == m["properties"]
        v5 = check_message_and_return_size(data, off % fs, check_crc=True, rocketmq_version="5.3.3")
        assert v5 == (size, ok, req)


def test_consume_queue_units_match_cq_entries_at_write(walked: Walked) -> None:
    cq_size = walked.manifest["messageStoreConfig"]["mappedFileSizeConsumeQueue"]
    root = walked.store / "consumequeue"
    views: dict[Path, Any] = {}
    per_queue: dict[tuple[str, int], int] = {}
    for m in walked.manifest["messages"]:
        pos = m["queueOffset"] * 20
        path = root / m["topic"] / str(m["queueId"]) / offset_to_file_name(pos - pos % cq_size)
        if path not in views and path.exists():
            data = path.read_bytes()
            assert len(data) == cq_size
            views[path] = units_view(data)
        unit = views[path][(pos % cq_size) // 20] if path in views else None
        got = None if unit is None else tuple(int(unit[f]) for f in unit.dtype.names)
        entry = m["cqEntryAtWrite"]
        if m["dispatchedBeforeEnd"]:
            assert got == (entry["commitLogOffset"], entry["size"], entry["tagsCode"])
            assert got == (m["commitLogOffset"], m["storeSize"], m["tagsCode"])
            key = (m["topic"], m["queueId"])
            per_queue[key] = per_queue.get(key, 0) + 1
        else:
            assert entry is None
            assert got in (None, (0, 0, 0)), "undispatched message must have no CQ unit"
    # no unit on disk beyond the dispatched ones
    for (topic, qid), count in per_queue.items():
        units = [
            u
            for f in sorted(os.listdir(root / topic / str(qid)))
            for u in units_view((root / topic / str(qid) / f).read_bytes())
            if u["commit_log_offset"] >= 0 and u["size"] > 0
        ]
        assert len(units) == count, (topic, qid)


def test_index_files_are_plausible_and_items_point_at_their_keys(walked: Walked) -> None:
    cfg = walked.manifest["messageStoreConfig"]
    slots, items = cfg["maxHashSlotNum"], cfg["maxIndexNum"]
    by_offset = {m["commitLogOffset"]: m for m in walked.manifest["messages"]}
    total_items = 0
    for name in sorted(os.listdir(walked.store / "index")):
        created = parse_index_file_name(name, UTC)
        assert created is not None
        assert index_file_name(created, UTC) == name
        data = (walked.store / "index" / name).read_bytes()
        assert len(data) == index_file_size(slots, items) == 5416
        h = IndexHeader.unpack(data)
        assert 1 <= h.index_count <= items
        assert 0 <= h.hash_slot_count <= slots
        assert h.begin_timestamp <= h.end_timestamp
        assert h.begin_phy_offset <= h.end_phy_offset
        assert abs(h.begin_timestamp - created) < 60_000
        assert unpack_item(data, item_position(slots, 0)) == (0, 0, 0, 0)
        for n in range(1, h.index_count):
            key_hash, phy, diff, prev = unpack_item(data, item_position(slots, n))
            m = by_offset[phy]
            keys = [m["uniqKey"], *[k for k in (m["keys"] or "").split(" ") if k]]
            assert key_hash in {index_key_hash(index_key(m["topic"], k)) for k in keys}
            assert 0 <= prev < n
            assert diff == max(0, (m["storeTimestamp"] - h.begin_timestamp) // 1000) or n == 1
            total_items += 1
    dispatched = [m for m in walked.manifest["messages"] if m["dispatchedBeforeEnd"]]
    expected = sum(1 + len([k for k in (m["keys"] or "").split(" ") if k]) for m in dispatched)
    assert total_items == expected


def test_checkpoint_matches_the_real_store_checkpoint(walked: Walked) -> None:
    cp = Checkpoint.unpack((walked.store / "checkpoint").read_bytes())
    want = walked.manifest["reopen"]["beforeReopen"]["checkpoint"]
    assert cp.physic_msg_timestamp == want["physicMsgTimestamp"]
    assert cp.logics_msg_timestamp == want["logicsMsgTimestamp"]
    assert cp.index_msg_timestamp == want["indexMsgTimestamp"]
    assert (cp.master_flushed_offset, cp.confirm_phy_offset) == (0, 0)  # 4.9.8 writes 24 bytes
    assert cp.min_timestamp == want["minTimestamp"]
    assert cp.min_timestamp_index == want["minTimestampIndex"]
