"""The column batch paths (``CommitLog._put_list``, ``_put_wire``) against the exact path.

``put_messages`` with ``fast_path`` on takes a uniform list or a :class:`MessageBatch` through
C-level column passes (one ``map`` of head packs, one join, one ``dict.update`` of the hints,
the UNIQ_KEYs and msgIds from one hex string each), falling back to the row paths for anything
else. Twin stores get the same operations, one with ``fast_path = False`` (the reference
encoder, ``_put``): every result, refusal, dispatch hint, UNIQ_KEY draw, event and CommitLog,
ConsumeQueue and index byte must agree, for batches drawn near the column path's edges (keys
with empty tokens, separators or NULs, one message with its own UNIQ_KEY or user properties,
mixed born times, IPv6 hosts, non-ASCII tags, batches that roll files, fit no file or are too
big after the UNIQ_KEYs were drawn, received wire bytes with and without the last 0x02).
"""

from __future__ import annotations

import itertools
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqlab import MessageStore, MessageStoreConfig
from rmqlab.clock import ManualClock
from rmqlab.codec import flags
from rmqlab.codec.batch import MessageBatch, encode_message
from rmqlab.events import Appended, EventRecorder, Rolled
from rmqlab.store.message import Message
from rmqlab.store.results import PutMessageResult, PutMessageStatus

from .test_put_batch import _files, _result_key

_START = 1_701_388_799_000  # a month boundary one clock advance away (UNIQ_KEY prefix)
_MAX_BODY = 70_000  # over the 64 KiB file: some batches fit no file


@contextmanager
def _twins(version: str, store_host: str) -> Iterator[tuple[MessageStore, MessageStore, list[int]]]:
    """(fast store, exact store, calls of the fast store's column writer)."""
    with tempfile.TemporaryDirectory() as tmp:
        stores = []
        for name in ("fast", "exact"):
            root = os.path.join(tmp, name)
            config = MessageStoreConfig.small(root, rocketmq_version=version, store_host=store_host,
                                              max_message_size=_MAX_BODY)  # fmt: skip
            stores.append(MessageStore.open(root, config, clock=ManualClock(_START), threaded=False))
        fast, exact = stores
        exact.commit_log._uniq.fix_string = fast.commit_log._uniq.fix_string
        exact.commit_log.fast_path = False
        calls: list[int] = []
        write = fast.commit_log._write_columns
        fast.commit_log._write_columns = lambda *a: calls.append(1) or write(*a)  # type: ignore[method-assign]
        try:
            yield fast, exact, calls
        finally:
            for s in stores:
                s.shutdown()


def _run(fast: MessageStore, exact: MessageStore, ops: list[tuple[str, Any]]) -> list[PutMessageResult]:
    events = [EventRecorder(s.bus) for s in (fast, exact)]
    results = []
    for op, arg in ops:
        if op == "advance":
            for s in (fast, exact):
                s.clock.advance(arg)  # type: ignore[attr-defined]
            continue
        if op == "wire":
            batch = arg(fast)  # the same MessageBatch object for both
            ra, rb = fast.put_messages(batch), exact.put_messages(batch)
        else:
            ra, rb = fast.put_messages(arg), exact.put_messages(arg)
        assert _result_key(ra) == _result_key(rb), (op, arg)
        assert fast.commit_log.pending_hints() == exact.commit_log.pending_hints()
        assert fast.commit_log.topic_queue_table == exact.commit_log.topic_queue_table
        results.append(ra)
    assert next(fast.commit_log._uniq_counter) == next(exact.commit_log._uniq_counter)
    assert _files(fast, "commitlog") == _files(exact, "commitlog")
    kinds = (Appended, Rolled)
    ea, eb = ([e for e in r.events if isinstance(e, kinds)] for r in events)
    assert ea == eb
    for s in (fast, exact):
        s.flush()
        assert s.wait_dispatched()
    assert _files(fast, "consumequeue") == _files(exact, "consumequeue")
    assert _files(fast, "index") == _files(exact, "index")
    return results


_odd_keys = st.sampled_from([["", "e"], ("a", ""), "s t", "one", ["a\x00b"], ["x\x01"], ["k 1", "k2"], [" a"],
                             ("t1", "t2"), [], ["ключ", "键"]])  # fmt: skip
_topic = st.sampled_from([*["TopicA"] * 6, "TopicB", "Topic" + "C" * 120, "bad topic",
                          flags.SCHEDULE_TOPIC])  # fmt: skip


@st.composite
def _list_batch(draw: Any) -> list[Message]:
    """Mostly what the column path takes (a shared header, keys as lists), then one change."""
    topic = draw(_topic)
    header = dict(
        tags=draw(st.sampled_from([*["TagA"] * 6, None, "", "标签", "a\x00b", "a\x01b"])),
        queue_id=draw(st.sampled_from([0, 0, 0, 0, 0, 1, -1])),
        born_host=draw(st.sampled_from([("10.0.0.7", 4242), ("10.0.0.7", 4242), "10.0.0.8:1", ("::1", 9)])),
        sys_flag=draw(st.sampled_from([0, 0, 0, 0, 0, 0, 1, flags.TRANSACTION_COMMIT_TYPE])),
        reconsume_times=draw(st.sampled_from([0, 0, 3])),
        wait_store_msg_ok=draw(st.sampled_from([True, True, False])),
        delay_time_level=draw(st.sampled_from([0, 0, 0, 0, 0, 3])),
    )
    size = draw(st.sampled_from([1, 2, 8, 8, 32]))
    keyed = draw(st.booleans())
    born = draw(st.sampled_from([None, None, 1_600_000_000_123]))
    body = draw(st.sampled_from([b"", b"x" * 100, bytes(range(256)) * 4]))
    msgs = [Message(topic, body[: len(body) - i % 7], keys=[f"key{i}", f"grp{i // 4}"] if keyed else (),
                    flag=i % 3, born_timestamp=born, **header)
            for i in range(size)]  # fmt: skip
    change = draw(st.sampled_from([*["none"] * 8, "keys", "keys", "uniq", "props", "born", "host", "tags", "big",
                                   "huge", "topic", "str_keys"]))  # fmt: skip
    j = draw(st.integers(0, size - 1))
    m = msgs[j]
    if change == "keys":
        m.keys = draw(_odd_keys)
    elif change == "uniq":
        m.uniq_key = draw(st.sampled_from(["C0A80001OWN", "", "bad\x01"]))
    elif change == "props":
        m.properties = draw(st.sampled_from([{}, {"p": "v"}]))
    elif change == "born":
        m.born_timestamp = draw(st.sampled_from([None, 1_500_000_000_000]))
    elif change == "host":
        m.born_host = ("10.9.9.9", 1)
    elif change == "tags":
        m.tags = "TagZ"
    elif change == "big":
        m.body = bytes(draw(st.sampled_from([_MAX_BODY // 2, 33_000])))  # two: too big, or fitting no file
    elif change == "huge":
        m.body = bytes(_MAX_BODY + 1)
    elif change == "topic":
        m.topic = "TopicOther"
    elif change == "str_keys":
        for i, x in enumerate(msgs):
            x.keys = f"s{i} t{i}" if keyed else ""
    if change == "big" and size > 1:
        msgs[(j + 1) % size].body = bytes(len(m.body))
    return msgs


@st.composite
def _wire_batch(draw: Any) -> Any:
    """A MessageBatch: encoded by a producer of the store's version, or received bytes (inner
    strings with or without their last 0x02, empty ones, odd batch properties)."""
    topic = draw(st.sampled_from([*["TopicA"] * 6, "TopicB", "bad topic", flags.SCHEDULE_TOPIC]))
    size = draw(st.sampled_from([1, 3, 8, 32]))
    tags = draw(st.sampled_from(["TagA", None, "标签", "a\x01b"]))
    host = draw(st.sampled_from([("10.0.0.7", 4242), ("::1", 9)]))
    born = draw(st.sampled_from([None, 1_600_000_000_123]))
    big = draw(st.sampled_from([0, 0, 0, 0, 0, _MAX_BODY // 2, 33_000, _MAX_BODY + 1]))
    received = draw(st.booleans())
    ending = draw(st.sampled_from(["as sent", "with 0x02", "mixed", "empty"]))
    own = draw(st.sampled_from([None, {"WAIT": "true"}, {"WAIT": "false", "UNIQ_KEY": "BATCHUNIQ"},
                                {"UNIQ_KEY": "a\x01b"}, {"KEYS": "bk", "TAGS": "bt"}]))  # fmt: skip

    def build(store: MessageStore) -> MessageBatch:
        cl = store.commit_log
        uniq = itertools.count()
        msgs = [Message(topic, bytes([i]) * (100 + i) if not (big and i < 2) else bytes(big), tags=tags,
                        keys=[f"key{i}", f"grp{i // 4}"] if i % 5 else (), born_host=host, born_timestamp=born,
                        queue_id=1, flag=i)
                for i in range(size)]  # fmt: skip
        batch = MessageBatch.from_messages(msgs, lambda: f"C0A80001{next(uniq):024X}",
                                           client_version=cl.config.rocketmq_version)  # fmt: skip
        if not received:
            return batch
        pieces = []
        for i, (flag, body, inner) in enumerate(zip(batch.flags, (batch.body[s] for s in batch.body_slices),
                                                    (batch.body[s] for s in batch.properties_slices), strict=True)):
            if ending == "with 0x02" or (ending == "mixed" and i % 2):
                inner = inner if inner.endswith(b"\x02") else inner + b"\x02"
            elif ending == "empty" and i % 3 == 1:
                inner = b""
            pieces.append(encode_message(flag, body, inner))
        return MessageBatch(topic, 1, b"".join(pieces), born_host=host, born_timestamp=born,
                            properties=own if own is not None else batch.properties)  # fmt: skip

    return build


_op = st.one_of(
    st.tuples(st.just("list"), _list_batch()),
    st.tuples(st.just("list"), _list_batch()),
    st.tuples(st.just("wire"), _wire_batch()),
    st.tuples(st.just("advance"), st.sampled_from([1, 1000, 86_400_000])),
)


@pytest.mark.parametrize(("version", "host"), [("4.9.8", "192.168.0.10:10911"), ("5.3.3", "[fd00::7]:10911")])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(ops=st.lists(_op, min_size=1, max_size=20))
def test_column_paths_write_what_the_exact_path_writes(version: str, host: str, ops: list[tuple[str, Any]]) -> None:
    with _twins(version, host) as (fast, exact, _calls):
        _run(fast, exact, ops)


@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
@pytest.mark.parametrize("changes", [{}, {"transient_store_pool_enable": True}])
def test_bench_batches_take_the_column_paths(version: str, changes: dict[str, Any]) -> None:
    """The bench workload (1 KiB, a tag, two keys), as lists and as MessageBatch objects, over
    several 64 KiB files (rolls mid-stream): every batch is written by the column writer."""
    body = bytes(range(256)) * 4
    ops: list[tuple[str, Any]] = []
    counter = itertools.count()

    def uniq() -> str:
        return f"C0A80001{next(counter):024X}"

    for j in range(40):
        msgs = [Message("TopicA", body[: 900 + (i * 37) % 124], tags="TagA", keys=[f"key{j}-{i}", f"grp{i // 4}"],
                        born_host=("10.0.0.7", 4242)) for i in range(j % 9 + 1)]  # fmt: skip
        ops.append(("list", msgs))
        if j % 2:
            batch = MessageBatch.from_messages(msgs, uniq, client_version=version)
            ops.append(("wire", lambda _s, b=batch: b))
        if j % 10 == 0:
            ops.append(("advance", 1))
    host = "[fd00::7]:10911" if version == "5.3.3" else "192.168.0.10:10911"
    with _twins(version, host) as (fast, exact, calls):
        results = _run(fast, exact, ops)
        assert all(r.status is PutMessageStatus.PUT_OK for r in results)
        assert len(calls) == len(results)
        assert len(_files(fast, "commitlog")) >= 4


@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
def test_list_uniq_keys_across_the_16_bit_wrap_and_key_string_checks(version: str) -> None:
    """The list path's UNIQ_KEYs are one slice of the 16-bit hex table, or drawn value by value
    when the counter wraps inside the batch; lists whose key strings the one-string check must
    refuse (an empty token or key string among keyed ones) write what the exact path writes,
    and keyless lists (every key list empty) still take the column writer."""
    host = "[fd00::7]:10911" if version == "5.3.3" else "192.168.0.10:10911"

    def batch(tag: str, keys: list[Any]) -> list[Message]:
        return [Message("TopicA", b"b%d" % i, tags=tag, keys=k, born_host=("10.0.0.7", 4242))
                for i, k in enumerate(keys)]  # fmt: skip

    keyed = [[f"k{i}", f"g{i}"] for i in range(32)]
    ops: list[tuple[str, Any]] = [
        ("list", batch("a", keyed)),  # wraps: 0xFFF0 + 32
        ("list", batch("b", keyed)),  # a slice again
        ("list", batch("c", [[]] * 8)),  # keyless
        ("list", batch("d", [[f"k{i}"] for i in range(7)] + [[]])),  # last key string empty
        ("list", batch("e", [["k0"], [], ["k2"]])),  # a middle one empty
        ("list", batch("f", [["k0"], ["k1", ""]])),  # an empty last token
        ("list", batch("g", [["k0"], ["", "k1"]])),  # an empty first token
        ("list", batch("h", [["k0"], ["a", "", "b"]])),  # an empty middle token
        ("list", batch("i", [["k0"], ["a\x01 b"]])),  # the separator in a token
    ]
    with _twins(version, host) as (fast, exact, calls):
        for s in (fast, exact):
            s.commit_log._uniq_counter = itertools.count(0x2FFF0)
        results = _run(fast, exact, ops)
        assert all(r.status is PutMessageStatus.PUT_OK for r in results)
        assert len(calls) == 3  # the wrapping batch, the next one, the keyless one
        offset, raws = results[0].append_result.wrote_offset, []  # type: ignore[union-attr]
        for _ in range(32):
            rec = fast.commit_log.look_message(offset)
            assert rec is not None
            raws.append(rec.properties_raw)
            offset += rec.store_size
        # the messages' own UNIQ_KEYs (5.x: the batch's own follows and wins the parse)
        for i, raw in enumerate(raws):
            values = [v.split(b"\x02", 1)[0] for v in raw.split(b"UNIQ_KEY\x01")[1:]]
            assert values[0].endswith(b"%04X" % ((0xFFF0 + i) & 0xFFFF)), (i, values)
