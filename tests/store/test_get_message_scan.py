"""The get path's hot loop: messages built slot by slot, the one-test shared-selection case.

``MessageStore._scan`` builds each ``StoredMessage`` without its ``__init__`` (holding its
selection's buffer and its place in it, no view) and serves a unit inside the current shared
selection with one test; what it returns must be what the plain constructor and the exact
``CommitLog.get_message`` rule give, across file boundaries too.
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqlab import MessageStore, MessageStoreConfig
from rmqlab.clock import ManualClock
from rmqlab.codec.message import MessageRecord, decode_message, encode_blank
from rmqlab.store.message import Message
from rmqlab.store.results import GetMessageStatus, StoredMessage

TOPIC = "ScanTopic"


def _store(root: Path, n: int) -> MessageStore:
    config = MessageStoreConfig.small(str(root))
    store = MessageStore.open(root, config, clock=ManualClock(), threaded=False)
    rnd = random.Random(7)
    for i in range(n):  # varied sizes: records end at varied places near each file's end
        store.put_message(Message(TOPIC, bytes([i % 256]) * rnd.randrange(1, 3000), tags=f"t{i % 3}",
                                  keys=[f"k{i}"]))
    store.wait_dispatched(30)
    return store


def test_scan_builds_what_the_constructor_builds(tmp_path: Path) -> None:
    store = _store(tmp_path / "s", 40)
    try:
        r = store.get_message("g", TOPIC, 0, 3, 16)
        assert r.status is GetMessageStatus.FOUND
        assert r.messages
        for m in r.messages:
            assert type(m) is StoredMessage
            for name in StoredMessage.__slots__:  # every slot set (an unset one raises)
                getattr(m, name)
            # held as the selection's buffer and the record's place in it; no view made yet
            assert m._view is None
            assert m._batch is r.messages
            assert m._record is None
        for m in r.messages:  # (the first decode below decodes them all)
            ref = StoredMessage(m._selection, m._base[m._at : m._at + m.size], m.commit_log_offset, m.size)
            assert (m._selection, m.commit_log_offset, m.size) == (ref._selection, ref.commit_log_offset, ref.size)
            assert bytes(m.buffer) == bytes(ref.buffer)  # made on first use, then kept
            assert m.buffer is m._view
            assert m.decode() == ref.decode()
        r.release()
    finally:
        store.shutdown()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_get_message_across_files_matches_the_log(tmp_path_factory, data) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("scan")
    n = data.draw(st.integers(60, 150))
    store = _store(root / "s", n)
    try:
        assert len(store.commit_log.mapped_file_queue.mapped_files) > 1  # gets cross file ends
        for _ in range(5):
            offset = data.draw(st.integers(0, n - 1))
            want = data.draw(st.integers(1, 40))
            with store.get_message("g", TOPIC, 0, offset, want) as r:
                assert r.status is GetMessageStatus.FOUND
                assert r.buffer_total_size == sum(m.size for m in r.messages)
                for i, m in enumerate(r.messages):
                    rec = m.decode()
                    assert type(rec) is MessageRecord
                    assert rec.queue_offset == offset + i
                    assert rec.commit_log_offset == m.commit_log_offset
                    assert rec.store_size == m.size
                    assert rec.keys == [f"k{offset + i}"]
                    assert rec == decode_message(bytes(m.buffer))
                assert r.next_begin_offset == offset + len(r.messages)
    finally:
        store.shutdown()


def test_stored_message_reads_every_record_attribute(tmp_path: Path) -> None:
    """Record attributes on a StoredMessage (properties, not __getattr__) are the record's."""
    store = _store(tmp_path / "s", 5)
    try:
        with store.get_message("g", TOPIC, 0, 1, 2) as r:
            m = r.messages[0]
            assert m._record is None
            assert m.tags == "t1"  # decodes once, then cached
            rec = m._record
            assert type(rec) is MessageRecord
            names = [f.name for f in dataclasses.fields(MessageRecord)] + [
                "crc_ok", "version", "transaction_type", "tags", "tags_code", "keys", "uniq_key", "msg_id",
                "end_offset"]  # fmt: skip
            for name in names:
                assert name in vars(StoredMessage) or name in StoredMessage.__slots__, name
                assert getattr(m, name) == getattr(rec, name), name
            assert m.to_dict() == rec.to_dict()
            assert m.decode() is rec
    finally:
        store.shutdown()


def test_stored_message_attribute_of_a_non_message_raises_like_decode() -> None:
    blank = memoryview(bytearray(encode_blank(64) + bytes(56)))
    m = StoredMessage(None, blank, 0, 64)
    with pytest.raises(TypeError, match="no message"):
        m.decode()
    with pytest.raises(TypeError, match="no message"):
        _ = m.topic
    with pytest.raises(TypeError, match="no message"):
        _ = m.some_other_record_name


def test_a_unit_pointing_at_a_blank_record_names_the_place(tmp_path: Path) -> None:
    # a damaged consume queue unit that points at the blank record ending a CommitLog file:
    # the message's decode says where (file and position), as an RmqlabError (and a TypeError,
    # what it raised before)
    import struct

    from rmqlab.codec.flags import BLANK_MAGIC_CODE
    from rmqlab.errors import NotAMessage, RmqlabError

    root = tmp_path / "s"
    store = _store(root, 120)  # ~180 KB: the first 64 KiB file ends with a blank record
    first = store.commit_log.mapped_file_queue.mapped_files[0].name
    store.shutdown()
    data = (root / "commitlog" / first).read_bytes()
    pos = 0  # where the first file's last record ends, its blank record starts
    while struct.unpack_from(">i", data, pos + 4)[0] != BLANK_MAGIC_CODE:
        pos += struct.unpack_from(">i", data, pos)[0]
        assert 0 < pos < len(data) - 8
    cq = root / "consumequeue" / TOPIC / "0" / "00000000000000000000"
    with open(cq, "r+b") as f:
        f.write(struct.pack(">qi", pos, len(data) - pos))  # the unit selects the blank record
    store = MessageStore.open(root, MessageStoreConfig.small(str(root)), clock=ManualClock(), threaded=False)
    try:
        with store.get_message("g", TOPIC, 0, 0, 1) as r:
            m = r.messages[0]
            assert m.commit_log_offset == pos
            with pytest.raises(NotAMessage) as info:
                m.decode()
            e = info.value
            assert isinstance(e, RmqlabError)
            assert isinstance(e, TypeError)
            assert e.file.endswith(f"commitlog/{first}")
            assert e.offset == pos
            assert f"no message at commit log offset {pos}: a blank record" in str(e)
    finally:
        store.shutdown()
