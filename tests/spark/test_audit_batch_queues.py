"""The Spark audit reads 5.x BatchConsumeQueues and finds what verify() finds in them.

``rmq_batchconsumequeue`` returns the units ``rmqlab.inspect`` reads (each file's valid prefix,
the next file only after a full one); the audit checks units against records (INNER_NUM for an
inner batch), records against units, gaps, and units outside the log, with verify's messages and
caps, on a clean store and on each planted fault (``batch_stores`` in conftest.py).
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests.spark.conftest import store_paths

pytestmark = pytest.mark.spark

_UNIT_COLS = ["file", "position", "commit_log_offset", "size", "tags_code", "store_timestamp", "queue_offset",
              "batch_size"]


def _rows(df: pd.DataFrame) -> list[tuple[Any, ...]]:
    return [(str(r[0]), *map(int, r[1:])) for r in df[_UNIT_COLS].itertuples(index=False)]


def _verify(path: str) -> list[tuple[Any, ...]]:
    from rmqlab.inspect import open_snapshot

    with open_snapshot(path) as snap:
        return [(f.severity, f.kind, snap.path, f.file, f.offset, f.message) for f in snap.verify()]


def _digests(paths: list[str]) -> dict[str, str]:
    import hashlib

    return {os.path.join(d, f): hashlib.sha256(Path(d, f).read_bytes()).hexdigest()
            for p in paths for d, _, files in os.walk(p) for f in files}


@pytest.fixture(scope="module")
def audited(spark: Any, batch_stores: dict[str, Path]) -> list[tuple[Any, ...]]:
    from rmqlab.spark.jobs import audit

    paths = store_paths(batch_stores)
    before = _digests(paths)
    findings, _ = audit(spark, paths)
    rows = [tuple(r) for r in findings.collect()]
    assert _digests(paths) == before  # read-only
    return rows


def test_audit_equals_verify_on_every_batch_store(audited: list[tuple[Any, ...]],
                                                  batch_stores: dict[str, Path]) -> None:
    want = sorted(f for p in store_paths(batch_stores) for f in _verify(p))
    assert sorted(audited) == want


#: per store, the kinds both readers report (checkpoint_missing: these stores have none)
EXPECTED = {
    "bcq": {},
    "bcq-batch-size": {"cq_unit_mismatch": 1, "bcq_offsets_gap": 1},
    "bcq-single-2": {"cq_unit_mismatch": 1, "bcq_offsets_gap": 1},
    "bcq-tags": {"cq_unit_mismatch": 1},
    "bcq-mid-record": {"cq_unit_no_record": 1, "consume_queue_points_elsewhere": 1},
    "bcq-elsewhere": {"consume_queue_points_elsewhere": 1, "cq_unit_mismatch": 1},
    "bcq-torn-tail": {"not_in_consume_queue": 1},
    "bcq-short-file": {"file_size_mismatch": 1, "not_in_consume_queue": 3},
    "bcq-dup-base": {"bcq_offsets_gap": 1, "cq_unit_mismatch": 1, "not_in_consume_queue": 1,
                     "consume_queue_points_elsewhere": 1},
    "bcq-inner-num": {"cq_unit_mismatch": 1},
    "bcq-stale": {"commitlog_phys_offset_mismatch": 1, "cq_unit_mismatch": 1},
    "bcq-past-end": {"cq_units_past_log_end": 1, "consume_queue_points_elsewhere": 1},
    "bcq-torn-log": {"commitlog_bad_magic": 1, "cq_units_past_log_end": 2},
    "bcq-also-plain": {"cq_unit_mismatch": 9, "consume_queue_points_elsewhere": 3, "not_in_consume_queue": 6},
    "bcq-empty-queue": {"not_in_consume_queue": 9},
    "bcq-tags-all": {"cq_unit_mismatch": 9},
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_planted_faults_are_found(audited: list[tuple[Any, ...]], batch_stores: dict[str, Path], name: str) -> None:
    path = os.path.abspath(batch_stores[name])
    got = Counter(f[1] for f in audited if f[2] == path and f[1] != "checkpoint_missing")
    assert dict(got) == EXPECTED[name]


def test_messages_name_the_batch_queue(audited: list[tuple[Any, ...]], batch_stores: dict[str, Path]) -> None:
    def of(name: str, kind: str) -> list[tuple[Any, ...]]:
        return [f for f in audited if f[2] == os.path.abspath(batch_stores[name]) and f[1] == kind]

    (f,) = of("bcq-inner-num", "cq_unit_mismatch")
    assert f[3] == "batchconsumequeue/Batched/0/00000000000000000000"
    assert f[4] == 2 * 46
    assert "batch size differ" in f[5]
    assert "messages -1)" in f[5]
    (f,) = of("bcq-stale", "cq_unit_mismatch")
    assert "messages -1)" in f[5]  # verify reads no INNER_NUM of a stale record
    (f,) = of("bcq-torn-tail", "not_in_consume_queue")
    assert "at or past the batch queue's end 21" in f[5]
    (f,) = of("bcq-dup-base", "not_in_consume_queue")
    assert f[5].endswith("queue offset 9 starts no unit of the batch queue")
    (f,) = of("bcq-dup-base", "consume_queue_points_elsewhere")  # unit 4 points at it, but a lookup finds unit 3
    assert "batch queue Batched/0 queue offset 10: its unit points at" in f[5]
    plain = of("bcq-also-plain", "cq_unit_mismatch")
    assert plain
    assert not any("batch queue" in f[5] for f in plain)


def test_caps_equal_verify(spark: Any, batch_stores: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """With a cap of 3 per kind and group on both sides, the same first rows and "... and N more" rows."""
    import importlib

    from rmqlab.spark import jobs

    monkeypatch.setattr(importlib.import_module("rmqlab.inspect.checks"), "_MAX_PER_KIND", 3)
    monkeypatch.setattr(jobs, "MAX_PER_KIND", 3)
    paths = store_paths(batch_stores, "bcq-tags-all", "bcq-empty-queue")
    findings, _ = jobs.audit(spark, paths)
    got = sorted(tuple(r) for r in findings.collect())
    assert got == sorted(f for p in paths for f in _verify(p))
    more = [f for f in got if f[5].startswith("... and 6 more")]
    assert sorted(f[1] for f in more) == ["cq_unit_mismatch", "not_in_consume_queue"]


def test_source_rows_equal_snapshot_frames(spark: Any, batch_stores: dict[str, Path]) -> None:
    from rmqlab.inspect import open_snapshot

    names = ["bcq", "bcq-short-file", "bcq-torn-tail", "bcq-empty-queue", "bcq-dup-base", "bcq-also-plain"]
    paths = store_paths(batch_stores, *names)
    df = spark.read.format("rmq_batchconsumequeue").load(",".join(paths)).toPandas()
    assert list(df.columns) == ["store_path", "topic", "queue_id", "file", "position", "unit_index",
                                "commit_log_offset", "size", "tags_code", "store_timestamp", "queue_offset",
                                "batch_size"]
    counts = {}
    for path in paths:
        with open_snapshot(path) as snap:
            for topic, qid in snap.batch_consume_queues:
                want = snap.batch_consume_queue(topic, qid)
                got = df[(df.store_path == path) & (df.topic == topic) & (df.queue_id == qid)].sort_values("unit_index")
                assert got["unit_index"].tolist() == list(range(len(want)))
                assert _rows(got) == _rows(want)
                counts[os.path.basename(path)] = len(want)
    assert counts == {"bcq": 9, "bcq-short-file": 6, "bcq-torn-tail": 8, "bcq-empty-queue": 0, "bcq-dup-base": 9,
                      "bcq-also-plain": 9}


def test_inner_num_column_is_what_verify_reads(batch_stores: dict[str, Path]) -> None:
    """``inner_num`` (asked for by name): INNER_NUM of inner-batch records as ``int()`` reads
    the decoded property, null for single records and where it is no number (in-process read)."""
    from rmqlab.inspect import open_snapshot
    from rmqlab.spark import schemas
    from rmqlab.spark.sources import CommitLogReader

    for name in ("bcq", "bcq-inner-num"):
        path = store_paths(batch_stores, name)[0]
        cols = ["offset", "sys_flag", "inner_num"]
        reader = CommitLogReader({"path": path, "columns": ",".join(cols)}, schemas.commit_log_schema(columns=cols))
        rows = [r for p in reader.partitions() for b in reader.read(p) for r in b.to_pylist()]
        want = []
        with open_snapshot(path) as snap:
            for r in rows:
                value = None
                if r["sys_flag"] & 0x80:
                    try:
                        value = int(snap.read_record(r["offset"]).properties["INNER_NUM"])
                    except ValueError:
                        pass
                want.append(value)
        assert [r["inner_num"] for r in rows] == want
        assert sum(v is not None for v in want) == (5 if name == "bcq" else 4)


_FIGURES = {"cq_min_offset": "min_offset", "cq_max_offset": "max_offset", "cq_units": "cq_units",
            "cq_bytes": "cq_bytes", "cq_max_phy_offset": "cq_max_phy_offset", "messages": "messages",
            "bytes": "bytes", "min_queue_offset": "min_queue_offset", "max_queue_offset": "max_queue_offset",
            "lag": "lag"}
#: what ``topics_frame`` reports for a queue without consume-queue files (stats: null) or records
_NO_CQ = {"cq_min_offset": 0, "cq_max_offset": 0, "cq_units": 0, "cq_bytes": 0, "cq_max_phy_offset": -1,
          "min_queue_offset": -1, "max_queue_offset": -1}


def test_stats_topics_equal_inspect_on_batch_stores(spark: Any, batch_stores: dict[str, Path],
                                                    stores: dict[str, Path]) -> None:
    """``stats()``'s per-queue figures are ``rmqlab inspect``'s (``snap.topics()``): a batch
    queue's offsets by message, one unit per record, its end and lag; plain queues (a plain store,
    and a queue with plain files too) keep theirs."""
    from rmqlab.inspect import open_snapshot
    from rmqlab.spark.jobs import stats

    paths = [*store_paths(batch_stores), *store_paths(stores, "crash-tail")]
    got: dict[tuple[str, str, int], dict[str, Any]] = {}
    for r in stats(spark, paths)["topics"].collect():
        d = r.asDict()
        got[(d["store"], d["topic"], d["queue_id"])] = {
            k: _NO_CQ[k] if d[k] is None and k in _NO_CQ else d[k] for k in _FIGURES}
    want: dict[tuple[str, str, int], dict[str, Any]] = {}
    for p in paths:
        with open_snapshot(p) as snap:
            for row in snap.topics().to_dict("records"):
                want[(snap.path, row["topic"], int(row["queue_id"]))] = {k: int(row[v]) for k, v in _FIGURES.items()}
    assert got == want
    # the batch queue shows its end and lag (it used to show none)
    clean = got[(os.path.abspath(batch_stores["bcq"]), "Batched", 0)]
    assert clean["cq_max_offset"] > 0
    assert clean["cq_units"] > 0
    assert clean["lag"] == 0
    assert got[(os.path.abspath(batch_stores["bcq-torn-tail"]), "Batched", 0)]["lag"] > 0
    assert got[(os.path.abspath(batch_stores["bcq-empty-queue"]), "Batched", 0)]["lag"] > 0
