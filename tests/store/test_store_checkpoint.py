"""StoreCheckpoint over a real 4096-byte file (spec §5.1, golden #17)."""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path

import pytest

from rmqlab.errors import ReadOnlyStore
from rmqlab.events import CheckpointWritten, EventBus, EventRecorder
from rmqlab.store.store_checkpoint import StoreCheckpoint

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_new_file_is_created_with_4096_zero_bytes(tmp_path: Path) -> None:
    path = str(tmp_path / "checkpoint")
    cp = StoreCheckpoint(path)
    assert os.path.getsize(path) == 4096
    assert cp.snapshot().pack() == bytes(4096)
    assert (cp.min_timestamp, cp.min_timestamp_index) == (0, 0)
    cp.shutdown()
    assert Path(path).read_bytes() == bytes(4096)


def test_fields_reach_the_file_only_on_flush(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint"
    cp = StoreCheckpoint(str(path))
    cp.physic_msg_timestamp = 1700000010000
    cp.logics_msg_timestamp = 1700000005000
    cp.index_msg_timestamp = 1699999999000
    cp.master_flushed_offset = 12345
    cp.confirm_phy_offset = 678
    assert path.read_bytes()[:40] == bytes(40)
    cp.flush()
    data = path.read_bytes()
    assert len(data) == 4096
    expected = (1700000010000, 1700000005000, 1699999999000, 12345, 678)
    assert struct.unpack(">5q", data[:40]) == expected
    assert data[40:] == bytes(4056)
    cp.shutdown()
    again = StoreCheckpoint(str(path), read_only=True)
    assert again.snapshot() == cp.snapshot()
    again.shutdown()


def test_golden_17_min_timestamps(tmp_path: Path) -> None:
    cp = StoreCheckpoint(str(tmp_path / "checkpoint"))
    cp.physic_msg_timestamp = 1700000010000
    cp.logics_msg_timestamp = 1700000005000
    assert cp.min_timestamp == 1700000002000
    cp.index_msg_timestamp = 1699999999000
    assert cp.min_timestamp_index == 1699999999000
    cp.physic_msg_timestamp = 1000  # min - 3000 < 0 -> 0
    assert cp.min_timestamp == 0
    cp.shutdown()


def test_short_file_is_extended_to_4096(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint"
    path.write_bytes(struct.pack(">q", 42))
    cp = StoreCheckpoint(str(path))
    assert cp.physic_msg_timestamp == 42
    assert cp.logics_msg_timestamp == 0
    assert os.path.getsize(path) == 4096
    cp.shutdown()


def test_reads_a_real_4_9_checkpoint(tmp_path: Path) -> None:
    src = FIXTURES / "clean-small" / "store" / "checkpoint"
    path = tmp_path / "checkpoint"
    shutil.copy(src, path)
    cp = StoreCheckpoint(str(path), read_only=True)
    assert (cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp) == (
        1795342866224, 1795342868160, 1795342867456)
    assert (cp.master_flushed_offset, cp.confirm_phy_offset) == (0, 0)
    # manifest reopen.beforeReopen.checkpoint, computed by the real StoreCheckpoint
    assert cp.min_timestamp == 1795342863224
    assert cp.min_timestamp_index == 1795342863224
    with pytest.raises(ReadOnlyStore):
        cp.flush()
    cp.shutdown()
    assert path.read_bytes() == src.read_bytes()


def test_flush_publishes_checkpoint_written(tmp_path: Path) -> None:
    bus = EventBus()
    rec = EventRecorder(bus)
    cp = StoreCheckpoint(str(tmp_path / "checkpoint"), bus=bus)
    cp.index_msg_timestamp = 7
    cp.flush()
    assert rec.of(CheckpointWritten) == [CheckpointWritten(0, 0, 7)]
    cp.shutdown()


# --- confirmPhyOffset after recovery (spec §5.1) ---------------------------------------------------


def _recovered_confirm(tmp_path: Path, version: str, *, crash: bool) -> tuple[int, list[int]]:
    """Put three messages, close (cleanly or leaving ``abort``), reopen (recovery), shut down;
    the checkpoint's bytes 32..39 and the three records' start offsets."""
    from rmqlab.clock import ManualClock
    from rmqlab.config import MessageStoreConfig
    from rmqlab.store.message import Message
    from rmqlab.store.message_store import MessageStore

    root = tmp_path / "store"
    config = MessageStoreConfig.small(str(root), rocketmq_version=version)
    store = MessageStore.open(str(root), config, clock=ManualClock(1_700_000_000_000), threaded=False)
    offsets = [store.put_message(Message("T", b"x" * (10 + i), tags="a")).wrote_offset for i in range(3)]
    store.shutdown()
    if crash:
        (root / "abort").write_bytes(b"")  # the next open recovers abnormally
    MessageStore.open(str(root), config, clock=ManualClock(1_700_000_100_000), threaded=False).shutdown()
    return struct.unpack_from(">q", (root / "checkpoint").read_bytes(), 32)[0], offsets


@pytest.mark.parametrize("crash", [False, True], ids=["normal", "abnormal"])
def test_5x_recovery_writes_confirm_offset_to_checkpoint(tmp_path: Path, crash: bool) -> None:
    # 5.x CommitLog.recoverNormally/recoverAbnormally end with setConfirmOffset(lastValidMsgPhyOffset)
    # (outside controller mode), which sets StoreCheckpoint.confirmPhyOffset: the start offset of
    # the last valid record is at bytes 32..39 once the checkpoint is flushed.
    confirm, offsets = _recovered_confirm(tmp_path, "5.3.3", crash=crash)
    assert confirm == offsets[-1] > 0


def test_49_recovery_leaves_confirm_bytes_alone(tmp_path: Path) -> None:
    # 4.9.8 has no confirmPhyOffset: bytes 32..39 stay zero
    confirm, _ = _recovered_confirm(tmp_path, "4.9.8", crash=False)
    assert confirm == 0
