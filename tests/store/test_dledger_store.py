"""A broker with ``enableDLegerCommitLog`` keeps its messages in ``dledger-<id>/data/`` as DLedger
entries (RocketMQ's DLedgerCommitLog sets DLedger's store base dir to the store root), not in
``commitlog/``. rmqlab reads neither, so opening such a store found an empty CommitLog and
destroyed every consume queue (a real 4.9.8 store laid out so: 16,640 bytes of units -> 0).
``MessageStore.open`` now refuses it, changing no byte; ``verify`` says what it does not read
instead of calling every unit damage.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from rmqlab import MessageStore, MessageStoreConfig
from rmqlab.cli import main
from rmqlab.errors import NotAStore
from tests.tree import tree_digest


def _dledger_store(tmp_path: Path, reference_store: Callable[[str], Path]) -> Path:
    """clean-small laid out as a DLedger broker's store: its CommitLog files under dledger-n0/data."""
    root = tmp_path / "store"
    shutil.copytree(reference_store("clean-small"), root)
    data = root / "dledger-n0" / "data"
    data.mkdir(parents=True)
    for f in sorted((root / "commitlog").iterdir()):
        shutil.move(f, data / f.name)
    return root


def test_open_refuses_a_dledger_store_and_changes_nothing(tmp_path: Path,
                                                          reference_store: Callable[[str], Path]) -> None:
    root = _dledger_store(tmp_path, reference_store)
    before = tree_digest(root)
    with pytest.raises(NotAStore) as e:
        MessageStore.open(str(root), MessageStoreConfig.small(str(root)), threaded=False)
    assert f"{root / 'dledger-n0' / 'data'}: a DLedger CommitLog (enableDLegerCommitLog" in str(e.value)
    assert "truncate them" in str(e.value)
    assert tree_digest(root) == before


def test_an_empty_dledger_dir_is_no_dledger_log(tmp_path: Path, reference_store: Callable[[str], Path]) -> None:
    root = tmp_path / "store"
    shutil.copytree(reference_store("clean-small"), root)
    (root / "dledger-n0" / "data").mkdir(parents=True)  # created, never written
    with MessageStore.open(str(root), MessageStoreConfig.small(str(root)), threaded=False) as store:
        assert store.get_max_offset_in_queue("TopicA", 0) > 0


def test_verify_names_the_dledger_log_and_finds_no_damage(tmp_path: Path,
                                                          reference_store: Callable[[str], Path]) -> None:
    root = _dledger_store(tmp_path, reference_store)
    r = CliRunner().invoke(main, ["verify", str(root), "--json"])
    assert r.exit_code == 1, r.output  # a warning: not ok, as for a RocksDB consume queue
    found = json.loads(r.stdout)["findings"]
    assert [(f["severity"], f["kind"], f["file"]) for f in found] == [
        ("warning", "dledger_commit_log_not_read", "dledger-n0/data")]
    r = CliRunner().invoke(main, ["inspect", str(root), "--json"])  # every command says it once
    assert r.exit_code == 0, r.output
    assert r.stderr.splitlines() == [
        f"rmqlab: warning: {root / 'dledger-n0' / 'data'}: a DLedger CommitLog (enableDLegerCommitLog), not read: "
        "the broker's messages are there, so commitlog/ shows none of them"]
