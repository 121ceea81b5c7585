"""Helpers for inspection tests: a fingerprint of a store dir (names, sizes, mtimes, hashes)."""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest


def fingerprint(root: Path) -> dict[str, tuple[int, int, str] | str]:
    """Every directory and file under ``root``: dirs -> "dir"; files -> (size, mtime_ns, sha256)."""
    out: dict[str, tuple[int, int, str] | str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        out[rel + "/"] = "dir:" + ",".join(sorted(dirnames + filenames))
        for n in filenames:
            p = os.path.join(dirpath, n)
            st = os.stat(p)
            with open(p, "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()
            out[os.path.join(rel, n)] = (st.st_size, st.st_mtime_ns, digest)
    return out


@pytest.fixture
def store_copy(tmp_path: Path, reference_store: Callable[[str], Path]) -> Callable[[str], Path]:
    """``store_copy(name)`` -> a writable copy of a reference store under tmp_path."""

    def _copy(name: str) -> Path:
        dst = tmp_path / name
        shutil.copytree(reference_store(name), dst)
        return dst

    return _copy


def full_inspection(path: Path) -> None:
    """Every frame, verify (with and without CRC), both explanations, and every CLI command."""
    import json

    from click.testing import CliRunner

    from rmqlab.cli import main
    from rmqlab.inspect import open_snapshot

    with open_snapshot(path) as snap:
        snap.files()
        snap.messages(damage=[])
        for topic, qid in list(snap.consume_queues):
            snap.consume_queue(topic, qid)
        idx = snap.index_files() if not snap.index_error else None
        if idx is not None and len(idx):
            snap.index_slots(idx.name.iloc[0])
        if not snap.index_error:
            snap.index_chain("TopicA", "shared-1")
        snap.checkpoint()
        snap.topics()
        for timer_view in (snap.timer_checkpoint, snap.timer_wheel, snap.timer_log, snap.timers):
            timer_view()
        list(snap.verify())
        list(snap.verify(check_crc=True))
        snap.explain_recovery()
        snap.explain_cleanup(now=0, disk_ratio=0.9)
    runner = CliRunner()
    s = str(path)
    for args in (["inspect", s], ["inspect", s, "--json"], ["messages", s, "--json-lines", "--body", "hex"],
                 ["cq", s, "TopicA", "0", "--json"], ["get", s, "--offset", "0", "--json"],
                 ["query", s, "--topic", "TopicA", "--key", "shared-1", "--json"], ["index", s, "--json"],
                 ["index", s, "--chain", "TopicA", "shared-1"], ["verify", s, "--crc", "--json"],
                 ["recover", s, "--dry-run", "--json"], ["cleanup", s, "--plan", "--disk-ratio", "0.5", "--json"],
                 ["timers", s, "--json"], ["timers", s, "--wheel", "--json"]):
        r = runner.invoke(main, args)
        assert r.exit_code in (0, 1, 2), (args, r.output)
        assert r.exception is None or isinstance(r.exception, SystemExit), (args, r.exception)
        if "--json" in args and r.exit_code in (0, 1):
            json.loads(r.stdout)
