"""The put benchmark's encode + append baseline writes real records: the same fields the store
writes for the workload, a valid body CRC, properties in the store's order. (A baseline that
skipped part of a record's making would flatter itself and make the ratio against it meaningless.)"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from rmqlab import MessageStore
from rmqlab.codec.message import MessageRecord, decode_message

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
bench_store = pytest.importorskip("bench_store")


def test_encode_append_writes_the_records_the_store_writes(tmp_path: Path) -> None:
    store = MessageStore.open(str(tmp_path / "store"), bench_store._config(""), threaded=False)
    try:
        template = bench_store._props_template(store)
        msgs = bench_store._messages(300)
        for m in msgs:
            assert store.put_message(m).ok
        store.step()
        expected = []
        while len(expected) < len(msgs):
            got = store.get_message("g", bench_store.TOPIC, 0, len(expected), 32)
            assert got.messages, got.status
            expected += [r.decode() for r in got.messages]
            got.release()
    finally:
        store.shutdown()
    path = tmp_path / "baseline"
    assert bench_store.encode_append(str(path), msgs, template, keep=True) > 0
    buf = memoryview(path.read_bytes())
    pos = 0
    for i, want in enumerate(expected):
        got = decode_message(buf, pos, check_crc=True)
        assert isinstance(got, MessageRecord)
        assert got.store_size == want.store_size
        assert (got.topic, got.body, got.queue_id, got.queue_offset, got.commit_log_offset) == (
            want.topic, want.body, want.queue_id, i, pos)
        assert got.properties["TAGS"] == want.properties["TAGS"]
        assert got.properties["KEYS"] == want.properties["KEYS"]
        assert list(got.properties) == list(want.properties)  # same properties, same order
        assert got.born_host == want.born_host
        pos += got.store_size
    assert bytes(buf[pos : pos + 8]) == bytes(8)  # nothing past the last record


def test_bare_decode_reads_what_the_store_returns(tmp_path: Path) -> None:
    """The get + decode baseline decodes the same fields the store's get_message gives."""
    store = MessageStore.open(str(tmp_path / "store"), bench_store._config(""), threaded=False)
    try:
        for m in bench_store._messages(100):
            assert store.put_message(m).ok
        store.step()
        with open(store.commit_log.mapped_file_queue.mapped_files[0].file_name, "rb") as f:
            data = f.read(store.commit_log.get_max_offset())  # not the whole sparse 1 GiB file
        got = store.get_message("g", bench_store.TOPIC, 0, 0, 32)
        assert len(got.messages) == 32
        for m in got.messages:
            assert bench_store.bare_decode(data, m.commit_log_offset) == (
                m.topic, m.body, m.tags, m.keys, m.queue_offset)
        got.release()
        rate, cpu = bench_store.bench_bare_decode(store, 100, 5)
        assert rate > 0
        assert cpu > 0
    finally:
        store.shutdown()


@pytest.mark.parametrize(("batch", "encoded"), [(0, False), (8, False), (8, True)])
def test_cpu_split_times_every_message_put_and_dispatched(tmp_path: Path, batch: int, encoded: bool) -> None:
    # 200 messages in chunks of 64: the last chunk is partial, and a batch never spans two
    put_us, dispatch_us = bench_store.bench_cpu_split(str(tmp_path), 200, batch, encoded, chunk=64)
    assert put_us > 0
    assert dispatch_us > 0


def test_cpu_split_refuses_work_that_was_not_done(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(MessageStore, "put_message", lambda self, msg: None)  # nothing stored
    with pytest.raises(RuntimeError, match="0 of 50 messages"):
        bench_store.bench_cpu_split(str(tmp_path), 50, chunk=16)
