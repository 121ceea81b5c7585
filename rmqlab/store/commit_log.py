"""CommitLog: every message of every topic, appended in one sequence of mapped files.

The write path mirrors RocketMQ's ``CommitLog.asyncPutMessage`` + ``doAppend`` (spec §2.13):
encode the record outside the lock with zero placeholders, then under the put lock take the store
timestamp, assign the queue offset from the topic-queue table, patch QUEUEOFFSET@20,
PHYSICALOFFSET@28 and STORETIMESTAMP@48+BH in place, and copy the bytes into the last mapped
file. A record that does not fit (``size + 8 > space left``) leaves an 8-byte blank record
(``int space, int 0xCBD43194``) and goes to offset 0 of the next file.

Thread-safety: ``put_message``/``put_messages`` serialise on ``put_lock``; readers
(``get_message``/``get_data``) hold a reference on the mapped file they read.
"""

from __future__ import annotations

import os
import struct
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from rmqlab.clock import Clock
from rmqlab.codec import flags
from rmqlab.codec._frozen import fast_constructor
from rmqlab.codec.crc import body_crc
from rmqlab.codec.java_hash import java_hash
from rmqlab.codec.message import (
    PHYSICAL_OFFSET_POSITION,
    QUEUE_OFFSET_POSITION,
    MessageRecord,
    decode_message,
    encode_message_parts,
    store_timestamp_position,
)
from rmqlab.codec.msg_id import UniqKeyGenerator, create_offset_msg_id, ip_to_bytes
from rmqlab.codec.names import validate_topic
from rmqlab.config import MessageStoreConfig
from rmqlab.errors import InvalidTopic, RmqlabError
from rmqlab.events import Appended, EventBus, Rolled
from rmqlab.files.mapped_file_queue import MappedFileQueue
from rmqlab.store.message import Message, build_properties_and_map, parse_host
from rmqlab.store.results import (
    AppendMessageResult,
    AppendMessageStatus,
    PutMessageResult,
    PutMessageStatus,
)

if TYPE_CHECKING:
    from rmqlab.files.allocate_mapped_file_service import AllocateMappedFileService
    from rmqlab.files.mapped_file import MappedFile, SelectMappedBufferResult
    from rmqlab.files.transient_store_pool import TransientStorePool

__all__ = ["CommitLog"]

_BLANK = struct.Struct(">ii")
_LONG = struct.Struct(">q")
_MAX_PROPERTIES_LENGTH = 32767
_NO_FILE = "cannot create the next commit log file"
_TOO_BIG = "record larger than a commit log file"
_INT = struct.Struct(">i")
_TX_MASK = 0xC
_NO_QUEUE_OFFSET = (flags.TRANSACTION_PREPARED_TYPE, flags.TRANSACTION_ROLLBACK_TYPE)
_MAX_DISPATCH_HINTS = 1 << 14  # entries; reput consumes them, a lagging reput just parses
_MAX_HOST_CACHE = 1024
_new_append_result = fast_constructor(AppendMessageResult)
_new_put_result = fast_constructor(PutMessageResult)

#: What the writer knows about a record for its DispatchRequest (see ``CommitLog.dispatch_hints``):
#: ``(size, queue_offset, store_timestamp, store_timestamp_position, (topic, queue_id, tags_code,
#: keys, uniq_key, sys_flag, prepared_transaction_offset, properties))``.
DispatchHint = tuple[int, int, int, int, tuple]


class EncodedRecord:
    """One record encoded outside the lock, with what the lock-holder must patch.

    ``dispatch`` is the record's DispatchRequest fields that do not depend on where and when it is
    written (None when only parsing the stored bytes can tell them, e.g. a delayed message or
    properties with separators in values); ``queue_offset`` is set under the put lock.
    """

    __slots__ = ("batch_size", "data", "dispatch", "gets_queue_offset", "queue_key", "queue_offset", "ts_pos")

    def __init__(self, data: bytearray, queue_key: str, ts_pos: int, gets_queue_offset: bool,
                 batch_size: int, dispatch: tuple | None = None) -> None:
        self.data = data
        self.queue_key = queue_key
        self.ts_pos = ts_pos
        self.gets_queue_offset = gets_queue_offset
        self.batch_size = batch_size  # its size inside a client batch body (encodeMessages)
        self.dispatch = dispatch
        self.queue_offset = 0


class CommitLog:
    """The store's single log. ``topic_queue_table`` maps ``"topic-queueId"`` to the next queue
    offset (4.9.8 keeps it here; the store rebuilds it from the consume queues at load)."""

    def __init__(
        self,
        config: MessageStoreConfig,
        *,
        clock: Clock,
        bus: EventBus,
        allocate_service: AllocateMappedFileService | None = None,
        transient_store_pool: TransientStorePool | None = None,
        read_only: bool = False,
    ) -> None:
        self.config = config
        self.clock = clock
        self.bus = bus
        self.file_size = config.mapped_file_size_commit_log
        self.mapped_file_queue = MappedFileQueue(
            config.commit_log_dir,
            self.file_size,
            allocate_service,
            read_only=read_only,
            bus=bus,
            name="commitlog",
            transient_store_pool=transient_store_pool,
        )
        self.topic_queue_table: dict[str, int] = {}
        self.put_lock = threading.Lock()
        self.store_host = parse_host(config.store_host)
        self._msg_id_prefix = create_offset_msg_id(*self.store_host, 0)[:-16]
        self._uniq = UniqKeyGenerator(self.store_host[0], os.getpid() & 0xFFFF, id(self) & 0x7FFFFFFF)
        self._uniq_lock = threading.Lock()
        self._tz = clock.tz()
        self._valid_topics: set[str] = set()
        self.confirm_offset = -1
        self.writeable = True
        self.not_writeable_reason = ""
        self.on_put: Callable[[AppendMessageResult], None] | None = None
        try:
            self._store_ip: bytes | None = ip_to_bytes(self.store_host[0])
        except ValueError:
            self._store_ip = None  # a bad store_host fails each put, as before, not the open
        self._version = 1 if config.is_v4 else None
        self._hosts: dict[tuple[str, int] | str, tuple[bytes, int]] = {}
        # {commit log offset: DispatchHint}, filled under the put lock for every record whose
        # dispatch fields the writer knows; ReputMessageService pops the entry when it reaches
        # exactly that offset and the stored header agrees, and parses the record otherwise.
        # Bounded: cleared when full (a lagging or restarted reput falls back to parsing).
        self.dispatch_hints: dict[int, DispatchHint] = {}

    # ------------------------------------------------------------------ lifecycle
    def load(self) -> bool:
        os.makedirs(self.config.commit_log_dir, exist_ok=True)
        return self.mapped_file_queue.load()

    def shutdown(self) -> None:
        self.mapped_file_queue.shutdown(0)

    def destroy(self) -> None:
        self.mapped_file_queue.destroy()

    # ------------------------------------------------------------------ offsets
    def get_min_offset(self) -> int:
        """First file's start offset; the next file's if the first is being destroyed; -1 if none."""
        first = self.mapped_file_queue.get_first_mapped_file()
        if first is None:
            return -1
        if first.is_available():
            return first.file_from_offset
        return self.roll_next_file(first.file_from_offset)

    def get_max_offset(self) -> int:
        return self.mapped_file_queue.get_max_offset()

    def roll_next_file(self, offset: int) -> int:
        return offset + self.file_size - offset % self.file_size

    def msg_id(self, offset: int) -> str:
        return f"{self._msg_id_prefix}{offset:016X}"

    # ------------------------------------------------------------------ reading
    def get_message(self, offset: int, size: int) -> SelectMappedBufferResult | None:
        """``size`` bytes at absolute ``offset``, or None when not (or no longer) there."""
        mf = self.mapped_file_queue.find_mapped_file_by_offset(offset, offset == 0)
        if mf is None:
            return None
        return mf.select_mapped_buffer(offset % self.file_size, size)

    def select_from(self, offset: int) -> SelectMappedBufferResult | None:
        """From absolute ``offset`` to the read position of its file, found as ``get_message``
        finds it; ``get_message(offset, size)`` is this when ``size`` fits in the result."""
        mf = self.mapped_file_queue.find_mapped_file_by_offset(offset, offset == 0)
        if mf is None:
            return None
        return mf.select_mapped_buffer(offset % self.file_size)

    def get_data(self, offset: int, return_first_on_not_found: bool = False) -> SelectMappedBufferResult | None:
        """From ``offset`` to the read position of the file that holds it."""
        mf = self.mapped_file_queue.find_mapped_file_by_offset(offset, return_first_on_not_found)
        if mf is None:
            return None
        return mf.select_mapped_buffer(offset % self.file_size)

    def look_message(self, offset: int) -> MessageRecord | None:
        """Decode the record starting at absolute ``offset`` (its size read from TOTALSIZE), with
        one file reference held; None when no whole record is readable there."""
        mf = self.mapped_file_queue.find_mapped_file_by_offset(offset, offset == 0)
        if mf is None:
            return None
        sel = mf.select_mapped_buffer(offset % self.file_size)
        if sel is None:
            return None
        try:
            buf = sel.buffer
            if sel.size < 4:
                return None
            size = _INT.unpack_from(buf, 0)[0]
            if size <= 0 or size > sel.size:
                return None
            rec = decode_message(buf, 0)
        except RmqlabError:
            return None
        finally:
            sel.release()
        return rec if isinstance(rec, MessageRecord) else None

    def pickup_store_timestamp(self, offset: int, size: int) -> int:
        """Store timestamp of the record at ``offset`` (-1 unless it lies inside the log)."""
        if offset < self.get_min_offset() or offset + size > self.get_max_offset():
            return -1
        # get_message(offset, size) without the SelectMappedBufferResult: this runs ~20 times
        # per by-time lookup (binary search). Same visibility rules and the same reads.
        mf = self.mapped_file_queue.find_mapped_file_by_offset(offset, offset == 0)
        pos = offset % self.file_size
        if mf is None or size < 0 or pos + size > mf.read_position or not mf.hold():
            return -1
        try:
            buf = mf.buffer[pos : pos + size]
            return _LONG.unpack_from(buf, store_timestamp_position(_INT.unpack_from(buf, 36)[0]))[0]
        finally:
            mf.release()

    # ------------------------------------------------------------------ writing
    def check_message(self, msg: Message) -> PutMessageResult | None:
        """None if ``msg`` may be stored, else the refusal (status and reason)."""
        if not self.writeable:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, reason=self.not_writeable_reason)
        topic = msg.topic
        if topic not in self._valid_topics:
            try:
                validate_topic(topic)
            except InvalidTopic as e:
                return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, reason=str(e))
            self._valid_topics.add(topic)
        if len(msg.body) > self.config.max_message_size:
            return PutMessageResult(
                PutMessageStatus.MESSAGE_ILLEGAL,
                reason=f"body of {len(msg.body)} bytes exceeds max_message_size {self.config.max_message_size}",
            )
        if msg.queue_id < 0:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, reason=f"queue id {msg.queue_id} < 0")
        return None

    def _host(self, host: tuple[str, int] | str) -> tuple[bytes, int]:
        """``(ip bytes, port)`` of a born host, cached (producers reuse a few hosts)."""
        got = self._hosts.get(host)
        if got is None:
            ip, port = parse_host(host)
            got = (ip_to_bytes(ip), port)
            if len(self._hosts) >= _MAX_HOST_CACHE:
                self._hosts.clear()
            self._hosts[host] = got
        return got

    def encode_record(self, msg: Message, now: int) -> EncodedRecord | PutMessageResult:
        """Encode ``msg`` as a record with zero queue offset, physical offset and store time."""
        uniq = msg.uniq_key or (msg.properties or {}).get(flags.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        if not uniq:
            with self._uniq_lock:
                uniq = self._uniq.create(now, self._tz)
        props, parsed = build_properties_and_map(
            msg, uniq, cluster=self.config.broker_cluster_name, rocketmq_version=self.config.rocketmq_version
        )
        if len(props) > _MAX_PROPERTIES_LENGTH:
            return PutMessageResult(
                PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
                reason=f"properties of {len(props)} bytes exceed {_MAX_PROPERTIES_LENGTH}",
            )
        born_ip, born_port = self._host(msg.born_host)
        body = msg.body
        topic = msg.topic
        data = bytearray(
            encode_message_parts(
                topic, body, msg.queue_id, msg.flag, 0, 0, msg.sys_flag,
                msg.born_timestamp if msg.born_timestamp is not None else now, born_ip, born_port,
                0, self._store_ip or ip_to_bytes(self.store_host[0]), self.store_host[1], msg.reconsume_times,
                msg.prepared_transaction_offset, props, body_crc(body), self._version,
            )
        )  # fmt: skip
        if len(data) > self.config.max_record_size:
            return PutMessageResult(
                PutMessageStatus.MESSAGE_ILLEGAL,
                reason=f"record of {len(data)} bytes exceeds {self.config.max_record_size}",
            )
        sys_flag = _INT.unpack_from(data, 36)[0]
        dispatch = None
        if parsed is not None and topic != flags.SCHEDULE_TOPIC:
            # Exactly what codec.walk parses back from these bytes (the tags code of a
            # SCHEDULE_TOPIC record depends on the reput's delay table: those are parsed).
            tags = parsed.get(flags.PROPERTY_TAGS)
            dispatch = (
                topic, msg.queue_id, java_hash(tags) if tags else 0, parsed.get(flags.PROPERTY_KEYS),
                parsed.get(flags.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX), sys_flag,
                msg.prepared_transaction_offset, parsed,
            )  # fmt: skip
        return EncodedRecord(
            data,
            f"{topic}-{msg.queue_id}",
            store_timestamp_position(sys_flag),
            (sys_flag & _TX_MASK) not in _NO_QUEUE_OFFSET,
            # MessageDecoder.encodeMessages: size, magic, crc, flag, body len, body, props len, props
            22 + len(body) + len(props),
            dispatch,
        )

    def put_message(self, msg: Message) -> PutMessageResult:
        """Append one message; returns PUT_OK with its msgId, offsets and store timestamp."""
        bad = self.check_message(msg)
        if bad is not None:
            return bad
        enc = self.encode_record(msg, self.clock.now_ms())
        if isinstance(enc, PutMessageResult):
            return enc
        return self._put([enc])

    def put_messages(self, msgs: Sequence[Message]) -> PutMessageResult:
        """Append a batch (one topic and queue) as consecutive records sharing one store time.

        Like RocketMQ's ``MessageExtBatch``: if the whole batch does not fit in the current
        file, none of it is written there; the batch body must be <= ``max_message_size``.
        """
        encoded = self.encode_batch(msgs)
        if isinstance(encoded, PutMessageResult):
            return encoded
        return self._put(encoded)

    def encode_batch(
        self, msgs: Sequence[Message], check: Callable[[Message], PutMessageResult | None] | None = None
    ) -> list[EncodedRecord] | PutMessageResult:
        """Check and encode a batch by ``MessageExtBatch``'s rules (one topic and queue, no
        transactions, batch body <= ``max_message_size``); the refusal if any. ``check`` replaces
        :meth:`check_message` per message (the memory store adds its own rules)."""
        if not msgs:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, reason="empty batch")
        check = check or self.check_message
        first = msgs[0]
        for m in msgs:
            bad = check(m)
            if bad is not None:
                return bad
            if m.topic != first.topic or m.queue_id != first.queue_id:
                return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, reason="a batch must share topic and queue")
            if m.sys_flag & _TX_MASK:
                return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, reason="transactions cannot be batched")
        now = self.clock.now_ms()
        encoded: list[EncodedRecord] = []
        batch_body = 0
        for m in msgs:
            enc = self.encode_record(m, now)
            if isinstance(enc, PutMessageResult):
                return enc
            encoded.append(enc)
            batch_body += enc.batch_size
        if batch_body > self.config.max_message_size:
            return PutMessageResult(
                PutMessageStatus.MESSAGE_ILLEGAL,
                reason=f"batch body of {batch_body} bytes exceeds max_message_size {self.config.max_message_size}",
            )
        return encoded

    def _put(self, encoded: list[EncodedRecord]) -> PutMessageResult:
        total = sum(len(e.data) for e in encoded) if len(encoded) > 1 else len(encoded[0].data)
        with self.put_lock:
            if not self.writeable:
                return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, reason=self.not_writeable_reason)
            now = self.clock.now_ms()
            table = self.topic_queue_table
            first_queue_offset = -1
            for enc in encoded:
                q = table.get(enc.queue_key, 0) if enc.gets_queue_offset else 0
                if first_queue_offset < 0:
                    first_queue_offset = q
                enc.queue_offset = q
                _LONG.pack_into(enc.data, QUEUE_OFFSET_POSITION, q)
                _LONG.pack_into(enc.data, enc.ts_pos, now)
                if enc.gets_queue_offset:
                    table[enc.queue_key] = q + 1
            mf = self._writable_file()
            if mf is None:
                self._undo_queue_offsets(encoded)
                return PutMessageResult(PutMessageStatus.CREATE_MAPEDFILE_FAILED, reason=_NO_FILE)
            wrote_offset = self._append(mf, encoded, total, now)
            if wrote_offset < 0:  # END_OF_FILE: blank written, roll and append again
                mf = self._writable_file()
                if mf is None:
                    self._undo_queue_offsets(encoded)
                    return PutMessageResult(PutMessageStatus.CREATE_MAPEDFILE_FAILED, reason=_NO_FILE)
                wrote_offset = self._append(mf, encoded, total, now)
                if wrote_offset < 0:
                    self._undo_queue_offsets(encoded)
                    return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, reason=_TOO_BIG)
            mf.store_timestamp = now
        if len(encoded) == 1:
            msg_id = f"{self._msg_id_prefix}{wrote_offset:016X}"
        else:
            ids, off = [], wrote_offset
            for enc in encoded:
                ids.append(self.msg_id(off))
                off += len(enc.data)
            msg_id = ",".join(ids)
        result = _new_append_result(
            AppendMessageStatus.PUT_OK, wrote_offset, total, msg_id, now, first_queue_offset, len(encoded)
        )
        if self.on_put is not None:
            self.on_put(result)
        return _new_put_result(PutMessageStatus.PUT_OK, result)

    def _undo_queue_offsets(self, encoded: list[EncodedRecord]) -> None:
        for enc in reversed(encoded):
            if enc.gets_queue_offset:
                self.topic_queue_table[enc.queue_key] -= 1

    def _writable_file(self) -> MappedFile | None:
        mfq = self.mapped_file_queue
        mf = mfq.get_last_mapped_file()
        if mf is None or mf.is_full():
            mf = mfq.get_last_mapped_file_for(0)
        return mf

    def _append(self, mf: MappedFile, encoded: list[EncodedRecord], total: int, now: int) -> int:
        """Copy the records into ``mf``; returns the absolute offset, or -1 after a blank.

        Writes straight into ``mf.write_target`` (the mapping or the TransientStorePool buffer)
        at its wrote position, then publishes the bytes with ``advance_wrote_position``: the put
        lock makes this the single writer, and readers see nothing until the position moves.
        """
        pos = pos_before = mf.wrote_position
        max_blank = mf.file_size - pos
        wrote = -1
        if max_blank <= 0:  # already full (RocketMQ's UNKNOWN_ERROR branch): roll
            pass
        elif total + 8 > max_blank:
            _BLANK.pack_into(mf.write_target, pos, max_blank, flags.BLANK_MAGIC_CODE)
            mf.advance_wrote_position(max_blank)
        else:
            target = mf.write_target
            phys = wrote = mf.file_from_offset + pos
            hints = self.dispatch_hints
            if len(hints) >= _MAX_DISPATCH_HINTS:
                hints.clear()
            for enc in encoded:
                data = enc.data
                n = len(data)
                _LONG.pack_into(data, PHYSICAL_OFFSET_POSITION, phys)
                if enc.dispatch is not None:
                    hints[phys] = (n, enc.queue_offset, now, enc.ts_pos, enc.dispatch)
                target[pos : pos + n] = data
                pos += n
                phys += n
            mf.advance_wrote_position(total)
        if self.bus.active:
            if wrote < 0:
                self.bus.publish(
                    Rolled("commitlog", mf.name, "", mf.file_from_offset + pos_before, mf.file_size - pos_before)
                )
            else:
                self.bus.publish(Appended("commitlog", mf.name, wrote, total, mf.wrote_position))
        return wrote
