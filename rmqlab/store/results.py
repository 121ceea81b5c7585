"""Result types of the store API, with RocketMQ's enum member names.

``PutMessageStatus``, ``AppendMessageStatus`` and ``GetMessageStatus`` keep the Java names so a
reader of RocketMQ's code or logs recognises every value. Results are frozen dataclasses except
``GetMessageResult``, whose messages are lazy views over mapped CommitLog bytes (decoded together
on the first decode of any of them).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, fields
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from rmqlab.codec.flags import MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2
from rmqlab.codec.message import (
    _UNPARSED,
    _V6_HOSTS,
    BlankRecord,
    MessageRecord,
    _decode,
    _host4,
    _hosts_get,
    _RecordBuilder,
    _unpack_v4v4_raw_hosts,
)
from rmqlab.errors import CorruptRecord, NotAMessage

if TYPE_CHECKING:
    from rmqlab.files.mapped_file import MappedFile, SelectMappedBufferResult

__all__ = [
    "AppendMessageResult",
    "AppendMessageStatus",
    "GetMessageResult",
    "GetMessageStatus",
    "PutMessageResult",
    "PutMessageStatus",
    "QueryMessageResult",
    "SharedSelection",
    "StoredMessage",
    "put_ok",
]


class PutMessageStatus(enum.Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPEDFILE_FAILED = "CREATE_MAPEDFILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGECACHE_BUSY = "OS_PAGECACHE_BUSY"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"
    LMQ_CONSUME_QUEUE_NUM_EXCEEDED = "LMQ_CONSUME_QUEUE_NUM_EXCEEDED"
    # 5.x: a timer message the broker's wheel refuses (HookUtils.handleScheduleMessage)
    WHEEL_TIMER_FLOW_CONTROL = "WHEEL_TIMER_FLOW_CONTROL"
    WHEEL_TIMER_MSG_ILLEGAL = "WHEEL_TIMER_MSG_ILLEGAL"
    WHEEL_TIMER_NOT_ENABLE = "WHEEL_TIMER_NOT_ENABLE"

    @property
    def ok(self) -> bool:
        return self is PutMessageStatus.PUT_OK


class AppendMessageStatus(enum.Enum):
    PUT_OK = "PUT_OK"
    END_OF_FILE = "END_OF_FILE"
    MESSAGE_SIZE_EXCEEDED = "MESSAGE_SIZE_EXCEEDED"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


class GetMessageStatus(enum.Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"
    OFFSET_RESET = "OFFSET_RESET"


@dataclass(frozen=True, slots=True)
class AppendMessageResult:
    status: AppendMessageStatus
    wrote_offset: int = 0
    wrote_bytes: int = 0
    msg_id: str = ""
    store_timestamp: int = 0
    logics_offset: int = 0
    msg_num: int = 1


@dataclass(frozen=True, slots=True)
class PutMessageResult:
    """What ``put_message`` returns: status plus where the message went.

    For a batch, ``msg_id`` is the comma-joined list (as RocketMQ) and ``queue_offset`` the
    first message's queue offset.
    """

    status: PutMessageStatus
    append_result: AppendMessageResult | None = None
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.status is PutMessageStatus.PUT_OK

    @property
    def msg_id(self) -> str:
        return self.append_result.msg_id if self.append_result else ""

    @property
    def wrote_offset(self) -> int:
        return self.append_result.wrote_offset if self.append_result else -1

    @property
    def wrote_bytes(self) -> int:
        return self.append_result.wrote_bytes if self.append_result else 0

    @property
    def queue_offset(self) -> int:
        return self.append_result.logics_offset if self.append_result else -1

    @property
    def store_timestamp(self) -> int:
        return self.append_result.store_timestamp if self.append_result else 0


def _slots_twin(cls: type) -> type:
    """A plain class with ``cls``'s slots; an instance filled through it and re-labelled
    ``cls`` is an ordinary frozen ``cls`` (see ``rmqlab.codec._frozen``). Checked at import."""
    twin = type(f"_{cls.__name__}Twin", (), {"__slots__": cls.__slots__})
    object.__new__(twin).__class__ = cls  # raises now, not on the hot path, if layouts differ
    return twin


_AppendTwin = _slots_twin(AppendMessageResult)
_PutTwin = _slots_twin(PutMessageResult)
_new = object.__new__
_APPEND_OK = AppendMessageStatus.PUT_OK
_PUT_OK = PutMessageStatus.PUT_OK


def put_ok(wrote_offset: int, wrote_bytes: int, msg_id: str, store_timestamp: int, logics_offset: int,
           msg_num: int) -> PutMessageResult:
    """``PutMessageResult(PUT_OK, AppendMessageResult(PUT_OK, ...))`` for the put hot path: both
    frozen results filled with plain slot stores in one call (no ``__init__`` frames), ~2x
    cheaper than the dataclass constructors; equal to them in every respect."""
    a = _new(_AppendTwin)
    a.status = _APPEND_OK
    a.wrote_offset = wrote_offset
    a.wrote_bytes = wrote_bytes
    a.msg_id = msg_id
    a.store_timestamp = store_timestamp
    a.logics_offset = logics_offset
    a.msg_num = msg_num
    a.__class__ = AppendMessageResult
    p = _new(_PutTwin)
    p.status = _PUT_OK
    p.append_result = a
    p.reason = ""
    p.__class__ = PutMessageResult
    return p


class StoredMessage:
    """One message returned by ``get_message``: a zero-copy view, decoded on first attribute use.

    ``buffer`` is a memoryview into the mapped CommitLog file (valid until ``release()``; the
    owning ``GetMessageResult.release()`` releases all). Any ``MessageRecord`` attribute
    (``topic``, ``body``, ``tags``, ``queue_offset`` ...) decodes the record once and caches it
    (each public field and property is forwarded by a property, see ``_record_attribute``).

    A message of a ``get_message`` result is held as its file selection's buffer and its place
    in it; the ``buffer`` view is made on first use (most consumers only decode). Its first
    ``decode()`` decodes every message of the result not decoded yet, in one pass (as
    RocketMQ's client decodes a whole pull result): ``_decode_batch``. Records the pass does
    not take (anything but the common V1/V2 IPv4 record) are left to each message's own
    ``decode()``, which gives the exact decoder's answer or error.
    """

    __slots__ = ("_at", "_base", "_batch", "_record", "_selection", "_view", "commit_log_offset", "size")

    def __init__(self, selection: SelectMappedBufferResult | SharedSelection | None, buffer: memoryview,
                 commit_log_offset: int, size: int) -> None:
        self._selection = selection
        self._view: memoryview | None = buffer
        self._base: memoryview | None = buffer  # buffer[_at : _at + size] is the record
        self._at = 0
        self._batch: list[StoredMessage] | None = None  # the result's messages, decoded together
        self.commit_log_offset = commit_log_offset
        self.size = size
        self._record: MessageRecord | None = None

    @property
    def buffer(self) -> memoryview:
        """The record's bytes: a memoryview into the mapped file, released with the message."""
        view = self._view
        if view is None:
            base = self._base
            if base is None:  # released before its view was ever made
                return _RELEASED_VIEW
            a = self._at
            view = self._view = base[a : a + self.size]
        return view

    def decode(self) -> MessageRecord:
        rec = self._record
        if rec is None:
            batch = self._batch
            if batch is not None:
                _decode_batch(batch)
                rec = self._record
                if rec is not None:
                    return rec
            buf = self.buffer
            try:
                rec = _decode(buf, 0, len(buf), False, True, None)  # decode_message(buf), one call less
            except CorruptRecord as e:
                raise self._located(e) from None
            if type(rec) is not MessageRecord:
                what = "a blank record (a file's end)" if type(rec) is BlankRecord else "end of data (zeros)"
                raise self._located(NotAMessage(None, 0, f"no message at commit log offset {self.commit_log_offset}: "
                                                         f"{what}"))
            self._record = rec
        return rec

    def _located(self, e: CorruptRecord) -> CorruptRecord:
        """``e`` (found in this record's own bytes, so at offsets from its start) naming the
        CommitLog file and the position in it, as a person looking for the damage needs."""
        mf = getattr(self._selection, "mapped_file", None)
        if mf is None or self.commit_log_offset < 0:
            return e  # a memory-topic message: no file holds it
        return e.with_file(mf.file_name, self.commit_log_offset - mf.file_from_offset)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.decode(), name)

    def release(self) -> None:
        sel = self._selection
        if sel is not None:
            self._selection = None
            self._batch = None
            self._base = None
            view = self._view
            if view is not None:
                try:
                    view.release()
                except BufferError:
                    pass  # exported (e.g. to numpy): stays valid for that holder
            sel.release()

    def __repr__(self) -> str:
        return f"StoredMessage(commit_log_offset={self.commit_log_offset}, size={self.size})"


_RELEASED_VIEW = memoryview(b"")
_RELEASED_VIEW.release()  # what ``buffer`` gives once released (any use raises ValueError)


def _decode_batch(messages: list[StoredMessage]) -> None:
    """Decode every message of ``messages`` not decoded yet: ``_decode``'s fast path, unrolled.

    Each message's record is read straight from its selection's buffer (no view per message);
    constants are locals and there is one call per result, not two per message. A record is
    stored only when every check of the exact decoder passes (TOTALSIZE within the message and
    equal to what the lengths imply, no negative length, valid UTF-8 topic; V1 or V2, two IPv4
    hosts); any other is left undecoded for its own ``decode()`` (the exact answer or error).
    Every message's link to the batch is dropped (no second pass, no reference cycle left).
    Equivalence: ``tests/store/test_get_message_decode_batch.py``.
    """
    new = _new
    builder = _RecordBuilder
    record_type = MessageRecord
    unpack = _unpack_v4v4_raw_hosts
    hosts_get = _hosts_get
    unparsed = _UNPARSED
    v1 = MESSAGE_MAGIC_CODE_V1
    magics = (MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2)
    v6 = _V6_HOSTS
    checked: object = _decode_batch  # the last base whose type and format were checked (none yet)
    born_raw = store_raw = -1  # the last raw host fields and their (ip, port): a store has few
    born = store = None
    for m in messages:
        m._batch = None
        if m._record is not None:
            continue
        base = m._base
        size = m.size
        if base is not checked:
            if type(base) is not memoryview or base.format != "B":
                continue  # released (None) or another buffer: decode() decides
            checked = base
        if size < 91:
            continue
        a = m._at
        (
            total, magic, crc, queue_id, flag, queue_offset, phys, sys_flag, born_ts,
            born_host, store_ts, store_host, reconsume, prepared, body_len,
        ) = unpack(base, a)  # fmt: skip
        if (
            sys_flag & v6
            or body_len < 0
            or total > size
            or total < 91 + body_len
            or magic not in magics
        ):
            continue
        pos = a + 88 + body_len
        body = base[a + 88 : pos].tobytes()
        tail = base[pos : a + total].tobytes()  # TOPICLENGTH .. PROPERTIES (>= 3 bytes)
        if magic == v1:
            topic_len = tail[0]
            p = 1
            if topic_len > 127:  # a negative signed byte
                continue
        else:
            if len(tail) < 4:
                continue
            topic_len = tail[0] << 8 | tail[1]
            p = 2
            if topic_len > 32767:
                continue
        props_at = p + topic_len
        if len(tail) < props_at + 2 or len(tail) != props_at + 2 + (tail[props_at] << 8 | tail[props_at + 1]):
            continue
        try:
            topic = tail[p:props_at].decode()
        except UnicodeDecodeError:
            continue
        rec = new(builder)
        rec.store_size = total
        rec.magic = magic
        rec.body_crc = crc
        rec.queue_id = queue_id
        rec.flag = flag
        rec.queue_offset = queue_offset
        rec.commit_log_offset = phys
        rec.sys_flag = sys_flag
        rec.born_timestamp = born_ts
        if born_host != born_raw:
            born_raw = born_host
            born = hosts_get(born_host) or _host4(born_host)
        rec.born_host = born
        rec.store_timestamp = store_ts
        if store_host != store_raw:
            store_raw = store_host
            store = hosts_get(store_host) or _host4(store_host)
        rec.store_host = store
        rec.reconsume_times = reconsume
        rec.prepared_transaction_offset = prepared
        rec.body = body
        rec.topic = topic
        rec.properties = unparsed
        rec.properties_raw = tail[props_at + 2 :]
        rec.__class__ = record_type
        m._record = rec


def _record_attribute(name: str) -> property:
    """``StoredMessage.<name>``: the decoded record's attribute, without ``__getattr__``.

    ``__getattr__`` runs only after the normal lookup has failed, i.e. after an AttributeError
    was made and caught: ~0.5 us per read. A property per record attribute costs ~0.1 us."""
    get = attrgetter(name)

    def fget(self: StoredMessage) -> Any:
        rec = self._record
        return get(rec if rec is not None else self.decode())

    return property(fget, doc=f"``decode().{name}``")


# Every public MessageRecord field and property, except the names StoredMessage holds itself
# (commit_log_offset, size: the same values; buffer; decode, release); the rest via __getattr__.
for _name in [f.name for f in fields(MessageRecord)] + [
    n for n, v in vars(MessageRecord).items() if not n.startswith("_") and isinstance(v, property)
] + ["to_dict"]:
    if not hasattr(StoredMessage, _name):
        setattr(StoredMessage, _name, _record_attribute(_name))
del _name


class SharedSelection:
    """One ``SelectMappedBufferResult`` (one file reference) shared by the messages a
    ``get_message`` call found in the same CommitLog file: each message holds a slice of its
    buffer and one count; the file reference goes when the last count is released.

    Saves a lock round trip, a result object and a ``release`` per message on the pull path.
    Counts are plain ints: release the messages of one result from one thread at a time.
    """

    __slots__ = ("_refs", "_selection", "buffer", "end", "start")

    def __init__(self, selection: SelectMappedBufferResult) -> None:
        self._selection = selection
        self.buffer = selection.buffer
        self.start = selection.start_offset
        self.end = selection.start_offset + selection.size
        self._refs = 1  # the creator's; dropped with release() when it stops adding messages

    @property
    def mapped_file(self) -> MappedFile:
        return self._selection.mapped_file

    def acquire(self) -> None:
        self._refs += 1

    def release(self) -> None:
        self._refs -= 1
        if self._refs == 0:
            self._selection.release()


@dataclass
class GetMessageResult:
    status: GetMessageStatus
    next_begin_offset: int = 0
    min_offset: int = 0
    max_offset: int = 0
    messages: list[StoredMessage] = field(default_factory=list)
    buffer_total_size: int = 0
    suggest_pulling_from_slave: bool = False
    filtered_count: int = 0  # units skipped by the tag filter (rmqlab extra)
    #: a BatchConsumeQueue read (5.x BatchCQ topic): the batch size of each of ``messages`` (each
    #: one a whole inner-batch record); empty for a plain queue (one message a record)
    batch_sizes: list[int] = field(default_factory=list)

    @property
    def message_count(self) -> int:
        """Messages found (5.x ``getMessageCount``: a BatchCQ record counts its batch size)."""
        return sum(self.batch_sizes) if self.batch_sizes else len(self.messages)

    @property
    def commit_log_offsets(self) -> list[int]:
        return [m.commit_log_offset for m in self.messages]

    def release(self) -> None:
        # StoredMessage.release and SharedSelection.release inlined: one pass, no call per message
        # (calling m.release() instead measured 62k -> 56k get(32) + release calls/s, thread CPU)
        for m in self.messages:
            sel = m._selection
            if sel is None:
                continue
            m._selection = None
            m._batch = None
            m._base = None
            view = m._view
            if view is not None:
                try:
                    view.release()
                except BufferError:
                    pass  # exported (e.g. to numpy): stays valid for that holder
            if type(sel) is SharedSelection:
                sel._refs -= 1
                if sel._refs == 0:
                    sel._selection.release()
            else:
                sel.release()

    def __enter__(self) -> GetMessageResult:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


@dataclass(frozen=True)
class QueryMessageResult:
    """``query_message``: ``phy_offsets`` exactly as RocketMQ's store returns them (same order,
    duplicates and cap); ``messages`` only those whose topic and keys really match (RocketMQ
    leaves that check, issue 3613, to the client); ``collisions_discarded`` counts the rest."""

    phy_offsets: list[int]
    messages: list[MessageRecord]
    collisions_discarded: int
    index_last_update_timestamp: int
    index_last_update_phyoffset: int
