"""The audit and stats jobs: ``rmqlab.inspect.verify()``'s cross-checks as Spark joins, per-topic stats.

``audit(spark, stores) -> (findings_df, summary_df)`` finds the same things as
:func:`rmqlab.inspect.checks.verify` on each store (same severity, kind, file, offset; the same
message text), but the per-record work runs in Spark: records, units and items are read by the
``rmq_*`` sources (only the columns the checks use) and checked in one shuffle, so many stores
(or one huge store) spread over a cluster. What is per *file* or per *queue* rather than per
record — file names, sizes and gaps, the ``abort`` marker, index layout and hash chains,
checkpoint values, a queue whose offsets decrease — is read on the driver through ``rmqlab.inspect`` (the same
functions ``verify`` calls); the per-file walk ends are aggregated in Spark and collected.

5.x BatchConsumeQueues are read by ``rmq_batchconsumequeue`` and checked as
``rmqlab.inspect.batch_checks`` checks them: their units are pointers too (``kind = 'bq'``; an
inner batch's INNER_NUM comes with the records, decoded for those records only), their gaps are
found on the driver, and their records are looked up by queue offset apart from plain queues'.

Plan, for speed: CQ units, batch units and index items become one frame of *pointers* located in their
CommitLog file by arithmetic (``offset - offset % file_size``, a broadcast equi-join, not a range
join), hash-joined with the message records on ``(store, offset)`` (:func:`suspects`); the few
rows that can yield findings are persisted and every check reads them. The pointers outside the
log or past a file's walk end are one aggregation (:func:`_edges`). No Python UDFs (the reader
emits each record's index key hashes), no window or sort over the big frames.

Each step is a DataFrame -> DataFrame function, so tests run them on tiny frames. Per-record
findings of one kind are capped at 1000 per file (like ``verify``), with one "... and N more" row.

The checks are SQL text (named CTEs over ``{frame}`` placeholders, :func:`_sql`), and
:func:`audit_inputs` runs them as three statements, each analysed once: built with ~150
DataFrame calls (10k py4j round trips, each call analysing its growing plan) they cost the
driver ~3-5 s per audit with the executors idle, the fixed cost that made one store's audit
slower per GiB than several stores'.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from rmqlab.codec.flags import (
    INNER_BATCH_FLAG,
    SCHEDULE_TOPIC,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)
from rmqlab.codec.index_layout import HASH_SLOT_SIZE, INDEX_HEADER_SIZE, INDEX_SIZE
from rmqlab.codec.names import LMQ_PREFIX, LONG_MAX, offset_overflow
from rmqlab.spark import schemas
from rmqlab.spark.sources import written_index_items

__all__ = [
    "AuditInputs",
    "audit",
    "audit_inputs",
    "cq_to_log",
    "damage_findings",
    "ext_lost",
    "file_walks",
    "index_to_log",
    "load_inputs",
    "log_to_cq",
    "outside_log",
    "pointers",
    "shuffle_partitions_for",
    "stats",
    "suspects",
    "walk_findings",
    "write_audit",
    "write_stats",
]

MAX_PER_KIND = 1000  # as rmqlab.inspect.checks._MAX_PER_KIND
CHECKPOINT_SLACK_MS = 3000
_PRE_BLANK = 0x7FFFFFFF
_FINDING_NAMES = [c[0] for c in schemas.FINDING_COLUMNS]

_FILES_SCHEMA = StructType([
    StructField("store", StringType(), False), StructField("file", StringType(), False),
    StructField("base", LongType(), False), StructField("hi", LongType(), False),
    StructField("mapped_length", LongType(), False), StructField("last", IntegerType(), False),
])
_QUEUES_SCHEMA = StructType([
    StructField("store", StringType(), False), StructField("topic", StringType(), False),
    StructField("queue_id", IntegerType(), False), StructField("q_base", LongType(), False),
    StructField("q_end", LongType(), False), StructField("first_path", StringType(), False),
    StructField("has_ext", IntegerType(), False),
])
_STORES_SCHEMA = StructType([
    StructField("store", StringType(), False), StructField("log_start", LongType(), False),
    StructField("log_end", LongType(), False), StructField("has_files", IntegerType(), False),
    StructField("cp_present", IntegerType(), False), StructField("physic", LongType(), True),
    StructField("logics", LongType(), True), StructField("index", LongType(), True),
    StructField("cq_read", IntegerType(), False),  # 0: its consume queues are in RocksDB only (not read)
    StructField("file_size", LongType(), False), StructField("aligned", IntegerType(), False),
])
#: the BatchConsumeQueues verify checks (not those of a queue with plain files too), and where
#: each one's last batch ends (its queue offsets end)
_BQUEUES_SCHEMA = StructType([
    StructField("store", StringType(), False), StructField("topic", StringType(), False),
    StructField("queue_id", IntegerType(), False), StructField("b_end", LongType(), False),
])
#: per queue with consume-queue files, its figures as ``rmqlab inspect`` reports them
#: (:func:`rmqlab.inspect.frames.queue_figures`: a batch queue by message, one unit per record)
_FIGURES_SCHEMA = StructType([
    StructField("store", StringType(), False), StructField("topic", StringType(), False),
    StructField("queue_id", IntegerType(), False), StructField("cq_min_offset", LongType(), False),
    StructField("cq_max_offset", LongType(), False), StructField("cq_units", LongType(), False),
    StructField("cq_bytes", LongType(), False), StructField("cq_max_phy_offset", LongType(), False),
])
#: batch units that start at a queue offset an earlier unit of their queue starts at: verify looks
#: a record up by its queue offset and finds the earlier one only
_BDUP_SCHEMA = StructType([
    StructField("store", StringType(), False), StructField("topic", StringType(), False),
    StructField("queue_id", IntegerType(), False), StructField("unit_index", LongType(), False),
])

#: rmq_commitlog columns the audit reads (the reader builds only these); CRC and stats add theirs
RECORD_COLUMNS = ["store_path", "file", "offset", "size", "record_type", "topic", "queue_id", "queue_offset",
                  "physical_offset", "sys_flag", "tags_code", "store_timestamp", "key_hashes", "multi_dispatch",
                  "error", "error_detail"]
CRC_COLUMNS = ["crc_ok", "prop_crc_ok", "body_crc", "body_length"]
STATS_COLUMNS = ["tags", "keys"]
ITEM_COLUMNS = ["store_path", "file", "hash_slot_num", "item_no", "key_hash", "phy_offset", "slot"]
UNIT_COLUMNS = ["store_path", "topic", "queue_id", "file", "queue_offset", "position", "commit_log_offset", "size",
                "tags_code", "ext_address"]
#: rmq_batchconsumequeue columns the audit reads; records then add their INNER_NUM (``inner_num``)
BATCH_UNIT_COLUMNS = ["store_path", "topic", "queue_id", "file", "position", "unit_index", "commit_log_offset", "size",
                      "tags_code", "queue_offset", "batch_size"]
_BUNITS_SCHEMA = StructType([StructField("store" if f.name == "store_path" else f.name, f.dataType, f.nullable)
                             for f in schemas.batch_consume_queue_schema(BATCH_UNIT_COLUMNS).fields])
#: ConsumeQueue units (and index items) per read task: at most the reader's default, and few
#: enough that a small input still spreads over every core (one store's queues, or its index
#: file, used to be a single task)
MAX_UNITS_PER_PARTITION = 2_000_000
MIN_UNITS_PER_PARTITION = 50_000
#: CommitLog bytes per shuffle partition when the audit sizes ``spark.sql.shuffle.partitions``
BYTES_PER_SHUFFLE_PARTITION = 256 * 1024 * 1024


@dataclass
class AuditInputs:
    """What the checks join. ``records``: rmq_commitlog rows (messages, blanks, errors) with the
    columns :data:`RECORD_COLUMNS` (and ``inner_num`` when a store has batch queues), persisted;
    ``units``: rmq_consumequeue rows (:data:`UNIT_COLUMNS`) incl. pre-blank units, spread over
    every core; ``items``: rmq_index rows (:data:`ITEM_COLUMNS`); ``bunits``: rmq_batchconsumequeue
    rows (:data:`BATCH_UNIT_COLUMNS`) of the batch queues verify checks (``bqueues``: per queue
    ``b_end``, where its last batch ends; ``bdup``: units whose queue offset an earlier unit of
    their queue starts at); ``cq_figures``: per queue its consume queue's figures for
    :func:`stats` (``_FIGURES_SCHEMA``); ``files``: one row per non-empty CommitLog file (store, file,
    base, hi, mapped_length, last); ``queues``: per queue its first queue offset and end
    (``q_base``, ``q_end``) as ``verify`` sees them, and whether it has a ConsumeQueueExt dir
    (``has_ext``); ``stores``: per store the log's start/end, file size, whether every file name
    is a multiple of it (``aligned``) and the checkpoint values; ``driver``: findings computed on
    the driver (layout, abort, queues whose offsets decrease); ``log_bytes``: the CommitLog bytes
    of all stores; ``store_rows``: the ``stores`` rows as tuples."""

    records: DataFrame
    units: DataFrame
    items: DataFrame
    files: DataFrame
    queues: DataFrame
    stores: DataFrame
    driver: DataFrame
    misaligned: list[str] = field(default_factory=list)
    log_bytes: int = 0
    derived: list[DataFrame] = field(default_factory=list)
    store_rows: list[tuple[Any, ...]] = field(default_factory=list)
    bunits: DataFrame | None = None
    bqueues: DataFrame | None = None
    bdup: DataFrame | None = None
    cq_figures: DataFrame | None = None

    def batch_frames(self) -> tuple[DataFrame, DataFrame, DataFrame]:
        """``(bunits, bqueues, bdup)``, empty tables where not loaded."""
        spark = self.records.sparkSession
        return (self.bunits if self.bunits is not None else _local(spark, [], _BUNITS_SCHEMA),
                self.bqueues if self.bqueues is not None else _local(spark, [], _BQUEUES_SCHEMA),
                self.bdup if self.bdup is not None else _local(spark, [], _BDUP_SCHEMA))

    def unpersist(self) -> None:
        """Drop the cached records, units, items and batch units, and what the audit cached from them."""
        batch = [self.bunits] if self.bunits is not None else []
        for df in (self.records, self.units, self.items, *batch, *self.derived):
            df.unpersist()
        self.derived.clear()


# ------------------------------------------------------------------------------------ inputs
@dataclass
class _StoreMeta:
    """What the driver reads of one store (see :func:`_store_meta`)."""

    files: list[tuple[Any, ...]]
    queues: list[tuple[Any, ...]]
    store: tuple[Any, ...]
    driver: list[tuple[Any, ...]]
    n_units: int
    bqueues: list[tuple[Any, ...]]
    bdup: list[tuple[Any, ...]]
    n_bunits: int
    figures: list[tuple[Any, ...]] = field(default_factory=list)


def _long(v: int) -> int:
    """``v`` for a LongType column: at most ``LONG_MAX``. A file named near Long.MAX_VALUE ends
    past it (its name + the file size; its records are not read); verify cuts the file and log
    ends it compares offsets with the same way, so a unit at ``LONG_MAX`` is past the log on both."""
    return min(v, LONG_MAX)


def _store_meta(path: str) -> _StoreMeta:
    """Per-file and per-queue facts of one store, and the findings the driver computes with
    ``verify``'s own functions: layout, store notes, queues whose offsets decrease, index chains,
    and the batch queues' gaps (:func:`~rmqlab.inspect.batch_checks.bcq_gaps`: consecutive units
    of a queue, numpy over the units the driver reads anyway for ``b_end`` and ``bdup``)."""
    from rmqlab.inspect import batch_checks as bc
    from rmqlab.inspect.checks import Finding, _check_layout, _Index, _index_chains, store_notes
    from rmqlab.inspect.frames import queue_figures
    from rmqlab.inspect.snapshot import open_snapshot

    with open_snapshot(path) as snap:
        size = snap.commit_log_file_size
        log = snap.commit_log_files
        # verify's "last file with data": only the first record header of each file matters (a
        # file ending past a long is not read, whatever it holds)
        last_data = max((i for i, mf in enumerate(log) if _first_header_ok(mf.buffer)
                         and not offset_overflow(mf.file_from_offset, size)), default=-1)
        files = [(snap.path, os.path.relpath(mf.file_name, snap.path), mf.file_from_offset,
                  _long(mf.file_from_offset + size), mf.mapped_length, int(n >= last_data)) for n, mf in enumerate(log)]
        queues = []
        n_units = 0
        found: list[Finding] = [*_check_layout(snap), *store_notes(snap)]
        for (topic, qid), q in snap.consume_queues.items():
            base, units = q.units()
            first = os.path.relpath(q.files[0].file_name, snap.path) if q.files else ""
            queues.append((snap.path, topic, qid, base, base + len(units), first,
                           int((topic, qid) in snap.consume_queue_exts)))
            n_units += len(units)
            # per queue, from the units the driver holds anyway (verify's _Queue.sorted)
            off = units["commit_log_offset"].astype(np.int64)[units["size"] != _PRE_BLANK]
            if off.size and not bool(np.all(np.diff(off) >= 0)):
                found.append(Finding("warning", "cq_not_monotonic", first, 0,
                                     f"consume queue {topic}/{qid}: commit log offsets are not increasing"))
        if not snap.index_error:  # chains are per index file: their slots and links, numpy on the driver
            found += _index_chains([_Index(snap, f) for f in snap.index_files_opened()])
        bqueues, bdup = [], []
        keys = list(bc.batch_queue_ids(snap, 0))  # (not the batch queues that have plain files too)
        batches = {i: bc.BatchQueue(snap, k) for i, k in enumerate(keys)}
        found += bc.bcq_gaps(batches)
        for (topic, qid), q in zip(keys, batches.values(), strict=True):
            bqueues.append((snap.path, topic, qid, int(q.base[-1] + q.batch[-1]) if len(q.base) else 0))
            order = np.argsort(q.base, kind="stable")  # (as log_to_bcq looks units up)
            later = order[1:][q.base[order][1:] == q.base[order][:-1]]
            bdup += [(snap.path, topic, qid, int(i)) for i in np.sort(later).tolist()]
        end = _long(log[-1].file_from_offset + size) if log else 0
        if snap.dledger_commit_log:  # units point into the DLedger log: none is past the end
            end = LONG_MAX
        cp = snap.checkpoint_values()
        aligned = int(size > 0 and all(mf.file_from_offset % size == 0 for mf in log))
        store = (snap.path, snap.min_offset, end, int(bool(log)), int(cp is not None),
                 cp.physic_msg_timestamp if cp else None, cp.logics_msg_timestamp if cp else None,
                 cp.index_msg_timestamp if cp else None,
                 int(not (snap.rocksdb_consume_queue and not snap.consume_queues)), size, aligned)
        # (a short last file named near Long.MAX_VALUE: verify's offset, its name + its length, can
        # be past a long: the finding keeps LONG_MAX there)
        driver = [(f.severity, f.kind, snap.path, f.file, _long(f.offset), f.message) for f in found]
        n_bunits = sum(len(q.base) for q in batches.values())
        figures = [(snap.path, topic, qid, *v) for (topic, qid), v in queue_figures(snap).items()]
    return _StoreMeta(files, queues, store, driver, n_units, bqueues, bdup, n_bunits, figures)


def _first_header_ok(buf: Any) -> bool:
    """``scan_end(buf) > 0`` without the hop: a blank, or a plausible record at byte 0."""
    import struct

    from rmqlab.codec.flags import BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2

    n = len(buf)
    if n < 8:
        return False
    total, magic = struct.unpack_from(">ii", buf, 0)
    if magic == BLANK_MAGIC_CODE:
        return True
    return magic in (MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2) and 8 <= total <= n


def shuffle_partitions_for(spark: SparkSession, log_bytes: int) -> int:
    """Shuffle partitions for ``log_bytes`` of CommitLog: one per
    :data:`BYTES_PER_SHUFFLE_PARTITION`, at least the default parallelism, at most 2000."""
    per = -(-log_bytes // BYTES_PER_SHUFFLE_PARTITION)
    return max(int(spark.sparkContext.defaultParallelism), min(per, 2000))


def load_inputs(spark: SparkSession, stores: list[str], *, options: dict[str, str] | None = None,
                check_crc: bool = False, with_stats: bool = False,
                shuffle_partitions: int | None = None) -> AuditInputs:
    """Read every store once: records, units and items (persisted), and the driver-side facts.

    Only the columns the checks use are read (``check_crc`` adds the CRC columns, ``with_stats``
    the tags and keys :func:`stats` needs). ``shuffle_partitions``: set on the session; None =
    from the CommitLog size (:func:`shuffle_partitions_for`), 0 = leave the session's value.

    Sizing the session also turns adaptive execution off: under AQE every shuffle and broadcast
    stage is a Spark job of its own (53 per audit, 0.1-0.6 s each, the floor of a small audit);
    without it the audit is 16 jobs. Partitions already follow the log size and every join with
    a small table is a broadcast by hint or by a local relation's exact size, so AQE has little
    to adapt here."""
    from pyspark import StorageLevel

    stores = [os.path.abspath(s) for s in stores]
    files, queues, rows, driver, bqueues, bdup, figures = [], [], [], [], [], [], []
    n_units = n_bunits = 0
    for s in stores:
        m = _store_meta(s)
        files += m.files
        queues += m.queues
        rows.append(m.store)
        driver += m.driver
        n_units += m.n_units
        bqueues += m.bqueues
        bdup += m.bdup
        figures += m.figures
        n_bunits += m.n_bunits
    cores = max(1, int(spark.sparkContext.defaultParallelism))

    def per_task_for(n: int) -> int:
        return min(MAX_UNITS_PER_PARTITION, max(MIN_UNITS_PER_PARTITION, -(-n // cores)))

    per_task = per_task_for(n_units)
    # a store's index is one big file: split it too (one store's items used to be a single task)
    per_items = min(MAX_UNITS_PER_PARTITION, max(MIN_UNITS_PER_PARTITION, -(-written_index_items(stores) // cores)))
    log_bytes = sum(f[4] for f in files)
    if shuffle_partitions != 0:
        n = shuffle_partitions or shuffle_partitions_for(spark, log_bytes)
        spark.conf.set("spark.sql.shuffle.partitions", str(n))
        spark.conf.set("spark.sql.adaptive.enabled", "false")
    paths = ",".join(stores)
    cols = (RECORD_COLUMNS + (CRC_COLUMNS if check_crc else []) + (STATS_COLUMNS if with_stats else [])
            + (["inner_num"] if bqueues else []))
    level = StorageLevel.MEMORY_AND_DISK
    records = (spark.read.format("rmq_commitlog").options(**dict(options or {})).option("include_blank", "true")
               .option("columns", ",".join(cols)).load(paths).withColumnRenamed("store_path", "store").persist(level))
    units = (spark.read.format("rmq_consumequeue").option("include_pre_blank", "true")
             .option("columns", ",".join(UNIT_COLUMNS)).option("units_per_partition", str(per_task)).load(paths)
             .withColumnRenamed("store_path", "store").persist(level))
    items = (spark.read.format("rmq_index").option("columns", ",".join(ITEM_COLUMNS))
             .option("items_per_partition", str(per_items)).load(paths)
             .withColumnRenamed("store_path", "store").persist(level))
    bq = _local(spark, bqueues, _BQUEUES_SCHEMA)
    if bqueues:  # (no read at all, not even an empty task, for stores without batch queues)
        bunits = (spark.read.format("rmq_batchconsumequeue").option("columns", ",".join(BATCH_UNIT_COLUMNS))
                  .option("units_per_partition", str(per_task_for(n_bunits))).load(paths)
                  .withColumnRenamed("store_path", "store")
                  .join(F.broadcast(bq.select("store", "topic", "queue_id")), ["store", "topic", "queue_id"],
                        "left_semi").persist(level))
    else:
        bunits = _local(spark, [], _BUNITS_SCHEMA)
    return AuditInputs(
        records, units, items,
        _local(spark, files, _FILES_SCHEMA), _local(spark, queues, _QUEUES_SCHEMA),
        _local(spark, rows, _STORES_SCHEMA), _local(spark, driver, schemas.finding_schema()),
        misaligned=[r[0] for r in rows if not r[-1]], log_bytes=log_bytes, store_rows=rows,
        bunits=bunits, bqueues=bq, bdup=_local(spark, bdup, _BDUP_SCHEMA),
        cq_figures=_local(spark, figures, _FIGURES_SCHEMA),
    )


# ------------------------------------------------------------------------------------ helpers
#: driver tables of at most this many rows become local relations (:func:`_local`)
LOCAL_TABLE_ROWS = 500


def _local(spark: SparkSession, rows: list[Any], schema: StructType) -> DataFrame:
    """A small driver table as a local relation (an inline ``VALUES`` table with bound parameters).

    ``createDataFrame`` pickles the rows into a Python RDD the optimizer knows nothing about; a
    local relation has exact statistics (an empty one prunes its union branch, a small one is
    broadcast without estimates) and needs no Python round trip. (Its broadcast still runs a
    small job.) Larger tables (many files or queues) keep ``createDataFrame``: thousands of
    bound parameters cost more to parse than they save. One SQL statement (casts included):
    one analysis."""
    rows = [tuple(r) for r in rows]
    width = len(schema.fields)
    if bad := next((r for r in rows if len(r) != width), None):
        raise ValueError(f"driver table row has {len(bad)} values, schema has {width}: {bad!r}")
    if len(rows) > LOCAL_TABLE_ROWS:
        return spark.createDataFrame(rows, schema)
    names = [f"c{i}" for i in range(len(schema.fields))]
    cells = rows or [(None,) * len(names)]
    args = {f"p{r}_{c}": v for r, row in enumerate(cells) for c, v in enumerate(row)}
    values = ", ".join("(" + ", ".join(f":p{r}_{c}" for c in range(len(names))) + ")" for r in range(len(cells)))
    cols = ", ".join(f"CAST({n} AS {f.dataType.simpleString()}) AS `{f.name}`"
                     for n, f in zip(names, schema.fields, strict=True))
    where = "" if rows else " WHERE false"
    return spark.sql(f"SELECT {cols} FROM VALUES {values} AS t({', '.join(names)}){where}", args=args)


# The checks are SQL text, analysed once per statement: built with the DataFrame API they were
# ~150 calls (10k py4j round trips), each analysing its growing plan: ~3-5 s of driver time per
# audit with the executors idle. Each check is a list of named CTEs over ``{frame}`` placeholders
# (spark.sql's DataFrame arguments); the step functions run one check, :func:`audit_inputs`
# joins them all into one statement.
_Ctes = list[tuple[str, str]]


def _q(s: str) -> str:
    """``s`` as a SQL string literal."""
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _with(ctes: _Ctes, final: str, inline: bool = False) -> str:
    """``WITH ctes final``; ``inline``: each ``FROM name`` / ``JOIN name`` of a CTE replaced by its
    body (a frame to persist: a plan with CTEs in it is not found in the cache when another
    statement reads it, so every reader would compute it again)."""
    if not inline:
        return final if not ctes else "WITH " + ",\n".join(f"{n} AS ({b})" for n, b in ctes) + "\n" + final
    bodies: dict[str, str] = {}

    def sub(text: str) -> str:
        for n, b in bodies.items():
            text = re.sub(rf"\b(FROM|JOIN) {n}\b", lambda m, n=n, b=b: f"{m.group(1)} ({b}) {n}", text)
        return text

    for n, b in ctes:
        bodies[n] = sub(b)
    return sub(final)


def _sql(spark: SparkSession, ctes: _Ctes, final: str, *, inline: bool = False, **frames: DataFrame) -> DataFrame:
    """One statement (``WITH ctes final``, see :func:`_with`) with ``frames`` bound to their
    ``{name}`` placeholders.

    Each frame is a temporary view while the statement is analysed, dropped from the session's
    catalog afterwards (the analysed plan keeps it). Not ``spark.sql(query, **frames)``: that
    drops its views with ``catalog.dropTempView``, which also uncaches the frame's plan, i.e. a
    persisted input such as the records."""
    names = {k: f"_rmqlab_{k}_{uuid.uuid4().hex}" for k in frames}
    for k, df in frames.items():
        df.createOrReplaceTempView(names[k])
    try:
        return spark.sql(_with(ctes, final, inline).format(**names))
    finally:
        catalog = spark._jsparkSession.sessionState().catalog()
        for n in names.values():
            catalog.dropTempView(n)


def _finding_sql(severity: str, kind: str, file: str, offset: str, message: str, *keep: str) -> str:
    """The finding columns (plus ``keep`` columns, for ordering and capping) as a select list."""
    return ", ".join([f"{severity} AS severity", f"{kind} AS kind", "store", f"{file} AS file",
                      f"CAST({offset} AS BIGINT) AS `offset`", f"{message} AS message", *keep])


def _finding_struct(severity: str, kind: str, file: str, offset: str, message: str) -> str:
    """The finding columns as one struct (``inline`` of an array of them: several kinds per row)."""
    return (f"named_struct('severity', {severity}, 'kind', {kind}, 'store', store, 'file', {file}, "
            f"'offset', CAST({offset} AS BIGINT), 'message', {message})")


def _fmt(template: str, *args: str) -> str:
    return f"format_string({_q(template)}, {', '.join(args)})"


_QNAME = "concat_ws('/', topic, CAST(queue_id AS STRING))"
_EXPECTS = f"NOT ((sys_flag & 12) IN ({TRANSACTION_PREPARED_TYPE}, {TRANSACTION_ROLLBACK_TYPE}))"
_FINDINGS = "severity, kind, store, file, `offset`, message"


def _to_cap_sql(src: str, group: list[str], order: list[str], more_file: str, more_offset: str, what: str) -> str:
    """Findings of ``src`` to cap per ``group`` in ``order`` (see :func:`_cap_ctes`), with what the
    cap needs: the group key ``_cg`` (``what`` first, so each kind of cap has its own groups), the
    order ``_o1``/``_o2``, and ``more_file``/``more_offset`` for verify's "... and N more" row."""
    o = [*order, "0", "0"][:2]
    g = ", ".join(f"CAST({c} AS STRING)" for c in group)
    return (f"SELECT {_FINDINGS}, concat_ws(chr(0), {_q(what)}, {g}) AS _cg, CAST({o[0]} AS BIGINT) AS _o1, "
            f"CAST({o[1]} AS BIGINT) AS _o2, {more_file} AS _mf, CAST({more_offset} AS BIGINT) AS _mo, "
            f"{_q(what)} AS _what FROM {src}")


def _cap_ctes(src: str) -> _Ctes:
    """``cap_f``: keep the first MAX_PER_KIND findings of each ``_cg`` group of ``src``; add
    verify's "... and N more" row at the group's first row's ``_mf``/``_mo``. One window for
    every capped check (it runs over findings only, which are few), read once: the group's first
    row yields both rows (two reads of the window were two copies of everything below it)."""
    more = _fmt("... and %d more %s (not listed)", f"_n - {MAX_PER_KIND}", "_what")
    row = ("named_struct('severity', severity, 'kind', kind, 'store', store, 'file', {}, 'offset', {}, "
           "'message', {})")
    return [
        ("cap_r", f"SELECT *, row_number() OVER (PARTITION BY _cg ORDER BY _o1, _o2) AS _rn, "
                  f"count(1) OVER (PARTITION BY _cg) AS _n FROM {src}"),
        ("cap_f", f"SELECT inline(CASE WHEN _rn = 1 AND _n > {MAX_PER_KIND} THEN array(_f, _m) ELSE array(_f) END) "
                  f"FROM (SELECT {row.format('file', '`offset`', 'message')} AS _f, "
                  f"{row.format('_mf', '_mo', more)} AS _m, _rn, _n FROM cap_r WHERE _rn <= {MAX_PER_KIND})"),
    ]


def _cap_all(df: DataFrame) -> DataFrame:
    """Capped findings of ``df`` (finding columns and :func:`_to_cap_sql`'s) (see :func:`_cap_ctes`)."""
    return _sql(df.sparkSession, [("cap_in", "SELECT * FROM {df}"), *_cap_ctes("cap_in")], "SELECT * FROM cap_f",
                df=df)


def _finding(df: DataFrame, severity: str, kind: str | Column, file: Column | str, offset: Column | str,
             message: Column, keep: tuple[str, ...] = ()) -> DataFrame:
    """Select the finding columns (plus ``keep`` columns, for ordering and capping)."""
    def col(v: Any) -> Column:
        return F.col(v) if isinstance(v, str) else v

    return df.select(
        F.lit(severity).alias("severity"), (F.lit(kind) if isinstance(kind, str) else kind).alias("kind"),
        F.col("store"), col(file).alias("file"), col(offset).cast("long").alias("offset"),
        message.alias("message"), *keep,
    )


def _first_of(df: DataFrame, group: list[str], order: str, cols: list[str]) -> DataFrame:
    """Per group: ``cols`` of the row with the smallest ``order``, and the group's row count as
    ``_n`` (an aggregation, not a window: partial counts before the shuffle)."""
    return df.groupBy(*group).agg(F.count(F.lit(1)).alias("_n"), F.min(order).alias(order),
                                  *[F.min_by(c, order).alias(c) for c in cols if c != order])


def _qname() -> Column:
    return F.concat_ws("/", F.col("topic"), F.col("queue_id").cast("string"))


def _expects_unit() -> Column:
    """Not a PREPARED/ROLLBACK transaction record: the dispatcher writes a CQ unit for it."""
    return ~F.col("sys_flag").bitwiseAND(0xC).isin(TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)


def _item_position() -> Column:
    return F.lit(INDEX_HEADER_SIZE) + F.col("hash_slot_num") * HASH_SLOT_SIZE + F.col("item_no") * INDEX_SIZE


# ------------------------------------------------------------------------------------ steps
def file_walks(records: DataFrame, files: DataFrame) -> DataFrame:
    """Per CommitLog file: where its walk stopped (``end``), whether it met a blank or damage,
    and its newest store timestamp (``newest``, null without messages)."""
    msg = F.col("record_type") == "message"
    agg = records.groupBy("store", "file").agg(
        F.min(F.when(F.col("record_type") == "error", F.col("offset"))).alias("err_at"),
        F.max(F.when(F.col("record_type") == "blank", F.col("offset") + F.col("size"))).alias("blank_end"),
        F.max(F.when(msg, F.col("offset") + F.col("size"))).alias("msg_end"),
        F.max(F.when(msg, F.col("store_timestamp"))).alias("newest"),
    )
    return (files.join(agg, ["store", "file"], "left")
            .withColumn("end", F.coalesce("err_at", "blank_end", "msg_end", "base"))
            .withColumn("has_blank", F.col("blank_end").isNotNull())
            .withColumn("has_error", F.col("err_at").isNotNull()))


def _damage_ctes(check_crc: bool = False) -> _Ctes:
    """``dm_f``: :func:`damage_findings` over ``{records}`` and ``{walks}``."""
    crc = ", r.crc_ok, r.prop_crc_ok, r.body_crc, r.body_length" if check_crc else ""
    odd = "NOT (r.record_type = 'message') OR r.physical_offset != r.`offset`"
    odd += " OR NOT r.crc_ok OR NOT r.prop_crc_ok" if check_crc else ""  # prop_crc_ok null: no property
    not_read = _fmt(" (%d bytes not read)", "base + mapped_length - `offset`")
    damage = _finding_struct(_q("error"), "concat('commitlog_', error)", "file", "`offset`", (
        "concat(coalesce(error_detail, error), '; the walk of this file stops here', "
        f"CASE WHEN `last` = 1 THEN '' ELSE {not_read} END)"))
    stale = _finding_struct(_q("error"), _q("commitlog_phys_offset_mismatch"), "file", "`offset`", _fmt(
        "record at %d says its physical offset is %d (a stale record of a reused file?)", "`offset`",
        "physical_offset"))
    blank = _finding_struct(_q("error"), _q("blank_not_at_file_end"), "file", "`offset`", _fmt(
        "blank record of %d bytes ends at %d, the file at %d", "size", "`offset` + size", "hi"))
    parts = [
        ("record_type = 'error'", damage),
        ("record_type = 'message' AND physical_offset != `offset`", stale),
        ("record_type = 'blank' AND `offset` + size != hi", blank),
    ]
    if check_crc:
        crc_bad = _finding_struct(_q("error"), _q("commitlog_crc_mismatch"), "file", "`offset`", _fmt(
            "body CRC %d does not match the body of %d bytes (recovery with checkCRCOnRecover cuts the log here)",
            "body_crc", "body_length"))
        parts.append(("record_type = 'message' AND NOT crc_ok", crc_bad))
        prop_bad = _finding_struct(_q("error"), _q("commitlog_prop_crc_mismatch"), "file", "`offset`", _fmt(
            "__CRC32# property is not the CRC of the record's first %d bytes: damage outside the body, which the "
            "body CRC cannot see (recovery with force_verify_prop_crc cuts the log here)", "size - 20"))
        parts.append(("record_type = 'message' AND NOT prop_crc_ok", prop_bad))
    # one scan of the records for every kind (a UNION ALL of one SELECT per kind scanned the cached
    # records once per kind: 3-4 stages of a task per CommitLog file at the end of the audit)
    cases = ", ".join(f"CASE WHEN {c} THEN {f} END" for c, f in parts)
    return [
        ("dm_r", "SELECT /*+ BROADCAST(w) */ r.store, r.file, r.`offset`, r.size, r.record_type, r.error, "
                 f"r.error_detail, r.physical_offset{crc}, w.hi, w.mapped_length, w.base, w.`last` "
                 f"FROM {{records}} r JOIN {{walks}} w ON r.store = w.store AND r.file = w.file WHERE {odd}"),
        ("dm_f", f"SELECT inline(filter(array({cases}), x -> x IS NOT NULL)) FROM dm_r"),
    ]


def damage_findings(records: DataFrame, walks: DataFrame, *, check_crc: bool = False) -> DataFrame:
    """Damage (the walk of the file stops there), stale physical offsets, blanks not at file ends,
    and with ``check_crc`` body CRC mismatches and, for records carrying the 5.x ``__CRC32#``
    property, whole-record CRC mismatches."""
    return _sql(records.sparkSession, _damage_ctes(check_crc), "SELECT * FROM dm_f", records=records, walks=walks)


def pointers(units: DataFrame, items: DataFrame, walks: DataFrame, stores: DataFrame,
             misaligned: list[str] | None = None, bunits: DataFrame | None = None) -> DataFrame:
    """Every CQ unit (``kind = 'cq'``, pre-blank ones included), BatchConsumeQueue unit
    (``'bq'``, from ``bunits``) and index item (``'ix'``) that points into a CommitLog file, as
    one frame keyed by the ``offset`` it points at, with the file's walk ``end``: one side of
    the single join with the records."""
    return _located(units, items, walks, stores, misaligned, "inner", bunits)


_POINTER_SQL = ("lo_s.store, lo_s.`offset`, kind, file, position, log_file, `end`, topic, queue_id, queue_offset, "
                "size, tags_code, ext_address, item_no, key_hash, batch_size, unit_index")


def _located(units: DataFrame, items: DataFrame, walks: DataFrame, stores: DataFrame,
             misaligned: list[str] | None = None, how: str = "left", bunits: DataFrame | None = None) -> DataFrame:
    """:func:`pointers`' rows; ``how="left"``: every unit and item, those in no CommitLog file with
    a null ``log_file`` and ``end``, plus the store's ``log_start`` and ``log_end`` (what
    :func:`_edges` reads: one frame for the joins and the outside/past-end checks).

    The file of a pointer: where every file name of a store is a multiple of its file size,
    ``offset - offset % file_size``, an equi-join with the (small, broadcast) walks; stores with a
    misaligned file name (``misaligned``) take a range join."""
    join = "LEFT JOIN" if how == "left" else "JOIN"
    cols = _POINTER_SQL + (", log_start, log_end" if how == "left" else "")
    null = "CAST(NULL AS {}) AS {}"
    if bunits is None:
        bunits = _local(units.sparkSession, [], _BUNITS_SCHEMA)
    ctes = [
        ("lo_p", "SELECT store, commit_log_offset AS `offset`, 'cq' AS kind, file, position, "
                 "CAST(topic AS STRING) AS topic, CAST(queue_id AS INT) AS queue_id, "
                 "CAST(queue_offset AS BIGINT) AS queue_offset, CAST(size AS INT) AS size, "
                 "CAST(tags_code AS BIGINT) AS tags_code, CAST(ext_address AS BIGINT) AS ext_address, "
                 f"{null.format('INT', 'item_no')}, {null.format('INT', 'key_hash')}, "
                 f"{null.format('INT', 'batch_size')}, {null.format('BIGINT', 'unit_index')} FROM {{units}} UNION ALL "
                 f"SELECT store, phy_offset, 'ix', file, {INDEX_HEADER_SIZE} + hash_slot_num * {HASH_SLOT_SIZE} + "
                 f"item_no * {INDEX_SIZE}, CAST(NULL AS STRING), CAST(NULL AS INT), CAST(NULL AS BIGINT), "
                 "CAST(NULL AS INT), CAST(NULL AS BIGINT), CAST(NULL AS BIGINT), CAST(item_no AS INT), "
                 "CAST(key_hash AS INT), CAST(NULL AS INT), CAST(NULL AS BIGINT) FROM {items} UNION ALL "
                 "SELECT store, commit_log_offset, 'bq', file, position, CAST(topic AS STRING), "
                 "CAST(queue_id AS INT), CAST(queue_offset AS BIGINT), CAST(size AS INT), CAST(tags_code AS BIGINT), "
                 "CAST(NULL AS BIGINT), CAST(NULL AS INT), CAST(NULL AS INT), CAST(batch_size AS INT), "
                 "CAST(unit_index AS BIGINT) FROM {bunits}"),
        ("lo_s", "SELECT /*+ BROADCAST(s) */ lo_p.*, s.file_size, s.aligned, s.log_start, s.log_end "
                 "FROM lo_p JOIN {stores} s ON lo_p.store = s.store"),
        ("lo_w", "SELECT store, file AS log_file, base, hi, `end` FROM {walks}"),
    ]
    final = (f"SELECT /*+ BROADCAST(lo_w) */ {cols} FROM lo_s {join} lo_w ON lo_w.store = lo_s.store "
             "AND lo_w.base = lo_s.`offset` - pmod(lo_s.`offset`, lo_s.file_size) AND lo_s.`offset` < lo_w.hi "
             "WHERE lo_s.aligned = 1")  # (< hi: false only for Long.MAX_VALUE in a file ending past a long)
    if misaligned:
        final += (f" UNION ALL SELECT /*+ BROADCAST(lo_w) */ {cols} FROM lo_s {join} lo_w ON lo_w.store = "
                  "lo_s.store AND lo_s.`offset` >= lo_w.base AND lo_s.`offset` < lo_w.hi WHERE lo_s.aligned = 0")
    return _sql(units.sparkSession, ctes, final, inline=True, units=units, items=items, walks=walks, stores=stores,
                bunits=bunits)


def _edges_ctes() -> _Ctes:
    """``ed_f``: :func:`_edges` over ``{located}``."""
    out_side = "CASE WHEN `offset` < log_start THEN 'before' WHEN `offset` >= log_end THEN 'after' END"
    past = "CASE WHEN log_file IS NOT NULL AND `offset` >= `end` THEN 'past' END"
    group = "store, kind, _side, topic, queue_id, log_start, log_end, _gfile, _lf, _end"
    cq, bq, before, after = "kind = 'cq'", "kind = 'bq'", "_side = 'before'", "_side = 'after'"
    cases = [
        # batch_checks: bcq_outside_log, and bcq_to_log's units past a file's walk end
        (f"{bq} AND {before}", _fmt("batch queue %s: %d unit(s) point before the first CommitLog file (%d); their "
                                    "files were cleaned up", _QNAME, "_n", "log_start")),
        (f"{bq} AND {after}", _fmt("batch queue %s: %d unit(s) point past the last CommitLog file (end %d)", _QNAME,
                                   "_n", "log_end")),
        (bq, _fmt("batch queue %s: %d unit(s) from queue offset %d point at or past %d, where the readable log of "
                  "this file ends", _QNAME, "_n", "_qo", "_end")),
        (f"{cq} AND {before}", _fmt("%s: %d unit(s) point before the first CommitLog file (%d); their files were "
                                    "cleaned up", _QNAME, "_n", "log_start")),
        (f"{cq} AND {after}", _fmt("%s: %d unit(s) point past the last CommitLog file (end %d)", _QNAME, "_n",
                                   "log_end")),
        (cq, _fmt("%s: %d unit(s) from queue offset %d point at or past %d, where the readable log of this file "
                  "ends", _QNAME, "_n", "_ord", "_end")),
        (before, _fmt("%d item(s) point before the first CommitLog file (%d)", "_n", "log_start")),
        (after, _fmt("%d item(s) point past the last CommitLog file (end %d)", "_n", "log_end")),
    ]
    last = _fmt("%d item(s) point at or past %d, where the readable log of this file ends", "_n", "_end")
    message = "CASE " + " ".join(f"WHEN {c} THEN {m}" for c, m in cases) + f" ELSE {last} END"
    severity = f"CASE WHEN {before} THEN 'info' ELSE 'error' END"
    kind = (f"CASE WHEN {cq} OR {bq} THEN (CASE WHEN {before} THEN 'cq_units_before_log_start' "
            "ELSE 'cq_units_past_log_end' END) "
            f"ELSE (CASE WHEN {before} THEN 'index_items_before_log_start' ELSE 'index_items_past_log_end' END) END")
    return [
        ("ed_r", "SELECT store, kind, topic, queue_id, log_start, log_end, file, position, log_file, `end`, item_no, "
                 f"queue_offset, unit_index, explode(array_compact(array({out_side}, {past}))) AS _side "
                 f"FROM {{located}} WHERE (kind != 'cq' OR size != {_PRE_BLANK}) "
                 f"AND ({out_side} IS NOT NULL OR {past} IS NOT NULL)"),
        # a batch queue's first unit is its first in unit order (its queue offsets may not rise)
        ("ed_g", "SELECT store, kind, _side, topic, queue_id, log_start, log_end, file, position, queue_offset, "
                 "CASE WHEN kind = 'ix' THEN file END AS _gfile, CASE WHEN _side = 'past' THEN log_file END AS _lf, "
                 "CASE WHEN _side = 'past' THEN `end` END AS _end, "
                 "CASE WHEN kind = 'ix' THEN CAST(item_no AS BIGINT) WHEN kind = 'bq' THEN unit_index "
                 "ELSE queue_offset END AS _o FROM ed_r"),
        ("ed_a", f"SELECT {group}, count(1) AS _n, min(_o) AS _ord, min_by(file, _o) AS file, "
                 f"min_by(position, _o) AS position, min_by(queue_offset, _o) AS _qo FROM ed_g GROUP BY {group}"),
        ("ed_f", f"SELECT {_finding_sql(severity, kind, 'file', 'position', message)} FROM ed_a"),
    ]


def _edges(located: DataFrame) -> DataFrame:
    """:func:`outside_log`'s findings and the past-walk-end ones of :func:`cq_to_log` and
    :func:`index_to_log`, from one aggregation of :func:`_located` (was four, each re-reading
    units or items). Groups as theirs: per queue (units) or index file (items), and side
    (``before``/``after`` the log; ``past``: per CommitLog file, at or past its walk end)."""
    return _sql(located.sparkSession, _edges_ctes(), "SELECT * FROM ed_f", located=located)


#: what a unit must share with the record it points at (verify's ``_cq_to_log``); a ConsumeQueueExt
#: unit's tags code is its ext unit's (rmq_consumequeue resolves it), null where the address
#: resolves to nothing: any tags then pass (RocketMQ's null tags code matches every filter), and
#: the unit is ``cq_ext_unit_missing`` instead (:func:`_ext_lost_ctes`)
_CQ_CHECKS = {
    "topic/queue": "(r_topic = topic AND r_qid = queue_id)",
    "queue offset": "(r_qo = queue_offset)",
    "size": "(r_size = size)",
    "tags code": f"(tags_code IS NULL OR r_tags = tags_code OR r_topic = {_q(SCHEDULE_TOPIC)})",
}
#: or a multi-dispatch (LMQ) unit: the record names this queue and queue offset (codec.multi_dispatch)
_MULTI_OK = (f"({_CQ_CHECKS['size']} AND {_CQ_CHECKS['tags code']} AND coalesce(exists(r_multi, m -> "
             "m.queue = topic AND m.queue_offset = queue_offset AND (queue_id = r_qid OR "
             f"(startswith(topic, {_q(LMQ_PREFIX)}) AND queue_id = 0))), false))")
_CQ_OK = "((" + " AND ".join(_CQ_CHECKS.values()) + f") OR {_MULTI_OK})"
#: what a BatchConsumeQueue unit must share with its record (batch_checks.bcq_to_log): no null
#: tags code, no multi-dispatch; its batch size is the record's message count (``r_batch``)
_BQ_CHECKS = {
    "topic/queue": _CQ_CHECKS["topic/queue"],
    "queue offset": _CQ_CHECKS["queue offset"],
    "size": _CQ_CHECKS["size"],
    "tags code": f"(r_tags = tags_code OR r_topic = {_q(SCHEDULE_TOPIC)})",
    "batch size": "(r_batch = batch_size)",
}
_BQ_OK = "(" + " AND ".join(_BQ_CHECKS.values()) + ")"


def _record_batch_sql(records: DataFrame) -> str:
    """A record's message count as verify reads it for a batch unit: 1, or for an inner batch
    (``INNER_BATCH_FLAG``) its INNER_NUM (``-1`` where that is missing or not a number, and for a
    stale record, which ``snap.read_record`` does not return)."""
    inner = "coalesce(inner_num, -1)" if "inner_num" in records.columns else "-1"
    return (f"CASE WHEN sys_flag & {INNER_BATCH_FLAG} = 0 THEN CAST(1 AS BIGINT) "
            f"WHEN physical_offset != `offset` THEN CAST(-1 AS BIGINT) ELSE CAST({inner} AS BIGINT) END")


def suspects(records: DataFrame, ptrs: DataFrame, bdup: DataFrame | None = None) -> DataFrame:
    """The rows the CQ and index checks report on, from one pass over pointers and records.

    Pointers (before their file's walk end) get their record's columns (``r_*``, null where no
    record starts) by a left join on ``(store, offset)``; records that expect a unit and that no
    unit with their topic, queue and queue offset points at (``kind = 'r'``) are an anti join of
    the records with the pointers that matched. Both joins hash the records (no sort, no window:
    the window over pointers and records together cost 1.5x). Kept: pointers with no record,
    units that disagree with their record, items whose hash the record lacks, and the records
    no unit confirms — few on a healthy store, so the caller persists the result and every check
    reads it.

    A batch unit (``'bq'``) confirms the record it points at when it is the unit verify finds for
    the record's queue offset: not one of ``bdup``, which an earlier unit of the queue shadows."""
    if bdup is None:
        bdup = _local(records.sparkSession, [], _BDUP_SCHEMA)
    nulls = ", ".join(["NULL"] * 14)
    ctes = [
        ("su_rec", "SELECT store, `offset`, file AS r_file, topic AS r_topic, queue_id AS r_qid, "
                   "queue_offset AS r_qo, size AS r_size, tags_code AS r_tags, "
                   f"{_EXPECTS} AS r_expects, key_hashes AS r_hashes, multi_dispatch AS r_multi, "
                   f"{_record_batch_sql(records)} AS r_batch FROM {{records}} WHERE record_type = 'message'"),
        ("su_p", "SELECT store, `offset`, kind, file, position, log_file, `end`, topic, queue_id, queue_offset, size, "
                 "tags_code, ext_address, item_no, key_hash, batch_size, unit_index FROM {ptrs} "
                 "WHERE `offset` < `end`"),
        ("su_j", "SELECT /*+ SHUFFLE_HASH(su_rec) */ * FROM su_p LEFT JOIN su_rec USING (store, `offset`)"),
        ("su_ok", "SELECT /*+ BROADCAST(d) */ su_j.store, su_j.`offset` FROM su_j LEFT ANTI JOIN {bdup} d "
                  "ON d.store = su_j.store AND d.topic = su_j.topic AND d.queue_id = su_j.queue_id "
                  "AND d.unit_index = su_j.unit_index WHERE su_j.kind IN ('cq', 'bq') AND su_j.topic = su_j.r_topic "
                  "AND su_j.queue_id = su_j.r_qid AND su_j.queue_offset = su_j.r_qo"),
    ]
    final = (
        f"SELECT * FROM su_j WHERE (kind = 'cq' AND size != {_PRE_BLANK} AND (r_topic IS NULL OR NOT {_CQ_OK})) "
        f"OR (kind = 'bq' AND (r_topic IS NULL OR NOT {_BQ_OK})) "
        "OR (kind = 'ix' AND (r_topic IS NULL OR NOT array_contains(r_hashes, key_hash))) "
        f"UNION ALL SELECT /*+ SHUFFLE_HASH(su_ok) */ store, `offset`, 'r', {nulls}, r_file, r_topic, r_qid, r_qo, "
        "r_size, r_tags, r_expects, NULL, NULL, NULL FROM su_rec LEFT ANTI JOIN su_ok USING (store, `offset`) "
        "WHERE r_expects")
    return _sql(records.sparkSession, ctes, final, inline=True, records=records, ptrs=ptrs, bdup=bdup)


def cq_to_log(sus: DataFrame, ptrs: DataFrame) -> DataFrame:
    """Every unit points at a record start with the same topic, queue, queue offset, size and tags
    code (``cq_unit_no_record``, ``cq_unit_mismatch``); units past where the file's walk stopped
    give one ``cq_units_past_log_end`` per file and queue."""
    plain, to_cap = _cq_to_log(sus, ptrs)
    return plain.unionByName(_cap_all(to_cap))


def _cq_to_log(sus: DataFrame, ptrs: DataFrame) -> tuple[DataFrame, DataFrame]:
    group = ["store", "log_file", "topic", "queue_id"]
    real = (F.col("kind") == "cq") & (F.col("size") != _PRE_BLANK)
    past = _first_of(ptrs.where(real & (F.col("offset") >= F.col("end"))), [*group, "end"], "queue_offset",
                     ["file", "position"])
    past_findings = _finding(past, "error", "cq_units_past_log_end", "file", "position", F.format_string(
        "%s: %d unit(s) from queue offset %d point at or past %d, where the readable log of this file ends",
        _qname(), F.col("_n"), F.col("queue_offset"), F.col("end")))
    return past_findings, _cq_suspects(sus)


def _cq_suspects_ctes() -> _Ctes:
    """``cs_c``: the units among ``{sus}`` that point at no record or disagree with it, to cap."""
    def what(checks: dict[str, str]) -> str:
        return "concat_ws(', ', " + ", ".join(f"CASE WHEN NOT {c} THEN {_q(k)} END" for k, c in checks.items()) + ")"

    keep = ("log_file", "topic", "queue_id")
    no_rec = _finding_sql(_q("error"), _q("cq_unit_no_record"), "file", "position", _fmt(
        "%s queue offset %d: unit points at %d, where no record starts", _QNAME, "queue_offset", "`offset`"),
        *keep, "queue_offset AS _ord", "0 AS _kr")
    mismatch = _finding_sql(_q("error"), _q("cq_unit_mismatch"), "file", "position", _fmt(
        "%s queue offset %d -> record at %d: %s differ (unit size %d tags %d; record queue offset %d size %d "
        "tags %d)", _QNAME, "queue_offset", "`offset`", what(_CQ_CHECKS), "size", "coalesce(tags_code, ext_address)",
        "r_qo", "r_size", "r_tags"),
        *keep, "queue_offset AS _ord", "1 AS _kr")
    # a batch queue's (batch_checks.bcq_to_log), in unit order
    bq_no_rec = _finding_sql(_q("error"), _q("cq_unit_no_record"), "file", "position", _fmt(
        "batch queue %s queue offset %d: unit points at %d, where no record starts", _QNAME, "queue_offset",
        "`offset`"), *keep, "unit_index AS _ord", "0 AS _kr")
    bq_mismatch = _finding_sql(_q("error"), _q("cq_unit_mismatch"), "file", "position", _fmt(
        "batch queue %s queue offset %d -> record at %d: %s differ (unit size %d tags %d batch %d; record queue "
        "offset %d size %d tags %d messages %d)", _QNAME, "queue_offset", "`offset`", what(_BQ_CHECKS), "size",
        "tags_code", "batch_size", "r_qo", "r_size", "r_tags", "r_batch"),
        *keep, "unit_index AS _ord", "1 AS _kr")
    return [
        ("cs_j", f"SELECT * FROM {{sus}} WHERE (kind = 'cq' AND size != {_PRE_BLANK}) OR kind = 'bq'"),
        ("cs_f", f"SELECT {no_rec} FROM cs_j WHERE kind = 'cq' AND r_topic IS NULL UNION ALL "
                 f"SELECT {mismatch} FROM cs_j WHERE kind = 'cq' AND r_topic IS NOT NULL AND NOT {_CQ_OK} UNION ALL "
                 f"SELECT {bq_no_rec} FROM cs_j WHERE kind = 'bq' AND r_topic IS NULL UNION ALL "
                 f"SELECT {bq_mismatch} FROM cs_j WHERE kind = 'bq' AND r_topic IS NOT NULL AND NOT {_BQ_OK}"),
        # verify lists a group's no-record units first, then its mismatches, each in queue (unit) order;
        # a batch queue is never a plain queue too (those are checked as plain queues only)
        ("cs_c", _to_cap_sql("cs_f", ["store", "log_file", "topic", "queue_id"], ["_kr", "_ord"], "file",
                             "`offset`", "units")),
    ]


def _cq_suspects(sus: DataFrame) -> DataFrame:
    """The units among the suspects that point at no record or disagree with it, to cap."""
    return _sql(sus.sparkSession, _cq_suspects_ctes(), "SELECT * FROM cs_c", sus=sus)


def _ext_lost_ctes() -> _Ctes:
    """``xl_c``: ``cq_ext_unit_missing`` (a warning, as ``verify``'s) for every real unit of
    ``{units}`` whose ConsumeQueueExt address resolves to no unit, capped per queue, over
    ``{queues}`` (``has_ext``: the queue has an ext dir)."""
    where = ("CASE WHEN has_ext = 1 THEN 'no unit there' "
             "ELSE 'the store has no consumequeue_ext run for this queue' END")
    lost = _finding_sql(_q("warning"), _q("cq_ext_unit_missing"), "file", "position", _fmt(
        "%s queue offset %d: tags code %d is a ConsumeQueueExt address (ext offset %d), %s: RocketMQ reads a null "
        "tags code, which every tag filter matches", _QNAME, "queue_offset", "ext_address",
        f"ext_address & {(1 << 63) - 1}", where), "topic", "queue_id", "queue_offset", "position")
    return [
        ("xl_f", f"SELECT /*+ BROADCAST(q) */ {lost} FROM (SELECT u.*, q.has_ext FROM {{units}} u JOIN {{queues}} q "
                 "ON q.store = u.store AND q.topic = u.topic AND q.queue_id = u.queue_id "
                 f"WHERE u.size != {_PRE_BLANK} AND u.ext_address IS NOT NULL AND u.tags_code IS NULL)"),
        ("xl_c", _to_cap_sql("xl_f", ["store", "topic", "queue_id"], ["queue_offset"], "file", "position", "units")),
    ]


def ext_lost(units: DataFrame, queues: DataFrame) -> DataFrame:
    """``cq_ext_unit_missing``: units whose ConsumeQueueExt address resolves to nothing (capped)."""
    return _cap_all(_sql(units.sparkSession, _ext_lost_ctes(), "SELECT * FROM xl_c", units=units, queues=queues))


def index_to_log(sus: DataFrame, ptrs: DataFrame) -> DataFrame:
    """Every index item points at a record start (``index_item_no_record``) whose ``topic#key`` /
    ``topic#uniq_key`` hashes include the item's (``index_item_wrong_key``)."""
    plain, to_cap = _index_to_log(sus, ptrs)
    return plain.unionByName(_cap_all(to_cap))


def _index_to_log(sus: DataFrame, ptrs: DataFrame) -> tuple[DataFrame, DataFrame]:
    group = ["store", "log_file", "file"]
    ix = F.col("kind") == "ix"
    past = _first_of(ptrs.where(ix & (F.col("offset") >= F.col("end"))), [*group, "end"], "item_no", ["position"])
    past_findings = _finding(past, "error", "index_items_past_log_end", "file", "position", F.format_string(
        "%d item(s) point at or past %d, where the readable log of this file ends", F.col("_n"), F.col("end")))
    return past_findings, _index_suspects(sus)


def _index_suspects_ctes() -> _Ctes:
    """``is_c``: the items among ``{sus}`` that point at no record or at one without their key, to cap."""
    no_rec = _finding_sql(_q("error"), _q("index_item_no_record"), "file", "position", _fmt(
        "item %d points at %d, where no record starts", "item_no", "`offset`"), "log_file", "item_no")
    wrong_key = _finding_sql(_q("error"), _q("index_item_wrong_key"), "file", "position", _fmt(
        "item %d (hash %d) points at the record at %d, which has no key with that hash", "item_no", "key_hash",
        "`offset`"), "log_file", "item_no")
    return [
        ("is_j", "SELECT * FROM {sus} WHERE kind = 'ix'"),
        ("is_f", f"SELECT {no_rec} FROM is_j WHERE r_topic IS NULL UNION ALL SELECT {wrong_key} FROM is_j "
                 "WHERE r_topic IS NOT NULL AND NOT array_contains(r_hashes, key_hash)"),
        ("is_c", _to_cap_sql("is_f", ["store", "log_file", "file"], ["item_no"], "file", "`offset`", "items")),
    ]


def _index_suspects(sus: DataFrame) -> DataFrame:
    """The items among the suspects that point at no record or at one without their key, to cap."""
    return _sql(sus.sparkSession, _index_suspects_ctes(), "SELECT * FROM is_c", sus=sus)


def log_to_cq(sus: DataFrame, units: DataFrame, queues: DataFrame, walks: DataFrame, stores: DataFrame,
              bunits: DataFrame | None = None, bqueues: DataFrame | None = None,
              bdup: DataFrame | None = None) -> DataFrame:
    """Every record (but PREPARED/ROLLBACK) has its unit: ``not_in_consume_queue`` (warning) when the
    queue or the unit is missing, ``consume_queue_points_elsewhere`` when its unit points elsewhere;
    not for a store whose consume queues are in RocksDB only (``stores.cq_read = 0``: not read).
    A record of a batch queue (``bqueues``) needs the unit that starts at its queue offset
    (``bunits`` less ``bdup``), as ``batch_checks.log_to_bcq`` (in RocksDB stores too).

    A record is fine when a unit with its topic, queue and queue offset points at it (found by
    :func:`suspects`); only the other records (few) are looked up by queue offset."""
    return _cap_all(_log_to_cq(sus, units, queues, walks, stores, bunits, bqueues, bdup))


def _log_to_cq_ctes() -> _Ctes:
    """``lq_c``: :func:`log_to_cq`'s findings to cap, over ``{sus}``, ``{queues}``, ``{walks}``, ``{units}``."""
    missing = "records missing from consume queues"
    no_queue = _finding_sql(_q("warning"), _q("not_in_consume_queue"), "file", "`offset`", _fmt(
        "record (queue offset %d) has no consume queue at all", "queue_offset"), "_end")
    past = _finding_sql(_q("warning"), _q("not_in_consume_queue"), "file", "`offset`", _fmt(
        "%s queue offset %d is at or past the consume queue's end %d (not dispatched yet; recovery re-dispatches it)",
        _QNAME, "queue_offset", "q_end"), "_end")
    elsewhere = _finding_sql(_q("error"), _q("consume_queue_points_elsewhere"), "file", "`offset`", _fmt(
        "%s queue offset %d: its unit points at %d, not at this record", _QNAME, "queue_offset", "u_off"), "_end")
    at_end = _fmt("is at or past the batch queue's end %d (not dispatched yet; recovery re-dispatches it)", "b_end")
    why = f"CASE WHEN queue_offset >= b_end THEN {at_end} ELSE {_q('starts no unit of the batch queue')} END"
    b_missing = _finding_sql(_q("warning"), _q("not_in_consume_queue"), "file", "`offset`", _fmt(
        "batch queue %s queue offset %d %s", _QNAME, "queue_offset", why), "_end")
    b_elsewhere = _finding_sql(_q("error"), _q("consume_queue_points_elsewhere"), "file", "`offset`", _fmt(
        "batch queue %s queue offset %d: its unit points at %d, not at this record", _QNAME, "queue_offset", "u_off"),
        "_end")
    return [
        ("lq_m", "SELECT /*+ BROADCAST(q), BROADCAST(w), BROADCAST(b) */ s.store, s.`offset`, s.file, s.topic, "
                 "s.queue_id, s.queue_offset, q.q_base, q.q_end, b.b_end, w._end FROM (SELECT store, `offset`, "
                 "r_file AS file, r_topic AS topic, r_qid AS queue_id, r_qo AS queue_offset FROM {sus} "
                 "WHERE kind = 'r') s "
                 "LEFT JOIN {queues} q ON q.store = s.store AND q.topic = s.topic AND q.queue_id = s.queue_id "
                 "LEFT JOIN {bqueues} b ON b.store = s.store AND b.topic = s.topic AND b.queue_id = s.queue_id "
                 "JOIN (SELECT store, file, `end` AS _end FROM {walks}) w ON w.store = s.store AND w.file = s.file"),
        ("lq_a", f"SELECT {no_queue} FROM lq_m WHERE q_base IS NULL AND b_end IS NULL AND store NOT IN "
                 "(SELECT store FROM {stores} WHERE cq_read = 0) UNION ALL "
                 f"SELECT {past} FROM lq_m WHERE queue_offset >= q_end"),
        ("lq_i", "SELECT * FROM lq_m WHERE queue_offset >= q_base AND queue_offset < q_end"),
        ("lq_u", "SELECT store, topic, queue_id, queue_offset, commit_log_offset AS u_off FROM {units}"),
        # hash the few records (without AQE a sort-merge join would sort every unit)
        ("lq_b", f"SELECT /*+ SHUFFLE_HASH(lq_i) */ {elsewhere} FROM lq_i JOIN lq_u "
                 "USING (store, topic, queue_id, queue_offset) WHERE u_off != `offset`"),
        # a batch queue's records: the unit verify finds for the queue offset (the first one that starts there)
        ("lq_bm", "SELECT * FROM lq_m WHERE b_end IS NOT NULL"),
        ("lq_bu", "SELECT /*+ BROADCAST(d) */ u.store, u.topic, u.queue_id, u.queue_offset, "
                  "u.commit_log_offset AS u_off FROM {bunits} u LEFT ANTI JOIN {bdup} d ON d.store = u.store "
                  "AND d.topic = u.topic AND d.queue_id = u.queue_id AND d.unit_index = u.unit_index"),
        ("lq_bf", "SELECT /*+ SHUFFLE_HASH(lq_bm) */ * FROM lq_bm JOIN lq_bu USING (store, topic, queue_id, "
                  "queue_offset)"),
        ("lq_ba", f"SELECT {b_missing} FROM lq_bm LEFT ANTI JOIN lq_bf USING (store, `offset`)"),
        ("lq_bb", f"SELECT {b_elsewhere} FROM lq_bf WHERE u_off != `offset`"),
        # verify caps a file's batch-queue records apart from its plain ones (group 'b')
        ("lq_c", _to_cap_sql("lq_a", ["store", "file"], ["`offset`"], "file", "_end", missing) + " UNION ALL "
         + _to_cap_sql("lq_b", ["store", "file"], ["`offset`"], "file", "_end", "records") + " UNION ALL "
         + _to_cap_sql("lq_ba", ["store", "file", "'b'"], ["`offset`"], "file", "_end", missing) + " UNION ALL "
         + _to_cap_sql("lq_bb", ["store", "file", "'b'"], ["`offset`"], "file", "_end", "records")),
    ]


def _log_to_cq(sus: DataFrame, units: DataFrame, queues: DataFrame, walks: DataFrame,
               stores: DataFrame, bunits: DataFrame | None = None, bqueues: DataFrame | None = None,
               bdup: DataFrame | None = None) -> DataFrame:
    spark = sus.sparkSession
    return _sql(spark, _log_to_cq_ctes(), "SELECT * FROM lq_c", sus=sus, units=units, queues=queues,
                walks=walks, stores=stores,
                bunits=bunits if bunits is not None else _local(spark, [], _BUNITS_SCHEMA),
                bqueues=bqueues if bqueues is not None else _local(spark, [], _BQUEUES_SCHEMA),
                bdup=bdup if bdup is not None else _local(spark, [], _BDUP_SCHEMA))
def outside_log(units: DataFrame, items: DataFrame, stores: DataFrame) -> DataFrame:
    """Units/items pointing before the first CommitLog file (``info``: cleaned up) or past the last
    file's end (``error``): one finding per queue / index file, at its first such entry."""
    s = F.broadcast(stores.select("store", "log_start", "log_end"))

    def side(off: str) -> Column:
        return F.when(F.col(off) < F.col("log_start"), "before").when(F.col(off) >= F.col("log_end"), "after")

    # one aggregation per frame (both sides at once; each side's findings read the same shuffle)
    real = units.where(F.col("size") != _PRE_BLANK).join(s, "store").withColumn("_side", side("commit_log_offset"))
    uq = _first_of(real.where(F.col("_side").isNotNull()),
                   ["store", "topic", "queue_id", "log_start", "log_end", "_side"], "queue_offset",
                   ["file", "position"])
    before = _finding(uq.where(F.col("_side") == "before"), "info", "cq_units_before_log_start", "file", "position",
                      F.format_string(
                          "%s: %d unit(s) point before the first CommitLog file (%d); their files were cleaned up",
                          _qname(), F.col("_n"), F.col("log_start")))
    after = _finding(uq.where(F.col("_side") == "after"), "error", "cq_units_past_log_end", "file", "position",
                     F.format_string("%s: %d unit(s) point past the last CommitLog file (end %d)", _qname(),
                                     F.col("_n"), F.col("log_end")))
    it = items.join(s, "store").withColumn("position", _item_position()).withColumn("_side", side("phy_offset"))
    iq = _first_of(it.where(F.col("_side").isNotNull()), ["store", "file", "log_start", "log_end", "_side"], "item_no",
                   ["position"])
    ibefore = _finding(iq.where(F.col("_side") == "before"), "info", "index_items_before_log_start", "file",
                       "position", F.format_string("%d item(s) point before the first CommitLog file (%d)",
                                                   F.col("_n"), F.col("log_start")))
    iafter = _finding(iq.where(F.col("_side") == "after"), "error", "index_items_past_log_end", "file", "position",
                      F.format_string("%d item(s) point past the last CommitLog file (end %d)", F.col("_n"),
                                      F.col("log_end")))
    return before.unionByName(after).unionByName(ibefore).unionByName(iafter)


def walk_findings(walks: list[Any], store_rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """What needs only the per-file walk facts (collected) and per-store values, computed on the
    driver: non-last files without a blank (``file_not_full``) and the checkpoint (present when
    the log has files; timestamps not after the newest record's store time by more than 3 s;
    zero physic/logics timestamps are ``info``), as finding tuples."""
    out: list[tuple[Any, ...]] = []
    newest: dict[str, int] = {}
    for w in walks:
        if w["newest"] is not None:
            newest[w["store"]] = max(newest.get(w["store"], 0), w["newest"])
        if not w["has_blank"] and not w["has_error"] and w["last"] == 0 and w["mapped_length"] > 0:
            out.append(("error", "file_not_full", w["store"], w["file"], w["end"],
                        "the records stop before the end of a file that is not the last (no blank record); "
                        "recovery would end the log here"))
    for store, _, _, has_files, cp_present, physic, logics, index, *_ in store_rows:
        if not cp_present:
            if has_files:
                out.append(("warning", "checkpoint_missing", store, "checkpoint", 0,
                            "no readable checkpoint file: opening treats every timestamp as 0"))
            continue
        n = newest.get(store, 0)
        for name, v, pos in (("physic_msg_timestamp", physic, 0), ("logics_msg_timestamp", logics, 8),
                             ("index_msg_timestamp", index, 16)):
            if n and v > n + CHECKPOINT_SLACK_MS:
                out.append(("warning", "checkpoint_in_future", store, "checkpoint", pos,
                            f"{name} {v} is {v - n} ms after the newest record's store time {n}"))
            elif n and v == 0 and name != "index_msg_timestamp":
                out.append(("info", "checkpoint_zero", store, "checkpoint", pos,
                            f"{name} is 0 although the log holds records (never flushed?)"))
    return out


# ------------------------------------------------------------------------------------ jobs
def audit_inputs(inputs: AuditInputs, *, check_crc: bool = False) -> tuple[DataFrame, DataFrame]:
    """All checks over already-loaded inputs: ``(findings, summary)``.

    Runs one small job at once: the per-file walk facts (one row per CommitLog file), collected
    to the driver so every step joins a local table (this also fills the records cache). The big
    frames are hash-joined once (:func:`suspects`, persisted: few rows) and aggregated once
    (:func:`_edges`); everything else is a broadcast join with per-file/per-store tables, or an
    aggregation or window over few rows. The checks are three SQL statements (pointers, suspects,
    findings), each analysed once: the driver spends ~0.3 s on them, not seconds."""
    from pyspark import StorageLevel

    inp = inputs
    spark = inp.records.sparkSession
    w = file_walks(inp.records, inp.files)
    walk_rows = w.collect()
    walks = _local(spark, walk_rows, w.schema)
    local = _local(spark, walk_findings(walk_rows, inp.store_rows), schemas.finding_schema())
    bunits, bqueues, bdup = inp.batch_frames()
    located = _located(inp.units, inp.items, walks, inp.stores, inp.misaligned, bunits=bunits)
    sus = suspects(inp.records, located, bdup).persist(StorageLevel.MEMORY_AND_DISK)
    inp.derived.append(sus)
    ctes = [*_damage_ctes(check_crc), *_edges_ctes(), *_log_to_cq_ctes(), *_cq_suspects_ctes(),
            *_index_suspects_ctes(), *_ext_lost_ctes(),
            ("to_cap", "SELECT * FROM lq_c UNION ALL SELECT * FROM cs_c UNION ALL SELECT * FROM is_c "
                       "UNION ALL SELECT * FROM xl_c"),
            *_cap_ctes("to_cap")]
    # few rows: one partition sorted, not a range partitioning (which samples its input in a job of its own)
    findings = _sql(spark, ctes, (
        "SELECT /*+ REPARTITION(1) */ * FROM (SELECT * FROM {driver} UNION ALL SELECT * FROM {local} "
        "UNION ALL SELECT * FROM dm_f UNION ALL SELECT * FROM ed_f UNION ALL SELECT * FROM cap_f) "
        "SORT BY store, file, `offset`, kind, message"),
        driver=inp.driver, local=local, records=inp.records, walks=walks, located=located, sus=sus, units=inp.units,
        queues=inp.queues, stores=inp.stores, bunits=bunits, bqueues=bqueues, bdup=bdup)
    # one analysis of the findings' (large) plan, not two (groupBy, then orderBy)
    summary = _sql(spark, [], "SELECT store, severity, kind, count(1) AS findings FROM {findings} "
                   "GROUP BY store, severity, kind ORDER BY store, severity, kind", findings=findings)
    return findings, summary


def audit(spark: SparkSession, stores: list[str], *, check_crc: bool = False,
          options: dict[str, str] | None = None) -> tuple[DataFrame, DataFrame]:
    """``(findings_df, summary_df)`` for ``stores``: the findings ``verify()`` yields for each store
    (columns ``schemas.FINDING_COLUMNS``), and counts per store, severity and kind.

    The driver reads per-file facts at once; the DataFrames are lazy except that the records,
    units and items are persisted on first use (use :func:`load_inputs` + :func:`audit_inputs`
    and ``AuditInputs.unpersist()`` to control that)."""
    return audit_inputs(load_inputs(spark, stores, options=options, check_crc=check_crc), check_crc=check_crc)


def stats(spark: SparkSession, stores: list[str], inputs: AuditInputs | None = None) -> dict[str, DataFrame]:
    """Per-store statistics as DataFrames:

    * ``by_hour``: per topic, queue and hour of store time: messages, bytes, size p50/p90/p99;
    * ``topics``: per topic and queue: messages, bytes, queue offsets, size percentiles, distinct
      tags and keys (approximate), the consume queue's figures as ``rmqlab inspect`` reports them
      (``cq_min_offset``, ``cq_max_offset``, ``cq_units``, ``cq_bytes``, ``cq_max_phy_offset``;
      a 5.x BatchConsumeQueue's offsets by message, one unit per record; null without consume-queue
      files) and ``lag`` (records at or past the queue's end, 0 when there is none);
    * ``tags``: messages per topic and tag;
    * ``keys``: per topic: key occurrences, distinct keys, most messages under one key;
    * ``index_files``: per index file: items, used slots, load (items / slots), mean and max chain;
    * ``index_slots``: per index file and slot: chain length (items in the slot).
    """
    inp = inputs or load_inputs(spark, stores, with_stats=True)
    records = inp.records
    if not set(STATS_COLUMNS) <= set(records.columns):  # inputs loaded for the audit only
        records = load_inputs(spark, stores, with_stats=True, shuffle_partitions=0).records
    msgs = records.where(F.col("record_type") == "message")
    size = F.col("size")
    figures = inp.cq_figures
    if figures is None:  # inputs built by hand
        figures = _local(spark, [r for s in stores for r in _store_meta(os.path.abspath(s)).figures], _FIGURES_SCHEMA)

    def pct(p: float) -> Column:
        return F.percentile_approx(size, p, 1000)

    by_hour = (msgs.withColumn("hour", F.date_trunc("hour", F.timestamp_millis("store_timestamp")))
               .groupBy("store", "topic", "queue_id", "hour")
               .agg(F.count(F.lit(1)).alias("messages"), F.sum(size).alias("bytes"), pct(0.5).alias("size_p50"),
                    pct(0.9).alias("size_p90"), pct(0.99).alias("size_p99"))
               .orderBy("store", "topic", "queue_id", "hour"))
    lag = msgs.where(_expects_unit()).join(figures, ["store", "topic", "queue_id"], "left").groupBy(
        "store", "topic", "queue_id").agg(F.sum(F.when(
            F.col("queue_offset") >= F.coalesce(F.col("cq_max_offset"), F.lit(0)), 1).otherwise(0)).alias("lag"))
    topics = (msgs.groupBy("store", "topic", "queue_id").agg(
        F.count(F.lit(1)).alias("messages"), F.sum(size).alias("bytes"),
        F.min("queue_offset").alias("min_queue_offset"), F.max("queue_offset").alias("max_queue_offset"),
        pct(0.5).alias("size_p50"), pct(0.99).alias("size_p99"), F.max(size).alias("size_max"),
        F.approx_count_distinct("tags").alias("distinct_tags"),
        F.sum(F.size("keys")).alias("key_occurrences"),
        F.min("store_timestamp").alias("first_store_timestamp"), F.max("store_timestamp").alias("last_store_timestamp"))
        .join(figures, ["store", "topic", "queue_id"], "full")
        .join(lag, ["store", "topic", "queue_id"], "left")
        .fillna({"messages": 0, "bytes": 0, "lag": 0, "key_occurrences": 0})
        .orderBy("store", "topic", "queue_id"))
    tags = msgs.groupBy("store", "topic", "tags").agg(F.count(F.lit(1)).alias("messages")).orderBy(
        "store", "topic", F.desc("messages"))
    per_key = msgs.select("store", "topic", F.explode("keys").alias("key")).groupBy("store", "topic", "key").agg(
        F.count(F.lit(1)).alias("messages"))
    keys = per_key.groupBy("store", "topic").agg(
        F.sum("messages").alias("key_occurrences"), F.count(F.lit(1)).alias("distinct_keys"),
        F.max("messages").alias("max_messages_per_key")).orderBy("store", "topic")
    slots = inp.items.groupBy("store", "file", "hash_slot_num", "slot").agg(
        F.count(F.lit(1)).alias("chain_length")).orderBy("store", "file", "slot")
    index_files = slots.groupBy("store", "file", "hash_slot_num").agg(
        F.sum("chain_length").alias("items"), F.count(F.lit(1)).alias("used_slots"),
        F.avg("chain_length").alias("mean_chain_length"), F.max("chain_length").alias("max_chain_length"),
    ).withColumn("load", F.col("items") / F.col("hash_slot_num")).orderBy("store", "file")
    return {"by_hour": by_hour, "topics": topics, "tags": tags, "keys": keys, "index_files": index_files,
            "index_slots": slots}


# ------------------------------------------------------------------------------------ output
def write_audit(findings: DataFrame, summary: DataFrame, out: str, stores: list[str]) -> dict[str, Any]:
    """Write ``findings/`` and ``summary/`` (Parquet), ``summary.json`` and ``summary.html`` under
    ``out``; return the JSON document (counts per severity, kinds, the first 200 findings).
    ``summary`` is recomputed from the persisted ``findings`` (same rows as :func:`audit_inputs`'s)."""
    from pyspark import StorageLevel

    os.makedirs(out, exist_ok=True)
    # written, counted and sampled: computed once (findings are few), not once per output
    findings = findings.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        findings.write.mode("overwrite").parquet(os.path.join(out, "findings"))
        summary = findings.groupBy("store", "severity", "kind").agg(F.count(F.lit(1)).alias("findings")).orderBy(
            "store", "severity", "kind")
        rows = [r.asDict() for r in summary.collect()]
        first = [r.asDict() for r in findings.limit(200).collect()]
        summary.write.mode("overwrite").parquet(os.path.join(out, "summary"))
    finally:
        findings.unpersist()
    by_sev: dict[str, int] = {}
    for r in rows:
        by_sev[r["severity"]] = by_sev.get(r["severity"], 0) + r["findings"]
    doc = {"stores": [os.path.abspath(s) for s in stores], "findings": sum(by_sev.values()),
           "by_severity": by_sev, "by_kind": rows, "first_findings": first}
    _write_docs(out, "rmqlab spark audit", doc, [("Findings per kind", rows), ("First findings", first)])
    return doc


def write_stats(frames: dict[str, DataFrame], out: str, stores: list[str]) -> dict[str, Any]:
    """Write each stats DataFrame as Parquet under ``out/<name>/`` plus summary.json/html."""
    os.makedirs(out, exist_ok=True)
    doc: dict[str, Any] = {"stores": [os.path.abspath(s) for s in stores]}
    tables = []
    for name, df in frames.items():
        df.write.mode("overwrite").parquet(os.path.join(out, name))
    for name in ("topics", "index_files"):
        rows = [r.asDict() for r in frames[name].collect()]
        doc[name] = rows
        tables.append((name, rows))
    _write_docs(out, "rmqlab spark stats", doc, tables)
    return doc


def _write_docs(out: str, title: str, doc: dict[str, Any], tables: list[tuple[str, list[dict[str, Any]]]]) -> None:
    import html

    with open(os.path.join(out, "summary.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2, default=str, ensure_ascii=False)
    parts = [f"<!doctype html><meta charset='utf-8'><title>{html.escape(title)}</title>",
             "<style>body{font-family:sans-serif}table{border-collapse:collapse}"
             "td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px}</style>",
             f"<h1>{html.escape(title)}</h1><p>Stores: {html.escape(', '.join(doc['stores']))}</p>"]
    for name, rows in tables:
        parts.append(f"<h2>{html.escape(name)}</h2>")
        if not rows:
            parts.append("<p>none</p>")
            continue
        cols = list(rows[0])
        parts.append("<table><tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in cols) + "</tr>")
        for r in rows:
            parts.append("<tr>" + "".join(f"<td>{html.escape(str(r[c]))}</td>" for c in cols) + "</tr>")
        parts.append("</table>")
    with open(os.path.join(out, "summary.html"), "w", encoding="utf-8") as f:
        f.write("\n".join(parts))
