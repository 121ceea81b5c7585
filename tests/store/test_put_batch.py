"""``put_messages(MessageBatch)`` writes exactly what ``put_messages(list)`` writes, and both
write RocketMQ 4.9.8 / 5.3.3's ``MessageExtBatch`` layout.

Two stores get the same batches, one as producer-encoded :class:`MessageBatch` objects (by a
producer of the store's version), the other as lists of the same messages with the same
UNIQ_KEYs (and, 5.3.3, the same batch UNIQ_KEY): every result, dispatch hint, queue offset,
event, CommitLog byte, ConsumeQueue byte and index byte must agree, for batches that roll
files, do not fit any file, are too big, are refused (bad topic or queue, transactions) or
empty. Then the layout itself: hand-written expected properties bytes, wire bytes kept as
sent, and what recovery, dispatch and ``query_message`` make of a batch UNIQ_KEY.
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
from rmqlab.codec.java_hash import java_hash
from rmqlab.codec.properties import decode_properties
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


@contextmanager
def _batch_uniq(store: MessageStore, batch: MessageBatch) -> Iterator[None]:
    """The list store draws the batch's own UNIQ_KEY (5.x) as the producer of ``batch`` did."""
    own = batch.properties.get(flags.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    cl = store.commit_log
    if own is not None:
        cl.new_uniq_key = lambda now: own  # type: ignore[method-assign]
    try:
        yield
    finally:
        cl.__dict__.pop("new_uniq_key", None)


def _assert_hints_are_the_parse(store: MessageStore) -> None:
    """Every dispatch hint is what parsing the written record gives (later names win)."""
    cl = store.commit_log
    for off, (size, q, ts, _ts_pos, d) in list(cl.pending_hints().items()):
        rec = cl.look_message(off)
        if rec is None and store.config.transient_store_pool_enable:
            continue  # not committed to the file yet: unreadable
        assert rec is not None
        assert (rec.store_size, rec.queue_offset, rec.store_timestamp) == (size, q, ts)
        parsed = decode_properties(rec.properties_raw)
        tags = parsed.get(flags.PROPERTY_TAGS)
        assert d == (rec.topic, rec.queue_id, java_hash(tags) if tags else 0, parsed.get(flags.PROPERTY_KEYS),
                     parsed.get(flags.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX), rec.sys_flag, 0, rec.properties_raw)


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
            batch = MessageBatch.from_messages(msgs, uniq, topic=topic, client_version=a.config.rocketmq_version)
            ra = a.put_messages(batch)
            with _batch_uniq(b, batch):
                rb = b.put_messages(_as_list(batch, msgs))
        assert _result_key(ra) == _result_key(rb), (op, arg)
        assert a.commit_log.pending_hints() == b.commit_log.pending_hints()
        _assert_hints_are_the_parse(a)
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
    """The bench workload's shape: a MessageBatch is never decoded into messages; enough
    batches to fill several 64 KiB files (blank records, rolls mid-batch)."""
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
            raise AssertionError("the MessageBatch was decoded into messages")

        monkeypatch.setattr(a.commit_log, "batch_messages", refuse)
        results = _run(a, b, ops)
        assert all(r.status is PutMessageStatus.PUT_OK for r in results)
        assert len(_files(a, "commitlog")) >= 5


def test_mixed_layouts_are_not_decoded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tags, keys and own UNIQ_KEYs changing inside a batch: the wire bytes are used as they are."""
    ops = []
    for j in range(12):
        msgs = [Message("TopicA", b"x" * (i + j), tags=("TagA", "TagB", None)[(i + j) % 3],
                        keys=[f"k{i}"] if (i * j) % 4 else (), uniq_key=None if i % 5 else f"OWN{j}-{i}")
                for i in range(10)]  # fmt: skip
        ops.append(("batch", ("TopicA", msgs)))
    with _pair() as (a, b):
        monkeypatch.setattr(a.commit_log, "batch_messages", lambda *_a: pytest.fail("decoded"))
        _run(a, b, ops)


def test_odd_batches_and_refusals() -> None:
    """User properties, SCHEDULE_TOPIC, a transaction flag, an invalid topic, an empty batch,
    a too-big batch: the list path's answers and records."""
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
    """``fast_path = False`` (no effect on batches), and a batch parsed from the wire bytes and
    header properties (as a broker receives them) rather than encoded here: same records."""
    msgs = [Message("TopicA", bytes([i]) * 50, tags="TagA", keys=[f"k{i}"], uniq_key=f"U{i}") for i in range(5)]
    with _pair() as (a, b):
        a.commit_log.fast_path = False
        _run(a, b, [("batch", ("TopicA", msgs))])
    with _pair() as (a, b):
        sent = MessageBatch.from_messages(msgs, client_version="4.9.8")
        received = MessageBatch.from_body("TopicA", 0, sent.body, properties={"WAIT": "true"})
        assert _result_key(a.put_messages(received)) == _result_key(b.put_messages(msgs))
        assert _files(a, "commitlog") == _files(b, "commitlog")


def test_memory_topic_batch() -> None:
    with _pair(memory_topic_enable=True) as (a, b):
        for s in (a, b):
            s.create_topic("MemTopic", 1, memory=True)
        msgs = [Message("MemTopic", b"m%d" % i, tags="T", uniq_key=f"U{i}") for i in range(4)]
        ra = a.put_messages(MessageBatch.from_messages(msgs, client_version="4.9.8"))
        rb = b.put_messages(msgs)
        assert ra.status is rb.status is PutMessageStatus.PUT_OK
        assert a.get_max_offset_in_queue("MemTopic", 0) == b.get_max_offset_in_queue("MemTopic", 0) == 4
        got = [s.get_message("g", "MemTopic", 0, 0, 8) for s in (a, b)]
        raws = [[m.properties_raw for m in g.messages] for g in got]
        assert raws[0] == raws[1]
        assert raws[0][0] == b"UNIQ_KEY\x01U0\x02WAIT\x01true\x02TAGS\x01T\x02CLUSTER\x01DefaultCluster\x02WAIT\x01true"


def _wire(*messages: tuple[int, bytes, bytes]) -> bytes:
    """A batch body written by hand: (flag, body, raw properties) per message."""
    from rmqlab.codec.batch import encode_message

    return b"".join(encode_message(f, body, props) for f, body, props in messages)


def _records(store: MessageStore, first: int, n: int) -> list[Any]:
    out, off = [], first
    for _ in range(n):
        rec = store.commit_log.look_message(off)
        assert rec is not None
        out.append(rec)
        off += rec.store_size
    return out


_CL = b"CLUSTER\x01DefaultCluster"
# The batch part of each record, written out from the Java rules (HashMap buckets: at 16,
# p 0, CLUSTER 12, UNIQ_KEY 12, WAIT 13; at 128, UNIQ_KEY 28, CLUSTER 28, WAIT 93, p 112).
_EXPECTED = {
    "4.9.8": {  # HashMap(), no trailing 0x02; WAIT stays (only single messages lose it)
        "list": [b"KEYS\x01k1\x02UNIQ_KEY\x01U1\x02WAIT\x01true\x02TAGS\x01TagA\x02" + _CL + b"\x02WAIT\x01true",
                 b"UNIQ_KEY\x01U2\x02WAIT\x01true\x02" + _CL + b"\x02WAIT\x01true"],
        "wire": [b"a\x01b\x02p\x01q\x02" + _CL + b"\x02WAIT\x01false",
                 b"p\x01q\x02" + _CL + b"\x02WAIT\x01false",
                 b"UNIQ_KEY\x01W\x02p\x01q\x02" + _CL + b"\x02WAIT\x01false"],
    },
    "5.3.3": {  # HashMap(128), every pair ends with 0x02; the producer's batch UNIQ_KEY B1
        "list": [b"KEYS\x01k1\x02UNIQ_KEY\x01U1\x02WAIT\x01true\x02TAGS\x01TagA\x02UNIQ_KEY\x01B1\x02" + _CL
                 + b"\x02WAIT\x01true\x02",
                 b"UNIQ_KEY\x01U2\x02WAIT\x01true\x02UNIQ_KEY\x01B1\x02" + _CL + b"\x02WAIT\x01true\x02"],
        "wire": [b"a\x01b\x02" + _CL + b"\x02WAIT\x01false\x02p\x01q\x02",
                 _CL + b"\x02WAIT\x01false\x02p\x01q\x02",
                 b"UNIQ_KEY\x01W\x02" + _CL + b"\x02WAIT\x01false\x02p\x01q\x02"],
    },
}


@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
def test_record_properties_are_inner_then_batch(version: str) -> None:
    """The spec's rule on a concrete batch, expected bytes written out by hand: each record's
    properties are the inner message's client string, a 0x02 if it does not end with one, then
    the broker's string of the batch's own map (what the producer sent plus CLUSTER)."""
    with _pair(version) as (a, b):
        a.commit_log.new_uniq_key = lambda now: "B1"  # type: ignore[method-assign]
        msgs = [Message("TopicA", b"a", tags="TagA", keys=["k1"], uniq_key="U1"),
                Message("TopicA", b"b", uniq_key="U2")]  # fmt: skip
        r = a.put_messages(msgs)
        assert r.status is PutMessageStatus.PUT_OK
        got = [rec.properties_raw for rec in _records(a, r.wrote_offset, 2)]
        assert got == _EXPECTED[version]["list"]
        # received bytes: no trailing separator, none at all, ending with one: kept as they are
        body = _wire((0, b"x", b"a\x01b"), (1, b"y", b""), (2, b"z", b"UNIQ_KEY\x01W\x02"))
        batch = MessageBatch.from_body("TopicA", 1, body, properties={"WAIT": "false", "p": "q"})
        r = b.put_messages(batch)
        assert r.status is PutMessageStatus.PUT_OK
        recs = _records(b, r.wrote_offset, 3)
        assert [rec.properties_raw for rec in recs] == _EXPECTED[version]["wire"]
        assert [(rec.flag, rec.body, rec.queue_offset) for rec in recs] == [(0, b"x", 0), (1, b"y", 1), (2, b"z", 2)]
        _assert_hints_are_the_parse(a)
        _assert_hints_are_the_parse(b)


_ODD_PROPERTIES = [
    b"UNIQ_KEY\x01U1\x02WAIT\x01true",  # no trailing 0x02
    b"UNIQ_KEY\x01U1\x02UNIQ_KEY\x01U2\x02WAIT\x01true\x02",  # a name twice
    b"UNIQ_KEY\x01U1\x02WAIT\x01maybe\x02",  # WAIT neither true nor false
    b"WAIT\x01true\x02",  # no UNIQ_KEY: none is made up
    b"KEYS\x01\x02UNIQ_KEY\x01U1\x02WAIT\x01true\x02",  # an empty value (dropped by the parse)
    b"KEYS\x01a\x01b\x02UNIQ_KEY\x01U1\x02WAIT\x01true\x02",  # 0x01 inside a value
    b"DELAY\x013\x02UNIQ_KEY\x01U1\x02WAIT\x01true\x02",  # a delay level
    b"UNIQ_KEY\x01U1\x02WAIT\x01true\x02\x01\x01",  # junk after the last pair
    b"",  # no properties at all
    b"UNIQ_KEY\x01\xff\xfe\x02WAIT\x01true\x02",  # not UTF-8
]
_PLAIN = b"KEYS\x01k1\x02UNIQ_KEY\x01U0\x02WAIT\x01true\x02TAGS\x01TagA\x02"


@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
@pytest.mark.parametrize("odd", _ODD_PROPERTIES)
def test_hand_written_wire_batches(odd: bytes, version: str) -> None:
    """Bytes no rmqlab producer writes, among plain messages: stored as received (plus the
    batch string), hints as parsed, and the memory store's route (``batch_messages``, a list)
    writes the same records as the MessageBatch itself."""
    with _pair(version) as (a, b):
        own = {"WAIT": "true", "UNIQ_KEY": "BATCH"} if version == "5.3.3" else {"WAIT": "true"}
        empty = MessageBatch.from_body("TopicA", 0, _wire((0, b"q", b"")), properties=own)
        tail, _ = a.put_messages(empty), b.put_messages(empty)  # empty inner properties: the batch string alone
        batch_props = a.look_message_by_offset(tail.wrote_offset).properties_raw  # type: ignore[union-attr]
        assert batch_props.startswith((b"CLUSTER", b"UNIQ_KEY\x01BATCH"))
        for i, body in enumerate([_wire((0, b"p", _PLAIN), (1, b"odd", odd), (2, b"q", _PLAIN)),
                                  _wire((3, b"odd", odd))]):
            batch = MessageBatch.from_body("TopicA", 0, body, born_host=("10.0.0.7", 4242), born_timestamp=5 + i,
                                           properties=own)  # fmt: skip
            ra = a.put_messages(batch)
            rb = b.put_messages(batch) if i else b.put_messages(b.commit_log.batch_messages(batch))
            assert ra.status is PutMessageStatus.PUT_OK
            assert _result_key(ra) == _result_key(rb)
            assert a.commit_log.pending_hints() == b.commit_log.pending_hints()
            recs = _records(a, ra.wrote_offset, len(batch))
            inner = [body[ps] for ps in batch.properties_slices]
            sep = [b"\x02" if p and p[-1] != 2 else b"" for p in inner]
            assert [r.properties_raw for r in recs] == [p + s + batch_props for p, s in zip(inner, sep, strict=True)]
            _assert_hints_are_the_parse(a)
        assert _files(a, "commitlog") == _files(b, "commitlog")


def test_cluster_name_with_separators() -> None:
    """A cluster name holding separators: same records either way, parsed as Java parses them."""
    msgs = [Message("TopicA", b"x", tags="T", keys=[f"k{i}"], uniq_key=f"U{i}") for i in range(4)]
    with _pair(broker_cluster_name="\x01odd\x01") as (a, b):
        _run(a, b, [("batch", ("TopicA", msgs)), ("batch", ("TopicA", msgs))])


@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
@pytest.mark.parametrize("crash", [False, True])
def test_batch_uniq_key_after_recovery_and_query(version: str, crash: bool, tmp_path: Path) -> None:
    """Recovery, dispatch and ``query_message`` read the records as Java does: KEYS and TAGS are
    the inner message's; UNIQ_KEY is the inner one in 4.9.8, but in 5.3.3 the producer's batch
    UNIQ_KEY, appended after it, wins the parse: the index holds it for every record of the
    batch and the inner UNIQ_KEYs find nothing."""
    root = str(tmp_path / "s")
    config = MessageStoreConfig.small(root, rocketmq_version=version)
    store = MessageStore.open(root, config, clock=ManualClock(_START), threaded=False)
    msgs = [Message("TopicA", b"m%d" % i, tags="TagA", keys=[f"k{i}", "shared"], uniq_key=f"INNER{i}")
            for i in range(3)]  # fmt: skip
    batch = MessageBatch.from_messages(msgs, lambda: "BATCHKEY", client_version=version)
    r1 = store.put_messages(batch)
    r2 = store.put_messages([Message("TopicA", b"l", tags="TagB", keys=["k9"], uniq_key="INNER9")])
    assert r1.status is r2.status is PutMessageStatus.PUT_OK
    if crash:  # abnormal recovery rebuilds queue and index from the commit log
        store.flush()
        store.abandon()
    else:
        assert store.wait_dispatched()
        store.shutdown()
    store = MessageStore.open(root, config, clock=ManualClock(_START + 10), threaded=False)
    try:
        assert store.wait_dispatched()
        got = store.get_message("g", "TopicA", 0, 0, 10)
        assert [m.body for m in got.messages] == [b"m0", b"m1", b"m2", b"l"]
        assert [m.tags_code for m in got.messages] == [java_hash("TagA")] * 3 + [java_hash("TagB")]
        offsets = [m.commit_log_offset for m in got.messages]
        if version == "5.3.3":
            assert [m.uniq_key for m in got.messages] == ["BATCHKEY"] * 3 + [store.look_message_by_offset(
                offsets[3]).uniq_key]  # fmt: skip
            q = store.query_message("TopicA", "BATCHKEY")
            assert [m.commit_log_offset for m in q.messages] == offsets[:3]
            assert store.query_message("TopicA", "INNER1").messages == []
        else:
            assert [m.uniq_key for m in got.messages] == ["INNER0", "INNER1", "INNER2", "INNER9"]
            for i in range(3):
                q = store.query_message("TopicA", f"INNER{i}")
                assert [m.commit_log_offset for m in q.messages] == [offsets[i]]
            assert store.query_message("TopicA", "BATCHKEY").phy_offsets == []
        assert [m.commit_log_offset for m in store.query_message("TopicA", "shared").messages] == offsets[:3]
        assert [m.commit_log_offset for m in store.query_message("TopicA", "k1").messages] == [offsets[1]]
    finally:
        store.shutdown()


@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
def test_list_templates_write_what_the_general_encoder_writes(version: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The list path's per-shape templates against the general encoder (``_batch_rows``, the
    producer's map and string per message) on a twin store: messages without UNIQ_KEY (drawn by
    the store), tags, keys, delay, WAIT, hosts and flags varying inside a batch, batches that
    fall back half-way (user properties, separators) after keys were drawn, refusals: same
    results, UNIQ_KEY draws, hints (== the parse) and bytes, and the templates were used."""
    host = "[fd00::7]:10911" if version == "5.3.3" else "192.168.0.10:10911"
    fast = []
    with _pair(version, host) as (a, b):
        cl = a.commit_log
        encode = cl._list_rows_encode
        monkeypatch.setattr(cl, "_list_rows_encode", lambda *args: fast.append(1) or encode(*args))
        monkeypatch.setattr(b.commit_log, "_list_rows", b.commit_log._batch_rows)
        big = bytes(_MAX_BODY // 3)
        batches = []
        for j in range(30):
            msgs = [Message("TopicA", bytes([i]) * (i * 7 + j), tags=("TagA", None, "", "标签")[(i + j) % 4],
                            keys=(["k", f"x{i}"], (), f"s{j}", ["", "e"])[(i * j) % 4],
                            delay_time_level=2 if (i + j) % 7 == 0 else 0, wait_store_msg_ok=j % 3 != 1,
                            born_host=(("10.0.0.7", 4242), ("::1", 9))[(i // 3) % 2], sys_flag=(0, 1)[i % 2],
                            uniq_key=f"OWN{j}-{i}" if (i + j) % 5 == 0 else None, flag=i)
                    for i in range(j % 6 + 1)]  # fmt: skip
            if j % 10 == 4:
                msgs.append(Message("TopicA", b"p", properties={"p": "v"}))
            if j % 10 == 7:
                msgs.append(Message("TopicA", b"sep", keys=["a\x01b"]))
            if j == 9:
                msgs += [Message("TopicA", big), Message("TopicA", big), Message("TopicA", big)]
            batches.append(msgs)
        for j, msgs in enumerate(batches):
            if j == 15:
                for s in (a, b):
                    s.clock.advance(1)  # type: ignore[attr-defined]  # a new month: a new UNIQ_KEY prefix
            ra, rb = a.put_messages(msgs), b.put_messages(msgs)
            assert _result_key(ra) == _result_key(rb)
            assert cl.pending_hints() == b.commit_log.pending_hints()
            assert ra.status is (PutMessageStatus.MESSAGE_ILLEGAL if j == 9 else PutMessageStatus.PUT_OK)
        _assert_hints_are_the_parse(a)
        assert _files(a, "commitlog") == _files(b, "commitlog")
        assert next(cl._uniq_counter) == next(b.commit_log._uniq_counter)
    assert len(fast) >= 20
