"""Delayed messages, read without touching the store: snap.delays() and ``rmqlab delays``."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import pandas as pd
from click.testing import CliRunner

from rmqlab.cli import main
from rmqlab.clock import ManualClock
from rmqlab.config import MessageStoreConfig
from rmqlab.inspect import open_snapshot
from rmqlab.store.message import Message
from rmqlab.store.message_store import MessageStore

T0 = 1_700_000_000_000


def _delayed_store(root: Path) -> None:
    """Level 3 (10 s): two delivered; level 5 (1 min): one waiting, stored at T0 + 10 100."""
    clock = ManualClock(T0)
    store = MessageStore.open(root, MessageStoreConfig.small(str(root)), clock=clock, threaded=False)
    for level in (3, 3):
        assert store.put_message(Message("Orders", b"x", delay_time_level=level)).ok
    store.step()
    clock.advance(10_100)
    store.step()
    assert store.put_message(Message("Orders", b"y", delay_time_level=5)).ok
    store.shutdown()


def _digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_levels_offsets_and_what_waits(tmp_path: Path) -> None:
    root = tmp_path / "s"
    _delayed_store(root)
    before = _digest(root)
    with open_snapshot(root) as snap:
        df = snap.delays()
    assert _digest(root) == before  # read-only
    assert df.attrs == {"source": "file", "error": ""}
    rows = df.to_dict("records")
    assert [(r["level"], r["queue_id"], r["delay_ms"], r["max_offset"], r["waiting"]) for r in rows] == [
        (3, 2, 10_000, 2, 0), (5, 4, 60_000, 1, 1)]
    assert rows[0]["offset"] == 2
    assert pd.isna(rows[1]["offset"])  # never delivered: not in the file
    assert pd.isna(rows[0]["next_due_ms"])
    assert rows[1]["next_due_ms"] == T0 + 10_100 + 60_000
    with open_snapshot(root) as snap:
        assert snap.delays("1s 2s 3s 4s 5s").delay_ms.tolist() == [3_000, 5_000]


def test_a_damaged_file_reads_the_bak_and_says_why(tmp_path: Path) -> None:
    root = tmp_path / "s"
    _delayed_store(root)
    cfg = root / "config"
    (cfg / "delayOffset.json.bak").write_text('{"offsetTable":{3:1}}')
    (cfg / "delayOffset.json").write_text("{not json")
    with open_snapshot(root) as snap:
        df = snap.delays()
    assert df.attrs["source"] == "bak"
    assert "delayOffset.json: not JSON" in df.attrs["error"]
    assert df.set_index("level").loc[3, "offset"] == 1


def test_cli_delays(tmp_path: Path, reference_store: Callable[[str], Path]) -> None:
    root = tmp_path / "s"
    _delayed_store(root)
    r = CliRunner().invoke(main, ["delays", str(root), "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert set(out) == {"store", "source", "error", "levels"}
    assert [(x["level"], x["offset"], x["waiting"]) for x in out["levels"]] == [(3, 2, 0), (5, None, 1)]
    assert CliRunner().invoke(main, ["delays", str(root)]).exit_code == 0
    bad = CliRunner().invoke(main, ["delays", str(root), "--delay-levels", "1x"])
    assert bad.exit_code == 2
    assert "--delay-levels" in bad.output
    clean = CliRunner().invoke(main, ["delays", str(reference_store("clean-small")), "--json"])
    assert json.loads(clean.stdout) == {"store": json.loads(clean.stdout)["store"], "source": "file", "error": None,
                                        "levels": []}
