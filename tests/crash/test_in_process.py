"""The in-process crash models used by the dashboard and notebooks."""

from __future__ import annotations

from pathlib import Path

from rmqlab import Message, MessageStore, MessageStoreConfig
from rmqlab.testing.crash import simulate_process_kill


def test_process_kill_keeps_every_written_byte_and_leaves_abort(tmp_path: Path) -> None:
    root = tmp_path / "s"
    config = MessageStoreConfig.small(str(root))
    store = MessageStore.open(str(root), config, threaded=True)
    offsets = [store.put_message(Message("T", f"m{i}".encode() * 50, keys=[f"k{i}"])).wrote_offset
               for i in range(300)]
    end = store.get_max_phy_offset()
    simulate_process_kill(store)
    assert (root / "abort").exists()
    assert store.shutdown() is None  # a no-op on an abandoned store
    reopened = MessageStore.open(str(root), config, threaded=False)
    try:
        assert reopened.recovery_plan.mode == "abnormal"
        assert reopened.get_max_phy_offset() == end
        assert [reopened.look_message_by_offset(o).body for o in offsets[-3:]] == [
            f"m{i}".encode() * 50 for i in (297, 298, 299)
        ]
        assert reopened.query_message("T", "k299").messages[0].commit_log_offset == offsets[-1]
    finally:
        reopened.shutdown()
