"""``get_message`` batch limits (RocketMQ ``isTheBatchFull``) against a reference model.

The scan loop checks the transfer limits inline; this drives it with random limits, sizes,
offsets and "in memory" thresholds (so both the in-memory and the in-disk limits apply) and
compares the messages returned and the next offset with a direct transcription of the rule.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqlab import MessageStore, MessageStoreConfig
from rmqlab.clock import ManualClock
from rmqlab.store.message import Message
from rmqlab.store.message_filter import TagFilter

N = 60


@pytest.fixture(scope="module")
def store() -> Iterator[MessageStore]:
    root = tempfile.mkdtemp(prefix="rmqlab-limits-")
    s = MessageStore.open(root, MessageStoreConfig.small(root), clock=ManualClock(), threaded=False)
    try:
        for i in range(N):  # sizes vary, several CommitLog files (64 KiB each)
            s.put_message(Message("TopicL", bytes([i % 251]) * (100 + 37 * (i % 50)), tags=f"T{i % 3}"))
        s.wait_dispatched()
        yield s
    finally:
        s.shutdown()
        shutil.rmtree(root, ignore_errors=True)


def is_the_batch_full(size: int, max_msg_nums: int, total: int, count: int, in_disk: bool,
                      c: MessageStoreConfig) -> bool:
    """RocketMQ 4.9.8 ``DefaultMessageStore.isTheBatchFull``, transcribed."""
    if total == 0 or count == 0:
        return False
    if max_msg_nums <= count:
        return True
    if in_disk:
        return (total + size > c.max_transfer_bytes_on_message_in_disk
                or count > c.max_transfer_count_on_message_in_disk - 1)
    return (total + size > c.max_transfer_bytes_on_message_in_memory
            or count > c.max_transfer_count_on_message_in_memory - 1)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(offset=st.integers(0, N - 1), max_nums=st.integers(1, 40), mem_bytes=st.integers(1, 40000),
       mem_count=st.integers(1, 40), disk_bytes=st.integers(1, 40000), disk_count=st.integers(1, 40),
       memory=st.integers(0, 120000), tag=st.sampled_from([None, "T1"]))
def test_batch_limits_match_rocketmq(store: MessageStore, offset: int, max_nums: int, mem_bytes: int,
                                     mem_count: int, disk_bytes: int, disk_count: int, memory: int,
                                     tag: str | None) -> None:
    saved = store.config, store._memory_cache
    c = store.config = dataclasses.replace(
        saved[0], max_transfer_bytes_on_message_in_memory=mem_bytes, max_transfer_count_on_message_in_memory=mem_count,
        max_transfer_bytes_on_message_in_disk=disk_bytes, max_transfer_count_on_message_in_disk=disk_count)
    store._memory_cache = float(memory)
    try:
        flt = TagFilter(tag) if tag else None
        with store.get_message("g", "TopicL", 0, offset, max_nums, flt) as got:
            cq = store.consume_queue_store.find_consume_queue("TopicL", 0, create=False)
            assert cq is not None
            max_py = store.commit_log.get_max_offset()
            expect: list[int] = []
            total = looked = 0
            for q in range(offset, N):
                phy, size, _tags_code = cq.get_unit(q)
                if is_the_batch_full(size, max_nums, total, len(expect), max_py - phy > memory, c):
                    break
                looked += 1
                if flt is not None and f"T{q % 3}" != tag:
                    continue
                expect.append(phy)
                total += size
            assert got.commit_log_offsets == expect
            assert got.buffer_total_size == total
            assert got.next_begin_offset == offset + looked
            assert [m.decode().body[0] for m in got.messages] == [
                store.look_message_by_offset(p).body[0] for p in expect  # type: ignore[union-attr]
            ]
    finally:
        store.config, store._memory_cache = saved



@pytest.mark.parametrize(("version", "max_filter", "windows"), [
    ("4.9.8", 200, (800, 800, 800)),  # max(16000, maxMsgNums * 20) bytes, the setting unused
    ("5.3.3", 200, (11, 17, 11)),  # max(maxFilterMessageSize, maxMsgNums * 20): units at <= that
    ("5.3.3", 16000, (801, 801, 801)),
])
def test_the_cq_window_of_a_filtered_get(tmp_path, version: str, max_filter: int,  # type: ignore[no-untyped-def]
                                         windows: tuple[int, int, int]) -> None:
    """How many units one call looks at when none match: 4.9.8 walks ``i < maxFilter`` bytes
    (800 units by default); 5.x breaks at a unit whose ``(queueOffset - offset) * 20`` is *above*
    ``maxFilterMessageSize`` (a setting), so the unit exactly that far is still looked at (801)."""
    root = str(tmp_path / "s")
    config = MessageStoreConfig.small(root, rocketmq_version=version, max_filter_message_size=max_filter,
                                      mapped_file_size_consume_queue=2000 * 20, mapped_file_size_commit_log=1 << 20)
    s = MessageStore.open(root, config, clock=ManualClock(), threaded=False)
    try:
        for i in range(900):
            s.put_message(Message("TopicW", b"m%d" % i, tags="TagA", queue_id=0))
        s.wait_dispatched()
        for max_nums, scanned, start in zip((1, 16, 1), windows, (0, 0, 50), strict=True):
            with s.get_message("g", "TopicW", 0, start, max_nums, TagFilter("TagB")) as r:
                assert r.status.name == "NO_MATCHED_MESSAGE"
                assert r.next_begin_offset == min(start + scanned, 900)
        with s.get_message("g", "TopicW", 0, 0, 32, TagFilter("TagA")) as r:  # matches: maxMsgNums
            assert r.message_count == 32
            assert r.next_begin_offset == 32
    finally:
        s.shutdown()
