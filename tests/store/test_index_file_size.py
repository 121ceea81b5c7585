"""An index file whose length is not the configured layout's is refused at load, naming it.

RocketMQ's IndexService maps each file at the configured size without a check: a store written
with another ``maxHashSlotNum`` opens and every key query answers nothing (the keys sit in other
slots), and a shorter file is grown. rmqlab refuses to load such a store, says which sizes fit,
and changes no byte. A zero-length file (a kill between creating and sizing it) loads as Java's.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from rmqlab import Message, MessageStore, MessageStoreConfig
from rmqlab.errors import NotAStore
from tests.tree import tree_digest


def _written(root: Path, n: int = 40) -> MessageStoreConfig:
    config = MessageStoreConfig.small(str(root))  # 64 slots, 256 items: 5,416-byte index files
    store = MessageStore.open(str(root), config, threaded=False)
    for i in range(n):
        store.put_message(Message("TopicA", b"x" * 200, tags="T", keys=[f"k{i}"], queue_id=i % 2))
    store.step()
    store.shutdown()
    return config


@pytest.mark.parametrize(("change", "hint"), [
    ({"max_hash_slot_num": 128}, "MessageStoreConfig(max_hash_slot_num=64, max_index_num=256)"),
    ({"max_index_num": 512}, "MessageStoreConfig(max_hash_slot_num=64, max_index_num=256)"),
    ({"max_hash_slot_num": 32}, "MessageStoreConfig(max_hash_slot_num=64, max_index_num=256)"),
])
def test_other_index_sizes_are_refused_with_the_sizes_that_fit(tmp_path: Path, change: dict[str, int],
                                                                 hint: str) -> None:
    config = _written(tmp_path)
    before = tree_digest(tmp_path)
    with pytest.raises(NotAStore) as e:
        MessageStore.open(str(tmp_path), dataclasses.replace(config, **change), threaded=False)
    text = str(e.value)
    index = min((tmp_path / "index").iterdir())
    assert f"index: {index}: 5,416 bytes, but max_hash_slot_num=" in text
    assert hint in text
    assert tree_digest(tmp_path) == before  # not grown, nothing written
    # the sizes it names open it, and the keys are found
    store = MessageStore.open(str(tmp_path), config, threaded=False)
    try:
        assert len(store.query_message("TopicA", "k7").messages) == 1
    finally:
        store.shutdown()


def test_a_cut_index_file_is_refused_as_damage(tmp_path: Path) -> None:
    config = _written(tmp_path)
    index = next((tmp_path / "index").iterdir())
    index.write_bytes(index.read_bytes()[:1000])
    with pytest.raises(NotAStore) as e:
        MessageStore.open(str(tmp_path), config, threaded=False)
    assert f"{index}: 1,000 bytes" in str(e.value)
    assert "a damaged (cut) file: move it out of index/" in str(e.value)
    assert index.stat().st_size == 1000


def test_a_grown_index_file_is_refused_saying_how_to_cut_it_back(tmp_path: Path) -> None:
    config = _written(tmp_path)
    index = next((tmp_path / "index").iterdir())
    index.write_bytes(index.read_bytes() + b"garbage")
    with pytest.raises(NotAStore) as e:
        MessageStore.open(str(tmp_path), config, threaded=False)
    assert f"{index}: 5,423 bytes" in str(e.value)
    assert "cut the file back to 5,416 bytes" in str(e.value)
    with open(index, "r+b") as f:  # what it says to do opens the store with every key
        f.truncate(5416)
    with MessageStore.open(str(tmp_path), config, threaded=False) as store:
        assert len(store.query_message("TopicA", "k7").messages) == 1


def test_a_zero_length_index_file_loads_as_rocketmq_loads_it(tmp_path: Path) -> None:
    config = _written(tmp_path)
    empty = tmp_path / "index" / "29991231235959999"  # the newest name: the file new keys go to
    empty.write_bytes(b"")
    store = MessageStore.open(str(tmp_path), config, threaded=False)
    try:
        assert store.put_message(Message("TopicA", b"y", keys=["new-key"])).status.name == "PUT_OK"
        store.step()
        assert len(store.query_message("TopicA", "new-key").messages) == 1
        assert len(store.query_message("TopicA", "k7").messages) == 1
    finally:
        store.shutdown()
    assert empty.stat().st_size == config.index_file_size


def test_recover_dry_run_says_the_open_would_refuse_a_cut_index_file(tmp_path: Path) -> None:
    from rmqlab.inspect import open_snapshot

    _written(tmp_path, n=150)  # 300 keys: two index files of 256 items
    first, last = sorted((tmp_path / "index").iterdir())
    last.write_bytes(last.read_bytes()[:1000])
    with open_snapshot(tmp_path, hash_slot_num=64, index_num=256) as snap:
        notes = snap.explain_recovery().notes
    assert any(n.startswith(f"index: {last}: 1,000 bytes, shorter than its layout's 5,416") and
               "MessageStore.open refuses" in n for n in notes), notes
    first.write_bytes(first.read_bytes()[:1000])  # now no file has the layout's size
    with open_snapshot(tmp_path, hash_slot_num=64, index_num=256) as snap:
        notes = snap.explain_recovery().notes
    assert any(n.startswith("index: no index file is 5,416 bytes") and
               "MessageStore.open with these index sizes refuses" in n for n in notes), notes
