"""MemoryMessageStore: memory topics, held in RAM only, with a byte threshold and eviction.

RocketMQ has proposed (not released) topics whose messages skip the disk. rmqlab's design:

* A memory topic's messages never touch the CommitLog, ConsumeQueue or index. Each
  ``topic``/``queueId`` is one in-memory queue of **encoded CommitLog records**, made by the
  CommitLog's own ``encode_record`` so the bytes are those a CommitLog would hold, with
  QUEUEOFFSET@20 set, STORETIMESTAMP set, and PHYSICALOFFSET@28 = -1 ("not in the CommitLog").
  ``codec.decode_message`` reads them like any record.
* ``message_total_size`` counts the record bytes held. The ``threshold`` is
  ``memory_store_max_bytes`` if set, else ``memory_store_max_ratio`` x the available memory
  reported by the memory probe when the store was built (``refresh_threshold()`` asks again).
  It is read once rather than on every put because the store's own growth lowers the
  available memory, and a threshold that shrinks as it fills would evict in a feedback loop.
* A put that would take ``message_total_size`` past the threshold first evicts: the oldest
  message (smallest store sequence number) of the **same topic**, from whichever of its queues
  holds it; once that topic holds nothing, the oldest message of the whole store; repeated
  until the new message fits. A single record (or batch) larger than the threshold is refused
  with MESSAGE_ILLEGAL and evicts nothing.
* Queue offsets never restart: each queue keeps a base offset (its min offset), raised by every
  eviction from its head, so an evicted offset answers OFFSET_TOO_SMALL with
  ``next_begin_offset`` = the queue's min offset, like a ConsumeQueue whose files were deleted.
* ``get_message`` keeps ``MessageStore.get_message``'s statuses and ``next_begin_offset`` rules
  (spec §9) with every message counted as in memory (``max_transfer_*_on_message_in_memory``).
* The put result's ``msg_id`` is the message's UNIQ_KEY (there is no physical offset to build
  an offset msgId from) and ``wrote_offset`` is -1.

Not supported (refused with MESSAGE_ILLEGAL, so nothing is silently mis-stored): transaction
PREPARED/ROLLBACK records (they get no queue offset in a CommitLog either, and would be held
but never be readable) and delayed messages (``DELAY``; the memory store has no schedule topic).

Thread-safety: one lock guards every queue and counter; puts and gets may come from any
thread. The held records are immutable ``bytes``, so the views a ``GetMessageResult`` returns
stay valid after the lock is released, even if the messages are evicted meanwhile.
``MemoryEvicted`` events, then one ``MemoryPut``, are published after the lock is released (subscribers may
call back).
"""

from __future__ import annotations

import os
import struct
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, NamedTuple, Protocol

from rmqlab.clock import Clock
from rmqlab.codec import flags
from rmqlab.codec.message import PHYSICAL_OFFSET_POSITION, QUEUE_OFFSET_POSITION, MessageRecord, decode_message
from rmqlab.config import MessageStoreConfig
from rmqlab.errors import ConfigError
from rmqlab.events import EventBus, MemoryEvicted, MemoryPut
from rmqlab.store.message import BAD_FIELD_ERRORS, Message, refuse_bad_fields
from rmqlab.store.message_filter import MessageFilter
from rmqlab.store.results import (
    AppendMessageResult,
    AppendMessageStatus,
    GetMessageResult,
    GetMessageStatus,
    PutMessageResult,
    PutMessageStatus,
    StoredMessage,
)

if TYPE_CHECKING:
    from rmqlab.store.commit_log import EncodedRecord

__all__ = ["MemoryMessageStore", "MemoryQueueStats", "RecordEncoder", "available_memory"]

_LONG = struct.Struct(">q")
_TX_MASK = 0xC
_NO_PHYSICAL_OFFSET = -1
_COMPACT_AT = 1024  # compact a queue's list once this many evicted slots lead it


class RecordEncoder(Protocol):
    """What the memory store needs from a CommitLog: its checks and its record encoder."""

    def check_message(self, msg: Message) -> PutMessageResult | None: ...

    def encode_record(self, msg: Message, now: int) -> EncodedRecord | PutMessageResult: ...

    def encode_batch(
        self, msgs: Sequence[Message], check: Callable[[Message], PutMessageResult | None] | None = None
    ) -> list[EncodedRecord] | PutMessageResult: ...


def available_memory() -> int:
    """Bytes of memory available now: ``MemAvailable`` of /proc/meminfo, else ``os.sysconf``
    available pages, else total physical pages; 8 GiB if the platform reports none."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    for pages in ("SC_AVPHYS_PAGES", "SC_PHYS_PAGES"):
        try:
            return os.sysconf("SC_PAGE_SIZE") * os.sysconf(pages)
        except (ValueError, OSError, AttributeError):
            continue
    return 8 * 1024**3


def _decode(data: bytearray) -> MessageRecord:
    rec = decode_message(data, 0)
    if not isinstance(rec, MessageRecord):  # encode_record always makes a message record
        raise TypeError(f"encoder returned a {type(rec).__name__}, not a message record")
    return rec


class MemoryQueueStats(NamedTuple):
    """One memory queue as :meth:`MemoryMessageStore.queue_stats` reports it."""

    topic: str
    queue_id: int
    min_offset: int
    max_offset: int
    held_bytes: int


class _MemoryQueue:
    """One topic/queue: records in queue-offset order from ``base`` (= min offset).

    A list plus a head index rather than a deque: reads index into the middle
    (``offset - base``), which a deque does in O(n) and a list in O(1). Evicted slots are set
    to None and compacted away in bulk. Invariant: ``max_offset == base + live count``.
    """

    __slots__ = ("base", "data", "head", "held_bytes", "queue_id", "seqs", "tags_codes", "topic")

    def __init__(self, topic: str, queue_id: int) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.base = 0
        self.head = 0
        self.held_bytes = 0
        self.data: list[bytes | None] = []
        self.seqs: list[int] = []
        self.tags_codes: list[int] = []

    def __len__(self) -> int:
        return len(self.data) - self.head

    @property
    def max_offset(self) -> int:
        return self.base + len(self)

    def head_seq(self) -> int | None:
        return self.seqs[self.head] if self.head < len(self.seqs) else None

    def append(self, record: bytes, seq: int, tags_code: int) -> None:
        self.data.append(record)
        self.held_bytes += len(record)
        self.seqs.append(seq)
        self.tags_codes.append(tags_code)

    def pop_head(self) -> tuple[int, int]:
        """Drop the oldest record; returns its (queue offset, size)."""
        record = self.data[self.head]
        assert record is not None
        offset = self.base
        self.data[self.head] = None
        self.head += 1
        self.base += 1
        self.held_bytes -= len(record)
        if self.head >= _COMPACT_AT and self.head * 2 >= len(self.data):
            del self.data[: self.head], self.seqs[: self.head], self.tags_codes[: self.head]
            self.head = 0
        return offset, len(record)


class MemoryMessageStore:
    """Messages of memory topics, in RAM, bounded by ``threshold`` bytes (see module docstring).

    ``commit_log_encoder`` is a :class:`~rmqlab.store.commit_log.CommitLog` (or anything with
    its ``check_message`` and ``encode_record``); nothing is ever written through it.
    ``memory_probe`` returns available memory in bytes (default :func:`available_memory`).
    """

    def __init__(
        self,
        commit_log_encoder: RecordEncoder,
        config: MessageStoreConfig,
        *,
        clock: Clock,
        bus: EventBus,
        memory_probe: Callable[[], int] | None = None,
    ) -> None:
        self.encoder = commit_log_encoder
        self.config = config
        self.clock = clock
        self.bus = bus
        self.memory_probe = memory_probe or available_memory
        self._lock = threading.Lock()
        self._queues: dict[str, dict[int, _MemoryQueue]] = {}
        self._total = 0
        self._count = 0
        self._seq = 0
        self._evicted = 0
        self._evicted_bytes = 0
        self._threshold = self._compute_threshold()

    # ------------------------------------------------------------------ threshold
    def _compute_threshold(self) -> int:
        c = self.config
        if c.memory_store_max_bytes is not None:
            if c.memory_store_max_bytes <= 0:
                raise ConfigError(f"memory_store_max_bytes must be positive, not {c.memory_store_max_bytes}")
            return int(c.memory_store_max_bytes)
        if not 0 < c.memory_store_max_ratio <= 1:
            raise ConfigError(f"memory_store_max_ratio must be in (0, 1], not {c.memory_store_max_ratio}")
        return int(c.memory_store_max_ratio * self.memory_probe())

    def refresh_threshold(self) -> int:
        """Ask the probe again (ratio mode); returns the new threshold. Held messages above a
        lowered threshold stay until the next put evicts them."""
        threshold = self._compute_threshold()
        with self._lock:
            self._threshold = threshold
        return threshold

    @property
    def threshold(self) -> int:
        """Most bytes of records held at once."""
        return self._threshold

    @property
    def message_total_size(self) -> int:
        """Bytes of records held now."""
        return self._total

    @property
    def message_count(self) -> int:
        return self._count

    @property
    def evicted_count(self) -> int:
        """Messages evicted since the store was built."""
        return self._evicted

    @property
    def evicted_bytes(self) -> int:
        return self._evicted_bytes

    def topics(self) -> list[str]:
        """Topics that ever received a message, sorted."""
        with self._lock:
            return sorted(self._queues)

    def queue_ids(self, topic: str) -> list[int]:
        with self._lock:
            return sorted(self._queues.get(topic, {}))

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """Queue offset of the oldest held message (= max offset when all are evicted); 0 if
        the queue never had a message."""
        with self._lock:
            q = self._queue(topic, queue_id)
            return q.base if q is not None else 0

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """Queue offset the next message will get; 0 if the queue never had a message."""
        with self._lock:
            q = self._queue(topic, queue_id)
            return q.max_offset if q is not None else 0

    def estimate_message_count(self, topic: str, queue_id: int, from_offset: int, to_offset: int,
                               message_filter: MessageFilter) -> int:
        """How many held messages of queue offsets ``[from_offset, to_offset)`` match
        ``message_filter`` (its consume queue half, on each record's tags code): exact, never
        sampled, as the held tags codes are a list in memory (RocketMQ has no memory topics; this
        is what :meth:`MessageStore.estimate_message_count` answers for one).

        ``from_offset`` below the queue's min offset moves the window up to it, keeping its
        length, as ``DefaultMessageStore.estimateMessageCount`` does for a ConsumeQueue; offsets
        outside ``[min, max)`` (evicted, or not written yet) hold nothing and count 0, as does a
        queue that never had a message. The facade has already answered ``from >= to`` (0) and
        an unfiltered call (``to - from``, the Java fast path that looks at no queue).
        """
        with self._lock:
            q = self._queue(topic, queue_id)
            if q is None:
                return 0
            if from_offset < q.base:
                from_offset, to_offset = q.base, q.base + (to_offset - from_offset)
            end = min(to_offset, q.max_offset)
            if from_offset >= end:
                return 0
            codes = q.tags_codes[q.head + (from_offset - q.base) : q.head + (end - q.base)]
        match = message_filter.is_matched_by_consume_queue  # user code: called outside the lock
        return sum(1 for code in codes if match(code))

    def queue_stats(self) -> list[MemoryQueueStats]:
        """Every queue that ever held a message, sorted by topic and queue id: offsets held
        ``[min_offset, max_offset)`` and their bytes (one consistent view, taken under the lock)."""
        with self._lock:
            return [
                MemoryQueueStats(topic, qid, q.base, q.max_offset, q.held_bytes)
                for topic in sorted(self._queues)
                for qid, q in sorted(self._queues[topic].items())
            ]

    def _queue(self, topic: str, queue_id: int) -> _MemoryQueue | None:
        return self._queues.get(topic, {}).get(queue_id)

    # ------------------------------------------------------------------ writing
    def _check(self, msg: Message) -> PutMessageResult | None:
        bad = self.encoder.check_message(msg)
        if bad is not None:
            return bad
        if msg.sys_flag & _TX_MASK in (flags.TRANSACTION_PREPARED_TYPE, flags.TRANSACTION_ROLLBACK_TYPE):
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL,
                                    reason="memory topics take no transaction PREPARED/ROLLBACK messages")
        if msg.delay_time_level > 0 or (msg.properties or {}).get(flags.PROPERTY_DELAY_TIME_LEVEL):
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL,
                                    reason="memory topics take no delayed (DELAY) messages")
        return None

    def put_message(self, msg: Message) -> PutMessageResult:
        """Hold one message; PUT_OK with its queue offset and UNIQ_KEY as ``msg_id``."""
        bad = self._check(msg)
        if bad is not None:
            return bad
        try:
            enc = self.encoder.encode_record(msg, self.clock.now_ms())
        except BAD_FIELD_ERRORS:
            return refuse_bad_fields([msg])
        if isinstance(enc, PutMessageResult):
            return enc
        return self._put([enc])

    def put_messages(self, msgs: Sequence[Message]) -> PutMessageResult:
        """Hold a batch (one topic and queue) with consecutive queue offsets and one store time;
        all or nothing. ``msg_id`` is the comma-joined UNIQ_KEYs."""
        try:
            encoded = self.encoder.encode_batch(msgs, self._check)
        except BAD_FIELD_ERRORS:
            return refuse_bad_fields(msgs)
        if isinstance(encoded, PutMessageResult):
            return encoded
        return self._put(encoded)

    def _put(self, encoded: list[EncodedRecord]) -> PutMessageResult:
        total = sum(len(e.data) for e in encoded)
        if total > self._threshold:
            return self._too_big(total)
        # Decode outside the lock: UNIQ_KEY for the msg id, tags code for the filter.
        decoded = [_decode(e.data) for e in encoded]
        topic, queue_id = decoded[0].topic, decoded[0].queue_id
        evicted: list[MemoryEvicted] = []
        with self._lock:
            if total > self._threshold:  # refresh_threshold may have lowered it meanwhile
                return self._too_big(total)
            while self._total + total > self._threshold:
                evicted.append(self._evict_one(topic))
            now = self.clock.now_ms()
            q = self._queues.setdefault(topic, {}).get(queue_id)
            if q is None:
                q = self._queues[topic][queue_id] = _MemoryQueue(topic, queue_id)
            first_offset = q.max_offset
            for enc, rec in zip(encoded, decoded, strict=True):
                data = enc.data
                _LONG.pack_into(data, QUEUE_OFFSET_POSITION, q.max_offset)
                _LONG.pack_into(data, PHYSICAL_OFFSET_POSITION, _NO_PHYSICAL_OFFSET)
                _LONG.pack_into(data, enc.ts_pos, now)
                self._seq += 1
                q.append(bytes(data), self._seq, rec.tags_code)
            self._total += total
            self._count += len(encoded)
        if self.bus.active:
            for event in evicted:
                self.bus.publish(event)
            self.bus.publish(MemoryPut(topic, queue_id, first_offset, len(encoded), total))
        msg_id = ",".join(r.uniq_key or "" for r in decoded)
        result = AppendMessageResult(AppendMessageStatus.PUT_OK, _NO_PHYSICAL_OFFSET, total, msg_id, now,
                                     first_offset, len(encoded))
        return PutMessageResult(PutMessageStatus.PUT_OK, result)

    def _too_big(self, total: int) -> PutMessageResult:
        return PutMessageResult(
            PutMessageStatus.MESSAGE_ILLEGAL,
            reason=f"{total} bytes of records exceed the memory store threshold {self._threshold}",
        )

    def _evict_one(self, topic: str) -> MemoryEvicted:
        """Drop the oldest message of ``topic``, or of the whole store if ``topic`` holds none.

        Scans queue heads (each queue's oldest record): a topic has a handful of queues, and the
        store-wide scan only runs while the putting topic holds nothing. Caller holds the lock
        and guarantees the store holds something (``_total`` > 0).
        """
        victim = self._oldest(self._queues.get(topic, {}).values())
        if victim is None:
            victim = self._oldest(q for queues in self._queues.values() for q in queues.values())
        assert victim is not None, "eviction with an empty memory store"
        offset, size = victim.pop_head()
        self._total -= size
        self._count -= 1
        self._evicted += 1
        self._evicted_bytes += size
        return MemoryEvicted(victim.topic, victim.queue_id, offset, size)

    @staticmethod
    def _oldest(queues: Iterable[_MemoryQueue]) -> _MemoryQueue | None:
        best: _MemoryQueue | None = None
        best_seq = 0
        for q in queues:
            seq = q.head_seq()
            if seq is not None and (best is None or seq < best_seq):
                best, best_seq = q, seq
        return best

    # ------------------------------------------------------------------ reading
    def _is_the_batch_full(self, size: int, max_msg_nums: int, buffer_total: int, message_total: int) -> bool:
        """4.9.8's ``isTheBatchFull`` with every message in memory."""
        if buffer_total == 0 or message_total == 0:
            return False
        if max_msg_nums <= message_total:
            return True
        c = self.config
        return (buffer_total + size > c.max_transfer_bytes_on_message_in_memory
                or message_total > c.max_transfer_count_on_message_in_memory - 1)

    def get_message(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_msg_nums: int,
        message_filter: MessageFilter | None = None,
    ) -> GetMessageResult:
        """Up to ``max_msg_nums`` messages from queue ``offset``, with MessageStore's statuses.

        Messages are ``StoredMessage(None, view, -1, size)``: read-only views of the held
        records (``commit_log_offset`` -1); ``release()`` is a no-op but harmless.
        """
        result = GetMessageResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE, next_begin_offset=0)
        with self._lock:
            q = self._queue(topic, queue_id)
            if q is None:
                return result
            min_offset, max_offset = q.base, q.max_offset
            result.min_offset, result.max_offset = min_offset, max_offset
            if max_offset == 0:
                status, next_begin = GetMessageStatus.NO_MESSAGE_IN_QUEUE, 0
            elif offset < min_offset:
                status, next_begin = GetMessageStatus.OFFSET_TOO_SMALL, min_offset
            elif offset == max_offset:
                status, next_begin = GetMessageStatus.OFFSET_OVERFLOW_ONE, offset
            elif offset > max_offset:
                status, next_begin = GetMessageStatus.OFFSET_OVERFLOW_BADLY, max_offset
            else:
                status, next_begin = self._scan(q, offset, max_msg_nums, message_filter, result)
        result.status = status
        result.next_begin_offset = next_begin
        return result

    def _scan(self, q: _MemoryQueue, offset: int, max_msg_nums: int, message_filter: MessageFilter | None,
              result: GetMessageResult) -> tuple[GetMessageStatus, int]:
        status = GetMessageStatus.NO_MATCHED_MESSAGE
        window = self.config.get_message_window_units(max_msg_nums)  # as a ConsumeQueue scan's
        start = q.head + (offset - q.base)
        end = min(len(q.data), start + window)
        i = start
        while i < end:
            record = q.data[i]
            assert record is not None
            size = len(record)
            if self._is_the_batch_full(size, max_msg_nums, result.buffer_total_size, len(result.messages)):
                break
            view = memoryview(record)
            if message_filter is not None and not (
                message_filter.is_matched_by_consume_queue(q.tags_codes[i])
                and message_filter.is_matched_by_commit_log(view)
            ):
                result.filtered_count += 1
                i += 1
                continue
            result.messages.append(StoredMessage(None, view, _NO_PHYSICAL_OFFSET, size))
            result.buffer_total_size += size
            status = GetMessageStatus.FOUND
            i += 1
        return status, offset + (i - start)
