"""Multi-dispatch (LMQ) units: one record, units in several consume queues (spec §3.2).

A broker with ``enableMultiDispatch`` (RocketMQ MQTT, light message queues with ``enableLmq``)
stores each such message once, with two properties written at put time:

* ``INNER_MULTI_DISPATCH`` -- the names of the extra queues, ``,``-separated;
* ``INNER_MULTI_QUEUE_OFFSET`` -- the queue offset the message got in each, in the same order.

Dispatch then appends the record's ``(offset, size, tagsCode)`` unit to each named queue at its
offset: queue id 0 for a ``%LMQ%`` name when ``enableLmq`` is on, else the record's own queue
id. Such a unit points at a record of *another* topic and queue offset, and is still right.
Readers that check units against records (``verify``, the Spark audit) use
:func:`is_multi_dispatch_unit` to tell these apart from damage. Pure: no IO.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from rmqlab.codec.flags import (
    PROPERTY_INNER_MULTI_DISPATCH,
    PROPERTY_INNER_MULTI_QUEUE_OFFSET,
    SCHEDULE_TOPIC,
    TIMER_TOPIC,
)
from rmqlab.codec.names import is_lmq_topic

__all__ = [
    "MULTI_DISPATCH_QUEUE_SPLITTER",
    "dispatches_multi",
    "is_multi_dispatch_unit",
    "java_split",
    "multi_dispatch_pairs",
    "multi_dispatch_queue_ids",
]

MULTI_DISPATCH_QUEUE_SPLITTER = ","  # MixAll.MULTI_DISPATCH_QUEUE_SPLITTER
_JAVA_LONG = re.compile(r"[+-]?[0-9]+", re.ASCII)  # what Long.parseLong takes (no spaces, no "_")
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1

MultiDispatchPairs = tuple[tuple[str, int], ...]
#: topics 5.x never multi-dispatches from (``checkMultiDispatchQueue``): the schedule and timer
#: topics hold delayed messages until they are due, retry topics the consumer's retries
_V5_NO_MULTI_TOPICS = frozenset({SCHEDULE_TOPIC, TIMER_TOPIC})
_RETRY_PREFIX = "%RETRY%"  # MixAll.RETRY_GROUP_TOPIC_PREFIX


def dispatches_multi(topic: str, rocketmq_version: str) -> bool:
    """Whether a record of ``topic`` has its multi-dispatch units written: always in 4.9.8;
    5.x skips the schedule and timer topics and ``%RETRY%`` topics."""
    if rocketmq_version == "4.9.8":
        return True
    return topic not in _V5_NO_MULTI_TOPICS and not topic.startswith(_RETRY_PREFIX)


def java_split(text: str, sep: str) -> list[str]:
    """Java's ``String.split`` with a one-character literal: trailing empty strings dropped
    (``"a,b,"`` -> ``["a", "b"]``, ``","`` -> ``[]``), a string without ``sep`` is itself."""
    if sep not in text:
        return [text]
    parts = text.split(sep)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def _parse_long(text: str) -> int | None:
    if not _JAVA_LONG.fullmatch(text):
        return None
    value = int(text)
    return value if _LONG_MIN <= value <= _LONG_MAX else None


def multi_dispatch_pairs(properties: Mapping[str, str]) -> MultiDispatchPairs:
    """The ``(queue name, queue offset)`` pairs a record asks to be dispatched to; ``()`` when
    it asks for none or the two properties cannot be read as RocketMQ's dispatcher reads them
    (blank, different counts, an offset ``Long.parseLong`` rejects): its dispatch then writes
    no extra unit either (it logs an error or throws)."""
    queues = properties.get(PROPERTY_INNER_MULTI_DISPATCH)
    offsets = properties.get(PROPERTY_INNER_MULTI_QUEUE_OFFSET)
    if not queues or not queues.strip() or offsets is None:
        return ()
    names = java_split(queues, MULTI_DISPATCH_QUEUE_SPLITTER)
    values = java_split(offsets, MULTI_DISPATCH_QUEUE_SPLITTER)
    if len(names) != len(values):
        return ()
    parsed = [_parse_long(v) for v in values]
    if None in parsed:
        return ()
    return tuple(zip(names, parsed, strict=True))  # type: ignore[arg-type]


def multi_dispatch_queue_ids(name: str, record_queue_id: int) -> tuple[int, ...]:
    """Queue ids a unit for queue ``name`` may sit in: the record's own, and 0 for an LMQ name
    (which one depends on the broker's ``enableLmq``, which the store directory does not say)."""
    if is_lmq_topic(name) and record_queue_id != 0:
        return (record_queue_id, 0)
    return (record_queue_id,)


def is_multi_dispatch_unit(pairs: MultiDispatchPairs, record_queue_id: int, topic: str, queue_id: int,
                           queue_offset: int) -> bool:
    """Whether a unit of ``topic``/``queue_id`` at ``queue_offset`` is one the record's
    multi-dispatch pairs put there (size and tags code are checked by the caller as usual)."""
    return any(
        name == topic and offset == queue_offset and queue_id in multi_dispatch_queue_ids(name, record_queue_id)
        for name, offset in pairs
    )
