"""Tag filtering with ``enable_consume_queue_ext``: the vectorised resolution of a get_message
window (``ConsumeQueue.iter_units_resolved``, ``ConsumeQueueExt.resolve``) answers exactly as the
unit-by-unit path (``resolve_tags_code`` -> ``ConsumeQueueExt.get``) it replaces.

The store's ext run is damaged in the ways that make addresses resolve to nothing, or to odd
values (a cut write position, deleted head and tail files, zeroed units, the end marker, an
address inside a unit, a unit whose own tags code looks like an address, a bitmap running past
the write position), then every pull is made twice, once through each path, and compared:
status, next offset, filtered count, messages, the CorruptRecord where one is raised, and the
miss count.
"""

from __future__ import annotations

import shutil
import struct
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqlab.clock import ManualClock
from rmqlab.codec.consume_queue_ext_unit import MAX_ADDR, decorate, is_ext_addr, undecorate
from rmqlab.config import MessageStoreConfig
from rmqlab.errors import CorruptRecord
from rmqlab.store.consume_queue import ConsumeQueue
from rmqlab.store.message import Message
from rmqlab.store.message_filter import TagFilter
from rmqlab.store.message_store import MessageStore

EXT_FILE = 1000  # 49 units a file, then the end marker
CQ_UNITS = 300  # a get_message window of a whole file spans chunks of 64 and 256 units
T0 = 1_700_000_000_000
TAGS = ["TagA", "TagB", "TagC", None]
FILTERS = ["TagA", "TagB || TagC", "TagX", "*"]
N = 700
_UNIT = struct.Struct(">qiq")


def _config(root: str) -> MessageStoreConfig:
    return MessageStoreConfig.small(root, enable_consume_queue_ext=True, mapped_file_size_consume_queue_ext=EXT_FILE,
                                    mapped_file_size_consume_queue=CQ_UNITS * 20)


@pytest.fixture(scope="module")
def base_store() -> Iterator[str]:
    """A store of N messages in one queue (3 CQ files, 15 ext files), shut down cleanly."""
    with tempfile.TemporaryDirectory() as d:
        root = str(Path(d) / "base")
        clock = ManualClock(T0)
        store = MessageStore.open(root, _config(root), clock=clock, threaded=False)
        for i in range(N):
            assert store.put_message(Message("T", b"m%d" % i, tags=TAGS[i * 7 % 4 if i % 3 else 0], queue_id=0)).ok
            clock.advance(1)
            if i % 100 == 0:
                store.step()
        store.step()
        assert store.wait_dispatched()
        store.shutdown()
        yield root


def _per_unit(self: ConsumeQueue, buf: Any, first_chunk: int = 64) -> Iterator[tuple[int, int, int]]:
    """The path before vectorising: units as stored; the reader resolves each address itself."""
    return _UNIT.iter_unpack(bytes(buf[: len(buf) // 20 * 20]))


def _answers(store: MessageStore, cq: ConsumeQueue) -> tuple[list[Any], int]:
    out: list[Any] = []
    misses = cq.ext_misses
    for offset in range(0, N + 1, 59):
        for max_nums in (1, 1000):
            for expr in FILTERS:
                try:
                    with store.get_message("g", "T", 0, offset, max_nums, TagFilter(expr)) as r:
                        out.append((r.status, r.next_begin_offset, r.filtered_count,
                                    [m.commit_log_offset for m in r.messages]))
                except CorruptRecord as exc:
                    out.append(("corrupt", exc.file, exc.offset, str(exc)))
    return out, cq.ext_misses - misses


def _unit_addresses(cq: ConsumeQueue) -> list[int]:
    return [t for q in range(cq.get_max_offset_in_queue()) if is_ext_addr(t := cq.get_unit(q)[2])]


def _damage(store: MessageStore, cq: ConsumeQueue, kind: str, pick: int) -> None:
    """One kind of damage to the live ext run (or to a CQ unit's address), at the ``pick``-th
    unit or file."""
    ext = cq.consume_queue_ext
    assert ext is not None
    mfq = ext.mapped_file_queue
    addresses = _unit_addresses(cq)
    address = addresses[pick % len(addresses)]
    real = undecorate(address)
    mf = mfq.find_mapped_file_by_offset(real)
    at = real % EXT_FILE
    q = pick % cq.get_max_offset_in_queue()

    def set_cq_tags(value: int) -> None:
        cq_mf = cq.mapped_file_queue.find_mapped_file_by_offset(q * 20)
        struct.pack_into(">q", cq_mf.buffer, q * 20 % cq.mapped_file_size + 12, value)

    if mf is None and kind in ("zero", "marker", "tags_like_an_address", "bitmap_past_the_end"):
        return  # its file is gone already
    if kind == "cut":  # a power loss before the ext flush: the run ends inside a file
        mfq.truncate_dirty_files(real)
    elif kind == "cut_inside_unit":  # the write position falls inside a unit's head
        mfq.truncate_dirty_files(real + 7)
    elif kind == "delete_head":  # cleanup took the first files (address 0 then falls back to the first file)
        ext.truncate_by_min_address(decorate(real + EXT_FILE + 1))
    elif kind == "zero":
        mf.buffer[at : at + 20] = bytes(20)
    elif kind == "marker":
        struct.pack_into(">h", mf.buffer, at, -1)
    elif kind == "tags_like_an_address":  # a found unit whose own tags code is <= MAX_ADDR
        struct.pack_into(">q", mf.buffer, at + 2, MAX_ADDR - pick)
    elif kind == "bitmap_past_the_end":  # get raises CorruptRecord naming the file and offset
        struct.pack_into(">h", mf.buffer, at + 18, 30000)
    elif kind == "address_inside_a_unit":
        set_cq_tags(decorate(real + 1 + pick % 19))
    elif kind == "address_zero":
        set_cq_tags(decorate(0))
    elif kind == "address_past_the_end":
        set_cq_tags(decorate(mfq.get_max_offset() + 20 * (pick % 3)))
    elif kind == "address_of_the_marker":
        set_cq_tags(decorate(EXT_FILE - 20))
    else:
        raise AssertionError(kind)


_KINDS = ["cut", "cut_inside_unit", "delete_head", "zero", "marker", "tags_like_an_address", "bitmap_past_the_end",
          "address_inside_a_unit", "address_zero", "address_past_the_end", "address_of_the_marker"]


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(_KINDS), st.integers(0, 10_000)), max_size=4))
def test_vectorised_resolution_answers_as_unit_by_unit(base_store: str, damage: list[tuple[str, int]]) -> None:
    with tempfile.TemporaryDirectory() as d:
        root = str(Path(d) / "s")
        shutil.copytree(base_store, root)
        store = MessageStore.open(root, _config(root), clock=ManualClock(T0 + N), threaded=False)
        try:
            cq = store.consume_queue_store.find_consume_queue("T", 0)
            assert cq is not None
            for kind, pick in damage:
                _damage(store, cq, kind, pick)
            vectorised = _answers(store, cq)
            with mock.patch.object(ConsumeQueue, "iter_units_resolved", _per_unit):
                per_unit = _answers(store, cq)
            assert vectorised == per_unit
            if not damage:
                assert vectorised[1] == 0
        finally:
            store.shutdown()


@pytest.mark.parametrize("first_chunk", [1, 3, 64])
def test_every_window_resolves_as_get_does(base_store: str, first_chunk: int) -> None:
    """Unit by unit, for every start offset of the queue and chunks of several sizes (so chunk
    edges and ext file rolls fall everywhere in a window): each resolved tags code is ``get``'s;
    with the tail of the run lost, the lost ones stay addresses (get answers None for them)."""
    with tempfile.TemporaryDirectory() as d:
        root = str(Path(d) / "s")
        shutil.copytree(base_store, root)
        store = MessageStore.open(root, _config(root), clock=ManualClock(T0 + N), threaded=False)
        try:
            cq = store.consume_queue_store.find_consume_queue("T", 0)
            cq.consume_queue_ext.mapped_file_queue.truncate_dirty_files(5 * EXT_FILE + 300)
            lost = 0
            for start in range(0, N, 7):
                with cq.get_index_buffer(start) as sbr:
                    got = list(cq.iter_units_resolved(sbr.buffer, first_chunk))
                    want = list(_UNIT.iter_unpack(bytes(sbr.buffer)))
                assert [g[:2] for g in got] == [w[:2] for w in want]
                for (_, _, code), (_, _, stored) in zip(got, want, strict=True):
                    unit = cq.get_ext(stored)
                    if unit is None:
                        assert code == stored
                        lost += 1
                    else:
                        assert code == unit.tags_code
            assert lost
        finally:
            store.shutdown()


@pytest.fixture(scope="module")
def delayed_store() -> Iterator[str]:
    """150 messages with delay level 2 (5 s), 40 ms apart, their schedule units' tags codes ext
    addresses over 4 ext files; shut down before any is due."""
    with tempfile.TemporaryDirectory() as d:
        root = str(Path(d) / "base")
        clock = ManualClock(T0)
        store = MessageStore.open(root, _config(root), clock=clock, threaded=False)
        for i in range(150):
            assert store.put_message(Message("T", b"d%d" % i, tags=TAGS[i % 4], queue_id=0, delay_time_level=2)).ok
            clock.advance(40)
        store.step()
        assert store.wait_dispatched()
        store.shutdown()
        yield root


def _deliveries(root: str, damage: list[tuple[str, int]]) -> list[Any]:
    """Per step of 250 ms from T0 + 4.5 s: the schedule's delivered count; then the bodies the
    real queue holds, in order, and the schedule queue's ext misses."""
    clock = ManualClock(T0 + 4_500)  # due times are T0 + 5 s + 40 ms * i
    store = MessageStore.open(root, _config(root), clock=clock, threaded=False)
    try:
        sched = store.consume_queue_store.find_consume_queue("SCHEDULE_TOPIC_XXXX", 1)
        for kind, pick in damage:
            _damage(store, sched, kind, pick)
        out: list[Any] = []
        for _ in range(40):
            clock.advance(250)
            try:
                out.append(store.step()["schedule"])
            except CorruptRecord as exc:
                out.append(("corrupt", exc.offset))
        bodies: list[bytes] = []
        while True:
            with store.get_message("g", "T", 0, len(bodies), 32) as r:
                if not r.messages:
                    break
                bodies += [m.decode().body for m in r.messages]
        out.append(bodies)
        out.append(sched.ext_misses)
        return out
    finally:
        store.shutdown()


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(_KINDS), st.integers(0, 10_000)), max_size=3))
def test_schedule_due_times_resolve_as_unit_by_unit(delayed_store: str, damage: list[tuple[str, int]]) -> None:
    """The schedule service walks its queue through ``iter_units_resolved``: the same deliveries,
    in the same steps, as resolving each address with ``get`` (a lost ext unit: store time +
    delay, as RocketMQ recomputes it)."""
    runs = []
    for patch in (False, True):
        with tempfile.TemporaryDirectory() as d:
            root = str(Path(d) / "s")
            shutil.copytree(delayed_store, root)
            if patch:
                with mock.patch.object(ConsumeQueue, "iter_units_resolved", _per_unit):
                    runs.append(_deliveries(root, damage))
            else:
                runs.append(_deliveries(root, damage))
    assert runs[0] == runs[1]
    if not damage:
        assert runs[0][0] == 0  # nothing is due before T0 + 5 s
        assert sum(runs[0][:-2]) == len(runs[0][-2]) == 150
