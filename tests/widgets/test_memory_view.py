"""MemoryStoreView: per memory topic held messages and bytes against the threshold, offsets, evictions."""

from __future__ import annotations

import time

import pytest

from rmqlab.clock import ManualClock
from rmqlab.config import MessageStoreConfig
from rmqlab.store.message import Message
from rmqlab.store.message_store import MessageStore
from rmqlab.widgets import MemoryStoreView, figures
from rmqlab.widgets._source import MemoryQueueState, MemoryState

EVIL = "<script>alert(1)</script>"


@pytest.fixture
def mem_store(tmp_path):
    cfg = MessageStoreConfig.small(str(tmp_path / "m"), memory_topic_enable=True, memory_store_max_bytes=8 * 1024)
    store = MessageStore.open(str(tmp_path / "m"), cfg, clock=ManualClock(time.time_ns() // 1_000_000), threaded=False)
    store.create_topic("Prices", queue_nums=2, memory=True)
    store.create_topic("Quotes", queue_nums=1, memory=True)
    yield store
    if not store.is_shutdown:
        store.shutdown()


def _put(store, topic, n, *, start=0, queues=2):
    for i in range(start, start + n):
        r = store.put_message(Message(topic, f"{topic} tick {i} ".encode() * 12, keys=[f"k{i}"], queue_id=i % queues))
        assert r.ok


def test_state_matches_the_memory_store(mem_store):
    view = MemoryStoreView(mem_store, autoupdate=False)
    assert view.state.enabled
    assert view.state.queues == ()
    _put(mem_store, "Prices", 50)
    _put(mem_store, "Quotes", 5, queues=1)
    view.refresh()
    mem = mem_store.memory_store
    st = view.state
    assert (st.threshold, st.total_bytes, st.count, st.evicted_count, st.evicted_bytes) == (
        mem.threshold, mem.message_total_size, mem.message_count, mem.evicted_count, mem.evicted_bytes)
    assert mem.evicted_count > 0  # 50 ticks of ~250 B do not fit in 8 KiB
    for q in st.queues:
        assert q.min_offset == mem_store.get_min_offset_in_queue(q.topic, q.queue_id)
        assert q.max_offset == mem_store.get_max_offset_in_queue(q.topic, q.queue_id)
    assert sum(q.held for q in st.queues) == mem.message_count
    assert sum(q.evicted for q in st.queues) == mem.evicted_count
    assert sum(q.held_bytes for q in st.queues) == mem.message_total_size
    # the figure: one bar per topic, the total, the threshold line
    bars, total = view.figure.data
    assert list(bars.y) == ["Prices", "Quotes"]
    assert sum(bars.x) == mem.message_total_size
    assert list(total.x) == [mem.message_total_size]
    assert [s.x0 for s in view.figure.layout.shapes] == [mem.threshold]
    assert f"{mem.evicted_count} evicted" in view.figure.layout.title.text
    assert "<table class='rmq-memory'" in view.table.value
    view.close()


def test_evictions_redraw_through_the_bus(mem_store):
    view = MemoryStoreView(mem_store)  # subscribed: MemoryEvicted marks it dirty
    _put(mem_store, "Prices", 60)
    view.throttle.flush()
    assert view.state.evicted_count == mem_store.memory_store.evicted_count > 0
    assert not view.throttle.errors
    view.close()


def test_eviction_of_the_oldest_of_the_same_topic_shows_per_queue(mem_store):
    _put(mem_store, "Quotes", 3, queues=1)
    _put(mem_store, "Prices", 60)
    view = MemoryStoreView(mem_store, autoupdate=False)
    quotes = [q for q in view.state.queues if q.topic == "Quotes"]
    prices = [q for q in view.state.queues if q.topic == "Prices"]
    # Prices evicts its own oldest first: Quotes keeps its 3 messages
    assert [(q.min_offset, q.max_offset, q.evicted) for q in quotes] == [(0, 3, 0)]
    assert all(q.evicted > 0 for q in prices)
    view.close()


def test_store_without_memory_topics(store):
    view = MemoryStoreView(store, autoupdate=False)
    assert view.state.enabled is False
    assert "not enabled" in view.figure.layout.title.text
    assert list(view.figure.data) == []
    view.close()


def test_memory_figure_and_table_escape_topic_names():
    state = MemoryState(True, 1000, 300, 2, 1, 100, (MemoryQueueState(EVIL, 0, 1, 3, 300),))
    spec = figures.memory_store_spec(state)
    text = repr(spec)
    assert "<script>" not in text
    assert "&lt;script&gt;" in text
    html = figures.memory_table_html(state)
    assert "<script>" not in html
    assert "&lt;script&gt;" in html
    fig = figures.memory_store_figure(state)  # a valid plotly figure
    assert fig.layout.shapes[0].x0 == 1000


def test_unknown_queue_bytes_still_draw():
    state = MemoryState(True, 1000, 300, 2, 0, 0, (MemoryQueueState("T", 0, 0, 2, None),))
    spec = figures.memory_store_spec(state)
    assert spec["data"][0]["x"] == [0]
    assert "?" in figures.memory_table_html(state)
