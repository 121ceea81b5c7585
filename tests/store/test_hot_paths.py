"""Invariants of the fast paths: shared selections release their file, frozen fast constructors,
in-place appends (results must equal the plain paths; speed is measured in bench/, not here)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from rmqlab import MessageStore, MessageStoreConfig
from rmqlab.clock import ManualClock
from rmqlab.codec._frozen import fast_constructor
from rmqlab.codec.message import MessageRecord, decode_message
from rmqlab.codec.walk import DispatchRequest
from rmqlab.errors import MappedFileError
from rmqlab.files.mapped_file import MappedFile
from rmqlab.store.message import Message


def test_fast_constructor_builds_an_equal_frozen_instance() -> None:
    build = fast_constructor(DispatchRequest)
    args = ("t", 1, 2, 3, 4, 5, 6, "k", "u", 0, 0, None)
    fast, slow = build(*args), DispatchRequest(*args)
    assert type(fast) is DispatchRequest
    assert fast == slow
    assert repr(fast) == repr(slow)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.topic = "x"  # type: ignore[misc]


def test_fast_constructor_refuses_unfrozen_classes() -> None:
    @dataclasses.dataclass(slots=True)
    class Plain:
        a: int

    with pytest.raises(TypeError):
        fast_constructor(Plain)


def test_get_message_shares_one_file_reference_and_releases_it(tmp_path: Path) -> None:
    store = MessageStore.open(tmp_path / "s", MessageStoreConfig.small(str(tmp_path / "s")),
                              clock=ManualClock(), threaded=False)
    try:
        for i in range(10):
            store.put_message(Message("TopicA", bytes([i]) * 100, tags="T"))
        store.wait_dispatched()
        mf = store.commit_log.mapped_file_queue.mapped_files[0]
        assert mf.ref_count == 1
        r = store.get_message("g", "TopicA", 0, 0, 32)
        assert r.message_count == 10
        assert mf.ref_count == 2  # one reference for all ten messages
        for i, m in enumerate(r.messages):
            rec = m.decode()
            assert isinstance(rec, MessageRecord)
            assert rec.body == bytes([i]) * 100
            assert bytes(m.buffer) == bytes(mf.buffer[m.commit_log_offset : m.commit_log_offset + m.size])
        r.messages[3].release()
        with pytest.raises(ValueError, match="released"):
            bytes(r.messages[3].buffer)
        assert mf.ref_count == 2
        r.release()
        assert mf.ref_count == 1
        r.release()  # idempotent
        assert mf.ref_count == 1
    finally:
        store.shutdown()


def test_look_message_reads_size_and_record_in_one_go(tmp_path: Path) -> None:
    store = MessageStore.open(tmp_path / "s", MessageStoreConfig.small(str(tmp_path / "s")),
                              clock=ManualClock(), threaded=False)
    try:
        r = store.put_message(Message("TopicA", b"body", keys="k"))
        rec = store.look_message_by_offset(r.wrote_offset)
        assert rec is not None
        assert rec.body == b"body"
        assert rec == decode_message(store.commit_log.mapped_file_queue.mapped_files[0].buffer, 0)
        assert store.look_message_by_offset(r.wrote_offset + 1) is None
        assert store.look_message_by_offset(10**9) is None
    finally:
        store.shutdown()


def test_advance_wrote_position_refuses_to_pass_the_end(tmp_path: Path) -> None:
    mf = MappedFile(str(tmp_path / f"{0:020d}"), 4096)
    try:
        mf.write_target[0:3] = b"abc"
        mf.advance_wrote_position(3)
        assert mf.wrote_position == 3
        with pytest.raises(MappedFileError):
            mf.advance_wrote_position(4094)
        assert mf.wrote_position == 3
    finally:
        mf.close()
