"""CommitLog: every message of every topic, appended in one sequence of mapped files.

The write path mirrors RocketMQ's ``CommitLog.asyncPutMessage`` + ``doAppend`` (spec §2.13):
encode the record outside the lock with zero placeholders, then under the put lock take the store
timestamp, assign the queue offset from the topic-queue table, patch QUEUEOFFSET@20,
PHYSICALOFFSET@28 and STORETIMESTAMP@48+BH in place, and copy the bytes into the last mapped
file. A record that does not fit (``size + 8 > space left``) leaves an 8-byte blank record
(``int space, int 0xCBD43194``) and goes to offset 0 of the next file.

Thread-safety: ``put_message``/``put_messages`` serialise on ``put_lock``; readers
(``get_message``/``get_data``) hold a reference on the mapped file they read.

Optional CRC property (5.x ``enabled_append_prop_crc``, spec §2.6, ``codec/prop_crc.py``): every
record written ends with a 20-byte ``__CRC32#`` property holding the CRC-32 of the record before
it. Such a store takes the exact path for every put (``fast_path`` is off): :meth:`_put`
reserves the 20 bytes (and a ``0x02`` when the properties do not end with one) in each record
it is given, checks the lengths that grow (PROPERTIES_SIZE_EXCEEDED past 32767 bytes of
properties, the record size limit), and :meth:`_append` seals each record -- CRC over its bytes
once QUEUEOFFSET, PHYSICALOFFSET and STORETIMESTAMP are final -- just before copying it into the
file, under the put lock. A client's own ``__CRC32#`` is dropped from the map of a single
message before it is serialised (5.x ``asyncPutMessage``); the inner messages of a batch keep
theirs, as 5.x's batch encoder copies their properties as sent (the record's own property comes
last, so it is the one a reader parses). The memory store's records (``encode_record`` /
``encode_batch`` without a put) get none: they are not in the CommitLog.

Pre-faulting: the first write to a page of a fresh mapping costs a page fault, ~0.4 us per 1 KiB
record on the put thread. ``prefault_ahead`` (called by ``CommitLogPrefaultService``: its own
thread in a threaded store, every ``store.step()`` in a stepped one) pre-faults the last
file's pages up to ``prefault_bytes`` ahead of the writer (``MappedFile.prefault``, the kernel's
``MADV_POPULATE_WRITE`` without the GIL), so the put copies into pages already mapped. Only when
the CommitLog writes through the mapping (no TransientStorePool) and is writable; the pages stay
zeros, so the files are byte for byte what they would be without it.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import itertools
import logging
import os
import struct
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import accumulate, islice, repeat
from operator import add, attrgetter, itemgetter
from typing import TYPE_CHECKING, Any, NamedTuple

from rmqlab.clock import Clock
from rmqlab.codec import flags
from rmqlab.codec._frozen import fast_constructor
from rmqlab.codec.batch import (
    MessageBatch,
    broker_batch_properties,
    client_properties,
    encode_client_properties,
    record_properties,
)
from rmqlab.codec.crc import body_crc
from rmqlab.codec.crc import crc32 as _crc32  # isal's CRC-32 (zlib's when isal is missing)
from rmqlab.codec.java_hash import java_hash
from rmqlab.codec.message import (
    PHYSICAL_OFFSET_POSITION,
    QUEUE_OFFSET_POSITION,
    MessageRecord,
    decode_message,
    encode_message_parts,
    head_struct,
    store_timestamp_position,
    topic_field,
)
from rmqlab.codec.msg_id import UniqKeyGenerator, create_offset_msg_id, ip_to_bytes
from rmqlab.codec.multi_dispatch import MULTI_DISPATCH_QUEUE_SPLITTER, dispatches_multi, java_split
from rmqlab.codec.names import RETRY_GROUP_TOPIC_PREFIX, TOPIC_MAX_LENGTH, is_lmq_topic, validate_topic
from rmqlab.codec.prop_crc import (
    properties_length_position,
    reserve_prop_crc,
    reserved_properties_length,
    seal_prop_crc,
)
from rmqlab.codec.properties import (
    decode_properties,
    encode_broker_properties_and_map,
    encode_scheduled_broker_properties_and_map,
    encode_timer_broker_properties_and_map,
    raw_property_value,
    reserialised_properties_and_map,
)
from rmqlab.codec.walk import parse_java_int, parse_java_long, parse_java_short
from rmqlab.config import MessageStoreConfig
from rmqlab.errors import DiskFull, InvalidTopic, RmqlabError, ScheduleRecordError
from rmqlab.events import Appended, EventBus, Rolled
from rmqlab.files.mapped_file_queue import MappedFileQueue
from rmqlab.store.message import BAD_FIELD_ERRORS, Message, build_properties_and_map, parse_host, refuse_bad_fields
from rmqlab.store.put_lock import wait_until_free
from rmqlab.store.results import (
    AppendMessageResult,
    AppendMessageStatus,
    PutMessageResult,
    PutMessageStatus,
    put_ok,
)

if TYPE_CHECKING:
    from rmqlab.files.allocate_mapped_file_service import AllocateMappedFileService
    from rmqlab.files.mapped_file import MappedFile, SelectMappedBufferResult
    from rmqlab.files.transient_store_pool import TransientStorePool

__all__ = ["CommitLog"]

log = logging.getLogger(__name__)

_BLANK = struct.Struct(">ii")
_LONG = struct.Struct(">q")
_SHORT = struct.Struct(">h")
_MAX_PROPERTIES_LENGTH = 32767
_NO_FILE = "cannot create the next commit log file"
_TOO_BIG = "record larger than a commit log file"
_INT = struct.Struct(">i")
_TX_MASK = 0xC
_NO_QUEUE_OFFSET = (flags.TRANSACTION_PREPARED_TYPE, flags.TRANSACTION_ROLLBACK_TYPE)


def _java_long(x: int) -> int:
    """``x`` wrapped to a Java long (the overflow of ``now + delay`` in the broker)."""
    return (x + 2**63) % 2**64 - 2**63
_TIMER_PROPERTIES = (flags.PROPERTY_TIMER_DELIVER_MS, flags.PROPERTY_TIMER_DELAY_SEC, flags.PROPERTY_TIMER_DELAY_MS)
_MAX_DISPATCH_HINTS = 1 << 14  # entries; reput consumes them, a lagging reput just parses
_MAX_HOST_CACHE = 1024
_new_append_result = fast_constructor(AppendMessageResult)
_new_put_result = fast_constructor(PutMessageResult)

#: What the writer knows about a record for its DispatchRequest (see ``CommitLog.dispatch_hints``):
#: ``(size, queue_offset, store_timestamp, store_timestamp_position, (topic, queue_id, tags_code,
#: keys, uniq_key, sys_flag, prepared_transaction_offset, properties_bytes))``. Only atomic values:
#: the garbage collector untracks such tuples, so hints waiting for reput are never scanned again
#: (a properties dict here kept every hint tracked: ~2 us of GC per put). Reput decodes the bytes
#: only when it needs the DispatchRequest's properties.
DispatchHint = tuple[int, int, int, int, tuple]
#: Runs (``CommitLog.dispatch_runs``) held at once; a run is one column batch (up to a few
#: hundred records), so this bounds the records about as ``_MAX_DISPATCH_HINTS`` does
_MAX_DISPATCH_RUNS = _MAX_DISPATCH_HINTS // 32


class HintRun:
    """The dispatch hints of one column batch (``_write_columns``) as one object: record ``i``'s
    hint is :meth:`hint` ``(i)``, the same tuple a per-record hint would be. Kept in
    ``CommitLog.dispatch_runs`` under the offset of its first record not yet dispatched
    (``start``): reput consumes a prefix and puts the rest back under its next offset (only
    reput, under its lock, moves ``start``; the writer never touches a run once stored).
    ``offsets`` has ``len + 1`` entries (the last is the run's end); ``tags``, ``keys``,
    ``uniqs`` and ``props`` are per record (record ``i``'s properties: ``props[i] + suffix``);
    the queue offsets are ``q0 + i``; the topic, queue, store timestamp (and its position) and
    sys flag are the batch's."""

    __slots__ = ("keys", "now", "offsets", "props", "q0", "queue_id", "sizes", "start", "suffix", "sys_flag", "tags",
                 "topic", "ts_pos", "uniqs")  # fmt: skip

    def __init__(self, offsets: list[int], sizes: list[int], q0: int, now: int, ts_pos: int, topic: str,
                 queue_id: int, sys_flag: int, tags: Sequence[int], keys: Sequence[str | None],
                 uniqs: Sequence[str | None], props: Sequence[bytes], suffix: bytes = b"") -> None:  # fmt: skip
        self.offsets = offsets
        self.sizes = sizes
        self.q0 = q0
        self.now = now
        self.ts_pos = ts_pos
        self.topic = topic
        self.queue_id = queue_id
        self.sys_flag = sys_flag
        self.tags = tags
        self.keys = keys
        self.uniqs = uniqs
        self.props = props
        self.suffix = suffix
        self.start = 0

    def __len__(self) -> int:
        return len(self.sizes)

    def hint(self, i: int) -> DispatchHint:
        """Record ``i``'s hint, as a per-record hint of the same record would be."""
        return (self.sizes[i], self.q0 + i, self.now, self.ts_pos,
                (self.topic, self.queue_id, self.tags[i], self.keys[i], self.uniqs[i], self.sys_flag, 0,
                 self.props[i] + self.suffix))  # fmt: skip


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


_V6_FLAGS = flags.BORNHOST_V6_FLAG | flags.STOREHOSTADDRESS_V6_FLAG
_KEYS = flags.PROPERTY_KEYS
_UNIQ = flags.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
# Stand-ins for the two per-message property values while a shape's template is built: clean
# (no 0x01/0x02, non-empty) so the builder's map is kept, and never part of a real tag or name.
_PH_KEYS = "\x00\x00rmqlab-keys\x00\x00"
_PH_UNIQ = "\x00\x00rmqlab-uniq\x00\x00"
_MAX_SHAPES = 4096
_WAIT = flags.PROPERTY_WAIT_STORE_MSG_OK
# The column batch paths (CommitLog._put_list, _put_wire). The header fields a list's messages
# must share, in the order _put_list's comprehension reads them from every message.
_L_SAME = attrgetter("topic", "queue_id", "tags", "delay_time_level", "wait_store_msg_ok", "born_host", "sys_flag",
                     "reconsume_times", "properties", "uniq_key")  # fmt: skip
_LAST_BYTE = itemgetter(slice(-1, None))
_CRC_MASK = 0x7FFFFFFF.__and__
_U16 = 0xFFFF.__and__
_LAST = collections.deque  # deque(iterable, 1)[0]: the last item, nothing else kept
#: f"{v:04X}" of every 16-bit value, comma-separated (5 characters a value, 320 KiB)
_HEX16 = struct.pack(">65536H", *range(0x10000)).hex(",", 2).upper()
#: the same as a list (a single put's UNIQ_KEY counter: one index instead of a format, ~0.13 us)
_HEX4 = _HEX16.split(",")


class _Packers(dict):
    """``struct.Struct(f">{n}{code}")`` per ``n`` (a batch size): one dict lookup per batch
    instead of formatting the format and finding it in struct's cache; bounded."""

    __slots__ = ("code",)

    def __init__(self, code: str) -> None:
        super().__init__()
        self.code = code

    def __missing__(self, n: int) -> struct.Struct:
        if len(self) >= 256:
            self.clear()
        got = self[n] = struct.Struct(f">{n}{self.code}")
        return got


_U16_PACK = _Packers("H")
_OFFSETS_PACK = _Packers("q")


_SEP = "\x00"  # between the records' properties in the list path's one string (never in a checked value)
_SEP_B = b"\x00"


def _clean(value: str | None) -> bool:
    """No property separator in ``value`` (None: the name is absent)."""
    return value is None or ("\x01" not in value and "\x02" not in value)


def _batch_names(batch_props: bytes) -> tuple[bool, str | None, bool, str | None, bool, str | None]:
    """Which of TAGS, KEYS, UNIQ_KEY the batch string sets, and to what: ``parse(inner + [0x02] +
    batch)`` is ``parse(inner)`` updated by ``parse(batch)`` (the pairs line up at the 0x02 between
    them and a later name wins), so a record's hint value is the batch's if it has the name, else
    the inner string's."""
    in_batch = decode_properties(batch_props)
    t, k, u = flags.PROPERTY_TAGS, _KEYS, _UNIQ
    return t in in_batch, in_batch.get(t), k in in_batch, in_batch.get(k), u in in_batch, in_batch.get(u)


def _too_many_property_bytes(plen: int) -> PutMessageResult:
    return PutMessageResult(PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
                            reason=f"properties of {plen} bytes exceed {_MAX_PROPERTIES_LENGTH}")  # fmt: skip


def _batch_too_big(wire: int, limit: int) -> PutMessageResult:
    return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL,
                            reason=f"batch body of {wire} bytes exceeds max_message_size {limit}")  # fmt: skip


def _keys_string(keys: str | Sequence[str] | None) -> str:
    """The KEYS property of ``Message.keys`` (a string as is, tokens joined by spaces, empty
    tokens dropped; "" for none). TypeError for non-str tokens: the exact path answers those."""
    if not keys:
        return ""
    if keys.__class__ is str:
        return keys  # type: ignore[return-value]
    return " ".join(keys) if "" not in keys else " ".join([k for k in keys if k])


class _Shape:
    """Everything a put needs that depends only on a message's *shape* (topic, tags, born host,
    sys flag, WAIT, delay level, whether it has keys), computed once by the exact encoder.

    The properties' on-disk order depends only on the set of property names, so the bytes are
    ``seg0 + first + seg1 + second + seg2`` where first/second are the KEYS string and the
    UNIQ_KEY in the order the template found them (``keys_first``); without keys it is
    ``seg0 + uniq + seg1``.
    """

    __slots__ = ("born_ip", "born_port", "fixed", "gets_queue_offset", "head", "keys_first", "magic",
                 "queue_keys", "seg0", "seg1", "seg2", "sys_flag", "tags_code", "topic", "topic_tail", "ts_pos")

    def __init__(self, topic: str, head: struct.Struct, magic: int, topic_tail: bytes, sys_flag: int,
                 born_ip: bytes, born_port: int, tags_code: int, segs: tuple[str, str, str], keys_first: bool) -> None:
        self.topic = topic
        self.head = head
        self.magic = magic
        self.topic_tail = topic_tail
        self.sys_flag = sys_flag
        self.born_ip = born_ip
        self.born_port = born_port
        self.ts_pos = store_timestamp_position(sys_flag)
        self.gets_queue_offset = (sys_flag & _TX_MASK) not in _NO_QUEUE_OFFSET
        self.tags_code = tags_code
        self.seg0, self.seg1, self.seg2 = segs
        self.keys_first = keys_first
        # record length without body and properties: head, topic field, PROPERTIESLENGTH
        self.fixed = head.size + len(topic_tail) + 2
        self.queue_keys: dict[int, str] = {}

    def properties(self, ks: str, uniq: str) -> bytes:
        """The properties bytes for KEYS string ``ks`` ("" for none) and ``uniq``."""
        if not ks:
            return f"{self.seg0}{uniq}{self.seg1}".encode()
        if self.keys_first:
            return f"{self.seg0}{ks}{self.seg1}{uniq}{self.seg2}".encode()
        return f"{self.seg0}{uniq}{self.seg1}{ks}{self.seg2}".encode()

    def queue_key(self, queue_id: int) -> str:
        key = self.queue_keys.get(queue_id)
        if key is None:
            key = self.queue_keys[queue_id] = f"{self.topic}-{queue_id}"
        return key


class _LengthSuffixed(dict):
    """``prefix + length`` bytes (``width``-byte big-endian length) per length: the column paths
    map their lengths through one (a topic's ``TOPICLENGTH + TOPIC + PROPERTIESLENGTH``), few
    distinct each."""

    __slots__ = ("prefix", "width")

    def __init__(self, prefix: bytes, width: int) -> None:
        super().__init__()
        self.prefix = prefix
        self.width = width

    def __missing__(self, length: int) -> bytes:
        if len(self) >= 256:
            self.clear()
        got = self[length] = self.prefix + length.to_bytes(self.width, "big")
        return got


_HEAD_START = ">iiiiiqq"  # TOTALSIZE .. PHYSICALOFFSET


@functools.lru_cache(maxsize=8)
def _head_whole(middle_len: int) -> struct.Struct:
    """The whole head of a column batch record in one pack: TOTALSIZE .. PHYSICALOFFSET, the
    batch's SYSFLAG .. PREPAREDTRANSACTIONOFFSET bytes (``middle_len`` of them, packed once per
    batch by :func:`_head_middle`) and BODYLENGTH."""
    return struct.Struct(f"{_HEAD_START}{middle_len}si")


@functools.lru_cache(maxsize=8)
def _head_middle(born_ip_len: int, store_ip_len: int) -> struct.Struct:
    """SYSFLAG .. PREPAREDTRANSACTIONOFFSET (the head between _HEAD_START and BODYLENGTH)."""
    return struct.Struct(f">iq{born_ip_len}siq{store_ip_len}siiq")


class _Rows(NamedTuple):
    """A batch encoded up to its offsets and store time (``CommitLog._rows``)."""

    topic: str
    queue_id: int
    magic: int
    store_ip: bytes
    rows: list[tuple]


class _BatchMessages(list):
    """:meth:`CommitLog.batch_messages`' list: the messages, and the :class:`MessageBatch` they
    came from (written as received when the list comes back to :meth:`CommitLog.encode_batch`)."""

    batch: MessageBatch


class CommitLog:
    """The store's single log. ``topic_queue_table`` maps ``"topic-queueId"`` to the next queue
    offset (4.9.8 keeps it here; the store rebuilds it from the consume queues at load)."""

    #: How far ahead of the writer ``prefault_ahead`` keeps the last file pre-faulted (0: off),
    #: topped up once the writer has used half of it. The pre-fault thread gets the GIL from a
    #: put loop only on CPython's forced switches (~10 ms apart in practice), and half the window
    #: lasts the fastest puts seen (~0.6 GB/s of records) about that long; each top-up is one
    #: ``madvise`` that holds the process's ``mmap_lock``, so the window is not made larger.
    #: 4, 8 and 32 MiB measured alike (bench/README.md, stop 14); the pages ahead are dirty zeros
    #: the writer fills soon.
    prefault_bytes = 8 << 20

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
        self._max_delay_level = max(config.delay_level_table, default=0)  # ScheduleMessageService.maxDelayLevel
        # TimerMessageStore.isReject(deliverMs), set by the store that runs the timer wheel
        self.timer_reject: Callable[[int], bool] | None = None
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
        self.put_lock = threading.Lock()  # on contention, wait_until_free first (put_lock.py)
        # beginTimeInLock: the clock when the put holding the lock took it (its store
        # timestamp), 0 while the lock is free; the store refuses puts with OS_PAGECACHE_BUSY
        # while one holds it too long (MessageStore.is_os_page_cache_busy)
        self.begin_time_in_lock = 0
        self.store_host = parse_host(config.store_host)
        self._msg_id_prefix = create_offset_msg_id(*self.store_host, 0)[:-16]
        # (offset >> 16, msgId of it without the last 4 hex digits): consecutive single puts share
        # it for 64 KiB, so their msgId is one concatenation instead of a 16-digit format
        self._msg_id_upper = (0, f"{self._msg_id_prefix}{0:012X}")
        self._uniq = UniqKeyGenerator(self.store_host[0], os.getpid() & 0xFFFF, id(self) & 0x7FFFFFFF)
        # UNIQ_KEY counters: next() on itertools.count is atomic under the GIL, so no lock;
        # (now, time prefix) is cached as one tuple (read and replaced atomically).
        self._uniq_counter = itertools.count()
        self._uniq_prefix: tuple[int, str] = (-1, "")
        # _Shape (or None: this shape always takes the exact path) per shape key; see put_message
        self._shapes: dict[tuple, _Shape | None] = {}
        self._client_shapes: dict[tuple, tuple | None] = {}  # see _client_shape (the list batch path)
        self._list_cells: dict[tuple, tuple | None] = {}  # see _list_cell (the list column path)
        self._wire_strings: dict[tuple, tuple | None] = {}  # see _wire_batch_string
        self._tail_prefixes: dict[bytes, _LengthSuffixed] = {}
        self._tag_codes: dict[str | None, int] = {None: 0, "": 0}
        self._column_heads: dict[tuple, tuple | None] = {}  # (born host, sys flag) -> _born_head(...)
        self._last_middle: tuple = ((), None)  # (key, (_head_whole, middle bytes)) of the last column batch
        self._v5_producer = config.rocketmq_version != "4.9.8"
        # 5.x enabledAppendPropCRC (see the module docstring): only the exact path writes the property
        self._prop_crc = config.enabled_append_prop_crc and not config.is_v4
        # False: every put takes the exact reference path (tests compare both); always False with
        # enabled_append_prop_crc
        self.fast_path = not self._prop_crc
        self._max_message_size = config.max_message_size  # the config is frozen: read once
        self._max_record_size = config.max_record_size
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
        # 5.x writes V2 (2-byte topic length) for a topic of more than 127 chars unless
        # autoMessageVersionOnTopicLen is off; 4.9.8 has V1 only
        self._version = 1 if config.is_v4 or not config.auto_message_version_on_topic_len else None
        # the longest retry topic a put may name: 5.x's broker takes %RETRY%<group> up to 255
        # bytes (HookUtils.checkBeforePutMessage; long groups), 4.9.8's store 127 like any topic
        self._retry_topic_max = TOPIC_MAX_LENGTH if config.is_v4 else 255
        self._hosts: dict[tuple[str, int] | str, tuple[bytes, int]] = {}
        # {commit log offset: DispatchHint}, filled under the put lock for every record whose
        # dispatch fields the writer knows; ReputMessageService pops the entry when it reaches
        # exactly that offset and the stored header agrees, and parses the record otherwise.
        # Bounded: cleared when full (a lagging or restarted reput falls back to parsing).
        self.dispatch_hints: dict[int, DispatchHint] = {}
        # {commit log offset: HintRun}: the column batch paths' hints, one entry per batch under
        # the offset of its first record not yet dispatched; same rules, bounded by
        # _MAX_DISPATCH_RUNS (see pending_hints for both as per-record hints)
        self.dispatch_runs: dict[int, HintRun] = {}
        # prefault_ahead's switch: writes go to the mapping (no pool) of a writable log; off for
        # good once the kernel refuses MADV_POPULATE_WRITE
        self.prefault_enabled = not read_only and transient_store_pool is None

    def pending_hints(self) -> dict[int, DispatchHint]:
        """Every hint not yet consumed as per-record hints ``{offset: DispatchHint}``: those of
        ``dispatch_hints`` and each run's records from its ``start`` (for checks and tests)."""
        out = dict(self.dispatch_hints)
        for run in list(self.dispatch_runs.values()):
            for i in range(run.start, len(run)):
                out[run.offsets[i]] = run.hint(i)
        return out

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

    def lock_time_mills(self) -> int:
        """``lockTimeMills``: how long the put holding the lock has held it (0 when free)."""
        begin = self.begin_time_in_lock
        return max(self.clock.now_ms() - begin, 0) if begin > 0 else 0

    def get_max_offset(self) -> int:
        return self.mapped_file_queue.get_max_offset()

    def roll_next_file(self, offset: int) -> int:
        return offset + self.file_size - offset % self.file_size

    def prefault_ahead(self) -> int:
        """Pre-fault the last file up to ``wrote_position + prefault_bytes`` (not past its end:
        the next file is the allocator's) once less than half of that is left ahead of the
        writer; returns the bytes pre-faulted. For ``CommitLogPrefaultService``, once per round:
        with nothing to do it is two comparisons. The first refusal by the kernel
        (``MADV_POPULATE_WRITE`` unsupported) switches it off for this store."""
        if not self.prefault_enabled or not self.writeable:
            return 0
        files = self.mapped_file_queue.mapped_files
        if not files:
            return 0
        mf = files[-1]
        ahead = self.prefault_bytes
        if self._slack(mf) >= 0 or ahead <= 0:
            return 0
        done = mf.prefault(mf.wrote_position + ahead)
        if done < 0:
            self.prefault_enabled = False
            log.debug("commit log pre-faulting off: madvise(MADV_POPULATE_WRITE) refused on %s", mf.file_name)
            return 0
        return done

    def prefault_slack(self) -> int:
        """Bytes the writer can still append before ``prefault_ahead`` has work again (<= 0:
        it has now, or the last file is not pre-faulted at all)."""
        files = self.mapped_file_queue.mapped_files
        if not files or not self.prefault_enabled:
            return 0
        return self._slack(files[-1])

    def _slack(self, mf: MappedFile) -> int:
        # the window is topped up once less than half of prefault_bytes is left ahead
        return mf.prefaulted_position - mf.wrote_position - (self.prefault_bytes >> 1)

    def msg_id(self, offset: int) -> str:
        return f"{self._msg_id_prefix}{offset:016X}"

    # ------------------------------------------------------------------ reading
    def get_message(self, offset: int, size: int) -> SelectMappedBufferResult | None:
        """``size`` bytes at absolute ``offset``, or None when not (or no longer) there.

        RocketMQ looks offset 0 up with ``returnFirstOnNotFound``: once the first file is deleted
        it reads position 0 of the first *remaining* file, i.e. another message (a consumer at
        queue offset 0 gets FOUND and the wrong bytes; ``lookMessageByOffset(0)`` decodes the
        wrong record). rmqlab answers "no longer there", as RocketMQ does for any other offset.
        """
        mf = self.mapped_file_queue.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        return mf.select_mapped_buffer(offset % self.file_size, size)

    def select_from(self, offset: int) -> SelectMappedBufferResult | None:
        """From absolute ``offset`` to the read position of its file, found as ``get_message``
        finds it; ``get_message(offset, size)`` is this when ``size`` fits in the result."""
        mf = self.mapped_file_queue.find_mapped_file_by_offset(offset)
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
        one file reference held; None when no whole record is readable there (offset 0 after
        the first file was deleted included: see :meth:`get_message`)."""
        mf = self.mapped_file_queue.find_mapped_file_by_offset(offset)
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
        """Store timestamp of the record at ``offset`` (-1 unless it lies inside the log).

        Also -1 when ``size`` (a consume-queue unit's, possibly damaged: recovery keeps a last
        file's first unit unchecked) is too small to reach the timestamp: RocketMQ reads past the
        end of its ``size``-byte slice there and throws ``IndexOutOfBoundsException``."""
        if size < 40 or offset < self.get_min_offset() or offset + size > self.get_max_offset():
            return -1
        # get_message(offset, size) without the SelectMappedBufferResult: this runs ~20 times
        # per by-time lookup (binary search). Same visibility rules and the same reads.
        mf = self.mapped_file_queue.find_mapped_file_by_offset(offset, offset == 0)
        pos = offset % self.file_size
        if mf is None or size < 0 or pos + size > mf.read_position or not mf.hold():
            return -1
        try:
            buf = mf.buffer[pos : pos + size]
            at = store_timestamp_position(_INT.unpack_from(buf, 36)[0])
            return _LONG.unpack_from(buf, at)[0] if at + 8 <= size else -1
        finally:
            mf.release()

    # ------------------------------------------------------------------ writing
    def check_message(self, msg: Message) -> PutMessageResult | None:
        """None if ``msg`` may be stored, else the refusal (status and reason)."""
        refused = self._check_topic(msg.topic)
        if refused is not None:
            return refused
        if len(msg.body) > self.config.max_message_size:
            return PutMessageResult(
                PutMessageStatus.MESSAGE_ILLEGAL,
                reason=f"body of {len(msg.body)} bytes exceeds max_message_size {self.config.max_message_size}",
            )
        if msg.queue_id < 0:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, reason=f"queue id {msg.queue_id} < 0")
        return None

    def _check_topic(self, topic: str) -> PutMessageResult | None:
        """None if the log takes writes and ``topic`` is one RocketMQ accepts, else the refusal."""
        if not self.writeable:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, reason=self.not_writeable_reason)
        if topic not in self._valid_topics:
            try:
                self._validate_topic(topic)
            except InvalidTopic as e:
                return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, reason=str(e))
            self._valid_topics.add(topic)
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

    def encode_record(self, msg: Message, now: int, uniq: str | None = None, *, drop_wait: bool = False,
                      timer_out_ms: int | None = None, drop_crc: bool = False) -> EncodedRecord | PutMessageResult:
        """Encode ``msg`` as a record with zero queue offset, physical offset and store time.

        ``uniq``: the UNIQ_KEY to use when the message brings none (the fast path passes the one
        it already drew when it hands a message over, so no counter value is skipped).
        ``drop_wait``: leave WAIT out of the properties (5.x's multi-dispatch put).
        ``timer_out_ms``: a timer message's due tick (:meth:`_transform_timer`): the record goes
        to ``rmq_sys_wheel_timer`` queue 0 with ``TIMER_OUT_MS``, ``REAL_TOPIC``, ``REAL_QID``.
        ``drop_crc``: leave a client's ``__CRC32#`` out (5.x ``asyncPutMessage`` with
        ``enabledAppendPropCRC``; :meth:`_put` then reserves the store's own)."""
        uniq = msg.uniq_key or (msg.properties or {}).get(flags.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or uniq
        if not uniq:
            uniq = self.new_uniq_key(now)
        client = client_properties(msg, uniq)
        if drop_crc:
            client.pop(flags.PROPERTY_CRC32, None)
        topic, queue_id = msg.topic, msg.queue_id
        delay = client.get(flags.PROPERTY_DELAY_TIME_LEVEL)
        if timer_out_ms is not None:
            props, parsed = encode_timer_broker_properties_and_map(
                client, self.config.rocketmq_version, self.config.broker_cluster_name,
                real_topic=topic, real_queue_id=queue_id, timer_out_ms=timer_out_ms)  # fmt: skip
            scheduled: tuple[bytes, dict[str, str] | None, str, int] | PutMessageResult | None = (
                props, parsed, flags.TIMER_TOPIC, 0)
        elif delay is not None and (msg.sys_flag & _TX_MASK) not in _NO_QUEUE_OFFSET:
            scheduled = self._schedule(client, topic, queue_id, delay)
            if isinstance(scheduled, PutMessageResult):
                return scheduled
        else:
            scheduled = None
        if scheduled is None:
            props, parsed = encode_broker_properties_and_map(client, self.config.rocketmq_version,
                                                             self.config.broker_cluster_name, drop_wait=drop_wait)
        else:
            props, parsed, topic, queue_id = scheduled
        born_ip, born_port = self._host(msg.born_host)
        return self._record(
            topic, queue_id, msg.body, msg.flag, msg.sys_flag,
            msg.born_timestamp if msg.born_timestamp is not None else now, born_ip, born_port,
            self._store_ip or ip_to_bytes(self.store_host[0]), self.store_host[1], msg.reconsume_times,
            msg.prepared_transaction_offset, props, parsed,
        )  # fmt: skip

    def _record(
        self, topic: str, queue_id: int, body: bytes, flag: int, sys_flag: int, born_timestamp: int,
        born_ip: bytes, born_port: int, store_ip: bytes, store_port: int, reconsume_times: int,
        prepared_transaction_offset: int, props: bytes, parsed: dict[str, str] | None,
    ) -> EncodedRecord | PutMessageResult:  # fmt: skip
        """The record of these fields and properties bytes (``parsed``: what a reader parses
        back from them, or None), with zero queue offset, physical offset and store time; or
        the refusal of a properties string or record that is too long."""
        if len(props) > _MAX_PROPERTIES_LENGTH:
            # 4.9.8's DefaultMessageStore.checkMessage refuses first when the string is longer than
            # Short.MAX_VALUE Java chars (UTF-16 units); the encoder then counts UTF-8 bytes
            text = props.decode("utf-8", "surrogatepass")
            units = len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)
            if self.config.is_v4 and units > _MAX_PROPERTIES_LENGTH:
                return PutMessageResult(
                    PutMessageStatus.MESSAGE_ILLEGAL,
                    reason=f"properties string of {units} chars exceeds {_MAX_PROPERTIES_LENGTH}",
                )
            return PutMessageResult(
                PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
                reason=f"properties of {len(props)} bytes exceed {_MAX_PROPERTIES_LENGTH}",
            )
        data = bytearray(
            encode_message_parts(
                topic, body, queue_id, flag, 0, 0, sys_flag, born_timestamp, born_ip, born_port, 0, store_ip,
                store_port, reconsume_times, prepared_transaction_offset, props, body_crc(body), self._version,
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
                topic, queue_id, java_hash(tags) if tags else 0, parsed.get(flags.PROPERTY_KEYS),
                parsed.get(flags.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX), sys_flag,
                prepared_transaction_offset, props,
            )  # fmt: skip
        return EncodedRecord(
            data,
            f"{topic}-{queue_id}",
            store_timestamp_position(sys_flag),
            (sys_flag & _TX_MASK) not in _NO_QUEUE_OFFSET,
            # MessageDecoder.encodeMessages: size, magic, crc, flag, body len, body, props len, props
            22 + len(body) + len(props),
            dispatch,
        )

    def _schedule(self, client: dict[str, str], topic: str, queue_id: int, delay: str
                  ) -> tuple[bytes, dict[str, str] | None, str, int] | PutMessageResult | None:
        """A delayed message (``DELAY`` > 0, not a prepared or rolled-back transaction half) as
        the broker stores it until it is due (spec 2.10; 4.9.8 ``CommitLog.asyncPutMessage``,
        5.x ``HookUtils.transformDelayLevelMessage``): the level capped at the highest one,
        ``SCHEDULE_TOPIC_XXXX`` queue ``level - 1``, the real topic and queue id kept in
        ``REAL_TOPIC``/``REAL_QID``. Returns ``(properties, parsed map, topic, queue id)``, None
        for a level <= 0 (an ordinary message), or MESSAGE_ILLEGAL for a ``DELAY`` that is not a
        Java int (RocketMQ's ``getDelayTimeLevel`` throws on it)."""
        try:
            level = parse_java_int(delay)
        except ValueError:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL,
                                    reason=f"DELAY property {delay!r} is not an int (RocketMQ's parseInt throws)")
        if level <= 0:
            return None
        top = self._max_delay_level
        if level > top:
            level, delay = top, str(top)
        props, parsed = encode_scheduled_broker_properties_and_map(
            client, self.config.rocketmq_version, self.config.broker_cluster_name,
            real_topic=topic, real_queue_id=queue_id, delay_level=delay)  # fmt: skip
        return props, parsed, flags.SCHEDULE_TOPIC, level - 1

    def put_timeup(self, rec: MessageRecord) -> PutMessageResult:
        """Put a delayed message that is due back into its real topic and queue: what
        ``ScheduleMessageService.messageTimeup`` builds from the schedule record ``rec`` and the
        store then appends. Topic and queue id from ``REAL_TOPIC``/``REAL_QID``; body, flag,
        sys flag, born time and host, store host and reconsume times copied; the prepared
        transaction offset left 0; the properties string the record's decoded map serialised
        again, taken before ``DELAY`` is cleared (so it keeps ``DELAY``, ``REAL_TOPIC``,
        ``REAL_QID``) -- with ``DELAY`` gone from the map, the put does not schedule it again.

        Raises :class:`ScheduleRecordError` (naming the record's offset) when ``REAL_TOPIC`` is
        missing or ``REAL_QID`` is not an int: RocketMQ's task throws there, logs it and tries the
        same unit again at its next run. A refusal (an invalid topic, a full disk) is the
        result's status.
        """
        props = rec.properties
        topic = props.get(flags.PROPERTY_REAL_TOPIC)
        qid = props.get(flags.PROPERTY_REAL_QUEUE_ID)
        if topic is None:
            raise ScheduleRecordError(rec.commit_log_offset, "no REAL_TOPIC property")
        try:
            queue_id = parse_java_int(qid if qid is not None else "")
        except ValueError:
            raise ScheduleRecordError(rec.commit_log_offset, f"REAL_QID {qid!r} is not an int") from None
        if queue_id < 0:
            refused = self._check_topic(topic)
            return refused or PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, reason=f"REAL_QID {queue_id} < 0")
        return self.put_rebuilt(rec, topic, queue_id, props)

    def put_rebuilt(self, rec: MessageRecord, topic: str, queue_id: int, props: Mapping[str, str]) -> PutMessageResult:
        """Put a copy of the stored record ``rec`` into ``topic``/``queue_id`` with the properties
        ``props`` (a map in insertion order) serialised as a 5.x/4.9.8 broker serialises a decoded
        map (``messageProperties2String``): body, flag, sys flag, born time and host, store host
        and reconsume times copied, the prepared transaction offset 0. What the schedule service
        (:meth:`put_timeup`) and the timer wheel put back."""
        refused = self._check_topic(topic)
        if refused is not None:
            return refused
        if self._prop_crc and flags.PROPERTY_CRC32 in props:  # the stored record's own: a new one is written
            props = {k: v for k, v in props.items() if k != flags.PROPERTY_CRC32}
        text, parsed = reserialised_properties_and_map(props, self.config.rocketmq_version)
        born_ip, born_port = self._host(rec.born_host)
        store_ip, store_port = self._host(rec.store_host)
        try:
            enc = self._record(topic, queue_id, rec.body, rec.flag, rec.sys_flag, rec.born_timestamp, born_ip,
                               born_port, store_ip, store_port, rec.reconsume_times, 0, text, parsed)  # fmt: skip
            return enc if isinstance(enc, PutMessageResult) else self._put([enc])
        except DiskFull as e:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, reason=str(e))

    def put_inner_batch(self, batch: MessageBatch) -> PutMessageResult:
        """Append a producer's batch to a 5.x BatchCQ topic as ONE inner-batch record, as a 5.3.3
        broker stores it (``SendMessageProcessor`` for a BatchCQ topic, then the store).

        The record: the batch's header fields, flag 0, sys flag | NEED_UNWRAP | INNER_BATCH, the
        batch body as the producer encoded it (``encodeMessages``) as its BODY, and properties
        ``messageProperties2String`` of one ``HashMap(128)`` that received, in order, the batch
        message's own properties as sent (WAIT, its UNIQ_KEY), CLUSTER, ``INNER_NUM`` (the count
        of inner messages) and, under the put lock, ``INNER_BASE`` = the record's queue offset
        (``BatchConsumeQueue.assignQueueOffset``). The queue offset advances by ``INNER_NUM``.
        """
        refused = self._check_topic(batch.topic)
        if refused is not None:
            return refused
        if batch.queue_id < 0:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, reason=f"queue id {batch.queue_id} < 0")
        if not len(batch):
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, reason="empty batch")
        if len(batch.body) > self.config.max_message_size:
            return PutMessageResult(
                PutMessageStatus.MESSAGE_ILLEGAL,
                reason=f"batch body of {len(batch.body)} bytes exceeds max_message_size {self.config.max_message_size}",
            )
        version = self.config.rocketmq_version
        sent = decode_properties(encode_client_properties(batch.properties, version)) if batch.properties else {}
        sent[flags.PROPERTY_CLUSTER] = self.config.broker_cluster_name
        sent[flags.PROPERTY_INNER_NUM] = str(len(batch))  # MessageDecoder.countInnerMsgNum
        return self._put_inner(batch.topic, batch.queue_id, batch.body, 0, batch.sys_flag, batch.born_timestamp,
                               batch.born_host, batch.reconsume_times, sent, len(batch))

    def put_inner_message(self, msg: Message) -> PutMessageResult:
        """Append a message that is already an inner batch (its sys flag has INNER_BATCH; its
        ``INNER_NUM`` property, if any, the message count) to a BatchCQ topic: the 5.x store's
        ``assignQueueOffset`` adds ``INNER_BASE`` and the queue offset advances by
        ``getMessageNum`` (INNER_NUM, at least 1)."""
        bad = self.check_message(msg)
        if bad is not None:
            return bad
        num_text = (msg.properties or {}).get(flags.PROPERTY_INNER_NUM)
        num = 1
        if num_text is not None:
            try:
                num = max(1, parse_java_short(num_text))
            except ValueError:
                return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL,
                                        reason=f"INNER_NUM {num_text!r} is not a short (RocketMQ's parseShort throws)")
        now = self.clock.now_ms()
        version = self.config.rocketmq_version
        uniq = msg.uniq_key or (msg.properties or {}).get(flags.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) \
            or self.new_uniq_key(now)
        sent = decode_properties(encode_client_properties(client_properties(msg, uniq), version))
        sent.setdefault(flags.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, uniq)
        sent[flags.PROPERTY_CLUSTER] = self.config.broker_cluster_name
        return self._put_inner(msg.topic, msg.queue_id, bytes(msg.body), msg.flag, msg.sys_flag, msg.born_timestamp,
                               msg.born_host, msg.reconsume_times, sent, num)

    def _put_inner(self, topic: str, queue_id: int, body: bytes, flag: int, sys_flag: int, born_timestamp: int | None,
                   born_host: tuple[str, int] | str, reconsume_times: int, props: dict[str, str], num: int,
                   ) -> PutMessageResult:
        """The inner-batch record of these fields under the put lock: ``INNER_BASE`` (the queue
        offset) put last into ``props`` (a HashMap's insertion order), serialised, the queue
        offset moved by ``num``."""
        key = f"{topic}-{queue_id}"
        version = self.config.rocketmq_version
        sys_flag |= flags.NEED_UNWRAP_FLAG | flags.INNER_BATCH_FLAG
        try:
            born_ip, born_port = self._host(born_host)
            store_ip = self._store_ip or ip_to_bytes(self.store_host[0])
        except BAD_FIELD_ERRORS as e:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, reason=f"born host {born_host!r}: {e}")

        def prepare() -> tuple[list[EncodedRecord], dict[str, int]] | PutMessageResult:
            q = self.topic_queue_table.get(key, 0)
            m = dict(props)
            if self._prop_crc:
                m.pop(flags.PROPERTY_CRC32, None)
            m[flags.PROPERTY_INNER_BASE] = str(q)
            text, parsed = reserialised_properties_and_map(m, version)
            enc = self._record(topic, queue_id, body, flag, sys_flag,
                               self.clock.now_ms() if born_timestamp is None else born_timestamp, born_ip,
                               born_port, store_ip, self.store_host[1], reconsume_times, 0, text, parsed)
            if isinstance(enc, PutMessageResult):
                return enc
            return [enc], {key: q + num}

        try:
            result = self._put([], prepare=prepare)
        except DiskFull as e:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, reason=str(e))
        ar = result.append_result
        if ar is None or num == 1:
            return result
        # 5.x doAppend: the AppendMessageResult's msgNum is the record's messageNum (INNER_NUM)
        return dataclasses.replace(result, append_result=dataclasses.replace(ar, msg_num=num))

    def new_uniq_key(self, now: int) -> str:
        """The next UNIQ_KEY at ``now`` (MessageClientIDSetter: time prefix + 16-bit counter)."""
        prefix = self._uniq_prefix
        if prefix[0] != now:
            prefix = self._uniq_prefix = (now, self._uniq.time_prefix(now, self._tz))
        return f"{prefix[1]}{next(self._uniq_counter) & 0xFFFF:04X}"

    def _shape(self, msg: Message, has_keys: bool) -> _Shape | None:
        """Build the :class:`_Shape` of ``msg`` with the exact encoder, or None when messages
        of this shape must take the exact path (invalid topic, SCHEDULE_TOPIC, a delay level, properties the
        reader would not parse back as built, an unusable host...)."""
        topic = msg.topic
        if self._store_ip is None or topic == flags.SCHEDULE_TOPIC or msg.delay_time_level > 0:
            return None  # (a delayed message moves to SCHEDULE_TOPIC: _schedule)
        try:
            if topic not in self._valid_topics:
                self._validate_topic(topic)
                self._valid_topics.add(topic)
            born_ip, born_port = self._host(msg.born_host)
            _version, magic, tail = topic_field(topic, self._version)
            probe = Message(topic, b"", tags=msg.tags, keys=_PH_KEYS if has_keys else (), born_host=msg.born_host,
                            sys_flag=msg.sys_flag, delay_time_level=msg.delay_time_level,
                            wait_store_msg_ok=msg.wait_store_msg_ok)
            props, parsed = build_properties_and_map(
                probe, _PH_UNIQ, cluster=self.config.broker_cluster_name, rocketmq_version=self.config.rocketmq_version
            )
            head = head_struct(len(born_ip), len(self._store_ip))
        except (InvalidTopic, ValueError, TypeError):
            return None
        if parsed is None or parsed.get(_UNIQ) != _PH_UNIQ or (has_keys and parsed.get(_KEYS) != _PH_KEYS):
            return None
        text = props.decode("utf-8")
        if text.count(_PH_UNIQ) != 1 or text.count(_PH_KEYS) != (1 if has_keys else 0):
            return None
        sys_flag = msg.sys_flag & ~_V6_FLAGS
        if len(born_ip) == 16:
            sys_flag |= flags.BORNHOST_V6_FLAG
        if len(self._store_ip) == 16:
            sys_flag |= flags.STOREHOSTADDRESS_V6_FLAG
        iu = text.index(_PH_UNIQ)
        if has_keys:
            ik = text.index(_PH_KEYS)
            (a, pa), (b, pb) = sorted([(ik, _PH_KEYS), (iu, _PH_UNIQ)])
            segs = (text[:a], text[a + len(pa) : b], text[b + len(pb) :])
            keys_first = ik < iu
        else:
            segs = (text[:iu], text[iu + len(_PH_UNIQ) :], "")
            keys_first = False
        tags = parsed.get(flags.PROPERTY_TAGS)
        return _Shape(topic, head, magic, tail, sys_flag, born_ip, born_port, java_hash(tags) if tags else 0, segs,
                      keys_first)

    def put_message(self, msg: Message) -> PutMessageResult:
        """Append one message; returns PUT_OK with its msgId, offsets and store timestamp.

        Fast path: encode from the message's cached shape (no intermediate record object) and,
        under the put lock, pack the head with its final queue offset, physical offset and store
        time straight into the mapped file, then copy body and tail. Anything unusual (a refusal,
        user properties, SCHEDULE_TOPIC...) takes the exact path at the end. The steps are the list
        batch path's (:meth:`_list_rows`, :meth:`_write_rows`) for one record, inlined: this is
        the hottest call.
        """
        try:
            now = self.clock.now_ms()
            uniq = None
            if self.fast_path and self.writeable and not msg.properties:
                keys = msg.keys
                try:
                    ks = _keys_string(keys)
                    skey = (msg.topic, msg.tags, msg.born_host, msg.sys_flag, msg.wait_store_msg_ok,
                            msg.delay_time_level, not ks)
                    shape = self._shapes.get(skey, False)
                except TypeError:  # non-str keys, unhashable host...: let the exact path answer
                    shape = None
                if shape is False:
                    shape = self._new_shape(skey, msg, ks)
                body = msg.body
                queue_id = msg.queue_id
                uniq = msg.uniq_key
                if (
                    shape is not None
                    and (not ks or ("\x01" not in ks and "\x02" not in ks))
                    and len(body) <= self._max_message_size
                    and queue_id >= 0
                    and (not uniq or (uniq.__class__ is str and "\x01" not in uniq and "\x02" not in uniq))
                ):
                    if not uniq:
                        prefix = self._uniq_prefix
                        if prefix[0] != now:
                            prefix = self._uniq_prefix = (now, self._uniq.time_prefix(now, self._tz))
                        uniq = prefix[1] + _HEX4[next(self._uniq_counter) & 0xFFFF]
                    props = shape.properties(ks, uniq)
                    plen = len(props)
                    total = shape.fixed + len(body) + plen
                    if plen <= _MAX_PROPERTIES_LENGTH and total <= self._max_record_size:
                        born = msg.born_timestamp
                        result = self._write_one(
                            msg, shape, total, _crc32(body) & 0x7FFFFFFF,
                            shape.topic_tail + plen.to_bytes(2, "big") + props,
                            (shape.topic, queue_id, shape.tags_code, ks or None, uniq, shape.sys_flag,
                             msg.prepared_transaction_offset, props),
                            now if born is None else born,
                        )  # fmt: skip
                        if result is not None:
                            return result
                elif uniq.__class__ is not str:
                    uniq = None
            bad = self.check_message(msg)
            if bad is not None:
                return bad
            timer_out = None
            if msg.properties and not self.config.is_v4:
                timer = self._timer_rule(msg, now)
                if isinstance(timer, PutMessageResult):
                    return timer
                msg, timer_out = timer
            if timer_out is None and self.config.enable_multi_dispatch and msg.properties and \
                    (msg.properties.get(flags.PROPERTY_INNER_MULTI_DISPATCH) or "").strip():
                return self._put_multi_dispatch(msg, now, uniq or None)
            # the UNIQ_KEY and time the fast path already drew, if any: the record it would have made
            enc = self.encode_record(msg, now, uniq or None, timer_out_ms=timer_out, drop_crc=self._prop_crc)
            if isinstance(enc, PutMessageResult):
                return enc
            return self._put([enc])
        except DiskFull as e:  # nothing was written: refused, as RocketMQ refuses a put on a full disk
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, reason=str(e))
        except BAD_FIELD_ERRORS:  # nothing was written
            return refuse_bad_fields([msg])

    def _timer_rule(self, msg: Message, now: int) -> tuple[Message, int | None] | PutMessageResult:
        """5.x's broker step for timer properties (``HookUtils.handleScheduleMessage``), for a
        NOT/COMMIT message outside ``rmq_sys_wheel_timer``: with a delay level, its
        ``TIMER_DELIVER_MS``/``TIMER_DELAY_SEC``/``TIMER_DELAY_MS`` are dropped (the level wins);
        without one, a message that has any of them and no ``TIMER_OUT_MS`` is a timer message.
        Returns the message to store and, for a timer message that is not due yet, its
        ``TIMER_OUT_MS`` (the record then goes to ``rmq_sys_wheel_timer`` queue 0), or the
        refusal: WHEEL_TIMER_NOT_ENABLE (``timer_wheel_enable`` off), WHEEL_TIMER_MSG_ILLEGAL,
        WHEEL_TIMER_FLOW_CONTROL (:meth:`_transform_timer`)."""
        props = msg.properties or {}
        if (msg.topic == flags.TIMER_TOPIC or (msg.sys_flag & _TX_MASK) in _NO_QUEUE_OFFSET
                or not any(k in props for k in _TIMER_PROPERTIES)):
            return msg, None
        delay = props.get(flags.PROPERTY_DELAY_TIME_LEVEL)
        try:
            level = parse_java_int(delay) if delay is not None else msg.delay_time_level
        except ValueError:
            return msg, None  # encode_record refuses the DELAY value
        if level > 0:
            kept = {k: v for k, v in props.items() if k not in _TIMER_PROPERTIES}
            return dataclasses.replace(msg, properties=kept), None
        if flags.PROPERTY_TIMER_OUT_MS in props:
            return msg, None
        if not self.config.timer_wheel_enable:
            return PutMessageResult(
                PutMessageStatus.WHEEL_TIMER_NOT_ENABLE,
                reason="a timer message (" + ", ".join(k for k in _TIMER_PROPERTIES if k in props)
                + ") needs the timer wheel: timer_wheel_enable is off",
            )
        return self._transform_timer(msg, props, now)

    def _transform_timer(self, msg: Message, props: Mapping[str, str], now: int
                         ) -> tuple[Message, int | None] | PutMessageResult:
        """``HookUtils.transformTimerMessage``: the deliver time from ``TIMER_DELAY_SEC`` (now +
        s * 1000), else ``TIMER_DELAY_MS`` (now + ms), else ``TIMER_DELIVER_MS`` (Java longs; a
        value ``parseLong`` rejects is WHEEL_TIMER_MSG_ILLEGAL). Not after now: stored as sent
        in its own topic (delivered at once), unless it is a delete marker
        (``TIMER_DEL_UNIQKEY``: illegal). Later: more than ``timer_max_delay_sec`` ahead is
        illegal; the time is rounded down to the tick (a time on a tick boundary goes one tick
        earlier), and a put into a slot holding more than ``timer_congest_num_each_slot``
        messages may be refused (WHEEL_TIMER_FLOW_CONTROL, ``timer_reject``)."""
        try:
            if flags.PROPERTY_TIMER_DELAY_SEC in props:
                name = flags.PROPERTY_TIMER_DELAY_SEC
                deliver = _java_long(now + parse_java_long(props[name]) * 1000)
            elif flags.PROPERTY_TIMER_DELAY_MS in props:
                name = flags.PROPERTY_TIMER_DELAY_MS
                deliver = _java_long(now + parse_java_long(props[name]))
            else:
                name = flags.PROPERTY_TIMER_DELIVER_MS
                deliver = parse_java_long(props[name])
        except (ValueError, TypeError):
            return PutMessageResult(PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL,
                                    reason=f"{name} {props[name]!r} is not a Java long")
        if deliver <= now:
            if flags.PROPERTY_TIMER_DEL_UNIQKEY in props:
                return PutMessageResult(PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL,
                                        reason=f"a timer delete marker due at {deliver}, not after now ({now})")
            return msg, None
        max_ms = self.config.timer_max_delay_sec * 1000
        if deliver - now > max_ms:
            return PutMessageResult(PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL,
                                    reason=f"due {deliver - now} ms from now, more than timer_max_delay_sec "
                                           f"({self.config.timer_max_delay_sec} s)")
        precision = self.config.timer_precision_ms
        deliver = deliver - precision if deliver % precision == 0 else deliver // precision * precision
        reject = self.timer_reject
        if reject is not None and reject(deliver):
            return PutMessageResult(PutMessageStatus.WHEEL_TIMER_FLOW_CONTROL,
                                    reason=f"the timer wheel's slot for {deliver} holds more than "
                                           f"timer_congest_num_each_slot messages")
        return msg, deliver

    def _put_multi_dispatch(self, msg: Message, now: int, uniq: str | None) -> PutMessageResult:
        """A message naming multi-dispatch queues (``enable_multi_dispatch``): under the put lock
        the named queues' next offsets (key ``name-queueId``, queue id 0 for a ``%LMQ%`` name
        with ``enable_lmq``) are read from the queue offset table into
        ``INNER_MULTI_QUEUE_OFFSET`` (replacing any the producer set), the record is encoded again
        with it, without WAIT, and once it is appended those queues' offsets move on.

        * 4.9.8 (``MultiDispatch.wrapMultiDispatch``): every named queue gets its offset; the
          offsets move on only for NOT/COMMIT messages; a failed re-encode is ``UNKNOWN_ERROR``
          (``rebuildMsgInner``).
        * 5.3.3 (``ConsumeQueue.assignQueueOffset`` / ``increaseQueueOffset``): only NOT/COMMIT
          messages of topics it multi-dispatches from (not ``%RETRY%``, schedule or timer topics)
          are handled, the others stored as sent; only ``%LMQ%`` queues (with ``enable_lmq``) get
          an offset, every other name an empty one (``StringUtils.join`` of a null), which its
          dispatch then cannot read; each LMQ queue moves on once per time it is named.
          5.3.3 keeps the LMQ offsets in a table of their own; rmqlab keeps them in the one
          queue offset table, which differs only for a ``%LMQ%`` topic that is also put to
          directly.

        Refused (MESSAGE_ILLEGAL, with why): delayed messages, whose move to the schedule topic
        would (4.9.8) dispatch them to the named queues before they are due.
        """
        props = msg.properties or {}
        if msg.delay_time_level > 0 or props.get(flags.PROPERTY_DELAY_TIME_LEVEL):
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL,
                                    reason="a delayed message cannot name multi-dispatch queues in rmqlab")
        v4 = self.config.is_v4
        counted = (msg.sys_flag & _TX_MASK) not in _NO_QUEUE_OFFSET
        if not v4 and not (counted and dispatches_multi(msg.topic, self.config.rocketmq_version)):
            enc = self.encode_record(msg, now, uniq, drop_crc=self._prop_crc)
            return enc if isinstance(enc, PutMessageResult) else self._put([enc])
        lmq = self.config.enable_lmq
        keys = [f"{n}-{0 if lmq and is_lmq_topic(n) else msg.queue_id}"
                for n in java_split(props[flags.PROPERTY_INNER_MULTI_DISPATCH], MULTI_DISPATCH_QUEUE_SPLITTER)]
        assigned = [v4 or (lmq and is_lmq_topic(k)) for k in keys]

        def prepare() -> tuple[list[EncodedRecord], dict[str, int]] | PutMessageResult:
            table = self.topic_queue_table
            offsets = [str(table.get(k, 0)) if a else "" for k, a in zip(keys, assigned, strict=True)]
            value = MULTI_DISPATCH_QUEUE_SPLITTER.join(offsets)
            wrapped = dataclasses.replace(msg, properties={**props, flags.PROPERTY_INNER_MULTI_QUEUE_OFFSET: value})
            enc = self.encode_record(wrapped, now, uniq, drop_wait=True, drop_crc=self._prop_crc)
            if isinstance(enc, PutMessageResult):
                if not v4:  # 5.x's encoder answers for itself
                    return enc
                return PutMessageResult(PutMessageStatus.UNKNOWN_ERROR,  # rebuildMsgInner's encode failed
                                        reason=f"with INNER_MULTI_QUEUE_OFFSET added: {enc.reason}")
            moves: dict[str, int] = {}
            if counted:
                for k, a in zip(keys, assigned, strict=True):
                    if a:  # 4.9.8 sets each to its offset + 1; 5.3.3 adds 1 per time it is named
                        moves[k] = table.get(k, 0) + 1 if v4 else moves.get(k, table.get(k, 0)) + 1
            return [enc], moves

        return self._put([], prepare=prepare)

    def _new_shape(self, skey: tuple, msg: Message, ks: str) -> _Shape | None:
        if len(self._shapes) >= _MAX_SHAPES:
            self._shapes.clear()
        shape = self._shapes[skey] = self._shape(msg, bool(ks))
        return shape

    def _fast_file(self, total: int) -> MappedFile | None:
        """Under the put lock: the file ``total`` bytes go to (the last one, or the next after
        a roll as :meth:`_put` rolls), or None when only the exact path can go on."""
        if not self.writeable:
            return None
        files = self.mapped_file_queue.mapped_files
        mf = files[-1] if files else None
        if mf is None or mf.read_only or mf.wrote_position + total + 8 > mf.file_size:
            mf = self._fast_roll(mf, total)
        return mf

    def _write_one(
        self, msg: Message, shape: _Shape, total: int, crc: int, tail: bytes, dispatch: tuple, born: int
    ) -> PutMessageResult | None:
        """Write one fast-encoded record at the end of the last file (rolling it like
        :meth:`_put` when it does not fit); None (nothing changed) when only the exact path
        can go on: the log is not writeable, no file can be created, the record fits no file."""
        body = msg.body
        head = shape.head
        lock = self.put_lock
        if lock.locked():
            wait_until_free(lock)
        with lock:
            now = self.begin_time_in_lock = self.clock.now_ms()  # RocketMQ's beginTimeInLock
            try:
                mf = self._fast_file(total)
                if mf is None:
                    return None
                pos = mf.wrote_position
                if pos + total > mf.writable_to:
                    mf.reserve(pos + total)  # DiskFull rather than SIGBUS, before any byte is written
                queue_id = dispatch[1]
                qkey = shape.queue_keys.get(queue_id) or shape.queue_key(queue_id)
                table = self.topic_queue_table
                gets_q = shape.gets_queue_offset
                q = table.get(qkey, 0) if gets_q else 0
                phys = mf.file_from_offset + pos
                target = mf.write_target
                try:
                    head.pack_into(
                        target, pos, total, shape.magic, crc, queue_id, msg.flag, q, phys, shape.sys_flag, born,
                        shape.born_ip, shape.born_port, now, self._store_ip, self.store_host[1], msg.reconsume_times,
                        dispatch[6], len(body),
                    )  # fmt: skip
                except (struct.error, OverflowError):  # a field out of range: leave no half head past the end
                    target[pos : pos + head.size] = bytes(head.size)
                    raise
                p = pos + head.size
                end = p + len(body)
                target[p:end] = body
                target[end : pos + total] = tail
                hints = self.dispatch_hints
                if len(hints) >= _MAX_DISPATCH_HINTS:
                    hints.clear()
                hints[phys] = (total, q, now, shape.ts_pos, dispatch)
                if gets_q:
                    table[qkey] = q + 1
                mf.wrote_position = pos + total
                mf.store_timestamp = now
                if self.bus.active:
                    self.bus.publish(Appended("commitlog", mf.name, phys, total, pos + total))
            finally:
                self.begin_time_in_lock = 0
        upper = self._msg_id_upper  # one tuple read: another putter may replace it meanwhile
        if upper[0] != phys >> 16:
            upper = self._msg_id_upper = (phys >> 16, f"{self._msg_id_prefix}{phys >> 16:012X}")
        result = put_ok(phys, total, upper[1] + _HEX4[phys & 0xFFFF], now, q, 1)
        if self.on_put is not None:
            self.on_put(result.append_result)  # type: ignore[arg-type]
        return result

    def _fast_roll(self, mf: MappedFile | None, total: int) -> MappedFile | None:
        """Under the put lock, when ``total`` bytes do not fit in ``mf`` (the last file): what
        :meth:`_put` does then (blank record, next file), up to a file they fit in; None when
        only the exact path can go on, from the state this leaves (identical to its own)."""
        if total + 8 > self.file_size:  # fits no file: the exact path refuses it (after its blanks)
            return None
        if mf is None or mf.is_full():
            mf = self._writable_file()
            if mf is None or mf.read_only:
                return None
            if total + 8 <= mf.file_size - mf.wrote_position:
                return mf
        if mf.read_only:
            return None
        pos = mf.wrote_position
        max_blank = mf.file_size - pos
        mf.reserve(pos + 8)
        _BLANK.pack_into(mf.write_target, pos, max_blank, flags.BLANK_MAGIC_CODE)
        mf.advance_wrote_position(max_blank)
        if self.bus.active:
            self.bus.publish(Rolled("commitlog", mf.name, "", mf.file_from_offset + pos, max_blank))
        mf = self._writable_file()
        if mf is None or mf.read_only or total + 8 > mf.file_size - mf.wrote_position:
            return None
        return mf

    def put_messages(self, msgs: Sequence[Message] | MessageBatch) -> PutMessageResult:
        """Append a batch (one topic and queue) as consecutive records sharing one store time.

        RocketMQ 4.9.8 / 5.3.3 ``MessageExtBatch``: each record's properties are the inner
        message's client properties string followed by the batch's own (:meth:`encode_batch`);
        if the whole batch does not fit in the current file, none of it is written there; the
        batch body must be <= ``max_message_size``. ``msgs`` is a list of messages (the store
        plays the producer) or a producer-encoded :class:`MessageBatch` (its bytes as sent).
        """
        try:
            is_batch = msgs.__class__ is MessageBatch
            if self.fast_path:
                result = self._put_wire(msgs) if is_batch else self._put_list(msgs)  # type: ignore[arg-type]
                if result is not None:
                    return result
            rows = self._message_batch_rows(msgs) if is_batch else self._list_rows(msgs)  # type: ignore[arg-type]
            if isinstance(rows, PutMessageResult):
                return rows
            if self.fast_path:
                result = self._write_rows(rows)
                if result is not None:
                    return result
            return self._put(self._encoded(rows))
        except DiskFull as e:  # nothing was written: refused, as RocketMQ refuses a put on a full disk
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, reason=str(e))
        except BAD_FIELD_ERRORS:  # nothing was written
            if msgs.__class__ is MessageBatch:
                raise
            return refuse_bad_fields(msgs)  # type: ignore[arg-type]

    # ------------------------------------------------------------------ column batch paths
    # put_messages of a uniform list or of a MessageBatch, column by column: every per-message
    # step is a C loop (map/zip over attrgetters, crc32, struct.pack, slice assignments, one
    # join, one copy; one HintRun for the hints); the rows paths below stay the reference and take
    # anything else. Records, results, hints, UNIQ_KEY draws and refusals are theirs.

    def _put_list(self, msgs: Sequence[Message]) -> PutMessageResult | None:
        """:meth:`put_messages` of a list whose messages differ only in body, keys, flag and
        born time (no user properties, no UNIQ_KEY of their own): the template path
        (:meth:`_list_rows`) by columns. None, before drawing any UNIQ_KEY, for any other list
        (it takes :meth:`_list_rows`); after the draws, a refusal or a write that only
        :meth:`_put` can do goes through :meth:`_list_rows_encode` with the same draws."""
        n = len(msgs)
        if not n or msgs.__class__ is _BatchMessages or not self.writeable or self._store_ip is None:
            return None
        first = msgs[0]
        kind = first.keys.__class__
        same = (*_L_SAME(first), kind)
        topic, queue_id, tags, delay, wait, host, sys_flag, reconsume, user_props, uniq, _kind = same
        if user_props or uniq or topic == flags.SCHEDULE_TOPIC or queue_id < 0 or sys_flag & _TX_MASK:
            return None
        # a comprehension's slot reads beat attrgetter's (CPython 3.11 specialises them); the
        # tuples are compared as made (freed at once), the keys kept of those that match
        keyss = [m.keys for m in msgs if (m.topic, m.queue_id, m.tags, m.delay_time_level, m.wait_store_msg_ok,
                                          m.born_host, m.sys_flag, m.reconsume_times, m.properties, m.uniq_key,
                                          m.keys.__class__) == same]  # fmt: skip
        if len(keyss) != n or (topic not in self._valid_topics and not self._valid_topic(topic)):
            return None
        bodies = [m.body for m in msgs]
        blens = list(map(len, bodies))
        if max(blens) > self._max_message_size:
            return None
        # the key strings checked on one joined string: no key string holds 0x01 (n - 1 of them:
        # the joins), 0x02 or the separator; with keys, none is empty; without, all are
        if kind is str:
            kss = keyss
            mark = "\x01".join(kss)
            has_keys = bool(kss[0])
            if (mark.count("\x01") != n - 1 or "\x02" in mark or _SEP in mark
                    or (has_keys and ("\x01\x01" in mark or mark[-1:] == "\x01"))
                    or (not has_keys and len(mark) != n - 1)):  # fmt: skip
                return None
        elif kind is list or kind is tuple:
            try:
                kss = list(map(" ".join, keyss))
            except TypeError:
                return None
            # joined by " \x01 ": an empty token (a doubled, leading or trailing space in its key
            # string) or an empty key string leaves a doubled space or one at an end (one
            # two-character search instead of four)
            mark = " \x01 ".join(kss)
            has_keys = bool(kss[0])
            if has_keys:
                if "  " in mark or mark[:1] == " " or mark[-1:] == " ":
                    return None
            elif len(mark) != 3 * (n - 1):  # every key string empty (each "\x01" counted below)
                return None
            if mark.count("\x01") != n - 1 or "\x02" in mark or _SEP in mark:
                return None
        else:
            return None
        try:
            cell = self._list_cells.get((tags, delay, wait, not has_keys), False)
        except TypeError:
            return None
        if cell is False:
            cell = self._list_cell((tags, delay, wait, not has_keys))
        if cell is None:
            return None
        seg0, seg1, seg2, keys_first, tags_code, extra, k_in, k_val, u_in, u_val = cell
        try:
            born_head = self._column_heads.get((host, sys_flag), False)
        except TypeError:
            return None
        if born_head is False:
            born_head = self._column_head(host, sys_flag)
        if born_head is None:
            return None
        # from here on as _list_rows: the messages' UNIQ_KEYs, then (5.x) the batch's own
        now = self.clock.now_ms()
        p = self._uniq_prefix
        if p[0] != now:
            p = self._uniq_prefix = (now, self._uniq.time_prefix(now, self._tz))
        # f"{prefix}{counter & 0xFFFF:04X}" each: the n values drawn at once (one C call, as
        # new_uniq_key's next()), consecutive, so their hex is one slice of _HEX16 (unless they wrap)
        lo = (_LAST(islice(self._uniq_counter, n), 1)[0] - n + 1) & 0xFFFF
        if lo + n <= 0x10000:
            hexes = _HEX16[5 * lo : 5 * (lo + n) - 1]
        else:
            hexes = _U16_PACK[n].pack(*map(_U16, range(lo, lo + n))).hex(",", 2).upper()
        uniqs = f"{p[1]}{hexes.replace(',', ',' + p[1])}".split(",")
        if len(uniqs) != n:  # a "," in the prefix (never in the generator's hex)
            uniqs = [p[1] + h for h in hexes.split(",")]
        if self._v5_producer:
            own = self.new_uniq_key(now)
            seg2 = seg2.replace(_PH_UNIQ, own)
            extra += len(own.encode()) - len(_PH_UNIQ)
            if u_val == _PH_UNIQ:
                u_val = own
        # seg0 a seg1 b seg2 SEP per message in one string, the pieces interleaved by slice
        # assignment (C loops; ~25 ns/message less than a join of seg1.join per message)
        parts = ["", seg1, "", seg2 + _SEP + seg0] * n
        parts[0::4], parts[2::4] = (kss, uniqs) if keys_first else (uniqs, kss)
        parts[-1] = seg2
        props = (seg0 + "".join(parts)).encode().split(_SEP_B)
        plens = list(map(len, props))
        head = born_head[5]
        _version, magic, topic_tail = topic_field(topic, self._version)
        totals = list(map((head.size + len(topic_tail) + 2).__add__, map(add, blens, plens)))
        config = self.config
        result = None
        if (len(props) == n and max(plens) <= _MAX_PROPERTIES_LENGTH and max(totals) <= self._max_record_size
                and 22 * n + sum(blens) + sum(plens) - extra * n <= config.max_message_size):  # fmt: skip
            borns: int | list[int] = [m.born_timestamp for m in msgs]
            born = borns[0]  # type: ignore[index]
            if borns.count(born) == n:  # type: ignore[union-attr]
                borns = now if born is None else born
            elif None in borns:  # type: ignore[operator]
                borns = [now if b is None else b for b in borns]  # type: ignore[union-attr]
            tails = map(self._tail_prefix(topic_tail).__getitem__, plens)
            result = self._write_columns(
                topic, queue_id, magic, head, born_head, reconsume, totals, list(map(_CRC_MASK, map(_crc32, bodies))),
                [m.flag for m in msgs], borns, blens, bodies, tails, props,
                [tags_code] * n, [k_val] * n if k_in else kss if has_keys else [None] * n,
                [u_val] * n if u_in else uniqs,
            )  # fmt: skip
        if result is None:  # refused, or a write only _put can do: the template rows, same draws
            rows = self._list_rows_encode(topic, queue_id, list(zip(msgs, kss, uniqs, repeat(
                (seg0, seg1, seg2, keys_first, tags_code, extra)))), now, k_in, k_val, u_in, u_val)  # fmt: skip
            if isinstance(rows, PutMessageResult):
                return rows
            result = self._write_rows(rows) or self._put(self._encoded(rows))
        return result

    def _column_head(self, host: Any, sys_flag: int) -> tuple | None:
        """:meth:`_born_head` for the column paths, cached per ``(host, sys_flag)``; None (not
        cached) for a host the row paths must answer (unhashable, unparsable)."""
        try:
            got = self._born_head(host, sys_flag, flags.STOREHOSTADDRESS_V6_FLAG if len(self._store_ip) == 16 else 0,
                                  len(self._store_ip))  # type: ignore[arg-type]  # fmt: skip
            if len(self._column_heads) >= _MAX_HOST_CACHE:
                self._column_heads.clear()
            self._column_heads[(host, sys_flag)] = got
        except (TypeError, ValueError):
            return None
        return got

    def _validate_topic(self, topic: str) -> None:
        """``TopicValidator``'s charset and a length limit: 127 chars, or for a retry topic in
        a 5.x store 255 (stored as a V2 record). Raises InvalidTopic."""
        limit = self._retry_topic_max if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) else TOPIC_MAX_LENGTH
        validate_topic(topic, max_length=limit)
        if self._version == 1 and len(topic) > TOPIC_MAX_LENGTH:  # (only a 5.x retry topic gets here)
            raise InvalidTopic(topic, f"the topic is {len(topic)} chars and auto_message_version_on_topic_len is "
                                      "off: RocketMQ 5.x would write its length into the one byte of a V1 record, "
                                      "which no reader can read back")

    def _valid_topic(self, topic: str) -> bool:
        """Validate ``topic`` once (as :meth:`check_message`); False if it is refused."""
        try:
            self._validate_topic(topic)
        except (InvalidTopic, TypeError):
            return False
        self._valid_topics.add(topic)
        return True

    def _list_cell(self, skey: tuple) -> tuple | None:
        """What :meth:`_put_list` needs of a client shape ``(tags, delay level, WAIT, no keys)``:
        its segments (:meth:`_client_shape`) with the batch string (:meth:`_list_batch_names`)
        appended to the last, the records' tags code, the batch string's bytes, and the batch
        string's KEYS / UNIQ_KEY (which win the parse). None (cached) when the list path could
        not use the shape's template, or a segment holds the column separator."""
        if len(self._list_cells) >= _MAX_SHAPES:
            self._list_cells.clear()
        cell = None
        shape = self._client_shapes.get(skey, False)
        if shape is False:
            shape = self._client_shape(skey)
        names = self._list_batch_names(skey[2]) if shape is not None else None
        if shape is not None and names is not None:
            seg0, seg1, seg2, keys_first, tags_code = shape
            text, t_in, t_val, k_in, k_val, u_in, u_val = names
            extra = ("" if seg2.endswith("\x02") else "\x02") + text
            if t_in:
                tags_code = java_hash(t_val) if t_val else 0
            seg2 += extra
            if _SEP not in seg0 + seg1 + seg2.replace(_PH_UNIQ, ""):
                cell = (seg0, seg1, seg2, keys_first, tags_code, len(extra.encode()), k_in, k_val, u_in, u_val)
        self._list_cells[skey] = cell
        return cell

    def _tail_prefix(self, topic_tail: bytes) -> _LengthSuffixed:
        got = self._tail_prefixes.get(topic_tail)
        if got is None:
            if len(self._tail_prefixes) >= _MAX_SHAPES:
                self._tail_prefixes.clear()
            got = self._tail_prefixes[topic_tail] = _LengthSuffixed(topic_tail, 2)
        return got

    def _put_wire(self, batch: MessageBatch) -> PutMessageResult | None:
        """:meth:`put_messages` of a :class:`MessageBatch` by columns (:meth:`_wire_rows`' records
        and hints); None (nothing done) for a refusal or anything unusual, which then takes
        :meth:`_message_batch_rows` (it draws nothing: the UNIQ_KEYs are the producer's)."""
        flag_col = batch.flags
        n = len(flag_col)
        topic, queue_id = batch.topic, batch.queue_id
        blens = batch.body_lengths
        if (not n or not self.writeable or self._store_ip is None or topic == flags.SCHEDULE_TOPIC
                or (topic not in self._valid_topics and not self._valid_topic(topic)) or queue_id < 0
                or batch.sys_flag & _TX_MASK or max(blens) > self._max_message_size):  # fmt: skip
            return None
        data = batch.body
        if data.__class__ is not bytes:
            return None
        got = self._wire_batch_string(batch.properties)
        if got is None:
            return None
        batch_props, t_in, t_val, k_in, k_val, u_in, u_val = got
        inners = list(map(data.__getitem__, batch.properties_slices))
        lasts = b"".join(map(_LAST_BYTE, inners))  # each inner string's last byte
        seps = lasts.count(2) if len(lasts) == n else -1
        # each record's properties: its inner string + the suffix (joined as two pieces, no copy)
        if seps == 0 or seps == n:
            props, suffix = inners, batch_props if seps else b"\x02" + batch_props
            plens = list(map(len(suffix).__add__, map(len, inners)))
        else:
            props, suffix = [record_properties(inner, batch_props) for inner in inners], b""
            plens = list(map(len, props))
        try:
            born_head = self._column_heads.get((batch.born_host, batch.sys_flag), False)
        except TypeError:
            return None
        if born_head is False:
            born_head = self._column_head(batch.born_host, batch.sys_flag)
        if born_head is None:
            return None
        head = born_head[5]
        _version, magic, topic_tail = topic_field(topic, self._version)
        totals = list(map((head.size + len(topic_tail) + 2).__add__, map(add, blens, plens)))
        config = self.config
        if (max(plens) > _MAX_PROPERTIES_LENGTH or max(totals) > self._max_record_size
                or 22 * n + sum(blens) + sum(map(len, inners)) > config.max_message_size):  # fmt: skip
            return None
        tags_col, keys_col, uniq_col = zip(*batch.parsed, strict=False)
        if t_in:
            codes: Sequence[int] = [java_hash(t_val) if t_val else 0] * n
        else:
            known = self._tag_codes  # shared by producer threads: read with get, grown up to a bound
            local = {}
            for t in set(tags_col):
                code = known.get(t)
                if code is None:
                    code = java_hash(t) if t else 0
                    if len(known) < _MAX_SHAPES:
                        known[t] = code
                local[t] = code
            codes = list(map(local.__getitem__, tags_col))
        bodies = list(map(memoryview(data).__getitem__, batch.body_slices))  # views: no copy before the join
        now = self.clock.now_ms()
        born = now if batch.born_timestamp is None else batch.born_timestamp
        return self._write_columns(
            topic, queue_id, magic, head, born_head, batch.reconsume_times, totals,
            list(map(_CRC_MASK, map(_crc32, bodies))), flag_col, born, blens, bodies,
            map(self._tail_prefix(topic_tail).__getitem__, plens), props,
            codes, [k_val] * n if k_in else keys_col, [u_val] * n if u_in else uniq_col, suffix,
        )  # fmt: skip

    def _wire_batch_string(self, own: Mapping[str, str]) -> tuple | None:
        """``(broker_batch_properties(own), *_batch_names of it)``, cached per map; a 5.x batch's
        own UNIQ_KEY (a new one per batch) is cached as ``_PH_UNIQ`` and swapped in when it is
        one clean value there. None when ``own`` cannot be a cache key."""
        uniq = own.get(_UNIQ)
        swap = uniq.__class__ is str and bool(uniq) and _clean(uniq) and _SEP not in uniq
        try:
            key = tuple([(k, _PH_UNIQ if swap and k == _UNIQ else v) for k, v in own.items()])
            got = self._wire_strings.get(key, False)
        except TypeError:
            return None
        if got is False:
            if len(self._wire_strings) >= _MAX_SHAPES:
                self._wire_strings.clear()
            config = self.config
            try:
                text = broker_batch_properties(dict(key), config.broker_cluster_name, config.rocketmq_version)
            except (TypeError, ValueError, AttributeError):
                text = None
            got = None
            if text is not None:
                names = _batch_names(text)
                if not swap:
                    got = (text, *names)
                elif text.decode().count(_PH_UNIQ) == 1 and names[5] == _PH_UNIQ and \
                        _PH_UNIQ not in (names[1] or "") + (names[3] or ""):  # fmt: skip
                    got = (text.decode(), *names)
            self._wire_strings[key] = got
        if got is None or not swap:
            return got
        text, t_in, t_val, k_in, k_val, u_in, _u_val = got
        return text.replace(_PH_UNIQ, uniq).encode(), t_in, t_val, k_in, k_val, u_in, uniq

    def _write_columns(
        self, topic: str, queue_id: int, magic: int, head: struct.Struct, born_head: tuple, reconsume: int,
        totals: list[int], crcs: list[int], flag_col: Iterable[int], borns: int | list[int], blens: list[int],
        bodies: Sequence[Any], tails: Iterable[bytes], props: list[bytes], tags: Sequence[int],
        keys: Sequence[str | None], uniqs: Sequence[str | None], suffix: bytes = b"",
    ) -> PutMessageResult | None:  # fmt: skip
        """:meth:`_write_rows` by columns: under the put lock one file check, the heads packed by
        ``map`` (queue offsets a range, physical offsets a running sum; with one born time
        ``borns``, SYSFLAG..PREPAREDTRANSACTIONOFFSET packed once per batch and passed whole
        to each record's pack), the records joined and copied at once,
        the hints stored as one :class:`HintRun` (columns ``tags``, ``keys``, ``uniqs``, ``props``;
        each record's properties are ``props[i] + suffix``); one result, its msgIds from one hex of the
        offsets. None (nothing written) when only :meth:`_put` can go on."""
        n = len(totals)
        total_all = sum(totals)
        _h, _s, born_ip, born_port, sf, _head = born_head
        qkey = f"{topic}-{queue_id}"
        store_ip, store_port = self._store_ip, self.store_host[1]
        lock = self.put_lock
        if lock.locked():
            wait_until_free(lock)
        with lock:
            now = self.begin_time_in_lock = self.clock.now_ms()  # RocketMQ's beginTimeInLock
            try:
                mf = self._fast_file(total_all)
                if mf is None:
                    return None
                pos = mf.wrote_position
                table = self.topic_queue_table
                q0 = table.get(qkey, 0)  # no transactions: every record gets an offset
                wrote = mf.file_from_offset + pos
                offsets = list(accumulate(totals, initial=wrote))  # n + 1: the last is the end
                qs = range(q0, q0 + n)
                if borns.__class__ is not list:
                    key = (sf, borns, born_ip, born_port, now, reconsume)
                    last = self._last_middle
                    if last[0] == key:
                        whole, middle = last[1]
                    else:
                        middle = _head_middle(len(born_ip), len(store_ip)).pack(  # type: ignore[arg-type]
                            sf, borns, born_ip, born_port, now, store_ip, store_port, reconsume, 0)  # fmt: skip
                        whole = _head_whole(len(middle))
                        self._last_middle = (key, (whole, middle))
                    heads = map(whole.pack, totals, repeat(magic), crcs, repeat(queue_id), flag_col, qs, offsets,
                                repeat(middle), blens)  # fmt: skip
                else:
                    heads = map(head.pack, totals, repeat(magic), crcs, repeat(queue_id), flag_col, qs, offsets,
                                repeat(sf), borns, repeat(born_ip), repeat(born_port), repeat(now), repeat(store_ip),
                                repeat(store_port), repeat(reconsume), repeat(0), blens)  # fmt: skip
                # the pieces interleaved by slice assignment (C loops; ~35 ns/record less than
                # chain.from_iterable(zip(...))); with a suffix its slots are filled from the start
                k = 5 if suffix else 4
                parts = [suffix] * (k * n)
                parts[0::k] = heads
                parts[1::k] = bodies
                parts[2::k] = tails
                parts[3::k] = props
                mf.reserve(pos + total_all)
                mf.write_target[pos : pos + total_all] = b"".join(parts)
                runs = self.dispatch_runs
                if len(runs) >= _MAX_DISPATCH_RUNS:
                    runs.clear()
                ts_pos = 68 if sf & flags.BORNHOST_V6_FLAG else 56
                runs[wrote] = HintRun(offsets, totals, q0, now, ts_pos, topic, queue_id,
                                      sf, tags, keys, uniqs, props, suffix)  # fmt: skip
                table[qkey] = q0 + n
                mf.wrote_position = pos + total_all
                mf.store_timestamp = now
                if self.bus.active:
                    self.bus.publish(Appended("commitlog", mf.name, wrote, total_all, pos + total_all))
            finally:
                self.begin_time_in_lock = 0
        prefix = self._msg_id_prefix
        ids = _OFFSETS_PACK[n].pack(*offsets[:n]).hex(",", 8).upper().replace(",", "," + prefix)
        result = put_ok(wrote, total_all, prefix + ids, now, q0, n)
        if self.on_put is not None:
            self.on_put(result.append_result)  # type: ignore[arg-type]
        return result

    def batch_messages(self, batch: MessageBatch) -> list[Message]:
        """The messages a :class:`MessageBatch` carries (for checks that take messages, e.g. the
        memory store's): the batch header's fields, each message's flag and body, its properties
        map split back into ``Message`` fields (TAGS, KEYS, UNIQ_KEY, a canonical DELAY and WAIT;
        the rest as user properties, in wire order). The list remembers ``batch``, so
        :meth:`encode_batch` writes the wire bytes as they are, not a re-encoding of these."""
        out = _BatchMessages()
        out.batch = batch
        for flag, body, props in batch.entries():
            tags = props.pop(flags.PROPERTY_TAGS, None)
            keys = props.pop(_KEYS, ())
            uniq = props.pop(_UNIQ, None)
            wait = props.get(_WAIT)
            if wait in ("true", "false"):
                del props[_WAIT]
            delay = props.get(flags.PROPERTY_DELAY_TIME_LEVEL, "")
            level = int(delay) if delay.isdecimal() and delay.isascii() and str(int(delay)) == delay else 0
            if level > 0:
                del props[flags.PROPERTY_DELAY_TIME_LEVEL]
            out.append(Message(
                batch.topic, body, tags=tags, keys=keys, properties=props or None, queue_id=batch.queue_id,
                flag=flag, born_host=batch.born_host, born_timestamp=batch.born_timestamp, sys_flag=batch.sys_flag,
                reconsume_times=batch.reconsume_times, delay_time_level=level, wait_store_msg_ok=wait != "false",
                uniq_key=uniq,
            ))  # fmt: skip
        return out

    def encode_batch(
        self, msgs: Sequence[Message], check: Callable[[Message], PutMessageResult | None] | None = None,
        uniqs: Sequence[str] = (),
    ) -> list[EncodedRecord] | PutMessageResult:
        """Check and encode a batch by ``MessageExtBatch``'s rules (one topic and queue, no
        transactions, batch body <= ``max_message_size``); the refusal if any. ``check`` replaces
        :meth:`check_message` per message (the memory store adds its own rules); ``uniqs[i]``
        is the UNIQ_KEY for ``msgs[i]`` if it brings none.

        The store plays a producer of its ``rocketmq_version``: each message's client map
        (KEYS, TAGS, DELAY, WAIT, user properties, UNIQ_KEY) in ``HashMap(16)`` order as its
        inner properties; the batch's own map, WAIT of the first message and (5.x) a UNIQ_KEY
        drawn after the messages' (``DefaultMQProducer.batch()``). Header fields stay per
        message. A list from :meth:`batch_messages` is checked as messages, written as its batch.
        """
        rows = self._batch_rows(msgs, check, uniqs)
        return rows if isinstance(rows, PutMessageResult) else self._encoded(rows)

    def _list_rows(self, msgs: Sequence[Message]) -> _Rows | PutMessageResult:
        """:meth:`_batch_rows` of a plain list, from templates: each inner client string is
        constant segments around KEYS and UNIQ_KEY for its client shape (:meth:`_client_shape`),
        the batch string is appended to the last segment once per batch and shape, tags codes
        and hints come from the shape and the batch string's names. A message with user
        properties, separators in KEYS/UNIQ_KEY, another topic or queue, a transaction flag or a
        body over the limit sends the batch to :meth:`_batch_rows` (its refusal or its records),
        with the UNIQ_KEYs already drawn, so no counter value is skipped."""
        n = len(msgs)
        if not n or msgs.__class__ is _BatchMessages or not self.writeable or self._store_ip is None:
            return self._batch_rows(msgs)
        first = msgs[0]
        topic, queue_id = first.topic, first.queue_id
        if topic == flags.SCHEDULE_TOPIC or queue_id < 0:
            return self._batch_rows(msgs)
        if topic not in self._valid_topics:
            try:
                self._validate_topic(topic)
            except InvalidTopic:
                return self._batch_rows(msgs)
            self._valid_topics.add(topic)
        config = self.config
        version = config.rocketmq_version
        now = self.clock.now_ms()
        prefix = ""
        counter = self._uniq_counter
        max_body = self._max_message_size
        shapes = self._client_shapes
        cells: dict[tuple, list] = {}  # client shape -> [seg0, seg1, seg2 + batch string, keys first, tags code, extra]
        names: tuple = ()
        items: list[tuple] = []
        append = items.append
        for m in msgs:
            keys = m.keys
            ks = (keys if isinstance(keys, str) else " ".join([k for k in keys if k])) if keys else ""
            uniq = m.uniq_key
            if (m.properties or m.topic != topic or m.queue_id != queue_id or m.sys_flag & _TX_MASK
                    or len(m.body) > max_body or (ks and ("\x01" in ks or "\x02" in ks))
                    or (uniq and (uniq.__class__ is not str or "\x01" in uniq or "\x02" in uniq))):  # fmt: skip
                return self._batch_rows(msgs, None, [it[2] for it in items])
            try:
                skey = (m.tags, m.delay_time_level, m.wait_store_msg_ok, not ks)
                cell = cells.get(skey)
            except TypeError:  # unhashable tags...: the exact path answers
                return self._batch_rows(msgs, None, [it[2] for it in items])
            if cell is None:
                shape = shapes.get(skey, False)
                if shape is False:
                    shape = self._client_shape(skey)
                if shape is not None and not names:
                    names = self._list_batch_names(first.wait_store_msg_ok)
                if shape is None or names is None:
                    return self._batch_rows(msgs, None, [it[2] for it in items])
                seg0, seg1, seg2, keys_first, tags_code = shape
                extra = ("" if seg2.endswith("\x02") else "\x02") + names[0]
                if names[1]:
                    tags_code = java_hash(names[2]) if names[2] else 0
                cell = cells[skey] = [seg0, seg1, seg2 + extra, keys_first, tags_code, len(extra.encode())]
            if not uniq:
                if not prefix:
                    p = self._uniq_prefix
                    if p[0] != now:
                        p = self._uniq_prefix = (now, self._uniq.time_prefix(now, self._tz))
                    prefix = p[1]
                uniq = f"{prefix}{next(counter) & 0xFFFF:04X}"
            append((m, ks, uniq, cell))
        _text, _t_in, _t_val, k_in, k_val, u_in, u_val = names
        if version != "4.9.8":  # the 5.x producer's batch UNIQ_KEY, drawn after the messages'
            own = self.new_uniq_key(now)
            grow = len(own.encode()) - len(_PH_UNIQ)
            for cell in cells.values():
                cell[2] = cell[2].replace(_PH_UNIQ, own)
                cell[5] += grow
            if u_val == _PH_UNIQ:
                u_val = own
        return self._list_rows_encode(topic, queue_id, items, now, k_in, k_val, u_in, u_val)

    def _list_batch_names(self, wait: bool) -> tuple | None:
        """The list path's batch string (what :meth:`_batch_rows` builds, a 5.x batch UNIQ_KEY
        as ``_PH_UNIQ``) and :func:`_batch_names` of it; None if the placeholder is not exactly
        one clean value there (a cluster name with separators), so it cannot be swapped in."""
        config = self.config
        own = {_WAIT: "true" if wait else "false"}
        if config.rocketmq_version != "4.9.8":
            own[_UNIQ] = _PH_UNIQ
        text = broker_batch_properties(own, config.broker_cluster_name, config.rocketmq_version).decode()
        names = _batch_names(text.encode())
        if text.count(_PH_UNIQ) != (len(own) - 1) or _PH_UNIQ in (names[1] or "") + (names[3] or ""):
            return None
        if len(own) > 1 and names[5] != _PH_UNIQ:
            return None
        return (text, *names)

    def _client_shape(self, skey: tuple) -> tuple | None:
        """``(seg0, seg1, seg2, keys_first, tags_code)`` of a client shape ``(tags, delay level,
        WAIT, no keys)``, built by the producer's encoder with placeholders: the client string's
        HashMap order depends only on the names, so it is ``seg0 + first + seg1 + second +
        seg2`` (KEYS string and UNIQ_KEY, ``keys_first`` telling which comes first; no keys:
        ``seg0 + uniq + seg1 + "" + seg2``). None (cached) when its parse would not give the map
        back (separators in tags...): such messages take :meth:`_batch_rows`."""
        tags, delay, wait, no_keys = skey
        if len(self._client_shapes) >= _MAX_SHAPES:
            self._client_shapes.clear()
        shape = None
        try:
            probe = Message("T", b"", tags=tags, keys=() if no_keys else _PH_KEYS, delay_time_level=delay,
                            wait_store_msg_ok=wait)  # fmt: skip
            props = client_properties(probe, _PH_UNIQ)
            text = encode_client_properties(props, self.config.rocketmq_version).decode()
        except (TypeError, ValueError):
            props, text = {}, ""
        if text and decode_properties(text) == props and text.count(_PH_UNIQ) == 1 and \
                text.count(_PH_KEYS) == (0 if no_keys else 1):  # fmt: skip
            iu = text.index(_PH_UNIQ)
            if no_keys:
                segs, keys_first = (text[:iu], "", text[iu + len(_PH_UNIQ) :]), False
            else:
                ik = text.index(_PH_KEYS)
                (a, pa), (b, pb) = sorted([(ik, _PH_KEYS), (iu, _PH_UNIQ)])
                segs, keys_first = (text[:a], text[a + len(pa) : b], text[b + len(pb) :]), ik < iu
            t = props.get(flags.PROPERTY_TAGS)
            shape = (*segs, keys_first, java_hash(t) if t else 0)
        self._client_shapes[skey] = shape
        return shape

    def _born_head(self, host: Any, sys_flag: int, store_v6: int, store_ip_len: int) -> tuple:
        """``(host, sys_flag, born ip bytes, born port, stored sys flag, head struct)`` for a record
        born at ``host``: the batch loops keep the last one and redo it only when host or flag change."""
        born_ip, born_port = self._host(host)
        sf = (sys_flag & ~_V6_FLAGS) | store_v6 | (flags.BORNHOST_V6_FLAG if len(born_ip) == 16 else 0)
        return host, sys_flag, born_ip, born_port, sf, head_struct(len(born_ip), store_ip_len)

    def _list_rows_encode(self, topic: str, queue_id: int, items: list[tuple], now: int, k_in: bool,
                          k_val: str | None, u_in: bool, u_val: str | None) -> _Rows | PutMessageResult:  # fmt: skip
        """Second half of :meth:`_list_rows`: the records from the templates, refused as
        :meth:`_rows` refuses (same checks, same order; the UNIQ_KEYs are drawn by then in both)."""
        config = self.config
        store_ip: bytes = self._store_ip  # type: ignore[assignment]
        store_v6 = flags.STOREHOSTADDRESS_V6_FLAG if len(store_ip) == 16 else 0
        _version, magic, topic_tail = topic_field(topic, self._version)
        fixed = len(topic_tail) + 2
        max_record = config.max_record_size
        rows: list[tuple] = []
        append = rows.append
        wire = 0
        last: tuple = (None, None)
        for m, ks, uniq, (seg0, seg1, seg2, keys_first, tags_code, extra) in items:
            props = (f"{seg0}{ks}{seg1}{uniq}{seg2}" if keys_first else f"{seg0}{uniq}{seg1}{ks}{seg2}").encode()
            plen = len(props)
            if plen > _MAX_PROPERTIES_LENGTH:
                return _too_many_property_bytes(plen)
            host, sys_flag = m.born_host, m.sys_flag
            if last[0] != host or last[1] != sys_flag:
                last = self._born_head(host, sys_flag, store_v6, len(store_ip))
            _h, _s, born_ip, born_port, sf, head = last
            body = m.body
            blen = len(body)
            total = head.size + blen + fixed + plen
            if total > max_record:
                return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL,
                                        reason=f"record of {total} bytes exceeds {max_record}")  # fmt: skip
            size = 22 + blen + plen - extra  # its size in the batch body (MessageDecoder.encodeMessage)
            wire += size
            born = m.born_timestamp
            append((head, total, _crc32(body) & 0x7FFFFFFF, m.flag, sf, now if born is None else born, born_ip,
                    born_port, m.reconsume_times, body, topic_tail + plen.to_bytes(2, "big") + props,
                    (topic, queue_id, tags_code, k_val if k_in else ks or None, u_val if u_in else uniq, sf, 0, props),
                    size))  # fmt: skip
        if wire > config.max_message_size:
            return _batch_too_big(wire, config.max_message_size)
        return _Rows(topic, queue_id, magic, store_ip, rows)

    def _batch_rows(
        self, msgs: Sequence[Message], check: Callable[[Message], PutMessageResult | None] | None = None,
        uniqs: Sequence[str] = (),
    ) -> _Rows | PutMessageResult:  # fmt: skip
        if not msgs:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, reason="empty batch")
        bad = self._check_batch_messages(msgs, check or self.check_message)
        if bad is not None:
            return bad
        if isinstance(msgs, _BatchMessages):
            return self._wire_rows(msgs.batch)
        version = self.config.rocketmq_version
        now = self.clock.now_ms()
        items = []
        for i, m in enumerate(msgs):
            uniq = None
            if not m.uniq_key and not (m.properties and m.properties.get(_UNIQ)):
                uniq = uniqs[i] if i < len(uniqs) and uniqs[i] else self.new_uniq_key(now)
            props = client_properties(m, uniq)
            # Without user properties every name is a constant and every value non-empty; with
            # no separator in TAGS, KEYS, UNIQ_KEY either, parsing the string gives the map back.
            known = None
            if not m.properties:
                tags, keys, uniq = props.get(flags.PROPERTY_TAGS), props.get(_KEYS), props.get(_UNIQ)
                if _clean(tags) and _clean(keys) and _clean(uniq):
                    known = (tags, keys, uniq)
            born = m.born_timestamp
            items.append((m.flag, m.body, encode_client_properties(props, version), m.born_host,
                          now if born is None else born, m.sys_flag, m.reconsume_times, known))  # fmt: skip
        first = msgs[0]
        own = {_WAIT: "true" if first.wait_store_msg_ok else "false"}
        if version != "4.9.8":
            own[_UNIQ] = self.new_uniq_key(now)
        return self._rows(first.topic, first.queue_id, items, own)

    def _check_batch_messages(
        self, msgs: Sequence[Message], check: Callable[[Message], PutMessageResult | None]
    ) -> PutMessageResult | None:
        first = msgs[0]
        for m in msgs:
            bad = check(m)
            if bad is not None:
                return bad
            if m.topic != first.topic or m.queue_id != first.queue_id:
                return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, reason="a batch must share topic and queue")
            if m.sys_flag & _TX_MASK:
                return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, reason="transactions cannot be batched")
        return None

    def encode_message_batch(self, batch: MessageBatch) -> list[EncodedRecord] | PutMessageResult:
        """:meth:`encode_batch` for a producer-encoded :class:`MessageBatch`: the same checks and
        refusals, in the same order (the header's, then each body's size), then every inner
        message's properties bytes exactly as received, and ``batch.properties`` as the batch's."""
        rows = self._message_batch_rows(batch)
        return rows if isinstance(rows, PutMessageResult) else self._encoded(rows)

    def _message_batch_rows(self, batch: MessageBatch) -> _Rows | PutMessageResult:
        n = len(batch.flags)
        if not n:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, reason="empty batch")
        data = batch.body
        lengths = batch.body_lengths
        bad = self.check_message(Message(batch.topic, data[batch.body_slices[0]], queue_id=batch.queue_id))
        if bad is not None:
            return bad
        if batch.sys_flag & _TX_MASK:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, reason="transactions cannot be batched")
        limit = self.config.max_message_size
        for i in range(1, n):
            if lengths[i] > limit:
                reason = f"body of {lengths[i]} bytes exceeds max_message_size {limit}"
                return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, reason=reason)
        return self._wire_rows(batch)

    def _wire_rows(self, batch: MessageBatch) -> _Rows | PutMessageResult:
        """:meth:`_rows` for a :class:`MessageBatch`, unrolled: one header for every record (so one
        head layout and sys flag), the hints from ``batch.parsed`` (the inner strings' parse,
        done by the producer or at receipt) and the batch string's names, tags codes per value."""
        data = batch.body
        topic, queue_id = batch.topic, batch.queue_id
        config = self.config
        born = self.clock.now_ms() if batch.born_timestamp is None else batch.born_timestamp
        reconsume = batch.reconsume_times
        batch_props = broker_batch_properties(batch.properties, config.broker_cluster_name, config.rocketmq_version)
        t_in, t_val, k_in, k_val, u_in, u_val = _batch_names(batch_props)
        with_sep = b"\x02" + batch_props
        store_ip = self._store_ip or ip_to_bytes(self.store_host[0])
        born_ip, born_port = self._host(batch.born_host)
        sf = ((batch.sys_flag & ~_V6_FLAGS) | (flags.STOREHOSTADDRESS_V6_FLAG if len(store_ip) == 16 else 0)
              | (flags.BORNHOST_V6_FLAG if len(born_ip) == 16 else 0))  # fmt: skip
        head = head_struct(len(born_ip), len(store_ip))
        _version, magic, topic_tail = topic_field(topic, self._version)
        fixed = head.size + len(topic_tail) + 2
        hinted = topic != flags.SCHEDULE_TOPIC  # its tags code depends on the reput's delay table
        max_record = config.max_record_size
        codes: dict[str | None, int] = {None: 0}
        rows: list[tuple] = []
        append = rows.append
        wire = 0
        for flag, bs, ps, names in zip(batch.flags, batch.body_slices, batch.properties_slices, batch.parsed,
                                       strict=True):  # fmt: skip
            body = data[bs]
            inner = data[ps]
            props = inner + with_sep if inner and inner[-1] != 2 else inner + batch_props
            plen = len(props)
            if plen > _MAX_PROPERTIES_LENGTH:
                return _too_many_property_bytes(plen)
            blen = len(body)
            total = fixed + blen + plen
            if total > max_record:
                return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL,
                                        reason=f"record of {total} bytes exceeds {max_record}")  # fmt: skip
            size = 22 + blen + len(inner)  # its size in the batch body (MessageDecoder.encodeMessage)
            wire += size
            dispatch = None
            if hinted:
                tags, keys, uniq = names
                if t_in:
                    tags = t_val
                if k_in:
                    keys = k_val
                if u_in:
                    uniq = u_val
                code = codes.get(tags)
                if code is None:
                    code = codes[tags] = java_hash(tags) if tags else 0
                dispatch = (topic, queue_id, code, keys, uniq, sf, 0, props)
            append((head, total, _crc32(body) & 0x7FFFFFFF, flag, sf, born, born_ip, born_port, reconsume, body,
                    topic_tail + plen.to_bytes(2, "big") + props, dispatch, size))  # fmt: skip
        if wire > config.max_message_size:
            return _batch_too_big(wire, config.max_message_size)
        return _Rows(topic, queue_id, magic, store_ip, rows)

    def _rows(
        self, topic: str, queue_id: int, items: Sequence[tuple], own: Mapping[str, str]
    ) -> _Rows | PutMessageResult:
        """``MessageExtBatchEncoder.encode``: one record per ``(flag, body, inner properties
        bytes, born host, born time, sys flag, reconsume times, (TAGS, KEYS, UNIQ_KEY) of the
        inner string if the caller knows its parse, else None)``, its properties
        ``record_properties(inner, batch string)`` with the batch string built once from the
        batch's map ``own`` as the broker builds it (``broker_batch_properties``). The dispatch
        hint is what parsing the record gives (later names win: a 5.x batch UNIQ_KEY is every
        record's). Records over 32767 property bytes or ``max_record_size``, and a batch body
        over ``max_message_size``, are refused. Returns what :meth:`_write_rows` packs (or
        :meth:`_encoded` encodes): everything but the offsets and the store time."""
        config = self.config
        batch_props = broker_batch_properties(own, config.broker_cluster_name, config.rocketmq_version)
        # parse(inner + [0x02] + batch) is parse(inner) updated by parse(batch): the pairs line up
        # at the 0x02 between them, and a later name wins. So a name the batch string has is its
        # value there; any other is the inner string's (its last well-formed pair).
        in_batch = decode_properties(batch_props)
        names = [(name in in_batch, in_batch.get(name), name.encode() + b"\x01")
                 for name in (flags.PROPERTY_TAGS, _KEYS, _UNIQ)]  # fmt: skip
        tags_b, keys_b, uniq_b = names
        store_ip = self._store_ip or ip_to_bytes(self.store_host[0])
        store_v6 = flags.STOREHOSTADDRESS_V6_FLAG if len(store_ip) == 16 else 0
        _version, magic, topic_tail = topic_field(topic, self._version)
        fixed = len(topic_tail) + 2
        hinted = topic != flags.SCHEDULE_TOPIC  # its tags code depends on the reput's delay table
        max_record = config.max_record_size
        rows: list[tuple] = []
        wire = 0
        last: tuple = (None, None)  # (host, sys flag) of the previous record and what they give
        for flag, body, inner, host, born, sys_flag, reconsume, known in items:
            props = record_properties(inner, batch_props)
            plen = len(props)
            if plen > _MAX_PROPERTIES_LENGTH:
                return PutMessageResult(
                    PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
                    reason=f"properties of {plen} bytes exceed {_MAX_PROPERTIES_LENGTH}",
                )
            if last[0] != host or last[1] != sys_flag:
                last = self._born_head(host, sys_flag, store_v6, len(store_ip))
            _h, _s, born_ip, born_port, sf, head = last
            total = head.size + len(body) + fixed + plen
            if total > max_record:
                return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL,
                                        reason=f"record of {total} bytes exceeds {max_record}")  # fmt: skip
            size = 22 + len(body) + len(inner)  # its size in the batch body (MessageDecoder.encodeMessage)
            wire += size
            dispatch = None
            if hinted:
                if known is None:
                    known = [None if b[0] else raw_property_value(inner, b[2]) for b in names]
                tags = tags_b[1] if tags_b[0] else known[0]
                keys = keys_b[1] if keys_b[0] else known[1]
                uniq = uniq_b[1] if uniq_b[0] else known[2]
                dispatch = (topic, queue_id, java_hash(tags) if tags else 0, keys, uniq, sf, 0, props)
            rows.append((head, total, _crc32(body) & 0x7FFFFFFF, flag, sf, born, born_ip, born_port, reconsume, body,
                         topic_tail + plen.to_bytes(2, "big") + props, dispatch, size))  # fmt: skip
        if wire > config.max_message_size:
            return PutMessageResult(
                PutMessageStatus.MESSAGE_ILLEGAL,
                reason=f"batch body of {wire} bytes exceeds max_message_size {config.max_message_size}",
            )
        return _Rows(topic, queue_id, magic, store_ip, rows)

    def _encoded(self, rows: _Rows) -> list[EncodedRecord]:
        """The rows as :class:`EncodedRecord` objects (zero offsets and store time), for
        :meth:`_put` and the memory store."""
        out = []
        qkey = f"{rows.topic}-{rows.queue_id}"
        store_port = self.store_host[1]
        for head, total, crc, flag, sf, born, born_ip, born_port, reconsume, body, tail, dispatch, size in rows.rows:
            data = bytearray(head.pack(total, rows.magic, crc, rows.queue_id, flag, 0, 0, sf, born, born_ip, born_port,
                                       0, rows.store_ip, store_port, reconsume, 0, len(body)))  # fmt: skip
            data += body
            data += tail
            out.append(EncodedRecord(data, qkey, store_timestamp_position(sf), True, size, dispatch))
        return out

    def _write_rows(self, rows: _Rows) -> PutMessageResult | None:
        """Under the put lock: one file check (rolling as :meth:`_put` rolls), every head packed
        with its final queue offset, physical offset and store time, the records joined and
        copied into the file at once, their hints, one result. None (nothing written) when only
        :meth:`_put` can go on (not writeable, no file, a record fitting no file)."""
        recs = rows.rows
        total_all = sum([r[1] for r in recs])
        queue_id, magic, store_ip, store_port = rows.queue_id, rows.magic, rows.store_ip, self.store_host[1]
        pieces: list[bytes] = []
        piece = pieces.append
        offsets: list[int] = []
        lock = self.put_lock
        if lock.locked():
            wait_until_free(lock)
        with lock:
            now = self.begin_time_in_lock = self.clock.now_ms()  # RocketMQ's beginTimeInLock
            try:
                mf = self._fast_file(total_all)
                if mf is None:
                    return None
                pos = mf.wrote_position
                qkey = f"{rows.topic}-{queue_id}"
                table = self.topic_queue_table
                q = first_q = table.get(qkey, 0)  # no transactions: every record gets an offset
                phys = wrote = mf.file_from_offset + pos
                hints = self.dispatch_hints
                if len(hints) >= _MAX_DISPATCH_HINTS:
                    hints.clear()
                mine: dict[int, DispatchHint] = {}
                for head, total, crc, flag, sf, born, born_ip, born_port, reconsume, body, tail, dispatch, _s in recs:
                    piece(head.pack(total, magic, crc, queue_id, flag, q, phys, sf, born, born_ip, born_port, now,
                                    store_ip, store_port, reconsume, 0, len(body)))  # fmt: skip
                    piece(body)
                    piece(tail)
                    if dispatch is not None:
                        mine[phys] = (total, q, now, 68 if sf & flags.BORNHOST_V6_FLAG else 56, dispatch)
                    offsets.append(phys)
                    phys += total
                    q += 1
                mf.reserve(pos + total_all)
                mf.write_target[pos : pos + total_all] = b"".join(pieces)
                # the commit (see _append): no call before the last line
                table[qkey] = q
                mf.wrote_position = pos + total_all
                hints.update(mine)
                mf.store_timestamp = now
                if self.bus.active:
                    self.bus.publish(Appended("commitlog", mf.name, wrote, total_all, pos + total_all))
            finally:
                self.begin_time_in_lock = 0
        prefix = self._msg_id_prefix
        result = put_ok(wrote, total_all, ",".join([f"{prefix}{o:016X}" for o in offsets]), now, first_q, len(recs))
        if self.on_put is not None:
            self.on_put(result.append_result)  # type: ignore[arg-type]
        return result

    def _put(self, encoded: list[EncodedRecord], *,
             prepare: Callable[[], tuple[list[EncodedRecord], dict[str, int]] | PutMessageResult] | None = None,
             ) -> PutMessageResult:
        """Append ``encoded`` under the put lock. ``prepare`` (under the lock, first) makes the
        records instead, from the queue offset table, with the offsets other queues move to
        once they are in (multi-dispatch).

        Nothing changes before the commit in :meth:`_append`: the queue offsets are packed
        into the records, not yet into the table, so a put cut short anywhere (a
        KeyboardInterrupt while a file is created, a refusal, an error) leaves no offset
        skipped and no hint describing bytes that were never published.
        """
        lock = self.put_lock
        if lock.locked():
            wait_until_free(lock)
        with lock:
            now = self.begin_time_in_lock = self.clock.now_ms()  # RocketMQ's beginTimeInLock
            try:
                if not self.writeable:
                    return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, reason=self.not_writeable_reason)
                moves: dict[str, int] = {}
                if prepare is not None:
                    got = prepare()
                    if isinstance(got, PutMessageResult):
                        return got
                    encoded, moves = got
                if self._prop_crc:
                    refused = self._reserve_prop_crc(encoded)
                    if refused is not None:
                        return refused
                total = sum(len(e.data) for e in encoded) if len(encoded) > 1 else len(encoded[0].data)
                table = self.topic_queue_table
                nexts: dict[str, int] = {}  # the table's new values, taken at the commit
                first_queue_offset = -1
                for enc in encoded:
                    q = 0
                    if enc.gets_queue_offset:
                        key = enc.queue_key
                        q = nexts[key] if key in nexts else table.get(key, 0)
                        nexts[key] = q + 1
                    if first_queue_offset < 0:
                        first_queue_offset = q
                    enc.queue_offset = q
                    _LONG.pack_into(enc.data, QUEUE_OFFSET_POSITION, q)
                    _LONG.pack_into(enc.data, enc.ts_pos, now)
                nexts.update(moves)
                mf = self._writable_file()
                if mf is None:
                    return PutMessageResult(PutMessageStatus.CREATE_MAPEDFILE_FAILED, reason=_NO_FILE)
                wrote_offset = self._append(mf, encoded, total, now, nexts)
                if wrote_offset < 0:  # END_OF_FILE: blank written, roll and append again (sealed again)
                    mf = self._writable_file()
                    if mf is None:
                        return PutMessageResult(PutMessageStatus.CREATE_MAPEDFILE_FAILED, reason=_NO_FILE)
                    wrote_offset = self._append(mf, encoded, total, now, nexts)
                    if wrote_offset < 0:
                        return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, reason=_TOO_BIG)
                mf.store_timestamp = now
            finally:
                self.begin_time_in_lock = 0
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

    def _reserve_prop_crc(self, encoded: list[EncodedRecord]) -> PutMessageResult | None:
        """5.x ``enabledAppendPropCRC``: each record gets its 20-byte reserve (after a ``0x02`` if
        its properties are non-empty and do not end with one), or the refusal of the first whose
        properties (then > 32767 bytes: PROPERTIES_SIZE_EXCEEDED) or size (> ``max_record_size``:
        MESSAGE_ILLEGAL) grow past the limit -- the encoder's checks on the grown lengths. Their
        dispatch hints are dropped: the property is written under the lock, so reput parses."""
        out = []
        limit = self._max_record_size
        for enc in encoded:
            data = enc.data
            props_len = _SHORT.unpack_from(data, properties_length_position(data))[0]
            plen = reserved_properties_length(props_len, data[-1])
            if plen > _MAX_PROPERTIES_LENGTH:
                return _too_many_property_bytes(plen)
            total = len(data) - props_len + plen
            if total > limit:
                return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL,
                                        reason=f"record of {total} bytes exceeds {limit}")  # fmt: skip
            out.append(reserve_prop_crc(data))
        for enc, data in zip(encoded, out, strict=True):
            enc.data = data
            enc.dispatch = None
        return None

    def _writable_file(self) -> MappedFile | None:
        mfq = self.mapped_file_queue
        mf = mfq.get_last_mapped_file()
        if mf is None or mf.is_full():
            mf = mfq.get_last_mapped_file_for(0)
        return mf

    def _append(self, mf: MappedFile, encoded: list[EncodedRecord], total: int, now: int,
                nexts: dict[str, int]) -> int:
        """Copy the records into ``mf``; returns the absolute offset, or -1 after a blank.

        Writes straight into ``mf.write_target`` (the mapping or the TransientStorePool buffer)
        at its wrote position, then commits: the wrote position moves (the put lock makes this
        the single writer, and readers see nothing until it moves), the queue offset table
        takes ``nexts`` and the dispatch hints take the records'.

        The commit holds even against an exception raised into this thread from outside (a
        notebook's KeyboardInterrupt, ``PyThreadState_SetAsyncExc``): CPython raises those
        only on entering a function, on a backward jump and after a call returns, and the
        commit is one attribute store and two ``dict.update`` calls. Such an exception lands
        before the position moves (nothing committed) or after the table took the offsets
        (the hints may be missing: dispatch parses those records instead). The put used to
        move the table first and undo it in an except clause, which a second exception could
        cut short: a queue offset skipped, in about 1 of 100 runs of the threaded case of
        test_interrupted_puts.
        """
        pos = pos_before = mf.wrote_position
        max_blank = mf.file_size - pos
        wrote = -1
        if max_blank <= 0:  # already full (RocketMQ's UNKNOWN_ERROR branch): roll
            pass
        elif total + 8 > max_blank:
            mf.reserve(pos + 8)
            _BLANK.pack_into(mf.write_target, pos, max_blank, flags.BLANK_MAGIC_CODE)
            mf.advance_wrote_position(max_blank)
        else:
            mf.reserve(pos + total)
            mf.check_advance(total)
            target = mf.write_target
            phys = wrote = mf.file_from_offset + pos
            hints = self.dispatch_hints
            if len(hints) >= _MAX_DISPATCH_HINTS:
                hints.clear()
            mine: dict[int, DispatchHint] = {}
            seal = self._prop_crc
            for enc in encoded:
                data = enc.data
                n = len(data)
                _LONG.pack_into(data, PHYSICAL_OFFSET_POSITION, phys)
                if seal:  # every field is final now: the __CRC32# property (5.x enabledAppendPropCRC)
                    seal_prop_crc(data, 0, n)
                if enc.dispatch is not None:
                    mine[phys] = (n, enc.queue_offset, now, enc.ts_pos, enc.dispatch)
                target[pos : pos + n] = data
                pos += n
                phys += n
            # the commit: nothing between these three lines can raise
            mf.wrote_position = pos
            self.topic_queue_table.update(nexts)
            hints.update(mine)
        if self.bus.active:
            if wrote < 0:
                self.bus.publish(
                    Rolled("commitlog", mf.name, "", mf.file_from_offset + pos_before, mf.file_size - pos_before)
                )
            else:
                self.bus.publish(Appended("commitlog", mf.name, wrote, total, mf.wrote_position))
        return wrote
