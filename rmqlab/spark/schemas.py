"""Spark and Arrow schemas of every row kind rmqlab's Spark sources and jobs produce, in one place.

Each row kind is described once as a list of ``(name, Spark type, nullable, meaning)``; the
``StructType`` and the Arrow schema are both built from that list, and the Arrow schema is exactly
what Spark expects back from a Python data source (``to_arrow_schema(struct, timezone="UTC")``:
``pa.Schema.equals`` is checked by Spark on the first batch).

Units: offsets and sizes in **bytes** (CommitLog offsets are absolute, i.e. file name + position);
``*_timestamp`` columns are epoch **milliseconds** (``long``); ``*_time`` columns are the same
instants as Spark timestamps (UTC). ``queue_offset`` counts **units** (messages), not bytes.
``file`` is the file's path relative to its store root (``commitlog/00000000000000000000``,
``consumequeue/TopicA/0/00000000000000000000``, ``batchconsumequeue/TopicB/0/00000000000000000000``,
``index/20261122102056184``).
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

__all__ = [
    "BATCH_CONSUME_QUEUE_COLUMNS",
    "COMMIT_LOG_COLUMNS",
    "CONSUME_QUEUE_COLUMNS",
    "FINDING_COLUMNS",
    "INDEX_COLUMNS",
    "INNER_NUM",
    "KEY_HASHES",
    "MULTI_DISPATCH",
    "arrow_schema",
    "batch_consume_queue_schema",
    "commit_log_schema",
    "consume_queue_schema",
    "describe",
    "finding_schema",
    "index_schema",
    "parse_columns",
]

_S, _L, _I, _B, _T = StringType(), LongType(), IntegerType(), BooleanType(), TimestampType()
Column = tuple[str, DataType, bool, str]

COMMIT_LOG_COLUMNS: list[Column] = [
    ("store_path", _S, False, "absolute path of the store root the row comes from"),
    ("file", _S, False, "CommitLog file, relative to the store root"),
    ("offset", _L, False, "absolute CommitLog offset where the record (or the damage) starts"),
    ("size", _I, True, "TOTALSIZE in bytes (for a blank record: the declared bytes left in the file)"),
    ("record_type", _S, False, "'message', 'blank' (end-of-file record, option include_blank) or 'error'"),
    ("topic", _S, True, "topic"),
    ("queue_id", _I, True, "queue id"),
    ("queue_offset", _L, True, "QUEUEOFFSET: position in the topic/queue's ConsumeQueue (units)"),
    ("physical_offset", _L, True, "PHYSICALOFFSET as stored (equals offset unless the record is stale)"),
    ("sys_flag", _I, True, "SYSFLAG bits (0xC: transaction type, 0x10/0x20: IPv6 hosts)"),
    ("flag", _I, True, "user flag"),
    ("tags", _S, True, "TAGS property"),
    ("tags_code", _L, True, "Java hash of TAGS (0 without tags); no delay-level override"),
    ("keys", ArrayType(StringType(), False), True, "KEYS split on single spaces, empty tokens dropped"),
    ("uniq_key", _S, True, "UNIQ_KEY property (client message id)"),
    ("msg_id", _S, True, "offset message id: store host + PHYSICALOFFSET, 32 (IPv4) / 56 hex chars"),
    ("born_timestamp", _L, True, "producer time, epoch ms"),
    ("store_timestamp", _L, True, "broker time, epoch ms"),
    ("born_time", _T, True, "born_timestamp as a timestamp"),
    ("store_time", _T, True, "store_timestamp as a timestamp"),
    ("born_host", _S, True, "'ip:port' of the producer"),
    ("store_host", _S, True, "'ip:port' of the broker"),
    ("body_crc", _I, True, "BODYCRC as stored"),
    ("crc_ok", _B, True, "BODYCRC equals crc32(body) & 0x7FFFFFFF"),
    ("prop_crc_ok", _B, True, "the 5.x __CRC32# property in the record's last 20 bytes holds the CRC of the bytes "
                              "before it; null when the record has none (written without enabledAppendPropCRC)"),
    ("body_length", _I, True, "BODYLENGTH in bytes"),
    ("reconsume_times", _I, True, "RECONSUMETIMES"),
    ("prepared_transaction_offset", _L, True, "half-message offset for tx COMMIT/ROLLBACK records, else 0"),
    ("properties", MapType(StringType(), StringType(), True), True, "every property, decoded"),
    ("error", _S, True, "why the walk stopped here (bad_magic, truncated, length_mismatch ...); null when ok"),
    ("error_detail", _S, True, "the same for a person"),
]
_BODY: Column = ("body", BinaryType(), True, "the body as stored (only with option include_body=true)")
#: Only when asked for by name (option ``columns``): what the audit joins index items against.
KEY_HASHES: Column = ("key_hashes", ArrayType(IntegerType(), False), True,
                      "index key hashes the record is indexed under (abs Java hash of 'topic#key' per KEYS "
                      "token and of 'topic#UNIQ_KEY'), distinct, ascending")
#: Only when asked for by name: what the audit accepts a multi-dispatch (LMQ) unit by.
MULTI_DISPATCH: Column = ("multi_dispatch", ArrayType(StructType([StructField("queue", StringType(), False),
                                                                  StructField("queue_offset", LongType(), False)]),
                                                      False), True,
                          "multi-dispatch (LMQ) queues and queue offsets of the record, from INNER_MULTI_DISPATCH "
                          "and INNER_MULTI_QUEUE_OFFSET; null when it has none")
#: Only when asked for by name: what the audit checks a BatchConsumeQueue unit's batch size against.
INNER_NUM: Column = ("inner_num", _L, True,
                     "INNER_NUM property of a 5.x inner-batch record (sys_flag & 0x80: one record holding that "
                     "many messages) as a number; null for other records, or when absent or not a number")

CONSUME_QUEUE_COLUMNS: list[Column] = [
    ("store_path", _S, False, "absolute path of the store root"),
    ("topic", _S, False, "topic (from the directory name)"),
    ("queue_id", _I, False, "queue id (from the directory name)"),
    ("file", _S, False, "ConsumeQueue file, relative to the store root"),
    ("queue_offset", _L, False, "logical offset of the unit (units, = byte offset / 20)"),
    ("position", _L, False, "byte position of the unit inside its file"),
    ("commit_log_offset", _L, False, "where the record should start in the CommitLog"),
    ("size", _I, False, "the record's TOTALSIZE (0x7FFFFFFF for a pre-blank unit)"),
    ("tags_code", _L, True, "tags hash or delay due time; for a ConsumeQueueExt unit its ext unit's (null when "
                            "the address resolves to no unit: RocketMQ passes a null tags code, which every "
                            "filter matches)"),
    ("ext_address", _L, True, "the ConsumeQueueExt address (<= -2147483649) the unit's tags code field holds (store "
                              "written with enableConsumeQueueExt); null for a plain tags code"),
    ("valid", _B, False, "false only for pre-blank units (emitted with include_pre_blank=true)"),
]

BATCH_CONSUME_QUEUE_COLUMNS: list[Column] = [
    ("store_path", _S, False, "absolute path of the store root"),
    ("topic", _S, False, "topic (from the directory name)"),
    ("queue_id", _I, False, "queue id (from the directory name)"),
    ("file", _S, False, "BatchConsumeQueue file, relative to the store root"),
    ("position", _L, False, "byte position of the unit inside its file (46-byte units)"),
    ("unit_index", _L, False, "the unit's number among its queue's valid units, 0 = the first file's first (the "
                              "order rmqlab.inspect lists them in)"),
    ("commit_log_offset", _L, False, "where the record should start in the CommitLog"),
    ("size", _I, False, "the record's TOTALSIZE"),
    ("tags_code", _L, False, "tags hash or delay due time"),
    ("store_timestamp", _L, False, "the record's store time, epoch ms"),
    ("queue_offset", _L, False, "msgBaseOffset: queue offset of the record's first message (messages, not units)"),
    ("batch_size", _I, False, "messages the unit stands for (RocketMQ writes INNER_NUM for an inner batch, "
                              "else 1): its queue offsets are queue_offset .. queue_offset + batch_size - 1"),
]

INDEX_COLUMNS: list[Column] = [
    ("store_path", _S, False, "absolute path of the store root"),
    ("file", _S, False, "index file, relative to the store root"),
    ("begin_timestamp", _L, False, "header: store time of the first indexed message, epoch ms"),
    ("end_timestamp", _L, False, "header: store time of the last indexed message, epoch ms"),
    ("begin_phy_offset", _L, False, "header: CommitLog offset of the first indexed message"),
    ("end_phy_offset", _L, False, "header: CommitLog offset of the last indexed message"),
    ("hash_slot_count", _I, False, "header: slots that went from empty to used"),
    ("index_count", _I, False, "header: next free item number (starts at 1)"),
    ("hash_slot_num", _I, False, "slots in the file (inferred from its size or given)"),
    ("index_num", _I, False, "items the file can hold"),
    ("item_no", _I, False, "item number (1-based)"),
    ("key_hash", _I, False, "abs(Java hash of 'topic#key')"),
    ("phy_offset", _L, False, "CommitLog offset of the indexed message"),
    ("time_diff", _I, False, "seconds after begin_timestamp"),
    ("prev_index", _I, False, "older item in the same slot, 0 = end of chain"),
    ("slot", _I, False, "key_hash % hash_slot_num"),
    ("item_timestamp", _L, False, "begin_timestamp + time_diff*1000: the time the query compares, epoch ms"),
]

FINDING_COLUMNS: list[Column] = [
    ("severity", _S, False, "'error' (data lost or wrong) or 'warning'"),
    ("kind", _S, False, "what was found; the same words as rmqlab.inspect.verify()"),
    ("store", _S, False, "absolute path of the store root"),
    ("file", _S, True, "file relative to the store root"),
    ("offset", _L, True, "byte offset (CommitLog: absolute; other files: position in the file)"),
    ("message", _S, False, "one line for a person"),
]


def _struct(cols: list[Column]) -> StructType:
    return StructType([StructField(n, t, nullable) for n, t, nullable, _ in cols])


def _pick(cols: list[Column], columns: list[str] | None, extra: tuple[Column, ...] = ()) -> StructType:
    """``cols`` or, with ``columns``, just those (in that order) from ``cols`` and ``extra``: a
    reader computes and ships only the columns of its schema."""
    if columns is None:
        return _struct(cols)
    known = {c[0]: c for c in (*cols, *extra)}
    unknown = [n for n in columns if n not in known]
    if unknown or len(set(columns)) != len(columns) or not columns:
        raise ValueError(f"columns {columns!r}: unknown or repeated names {unknown}; known: {sorted(known)}")
    return _struct([known[n] for n in columns])


def parse_columns(value: str | None) -> list[str] | None:
    """Option ``columns`` ("a,b,c") as a list; None when not given."""
    if value is None or not str(value).strip():
        return None
    return [n.strip() for n in str(value).split(",") if n.strip()]


def commit_log_schema(include_body: bool = False, columns: list[str] | None = None) -> StructType:
    """Rows of ``rmq_commitlog``; ``body`` is appended only when ``include_body``. ``columns``
    picks a subset (``body``, ``key_hashes``, ``multi_dispatch`` and ``inner_num`` may be named
    there too)."""
    if columns is not None:
        return _pick(COMMIT_LOG_COLUMNS, columns, (_BODY, KEY_HASHES, MULTI_DISPATCH, INNER_NUM))
    return _struct([*COMMIT_LOG_COLUMNS, _BODY] if include_body else COMMIT_LOG_COLUMNS)


def consume_queue_schema(columns: list[str] | None = None) -> StructType:
    """Rows of ``rmq_consumequeue``: one per unit (``columns``: a subset)."""
    return _pick(CONSUME_QUEUE_COLUMNS, columns)


def batch_consume_queue_schema(columns: list[str] | None = None) -> StructType:
    """Rows of ``rmq_batchconsumequeue``: one per valid unit (``columns``: a subset)."""
    return _pick(BATCH_CONSUME_QUEUE_COLUMNS, columns)


def index_schema(columns: list[str] | None = None) -> StructType:
    """Rows of ``rmq_index``: one per written item, with its file's header (``columns``: a subset)."""
    return _pick(INDEX_COLUMNS, columns)


def finding_schema() -> StructType:
    """Rows of the audit's findings."""
    return _struct(FINDING_COLUMNS)


_ARROW_TYPES: dict[type, pa.DataType] = {
    StringType: pa.string(), LongType: pa.int64(), IntegerType: pa.int32(), BooleanType: pa.bool_(),
    BinaryType: pa.binary(), TimestampType: pa.timestamp("us", tz="UTC"),
}


def _arrow_type(t: DataType) -> pa.DataType:
    if isinstance(t, ArrayType):
        return pa.list_(pa.field("element", _arrow_type(t.elementType), nullable=t.containsNull))
    if isinstance(t, MapType):
        return pa.map_(_arrow_type(t.keyType), pa.field("value", _arrow_type(t.valueType), t.valueContainsNull))
    if isinstance(t, StructType):
        return pa.struct([pa.field(f.name, _arrow_type(f.dataType), f.nullable) for f in t.fields])
    return _ARROW_TYPES[type(t)]


def arrow_schema(struct: StructType) -> pa.Schema:
    """The Arrow schema Spark expects for ``struct`` (equal to pyspark's ``to_arrow_schema``)."""
    return pa.schema([pa.field(f.name, _arrow_type(f.dataType), f.nullable) for f in struct.fields])


def describe(cols: list[Column]) -> list[dict[str, str]]:
    """``[{name, type, meaning}]`` for docs and notebooks."""
    return [{"name": n, "type": t.simpleString(), "meaning": m} for n, t, _, m in cols]
