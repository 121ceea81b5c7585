"""TopicConfig and TopicConfigManager: the broker's ``config/topics.json`` (spec §1).

On disk the file is what RocketMQ's ``TopicConfigManager`` writes with fastjson's pretty format
(tab indent, shown here as spaces; ``"key":value``; bean fields in alphabetical order)::

    {
        "dataVersion":{
            "counter":3,
            "timestamp":1700000000000
        },
        "topicConfigTable":{
            "TopicTest":{
                "attributes":{},
                "order":false,
                "perm":6,
                "readQueueNums":4,
                "topicFilterType":"SINGLE_TAG",
                "topicName":"TopicTest",
                "topicSysFlag":0,
                "writeQueueNums":4
            }
        }
    }

5.x adds ``"stateVersion":0`` to ``dataVersion``. rmqlab's memory-topic flag travels as the topic
attribute ``"memory":"true"``: a 5.x broker keeps attributes it does not know; 4.9.8's
``TopicConfig`` has no ``attributes`` field, so fastjson skips it on load and the broker's next
write drops it. Either way the file stays loadable by RocketMQ (which then stores that topic in
its CommitLog as usual).

Writing follows ``MixAll.string2File`` (4.9.8: ``<f>.tmp`` written, old content copied to
``<f>.bak``, ``<f>`` deleted, tmp renamed to ``<f>``; 5.x: old content copied to ``<f>.bak``,
then ``<f>`` overwritten). Loading follows ``ConfigManager.load``: ``<f>`` missing, empty or
unparseable -> ``<f>.bak``; a missing or empty ``.bak`` loads nothing and still succeeds, an
unparseable one fails.

Unlike a real broker, the manager does not create RocketMQ's system topics (TBW102,
SCHEDULE_TOPIC_XXXX, ...) at start: rmqlab's store does not need them.

Thread-safety: every public method holds one lock. ``TopicConfig`` is frozen; change one with
:func:`dataclasses.replace` and hand it to :meth:`TopicConfigManager.update`.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from rmqlab.clock import Clock, SystemClock
from rmqlab.codec.names import validate_topic
from rmqlab.errors import ConfigError

log = logging.getLogger(__name__)

__all__ = [
    "BATCH_CQ",
    "MEMORY_ATTRIBUTE",
    "QUEUE_TYPE_ATTRIBUTE",
    "DataVersion",
    "TopicConfig",
    "TopicConfigManager",
    "read_text",
    "string_to_file",
]

MEMORY_ATTRIBUTE = "memory"  # rmqlab: topic attribute that routes a topic to the MemoryMessageStore
QUEUE_TYPE_ATTRIBUTE = "queue.type"  # 5.x TopicAttributes.QUEUE_TYPE_ATTRIBUTE: SimpleCQ (default) | BatchCQ
BATCH_CQ = "BatchCQ"  # a 5.x topic whose queues are BatchConsumeQueues (spec §3.8)
PERM_READ_WRITE = 6  # PermName.PERM_READ | PermName.PERM_WRITE
_FILTER_TYPES = ("SINGLE_TAG", "MULTI_TAG")
_TOPIC_KEYS = ("attributes", "order", "perm", "readQueueNums", "topicFilterType", "topicName",
               "topicSysFlag", "writeQueueNums")


@dataclass(frozen=True)
class TopicConfig:
    """One topic's configuration; RocketMQ's JSON field names in snake_case and its defaults.

    ``attributes`` holds RocketMQ's topic attributes (string -> string) without rmqlab's
    ``memory`` flag, which is the separate ``memory`` field (a ``"memory"`` key passed in
    ``attributes`` is moved there). ``extra`` keeps JSON fields rmqlab does not know, so a
    load/persist round trip loses nothing.
    """

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_READ_WRITE
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False
    attributes: dict[str, str] = field(default_factory=dict)
    memory: bool = False  # rmqlab
    extra: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def batch_cq(self) -> bool:
        """5.x ``QueueTypeUtils.isBatchCq``: the topic's queues are BatchConsumeQueues."""
        return self.attributes.get(QUEUE_TYPE_ATTRIBUTE) == BATCH_CQ

    def __post_init__(self) -> None:
        attrs = dict(self.attributes)
        flag = attrs.pop(MEMORY_ATTRIBUTE, None)
        object.__setattr__(self, "attributes", attrs)
        if flag is not None:
            object.__setattr__(self, "memory", self.memory or str(flag).lower() == "true")

    def to_json(self) -> dict[str, Any]:
        """The camelCase object RocketMQ writes, keys in fastjson's (alphabetical) order."""
        attrs = dict(self.attributes)
        if self.memory:
            attrs[MEMORY_ATTRIBUTE] = "true"
        out: dict[str, Any] = {
            "attributes": dict(sorted(attrs.items())),
            "order": self.order,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicFilterType": self.topic_filter_type,
            "topicName": self.topic_name,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }
        out.update(self.extra)
        return dict(sorted(out.items()))

    @classmethod
    def from_json(cls, obj: dict[str, Any], name: str | None = None) -> TopicConfig:
        """Parse one ``topicConfigTable`` entry; missing fields take RocketMQ's defaults."""
        if not isinstance(obj, dict):
            raise ConfigError(f"topic config for {name!r} is not a JSON object")
        topic = obj.get("topicName") or name
        if not topic:
            raise ConfigError("topic config without topicName")
        filter_type = obj.get("topicFilterType", "SINGLE_TAG")
        if filter_type not in _FILTER_TYPES:
            raise ConfigError(f"topic {topic!r}: unknown topicFilterType {filter_type!r}")
        attrs = obj.get("attributes") or {}
        return cls(
            topic_name=str(topic),
            read_queue_nums=int(obj.get("readQueueNums", 16)),
            write_queue_nums=int(obj.get("writeQueueNums", 16)),
            perm=int(obj.get("perm", PERM_READ_WRITE)),
            topic_filter_type=filter_type,
            topic_sys_flag=int(obj.get("topicSysFlag", 0)),
            order=bool(obj.get("order", False)),
            attributes={str(k): str(v) for k, v in attrs.items()},
            extra={k: v for k, v in obj.items() if k not in _TOPIC_KEYS},
        )


@dataclass(frozen=True)
class DataVersion:
    """RocketMQ's ``DataVersion``: bumped (counter + 1, timestamp = now) on every change."""

    counter: int = 0
    timestamp: int = 0
    state_version: int = 0  # 5.x only

    def next_version(self, now_ms: int) -> DataVersion:
        return replace(self, counter=self.counter + 1, timestamp=now_ms)

    def to_json(self, *, v4: bool) -> dict[str, int]:
        if v4:
            return {"counter": self.counter, "timestamp": self.timestamp}
        return {"counter": self.counter, "stateVersion": self.state_version, "timestamp": self.timestamp}

    @classmethod
    def from_json(cls, obj: dict[str, Any] | None) -> DataVersion:
        obj = obj or {}
        # "timestatmp" is the spelling of RocketMQ releases before 4.4; read it too.
        ts = obj.get("timestamp", obj.get("timestatmp", 0))
        return cls(int(obj.get("counter", 0)), int(ts), int(obj.get("stateVersion", 0)))


def _write_text(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def read_text(path: str) -> str | None:
    """``MixAll.file2String``: the content, or None when the file does not exist (bytes that
    are not UTF-8 read as U+FFFD, as Java's ``new String(bytes, UTF-8)`` reads them)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return None


def string_to_file(text: str, path: str, *, rocketmq_version: str = "4.9.8") -> None:
    """``MixAll.string2File`` of the given RocketMQ version (see the module docstring)."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    if rocketmq_version.startswith("4."):
        tmp = path + ".tmp"
        _write_text(tmp, text)
        prev = read_text(path)
        if prev is not None:
            _write_text(path + ".bak", prev)
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
        os.replace(tmp, path)
        return
    prev = read_text(path)
    if prev is not None:
        _write_text(path + ".bak", prev)
    _write_text(path, text)


def load_config(path: str, decode: Callable[[str], None],
                errors: tuple[type[Exception], ...]) -> tuple[bool, str | None]:
    """``ConfigManager.load``: ``decode`` the text of ``path``, or, when it is missing, empty or
    ``decode`` raises one of ``errors``, of ``path + ".bak"``. Returns ``(ok, loaded_from)``:
    ``"file"``, ``"bak"``, or None when neither has content (still ok); ok is False only when
    the ``.bak`` it had to read is bad too."""
    text = read_text(path)
    if text:
        try:
            decode(text)
            return True, "file"
        except errors as e:
            log.warning("%s: %s; reading %s.bak", path, e, os.path.basename(path))
    text = read_text(path + ".bak")
    if not text:
        return True, None
    try:
        decode(text)
    except errors as e:
        log.error("%s.bak: %s", path, e)
        return False, None
    return True, "bak"


class TopicConfigManager:
    """The topic table of one broker, persisted as ``<config_dir>/topics.json``.

    ``config_dir`` is the store's ``config`` directory (``<root>/config``; see
    :meth:`for_store`). ``update``, ``create_if_absent`` and ``delete`` bump ``data_version``
    and persist at once, as RocketMQ does; ``persist`` alone does not bump it.
    """

    FILE_NAME = "topics.json"

    def __init__(self, config_dir: str | os.PathLike[str], *, rocketmq_version: str = "4.9.8",
                 clock: Clock | None = None) -> None:
        self.config_dir = os.fspath(config_dir)
        self.path = os.path.join(self.config_dir, self.FILE_NAME)
        self.rocketmq_version = rocketmq_version
        self.clock: Clock = clock or SystemClock()
        self.data_version = DataVersion()
        self.loaded_from: str | None = None  # "file", "bak" or None (nothing loaded)
        self.extra: dict[str, Any] = {}  # top-level JSON fields rmqlab does not know
        self._table: dict[str, TopicConfig] = {}
        #: topics whose config says ``queue.type=BatchCQ`` (5.x only: 4.9.8's TopicConfig drops
        #: attributes), kept current by every change so readers test membership without the lock
        self.batch_cq_topics: frozenset[str] = frozenset()
        self._lock = threading.RLock()

    @classmethod
    def for_store(cls, store_root: str | os.PathLike[str], **kwargs: Any) -> TopicConfigManager:
        """The manager of ``<store_root>/config/topics.json``."""
        return cls(os.path.join(os.fspath(store_root), "config"), **kwargs)

    @property
    def v4(self) -> bool:
        return self.rocketmq_version.startswith("4.")

    # ------------------------------------------------------------------ load / persist
    def load(self) -> bool:
        """``ConfigManager.load``: the file, else its ``.bak``; False only if the .bak is bad."""
        with self._lock:
            ok, self.loaded_from = load_config(self.path, self._decode,
                                               (ValueError, ConfigError, TypeError, AttributeError))
            return ok

    def _decode(self, text: str) -> None:
        obj = json.loads(text)
        if not isinstance(obj, dict):
            raise ConfigError(f"{self.path}: not a JSON object")
        raw_table = obj.get("topicConfigTable") or {}
        if not isinstance(raw_table, dict):
            raise ConfigError(f"{self.path}: topicConfigTable is not an object")
        table = {name: TopicConfig.from_json(entry, name) for name, entry in raw_table.items()}
        self._table = table
        self._refresh_batch_cq()
        self.data_version = DataVersion.from_json(obj.get("dataVersion"))
        self.extra = {k: v for k, v in obj.items() if k not in ("dataVersion", "topicConfigTable")}

    def encode(self) -> str:
        """The file content: fastjson pretty format (tabs, no space after ``:``)."""
        with self._lock:
            obj: dict[str, Any] = {
                "dataVersion": self.data_version.to_json(v4=self.v4),
                "topicConfigTable": {name: cfg.to_json() for name, cfg in self._table.items()},
            }
            obj.update(self.extra)
            obj = dict(sorted(obj.items()))
        return json.dumps(obj, indent="\t", separators=(",", ":"), ensure_ascii=False)

    def persist(self) -> None:
        """Write the table with ``MixAll.string2File`` semantics."""
        with self._lock:
            string_to_file(self.encode(), self.path, rocketmq_version=self.rocketmq_version)

    # ------------------------------------------------------------------ table
    def get(self, topic: str) -> TopicConfig | None:
        with self._lock:
            return self._table.get(topic)

    def topics(self) -> list[str]:
        """Topic names, sorted."""
        with self._lock:
            return sorted(self._table)

    def is_memory_topic(self, topic: str) -> bool:
        cfg = self.get(topic)
        return cfg is not None and cfg.memory

    def update(self, cfg: TopicConfig) -> TopicConfig | None:
        """Put ``cfg`` (replacing the topic's old config, which is returned), bump, persist."""
        validate_topic(cfg.topic_name)
        with self._lock:
            old = self._table.get(cfg.topic_name)
            self._table[cfg.topic_name] = cfg
            self._changed()
            return old

    def create_if_absent(self, topic: str, queue_nums: int = 4, *, memory: bool = False,
                         attributes: dict[str, str] | None = None) -> TopicConfig:
        """The topic's config, created with ``queue_nums`` read/write queues if it is new
        (like ``createTopicInSendMessageMethod`` with ``defaultTopicQueueNums`` = 4) and
        ``attributes`` (e.g. ``{"queue.type": "BatchCQ"}``, stored in topics.json as RocketMQ does)."""
        validate_topic(topic)
        with self._lock:
            cfg = self._table.get(topic)
            if cfg is None:
                cfg = TopicConfig(topic, read_queue_nums=queue_nums, write_queue_nums=queue_nums,
                                  memory=memory, attributes=dict(attributes or {}))
                self._table[topic] = cfg
                self._changed()
            return cfg

    def delete(self, topic: str) -> TopicConfig | None:
        """Remove a topic (``deleteTopicConfig``); returns its config, or None if unknown."""
        with self._lock:
            old = self._table.pop(topic, None)
            if old is not None:
                self._changed()
            return old

    def _refresh_batch_cq(self) -> None:
        self.batch_cq_topics = frozenset() if self.v4 else frozenset(
            name for name, cfg in self._table.items() if cfg.batch_cq)

    def _changed(self) -> None:
        self._refresh_batch_cq()
        self.data_version = self.data_version.next_version(self.clock.now_ms())
        self.persist()

    def __contains__(self, topic: object) -> bool:
        with self._lock:
            return topic in self._table

    def __len__(self) -> int:
        with self._lock:
            return len(self._table)
