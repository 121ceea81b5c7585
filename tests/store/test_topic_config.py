"""TopicConfigManager: config/topics.json in RocketMQ's format, MixAll.string2File (spec §1)."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from rmqlab.clock import ManualClock
from rmqlab.errors import InvalidTopic
from rmqlab.store.topic_config import DataVersion, TopicConfig, TopicConfigManager, string_to_file

# What a real 4.9.x broker writes (fastjson pretty format: tabs, alphabetical bean fields).
BROKER_TOPICS_JSON = """{
\t"dataVersion":{
\t\t"counter":7,
\t\t"timestamp":1712345678901
\t},
\t"topicConfigTable":{
\t\t"TopicTest":{
\t\t\t"attributes":{},
\t\t\t"order":false,
\t\t\t"perm":6,
\t\t\t"readQueueNums":4,
\t\t\t"topicFilterType":"SINGLE_TAG",
\t\t\t"topicName":"TopicTest",
\t\t\t"topicSysFlag":0,
\t\t\t"writeQueueNums":4
\t\t},
\t\t"SCHEDULE_TOPIC_XXXX":{
\t\t\t"attributes":{},
\t\t\t"order":false,
\t\t\t"perm":6,
\t\t\t"readQueueNums":18,
\t\t\t"topicFilterType":"SINGLE_TAG",
\t\t\t"topicName":"SCHEDULE_TOPIC_XXXX",
\t\t\t"topicSysFlag":0,
\t\t\t"writeQueueNums":18
\t\t},
\t\t"Ticker":{
\t\t\t"attributes":{
\t\t\t\t"memory":"true",
\t\t\t\t"queue.type":"SimpleCQ"
\t\t\t},
\t\t\t"order":true,
\t\t\t"perm":4,
\t\t\t"readQueueNums":2,
\t\t\t"topicFilterType":"MULTI_TAG",
\t\t\t"topicName":"Ticker",
\t\t\t"topicSysFlag":1,
\t\t\t"writeQueueNums":2
\t\t}
\t}
}"""


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_700_000_000_000)


def _manager(root: Path, clock: ManualClock, version: str = "4.9.8") -> TopicConfigManager:
    return TopicConfigManager.for_store(root, rocketmq_version=version, clock=clock)


def test_a_real_broker_file_parses(tmp_path: Path, clock: ManualClock) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "topics.json").write_text(BROKER_TOPICS_JSON, "utf-8")
    m = _manager(tmp_path, clock)
    assert m.load()
    assert m.loaded_from == "file"
    assert m.data_version == DataVersion(7, 1712345678901)
    assert m.topics() == ["SCHEDULE_TOPIC_XXXX", "Ticker", "TopicTest"]
    assert m.get("TopicTest") == TopicConfig("TopicTest", 4, 4)
    ticker = m.get("Ticker")
    assert ticker == TopicConfig("Ticker", 2, 2, perm=4, topic_filter_type="MULTI_TAG", topic_sys_flag=1,
                                 order=True, attributes={"queue.type": "SimpleCQ"}, memory=True)
    assert m.is_memory_topic("Ticker")
    assert not m.is_memory_topic("TopicTest")
    assert not m.is_memory_topic("Nope")
    assert m.get("Nope") is None


def test_persist_writes_the_broker_format_byte_for_byte(tmp_path: Path, clock: ManualClock) -> None:
    (tmp_path / "config").mkdir()
    path = tmp_path / "config" / "topics.json"
    path.write_text(BROKER_TOPICS_JSON, "utf-8")
    m = _manager(tmp_path, clock)
    assert m.load()
    m.persist()
    assert path.read_text("utf-8") == BROKER_TOPICS_JSON
    assert (tmp_path / "config" / "topics.json.bak").read_text("utf-8") == BROKER_TOPICS_JSON
    assert not (tmp_path / "config" / "topics.json.tmp").exists()


def test_round_trip_and_data_version_counter(tmp_path: Path, clock: ManualClock) -> None:
    m = _manager(tmp_path, clock)
    assert m.load()  # nothing there yet: still a successful load
    assert m.loaded_from is None
    assert m.data_version.counter == 0
    t = m.create_if_absent("Orders")
    assert t == TopicConfig("Orders", 4, 4)
    assert m.data_version == DataVersion(1, clock.now_ms())
    assert m.create_if_absent("Orders") is t  # no change, no bump
    assert m.data_version.counter == 1
    clock.advance(1000)
    m.update(TopicConfig("Quotes", 8, 8, memory=True, attributes={"x": "y"}))
    assert m.data_version == DataVersion(2, clock.now_ms())
    m.update(replace(m.get("Orders"), perm=2))  # type: ignore[type-var]
    assert m.data_version.counter == 3
    assert m.delete("Orders") is not None
    assert m.delete("Orders") is None
    assert m.data_version.counter == 4

    on_disk = json.loads((tmp_path / "config" / "topics.json").read_text("utf-8"))
    assert on_disk["dataVersion"] == {"counter": 4, "timestamp": clock.now_ms()}
    assert on_disk["topicConfigTable"]["Quotes"] == {
        "attributes": {"memory": "true", "x": "y"}, "order": False, "perm": 6, "readQueueNums": 8,
        "topicFilterType": "SINGLE_TAG", "topicName": "Quotes", "topicSysFlag": 0, "writeQueueNums": 8,
    }
    again = _manager(tmp_path, clock)
    assert again.load()
    assert again.topics() == ["Quotes"]
    assert again.get("Quotes") == m.get("Quotes")
    assert again.get("Quotes").attributes == {"x": "y"}  # type: ignore[union-attr]
    assert again.is_memory_topic("Quotes")
    assert again.data_version == m.data_version


@pytest.mark.parametrize("damage", ["missing", "empty", "garbage"])
def test_load_falls_back_to_bak(tmp_path: Path, clock: ManualClock, damage: str) -> None:
    m = _manager(tmp_path, clock)
    m.create_if_absent("A")
    m.create_if_absent("B")  # second persist copies the one-topic file to .bak
    path = tmp_path / "config" / "topics.json"
    assert json.loads((tmp_path / "config" / "topics.json.bak").read_text())["topicConfigTable"].keys() == {"A"}
    if damage == "missing":
        path.unlink()
    elif damage == "empty":
        path.write_text("")
    else:
        path.write_text('{"dataVersion":{"counter":')
    again = _manager(tmp_path, clock)
    assert again.load()
    assert again.loaded_from == "bak"
    assert again.topics() == ["A"]
    assert again.data_version.counter == 1


def test_unparseable_bak_fails_the_load(tmp_path: Path, clock: ManualClock) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "topics.json").write_text("nope")
    (tmp_path / "config" / "topics.json.bak").write_text("{also nope")
    assert not _manager(tmp_path, clock).load()


@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
def test_string_to_file_keeps_previous_content_in_bak(tmp_path: Path, version: str) -> None:
    path = str(tmp_path / "f.json")
    string_to_file("one", path, rocketmq_version=version)
    assert not os.path.exists(path + ".bak")  # nothing to back up yet
    string_to_file("two", path, rocketmq_version=version)
    assert Path(path).read_text() == "two"
    assert Path(path + ".bak").read_text() == "one"
    assert not os.path.exists(path + ".tmp")


def test_v5_writes_state_version(tmp_path: Path, clock: ManualClock) -> None:
    m = _manager(tmp_path, clock, "5.3.3")
    m.create_if_absent("T", 2)
    on_disk = json.loads((tmp_path / "config" / "topics.json").read_text())
    assert on_disk["dataVersion"] == {"counter": 1, "stateVersion": 0, "timestamp": clock.now_ms()}


def test_unknown_fields_survive_a_round_trip(tmp_path: Path, clock: ManualClock) -> None:
    (tmp_path / "config").mkdir()
    path = tmp_path / "config" / "topics.json"
    path.write_text(json.dumps({
        "dataVersion": {"counter": 1, "timestamp": 5},
        "topicConfigTable": {"T": {"topicName": "T", "futureField": [1, 2]}},
        "futureTop": {"a": 1},
    }))
    m = _manager(tmp_path, clock)
    assert m.load()
    assert m.get("T") == TopicConfig("T")  # missing fields take RocketMQ's defaults
    m.persist()
    again = json.loads(path.read_text())
    assert again["futureTop"] == {"a": 1}
    assert again["topicConfigTable"]["T"]["futureField"] == [1, 2]


def test_invalid_topic_names_are_refused(tmp_path: Path, clock: ManualClock) -> None:
    m = _manager(tmp_path, clock)
    with pytest.raises(InvalidTopic):
        m.create_if_absent("../escape")
    with pytest.raises(InvalidTopic):
        m.update(TopicConfig("a b"))
