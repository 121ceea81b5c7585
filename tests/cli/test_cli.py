"""The rmqlab command line: JSON shapes, exit codes, one-line errors."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from rmqlab.cli import main

MESSAGE_KEYS = {
    "commit_log_offset", "store_size", "topic", "queue_id", "queue_offset", "tags", "tags_code", "keys", "uniq_key",
    "msg_id", "flag", "sys_flag", "born_timestamp", "store_timestamp", "born_host", "store_host", "body_length",
    "body_crc", "crc_ok", "file",
}


def run(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def js(*args: str) -> Any:
    r = run(*args)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


@pytest.fixture
def clean(reference_store: Callable[[str], Path]) -> str:
    return str(reference_store("clean-small"))


def test_help_everywhere_has_an_example() -> None:
    for cmd in ("inspect", "messages", "cq", "get", "query", "index", "verify", "recover", "cleanup", "demo",
                "delays", "timers"):
        r = run(cmd, "--help")
        assert r.exit_code == 0, cmd
        assert "Example: rmqlab" in r.output, cmd


def test_inspect_json(clean: str) -> None:
    out = js("inspect", clean, "--json")
    assert set(out) == {"store", "abort_present", "commit_log", "consume_queue_file_size", "batch_consume_queues",
                        "index", "files_per_kind", "queues", "checkpoint"}
    assert set(out["commit_log"]) == {"files", "file_size", "min_offset", "max_offset"}
    assert out["commit_log"]["max_offset"] == 583309
    assert not out["abort_present"]
    assert set(out["queues"][0]) == {"topic", "queue_id", "min_offset", "max_offset", "cq_units", "cq_bytes",
                                     "cq_max_phy_offset", "messages", "bytes", "min_queue_offset",
                                     "max_queue_offset", "lag"}
    assert sum(q["messages"] for q in out["queues"]) == 600
    assert set(out["checkpoint"]) >= {"physic_msg_timestamp", "logics_msg_timestamp", "min_timestamp"}
    assert run("inspect", clean).exit_code == 0


def test_messages_json_and_lines(clean: str) -> None:
    rows = js("messages", clean, "--topic", "TopicA", "--queue", "1", "--limit", "3", "--json", "--body", "hex")
    assert len(rows) == 3
    assert set(rows[0]) == MESSAGE_KEYS | {"body"}
    assert all(r["topic"] == "TopicA" and r["queue_id"] == 1 for r in rows)
    r = run("messages", clean, "--from-offset", str(rows[1]["commit_log_offset"]), "--limit", "2", "--json-lines")
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert next(x["commit_log_offset"] for x in lines) == rows[1]["commit_log_offset"]
    assert len(lines) == 2
    assert "body" not in lines[0]


def test_cq_get_query_index_json(clean: str, reference_manifest: Callable[[str], dict[str, Any]]) -> None:
    units = js("cq", clean, "TopicA", "0", "--from", "2", "--limit", "3", "--json")
    assert [u["queue_offset"] for u in units] == [2, 3, 4]
    assert set(units[0]) == {"queue_offset", "commit_log_offset", "size", "tags_code", "file", "position",
                             "ext_address"}
    assert units[0]["ext_address"] is None  # written without enableConsumeQueueExt
    m = reference_manifest("clean-small")["messages"][7]
    by_id = js("get", clean, "--msg-id", m["msgId"], "--json", "--body", "text")
    by_off = js("get", clean, "--offset", str(m["commitLogOffset"]), "--json")
    by_uniq = js("get", clean, "--msg-id", m["uniqKey"], "--json")
    assert by_id["commit_log_offset"] == by_off["commit_log_offset"] == by_uniq["commit_log_offset"] == \
        m["commitLogOffset"]
    assert {"msg_id", "uniq_key", "properties", "file", "body"} <= set(by_id)
    assert "body" not in by_off
    q = js("query", clean, "--topic", "TopicA", "--key", "shared-1", "--json")
    assert set(q) == {"topic", "key", "begin", "end", "matches", "collisions", "index_offsets"}
    assert len(q["matches"]) == 9
    assert q["collisions"] == []
    files = js("index", clean, "--json")
    assert len(files) == 6
    assert {"name", "index_count", "used_slots", "max_chain_length"} <= set(files[0])
    slots = js("index", clean, "--file", files[0]["name"], "--json")
    assert set(slots[0]) == {"slot", "item", "chain_length"}
    chain = js("index", clean, "--chain", "TopicA", "shared-1", "--json")
    assert {"file", "item", "hash_matches", "collision", "stop"} <= set(chain[0])


def test_verify_exit_codes(clean: str, reference_store: Callable[[str], Path]) -> None:
    r = run("verify", clean)
    assert r.exit_code == 0
    assert r.stdout.strip().endswith("OK")
    out = js("verify", clean, "--crc", "--json")
    assert out == {"findings": [], "counts": {"error": 0, "warning": 0, "info": 0}, "ok": True}
    r = run("verify", str(reference_store("crash-tail")), "--json-lines")
    assert r.exit_code == 1
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert set(lines[0]) == {"severity", "kind", "file", "offset", "message"}
    assert sum(x["kind"] == "not_in_consume_queue" for x in lines) == 40


def test_recover_and_cleanup(reference_store: Callable[[str], Path], clean: str) -> None:
    plan = js("recover", str(reference_store("crash-tail")), "--dry-run", "--json")
    assert plan["mode"] == "abnormal"
    assert plan["process_offset"] == 745049
    assert {"start_file", "stop_reason", "steps", "truncate_file", "notes"} <= set(plan)
    assert run("recover", str(reference_store("crash-tail")), "--dry-run").exit_code == 0
    r = run("recover", clean)
    assert r.exit_code == 2
    assert "MessageStore.open()" in r.stderr
    assert len(r.stderr.splitlines()) == 1
    later = f"{time.gmtime().tm_year + 10}-01-01T04:00:00+00:00"  # every file (mtime: the checkout) has expired
    c = js("cleanup", clean, "--plan", "--now", later, "--disk-ratio", "0.5", "--json")
    assert c["trigger"] == "time_up"
    assert len(c["to_delete"]) == 8
    assert {"files", "summary", "now_ms", "physic_ratio"} <= set(c)
    assert run("cleanup", clean, "--plan").exit_code == 0


def test_damaged_store_is_findings_not_traceback(tmp_path: Path, reference_store: Callable[[str], Path]) -> None:
    root = tmp_path / "s"
    shutil.copytree(reference_store("clean-small"), root)
    with open(root / "commitlog" / "00000000000000065536", "r+b") as f:
        f.seek(4)
        f.write(b"\xff" * 64)  # bad magic at the first record of the second file
    r = run("verify", str(root))
    assert r.exit_code == 1
    assert (r.exception is None or isinstance(r.exception, SystemExit))
    assert "commitlog_" in r.stdout
    r = run("messages", str(root), "--json")
    assert r.exit_code == 0
    assert "rmqlab: warning: damaged record" in r.stderr
    for args in (["inspect", str(root)], ["recover", str(root), "--dry-run"], ["index", str(root)]):
        r = run(*args)
        assert r.exit_code == 0, (args, r.output)


@pytest.mark.parametrize("args", [
    ["inspect", "/no/such/dir"],
    ["inspect", __file__],
    ["inspect", os.path.dirname(__file__)],
    ["messages", "{clean}", "--bogus"],
    ["messages", "{clean}", "--limit", "-1"],
    ["get", "{clean}", "--msg-id", "not-an-id"],
    ["get", "{clean}", "--msg-id", "C0A8380A00002A9F00000000DEADBEEF"],
    ["get", "{clean}", "--offset", "1"],
    ["get", "{clean}"],
    ["cq", "{clean}", "NoSuchTopic", "0"],
    ["cq", "{clean}", "../x", "0"],
    ["query", "{clean}", "--topic", "a b", "--key", "x"],
    ["messages", "{clean}", "--topic", "Topic/A"],
    ["query", "{clean}", "--topic", "TopicA", "--key", ""],
    ["index", "{clean}", "--file", "nope"],
    ["cleanup", "{clean}", "--plan", "--now", "yesterday"],
    ["messages", "{clean}", "--json", "--json-lines"],
    ["inspect", "{clean}", "--hash-slot-num", "64"],
    ["index", "{clean}", "--hash-slot-num", "32", "--index-num", "256"],  # a layout the files do not have
    ["query", "{clean}", "--hash-slot-num", "100", "--index-num", "256", "--topic", "TopicA", "--key", "k"],
])
def test_user_errors_exit_2_with_one_line(args: list[str], clean: str) -> None:
    r = run(*[a.replace("{clean}", clean) for a in args])
    assert r.exit_code == 2, r.output
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("rmqlab: error: "), r.stderr


def test_a_folder_holding_a_store_names_it(tmp_path: Path, clean: str) -> None:
    # a reference scenario's layout (scenario/store/...) or a broker's home (~/store)
    shutil.copytree(clean, tmp_path / "home" / "store")
    (tmp_path / "home" / "logs").mkdir()
    r = run("inspect", str(tmp_path / "home"))
    assert r.exit_code == 2
    assert r.stderr.strip().endswith(f"did you mean {tmp_path / 'home' / 'store'}?"), r.stderr
    (tmp_path / "empty").mkdir()
    r = run("inspect", str(tmp_path / "empty"))
    assert r.exit_code == 2
    assert "did you mean" not in r.stderr


@pytest.mark.parametrize("sizes", [[], ["--hash-slot-num", "64", "--index-num", "256"]])
def test_a_short_index_file_is_skipped_with_a_warning(tmp_path: Path, clean: str, sizes: list[str]) -> None:
    # one torn index file must neither hide the others (layout detection) nor crash a reader
    root = tmp_path / "s"
    shutil.copytree(clean, root)
    first, *rest = sorted((root / "index").iterdir())
    os.truncate(first, 21)
    listed = js("index", str(root), *sizes, "--json")
    assert [r["name"] for r in listed] == [p.name for p in rest]
    r = run("index", str(root), *sizes)
    assert r.exit_code == 0
    assert f"rmqlab: warning: index/{first.name} is 21 bytes, shorter than its layout" in r.stderr
    for args in (["index", str(root), *sizes, "--chain", "TopicA", "k-42-0-0"],
                 ["query", str(root), *sizes, "--topic", "TopicA", "--key", "k-42-0-0"]):  # fmt: skip
        r = run(*args)
        assert r.exit_code == 0, r.output
    r = run("verify", str(root), *sizes, "--json")
    assert r.exit_code == 1
    found = json.loads(r.stdout)["findings"]
    assert [(f["kind"], f["file"]) for f in found if f["severity"] == "error"] == [
        ("file_size_mismatch", f"index/{first.name}")]


def test_unreadable_file_exits_2(tmp_path: Path, reference_store: Callable[[str], Path]) -> None:
    root = tmp_path / "s"
    shutil.copytree(reference_store("clean-small"), root)
    victim = root / "commitlog" / "00000000000000000000"
    victim.chmod(0)
    try:
        if os.access(victim, os.R_OK):
            pytest.skip("running as a user who can read a mode-000 file (root)")
        r = run("inspect", str(root))
        assert r.exit_code == 2
        assert len(r.stderr.splitlines()) == 1
        assert r.stderr.startswith("rmqlab: error: ")
    finally:
        victim.chmod(0o644)


def test_demo_still_works(tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    r = run("demo", "--records", "2", "--json", "--out", str(report))
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert len(out["first_records"]) == 2
    assert out["demo"]["messages_written"] == out["demo"]["messages_unflushed"] + 150
    # the power loss cut exactly the unflushed tail
    assert out["demo"]["recovery"]["process_offset"] == out["demo"]["flushed_before_crash"]
    assert report.stat().st_size > 100_000


@pytest.mark.parametrize(("expr", "want"),
                         [("TagA", {"TagA"}), ("TagA || 标签-X", {"TagA", "标签-X"}), (" TagB ", {"TagB"})])
def test_cq_tags_keeps_what_the_brokers_tag_filter_serves(clean: str, expr: str, want: set[str]) -> None:
    """Checked against the records' own TAGS (the reference store has no hash collisions among its tags)."""
    from rmqlab.inspect import open_snapshot

    with open_snapshot(clean) as snap:
        msgs = snap.messages()
    for topic, qid in (("TopicA", 0), ("OrderTopic", 2)):
        mine = msgs[(msgs.topic == topic) & (msgs.queue_id == qid)]
        expected = sorted(int(o) for o, t in zip(mine.commit_log_offset, mine.tags, strict=True) if t in want)
        r = run("cq", clean, topic, str(qid), "--tags", expr, "--json")
        assert r.exit_code == 0, r.output
        rows = json.loads(r.stdout)
        assert sorted(u["commit_log_offset"] for u in rows) == expected
        assert f"rmqlab: {len(expected):,} of {len(mine):,} units read match" in r.stderr
        limited = js("cq", clean, topic, str(qid), "--tags", expr, "--limit", "2", "--from", "3", "--json")
        assert [u["commit_log_offset"] for u in limited] == [u["commit_log_offset"] for u in rows
                                                               if u["queue_offset"] >= 3][:2]
    assert len(js("cq", clean, "TopicA", "0", "--tags", "*", "--json")) == len(js("cq", clean, "TopicA", "0", "--json"))
