"""Every file and directory name rule of a store, and topic-name validation (spec 1).

Pure string/path arithmetic (no IO). Validating topics here is what keeps a topic such as
``../x`` from escaping the store directory.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
from collections import Counter
from collections.abc import Iterable
from itertools import pairwise

from rmqlab.errors import InvalidTopic

__all__ = [
    "COMPACTION_DIR",
    "CONSUME_QUEUE_EXT_DIR",
    "LONG_MAX",
    "RETRY_GROUP_TOPIC_PREFIX",
    "TOPIC_MAX_LENGTH",
    "consume_queue_dir",
    "consume_queue_path",
    "index_file_name",
    "infer_file_size",
    "is_lmq_topic",
    "is_rocksdb_listing",
    "is_system_topic",
    "offset_overflow",
    "offset_to_file_name",
    "parse_index_file_name",
    "parse_offset_file_name",
    "roll_next_file",
    "validate_topic",
]

TOPIC_MAX_LENGTH = 127  # TopicValidator.TOPIC_MAX_LENGTH
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"  # MixAll.RETRY_GROUP_TOPIC_PREFIX: %RETRY%<consumer group>
CONSUME_QUEUE_EXT_DIR = "consumequeue_ext"  # StorePathConfigHelper.getStorePathConsumeQueueExt
BATCH_CONSUME_QUEUE_DIR = "batchconsumequeue"  # 5.x BatchConsumeQueue (spec §3.8), BatchCQ topics
COMPACTION_DIR = "compaction"  # 5.x CompactionStore: compactionLog/, compactionCq/ (cleanup.policy=COMPACTION)

# TopicValidator.SYSTEM_TOPIC_SET (5.x; a broker adds more at run time, all named rmq_sys_*)
SYSTEM_TOPICS = frozenset({
    "TBW102", "SCHEDULE_TOPIC_XXXX", "BenchmarkTest", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRACE_TOPIC",
    "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC", "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT",
    "CHECKPOINT_TOPIC", "RMQ_SYS_TOPIC_CONFIG_SYNC", "RMQ_SYS_CONSUMER_OFFSET_SYNC", "RMQ_SYS_DELAY_OFFSET_SYNC",
    "RMQ_SYS_SUBSCRIPTION_GROUP_SYNC", "RMQ_SYS_MESSAGE_MODE_SYNC", "RMQ_SYS_TIMER_METRICS_SYNC",
})
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
LMQ_PREFIX = "%LMQ%"  # MixAll.LMQ_PREFIX: light message queues, never cleaned as unused
_TOPIC_PATTERN = re.compile(r"[%|a-zA-Z0-9_-]+")
_OFFSET_NAME = re.compile(r"[0-9]{20}")
_INDEX_NAME = re.compile(r"[0-9]{17}")
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
_ONE_MS = _dt.timedelta(milliseconds=1)
_NAME_MAX = 255  # longest directory name most file systems accept


def is_rocksdb_listing(names: Iterable[str]) -> bool:
    """True when a directory's entries are a RocksDB database's: a ``CURRENT`` file naming a
    ``MANIFEST-*`` beside it. 5.x keeps its RocksDB consume queue directly in ``consumequeue/``
    (``storeType=defaultRocksDB``, or beside the file queues with ``rocksdbCQDoubleWriteEnable``;
    spec §1). Pass only the plain files' names: a topic directory named ``CURRENT`` is a topic."""
    names = set(names)
    return "CURRENT" in names and any(n.startswith("MANIFEST-") for n in names)


def offset_to_file_name(offset: int) -> str:
    """``UtilAll.offset2FileName``: the offset in decimal, zero-padded to 20 digits."""
    if offset < 0:
        raise ValueError(f"file offsets are non-negative, got {offset}")
    return f"{offset:020d}"


#: Java's Long.MAX_VALUE: the largest offset (and file name) RocketMQ can hold
LONG_MAX = (1 << 63) - 1


def parse_offset_file_name(name: str) -> int | None:
    """Inverse of :func:`offset_to_file_name`; None if ``name`` is not exactly 20 digits or
    names an offset past ``Long.MAX_VALUE`` (Java's ``parseLong`` throws on it)."""
    if not _OFFSET_NAME.fullmatch(name):
        return None
    value = int(name)
    return value if value <= LONG_MAX else None


def offset_overflow(start: int, file_size: int) -> str | None:
    """Why the records of a CommitLog file named ``start`` are not read, or None: the file ends
    past ``Long.MAX_VALUE`` (``start + file_size`` overflows a signed 64-bit long). RocketMQ
    computes that end (a file's max offset, the next file's name), so it could never have
    written such a file (a stray or renamed one); its offsets are no log offsets."""
    end = start + file_size
    if end <= LONG_MAX:
        return None
    return (f"file name {start} + file size {file_size} = {end} is past Long.MAX_VALUE ({LONG_MAX}): its "
            "offsets overflow a signed 64-bit long, RocketMQ could never have written this file")


def roll_next_file(offset: int, file_size: int) -> int:
    """``rollNextFile``: start of the file after the one holding ``offset`` (golden #21).

    Works for byte offsets with a file size in bytes, and for CQ unit numbers with units per file.
    """
    return offset + file_size - offset % file_size


def index_file_name(ms: int, tz: _dt.tzinfo) -> str:
    """``timeMillisToHumanString``: ``yyyyMMddHHmmssSSS`` of ``ms`` in ``tz`` (golden #16)."""
    d = (_EPOCH + _dt.timedelta(milliseconds=ms)).astimezone(tz)
    return (
        f"{d.year:04d}{d.month:02d}{d.day:02d}{d.hour:02d}{d.minute:02d}{d.second:02d}"
        f"{d.microsecond // 1000:03d}"
    )


def parse_index_file_name(name: str, tz: _dt.tzinfo) -> int | None:
    """Epoch ms that :func:`index_file_name` would have turned into ``name``; None if not one."""
    if not _INDEX_NAME.fullmatch(name):
        return None
    try:
        d = _dt.datetime(
            int(name[0:4]), int(name[4:6]), int(name[6:8]), int(name[8:10]),
            int(name[10:12]), int(name[12:14]), int(name[14:17]) * 1000, tzinfo=tz,
        )  # fmt: skip
    except ValueError:
        return None
    return (d - _EPOCH) // _ONE_MS


def validate_topic(topic: str, *, max_length: int = TOPIC_MAX_LENGTH) -> None:
    """``TopicValidator.validateTopic``: not blank, only ``[%|a-zA-Z0-9_-]``, at most 127 chars.

    Raises :class:`~rmqlab.errors.InvalidTopic`. The charset excludes ``.`` and ``/``, so a valid
    topic is always a single, safe path component. ``max_length`` lets the store accept the
    longer retry/DLQ/LMQ names that the broker itself creates (stored as V2 records).
    """
    if not topic or not topic.strip():
        raise InvalidTopic(topic, "the specified topic is blank")
    if not _TOPIC_PATTERN.fullmatch(topic):
        raise InvalidTopic(
            topic,
            "the specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$",
        )
    if len(topic) > max_length:  # ASCII only at this point: chars == UTF-16 units
        raise InvalidTopic(
            topic, f"the specified topic is longer than topic max length {max_length}"
        )


def is_system_topic(topic: str) -> bool:
    """``TopicValidator.isSystemTopic``: in the system set or named ``rmq_sys_*``."""
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)


def is_lmq_topic(topic: str) -> bool:
    """``MixAll.isLmq``: a light message queue (``%LMQ%...``)."""
    return topic.startswith(LMQ_PREFIX)


def consume_queue_dir(root: str | os.PathLike[str], topic: str) -> str:
    """``<root>/consumequeue/<topic>``; the topic is validated (charset, at most 255 chars)."""
    validate_topic(topic, max_length=_NAME_MAX)
    return os.path.join(os.fspath(root), "consumequeue", topic)


def consume_queue_path(root: str | os.PathLike[str], topic: str, queue_id: int) -> str:
    """``<root>/consumequeue/<topic>/<queueId>``, the directory of one queue's CQ files.

    The topic is validated like :func:`validate_topic` but allows up to 255 chars (a directory
    name limit), because the store must also hold broker-made retry/DLQ topics longer than 127.
    """
    if isinstance(queue_id, bool) or not isinstance(queue_id, int) or queue_id < 0:
        raise ValueError(f"queue id must be a non-negative int, got {queue_id!r}")
    return os.path.join(consume_queue_dir(root, topic), str(queue_id))


def infer_file_size(dirs: list[tuple[list[str], list[int]]], default: int) -> int:
    """The file size most of the evidence agrees on, so one damaged file cannot set it.

    ``dirs`` holds each directory's file names (sorted) and sizes. The distance between
    consecutive names is the size wherever a file follows another, whatever bytes the files
    hold: the most common distance wins (on a tie the smallest, since a missing file doubles
    one). With no file following another, the most common file size wins (on a tie the
    largest: a trimmed last file is shorter, never longer). A store of one file per directory
    that was cut or extended cannot be told from one written so: pass the size then."""
    gaps: Counter[int] = Counter()
    sizes: Counter[int] = Counter()
    for names, lengths in dirs:
        offsets = [parse_offset_file_name(n) or 0 for n in names]
        gaps.update(b - a for a, b in pairwise(offsets) if b > a)
        sizes.update(n for n in lengths if n)
    if gaps:
        return max(gaps.items(), key=lambda kv: (kv[1], -kv[0]))[0]
    if sizes:
        return max(sizes.items(), key=lambda kv: (kv[1], kv[0]))[0]
    return default
