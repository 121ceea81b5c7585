"""``query_message``'s cap: ``default_query_max_num`` unless the caller names one (capped again
by ``max_msgs_num_batch``, 64, in the index query)."""

from __future__ import annotations

from pathlib import Path

from rmqlab.clock import ManualClock
from rmqlab.config import MessageStoreConfig
from rmqlab.store.message import Message
from rmqlab.store.message_store import MessageStore


def test_query_cap_comes_from_the_config(tmp_path: Path) -> None:
    config = MessageStoreConfig.small(str(tmp_path / "s"), default_query_max_num=3, max_index_num=1024)
    with MessageStore.open(str(tmp_path / "s"), config, clock=ManualClock(1_700_000_000_000),
                           threaded=False) as store:
        for i in range(80):
            assert store.put_message(Message("Q", f"m{i}".encode(), keys=["same"])).ok
        store.step()
        assert len(store.query_message("Q", "same").phy_offsets) == 3
        assert len(store.query_message("Q", "same").messages) == 3
        assert len(store.query_message("Q", "same", max_num=10).phy_offsets) == 10
        assert len(store.query_message("Q", "same", max_num=100).phy_offsets) == 64  # max_msgs_num_batch
