"""The read-only promise: a full inspection changes no byte, name, size or mtime of a store dir."""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.inspect.conftest import fingerprint, full_inspection


@pytest.mark.parametrize("name", ["clean-small", "crash-tail"])
def test_reference_stores_unchanged(name: str, store_copy: Callable[[str], Path]) -> None:
    root = store_copy(name)
    before = fingerprint(root)
    full_inspection(root)
    assert fingerprint(root) == before


def test_damaged_copies_unchanged(store_copy: Callable[[str], Path]) -> None:
    root = store_copy("crash-tail")
    with open(root / "commitlog" / "00000000000000720896", "r+b") as f:
        f.seek(30000)
        f.write(b"\x00\x00\x01\x00\xde\xad\xbe\xef" * 4)  # garbage tail
    with open(root / "consumequeue" / "TopicA" / "0" / "00000000000000000000", "r+b") as f:
        f.seek(40)
        f.write(struct.pack(">q", 123))  # a unit pointing nowhere
    (root / "commitlog" / "00000000000000131072").write_bytes(b"\x01" * 100)  # short garbage file
    (root / "checkpoint").write_bytes(b"\x00" * 10)  # short checkpoint
    before = fingerprint(root)
    full_inspection(root)
    assert fingerprint(root) == before


def test_live_store_being_written(tmp_path: Path) -> None:
    from rmqlab.config import MessageStoreConfig
    from rmqlab.inspect import open_snapshot
    from rmqlab.store.message import Message
    from rmqlab.store.message_store import MessageStore

    root = str(tmp_path / "live")
    store = MessageStore.open(root, MessageStoreConfig.small(root), threaded=True)
    stop = threading.Event()
    errors: list[BaseException] = []

    def write() -> None:
        i = 0
        try:
            while not stop.is_set() and i < 3000:
                store.put_message(Message("TopicA", b"live %d" % i, tags="t", keys=[f"shared-{i % 5}"],
                                          queue_id=i % 4))
                i += 1
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        for _ in range(3):  # concurrent reads while the writer and its services run: no error, no lock
            with open_snapshot(root) as snap:
                snap.messages(damage=[])
                snap.topics()
                list(snap.verify())
                snap.explain_recovery()
    finally:
        stop.set()
        writer.join()
        store.shutdown()
    assert errors == []
    # open again, stepped (nothing runs between steps): a live store holding its lock, abort present
    store = MessageStore.open(root, MessageStoreConfig.small(root), threaded=False)
    try:
        store.put_message(Message("TopicA", b"one more", keys=["shared-1"]))
        store.step()
        before = fingerprint(Path(root))
        full_inspection(Path(root))
        assert fingerprint(Path(root)) == before
    finally:
        store.shutdown()
