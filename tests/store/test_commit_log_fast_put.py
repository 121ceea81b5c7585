"""The CommitLog's fast put path writes exactly what the reference path writes.

``CommitLog.put_message``/``put_messages`` encode common messages from a cached per-shape
template and pack heads straight into the mapped file; ``fast_path = False`` forces the reference
path (``encode_record`` + ``_put``). Two stores fed the same random operations, one each way,
must agree on every result, every byte of every CommitLog file, every dispatch hint, the queue
offset table and the events published.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqlab import MessageStore, MessageStoreConfig
from rmqlab.clock import ManualClock
from rmqlab.codec import flags
from rmqlab.codec.message import decode_message, encode_message_parts, head_struct, topic_field
from rmqlab.codec.msg_id import UniqKeyGenerator, create_offset_msg_id
from rmqlab.events import Appended, EventRecorder, Rolled
from rmqlab.store.commit_log import CommitLog
from rmqlab.store.message import Message
from rmqlab.store.results import (
    AppendMessageResult,
    AppendMessageStatus,
    PutMessageResult,
    PutMessageStatus,
    put_ok,
)
from rmqlab.store.store_stats import StoreStatsService

# 2023-11-30 23:59:59.000 UTC: a month boundary is one clock advance away (UNIQ_KEY prefix)
_START = 1_701_388_799_000

_topics = st.sampled_from(["TopicA", "TopicB", "Topic_%|-9", "bad topic", "", flags.SCHEDULE_TOPIC, "T" * 128])
_tags = st.sampled_from([None, "", "TagA", "标签", "a\x01b", "x\x02", "a b"])
_key = st.sampled_from(["k1", "k2", "", "ключ", "a\x01", "b\x02c", "k 3", "UNIQ_KEY"])
_keys = st.one_of(st.lists(_key, max_size=4), _key, st.just(()), st.tuples(_key, _key))
_props = st.sampled_from([None, {}, {"p": "v"}, {"UNIQ_KEY": "FROMPROPS"}, {"KEYS": "over"}, {"e": ""}])
_hosts = st.sampled_from([("10.0.0.7", 4242), "10.0.0.8:1", ("::1", 9), "[fd00::1]:77", ("127.0.0.1", 0)])
_sys = st.sampled_from([0, 0, 0, flags.TRANSACTION_PREPARED_TYPE, flags.TRANSACTION_COMMIT_TYPE,
                        flags.TRANSACTION_ROLLBACK_TYPE, flags.BORNHOST_V6_FLAG, 1, 2])
_uniq = st.sampled_from([None, None, None, "", "C0A80001FIXED0001", "bad\x01uniq"])
_bodies = st.one_of(
    st.binary(max_size=300),
    st.integers(0, 70_000).map(lambda n: bytes(n % 251 for _ in range(1)) * n),  # up to > a 64 KiB file
)


@st.composite
def _message(draw: Any, topic: Any = _topics, queue: Any = None) -> Message:
    return Message(
        draw(topic),
        draw(_bodies),
        tags=draw(_tags),
        keys=draw(_keys),
        properties=draw(_props),
        queue_id=draw(queue if queue is not None else st.sampled_from([0, 1, 3, -1])),
        flag=draw(st.sampled_from([0, 7, -1, 2**31 - 1])),
        born_host=draw(_hosts),
        born_timestamp=draw(st.sampled_from([None, None, 0, 1_600_000_000_123])),
        sys_flag=draw(_sys),
        reconsume_times=draw(st.sampled_from([0, 3])),
        prepared_transaction_offset=draw(st.sampled_from([0, 123_456])),
        delay_time_level=draw(st.sampled_from([0, 0, 3])),
        wait_store_msg_ok=draw(st.booleans()),
        uniq_key=draw(_uniq),
    )


_plain = _message(topic=st.sampled_from(["TopicA", "TopicB"]), queue=st.sampled_from([0, 2]))


@st.composite
def _batch(draw: Any) -> list[Message]:
    if draw(st.integers(0, 4)) == 0:  # anything, mostly refused
        return draw(st.lists(_message(), max_size=4))
    topic, queue = draw(st.sampled_from(["TopicA", "TopicB"])), draw(st.sampled_from([0, 1]))
    msgs = draw(st.lists(_message(topic=st.just(topic), queue=st.just(queue)), min_size=1, max_size=6))
    return [m if not m.sys_flag & 0xC else Message(m.topic, m.body, tags=m.tags, queue_id=queue) for m in msgs]


_op = st.one_of(
    st.tuples(st.just("put"), _message()),
    st.tuples(st.just("put"), _plain),
    st.tuples(st.just("put"), _plain),
    st.tuples(st.just("batch"), _batch()),
    st.tuples(st.just("advance"), st.sampled_from([0, 1, 1000, 86_400_000])),
)


def _result_key(r: PutMessageResult) -> tuple:
    a = r.append_result
    return (r.status, r.reason, None if a is None else (a.status, a.wrote_offset, a.wrote_bytes, a.msg_id,
                                                        a.store_timestamp, a.logics_offset, a.msg_num))


def _files(store: MessageStore) -> dict[str, bytes]:
    d = Path(store.config.commit_log_dir)
    return {name: (d / name).read_bytes() for name in sorted(os.listdir(d))}


@contextmanager
def _pair(version: str = "4.9.8", store_host: str = "192.168.0.10:10911",
          **changes: Any) -> Iterator[tuple[MessageStore, ...]]:
    with tempfile.TemporaryDirectory() as tmp:
        stores = []
        for name in ("fast", "exact"):
            root = os.path.join(tmp, name)
            config = MessageStoreConfig.small(root, rocketmq_version=version, store_host=store_host, **changes)
            stores.append(MessageStore.open(root, config, clock=ManualClock(_START), threaded=False))
        fast, exact = stores
        exact.commit_log.fast_path = False
        exact.commit_log._uniq.fix_string = fast.commit_log._uniq.fix_string  # same "process" prefix
        try:
            yield fast, exact
        finally:
            for s in stores:
                s.shutdown()


def _run(fast: MessageStore, exact: MessageStore, ops: list[tuple[str, Any]]) -> None:
    events = [EventRecorder(s.bus) for s in (fast, exact)]
    for op, arg in ops:
        if op == "advance":
            for s in (fast, exact):
                s.clock.advance(arg)  # type: ignore[attr-defined]
            continue
        put = "put_message" if op == "put" else "put_messages"
        a, b = (getattr(s, put)(arg) for s in (fast, exact))
        assert _result_key(a) == _result_key(b), (op, arg)
        assert fast.commit_log.pending_hints() == exact.commit_log.pending_hints()
    assert fast.commit_log.topic_queue_table == exact.commit_log.topic_queue_table
    assert _files(fast) == _files(exact)
    kinds = (Appended, Rolled)
    fast_events, exact_events = ([e for e in r.events if isinstance(e, kinds)] for r in events)
    assert fast_events == exact_events
    for s in (fast, exact):  # and both dispatch to the same consume queues
        s.flush()  # a TransientStorePool store shows reput committed bytes only
        assert s.wait_dispatched()
    for topic in ("TopicA", "TopicB"):
        for q in range(4):
            assert fast.get_max_offset_in_queue(topic, q) == exact.get_max_offset_in_queue(topic, q)


@pytest.mark.parametrize(("version", "host"), [("4.9.8", "192.168.0.10:10911"), ("5.3.3", "[fd00::7]:10911")])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(ops=st.lists(_op, min_size=1, max_size=40))
def test_fast_path_writes_what_the_exact_path_writes(version: str, host: str, ops: list[tuple[str, Any]]) -> None:
    with _pair(version, host) as (fast, exact):
        _run(fast, exact, ops)


def test_many_plain_puts_roll_files_identically() -> None:
    """Enough 1 KiB puts and batches to fill several 64 KiB files (blank records, rolls)."""
    body = bytes(range(256)) * 4
    ops: list[tuple[str, Any]] = []
    for i in range(300):
        msg = Message("TopicA", body[: 900 + i % 124], tags="TagA", keys=[f"key{i}", f"grp{i // 4}"],
                      born_host=("10.0.0.7", 4242), queue_id=i % 2)
        ops.append(("put", msg))
        if i % 7 == 0:
            ops.append(("batch", [Message("TopicB", body, tags="T", keys=f"b{i} c{j}") for j in range(i % 5 + 1)]))
        if i % 50 == 0:
            ops.append(("advance", 1))
    with _pair() as (fast, exact):
        _run(fast, exact, ops)
        assert len(_files(fast)) >= 5


@pytest.mark.parametrize("changes", [{"transient_store_pool_enable": True}, {"flush_disk_type": "SYNC_FLUSH"}])
def test_write_buffer_and_sync_flush_stores_match(changes: dict[str, Any]) -> None:
    """Fast records go to the TransientStorePool buffer (committed later) or are flushed per put
    exactly like exact ones."""
    body = bytes(range(256)) * 3
    ops: list[tuple[str, Any]] = [("put", Message("TopicA", body, tags="T", keys=[f"k{i}"])) for i in range(150)]
    ops.append(("batch", [Message("TopicA", body, keys=f"b{j}") for j in range(8)]))
    with _pair(**changes) as (fast, exact):
        _run(fast, exact, ops)
        for s in (fast, exact):
            s.step()
            s.flush()
        assert _files(fast) == _files(exact)


def test_common_puts_take_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    with _pair() as (fast, _exact):
        def no_exact(*_a: Any) -> Any:
            raise AssertionError("exact path taken")

        monkeypatch.setattr(fast.commit_log, "_put", no_exact)
        monkeypatch.setattr(fast.commit_log, "encode_record", no_exact)
        body = b"x" * 1024
        for i in range(200):  # rolls a 64 KiB file on the way: still the fast path
            r = fast.put_message(Message("TopicA", body, tags="TagA", keys=[f"k{i}", "g"], born_host=("10.0.0.7", 1)))
            assert r.ok
        monkeypatch.undo()  # batches have no separate fast path: MessageExtBatch records take _put
        r = fast.put_messages([Message("TopicA", body, tags="TagA", keys=f"k{i}") for i in range(32)])
        assert r.ok
        assert r.append_result is not None
        assert r.append_result.msg_num == 32
        assert r.queue_offset == 200
        assert len(r.msg_id.split(",")) == 32
        assert len(fast.commit_log.pending_hints()) == 232


def test_unusual_messages_take_the_exact_path(monkeypatch: pytest.MonkeyPatch) -> None:
    with _pair() as (fast, _exact):
        cl = fast.commit_log
        calls = []
        real = cl._put
        monkeypatch.setattr(cl, "_put", lambda enc: calls.append(len(enc)) or real(enc))
        for msg in [
            Message("TopicA", b"p", properties={"a": "b"}),  # user properties
            Message("TopicA", b"k", keys="a\x01b"),  # separator in KEYS
            Message("TopicA", b"u", uniq_key="u\x02"),  # separator in a given UNIQ_KEY
            Message(flags.SCHEDULE_TOPIC, b"s"),  # tags code depends on the reput's delay table
            Message("TopicA", b"t", tags="t\x01"),  # separator in TAGS
        ]:
            assert fast.put_message(msg).ok
        assert calls == [1, 1, 1, 1, 1]
        assert not fast.put_message(Message("bad topic", b"x")).ok
        assert not fast.put_message(Message("TopicA", b"x", queue_id=-1)).ok
        assert calls == [1, 1, 1, 1, 1]


def test_a_refused_fast_put_draws_no_extra_uniq_key() -> None:
    """Properties over 32767 bytes: refused by the exact path, with the key the fast path drew."""
    with _pair() as (fast, exact):
        big = ["k" * 20_000, "j" * 20_000]
        _run(fast, exact, [("put", Message("TopicA", b"x", keys=big)), ("put", Message("TopicA", b"y", keys="k"))])


def test_unwritable_and_shut_down_stores_refuse_alike() -> None:
    with _pair() as (fast, exact):
        for s in (fast, exact):
            s.commit_log.writeable = False
            s.commit_log.not_writeable_reason = "disk full"
        _run(fast, exact, [("put", Message("TopicA", b"x")), ("batch", [Message("TopicA", b"x")])])


def test_concurrent_producers_get_unique_keys_and_dense_offsets() -> None:
    from rmqlab.codec.message import MessageRecord
    from rmqlab.codec.walk import iter_records

    with _pair() as (fast, _exact):
        n_threads, per = 4, 300
        results: list[PutMessageResult] = []

        def producer(t: int) -> None:
            for i in range(per):
                if i % 10 == 0:
                    batch = [Message("TopicA", b"b" * 100, tags="T", keys=f"t{t}b{i}j{j}", queue_id=t % 2)
                             for j in range(3)]
                    results.append(fast.put_messages(batch))
                else:
                    results.append(fast.put_message(Message("TopicA", b"x" * 200, tags="T", keys=[f"t{t}i{i}"],
                                                            queue_id=t % 2)))

        threads = [threading.Thread(target=producer, args=(t,)) for t in range(n_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert all(r.ok for r in results)
        host = fast.commit_log.store_host
        for r in results:  # single puts' msgIds come from a cache shared by the producers
            if "," not in r.msg_id:
                assert r.msg_id == create_offset_msg_id(host[0], host[1], r.wrote_offset)
        assert max(r.wrote_offset for r in results) > 4 * 65536  # the cache moved on a few times
        records = [rec for name, buf in _files(fast).items()
                   for _off, rec in iter_records(buf, base_offset=int(name), check_crc=True)
                   if isinstance(rec, MessageRecord)]
        total = n_threads * (per // 10 * 3 + per - per // 10)
        assert len(records) == total
        assert len({r.uniq_key for r in records}) == total
        for q in (0, 1):
            offsets = [r.queue_offset for r in records if r.queue_id == q]
            assert offsets == list(range(len(offsets)))
        assert fast.wait_dispatched()
        assert fast.get_max_offset_in_queue("TopicA", 0) + fast.get_max_offset_in_queue("TopicA", 1) == total


def test_single_puts_uniq_key_counter_wraps_like_new_uniq_key() -> None:
    """The single put's UNIQ_KEY counter (a table index) wraps at 16 bits as ``new_uniq_key`` does,
    and both paths draw the same keys from the same counter."""
    import itertools

    with _pair() as (fast, exact):
        for s in (fast, exact):
            s.commit_log._uniq_counter = itertools.count(0xFFF0)
        keys = []
        for i in range(30):  # one get_message's worth (32 at most), past the wrap at 16
            for s in (fast, exact):
                assert s.put_message(Message("TopicA", b"x", tags="T", keys=[f"k{i}"])).ok
        for s in (fast, exact):
            s.step()
            got = s.get_message("g", "TopicA", 0, 0, 30)
            keys.append([m.decode().uniq_key for m in got.messages])
            got.release()
        assert keys[0] == keys[1]
        assert len(keys[0]) == 30
        assert [k[-4:] for k in keys[0]] == [f"{(0xFFF0 + i) & 0xFFFF:04X}" for i in range(30)]


def test_uniq_keys_follow_message_client_id_setter() -> None:
    """new_uniq_key == UniqKeyGenerator.create for the same prefix and counter, across months."""
    cl = CommitLog.__new__(CommitLog)
    cl._uniq = UniqKeyGenerator("192.168.0.1", 12345, 0x1B6D3586)
    ref = UniqKeyGenerator("192.168.0.1", 12345, 0x1B6D3586)
    cl._tz = ManualClock().tz()
    cl._uniq_prefix = (-1, "")
    import itertools

    cl._uniq_counter = itertools.count()
    for now in [_START, _START, _START + 1, _START + 1000, _START + 5, *range(_START, _START + 70_000, 7)]:
        assert cl.new_uniq_key(now) == ref.create(now, cl._tz)


def test_head_struct_and_topic_field_match_encode_message_parts() -> None:
    for born, store in [(b"\x0a\x00\x00\x07", b"\x7f\x00\x00\x01"), (bytes(16), b"\x01\x02\x03\x04"),
                        (b"\x01\x02\x03\x04", bytes(range(16)))]:
        head = head_struct(len(born), len(store))
        _v, magic, field = topic_field("TopicA", 1)
        sys_flag = (flags.BORNHOST_V6_FLAG if len(born) == 16 else 0) | (
            flags.STOREHOSTADDRESS_V6_FLAG if len(store) == 16 else 0)
        total = head.size + 3 + len(field) + 2 + 3
        packed = head.pack(total, magic, 5, 1, 2, 3, 4, sys_flag, 6, born, 7, 8, store, 9, 10, 11, 3)
        ref = encode_message_parts("TopicA", b"abc", 1, 2, 3, 4, 0, 6, born, 7, 8, store, 9, 10, 11, b"a\x01b", 5, 1)
        assert ref == packed + b"abc" + field + b"\x00\x03a\x01b"
        assert decode_message(ref).topic == "TopicA"
    with pytest.raises(ValueError, match="ip lengths"):
        head_struct(5, 4)


def test_put_ok_equals_the_dataclass_results() -> None:
    import dataclasses

    fast = put_ok(10, 20, "ID1,ID2", 30, 40, 2)
    ref = PutMessageResult(PutMessageStatus.PUT_OK, AppendMessageResult(AppendMessageStatus.PUT_OK, 10, 20, "ID1,ID2",
                                                                         30, 40, 2))
    assert type(fast) is PutMessageResult
    assert type(fast.append_result) is AppendMessageResult
    assert fast == ref
    assert repr(fast) == repr(ref)
    assert hash(fast.append_result) == hash(ref.append_result)
    assert (fast.ok, fast.msg_id, fast.wrote_offset, fast.queue_offset) == (True, "ID1,ID2", 10, 40)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.reason = "x"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.append_result.msg_num = 3  # type: ignore[union-attr,misc]


# ------------------------------------------------------------------------------------- stats
def test_stats_fold_fast_puts_exactly() -> None:
    st_ = StoreStatsService(ManualClock())
    import time

    now = time.perf_counter_ns()
    for i in range(100):
        st_.record_put(True, 100 + i, 1, now)
    st_.record_put(True, 3200, 32, now)
    st_.record_put(False, 0, 1, now)
    st_.record_put(True, 50, 1, now - 20_000_000_000)  # 20 s: slow bucket, under the lock
    snap = st_.snapshot()
    assert snap.put_message_times_total == 100 + 32 + 1
    assert snap.put_message_size_total == sum(range(100, 200)) + 3200 + 50
    assert snap.put_message_failed_times == 1
    # each put's whole ms since ``now`` (RocketMQ's value): 0 unless this loop was preempted
    assert snap.put_latency_distribution["<=0ms"] + snap.put_latency_distribution["0~10ms"] == 102
    assert snap.put_latency_distribution["10s~"] == 1
    assert sum(snap.put_latency_distribution.values()) == 103
    assert snap.put_latency_max_ms >= 20_000
    assert st_.put_times == 133
    assert st_.put_size == snap.put_message_size_total


def test_stats_lose_nothing_under_concurrent_puts_and_reads() -> None:
    import time

    st_ = StoreStatsService(ManualClock())
    n, per = 4, 20_000

    def putter() -> None:
        for _ in range(per):
            st_.record_put(True, 3, 1, time.perf_counter_ns())

    threads = [threading.Thread(target=putter) for _ in range(n)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        st_.run_once()
        st_.snapshot()
    for t in threads:
        t.join()
    snap = st_.snapshot()
    assert snap.put_message_times_total == n * per
    assert snap.put_message_size_total == 3 * n * per
    assert sum(snap.put_latency_distribution.values()) == n * per  # a preempted put may be > 10 ms


def test_latency_buckets_are_rocketmqs(monkeypatch: pytest.MonkeyPatch) -> None:
    """putMessageDistributeTime: the put's whole milliseconds, <= 0, < 10, < 50, ..., < 10000, more."""
    import rmqlab.store.store_stats as stats_mod
    from rmqlab.clock import ManualClock
    from rmqlab.store.store_stats import StoreStatsService

    now = 10**15
    monkeypatch.setattr(stats_mod, "_perf_ns", lambda: now)
    st_ = StoreStatsService(ManualClock())
    cases = {0: "<=0ms", 0.999: "<=0ms", 1: "0~10ms", 9.999: "0~10ms", 10: "10~50ms", 49.5: "10~50ms",
             50: "50~100ms", 199: "100~200ms", 500: "500ms~1s", 1999: "1~2s", 4000: "4~5s", 9999.9: "5~10s",
             10000: "10s~"}
    for ms, _label in cases.items():
        st_.record_put(True, 1, 1, now - int(ms * 1_000_000))
    want = {label: 0 for label in stats_mod.BUCKET_LABELS}
    for label in cases.values():
        want[label] += 1
    assert st_.snapshot().put_latency_distribution == want
