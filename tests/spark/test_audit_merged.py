"""The audit's merged plan (local driver tables, one edge aggregation, join-based suspects, one
sorted partition) yields verify()'s findings and summary on a multi-store input."""

from __future__ import annotations

import os
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.spark.conftest import store_paths

pytestmark = pytest.mark.spark


def _verify(path: str, check_crc: bool = False) -> list[tuple[Any, ...]]:
    from rmqlab.inspect import open_snapshot

    with open_snapshot(path) as snap:
        return [(f.severity, f.kind, snap.path, f.file, f.offset, f.message) for f in snap.verify(check_crc=check_crc)]


def _digests(paths: list[str]) -> dict[str, str]:
    import hashlib

    return {os.path.join(d, f): hashlib.sha256(Path(d, f).read_bytes()).hexdigest()
            for p in paths for d, _, files in os.walk(p) for f in files}


def test_local_tables_equal_created_frames(spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from rmqlab.spark import jobs

    schema = jobs._FILES_SCHEMA
    rows = [("/s/it's", "commitlog/0", 0, 2**40, 7, 1), ("/s/b\\c\nd", "x", -1, 0, 0, 0)]
    df = jobs._local(spark, rows, schema)
    assert "LocalRelation" in df._jdf.queryExecution().optimizedPlan().toString()
    assert [tuple(r) for r in df.collect()] == rows
    assert [(f.name, f.dataType) for f in df.schema] == [(f.name, f.dataType) for f in schema]
    empty = jobs._local(spark, [], jobs._STORES_SCHEMA)
    assert empty.collect() == []
    assert empty.columns == [f.name for f in jobs._STORES_SCHEMA]
    nulls = [("/s", 0, 0, 0, 0, None, None, None, 1, 0, 1)]
    with pytest.raises(ValueError, match="10 values, schema has 11"):
        jobs._local(spark, [nulls[0][:-1]], jobs._STORES_SCHEMA)
    assert [tuple(r) for r in jobs._local(spark, nulls, jobs._STORES_SCHEMA).collect()] == nulls
    monkeypatch.setattr(jobs, "LOCAL_TABLE_ROWS", 1)  # more rows: createDataFrame, same rows
    assert [tuple(r) for r in jobs._local(spark, rows, schema).collect()] == rows


def test_merged_audit_on_many_stores_equals_verify(spark: Any, stores: dict[str, Any], tmp_path: Path) -> None:
    from rmqlab.spark.jobs import (
        _cq_to_log,
        _edges,
        _index_to_log,
        _local,
        _located,
        audit_inputs,
        file_walks,
        load_inputs,
        outside_log,
        pointers,
        suspects,
    )

    # the same faulty store under two paths, next to stores with every kind of edge finding
    twin = tmp_path / "cq-wrong-twin"
    shutil.copytree(stores["cq-wrong"], twin, copy_function=os.link)
    paths = [*store_paths(stores, "cq-wrong", "crash-tail", "torn", "misaligned", "index-wrong", "empty"), str(twin)]
    inp = load_inputs(spark, paths)
    try:
        findings, summary = audit_inputs(inp)
        got = [tuple(r) for r in findings.collect()]
        want = [f for p in paths for f in _verify(p)]
        assert sorted(got) == sorted(want)
        assert got == sorted(got, key=lambda f: (f[2], f[3], f[4], f[1], f[5]))  # store, file, offset, kind, message
        assert [f for f in got if f[2] == str(twin)] == [(*f[:2], str(twin), *f[3:]) for f in got
                                                        if f[2] == os.path.abspath(stores["cq-wrong"])]
        counts = Counter((f[2], f[0], f[1]) for f in want)
        assert [tuple(r) for r in summary.collect()] == [(*k, n) for k, n in sorted(counts.items())]

        # the one edge aggregation equals the four separate checks it replaced
        w = file_walks(inp.records, inp.files)
        walks = _local(spark, w.collect(), w.schema)
        ptrs = pointers(inp.units, inp.items, walks, inp.stores, inp.misaligned)
        sus = suspects(inp.records, ptrs)
        old = (outside_log(inp.units, inp.items, inp.stores).unionByName(_cq_to_log(sus, ptrs)[0])
               .unionByName(_index_to_log(sus, ptrs)[0]))
        new = _edges(_located(inp.units, inp.items, walks, inp.stores, inp.misaligned))
        old_rows = sorted(tuple(r) for r in old.collect())
        new_rows = sorted(tuple(r) for r in new.collect())
        assert new_rows == old_rows
        kinds = {r[1] for r in new_rows}
        assert {"cq_units_past_log_end", "index_items_past_log_end"} <= kinds
    finally:
        inp.unpersist()


def test_crc_check_and_caps_equal_verify(spark: Any, stores: dict[str, Any], tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """``check_crc`` adds verify(check_crc=True)'s ``commitlog_crc_mismatch``; with a cap of 3
    findings per kind and file (both sides), the capped checks keep verify's first rows and its
    "... and N more" row."""
    import importlib

    from rmqlab.spark import jobs

    monkeypatch.setattr(importlib.import_module("rmqlab.inspect.checks"), "_MAX_PER_KIND", 3)
    monkeypatch.setattr(jobs, "MAX_PER_KIND", 3)
    bad = tmp_path / "crc"
    shutil.copytree(stores["rmqlab"], bad)
    log = sorted((bad / "commitlog").iterdir())[0]
    data = bytearray(log.read_bytes())
    at = data.find(b"body 17 body 17 ")
    assert at > 0
    data[at] ^= 0xFF  # one body byte: the record's CRC no longer matches, nothing else changes
    log.write_bytes(bytes(data))
    paths = [str(bad), *store_paths(stores, "crash-tail", "cq-wrong", "index-wrong", "torn")]
    findings, _ = jobs.audit(spark, paths, check_crc=True)
    got = sorted(tuple(r) for r in findings.collect())
    want = sorted(f for p in paths for f in _verify(p, check_crc=True))
    assert got == want
    assert Counter(f[1] for f in got)["commitlog_crc_mismatch"] == 1
    assert any(f[5].startswith("... and ") and f[5].endswith("(not listed)") for f in got)


def test_audit_of_consume_queue_ext_stores_equals_verify(spark: Any, ext_stores: dict[str, Any]) -> None:
    """Stores written with ConsumeQueueExt (tiny ext files that roll): tags checked through the
    ext units, addresses that resolve to nothing (a deleted, a cut and a zeroed ext file region,
    no consumequeue_ext/ at all) are verify's ``cq_ext_unit_missing`` warnings, capped per queue."""
    from rmqlab.spark.jobs import audit_inputs, ext_lost, load_inputs

    paths = store_paths(ext_stores)
    before = _digests(paths)
    inp = load_inputs(spark, paths)
    try:
        findings, _summary = audit_inputs(inp)
        got = [tuple(r) for r in findings.collect()]
        step = sorted(tuple(r) for r in ext_lost(inp.units, inp.queues).collect())
    finally:
        inp.unpersist()
    want = [f for p in paths for f in _verify(p)]
    assert sorted(got) == sorted(want)
    assert step == sorted(f for f in want if f[1] == "cq_ext_unit_missing")
    assert _digests(paths) == before  # read-only
    kinds = Counter((os.path.basename(f[2]), f[0], f[1]) for f in got)
    assert not [k for k in kinds if k[0] == "ext" and k[1] != "info"]  # tags agree through the ext units
    assert kinds[("ext-damaged", "error", "cq_unit_mismatch")] == 1  # the unit saying TagZ
    assert kinds[("ext-damaged", "warning", "cq_ext_unit_missing")] > 1
    assert kinds[("ext-damaged", "error", "file_size_mismatch")] == 1  # the cut ext file
    lost = [f for f in got if f[2].endswith("ext-no-run") and f[1] == "cq_ext_unit_missing"]
    assert len(lost) > 1000
    assert lost[0][0] == "warning"
    assert any(f[5].startswith("... and ") for f in lost)
    assert all("no consumequeue_ext run" in f[5] for f in lost if not f[5].startswith("... and "))


def test_prop_crc_check_equals_verify_and_fills_the_column(spark: Any, stores: dict[str, Any],
                                                            tmp_path: Path) -> None:
    """A store written with the 5.x ``__CRC32#`` property: ``check_crc`` reports a header bit
    flip (which the body CRC cannot see) as ``commitlog_prop_crc_mismatch`` and a body flip as
    both mismatches, exactly as verify(check_crc=True) does; the records table's ``prop_crc_ok``
    is True, False where damaged, and null for a store written without the property."""
    from rmqlab.clock import ManualClock
    from rmqlab.config import MessageStoreConfig
    from rmqlab.spark import jobs
    from rmqlab.store.message import Message
    from rmqlab.store.message_store import MessageStore

    root = tmp_path / "prop-crc"
    config = MessageStoreConfig.small(str(root), rocketmq_version="5.3.3", enabled_append_prop_crc=True)
    clock = ManualClock()
    with MessageStore.open(str(root), config, clock=clock, threaded=False) as store:
        wrote = [store.put_message(Message("TopicP", f"body {i} ".encode() * (1 + i % 9), tags="T",
                                           keys=[f"k{i}"])).wrote_offset for i in range(60)]
        clock.advance(1000)
        store.step()
    log = sorted((root / "commitlog").iterdir())[0]
    data = bytearray(log.read_bytes())
    data[wrote[7] + 44] ^= 0x01  # BORNTIMESTAMP's low byte: the body CRC still matches
    at = data.find(b"body 30 ", wrote[30])
    data[at] ^= 0xFF  # a body byte: both CRCs fail
    log.write_bytes(bytes(data))
    paths = [str(root), *store_paths(stores, "rmqlab")]
    findings, _ = jobs.audit(spark, paths, check_crc=True)
    got = sorted(tuple(r) for r in findings.collect())
    assert got == sorted(f for p in paths for f in _verify(p, check_crc=True))
    mine = Counter((f[1], f[4]) for f in got if f[2] == str(root))
    assert mine[("commitlog_prop_crc_mismatch", wrote[7])] == 1
    assert mine[("commitlog_crc_mismatch", wrote[7])] == 0
    assert mine[("commitlog_prop_crc_mismatch", wrote[30])] == mine[("commitlog_crc_mismatch", wrote[30])] == 1
    df = spark.read.format("rmq_commitlog").load(str(root)).select("offset", "prop_crc_ok").toPandas()
    bad = {wrote[7], wrote[30]}
    assert dict(zip(df["offset"], df["prop_crc_ok"], strict=True)) == {w: w not in bad for w in wrote}
    plain = spark.read.format("rmq_commitlog").load(str(stores["rmqlab"])).select("prop_crc_ok").toPandas()
    assert len(plain) == 300
    assert plain["prop_crc_ok"].isna().all()
