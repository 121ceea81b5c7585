"""``put_messages(MessageBatch)`` writes exactly what ``put_messages(list)`` writes.

Two stores get the same batches, one as producer-encoded :class:`MessageBatch` objects, the
other as lists of the same messages with the same UNIQ_KEYs: every result, dispatch hint, queue
offset, event, CommitLog byte, ConsumeQueue byte and index byte must agree, for batches that
roll files, do not fit any file, are too big, are refused (bad topic or queue, transactions) or
empty, and mix layouts the MessageBatch path matches in runs or hands to the list path.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import tempfile
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
from rmqlab.codec.batch import MessageBatch
from rmqlab.events import Appended, EventRecorder, Rolled
from rmqlab.store.message import Message
from rmqlab.store.results import PutMessageResult, PutMessageStatus

_START = 1_701_388_799_000  # a month boundary one clock advance away (UNIQ_KEY prefix)
_MAX_BODY = 40_000  # max_message_size: some batches are too big, some records fit no 64 KiB file


def _uniq_source() -> Any:
    counter = itertools.count()
    return lambda: f"C0A80001000055AA{next(counter) & 0xFFFFFFFF:08X}ABCD"


@contextmanager
def _pair(version: str = "4.9.8", store_host: str = "192.168.0.10:10911", **changes: Any) -> Iterator[tuple]:
    with tempfile.TemporaryDirectory() as tmp:
        stores = []
        for name in ("batch", "list"):
            root = os.path.join(tmp, name)
            config = MessageStoreConfig.small(root, rocketmq_version=version, store_host=store_host,
                                              max_message_size=_MAX_BODY, **changes)  # fmt: skip
            stores.append(MessageStore.open(root, config, clock=ManualClock(_START), threaded=False))
        stores[1].commit_log._uniq.fix_string = stores[0].commit_log._uniq.fix_string  # same "process" prefix
        try:
            yield tuple(stores)
        finally:
            for s in stores:
                s.shutdown()


def _result_key(r: PutMessageResult) -> tuple:
    a = r.append_result
    return (r.status, r.reason, None if a is None else (a.status, a.wrote_offset, a.wrote_bytes, a.msg_id,
                                                        a.store_timestamp, a.logics_offset, a.msg_num))


def _files(store: MessageStore, sub: str) -> dict[str, bytes]:
    root = Path(store.config.store_path_root_dir) / sub
    if not root.exists():
        return {}
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _as_list(batch: MessageBatch, msgs: list[Message]) -> list[Message]:
    """The messages as the list path gets them: with the UNIQ_KEY the producer gave each."""
    return [m if m.uniq_key else dataclasses.replace(m, uniq_key=u) for m, u in zip(msgs, batch.uniq_keys, strict=True)]


def _run(a: MessageStore, b: MessageStore, ops: list[tuple[str, Any]]) -> list[PutMessageResult]:
    """Apply ``ops`` to both stores (``a`` gets MessageBatch objects) and compare everything."""
    events = [EventRecorder(s.bus) for s in (a, b)]
    uniq = _uniq_source()
    results = []
    for op, arg in ops:
        if op == "advance":
            for s in (a, b):
                s.clock.advance(arg)  # type: ignore[attr-defined]
            continue
        if op == "single":
            ra, rb = a.put_message(arg), b.put_message(arg)
        else:
            topic, msgs = arg
            batch = MessageBatch.from_messages(msgs, uniq, topic=topic)
            ra, rb = a.put_messages(batch), b.put_messages(_as_list(batch, msgs))
        assert _result_key(ra) == _result_key(rb), (op, arg)
        assert a.commit_log.dispatch_hints == b.commit_log.dispatch_hints
        results.append(ra)
    assert a.commit_log.topic_queue_table == b.commit_log.topic_queue_table
    assert _files(a, "commitlog") == _files(b, "commitlog")
    kinds = (Appended, Rolled)
    ea, eb = ([e for e in r.events if isinstance(e, kinds)] for r in events)
    assert ea == eb
    for s in (a, b):
        s.flush()
        assert s.wait_dispatched()
    assert _files(a, "consumequeue") == _files(b, "consumequeue")
    assert _files(a, "index") == _files(b, "index")
    return results


_tags = st.sampled_from([None, "", "TagA", "TagB", "标签", "a\x01b", "a b"])
_key = st.sampled_from(["k1", "k2", "", "ключ", "a\x01", "k 3", "UNIQ_KEY", "key-with-a-longer-value-0123456789"])
_keys = st.one_of(st.lists(_key, max_size=3), _key)
# Property names and values the wire format carries unchanged (no 0x02 in a value, none empty):
_props = st.sampled_from([None, None, None, {}, {"p": "v"}, {"UNIQ_KEY": "FROMPROPS"}, {"KEYS": "over"},
                          {"TAGS": "T2", "颜色": "红"}])  # fmt: skip
_uniq = st.sampled_from([None, None, None, None, "C0A80001FIXED0001", "bad\x01uniq"])
_bodies = st.one_of(
    st.binary(max_size=200),
    st.binary(max_size=200),
    st.integers(0, 45_000).map(lambda n: bytes(range(256)) * (n // 256) + bytes(n % 256)),
)


@st.composite
def _batch(draw: Any) -> tuple[str, list[Message]]:
    """One batch: header fields shared, per-message fields drawn; sometimes refused."""
    topic = draw(st.sampled_from(["TopicA", "TopicA", "TopicB", "bad topic", flags.SCHEDULE_TOPIC]))
    header = dict(
        queue_id=draw(st.sampled_from([0, 0, 1, -1])),
        born_host=draw(st.sampled_from([("10.0.0.7", 4242), "10.0.0.8:1", ("::1", 9)])),
        born_timestamp=draw(st.sampled_from([None, None, 1_600_000_000_123])),
        sys_flag=draw(st.sampled_from([0, 0, 0, 1, 2, flags.TRANSACTION_PREPARED_TYPE, flags.TRANSACTION_COMMIT_TYPE])),
        reconsume_times=draw(st.sampled_from([0, 0, 3])),
        wait_store_msg_ok=draw(st.sampled_from([True, True, False])),
    )
    size = draw(st.sampled_from([0, 1, 1, 3, 8, 8, 20]))
    uniform = draw(st.booleans())  # one layout (the findall path) or anything
    tags, keys_kind = draw(_tags), draw(st.booleans())
    msgs = []
    for i in range(size):
        if uniform:
            msgs.append(Message(topic, draw(_bodies), tags=tags, keys=[f"k{i}", f"g{i // 4}"] if keys_kind else (),
                                flag=i, **header))  # fmt: skip
        else:
            msgs.append(Message(topic, draw(_bodies), tags=draw(_tags), keys=draw(_keys), properties=draw(_props),
                                flag=draw(st.sampled_from([0, 7, -1])), uniq_key=draw(_uniq), **header))  # fmt: skip
    return topic, msgs


_op = st.one_of(
    st.tuples(st.just("batch"), _batch()),
    st.tuples(st.just("batch"), _batch()),
    st.tuples(st.just("batch"), _batch()),
    st.tuples(st.just("single"), st.builds(Message, st.just("TopicA"), st.binary(max_size=3000), tags=_tags,
                                           keys=_keys)),
    st.tuples(st.just("advance"), st.sampled_from([1, 1000, 86_400_000])),
)


@pytest.mark.parametrize(("version", "host"), [("4.9.8", "192.168.0.10:10911"), ("5.3.3", "[fd00::7]:10911")])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(ops=st.lists(_op, min_size=1, max_size=25))
def test_message_batch_writes_what_the_list_writes(version: str, host: str, ops: list[tuple[str, Any]]) -> None:
    with _pair(version, host) as (a, b):
        _run(a, b, ops)


@pytest.mark.parametrize("changes", [{}, {"transient_store_pool_enable": True}, {"flush_disk_type": "SYNC_FLUSH"}])
def test_uniform_batches_take_the_fast_path_and_roll_files(monkeypatch: pytest.MonkeyPatch,
                                                           changes: dict[str, Any]) -> None:  # fmt: skip
    """The bench workload's shape: never decoded into messages, never through the list path;
    enough batches to fill several 64 KiB files (blank records, rolls mid-batch)."""
    body = bytes(range(256)) * 4
    ops: list[tuple[str, Any]] = []
    for j in range(60):
        ops.append(("batch", ("TopicA", [Message("TopicA", body[: 700 + (i * 37) % 300], tags="TagA",
                                                 keys=[f"key{j}-{i}", f"grp{i // 4}"], born_host=("10.0.0.7", 4242))
                                         for i in range(j % 9 + 1)])))  # fmt: skip
        if j % 10 == 0:
            ops.append(("advance", 1))
    with _pair(**changes) as (a, b):
        def refuse(*_a: Any) -> Any:
            raise AssertionError("the MessageBatch left its fast path")

        monkeypatch.setattr(a.commit_log, "batch_messages", refuse)
        results = _run(a, b, ops)
        assert all(r.status is PutMessageStatus.PUT_OK for r in results)
        assert len(_files(a, "commitlog")) >= 5


def test_mixed_layouts_are_matched_in_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tags and keys changing inside a batch: templates per layout, still no list path."""
    ops = []
    for j in range(12):
        msgs = [Message("TopicA", b"x" * (i + j), tags=("TagA", "TagB", None)[(i + j) % 3],
                        keys=[f"k{i}"] if (i * j) % 4 else (), uniq_key=None if i % 5 else f"OWN{j}-{i}")
                for i in range(10)]  # fmt: skip
        ops.append(("batch", ("TopicA", msgs)))
    with _pair() as (a, b):
        monkeypatch.setattr(a.commit_log, "batch_messages", lambda *_a: pytest.fail("list path taken"))
        _run(a, b, ops)


def test_batches_the_fast_path_hands_over() -> None:
    """User properties, SCHEDULE_TOPIC, a transaction flag, an invalid topic, an empty batch,
    a too-big batch: decoded and put as a list, with the list path's answers."""
    big = bytes(_MAX_BODY // 2)
    ops = [
        ("batch", ("TopicA", [Message("TopicA", b"a", properties={"p": "v"}), Message("TopicA", b"b")])),
        ("batch", (flags.SCHEDULE_TOPIC, [Message(flags.SCHEDULE_TOPIC, b"s")])),
        ("batch", ("TopicA", [Message("TopicA", b"t", sys_flag=flags.TRANSACTION_PREPARED_TYPE)])),
        ("batch", ("bad topic", [Message("bad topic", b"x")])),
        ("batch", ("TopicA", [])),
        ("batch", ("TopicA", [Message("TopicA", big), Message("TopicA", big)])),
        ("batch", ("TopicA", [Message("TopicA", b"ok", tags="T")])),
    ]
    with _pair() as (a, b):
        statuses = [r.status for r in _run(a, b, ops)]
    ok, illegal = PutMessageStatus.PUT_OK, PutMessageStatus.MESSAGE_ILLEGAL
    assert statuses == [ok, ok, illegal, illegal, illegal, illegal, ok]


def test_fast_path_off_and_received_bytes() -> None:
    """``fast_path = False`` (every batch through the list path), and a batch parsed from the
    wire bytes (as a broker receives it) rather than encoded here: same records."""
    msgs = [Message("TopicA", bytes([i]) * 50, tags="TagA", keys=[f"k{i}"], uniq_key=f"U{i}") for i in range(5)]
    with _pair() as (a, b):
        a.commit_log.fast_path = False
        _run(a, b, [("batch", ("TopicA", msgs))])
    with _pair() as (a, b):
        wire = MessageBatch.from_messages(msgs).body
        received = MessageBatch.from_body("TopicA", 0, wire)
        assert _result_key(a.put_messages(received)) == _result_key(b.put_messages(msgs))
        assert _files(a, "commitlog") == _files(b, "commitlog")


def test_memory_topic_batch() -> None:
    with _pair(memory_topic_enable=True) as (a, b):
        for s in (a, b):
            s.create_topic("MemTopic", 1, memory=True)
        msgs = [Message("MemTopic", b"m%d" % i, tags="T", uniq_key=f"U{i}") for i in range(4)]
        ra = a.put_messages(MessageBatch.from_messages(msgs))
        rb = b.put_messages(msgs)
        assert ra.status is rb.status is PutMessageStatus.PUT_OK
        assert a.get_max_offset_in_queue("MemTopic", 0) == b.get_max_offset_in_queue("MemTopic", 0) == 4


def _wire(*messages: tuple[int, bytes, bytes]) -> bytes:
    """A batch body written by hand: (flag, body, raw properties) per message."""
    from rmqlab.codec.batch import encode_message

    return b"".join(encode_message(f, body, props) for f, body, props in messages)


_ODD_PROPERTIES = [
    b"UNIQ_KEY\x01U1\x02WAIT\x01true",  # no trailing 0x02
    b"UNIQ_KEY\x01U1\x02UNIQ_KEY\x01U2\x02WAIT\x01true\x02",  # a name twice
    b"UNIQ_KEY\x01U1\x02WAIT\x01maybe\x02",  # WAIT neither true nor false
    b"UNIQ_KEY\x01U1\x02",  # no WAIT
    b"WAIT\x01true\x02",  # no UNIQ_KEY: the store draws one
    b"KEYS\x01\x02UNIQ_KEY\x01U1\x02WAIT\x01true\x02",  # an empty value (dropped by the parse)
    b"KEYS\x01a\x01b\x02UNIQ_KEY\x01U1\x02WAIT\x01true\x02",  # 0x01 inside a value
    b"DELAY\x013\x02UNIQ_KEY\x01U1\x02WAIT\x01true\x02",  # a delay level
    b"UNIQ_KEY\x01U1\x02WAIT\x01true\x02\x01\x01",  # the findall separator inside a string
    b"",  # no properties at all
    b"UNIQ_KEY\x01\xff\xfe\x02WAIT\x01true\x02",  # not UTF-8
]
_PLAIN = b"KEYS\x01k1\x02UNIQ_KEY\x01U0\x02WAIT\x01true\x02TAGS\x01TagA\x02"


@pytest.mark.parametrize("odd", _ODD_PROPERTIES)
def test_hand_written_wire_batches(odd: bytes) -> None:
    """Bytes no rmqlab producer writes, among plain messages (so a template is known): the
    MessageBatch path writes what the list path writes for the messages the bytes decode to."""
    with _pair() as (a, b):
        for i, body in enumerate([_wire((0, b"p", _PLAIN), (1, b"odd", odd), (2, b"q", _PLAIN)),
                                  _wire((0, b"p", _PLAIN), (0, b"p2", _PLAIN)), _wire((3, b"odd", odd))]):
            batch = MessageBatch.from_body("TopicA", 0, body, born_host=("10.0.0.7", 4242), born_timestamp=5 + i)
            ra = a.put_messages(batch)
            rb = b.put_messages(b.commit_log.batch_messages(batch))
            assert _result_key(ra) == _result_key(rb)
            assert a.commit_log.dispatch_hints == b.commit_log.dispatch_hints
        assert _files(a, "commitlog") == _files(b, "commitlog")


def test_cluster_name_with_separators_takes_the_list_path() -> None:
    """A broker properties segment holding 0x01 0x01 could not be split back: never templated."""
    msgs = [Message("TopicA", b"x", tags="T", keys=[f"k{i}"], uniq_key=f"U{i}") for i in range(4)]
    with _pair(broker_cluster_name="\x01odd\x01") as (a, b):
        _run(a, b, [("batch", ("TopicA", msgs)), ("batch", ("TopicA", msgs))])
        assert not any(a.commit_log._batch_templates.values())
