"""Regressions found by the damage harness (``tests/cli/damage_harness.py``): one test per bug, each
on a copy of a reference store with the one damage that showed it."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from rmqlab.cli import main
from rmqlab.errors import ConfigError
from rmqlab.inspect import open_snapshot
from tests.cli.damage_harness import tree_state


def _copy(reference_store: Callable[[str], Path], tmp_path: Path, name: str = "clean-small") -> Path:
    root = tmp_path / "store"
    shutil.copytree(reference_store(name), root)
    return root


def _cli(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(main, list(args))
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    return r.exit_code, r.stdout, r.stderr


def test_a_queue_file_named_near_long_max_is_listed(reference_store: Callable[[str], Path], tmp_path: Path) -> None:
    """``inspect`` and ``files()`` once raised TypeError: the Int64 cast went through float64."""
    root = _copy(reference_store, tmp_path, "crash-tail")
    qdir = root / "consumequeue" / "TopicA" / "2"
    (qdir / f"{0:020d}").rename(qdir / f"{2**63 - 7:020d}")
    with open_snapshot(root) as snap:
        files = snap.files()
    row = files[files.name == f"{2**63 - 7:020d}"]
    assert row.file_from_offset.tolist() == [2**63 - 7]
    code, out, err = _cli("inspect", str(root), "--json")
    assert code == 0, err
    assert json.loads(out)["files_per_kind"]


def test_recovery_plan_past_a_short_misaligned_queue_file(reference_store: Callable[[str], Path],
                                                          tmp_path: Path) -> None:
    """A stray 100-byte file named ``123`` in a queue dir: 5.3.3's min-offset correction read the
    last unit past the file's end (struct.error) once recovery had moved its position to 1140."""
    root = _copy(reference_store, tmp_path)
    (root / "consumequeue" / "TopicA" / "0" / "123").write_bytes(bytes(range(100)))
    before = tree_state(root)
    code, out, err = _cli("recover", str(root), "--dry-run", "--rocketmq-version", "5.3.3", "--json")
    assert code == 0, err
    assert json.loads(out)["stop_reason"]
    assert tree_state(root) == before


def test_recover_says_when_the_broker_would_not_load(reference_store: Callable[[str], Path],
                                                     tmp_path: Path) -> None:
    """A consume queue file of the wrong length that is not the last: RocketMQ's load fails (the
    broker does not start), and the queues after it were silently left out of the plan."""
    root = _copy(reference_store, tmp_path)
    path = root / "consumequeue" / "TopicA" / "3" / f"{0:020d}"
    os.truncate(path, 100)
    code, out, err = _cli("recover", str(root), "--dry-run", "--json")
    assert code == 0, err
    notes = json.loads(out)["notes"]
    assert any(str(path) in n and "does not start" in n for n in notes), notes
    code, out, _ = _cli("recover", str(root), "--dry-run")
    assert "load fails" in " ".join(out.split())


@pytest.mark.parametrize("kind", ["dangling", "loop"])
def test_verify_reports_a_broken_symlink_in_the_log_dir(reference_store: Callable[[str], Path], tmp_path: Path,
                                                        kind: str) -> None:
    """verify once died with FileNotFoundError / ELOOP (exit 2, no findings) on an offset-named
    symlink that leads nowhere; now it is an ``unexpected_file`` error naming it. recover notes
    the loop (RocketMQ's load fails on it)."""
    root = _copy(reference_store, tmp_path)
    link = root / "commitlog" / f"{10**15:020d}"
    link.symlink_to(link if kind == "loop" else tmp_path / "nothing")
    with open_snapshot(root) as snap:
        found = [f for f in snap.verify() if f.kind == "unexpected_file"]
    assert [(f.file, f.severity) for f in found] == [(f"commitlog/{link.name}", "error")]
    code, out, err = _cli("verify", str(root), "--json")
    assert code == 1, err
    assert any(f["file"] == f"commitlog/{link.name}" for f in json.loads(out)["findings"])
    # recover's load check (RocketMQ's MappedFileQueue.load) once died on the loop with ELOOP
    code, out, err = _cli("recover", str(root), "--dry-run", "--json")
    assert code == 0, err
    if kind == "loop":
        assert any(str(link) in n and "load fails" in n for n in json.loads(out)["notes"])


@pytest.mark.parametrize("damage", ["file_is_dir", "config_is_file"])
def test_delays_when_delay_offset_json_cannot_be_read(reference_store: Callable[[str], Path], tmp_path: Path,
                                                      damage: str) -> None:
    """A directory where config/delayOffset.json should be: the frame's error names the file
    (RocketMQ's load fails on it and tries the .bak), no IsADirectoryError; config/ a file: no
    delayOffset.json (NotADirectoryError before)."""
    root = _copy(reference_store, tmp_path)
    path = root / "config" / "delayOffset.json"
    if damage == "file_is_dir":
        path.unlink()
        path.mkdir()
    else:
        shutil.rmtree(root / "config")
        (root / "config").write_bytes(b"x")
    with open_snapshot(root) as snap:
        df = snap.delays()
    code, out, err = _cli("delays", str(root), "--json")
    assert code == 0, err
    if damage == "file_is_dir":
        assert str(path) in df.attrs["error"]
        assert df.attrs["source"] == "bak"
        assert str(path) in json.loads(out)["error"]
    else:  # no config dir: no delayOffset.json, as for RocketMQ (File.exists() is false)
        assert (df.attrs["source"], df.attrs["error"]) == (None, "")


def test_timer_precision_out_of_a_java_int(reference_store: Callable[[str], Path], tmp_path: Path) -> None:
    """--precision-ms 2**62 once ended in OverflowError (a tick times it is past a long): it is a
    Java int (timerPrecisionMs), so anything past 2**31-1 is refused as a bad argument."""
    from rmqlab.testing.timer_store import write_timer_store

    root = tmp_path / "timers"
    write_timer_store(root)
    code, out, err = _cli("timers", str(root), "--precision-ms", str(2**62), "--json")
    assert code == 2, err
    assert out == ""
    assert err.startswith("rmqlab: error: "), err
    assert "--precision-ms" in err
    with open_snapshot(root) as snap, pytest.raises(ConfigError, match="timerPrecisionMs"):
        snap.timers(2**62)
    with open_snapshot(root) as snap, pytest.raises(ConfigError, match="timerPrecisionMs"):
        snap.timer_wheel(0)
    code, out, err = _cli("timers", str(root), "--precision-ms", str(2**31 - 1), "--json")
    assert code == 0, err
    json.loads(out)


def test_cleanup_now_past_the_calendar(reference_store: Callable[[str], Path]) -> None:
    """--now 9999-12-31T23:59:59-14:00 is year 10000 in UTC: once a ValueError traceback; epoch
    ms past a long once OSError (EOVERFLOW) from the API. Now a bad argument, said so."""
    s = str(reference_store("clean-small"))
    code, out, err = _cli("cleanup", s, "--plan", "--now", "9999-12-31T23:59:59-14:00", "--disk-ratio", "0.5")
    assert code == 2, err
    assert err.startswith("rmqlab: error: now must be a date in years 1..9999"), err
    code, out, err = _cli("cleanup", s, "--plan", "--now", "9999-12-31T23:59:59+14:00", "--disk-ratio", "0.5", "--json")
    assert code == 0, err
    assert json.loads(out)["now_local"].startswith("9999-12-31T23:59:59")
    with open_snapshot(s) as snap:
        for now in (2**70, -(2**70)):
            with pytest.raises(ConfigError, match=r"years 1\.\.9999"):
                snap.explain_cleanup(now=now, disk_ratio=0.5)


def test_delay_levels_rocketmq_cannot_parse(reference_store: Callable[[str], Path]) -> None:
    """The API raised a bare KeyError for '1x' and took '9999999999999999999d' (Long.parseLong
    refuses it); both are ConfigErrors now, and the CLI's bad-parameter line says why."""
    s = str(reference_store("clean-small"))
    with open_snapshot(s) as snap:
        for levels, why in (("1s 1x", "unit 'x' is not s, m, h or d"), ("9999999999999999999d", "not a long"),
                            ("", "invalid literal")):
            with pytest.raises(ConfigError, match=why):
                snap.delays(levels)
    code, _, err = _cli("delays", s, "--delay-levels", "1s 1x")
    assert code == 2, err
    assert "--delay-levels" in err
    assert "unit 'x'" in err


@pytest.mark.parametrize("topic", ["../x", ""])
def test_cq_refuses_a_topic_no_broker_accepts(reference_store: Callable[[str], Path], topic: str) -> None:
    """``cq STORE ../x 0`` answered "no consume queue ../x/0" (and "" gave "/0"), unlike messages,
    query and index, which call such a name what it is."""
    code, out, err = _cli("cq", str(reference_store("clean-small")), topic, "0")
    assert code == 2, err
    assert out == ""
    assert err.startswith(f"rmqlab: error: invalid topic {topic!r}"), err


def test_cq_shows_a_damaged_dir_with_an_illegal_name(reference_store: Callable[[str], Path], tmp_path: Path) -> None:
    """The check does not hide what is on disk: a queue dir named "bad topic" is shown."""
    root = _copy(reference_store, tmp_path)
    shutil.copytree(root / "consumequeue" / "TopicA", root / "consumequeue" / "bad topic")
    code, out, err = _cli("cq", str(root), "bad topic", "0", "--json")
    assert code == 0, err
    assert len(json.loads(out)) > 0


def test_engine_log_records_are_rmqlab_lines(reference_store: Callable[[str], Path], tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """With no logging set up (a shell, not pytest), an engine record such as RocketMQ's "[BUG]
    address ... of consume queue extend not found!" came out bare on stderr, between the
    rmqlab lines; now it is an ``rmqlab: warning:`` line, and no handler is left installed."""
    import logging

    from rmqlab.inspect.snapshot import StoreSnapshot

    real = StoreSnapshot.explain_recovery

    def logging_explain(self: StoreSnapshot, **kwargs: object) -> object:
        logging.getLogger("rmqlab.store.consume_queue_ext").error("[BUG] address %d not found!", 42)
        return real(self, **kwargs)

    monkeypatch.setattr(StoreSnapshot, "explain_recovery", logging_explain)
    monkeypatch.setattr(logging.getLogger(), "handlers", [])  # as in a shell: nothing configured
    code, out, err = _cli("recover", str(reference_store("clean-small")), "--dry-run", "--json")
    assert code == 0, err
    json.loads(out)
    assert err.splitlines() == ["rmqlab: warning: [BUG] address 42 not found!"]
    assert logging.getLogger("rmqlab").handlers == []


@pytest.mark.parametrize("which", ["commitlog/00000000000000524288", "consumequeue/TopicB/1/00000000000000000000"])
def test_recover_notes_a_last_file_cut_short(reference_store: Callable[[str], Path], tmp_path: Path,
                                             which: str) -> None:
    """A copy interrupted mid-file: RocketMQ's load refuses the short last file (the broker does
    not start), while rmqlab reads it as a trimmed sample; recover said nothing of it."""
    root = _copy(reference_store, tmp_path)
    os.truncate(root / which, 600)
    code, out, err = _cli("recover", str(root), "--dry-run", "--json")
    assert code == 0, err
    notes = [n for n in json.loads(out)["notes"] if "load fails" in n]
    assert len(notes) == 1, notes
    assert str(root / which) in notes[0]
    assert "length 600" in notes[0]
    code, out, err = _cli("recover", str(reference_store("clean-small")), "--dry-run", "--json")
    assert not [n for n in json.loads(out)["notes"] if "load fails" in n]


@pytest.mark.parametrize("kind", ["fifo", "sparse"])
def test_delays_reads_only_a_regular_delay_offset_file(reference_store: Callable[[str], Path], tmp_path: Path,
                                                       kind: str) -> None:
    """delayOffset.json as a FIFO hung ``delays`` for ever (the open blocks); as a symlink to
    /dev/zero or a 1 TiB sparse file it read until the OOM killer came. Now: not read, the
    error names it, and the .bak is used (as RocketMQ's ConfigManager falls back to it).
    (/dev/zero takes the FIFO's path, not tested here: before the fix it ate all memory.)"""
    from tests.cli.damage_harness import CALL_TIMEOUT_S, watchdog

    root = _copy(reference_store, tmp_path)
    path = root / "config" / "delayOffset.json"
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    else:
        with open(path, "wb") as f:
            f.truncate(1 << 40)
    with watchdog(CALL_TIMEOUT_S):
        code, out, err = _cli("delays", str(root), "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["source"] == "bak"
    assert str(path) in doc["error"]


@pytest.mark.parametrize("where", [".", "commitlog", "consumequeue/TopicA/0", "config", "compaction"])
def test_a_stray_symlink_to_nothing_is_listed_not_fatal(reference_store: Callable[[str], Path], tmp_path: Path,
                                                        where: str) -> None:
    """A junk-named link to nothing: ``inspect`` (files()) refused the whole store with
    "No such file or directory"; under compaction/ every command did (open_snapshot listed it)."""
    root = _copy(reference_store, tmp_path)
    (root / where).mkdir(exist_ok=True)
    link = root / where / "stray-link"
    link.symlink_to(tmp_path / "gone")
    with open_snapshot(root) as snap:
        files = snap.files()
    assert os.path.normpath(os.path.join(where, "stray-link")) in set(files.path)
    for args in (["inspect", str(root), "--json"], ["messages", str(root), "--limit", "1", "--json"]):
        code, out, err = _cli(*args)
        assert code == 0, err
        json.loads(out)


def test_a_record_whose_physical_offset_field_lies(reference_store: Callable[[str], Path], tmp_path: Path) -> None:
    """A flipped byte in a record's PHYSICALOFFSET: ``get --offset`` said "no record starts at"
    an offset where one does, and ``messages`` listed it out of CommitLog order, at an offset
    past the log, without a word. Both now show the field (what RocketMQ decodes) and warn,
    naming the file and the real position."""
    import struct

    root = _copy(reference_store, tmp_path)
    with open_snapshot(root) as snap:
        rec = next(r for r in snap.iter_messages() if r.commit_log_offset > 0)
    at = rec.commit_log_offset
    with open(root / "commitlog" / f"{0:020d}", "r+b") as f:
        f.seek(at + 28)  # TOTALSIZE, MAGIC, BODYCRC, QUEUEID, FLAG, QUEUEOFFSET, then PHYSICALOFFSET
        f.write(struct.pack(">q", 10**12 + at))
    code, out, err = _cli("get", str(root), "--offset", str(at), "--json")
    assert code == 0, err
    assert json.loads(out)["commit_log_offset"] == 10**12 + at
    assert f"the record at CommitLog offset {at} (commitlog/{0:020d}) says it is at {10**12 + at}" in err
    code, out, err = _cli("messages", str(root), "--limit", "5", "--json")
    assert code == 0, err
    assert 10**12 + at in [m["commit_log_offset"] for m in json.loads(out)]
    assert f"says it is at {10**12 + at}" in err


def test_verify_reports_what_is_no_index_file_in_index_dir(reference_store: Callable[[str], Path],
                                                           tmp_path: Path) -> None:
    """A directory, a FIFO or a stray file in index/: verify said OK, though RocketMQ's
    IndexService opens every entry there as an index file (a directory stops the broker)."""
    root = _copy(reference_store, tmp_path)
    (root / "index" / "20261122102107719x").mkdir()
    os.mkfifo(root / "index" / "fifo")
    (root / "index" / "junk").write_bytes(b"x")
    code, out, err = _cli("verify", str(root), "--json")
    assert code == 1, err
    found = {(f["file"], f["severity"]) for f in json.loads(out)["findings"] if f["kind"] == "unexpected_file"}
    assert found == {("index/20261122102107719x", "error"), ("index/fifo", "error"), ("index/junk", "warning")}


def test_index_errors_name_the_files(reference_store: Callable[[str], Path], tmp_path: Path) -> None:
    """``index --file NAME`` of a file cut short said "no index file NAME" (it is there, skipped);
    a layout no file fits listed sizes but not which files have them."""
    root = _copy(reference_store, tmp_path)
    first = sorted((root / "index").iterdir())[0]
    os.truncate(first, 3870)
    code, _, err = _cli("index", str(root), "--file", first.name)
    assert code == 2, err
    assert err.splitlines()[-1] == (f"rmqlab: error: {first} is 3870 bytes, shorter than its layout (5416 bytes): "
                                    "not read")
    for f in (root / "index").iterdir():
        os.truncate(f, 3870)
    code, _, err = _cli("query", str(root), "--topic", "TopicA", "--key", "k")
    assert code == 2, err
    assert f"{first.name}: 3,870 bytes" in err


def test_names_that_are_not_utf8(reference_store: Callable[[str], Path], tmp_path: Path) -> None:
    """A topic dir and a stray file named with bytes that are not UTF-8: ``inspect`` died with
    UnicodeEncodeError (pandas' string columns refuse the surrogates Python lists them with),
    and ``cq`` of that topic with a traceback. Names are shown with \\\\xff escapes."""
    root = _copy(reference_store, tmp_path)
    queues = os.fsencode(root / "consumequeue")
    shutil.copytree(queues + b"/TopicA", queues + b"/bad\xfftopic")
    with open(os.fsencode(root / "commitlog") + b"/junk\xfe", "wb") as f:
        f.write(b"x")
    code, out, err = _cli("inspect", str(root), "--json")
    assert code == 0, err
    assert "bad\\xfftopic" in {q["topic"] for q in json.loads(out)["queues"]}
    with open_snapshot(root) as snap:
        assert "commitlog/junk\\xfe" in set(snap.files().path)
    code, out, err = _cli("cq", str(root), os.fsdecode(b"bad\xfftopic"), "0", "--limit", "1", "--json")
    assert code == 0, err
    assert json.loads(out)[0]["file"] == "consumequeue/bad\\xfftopic/0/00000000000000000000"
    # verify names the stray file: its JSON died in json.dumps' output, its table in rich's
    code, out, err = _cli("verify", str(root), "--json")
    assert code == 1, err
    assert "commitlog/junk\\xfe" in {f["file"] for f in json.loads(out)["findings"]}
    code, out, err = _cli("verify", str(root))
    assert code == 1, err
    assert "commitlog/junk\\udcfe" in out


def test_negative_windows_in_the_api_are_refused(reference_store: Callable[[str], Path]) -> None:
    """A negative ``start`` or ``limit`` is a ConfigError naming it, not an empty frame that
    looks like an empty store (the CLI refuses them already)."""
    with open_snapshot(reference_store("clean-small")) as snap:
        topic = snap.topics()["topic"].iloc[0]
        calls = [lambda: snap.messages(limit=-3), lambda: snap.messages(start=-1),
                 lambda: snap.consume_queue(topic, 0, limit=-1), lambda: snap.consume_queue(topic, 0, start=-20),
                 lambda: snap.batch_consume_queue(topic, 0, limit=-1), lambda: snap.timers(limit=-1)]
        for call in calls:
            with pytest.raises(ConfigError, match=r"(start|limit) must be >= 0"):
                call()
        assert len(snap.messages(limit=0)) == 0
        assert len(snap.messages(limit=3)) == 3


@pytest.mark.parametrize("length", [3, 30])
def test_recover_reads_an_ext_file_cut_short(tmp_path: Path, length: int) -> None:
    """A ConsumeQueueExt file cut inside a unit: recover stopped with exit 2 ("corrupt record",
    and for 3 bytes a config error about an ext file size no one set). Now the plan reads the
    run up to the cut, as it reads a cut consume queue file, and notes that RocketMQ's load fails."""
    from rmqlab import Message, MessageStore, MessageStoreConfig

    root = tmp_path / "store"
    with MessageStore.open(str(root), MessageStoreConfig.small(str(root), enable_consume_queue_ext=True),
                           threaded=False) as store:
        for i in range(5):
            assert store.put_message(Message("T", b"x", tags=f"t{i}")).ok
        store.step()
    (ext,) = (root / "consumequeue_ext" / "T" / "0").iterdir()
    os.truncate(ext, length)
    before = tree_state(root)
    code, out, err = _cli("recover", str(root), "--dry-run", "--json")
    assert code == 0, err
    plan = json.loads(out)
    notes = [n for n in plan["notes"] if "load fails" in n]
    assert len(notes) == 1, plan["notes"]
    # 3 bytes cannot be an ext file's size (it is read against the default then); 30 could be, as
    # the only file's length: then the unit running past its end tells the file was cut
    said = f"length {length} does not match" if length < 24 else f"the unit at 20 runs past the file's end at {length}"
    assert f"consume queue ext: {ext}: {said}" in notes[0]
    cut = [s for s in plan["steps"] if s["phase"] == "consume_queue_ext" and "cut short" in s["reason"]]
    assert len(cut) == 1, plan["steps"]
    assert cut[0]["offset"] == (0 if length < 20 else 20)  # the last whole unit's end
    assert tree_state(root) == before
