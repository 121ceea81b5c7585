"""A small stepped store with a manual clock, for the widget tests."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

pytest.importorskip("plotly")
pytest.importorskip("ipywidgets")
pytest.importorskip("anywidget")

from rmqlab.clock import ManualClock
from rmqlab.config import MessageStoreConfig
from rmqlab.store.message import Message
from rmqlab.store.message_store import MessageStore


@pytest.fixture
def store(tmp_path) -> Iterator[MessageStore]:
    clock = ManualClock(time.time_ns() // 1_000_000)
    cfg = MessageStoreConfig.small(str(tmp_path / "store"), mapped_file_size_commit_log=8 * 1024)
    s = MessageStore.open(str(tmp_path / "store"), cfg, clock=clock, threaded=False)
    yield s
    if not s.is_shutdown:
        s.shutdown()


def put_many(store: MessageStore, n: int, *, topics: tuple[str, ...] = ("T0", "T1", "T2"), body: bytes = b"x" * 100,
             start: int = 0) -> None:
    for i in range(start, start + n):
        store.put_message(Message(topics[i % len(topics)], body, tags=f"tag{i % 2}", keys=[f"k{i}"], queue_id=i % 2))
        store.clock.advance(10)  # type: ignore[attr-defined]
