"""Inspection of a store written with ``enable_consume_queue_ext``: CQ frames show the real tags
code and the ext address, ``verify`` checks tags through the ext units and reports addresses
that resolve to nothing; nothing is written."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import pytest

from rmqlab.clock import ManualClock
from rmqlab.codec.consume_queue_ext_unit import is_ext_addr, undecorate
from rmqlab.codec.java_hash import java_hash
from rmqlab.config import MessageStoreConfig
from rmqlab.inspect import open_snapshot
from rmqlab.store.message import Message
from rmqlab.store.message_store import MessageStore

EXT_FILE = 1000
TAGS = ["TagA", "TagB", None]


def _write(root: Path, ext: bool, n: int = 400) -> None:
    config = MessageStoreConfig.small(str(root), enable_consume_queue_ext=ext,
                                      mapped_file_size_consume_queue_ext=EXT_FILE)
    clock = ManualClock(1_700_000_000_000)
    with MessageStore.open(root, config, clock=clock, threaded=False) as store:
        for i in range(n):
            assert store.put_message(Message("Orders", b"b%d" % i, tags=TAGS[i % 3], queue_id=i % 2)).ok
            clock.advance(3)
        store.step()
        assert store.wait_dispatched()


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[bool, Path]:
    out = {}
    for ext in (False, True):
        root = tmp_path_factory.mktemp("ext" if ext else "plain") / "store"
        _write(root, ext)
        out[ext] = root
    return out


def _digest(root: Path) -> dict[str, str]:
    return {os.path.relpath(os.path.join(d, f), root): hashlib.sha256(Path(d, f).read_bytes()).hexdigest()
            for d, _, files in os.walk(root) for f in files}


def test_frames_show_real_tags_codes_and_addresses(stores: dict[bool, Path]) -> None:
    before = _digest(stores[True])
    with open_snapshot(stores[False]) as plain, open_snapshot(stores[True]) as ext:
        assert set(ext.consume_queue_exts) == {("Orders", 0), ("Orders", 1)}
        assert ext.consume_queue_ext_file_size == EXT_FILE
        for qid in (0, 1):
            p, e = plain.consume_queue("Orders", qid), ext.consume_queue("Orders", qid)
            assert p["ext_address"].isna().all()
            assert e["ext_address"].notna().all()
            assert all(is_ext_addr(int(a)) for a in e["ext_address"])
            # the real tags codes: the same as a store written without ext
            assert e["tags_code"].tolist() == p["tags_code"].tolist()
            assert set(e["tags_code"]) <= {java_hash("TagA"), java_hash("TagB"), 0}
            addrs = [undecorate(int(a)) for a in e["ext_address"]]
            assert addrs[:2] == [0, 20]
            assert addrs[49] == EXT_FILE  # file 0 ended with the marker at 980
    assert _digest(stores[True]) == before  # read-only


def test_verify_is_clean(stores: dict[bool, Path]) -> None:
    with open_snapshot(stores[True]) as snap:
        findings = [f for f in snap.verify() if f.severity != "info"]
    assert findings == []


def test_verify_reports_lost_and_wrong_ext_units(stores: dict[bool, Path], tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "store"
    shutil.copytree(stores[True], root)
    ext_dir = root / "consumequeue_ext" / "Orders" / "1"
    files = sorted(os.listdir(ext_dir))
    os.remove(ext_dir / files[-1])  # the last file's units are gone
    with open(ext_dir / files[0], "r+b") as fh:  # unit 3 of queue 1 now says another tag
        fh.seek(3 * 20 + 2)
        fh.write(np.int64(java_hash("TagZ")).byteswap().tobytes())
    with open_snapshot(root) as snap:
        findings = list(snap.verify())
        frame = snap.consume_queue("Orders", 1)
    lost = [f for f in findings if f.kind == "cq_ext_unit_missing"]
    last_start = int(files[-1])
    want = frame[frame["ext_address"].map(lambda a: undecorate(int(a)) >= last_start)]
    assert len(lost) == len(want) > 0
    assert all(f.severity == "warning" for f in lost)
    assert [(f.file, f.offset) for f in lost] == list(zip(want["file"].astype(str), want["position"], strict=True))
    # an unresolved address has a null tags code (what RocketMQ's readers pass), as Spark's rows
    assert want["tags_code"].isna().all()
    assert frame.loc[frame["ext_address"].isna() | ~frame.index.isin(want.index), "tags_code"].notna().all()
    wrong = [f for f in findings if f.kind == "cq_unit_mismatch"]
    assert len(wrong) == 1
    assert "tags code" in wrong[0].message
    assert wrong[0].offset == 3 * 20
