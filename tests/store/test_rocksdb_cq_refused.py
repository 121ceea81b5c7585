"""5.x stores keep their consume queues in RocksDB when ``storeType=defaultRocksDB`` (or beside
the file queues with ``rocksdbCQDoubleWriteEnable``), and compacted topics in ``compaction/``.
rmqlab reads neither: the engine refuses a RocksDB-CQ store untouched, instead of rebuilding file
queues the broker would not read, and verify says what it does not read instead of reporting
every record as missing from its consume queue."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pytest

from rmqlab.codec.names import is_rocksdb_listing
from rmqlab.config import MessageStoreConfig
from rmqlab.errors import NotAStore
from rmqlab.inspect import open_snapshot
from rmqlab.inspect.checks import verify
from rmqlab.store.message import Message
from rmqlab.store.message_store import MessageStore
from tests.spark.conftest import plant_compaction_files, plant_rocksdb_consume_queue
from tests.tree import tree_digest

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _store(root: Path) -> None:
    with MessageStore.open(str(root), MessageStoreConfig.small(str(root), rocketmq_version="5.3.3"),
                           threaded=False) as store:
        for i in range(40):
            store.put_message(Message("Plain", b"x" * 100, tags="a", keys=[f"k{i}"], queue_id=i % 2))
        store.step()


def test_a_rocksdb_listing_needs_current_and_a_manifest() -> None:
    assert is_rocksdb_listing(["CURRENT", "MANIFEST-000005", "000009.sst", "LOG"])
    assert not is_rocksdb_listing(["CURRENT"])  # a stray file named CURRENT is no database
    assert not is_rocksdb_listing(["MANIFEST-000005", "000009.sst"])
    assert not is_rocksdb_listing([])


@pytest.mark.parametrize("keep_file_queues", [False, True], ids=["rocksdb-only", "double-write"])
def test_a_rocksdb_consume_queue_refuses_open_and_leaves_every_byte(tmp_path: Path, keep_file_queues: bool) -> None:
    root = tmp_path / "s"
    _store(root)
    plant_rocksdb_consume_queue(root, keep_file_queues=keep_file_queues)
    before = tree_digest(root)
    with pytest.raises(NotAStore, match=r"consumequeue holds a RocksDB database.*rmqlab inspect"):
        MessageStore.open(str(root), MessageStoreConfig.small(str(root), rocketmq_version="5.3.3"), threaded=False)
    assert tree_digest(root) == before


def test_verify_on_a_rocksdb_only_store_says_so_instead_of_flagging_every_record(tmp_path: Path) -> None:
    root = tmp_path / "s"
    _store(root)
    with open_snapshot(str(root)) as snap:
        assert not snap.rocksdb_consume_queue
        assert list(verify(snap)) == []
    plant_rocksdb_consume_queue(root, keep_file_queues=False)
    before = tree_digest(root)
    with open_snapshot(str(root)) as snap:
        assert snap.rocksdb_consume_queue
        assert not snap.consume_queues
        found = list(verify(snap))
        assert len(snap.messages()) == 40  # the commit log is still read
    assert tree_digest(root) == before
    assert [(f.severity, f.kind, f.file, f.offset) for f in found] == [
        ("warning", "rocksdb_consume_queue_not_read", "consumequeue/CURRENT", 0)]
    assert "no file consume queues" in found[0].message


def test_verify_beside_file_queues_still_checks_them(tmp_path: Path) -> None:
    root = tmp_path / "s"
    _store(root)
    plant_rocksdb_consume_queue(root, keep_file_queues=True)
    shutil.rmtree(root / "consumequeue" / "Plain" / "1")  # queue 1's records lose their units
    with open_snapshot(str(root)) as snap:
        kinds = [f.kind for f in verify(snap)]
    assert kinds[0] == "rocksdb_consume_queue_not_read"
    assert kinds.count("not_in_consume_queue") == 20


def test_compaction_files_are_a_verify_note_and_a_logged_warning_on_open(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "s"
    _store(root)
    plant_compaction_files(root)
    with open_snapshot(str(root)) as snap:
        found = list(verify(snap))
    assert [(f.severity, f.kind, f.file) for f in found] == [
        ("info", "compaction_not_read", os.path.join("compaction", "compactionLog", "Compacted", "0", f"{0:020d}"))]
    config = MessageStoreConfig.small(str(root), rocketmq_version="5.3.3")
    with (caplog.at_level(logging.WARNING, logger="rmqlab.store.message_store"),
          MessageStore.open(str(root), config, threaded=False) as store):
        assert store.get_max_offset_in_queue("Plain", 0) == 20
    assert any("compaction" in r.getMessage() for r in caplog.records)
    assert (root / "compaction" / "position-checkpoint").read_text() == "0"


def test_cli_verify_names_the_rocksdb_queue(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from rmqlab.cli import main

    root = tmp_path / "s"
    shutil.copytree(FIXTURES / "clean-small" / "store", root)
    plant_rocksdb_consume_queue(root, keep_file_queues=False)
    r = CliRunner().invoke(main, ["verify", str(root), "--json"])
    assert r.exit_code == 1, r.output  # a warning
    assert "rocksdb_consume_queue_not_read" in r.output
    assert "not_in_consume_queue" not in r.output
