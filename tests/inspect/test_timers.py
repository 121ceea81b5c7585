"""5.x timer messages, read without touching the store: snap.timer_*(), snap.timers(), ``rmqlab timers``."""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqlab.cli import main
from rmqlab.codec.java_hash import java_hash
from rmqlab.errors import CorruptRecord, TruncatedRecord
from rmqlab.inspect import open_snapshot
from rmqlab.inspect.timers import TIMER_CHECKPOINT_COLUMNS, TIMER_COLUMNS, TIMER_LOG_COLUMNS, TIMER_WHEEL_COLUMNS
from rmqlab.testing.timer_store import T0, TimerStore, write_timer_store
from tests.inspect.conftest import fingerprint, full_inspection


@pytest.fixture
def timer_store(tmp_path: Path) -> TimerStore:
    return write_timer_store(tmp_path / "s")


def test_a_store_without_timer_files_gives_empty_frames(reference_store: Callable[[str], Path]) -> None:
    with open_snapshot(reference_store("clean-small")) as snap:
        frames = {"cp": snap.timer_checkpoint(), "wheel": snap.timer_wheel(), "log": snap.timer_log(),
                  "timers": snap.timers()}
    for df, cols in zip(frames.values(), (TIMER_CHECKPOINT_COLUMNS, TIMER_WHEEL_COLUMNS, TIMER_LOG_COLUMNS,
                                          TIMER_COLUMNS), strict=True):
        assert list(df.columns) == cols
        assert df.empty
        assert "no timer files" in df.attrs["note"]
        assert df.attrs["damage"] == []
    r = CliRunner().invoke(main, ["timers", str(reference_store("clean-small")), "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["timers"] == []
    assert out["checkpoint"] is None
    assert "no timer files" in out["note"]


def test_checkpoint_wheel_and_log(timer_store: TimerStore) -> None:
    with open_snapshot(timer_store.root) as snap:
        cp = snap.timer_checkpoint().iloc[0].to_dict()
        wheel = snap.timer_wheel()
        log = snap.timer_log()
    assert cp == {"last_read_time_ms": T0, "last_timer_log_flush_pos": 452, "last_timer_queue_offset": 6,
                  "master_timer_queue_offset": 6, "state_version": 0, "timestamp": T0, "counter": 7}
    u = timer_store.units
    # slot index = tick % 1,209,600; the old slot stays (never cleared) but is not pending
    assert wheel.to_dict("list") == {
        "slot": [(T0 - 6_000) // 1000 % 1_209_600, (T0 + 9_000) // 1000 % 1_209_600,
                 (T0 + 20_000) // 1000 % 1_209_600, (T0 + 2 * 86_400_000) // 1000 % 1_209_600],
        "time_ms": [T0 - 6_000, T0 + 9_000, T0 + 20_000, T0 + 2 * 86_400_000],
        "first_pos": [u["old"], u["m0"], u["m2"], u["far"]],
        "last_pos": [u["old"], u["del1"], u["ghost"], u["far"]],
        "num": [1, 1, 2, 1],  # slot A: two messages and one DELETE (-1)
        "magic": [0, 0, 0, 0],
        "pending": [False, True, True, True],
        "index_ok": [True, True, True, True],
    }
    assert log.attrs["damage"] == []
    assert log.attrs["file_size"] == 200
    assert log.file.tolist() == ["00000000000000000000"] * 3 + ["00000000000000000200"] * 3 + ["00000000000000000400"]
    assert log.timer_log_offset.tolist() == [0, 52, 104, 200, 252, 304, 400]  # a blank ends each 200-byte file
    assert log.prev_pos.tolist() == [-1, 0, -1, 104, 52, -1, -1]  # chains: m0 <- m1 <- del1; m2 <- ghost
    assert log.magic.tolist() == [1, 1, 1, 1, 5, 3, 1]
    assert log.roll.tolist() == [False] * 5 + [True, False]
    assert log.delete.tolist() == [False] * 4 + [True, False, False]
    assert log.delayed_time_ms.iloc[5] == T0 + 2 * 86_400_000  # ROLL: parked at the window's end
    assert log.offset_py.tolist() == [timer_store.offsets[n] for n in ("m0", "m1", "m2")] + [10**9] + [
        timer_store.offsets[n] for n in ("del1", "far", "old")]
    assert log.topic_hash.iloc[0] == java_hash("Orders")
    assert log.topic_hash.iloc[2] == java_hash("Payments")


def test_pending_timers_in_delivery_order(timer_store: TimerStore) -> None:
    with open_snapshot(timer_store.root) as snap:
        df = snap.timers()
    assert list(df.columns) == TIMER_COLUMNS
    assert df.attrs["read_time_ms"] == T0
    assert df.attrs["damage"] == []
    off = timer_store.offsets
    assert df.commit_log_offset.tolist() == [off["m0"], off["m1"], off["del1"], off["m2"], 10**9, off["far"],
                                             off["late"]]
    assert df.stage.tolist() == ["wheel"] * 6 + ["queue"]
    assert df.kind.tolist() == ["message", "message", "delete", "message", "message", "roll", "message"]
    assert df.cancelled.tolist() == [False, True, False, False, False, False, False]  # del1 names m1
    assert df.slot_ms.tolist()[:6] == [T0 + 9_000] * 3 + [T0 + 20_000] * 2 + [T0 + 2 * 86_400_000]
    out = timer_store.out_ms
    assert df.due_ms.tolist() == [out["m0"], out["m1"], out["del1"], out["m2"], T0 + 20_000, out["far"],
                                  out["late"]]
    assert out["far"] == T0 + 3 * 86_400_000 - 1000  # TIMER_OUT_MS: one tick early on a tick boundary
    ok = df[df.problem == ""]
    assert ok.real_topic.tolist() == ["Orders", "Orders", "Orders", "Payments", "Orders", "Orders"]
    assert ok.real_queue_id.tolist() == [1, 2, 2, 0, 0, 0]
    assert ok.uniq_key.tolist() == [timer_store.uniq[n] for n in ("m0", "m1", "del1", "m2", "far", "late")]
    assert ok["keys"].tolist() == [f"key-{n}" for n in ("m0", "m1", "del1", "m2", "far", "late")]
    assert df.queue_offset.iloc[-1] == 6
    assert pd.isna(df.timer_log_offset.iloc[-1])
    ghost = df.iloc[4]
    assert ghost.timer_log_offset == timer_store.units["ghost"]
    assert "no readable message at commit log offset 1000000000" in ghost.problem
    with open_snapshot(timer_store.root) as snap:
        assert snap.timers(limit=2).commit_log_offset.tolist() == [off["m0"], off["m1"]]
        assert [len(snap.timers(limit=n)) for n in range(9)] == [0, 1, 2, 3, 4, 5, 6, 7, 7]
        wrong = snap.timers(precision_ms=100)  # slots hold ticks: at 100 ms they read as 1/10 of the time
    assert wrong.stage.tolist() == ["queue"]  # every slot then lies before the read time


def test_inspection_changes_no_byte(timer_store: TimerStore) -> None:
    root = timer_store.root
    before = fingerprint(root)
    full_inspection(root)  # every frame and command, timers included
    runner = CliRunner()
    for args in (["timers", str(root)], ["timers", str(root), "--json"], ["timers", str(root), "--wheel"],
                 ["timers", str(root), "--json-lines", "--limit", "3"]):
        r = runner.invoke(main, args)
        assert r.exit_code == 0, (args, r.output)
    assert fingerprint(root) == before


def test_a_wheel_of_the_wrong_length_is_a_clear_error(timer_store: TimerStore) -> None:
    with open(timer_store.root / "timerwheel", "r+b") as f:
        f.truncate(38_707_200 - 32)
    with open_snapshot(timer_store.root) as snap, pytest.raises(CorruptRecord) as e:
        snap.timers()
    assert (e.value.file, e.value.offset, e.value.reason) == ("timerwheel", 38_707_168, "length_mismatch")
    r = CliRunner().invoke(main, ["timers", str(timer_store.root)])
    assert r.exit_code == 2
    assert r.stderr.strip() == ("rmqlab: error: corrupt record in timerwheel at offset 38707168: length_mismatch "
                                "(timer wheel is 38707168 bytes, expected 38707200)")


def test_a_truncated_timercheck_is_a_clear_error(timer_store: TimerStore) -> None:
    path = timer_store.root / "config" / "timercheck"
    path.write_bytes(path.read_bytes()[:40])
    with open_snapshot(timer_store.root) as snap, pytest.raises(TruncatedRecord) as e:
        snap.timer_checkpoint()
    assert (e.value.file, e.value.offset) == (os.path.join("config", "timercheck"), 40)
    r = CliRunner().invoke(main, ["timers", str(timer_store.root), "--json"])
    assert r.exit_code == 2
    assert "config/timercheck at offset 40: truncated" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_a_truncated_timerlog_is_reported_not_raised(timer_store: TimerStore) -> None:
    cut = timer_store.root / "timerlog" / "00000000000000000200"
    cut.write_bytes(cut.read_bytes()[:150])  # ghost, del1 whole; far (104..156) torn
    with open_snapshot(timer_store.root) as snap:
        log = snap.timer_log()
        df = snap.timers()
    assert log.attrs["damage"] == [
        {"file": "timerlog/00000000000000000200", "offset": 150, "reason": "length_mismatch",
         "detail": "150 bytes, the other files have 200"},
        {"file": "timerlog/00000000000000000200", "offset": 104, "reason": "truncated",
         "detail": "46 bytes left, a unit needs 52"},
    ]
    assert log.timer_log_offset.tolist() == [0, 52, 104, 200, 252, 400]
    assert df.attrs["damage"] == log.attrs["damage"]
    far = df[df.slot_ms == T0 + 2 * 86_400_000]
    assert len(far) == 1
    assert far.problem.iloc[0] == ("timerlog offset 304 lies past the valid units of timerlog/00000000000000000200 "
                                   "(they end at 304)")
    assert pd.isna(far.commit_log_offset.iloc[0])
    assert df.kind.tolist()[:5] == ["message", "message", "delete", "message", "message"]  # the rest still read
    r = CliRunner().invoke(main, ["timers", str(timer_store.root)])
    assert r.exit_code == 0
    assert "damage in timerlog/00000000000000000200 at offset 104: truncated" in r.stderr


def test_a_deleted_timerlog_file_and_a_damaged_record(timer_store: TimerStore) -> None:
    (timer_store.root / "timerlog" / "00000000000000000000").unlink()  # m0, m1, m2 gone
    with open(timer_store.root / "commitlog" / "00000000000000000000", "r+b") as f:
        f.seek(timer_store.offsets["late"] + 4)
        f.write(struct.pack(">i", 0x12345678))  # late's magic code
    with open_snapshot(timer_store.root) as snap:
        df = snap.timers()
    slot_a = df[df.slot_ms == T0 + 9_000]
    assert slot_a.kind.tolist() == [None, "delete"]  # the chain breaks at m1 (offset 52): reported
    assert slot_a.problem.iloc[0] == "timerlog has no file for offset 52 (deleted or missing)"
    slot_b = df[df.slot_ms == T0 + 20_000]
    # walked from ghost (last) back to m2, where it breaks; listed oldest first
    assert slot_b.problem.iloc[0] == "timerlog has no file for offset 104 (deleted or missing)"
    assert slot_b.problem.iloc[1].startswith("no readable message at commit log offset 1000000000")
    late = df[df.stage == "queue"].iloc[0]
    assert late.problem.startswith(f"no readable message at commit log offset {timer_store.offsets['late']}")


def test_the_readme_example_runs(tmp_path: Path) -> None:
    import subprocess
    import sys

    demo = tmp_path / "timer-demo"
    r = subprocess.run([sys.executable, "-m", "rmqlab.testing.timer_store", str(demo)], capture_output=True,
                       text=True, check=False)
    assert r.returncode == 0, r.stderr
    again = subprocess.run([sys.executable, "-m", "rmqlab.testing.timer_store", str(demo)], capture_output=True,
                           text=True, check=False)
    assert again.returncode != 0  # never writes over an existing dir
    assert "usage" in again.stderr
    runner = CliRunner()
    assert runner.invoke(main, ["timers", str(demo), "--limit", "3"]).exit_code == 0
    first = json.loads(runner.invoke(main, ["timers", str(demo), "--json-lines"]).stdout.splitlines()[0])
    assert (first["stage"], first["kind"], first["slot_ms"], first["due_ms"], first["real_topic"],
            first["real_queue_id"]) == ("wheel", "message", 1700000009000, 1700000009000, "Orders", 1)


def test_a_delete_names_its_message_bare_or_with_its_topic() -> None:
    from rmqlab.inspect.timers import _mark_cancelled

    def chain(del_key: str) -> list[dict[str, object]]:
        rows: list[dict[str, object]] = [
            {"kind": "message", "uniq_key": "UK1", "real_topic": "Orders"},
            {"kind": "roll", "uniq_key": "UK2", "real_topic": "Orders"},
            {"kind": "message", "uniq_key": "UK1", "real_topic": "Payments"},
            {"kind": "delete", "uniq_key": "UK9", "real_topic": "Orders", "_del": del_key},
        ]
        _mark_cancelled(rows)
        return rows

    # 5.x before buildDeleteKey: the bare UNIQ_KEY (any topic); later: REAL_TOPIC + "+" + UNIQ_KEY
    assert [r["cancelled"] for r in chain("UK1")] == [True, False, True, False]
    assert [r["cancelled"] for r in chain("Orders+UK1")] == [True, False, False, False]
    assert [r["cancelled"] for r in chain("Orders+UK2")] == [False, True, False, False]
    assert [r["cancelled"] for r in chain("UK3")] == [False, False, False, False]


def test_verify_reports_timer_damage(timer_store: TimerStore) -> None:
    def findings() -> list[tuple[str, str, str, int]]:
        with open_snapshot(timer_store.root) as snap:
            return [(f.severity, f.kind, f.file, f.offset) for f in snap.verify() if f.kind.startswith("timer_")]

    assert findings() == [("error", "timer_unit_problem", "timerlog", timer_store.units["ghost"])]
    with open(timer_store.root / "commitlog" / "00000000000000000000", "r+b") as f:
        f.seek(timer_store.offsets["late"] + 4)
        f.write(struct.pack(">i", 0x12345678))  # late (queue offset 6, not yet in the wheel) damaged
    cut = timer_store.root / "timerlog" / "00000000000000000200"
    cut.write_bytes(cut.read_bytes()[:150])
    assert findings() == [
        ("error", "timer_length_mismatch", "timerlog/00000000000000000200", 150),
        ("error", "timer_truncated", "timerlog/00000000000000000200", 104),
        ("error", "timer_unit_problem", "timerlog", timer_store.units["ghost"]),
        ("error", "timer_unit_problem", "timerlog", timer_store.units["far"]),
        ("error", "timer_unit_problem", "consumequeue/rmq_sys_wheel_timer/0/00000000000000000000", 6 * 20),
    ]
    (timer_store.root / "config" / "timercheck").unlink()
    assert ("warning", "timer_checkpoint_missing", "config/timercheck", 0) in findings()
    with open(timer_store.root / "timerwheel", "r+b") as f:
        f.truncate(100)
    assert findings() == [("error", "timer_length_mismatch", "timerwheel", 100)]
    r = CliRunner().invoke(main, ["verify", str(timer_store.root), "--json"])
    assert r.exit_code == 1
    assert any(x["kind"] == "timer_length_mismatch" for x in json.loads(r.stdout)["findings"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(st.tuples(st.integers(0, 12), st.booleans()), max_size=40),
       read_tick=st.integers(0, 8), file_units=st.integers(1, 6))
def test_chains_against_a_model(tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[int, bool]],
                                read_tick: int, file_units: int) -> None:
    """Random enqueues (tick, delete?) written as doEnqueue writes them: the pending rows are the
    model's units grouped by tick (oldest first), in enqueue order within a tick, and the wheel's
    num is units minus deletes per tick. No commit log: every row reports its missing record."""
    from rmqlab.codec.timer_checkpoint import TimerCheckpoint
    from rmqlab.testing.timer_store import TimerWriter

    root = tmp_path_factory.mktemp("model")
    (root / "commitlog").mkdir()
    writer = TimerWriter(file_size=file_units * 52 + 16 + 7)
    model: dict[int, list[tuple[int, bool]]] = {}
    for i, (tick, delete) in enumerate(ops):
        pos = writer.enqueue(10_000 + i, 100, T0 + tick * 1000, T0, "Orders", delete=delete)
        model.setdefault(tick, []).append((pos, delete))
    writer.write(root, TimerCheckpoint(last_read_time_ms=T0 + read_tick * 1000))
    with open_snapshot(root) as snap:
        df = snap.timers()
        wheel = snap.timer_wheel()
        log = snap.timer_log()
    expected = [(T0 + t * 1000, pos) for t in sorted(model) if t >= read_tick for pos, _ in model[t]]
    assert list(zip(df.slot_ms.tolist(), df.timer_log_offset.tolist(), strict=True)) == expected
    assert df.kind.tolist() == ["delete" if d else "message" for t in sorted(model) if t >= read_tick
                                for _, d in model[t]]
    assert all(p.startswith("no readable message") for p in df.problem)
    assert wheel.num.tolist() == [sum(-1 if d else 1 for _, d in model[t]) for t in sorted(model)]
    assert wheel.pending.tolist() == [t >= read_tick for t in sorted(model)]
    assert len(log) == len(ops)
    assert log.attrs["damage"] == []
