"""A ``get_message`` result decodes in one pass (``results._decode_batch``) on its first decode.

The pass reads each record straight from its selection's buffer; it must store only records the
exact decoder gives field for field, and leave every other message to its own ``decode()``,
whose answer or error stays the exact decoder's. Messages hold no view until ``buffer`` is read.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqlab import MessageStore, MessageStoreConfig
from rmqlab.clock import ManualClock
from rmqlab.codec.message import MessageRecord, _decode_exact, decode_message, encode_message
from rmqlab.errors import CorruptRecord, TruncatedRecord
from rmqlab.store.message import Message
from rmqlab.store.results import GetMessageResult, GetMessageStatus, StoredMessage, _decode_batch

TOPIC = "BatchTopic"

hosts = st.sampled_from([("10.0.0.7", 4242), ("127.0.0.1", 10911), ("::1", 9876), ("192.168.1.20", -1)])
text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=10)
prop_bytes = st.one_of(
    st.dictionaries(text.filter(lambda k: "\x01" not in k and "\x02" not in k), text, max_size=4).map(
        lambda d: "".join(f"{k}\x01{v}\x02" for k, v in d.items()).encode()
    ),
    st.binary(max_size=30),
)


@st.composite
def records(draw: st.DrawFn) -> bytes:
    return encode_message(
        topic=draw(st.sampled_from(["T", TOPIC, "é-topic", "x" * 127, "y" * 130])),
        body=draw(st.binary(max_size=200)),
        queue_id=draw(st.integers(0, 2**31 - 1)),
        flag=draw(st.integers(-(2**31), 2**31 - 1)),
        queue_offset=draw(st.integers(0, 2**63 - 1)),
        commit_log_offset=draw(st.integers(0, 2**63 - 1)),
        sys_flag=draw(st.integers(0, 0xFF)),
        born_timestamp=draw(st.integers(0, 2**62)),
        born_host=draw(hosts),
        store_timestamp=draw(st.integers(0, 2**62)),
        store_host=draw(hosts),
        reconsume_times=draw(st.integers(0, 100)),
        prepared_transaction_offset=draw(st.integers(0, 2**40)),
        properties=draw(prop_bytes),
        version=draw(st.sampled_from([None, 2])),
    )


def _message(base: memoryview | None, at: int, size: int, batch: list[StoredMessage]) -> StoredMessage:
    """A message as ``MessageStore._scan`` builds it (selection's buffer + place, no view)."""
    m = object.__new__(StoredMessage)
    m._selection = None
    m._view = None
    m._base = base
    m._at = at
    m._batch = batch
    m.commit_log_offset = at
    m.size = size
    m._record = None
    batch.append(m)
    return m


def _outcome(fn):  # type: ignore[no-untyped-def]
    try:
        return fn()
    except CorruptRecord as e:
        return ("corrupt", e.reason, e.offset)
    except TruncatedRecord as e:
        return ("truncated", e.offset)
    except (TypeError, ValueError) as e:
        return (type(e).__name__, str(e))


def _exact(data: bytes, commit_log_offset: int):  # type: ignore[no-untyped-def]
    """What a message's own decode() of these bytes gives, by the exact decoder."""
    rec = _decode_exact(data, 0, len(data), False, True, None)
    if type(rec) is not MessageRecord:
        raise TypeError(f"no message at commit log offset {commit_log_offset}")
    return rec


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recs=st.lists(records(), min_size=1, max_size=6), data=st.data())
def test_batch_decodes_what_the_exact_decoder_decodes(recs: list[bytes], data: st.DataObject) -> None:
    buf = bytearray()
    places = []
    for rec in recs:
        rec = bytearray(rec)
        if data.draw(st.booleans()):  # damage some bytes
            for _ in range(data.draw(st.integers(1, 3))):
                rec[data.draw(st.integers(0, len(rec) - 1))] = data.draw(st.integers(0, 255))
        buf += bytes(data.draw(st.integers(0, 9)))
        size = max(0, len(rec) + data.draw(st.sampled_from([0, 0, 0, -1, -40, 3])))  # unit size vs record
        places.append((len(buf), size))
        buf += rec
    buf += bytes(48)
    base = memoryview(bytes(buf))
    batch: list[StoredMessage] = []
    msgs = [_message(base, at, size, batch) for at, size in places]
    released = data.draw(st.sampled_from([None, *range(len(msgs))]))
    if released is not None:
        msgs[released]._base = None  # as release() leaves it
        msgs[released]._view = memoryview(b"")
        msgs[released]._view.release()
    _decode_batch(batch)
    for i, m in enumerate(msgs):
        assert m._batch is None  # no second pass, no cycle left
        at, size = places[i]
        if m._record is not None:  # taken by the pass: exactly the exact decoder's record
            assert i != released
            exact = _exact(bytes(base[at : at + size]), at)
            assert type(m._record) is MessageRecord
            assert m._record == exact
            assert m._record.properties_raw == exact.properties_raw
            assert type(m._record.body) is bytes
    for i, m in enumerate(msgs):  # every decode(), batched or not, answers as before
        at, size = places[i]
        got = _outcome(m.decode)
        if i == released:
            assert got[0] == "ValueError"  # a released view
        else:
            data_i = bytes(base[at : at + size])
            assert got == _outcome(lambda: _exact(data_i, at))  # noqa: B023 (called at once)


def _store(root: Path, n: int, ipv6_every: int = 0) -> MessageStore:
    store = MessageStore.open(root, MessageStoreConfig.small(str(root)), clock=ManualClock(), threaded=False)
    rnd = random.Random(3)
    for i in range(n):
        born = ("::1", 7000) if ipv6_every and i % ipv6_every == 0 else ("10.0.0.7", 4242)
        store.put_message(Message(TOPIC, bytes([i % 256]) * rnd.randrange(1, 2500), tags=f"t{i % 3}",
                                  keys=[f"k{i}", "shared"], born_host=born))
    store.wait_dispatched(30)
    return store


def test_first_decode_decodes_the_whole_result(tmp_path: Path) -> None:
    store = _store(tmp_path / "s", 60, ipv6_every=7)  # IPv6 records: left to their own decode
    try:
        with store.get_message("g", TOPIC, 0, 5, 32) as r:
            assert r.status is GetMessageStatus.FOUND
            assert len(r.messages) > 8
            assert all(m._record is None and m._view is None for m in r.messages)
            assert r.messages[3].tags == "t2"  # one attribute read decodes the whole result
            assert all(m._batch is None for m in r.messages)
            assert all(m._view is None for m in r.messages)  # read from the selection's buffer
            v6 = [m for m in r.messages if m._record is None]
            assert v6
            assert all(m.decode().born_host == ("::1", 7000) for m in v6)
            for i, m in enumerate(r.messages):
                rec = m.decode()
                assert rec == decode_message(bytes(m.buffer))
                assert (rec.queue_offset, rec.commit_log_offset, rec.store_size) == (5 + i, m.commit_log_offset, m.size)
                assert rec.keys == [f"k{5 + i}", "shared"]
    finally:
        store.shutdown()


def test_buffer_view_is_made_on_first_use_and_released_with_the_message(tmp_path: Path) -> None:
    store = _store(tmp_path / "s", 12)
    try:
        mf = store.commit_log.mapped_file_queue.mapped_files[0]
        refs = mf.ref_count
        r = store.get_message("g", TOPIC, 0, 0, 8)
        first, second, third = r.messages[:3]
        assert mf.ref_count == refs + 1  # one shared selection
        assert first._view is None
        view = first.buffer
        assert first.buffer is view
        assert len(view) == first.size
        assert int.from_bytes(view[:4], "big") == first.size  # TOTALSIZE
        exported = np.frombuffer(second.buffer, dtype=np.uint8)
        rec = third.decode()
        r.release()
        assert mf.ref_count == refs
        assert all(m._selection is None and m._base is None and m._batch is None for m in r.messages)
        with pytest.raises(ValueError, match="released"):
            bytes(first.buffer)  # its view, released
        with pytest.raises(ValueError, match="released"):
            bytes(r.messages[4].buffer)  # never made: a released view
        assert bytes(exported[:4]) == second.size.to_bytes(4, "big")  # still readable
        assert third.decode() is rec  # decoded before release: kept
        assert r.messages[4].decode().queue_offset == 4  # decoded with it (the whole result)
        r.release()  # twice: nothing more released
        assert mf.ref_count == refs
    finally:
        store.shutdown()


def test_release_before_any_decode_leaves_every_decode_raising(tmp_path: Path) -> None:
    store = _store(tmp_path / "s", 6)
    try:
        r = store.get_message("g", TOPIC, 0, 0, 4)
        r.release()
        for m in r.messages:
            with pytest.raises(ValueError, match="released"):
                m.decode()
    finally:
        store.shutdown()


def test_stored_message_release_alone(tmp_path: Path) -> None:
    store = _store(tmp_path / "s", 6)
    try:
        r = store.get_message("g", TOPIC, 0, 0, 4)
        m = r.messages[1]
        m.release()
        assert m._base is None
        assert m._batch is None
        assert r.messages[0].topic == TOPIC  # the batch skips the released one
        with pytest.raises(ValueError, match="released"):
            m.decode()
        assert [x._record is not None for x in r.messages] == [True, False, True, True]
        r.release()
    finally:
        store.shutdown()


def test_constructed_messages_decode_alone() -> None:
    recs = [encode_message(topic=TOPIC, body=bytes([i]) * 10, queue_offset=i) for i in range(3)]
    msgs = [StoredMessage(None, memoryview(rec), i, len(rec)) for i, rec in enumerate(recs)]
    result = GetMessageResult(GetMessageStatus.FOUND, messages=msgs)
    assert msgs[1].queue_offset == 1
    assert [m._record is not None for m in msgs] == [False, True, False]  # no batch link
    assert [m.decode().queue_offset for m in result.messages] == [0, 1, 2]
