"""A producer's message batch: RocketMQ's client batch wire format, encoded once (spec §2.11).

A RocketMQ producer does not send a batch as messages: ``MessageBatch.generateFromList`` checks
the list (one topic, one WAIT value, no delay, no retry topic), gives every message that lacks
one a ``UNIQ_KEY``, and ``MessageDecoder.encodeMessages`` writes them back to back, each as::

    int totalSize | int magic (0) | int bodyCRC (0) | int flag | int bodyLen | body
    | short propertiesLen | properties (the client's map, HashMap order, every pair ends 0x02)

The broker receives those bytes as a ``MessageExtBatch`` (topic, queue, born host and time, sys
flag, reconsume times are batch-level) and turns each inner message into a record.
:class:`MessageBatch` is that request: the bytes plus, computed once while encoding (or parsing),
each message's flag and body/properties positions, so the store never re-parses the layout.

The batch message itself carries properties too (``MessageBatch.properties``, sent in the
request header): ``generateFromList`` sets WAIT (the first message's), and a 5.x producer's
``DefaultMQProducer.batch()`` adds the batch's own UNIQ_KEY (``setUniqID(msgBatch)``; 4.9.x does
not). The 4.9.8 and 5.3.3 broker parses them, adds CLUSTER (and, unlike a single message, keeps
WAIT) and ``MessageExtBatchEncoder`` appends that string to every inner message's properties,
inserting a 0x02 if the inner string does not end with one (:func:`record_properties`). A 4.9.x
``messageProperties2String`` drops the last 0x02, 5.x keeps it: ``client_version`` picks which.

Pure: no IO, no clock. The caller supplies new UNIQ_KEYs (``uniq_key``), e.g. the store's
``CommitLog.new_uniq_key``; message objects are duck-typed (``rmqlab.Message`` fields).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import Any, NamedTuple, Protocol

from rmqlab.codec import flags
from rmqlab.codec.properties import decode_properties, encode_properties, java_hashmap_order, trailing_separator_for

__all__ = [
    "BatchEntry",
    "MessageBatch",
    "broker_batch_properties",
    "client_properties",
    "decode_messages",
    "encode_client_properties",
    "encode_message",
    "encode_messages",
    "record_properties",
]

_HEAD = struct.Struct(">iiiii")  # totalSize, magic, bodyCRC, flag, bodyLen
_SHORT = struct.Struct(">h")
#: bytes of one encoded message besides body and properties (5 ints and the properties length)
MESSAGE_OVERHEAD = _HEAD.size + _SHORT.size
_RETRY_PREFIX = "%RETRY%"
_UNIQ = flags.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_WAIT = flags.PROPERTY_WAIT_STORE_MSG_OK
_TAGS = flags.PROPERTY_TAGS
_KEYS = flags.PROPERTY_KEYS
_SEP2 = flags.PROPERTY_SEPARATOR.encode()


class _MessageLike(Protocol):
    topic: str
    body: bytes
    tags: str | None
    keys: Sequence[str] | str
    properties: Mapping[str, str] | None
    queue_id: int
    flag: int
    born_host: Any
    born_timestamp: int | None
    sys_flag: int
    reconsume_times: int
    prepared_transaction_offset: int
    delay_time_level: int
    wait_store_msg_ok: bool
    uniq_key: str | None


class BatchEntry(NamedTuple):
    """One decoded inner message (``MessageDecoder.decodeMessage``: flag, body, properties)."""

    flag: int
    body: bytes
    properties: dict[str, str]


def client_properties(msg: _MessageLike, uniq_key: str | None) -> dict[str, str]:
    """The producer's properties map of ``msg``, in insertion order: KEYS, TAGS, DELAY, WAIT, the
    user's properties, then UNIQ_KEY (``msg.uniq_key`` or ``uniq_key``) unless a user property
    already sets it. The same map the store's single-message path builds before the broker step."""
    props: dict[str, str] = {}
    keys = msg.keys
    ks = keys if isinstance(keys, str) or not keys else flags.KEY_SEPARATOR.join([k for k in keys if k])
    if ks:
        props[flags.PROPERTY_KEYS] = ks
    if msg.tags:
        props[flags.PROPERTY_TAGS] = msg.tags
    if msg.delay_time_level > 0:
        props[flags.PROPERTY_DELAY_TIME_LEVEL] = str(msg.delay_time_level)
    props[flags.PROPERTY_WAIT_STORE_MSG_OK] = "true" if msg.wait_store_msg_ok else "false"
    if msg.properties:
        props.update(msg.properties)
    uniq = msg.uniq_key or uniq_key
    if _UNIQ not in props and uniq:
        props[_UNIQ] = uniq
    return props


def encode_client_properties(props: Mapping[str, str], client_version: str = "5.3.3") -> bytes:
    """``MessageDecoder.messageProperties2String`` of the client's ``HashMap`` (capacity 16):
    pairs in HashMap iteration order, each ending with 0x02 but (4.9.x) the last."""
    text = "".join([f"{k}\x01{v}\x02" for k in _client_order(tuple(props)) if (v := props[k]) is not None])
    if text and not trailing_separator_for(client_version):
        text = text[:-1]
    return text.encode()


@lru_cache(maxsize=1024)
def _client_order(keys: tuple[str, ...]) -> list[str]:
    """``java_hashmap_order`` of a client map's keys: a handful of distinct key tuples, cached."""
    return java_hashmap_order(keys)


@lru_cache(maxsize=256)
def _broker_batch_order(keys: tuple[str, ...], version: str) -> tuple[str, ...]:
    """Key order of the broker's batch map: the client string's order (its ``HashMap(16)``),
    parsed into the broker's map (4.9.8 ``HashMap()``, 5.x ``HashMap(128)``), CLUSTER put last."""
    wire = java_hashmap_order(keys)
    return tuple(java_hashmap_order([*wire, flags.PROPERTY_CLUSTER], 16 if version == "4.9.8" else 128))


def broker_batch_properties(props: Mapping[str, str] | None, cluster: str, version: str) -> bytes:
    """The batch-level properties string a broker of ``version`` appends to every inner record.

    ``SendMessageProcessor`` (batch): ``string2messageProperties`` of what the producer sent for
    the batch message (``props``, as the client serialised it, so empty values are dropped),
    ``putProperty(CLUSTER)``, no WAIT removal (4.9.8 removes WAIT only for single messages); then
    ``MessageExtBatchEncoder``: ``messageProperties2String`` of that map."""
    sent = decode_properties(encode_client_properties(props, version)) if props else {}
    sent[flags.PROPERTY_CLUSTER] = cluster
    return encode_properties({k: sent[k] for k in _broker_batch_order(tuple(sent), version)},
                             trailing_separator=trailing_separator_for(version))  # fmt: skip


def record_properties(inner: bytes, batch: bytes) -> bytes:
    """``MessageExtBatchEncoder.encode``'s PROPERTIES of one record (4.9.8, 5.3.3): the inner
    message's string as sent, a 0x02 if both are non-empty and it does not end with one, then
    the batch string. Parsing keeps the later of repeated names, so a batch-level UNIQ_KEY (5.x
    producers) becomes every record's UNIQ_KEY: the one the index and ``query_message`` see."""
    if not batch:
        return inner
    if inner and inner[-1] != 2:
        return inner + _SEP2 + batch
    return inner + batch


def encode_message(flag: int, body: bytes, properties: bytes) -> bytes:
    """``MessageDecoder.encodeMessage``: one inner message (magic and body CRC sent as 0)."""
    size = MESSAGE_OVERHEAD + len(body) + len(properties)
    return b"".join((_HEAD.pack(size, 0, 0, flag, len(body)), body, _SHORT.pack(len(properties)), properties))


def encode_messages(
    msgs: Sequence[_MessageLike], uniq_key: Callable[[], str] | None = None, client_version: str = "5.3.3"
) -> tuple[bytes, list[str]]:
    """``encodeMessages`` of ``msgs`` with the client's UNIQ_KEY rule; returns the bytes and each
    message's UNIQ_KEY. ValueError when a UNIQ_KEY is needed (a message's; a 5.x batch's own)
    and ``uniq_key`` is None."""
    batch = MessageBatch.from_messages(msgs, uniq_key, topic=msgs[0].topic if msgs else "",
                                       client_version=client_version)  # fmt: skip
    return batch.body, list(batch.uniq_keys)


def _parse_rows(body: bytes) -> list[tuple[int, int, int, int, int]]:
    """``decodeMessages``' walk: ``(flag, body_offset, body_length, properties_offset,
    properties_end)`` per message. Like Java, ``totalSize`` is not used; ValueError if the
    lengths run past the end or are negative."""
    rows = []
    pos, end = 0, len(body)
    head, short = _HEAD.unpack_from, _SHORT.unpack_from
    while pos < end:
        if pos + MESSAGE_OVERHEAD > end:
            raise ValueError(f"truncated batch message at {pos}")
        _size, _magic, _crc, flag, blen = head(body, pos)
        bo = pos + _HEAD.size
        if blen < 0 or bo + blen + 2 > end:
            raise ValueError(f"bad body length {blen} at {pos}")
        plen = short(body, bo + blen)[0]
        po = bo + blen + 2
        if plen < 0 or po + plen > end:
            raise ValueError(f"bad properties length {plen} at {pos}")
        rows.append((flag, bo, blen, po, po + plen))
        pos = po + plen
    return rows


def decode_messages(body: bytes) -> list[BatchEntry]:
    """``MessageDecoder.decodeMessages``: every inner message of a batch body."""
    rows = _parse_rows(body)
    return [BatchEntry(f, body[bo : bo + bl], decode_properties(body[po:pe])) for f, bo, bl, po, pe in rows]


class MessageBatch:
    """What a producer hands the store for ``put_messages``: the encoded batch and its header.

    Built by :meth:`from_messages` (a producer encoding messages) or from received bytes (the
    constructor, or :meth:`from_body`). Per message, computed once: ``flags``,
    ``body_lengths``, and slices of ``body``: ``body_slices`` (the body), ``length_body_slices``
    (its 4-byte length field and the body, laid out as in a CommitLog record),
    ``properties_slices`` (the client properties string); ``uniq_keys[i]`` is the UNIQ_KEY
    property of message ``i`` (None if it has none), ``parsed[i]`` its (TAGS, KEYS, UNIQ_KEY) as
    parsing its properties string gives them (the store's dispatch hints, never re-parsed).
    The header fields are batch-level, as in ``MessageExtBatch``: ``born_timestamp`` None means
    the store's "now", as for :class:`rmqlab.Message`; ``properties`` is the batch message's own
    map as the producer sent it (WAIT, a 5.x producer's batch UNIQ_KEY), to which the broker adds
    CLUSTER.
    """

    __slots__ = ("body", "body_lengths", "body_slices", "born_host", "born_timestamp", "flags", "length_body_slices",
                 "parsed", "properties", "properties_slices", "queue_id", "reconsume_times", "sys_flag", "topic",
                 "uniq_keys")

    def __init__(
        self, topic: str, queue_id: int, body: bytes, *, born_host: tuple[str, int] | str = ("127.0.0.1", 0),
        born_timestamp: int | None = None, sys_flag: int = 0, reconsume_times: int = 0,
        properties: Mapping[str, str] | None = None,
    ) -> None:  # fmt: skip
        """A batch from its wire bytes (what the broker receives); ValueError if they are cut."""
        body = bytes(body)
        rows = _parse_rows(body)
        maps = [decode_properties(body[po:pe]) for *_, po, pe in rows]
        self._set(topic, queue_id, body, rows, [p.get(_UNIQ) for p in maps], born_host, born_timestamp, sys_flag,
                  reconsume_times, properties, [(p.get(_TAGS), p.get(_KEYS), p.get(_UNIQ)) for p in maps])  # fmt: skip

    def _set(
        self, topic: str, queue_id: int, body: bytes, rows: Sequence[tuple[int, int, int, int, int]],
        uniq_keys: Sequence[str | None], born_host: tuple[str, int] | str, born_timestamp: int | None,
        sys_flag: int, reconsume_times: int, properties: Mapping[str, str] | None,
        parsed: Sequence[tuple[str | None, str | None, str | None]],
    ) -> None:  # fmt: skip
        self.topic = topic
        self.queue_id = queue_id
        self.body = body
        self.flags = [r[0] for r in rows]
        self.body_lengths = [r[2] for r in rows]
        self.body_slices = [slice(bo, bo + bl) for _f, bo, bl, _po, _pe in rows]
        self.length_body_slices = [slice(bo - 4, bo + bl) for _f, bo, bl, _po, _pe in rows]
        self.properties_slices = [slice(po, pe) for *_, po, pe in rows]
        self.uniq_keys = tuple(uniq_keys)
        self.parsed = tuple(parsed)
        self.born_host = born_host
        self.born_timestamp = born_timestamp
        self.sys_flag = sys_flag
        self.reconsume_times = reconsume_times
        self.properties = dict(properties) if properties else {}

    def __len__(self) -> int:
        return len(self.flags)

    def __repr__(self) -> str:
        return f"MessageBatch({self.topic!r}, queue {self.queue_id}, {len(self)} messages, {len(self.body)} B)"

    @property
    def rows(self) -> list[tuple[int, int, int, int, int]]:
        """``(flag, body_offset, body_length, properties_offset, properties_end)`` per message."""
        return [(f, b.start, b.stop - b.start, p.start, p.stop)
                for f, b, p in zip(self.flags, self.body_slices, self.properties_slices, strict=True)]  # fmt: skip

    @classmethod
    def from_body(
        cls, topic: str, queue_id: int, body: bytes, *, born_host: tuple[str, int] | str = ("127.0.0.1", 0),
        born_timestamp: int | None = None, sys_flag: int = 0, reconsume_times: int = 0,
        properties: Mapping[str, str] | None = None,
    ) -> MessageBatch:  # fmt: skip
        """The constructor, named: a batch from the bytes a broker receives."""
        return cls(topic, queue_id, body, born_host=born_host, born_timestamp=born_timestamp, sys_flag=sys_flag,
                   reconsume_times=reconsume_times, properties=properties)  # fmt: skip

    @classmethod
    def from_messages(
        cls, msgs: Sequence[_MessageLike], uniq_key: Callable[[], str] | None = None, *, topic: str | None = None,
        client_version: str = "5.3.3",
    ) -> MessageBatch:
        """Encode ``msgs`` as a producer of ``client_version`` does (``DefaultMQProducer.batch()``).

        Refused with ValueError as the client refuses: mixed topics or WAIT values, a delay level,
        a retry topic; and what the wire format cannot carry per message: mixed queue ids, born
        hosts, born timestamps, sys flags or reconsume times, a prepared transaction offset. A
        message without UNIQ_KEY gets ``uniq_key()`` (ValueError if None); then a 5.x producer
        draws the batch's own UNIQ_KEY (so ``uniq_key`` is required there). ``properties``: WAIT
        of the first message, and that UNIQ_KEY. ``topic`` names the topic of an empty batch
        (which the store then refuses, as it refuses an empty list).
        """
        trailing_separator_for(client_version)  # validates it
        batch = cls.__new__(cls)
        if not msgs:
            if topic is None:
                raise ValueError("an empty batch needs topic=")
            batch._set(topic, 0, b"", (), (), ("127.0.0.1", 0), None, 0, 0, None, ())
            return batch
        first = msgs[0]
        if topic is not None and topic != first.topic:
            raise ValueError(f"topic {topic!r} but the messages are for {first.topic!r}")
        if first.topic.startswith(_RETRY_PREFIX):
            raise ValueError("Retry Group is not supported for batching")
        header = (first.topic, first.queue_id, first.born_host, first.born_timestamp, first.sys_flag,
                  first.reconsume_times, first.wait_store_msg_ok)  # fmt: skip
        pieces: list[bytes] = []
        rows = []
        uniqs: list[str | None] = []
        parsed: list[tuple[str | None, str | None, str | None]] = []
        pos = 0
        for m in msgs:
            if (m.topic, m.queue_id, m.born_host, m.born_timestamp, m.sys_flag, m.reconsume_times,
                    m.wait_store_msg_ok) != header:  # fmt: skip
                raise ValueError("the messages of a batch must share topic, queue, born host and time, sys flag, "
                                 "reconsume times and WAIT")  # fmt: skip
            if m.delay_time_level > 0:
                raise ValueError("TimeDelayLevel is not supported for batching")
            if m.prepared_transaction_offset:
                raise ValueError("a batch cannot carry a prepared transaction offset")
            uniq = None
            if not m.uniq_key and not (m.properties and m.properties.get(_UNIQ)):
                if uniq_key is None:
                    raise ValueError("a message without UNIQ_KEY needs uniq_key=")
                uniq = uniq_key()
            props = client_properties(m, uniq)
            uniqs.append(props.get(_UNIQ))
            data = encode_client_properties(props, client_version)
            names = (props.get(_TAGS), props.get(_KEYS), props.get(_UNIQ))
            # without user properties every name is fixed and every value non-empty: with no
            # separator in the three values the parse gives the map back; else parse the bytes
            if m.properties or not all(v is None or ("\x01" not in v and "\x02" not in v) for v in names):
                p = decode_properties(data)
                names = (p.get(_TAGS), p.get(_KEYS), p.get(_UNIQ))
            parsed.append(names)
            body = bytes(m.body)
            if len(data) > 32767:
                raise ValueError(f"properties of {len(data)} bytes exceed 32767")
            bo = pos + _HEAD.size
            po = bo + len(body) + 2
            rows.append((m.flag, bo, len(body), po, po + len(data)))
            pieces.append(encode_message(m.flag, body, data))
            pos = po + len(data)
        own = {_WAIT: "true" if first.wait_store_msg_ok else "false"}
        if client_version != "4.9.8":
            if uniq_key is None:
                raise ValueError("a 5.x producer gives the batch its own UNIQ_KEY: pass uniq_key=")
            own[_UNIQ] = uniq_key()
        batch._set(first.topic, first.queue_id, b"".join(pieces), rows, uniqs, first.born_host, first.born_timestamp,
                   first.sys_flag, first.reconsume_times, own, parsed)  # fmt: skip
        return batch

    def entries(self) -> list[BatchEntry]:
        """Each inner message decoded (flag, body, properties map in wire order)."""
        b = self.body
        return [BatchEntry(f, b[bs], decode_properties(b[ps]))
                for f, bs, ps in zip(self.flags, self.body_slices, self.properties_slices, strict=True)]  # fmt: skip
