"""5.x BatchConsumeQueue (topics with ``queue.type=BatchCQ``) is not modelled: the engine refuses
such a store or topic with a message saying so, instead of dispatching those topics into plain
consume queues a 5.x broker would not read; verify says what it does not read."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from rmqlab.config import MessageStoreConfig
from rmqlab.errors import ConfigError, NotAStore
from rmqlab.inspect import open_snapshot
from rmqlab.inspect.checks import verify
from rmqlab.store.message import Message
from rmqlab.store.message_store import MessageStore
from rmqlab.store.topic_config import TopicConfig


def _store(root: str, version: str = "5.3.3") -> None:
    with MessageStore.open(root, MessageStoreConfig.small(root, rocketmq_version=version), threaded=False) as store:
        store.create_topic("Plain")
        store.put_message(Message("Plain", b"x", tags="a"))
        store.step()


def _digest(root: str) -> dict[str, str]:
    out = {}
    for d, _dirs, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            out[os.path.relpath(p, root)] = hashlib.sha256(Path(p).read_bytes()).hexdigest()
    return out


def test_a_batch_cq_topic_cannot_be_created_on_a_5x_store(tmp_path: Path) -> None:
    root = str(tmp_path / "s")
    with MessageStore.open(root, MessageStoreConfig.small(root, rocketmq_version="5.3.3"), threaded=False) as store:
        with pytest.raises(ConfigError, match=r"queue\.type=BatchCQ"):
            store.topic_config_manager.update(TopicConfig("Batched", attributes={"queue.type": "BatchCQ"}))
        assert store.topic_config_manager.get("Batched") is None
        store.topic_config_manager.update(TopicConfig("Simple", attributes={"queue.type": "SimpleCQ"}))
        assert store.topic_config_manager.get("Simple") is not None


def test_a_5x_store_with_a_batch_cq_topic_in_topics_json_is_refused_untouched(tmp_path: Path) -> None:
    root = str(tmp_path / "s")
    _store(root)
    path = Path(root, "config", "topics.json")
    text = path.read_text()
    # a broker's topics.json naming a BatchCQ topic (the attribute as RocketMQ stores it)
    path.write_text(text.replace('"topicConfigTable":{', '"topicConfigTable":{"Batched":{"attributes":'
                                 '{"queue.type":"BatchCQ"},"order":false,"perm":6,"readQueueNums":8,'
                                 '"topicFilterType":"SINGLE_TAG","topicName":"Batched","topicSysFlag":0,'
                                 '"writeQueueNums":8},', 1))
    assert "BatchCQ" in path.read_text()
    before = _digest(root)
    with pytest.raises(NotAStore, match=r"Batched have queue.type=BatchCQ.*not modelled"):
        MessageStore.open(root, MessageStoreConfig.small(root, rocketmq_version="5.3.3"), threaded=False)
    assert _digest(root) == before


def test_batchconsumequeue_files_refuse_a_5x_open_and_verify_reads_them(tmp_path: Path) -> None:
    root = str(tmp_path / "s")
    _store(root)
    qdir = Path(root, "batchconsumequeue", "Batched", "0")
    qdir.mkdir(parents=True)
    (qdir / "00000000000000000000").write_bytes(b"\0" * 46 * 4)
    with pytest.raises(NotAStore, match="batchconsumequeue holds BatchConsumeQueue files"):
        MessageStore.open(root, MessageStoreConfig.small(root, rocketmq_version="5.3.3"), threaded=False)
    with open_snapshot(root) as snap:  # an empty batch queue file: nothing to check, no note
        assert ("Batched", 0) in snap.batch_consume_queues
        assert not [f for f in verify(snap) if f.kind == "batch_consume_queue_not_read"]


def test_4_9_8_ignores_the_attribute_as_its_topic_config_does(tmp_path: Path) -> None:
    root = str(tmp_path / "s")
    _store(root, "4.9.8")
    with MessageStore.open(root, MessageStoreConfig.small(root), threaded=False) as store:
        store.topic_config_manager.update(TopicConfig("Batched", attributes={"queue.type": "BatchCQ"}))
        assert store.put_message(Message("Batched", b"y")).ok
