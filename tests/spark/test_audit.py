"""The Spark audit finds what verify() finds, on planted faults, many stores in one job."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import Any

import pytest

from tests.spark.conftest import store_paths

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def audited(spark: Any, stores: dict[str, Any]) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    from rmqlab.spark.jobs import audit

    findings, _ = audit(spark, store_paths(stores))
    return [tuple(r) for r in findings.collect()], []


def _verify(path: str) -> list[tuple[Any, ...]]:
    from rmqlab.inspect import open_snapshot

    with open_snapshot(path) as snap:
        return [(f.severity, f.kind, snap.path, f.file, f.offset, f.message) for f in snap.verify()]


def test_same_findings_as_verify_on_every_store(audited: Any, stores: dict[str, Any]) -> None:
    got = sorted(audited[0])
    want = sorted(f for p in store_paths(stores) for f in _verify(p))
    assert got == want


def _kinds(audited: Any, stores: dict[str, Any], name: str) -> dict[str, int]:
    path = os.path.abspath(stores[name])
    out: dict[str, int] = {}
    for f in audited[0]:
        if f[2] == path:
            out[f[1]] = out.get(f[1], 0) + 1
    return out


def test_planted_faults_are_found(audited: Any, stores: dict[str, Any]) -> None:
    assert _kinds(audited, stores, "clean-small") == {}
    assert _kinds(audited, stores, "rmqlab") == {}
    assert _kinds(audited, stores, "crash-tail") == {"not_in_consume_queue": 40, "abort_present": 1}
    assert _kinds(audited, stores, "cq-wrong") == {
        "cq_unit_mismatch": 1, "consume_queue_points_elsewhere": 1, "cq_not_monotonic": 1}
    assert _kinds(audited, stores, "index-wrong") == {"index_item_wrong_key": 1}
    assert _kinds(audited, stores, "lmq") == {"cq_unit_mismatch": 1}  # the good multi-dispatch units pass
    assert _kinds(audited, stores, "index-chain") == {"index_prev_bad": 1, "index_items_unreachable": 1}
    assert _kinds(audited, stores, "rocksdb") == {"rocksdb_consume_queue_not_read": 1, "compaction_not_read": 1}
    assert _kinds(audited, stores, "dledger") == {"dledger_commit_log_not_read": 1}
    torn = _kinds(audited, stores, "torn")
    assert torn["commitlog_bad_magic"] == 1
    assert torn["cq_units_past_log_end"] >= 1
    assert torn["index_items_past_log_end"] >= 1


def test_cli_exit_codes_and_outputs(spark: Any, stores: dict[str, Any], tmp_path: Any) -> None:
    from click.testing import CliRunner

    from rmqlab.spark.commands import spark as group

    runner = CliRunner()
    # one Spark run only (each costs seconds): exit 0 for a clean store is the same code path
    r = runner.invoke(group, ["audit", str(stores["cq-wrong"]), "--out", str(tmp_path / "b")])
    assert r.exit_code == 1, r.output
    doc = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert doc["by_severity"] == {"error": 2, "warning": 1}
    assert (tmp_path / "b" / "summary.html").exists()
    assert (tmp_path / "b" / "findings").is_dir()
    r = runner.invoke(group, ["audit", str(tmp_path / "nope"), "--out", str(tmp_path / "c")])
    assert r.exit_code == 2
    assert len(r.output.strip().splitlines()) == 1


def test_stats(spark: Any, stores: dict[str, Any], tmp_path: Any, reference_manifest: Any) -> None:
    from rmqlab.spark.jobs import stats, write_stats

    paths = store_paths(stores, "crash-tail")
    frames = stats(spark, paths)
    doc = write_stats(frames, str(tmp_path / "s"), paths)
    topics = doc["topics"]
    assert sum(t["messages"] for t in topics) == 800
    assert sum(t["lag"] for t in topics) == 40
    assert sum(r["messages"] for r in frames["by_hour"].collect()) == 800
    files = doc["index_files"]
    assert all(f["max_chain_length"] >= 1 and f["items"] > 0 for f in files)


def test_stray_file_named_near_long_max(spark: Any, stores: dict[str, Any], tmp_path: Any) -> None:
    """A stray CommitLog file named near Long.MAX_VALUE ends past a long (its name + the file
    size): the audit reports what verify reports (misaligned, a gap) instead of failing; a short
    one's ``short_last_file`` sits past a long too, and keeps Long.MAX_VALUE as its offset."""
    import shutil

    from rmqlab.spark.jobs import LONG_MAX, audit

    paths = []
    for name, size in (("stray", 65536), ("stray-short", 1000)):
        s = tmp_path / name
        shutil.copytree(stores["clean-small"], s)
        (s / "commitlog" / "09223372036854775000").write_bytes(bytes(size))
        paths.append(str(s))
    findings, _ = audit(spark, paths)
    got = sorted(tuple(r) for r in findings.collect())
    want = sorted(f if f[4] <= LONG_MAX else (*f[:4], LONG_MAX, f[5]) for p in paths for f in _verify(p))
    assert got == want
    kinds = sorted((f[2] == paths[1], f[1]) for f in want)
    assert kinds == [(False, "commitlog_offset_overflow"), (False, "file_gap"), (False, "file_name_misaligned"),
                     (True, "commitlog_offset_overflow"), (True, "file_gap"), (True, "file_name_misaligned"),
                     (True, "short_last_file")]
    assert [f[4] for f in _verify(paths[1]) if f[1] == "short_last_file"] == [9223372036854775000 + 1000]


def test_stray_records_named_near_long_max(spark: Any, stores: dict[str, Any], tmp_path: Any) -> None:
    """Real records in CommitLog files whose name + file size is past Long.MAX_VALUE (a file
    copied under such a name) failed the audit: offsets past a long in ``file_walks`` (ANSI
    overflow) and in the source's error row (Arrow). Now the audit reports what verify reports:
    ``commitlog_offset_overflow`` at each such file's name, none of its records read, units and
    index items pointing into it past the readable log (one at Long.MAX_VALUE itself past the
    log, whose end both cut there, on the aligned and the range join path), and the rest of the
    store as usual (the real last file stays the last: no ``file_not_full``)."""
    import shutil

    from rmqlab.spark.jobs import LONG_MAX, audit
    from rmqlab.testing import damage

    src = stores["clean-small"]
    data = (src / "commitlog" / "00000000000000065536").read_bytes()
    paths = [tmp_path / n for n in ("one", "two", "three")]
    for p in paths:
        shutil.copytree(src, p)
    one, two, three = paths
    cq, first_index = Path("consumequeue", "TopicA", "0", f"{0:020d}"), sorted((src / "index").iterdir())[0].name
    item = 40 + 64 * 4 + 20 + 4  # item 1's phy_offset
    (one / "commitlog" / "09223372036854774784").write_bytes(data)  # misaligned; byte 1024 on: past a long
    damage.set_bytes(one / cq, 40, struct.pack(">q", LONG_MAX))
    (two / "commitlog" / "09223372036854710272").write_bytes(data)  # aligned, ends at 2**63
    (two / "commitlog" / "09223372036854775000").write_bytes(data[:500])  # short, overlapping the one before
    damage.set_bytes(two / cq, 20, struct.pack(">q", 9223372036854710272 + 309))  # into the first
    damage.set_bytes(two / "index" / first_index, item, struct.pack(">q", 9223372036854775000 + 8))  # the second
    (three / "commitlog" / "09223372036854710272").write_bytes(data)  # every file name aligned: the equi-join
    damage.set_bytes(three / cq, 40, struct.pack(">q", LONG_MAX))
    damage.set_bytes(three / "index" / first_index, item, struct.pack(">q", LONG_MAX))
    findings, _ = audit(spark, [str(p) for p in paths])
    got = sorted(tuple(r) for r in findings.collect())
    want = sorted(f for p in paths for f in _verify(str(p)))
    assert got == want
    assert all(0 <= f[4] <= LONG_MAX for f in want)
    over = sorted((f[2], f[3], f[4]) for f in want if f[1] == "commitlog_offset_overflow")
    assert over == sorted([(str(one), "commitlog/09223372036854774784", 9223372036854774784),
                           (str(two), "commitlog/09223372036854710272", 9223372036854710272),
                           (str(two), "commitlog/09223372036854775000", 9223372036854775000),
                           (str(three), "commitlog/09223372036854710272", 9223372036854710272)])
    assert "overflow a signed 64-bit long, RocketMQ could never have written this file" in want[0][5]
    past = sorted((f[2], f[1], f[5].endswith(f"(end {LONG_MAX})")) for f in want if "past_log_end" in f[1])
    assert past == sorted([(str(one), "cq_units_past_log_end", True), (str(two), "cq_units_past_log_end", False),
                           # (the item is in both files' ranges, as they overlap)
                           (str(two), "index_items_past_log_end", False), (str(two), "index_items_past_log_end", False),
                           (str(three), "cq_units_past_log_end", True), (str(three), "index_items_past_log_end", True)])
    kinds = {f[1] for f in want}
    assert "file_overlap" in kinds
    assert not kinds & {"file_not_full", "commitlog_phys_offset_mismatch", "blank_not_at_file_end"}
