"""A small stepped store with a manual clock, for the widget tests."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime

import pytest

pytest.importorskip("plotly")
pytest.importorskip("ipywidgets")
pytest.importorskip("anywidget")

from rmqlab.clock import ManualClock
from rmqlab.config import MessageStoreConfig
from rmqlab.store.message import Message
from rmqlab.store.message_store import MessageStore


def clock_outside_delete_hours(cfg: MessageStoreConfig) -> ManualClock:
    """A clock at now -- moved past the config's delete-when hours (RocketMQ's "04") when now is in
    them, where the cleanup service fires on its own and a test would answer by the time of day."""
    clock = ManualClock(time.time_ns() // 1_000_000)
    hours = {int(h) for h in cfg.delete_when.split(";")}
    while datetime.fromtimestamp(clock.now_ms() / 1000, clock.tz()).hour in hours:
        clock.advance(10 * 60_000)
    return clock


@pytest.fixture
def store(tmp_path) -> Iterator[MessageStore]:
    cfg = MessageStoreConfig.small(str(tmp_path / "store"), mapped_file_size_commit_log=8 * 1024)
    clock = clock_outside_delete_hours(cfg)
    s = MessageStore.open(str(tmp_path / "store"), cfg, clock=clock, threaded=False)
    yield s
    if not s.is_shutdown:
        s.shutdown()


def put_many(store: MessageStore, n: int, *, topics: tuple[str, ...] = ("T0", "T1", "T2"), body: bytes = b"x" * 100,
             start: int = 0) -> None:
    for i in range(start, start + n):
        store.put_message(Message(topics[i % len(topics)], body, tags=f"tag{i % 2}", keys=[f"k{i}"], queue_id=i % 2))
        store.clock.advance(10)  # type: ignore[attr-defined]
