"""The index against stores written by the real RocketMQ 4.9.8 (tests/fixtures/REFERENCE-STORES.md).

``manifest.reopen.afterReopen.queryMessage`` holds ``DefaultMessageStore.queryMessage`` answers.
That method sorts ``IndexService.queryOffset``'s newest-first offsets ascending and leaves
``indexLastUpdate*`` at 0 when nothing was found; ``_as_query_message`` applies exactly that on
top of :meth:`IndexService.query_offset` (the store facade does the same).
"""

from __future__ import annotations

import json
import os
import shutil
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from rmqlab.clock import ManualClock
from rmqlab.codec.walk import DispatchRequest
from rmqlab.store.index_service import IndexService, QueryOffsetResult
from rmqlab.store.store_checkpoint import StoreCheckpoint

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SLOTS, ITEMS = 64, 256  # the reference stores' maxHashSlotNum / maxIndexNum


@cache
def manifest(scenario: str) -> dict[str, Any]:
    with open(FIXTURES / scenario / "manifest.json", encoding="utf-8") as fh:
        return json.load(fh)  # type: ignore[no-any-return]


def queries(scenario: str) -> list[dict[str, Any]]:
    return manifest(scenario)["reopen"]["afterReopen"]["queryMessage"]  # type: ignore[no-any-return]


def dispatch_request(m: dict[str, Any]) -> DispatchRequest:
    return DispatchRequest(
        m["topic"], m["queueId"], m["commitLogOffset"], m["storeSize"], m["tagsCode"],
        m["storeTimestamp"], m["queueOffset"], m["keys"], m["uniqKey"], m["sysFlag"],
        m["preparedTransactionOffset"], m["properties"],
    )


def _as_query_message(r: QueryOffsetResult) -> tuple[list[int], int, int]:
    if not r.phy_offsets:
        return [], 0, 0
    return sorted(r.phy_offsets), r.index_last_update_timestamp, r.index_last_update_phyoffset


def _check_queries(svc: IndexService, scenario: str) -> None:
    for q in queries(scenario):
        r = svc.query_offset(q["topic"], q["key"], q["maxNum"], q["begin"], q["end"])
        # IndexService order: newest first (offsets grow with time in these stores)
        assert r.phy_offsets == sorted(r.phy_offsets, reverse=True), q
        got = _as_query_message(r)
        want = (q["resultCommitLogOffsets"], q["indexLastUpdateTimestamp"],
                q["indexLastUpdatePhyoffset"])
        assert got == want, (q["topic"], q["key"], q["maxNum"], q["begin"], q["end"])


def _copy_store(scenario: str, dest: Path) -> Path:
    src = FIXTURES / scenario / "store"
    shutil.copytree(src / "index", dest / "index")
    shutil.copy(src / "checkpoint", dest / "checkpoint")
    return dest


def _service(root: Path, checkpoint: StoreCheckpoint, clock: ManualClock | None = None,
             read_only: bool = False) -> IndexService:
    return IndexService(str(root / "index"), hash_slot_num=SLOTS, index_num=ITEMS,
                        checkpoint=checkpoint, clock=clock or ManualClock(), read_only=read_only)


# --- clean-small ---------------------------------------------------------------------------------


def test_clean_small_queries_on_the_real_index(tmp_path: Path) -> None:
    root = _copy_store("clean-small", tmp_path)
    cp = StoreCheckpoint(str(root / "checkpoint"))
    svc = _service(root, cp)
    assert svc.load(True)
    assert svc.load_report == []
    assert len(svc.index_files) == 6
    _check_queries(svc, "clean-small")
    svc.shutdown()
    cp.shutdown()


def test_clean_small_read_only_in_place() -> None:
    root = FIXTURES / "clean-small" / "store"
    before = {p.name: p.stat().st_mtime_ns for p in (root / "index").iterdir()}
    cp = StoreCheckpoint(str(root / "checkpoint"), read_only=True)
    svc = _service(root, cp, read_only=True)
    assert svc.load(True)
    _check_queries(svc, "clean-small")
    svc.shutdown()
    cp.shutdown()
    assert {p.name: p.stat().st_mtime_ns for p in (root / "index").iterdir()} == before


def test_clean_small_rebuilt_from_scratch_is_byte_identical(tmp_path: Path) -> None:
    cp = StoreCheckpoint(str(tmp_path / "checkpoint"))
    svc = _service(tmp_path, cp, ManualClock(1_795_342_856_000))
    for m in manifest("clean-small")["messages"]:
        svc.build_index(dispatch_request(m))
    _check_queries(svc, "clean-small")
    svc.flush()
    ref_dir = FIXTURES / "clean-small" / "store" / "index"
    refs = [(ref_dir / n).read_bytes() for n in sorted(os.listdir(ref_dir))]
    ours = [Path(f.file_name).read_bytes() for f in svc.index_files]
    assert len(ours) == len(refs)
    for i, (a, b) in enumerate(zip(ours, refs, strict=True)):
        assert a == b, f"index file #{i} differs"
    # the last full file's end time, exactly as the real store checkpointed it
    ref_cp = manifest("clean-small")["reopen"]["beforeReopen"]["checkpoint"]
    assert cp.index_msg_timestamp == ref_cp["indexMsgTimestamp"]
    svc.shutdown()
    cp.shutdown()


# --- crash-tail ----------------------------------------------------------------------------------

CRASH_RECOVERY_START = 327680  # the commitlog file abnormal recovery started from (README)


def test_crash_tail_load_drops_the_open_file_and_recovery_rebuilds_it(tmp_path: Path) -> None:
    root = _copy_store("crash-tail", tmp_path)
    cp = StoreCheckpoint(str(root / "checkpoint"))
    svc = _service(root, cp, ManualClock(1_795_342_891_937))
    assert svc.load(False)
    before = manifest("crash-tail")["reopen"]["beforeReopen"]["files"]
    ref_names = sorted(os.path.basename(f["path"]) for f in before
                       if f["path"].startswith("index/"))
    kept = [f.name for f in svc.index_files]
    assert kept == ref_names[:-1]
    assert [os.path.basename(e.file) for e in svc.load_report] == [ref_names[-1]]
    # abnormal recovery re-dispatches every record from its start file, in order
    for m in manifest("crash-tail")["messages"]:
        if m["commitLogOffset"] >= CRASH_RECOVERY_START:
            svc.build_index(dispatch_request(m))
    _check_queries(svc, "crash-tail")
    after = manifest("crash-tail")["reopen"]["afterReopenShutdown"]["files"]
    assert len(svc.index_files) == sum(f["path"].startswith("index/") for f in after)
    svc.shutdown()
    cp.shutdown()


@pytest.mark.parametrize("scenario", ["clean-small", "crash-tail"])
def test_manifest_has_the_expected_query_kinds(scenario: str) -> None:
    qs = queries(scenario)
    assert any(q["maxNum"] == 4 for q in qs)
    assert any(len(r) != len(set(r)) for r in (q["resultCommitLogOffsets"] for q in qs))
    assert any(not q["resultCommitLogOffsets"] for q in qs)
