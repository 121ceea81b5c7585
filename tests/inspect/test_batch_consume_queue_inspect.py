"""Read-only inspection of 5.x BatchConsumeQueues: frames, `rmqlab cq`, files, and verify's checks.

The store is built byte by byte with the codecs (inner-batch records: INNER_BATCH_FLAG and
INNER_NUM; one 46-byte unit per record), so each check is tested against a known layout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from rmqlab.cli import main
from rmqlab.codec import batch_consume_queue_unit as bcq
from rmqlab.codec.message import encode_blank
from rmqlab.codec.names import offset_to_file_name as offset_file_name
from rmqlab.inspect import open_snapshot
from tests.batch_cq_store import BATCHES, BCQ_FILE
from tests.batch_cq_store import patch_unit as _patch_unit
from tests.batch_cq_store import write_batch_store as _write_store
from tests.inspect.conftest import fingerprint


def _kinds(path: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    with open_snapshot(path) as snap:
        for f in snap.verify():
            if f.kind != "checkpoint_missing":
                out[f.kind] = out.get(f.kind, 0) + 1
    return out


def test_frames_cli_and_a_clean_verify(tmp_path: Path) -> None:
    units = _write_store(tmp_path)
    before = fingerprint(tmp_path)
    with open_snapshot(tmp_path) as snap:
        assert set(snap.batch_consume_queues) == {("Batched", 0)}
        assert snap.batch_consume_queue_file_size == BCQ_FILE
        df = snap.batch_consume_queue("Batched", 0)
        assert [tuple(r) for r in df[["commit_log_offset", "size", "tags_code", "store_timestamp", "queue_offset",
                                      "batch_size"]].itertuples(index=False)] == units
        assert df["file"].tolist() == ["batchconsumequeue/Batched/0/" + offset_file_name(46 * 4 * (i // 4))
                                       for i in range(len(units))]
        assert df["position"].tolist() == [46 * (i % 4) for i in range(len(units))]
        # from the unit holding queue offset 4 (the batch 4..8), two units
        part = snap.batch_consume_queue("Batched", 0, start=6, limit=2)
        assert part["queue_offset"].tolist() == [4, 9]
        assert snap.batch_consume_queue("Batched", 0, start=sum(BATCHES)).empty
        files = snap.files()
        rows = files[files["kind"] == "batchconsumequeue"]
        assert rows["wrote_position"].tolist() == [184, 184, 46]
        assert "other" not in set(files["kind"])
        findings = [f for f in snap.verify(check_crc=True) if f.kind != "checkpoint_missing"]
        assert findings == []
    res = CliRunner().invoke(main, ["cq", str(tmp_path), "Batched", "0", "--json"])
    assert res.exit_code == 0, res.output
    got = json.loads(res.output)
    assert [(u["queue_offset"], u["batch_size"]) for u in got] == [(u[4], u[5]) for u in units]
    assert fingerprint(tmp_path) == before  # read-only


@pytest.mark.parametrize(("index", "pos", "fmt", "value", "expected"), [
    # a unit claiming 4 messages where the record holds 5 (INNER_NUM)
    (2, bcq.MSG_BATCH_SIZE_INDEX, ">h", 4, {"cq_unit_mismatch": 1, "bcq_offsets_gap": 1}),
    # a single record's unit claiming 2 messages: the next unit starts where 1 ends
    (1, bcq.MSG_BATCH_SIZE_INDEX, ">h", 2, {"cq_unit_mismatch": 1, "bcq_offsets_gap": 1}),
    # a wrong store time is no check of RocketMQ's; a wrong tags code is
    (5, 12, ">q", 99, {"cq_unit_mismatch": 1}),
    # pointing into the middle of a record
    (6, 0, ">q", 3, {"cq_unit_no_record": 1, "consume_queue_points_elsewhere": 1}),
])
def test_damaged_units_are_found(tmp_path: Path, index: int, pos: int, fmt: str, value: int,
                                 expected: dict[str, int]) -> None:
    _write_store(tmp_path)
    _patch_unit(tmp_path, index, pos, fmt, value)
    got = _kinds(tmp_path)
    assert {k: v for k, v in got.items() if v} == {k: v for k, v in expected.items() if v}
    with open_snapshot(tmp_path) as snap:
        f = next(f for f in snap.verify() if f.kind in expected and f.kind.startswith(("cq_unit", "bcq")))
        assert f.file.startswith("batchconsumequeue/Batched/0/")
        assert "batch queue Batched/0" in f.message


def test_units_pointing_elsewhere_and_missing_ones(tmp_path: Path) -> None:
    units = _write_store(tmp_path)
    # unit 7 (queue offset 18) points at unit 8's record: record 7 is "elsewhere", and unit 7 mismatches
    _patch_unit(tmp_path, 7, 0, ">q", units[8][0])
    got = _kinds(tmp_path)
    assert got["consume_queue_points_elsewhere"] == 1
    assert got["cq_unit_mismatch"] == 1
    # the last unit gone (a torn tail): its record is not dispatched yet
    _write_store(tmp_path / "b")
    _patch_unit(tmp_path / "b", 8, 0, ">q", -1)
    with open_snapshot(tmp_path / "b") as snap:
        missing = [f for f in snap.verify() if f.kind == "not_in_consume_queue"]
    assert [(f.severity, f.offset) for f in missing] == [("warning", units[8][0])]
    assert "at or past the batch queue's end 21" in missing[0].message


def test_store_notes_say_nothing_of_batch_queues(tmp_path: Path) -> None:
    """verify and the Spark audit both read them (tests/spark/test_audit_batch_queues.py)."""
    from rmqlab.inspect.checks import store_notes

    _write_store(tmp_path)
    with open_snapshot(tmp_path) as snap:
        assert [f.kind for f in store_notes(snap)] == []


def test_blank_and_wrong_sized_files(tmp_path: Path) -> None:
    _write_store(tmp_path)
    with open(tmp_path / "batchconsumequeue" / "Batched" / "0" / offset_file_name(46 * 4), "r+b") as f:
        f.truncate(100)
    got = _kinds(tmp_path)
    assert got.get("file_size_mismatch") == 1
    assert encode_blank(8)  # (the codec the store builder would use at a file end)


def test_topics_count_batch_queues_by_message(tmp_path: Path) -> None:
    units = _write_store(tmp_path)
    with open_snapshot(tmp_path) as snap:
        t = snap.topics().set_index(["topic", "queue_id"])
    row = t.loc[("Batched", 0)]
    assert (row.min_offset, row.max_offset, row.cq_units, row.messages, row.lag) == (0, sum(BATCHES), 9, 9, 0)
    assert row.cq_max_phy_offset == units[-1][0] + units[-1][1]
    assert row.cq_bytes == sum(u[1] for u in units)
    assert t.loc[("Plain", 0)].max_offset == 9
