"""The by-time search's store-time reader against ``CommitLog.pickup_store_timestamp``.

``MessageStore.get_offset_in_queue_by_time`` probes the CommitLog through ``_StoreTimeReader``
(files held once per search); every probe and every answer must be the exact method's.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqlab import MessageStore, MessageStoreConfig
from rmqlab.clock import ManualClock
from rmqlab.store.message import Message
from rmqlab.store.message_store import _StoreTimeReader


@pytest.fixture(scope="module", params=["4.9.8", "5.3.3"])
def store(request: pytest.FixtureRequest) -> Iterator[MessageStore]:
    root = tempfile.mkdtemp(prefix="rmqlab-bytime-")
    clock = ManualClock()
    s = MessageStore.open(root, MessageStoreConfig.small(root, rocketmq_version=request.param), clock=clock,
                          threaded=False)
    try:
        for i in range(300):  # several CommitLog and CQ files; repeated and skipped store times
            clock.advance(0 if i % 7 == 3 else 1 + i % 5)
            host = ("::1", 7) if i % 11 == 5 else ("10.0.0.7", 4242)  # IPv6 born host: timestamp at 68
            s.put_message(Message("TopicT", b"x" * (50 + i % 300), tags="A", queue_id=i % 2, born_host=host))
            if i % 40 == 0:
                s.step()
        s.wait_dispatched()
        yield s
    finally:
        s.shutdown()
        shutil.rmtree(root, ignore_errors=True)


def refs(store: MessageStore) -> list[int]:
    return [mf.ref_count for mf in store.commit_log.mapped_file_queue.mapped_files]


def exact_by_time(store: MessageStore, queue_id: int, ts: int, boundary: str) -> int:
    cq = store.consume_queue_store.find_consume_queue("TopicT", queue_id, create=False)
    assert cq is not None
    cl = store.commit_log
    return cq.get_offset_in_queue_by_time(ts, commit_log_min_offset=cl.get_min_offset(),
                                          pickup_store_timestamp=cl.pickup_store_timestamp, boundary=boundary)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_probes_match_pickup_store_timestamp(store: MessageStore, data: st.DataObject) -> None:
    cl = store.commit_log
    before = refs(store)
    cq = store.consume_queue_store.find_consume_queue("TopicT", data.draw(st.integers(0, 1)), create=False)
    assert cq is not None
    units = [cq.get_unit(q) for q in range(cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue())]
    probe = st.one_of(
        st.sampled_from([(u[0], u[1]) for u in units]),  # real records
        st.tuples(st.integers(-10, cl.get_max_offset() + 10), st.integers(-5, 400)),  # anything
        st.tuples(st.sampled_from([cl.file_size - 100, cl.file_size, 2 * cl.file_size - 8]), st.integers(0, 200)),
    )
    reader = _StoreTimeReader(cl, cl.get_min_offset())
    try:
        for offset, size in data.draw(st.lists(probe, min_size=1, max_size=25)):
            try:
                expect: object = cl.pickup_store_timestamp(offset, size)
            except Exception as e:  # the same error class must come out of both
                expect = type(e)
            try:
                got: object = reader(offset, size)
            except Exception as e:
                got = type(e)
            assert got == expect, (offset, size)
    finally:
        reader.close()
    assert refs(store) == before  # every file held by the search is released


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_by_time_answers_match_the_exact_search(store: MessageStore, data: st.DataObject) -> None:
    queue_id = data.draw(st.integers(0, 1))
    first = store.get_message_store_timestamp("TopicT", queue_id, 0)
    last = store.get_message_store_timestamp("TopicT", queue_id, store.get_max_offset_in_queue("TopicT", queue_id) - 1)
    ts = data.draw(st.integers(first - 20, last + 20))
    boundaries = ["LOWER"] if store.config.rocketmq_version == "4.9.8" else ["LOWER", "UPPER"]
    before = refs(store)
    for boundary in boundaries:
        assert store.get_offset_in_queue_by_time("TopicT", queue_id, ts, boundary) == exact_by_time(
            store, queue_id, ts, boundary)
    assert refs(store) == before
