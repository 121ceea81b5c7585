"""The audit and stats jobs: ``rmqlab.inspect.verify``'s cross-checks as Spark joins, per-topic stats.

``audit(spark, stores) -> (findings_df, summary_df)`` finds the same things as
:func:`rmqlab.inspect.verify.verify` on each store (same severity, kind, file, offset; the same
message text), but the per-record work runs in Spark: records, units and items are read by the
``rmq_*`` sources (only the columns the checks use) and checked in one shuffle, so many stores
(or one huge store) spread over a cluster. What is per *file* or per *queue* rather than per
record — file names, sizes and gaps, the ``abort`` marker, index layout, checkpoint values, a
queue whose offsets decrease — is read on the driver through ``rmqlab.inspect`` (the same
functions ``verify`` calls); the per-file walk ends are aggregated in Spark and collected.

Plan, for speed: CQ units and index items become one frame of *pointers* located in their
CommitLog file by arithmetic (``offset - offset % file_size``, a broadcast equi-join, not a range
join), hash-joined with the message records on ``(store, offset)`` (:func:`suspects`); the few
rows that can yield findings are persisted and every check reads them. The pointers outside the
log or past a file's walk end are one aggregation (:func:`_edges`). No Python UDFs (the reader
emits each record's index key hashes), no window or sort over the big frames.

Each step is a DataFrame -> DataFrame function, so tests run them on tiny frames. Per-record
findings of one kind are capped at 1000 per file (like ``verify``), with one "... and N more" row.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from rmqlab.codec.consume_queue_unit import MAX_ADDR
from rmqlab.codec.flags import SCHEDULE_TOPIC, TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE
from rmqlab.codec.index_layout import HASH_SLOT_SIZE, INDEX_HEADER_SIZE, INDEX_SIZE
from rmqlab.spark import schemas

__all__ = [
    "AuditInputs",
    "audit",
    "audit_inputs",
    "cq_to_log",
    "damage_findings",
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

MAX_PER_KIND = 1000  # as rmqlab.inspect.verify._MAX_PER_KIND
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
])
_STORES_SCHEMA = StructType([
    StructField("store", StringType(), False), StructField("log_start", LongType(), False),
    StructField("log_end", LongType(), False), StructField("has_files", IntegerType(), False),
    StructField("cp_present", IntegerType(), False), StructField("physic", LongType(), True),
    StructField("logics", LongType(), True), StructField("index", LongType(), True),
    StructField("file_size", LongType(), False), StructField("aligned", IntegerType(), False),
])

#: rmq_commitlog columns the audit reads (the reader builds only these); CRC and stats add theirs
RECORD_COLUMNS = ["store_path", "file", "offset", "size", "record_type", "topic", "queue_id", "queue_offset",
                  "physical_offset", "sys_flag", "tags_code", "store_timestamp", "key_hashes", "error", "error_detail"]
CRC_COLUMNS = ["crc_ok", "body_crc", "body_length"]
STATS_COLUMNS = ["tags", "keys"]
ITEM_COLUMNS = ["store_path", "file", "hash_slot_num", "item_no", "key_hash", "phy_offset", "slot"]
UNIT_COLUMNS = ["store_path", "topic", "queue_id", "file", "queue_offset", "position", "commit_log_offset", "size",
                "tags_code"]
#: ConsumeQueue units per read task: at most the reader's default, and few enough that a small
#: input still spreads over every core (one store's queues used to be a single task)
MAX_UNITS_PER_PARTITION = 2_000_000
MIN_UNITS_PER_PARTITION = 50_000
#: CommitLog bytes per shuffle partition when the audit sizes ``spark.sql.shuffle.partitions``
BYTES_PER_SHUFFLE_PARTITION = 256 * 1024 * 1024


@dataclass
class AuditInputs:
    """What the checks join. ``records``: rmq_commitlog rows (messages, blanks, errors) with the
    columns :data:`RECORD_COLUMNS`, persisted; ``units``: rmq_consumequeue rows
    (:data:`UNIT_COLUMNS`) incl. pre-blank units, spread over every core; ``items``: rmq_index
    rows (:data:`ITEM_COLUMNS`); ``files``: one row per non-empty CommitLog file (store, file,
    base, hi, mapped_length, last); ``queues``: per queue its first queue offset and end
    (``q_base``, ``q_end``) as ``verify`` sees them; ``stores``: per store the log's start/end,
    file size, whether every file name is a multiple of it (``aligned``) and the checkpoint
    values; ``driver``: findings computed on the driver (layout, abort, queues whose offsets
    decrease); ``log_bytes``: the CommitLog bytes of all stores; ``store_rows``: the ``stores``
    rows as tuples."""

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

    def unpersist(self) -> None:
        """Drop the cached records, units and items, and what the audit cached from them."""
        for df in (self.records, self.units, self.items, *self.derived):
            df.unpersist()
        self.derived.clear()


# ------------------------------------------------------------------------------------ inputs
def _store_meta(path: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], tuple[Any, ...], list[Any], int]:
    from rmqlab.inspect.snapshot import open_snapshot
    from rmqlab.inspect.verify import Finding, _check_layout

    with open_snapshot(path) as snap:
        size = snap.commit_log_file_size
        log = snap.commit_log_files
        # verify's "last file with data": only the first record header of each file matters
        last_data = max((i for i, mf in enumerate(log) if _first_header_ok(mf.buffer)), default=-1)
        files = [(snap.path, os.path.relpath(mf.file_name, snap.path), mf.file_from_offset,
                  mf.file_from_offset + size, mf.mapped_length, int(n >= last_data)) for n, mf in enumerate(log)]
        queues = []
        n_units = 0
        found: list[Finding] = list(_check_layout(snap))
        if snap.abort_present:
            found.append(Finding("info", "abort_present", "abort", 0,
                                 "abort file present: the last exit was not clean; opening runs abnormal recovery"))
        for (topic, qid), q in snap.consume_queues.items():
            base, units = q.units()
            first = os.path.relpath(q.files[0].file_name, snap.path) if q.files else ""
            queues.append((snap.path, topic, qid, base, base + len(units), first))
            n_units += len(units)
            # per queue, from the units the driver holds anyway (verify's _Queue.sorted)
            off = units["commit_log_offset"].astype(np.int64)[units["size"] != _PRE_BLANK]
            if off.size and not bool(np.all(np.diff(off) >= 0)):
                found.append(Finding("warning", "cq_not_monotonic", first, 0,
                                     f"consume queue {topic}/{qid}: commit log offsets are not increasing"))
        end = log[-1].file_from_offset + size if log else 0
        cp = snap.checkpoint_values()
        aligned = int(size > 0 and all(mf.file_from_offset % size == 0 for mf in log))
        store = (snap.path, snap.min_offset, end, int(bool(log)), int(cp is not None),
                 cp.physic_msg_timestamp if cp else None, cp.logics_msg_timestamp if cp else None,
                 cp.index_msg_timestamp if cp else None, size, aligned)
        driver = [(f.severity, f.kind, snap.path, f.file, f.offset, f.message) for f in found]
    return files, queues, store, driver, n_units


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
    files, queues, rows, driver = [], [], [], []
    n_units = 0
    for s in stores:
        f, q, st, d, n = _store_meta(s)
        files += f
        queues += q
        rows.append(st)
        driver += d
        n_units += n
    per_task = -(-n_units // max(1, int(spark.sparkContext.defaultParallelism)))
    per_task = min(MAX_UNITS_PER_PARTITION, max(MIN_UNITS_PER_PARTITION, per_task))
    log_bytes = sum(f[4] for f in files)
    if shuffle_partitions != 0:
        n = shuffle_partitions or shuffle_partitions_for(spark, log_bytes)
        spark.conf.set("spark.sql.shuffle.partitions", str(n))
        spark.conf.set("spark.sql.adaptive.enabled", "false")
    paths = ",".join(stores)
    cols = RECORD_COLUMNS + (CRC_COLUMNS if check_crc else []) + (STATS_COLUMNS if with_stats else [])
    level = StorageLevel.MEMORY_AND_DISK
    records = (spark.read.format("rmq_commitlog").options(**dict(options or {})).option("include_blank", "true")
               .option("columns", ",".join(cols)).load(paths).withColumnRenamed("store_path", "store").persist(level))
    units = (spark.read.format("rmq_consumequeue").option("include_pre_blank", "true")
             .option("columns", ",".join(UNIT_COLUMNS)).option("units_per_partition", str(per_task)).load(paths)
             .withColumnRenamed("store_path", "store").persist(level))
    items = (spark.read.format("rmq_index").option("columns", ",".join(ITEM_COLUMNS)).load(paths)
             .withColumnRenamed("store_path", "store").persist(level))
    return AuditInputs(
        records, units, items,
        _local(spark, files, _FILES_SCHEMA), _local(spark, queues, _QUEUES_SCHEMA),
        _local(spark, rows, _STORES_SCHEMA), _local(spark, driver, schemas.finding_schema()),
        misaligned=[r[0] for r in rows if not r[-1]], log_bytes=log_bytes, store_rows=rows,
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
    bound parameters cost more to parse than they save."""
    rows = [tuple(r) for r in rows]
    if len(rows) > LOCAL_TABLE_ROWS:
        return spark.createDataFrame(rows, schema)
    names = [f"c{i}" for i in range(len(schema.fields))]
    cells = rows or [(None,) * len(names)]
    args = {f"p{r}_{c}": v for r, row in enumerate(cells) for c, v in enumerate(row)}
    values = ", ".join("(" + ", ".join(f":p{r}_{c}" for c in range(len(names))) + ")" for r in range(len(cells)))
    df = spark.sql(f"SELECT * FROM VALUES {values} AS t({', '.join(names)})", args=args)
    df = df.select(*[F.col(n).cast(f.dataType).alias(f.name) for n, f in zip(names, schema.fields, strict=True)])
    return df if rows else df.where(F.lit(False))


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


def _to_cap(df: DataFrame, group: list[str], order: list[Column], more_file: Column, more_offset: Column,
            what: str) -> DataFrame:
    """Findings to cap per ``group`` in ``order`` (see :func:`_cap_all`), with what the cap needs:
    the group key ``_cg`` (``what`` first, so each kind of cap has its own groups), the order
    ``_o1``/``_o2``, and ``more_file``/``more_offset`` for verify's "... and N more" row."""
    o = [*order, F.lit(0), F.lit(0)][:2]
    return df.select(
        *_FINDING_NAMES, F.concat_ws("\x00", F.lit(what), *[F.col(g).cast("string") for g in group]).alias("_cg"),
        o[0].cast("long").alias("_o1"), o[1].cast("long").alias("_o2"), more_file.alias("_mf"),
        more_offset.cast("long").alias("_mo"), F.lit(what).alias("_what"))


def _cap_all(df: DataFrame) -> DataFrame:
    """Keep the first MAX_PER_KIND findings of each ``_cg`` group; add verify's "... and N more"
    row at the group's first row's ``_mf``/``_mo``. One window for every capped check (it runs
    over findings only, which are few)."""
    w = Window.partitionBy("_cg")
    ranked = (df.withColumn("_rn", F.row_number().over(w.orderBy("_o1", "_o2")))
              .withColumn("_n", F.count(F.lit(1)).over(w)))
    kept = ranked.where(F.col("_rn") <= MAX_PER_KIND).select(*_FINDING_NAMES)
    more = ranked.where((F.col("_rn") == 1) & (F.col("_n") > MAX_PER_KIND)).select(
        "severity", "kind", "store", F.col("_mf").alias("file"), F.col("_mo").alias("offset"),
        F.format_string("... and %d more %s (not listed)", F.col("_n") - MAX_PER_KIND, F.col("_what")).alias("message"))
    return kept.unionByName(more)


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


def _all(cs: list[Column]) -> Column:
    out = cs[0]
    for c in cs[1:]:
        out = out & c
    return out


def _in_files(df: DataFrame, offset: str, walks: DataFrame, stores: DataFrame,
              misaligned: list[str] | None = None, how: str = "inner") -> DataFrame:
    """Rows of ``df`` whose ``offset`` column falls in a CommitLog file's range, with that file's
    ``log_file``, ``base``, ``hi`` and walk ``end``. Where every file name of a store is a multiple
    of its file size, the file is ``offset - offset % file_size``: an equi-join with the (small,
    broadcast) walks; stores with a misaligned file name take the range join. ``how="left"``
    keeps the other rows too, with a null ``log_file``."""
    w = walks.select("store", F.col("file").alias("log_file"), "base", "hi", "end")
    o = F.col(offset)
    misaligned = misaligned or []
    parts = []
    if misaligned:
        wr = F.broadcast(w.where(F.col("store").isin(misaligned)).withColumnRenamed("store", "_s"))
        parts.append(df.where(F.col("store").isin(misaligned)).join(
            wr, (F.col("store") == F.col("_s")) & (o >= F.col("base")) & (o < F.col("hi")), how).drop("_s"))
    sizes = F.broadcast(stores.where(F.col("aligned") == 1).select("store", "file_size"))
    d = df.where(~F.col("store").isin(misaligned)) if misaligned else df
    parts.append(d.join(sizes, "store").withColumn("base", o - F.pmod(o, F.col("file_size")))
                 .join(F.broadcast(w), ["store", "base"], how).drop("file_size"))
    return parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])


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


def damage_findings(records: DataFrame, walks: DataFrame, *, check_crc: bool = False) -> DataFrame:
    """Damage (the walk of the file stops there), stale physical offsets, blanks not at file ends,
    and with ``check_crc`` body CRC mismatches."""
    msg = F.col("record_type") == "message"
    odd = ~msg | (F.col("physical_offset") != F.col("offset"))
    if check_crc:
        odd = odd | ~F.col("crc_ok")
    r = records.where(odd).join(F.broadcast(walks.select("store", "file", "hi", "mapped_length", "base", "last")),
                                ["store", "file"])
    damage = _finding(
        r.where(F.col("record_type") == "error"), "error", F.concat(F.lit("commitlog_"), F.col("error")), "file",
        "offset", F.concat(
            F.coalesce(F.col("error_detail"), F.col("error")), F.lit("; the walk of this file stops here"),
            F.when(F.col("last") == 1, F.lit("")).otherwise(F.format_string(
                " (%d bytes not read)", F.col("base") + F.col("mapped_length") - F.col("offset")))))
    msgs = r.where(msg)
    stale = _finding(msgs.where(F.col("physical_offset") != F.col("offset")), "error",
                     "commitlog_phys_offset_mismatch", "file", "offset", F.format_string(
                         "record at %d says its physical offset is %d (a stale record of a reused file?)",
                         F.col("offset"), F.col("physical_offset")))
    blank = _finding(
        r.where((F.col("record_type") == "blank") & (F.col("offset") + F.col("size") != F.col("hi"))),
        "error", "blank_not_at_file_end", "file", "offset", F.format_string(
            "blank record of %d bytes ends at %d, the file at %d", F.col("size"), F.col("offset") + F.col("size"),
            F.col("hi")))
    out = damage.unionByName(stale).unionByName(blank)
    if check_crc:
        out = out.unionByName(_finding(
            msgs.where(~F.col("crc_ok")), "error", "commitlog_crc_mismatch", "file", "offset", F.format_string(
                "body CRC %d does not match the body of %d bytes (recovery with checkCRCOnRecover cuts the log here)",
                F.col("body_crc"), F.col("body_length"))))
    return out


_POINTER_COLS = ["store", "offset", "kind", "file", "position", "log_file", "end", "topic", "queue_id",
                 "queue_offset", "size", "tags_code", "item_no", "key_hash"]
_POINTER_TYPES = {"topic": "string", "queue_id": "int", "queue_offset": "long", "size": "int", "tags_code": "long",
                  "item_no": "int", "key_hash": "int"}


def pointers(units: DataFrame, items: DataFrame, walks: DataFrame, stores: DataFrame,
             misaligned: list[str] | None = None) -> DataFrame:
    """Every CQ unit (``kind = 'cq'``, pre-blank ones included) and index item (``'ix'``) that
    points into a CommitLog file, as one frame keyed by the ``offset`` it points at, with the
    file's walk ``end``: one side of the single join with the records."""
    return _located(units, items, walks, stores, misaligned, "inner")


def _located(units: DataFrame, items: DataFrame, walks: DataFrame, stores: DataFrame,
             misaligned: list[str] | None = None, how: str = "left") -> DataFrame:
    """:func:`pointers`' rows; ``how="left"``: every unit and item, those in no CommitLog file with
    a null ``log_file`` and ``end``, plus the store's ``log_start`` and ``log_end`` (what
    :func:`_edges` reads: one frame for the joins and the outside/past-end checks)."""
    extra = ["log_start", "log_end"] if how == "left" else []
    s = F.broadcast(stores.select("store", "log_start", "log_end"))

    def typed(df: DataFrame, names: dict[str, Column]) -> DataFrame:
        cols = []
        for c in _POINTER_COLS:
            e = names.get(c, F.col(c) if c in df.columns else F.lit(None))
            cols.append((e.cast(_POINTER_TYPES[c]) if c in _POINTER_TYPES else e).alias(c))
        return (df.join(s, "store") if extra else df).select(*cols, *extra)

    u = _in_files(units, "commit_log_offset", walks, stores, misaligned, how)
    cq = typed(u, {"offset": F.col("commit_log_offset"), "kind": F.lit("cq")})
    it = _in_files(items, "phy_offset", walks, stores, misaligned, how)
    ix = typed(it, {"offset": F.col("phy_offset"), "kind": F.lit("ix"), "position": _item_position()})
    return cq.unionByName(ix)


def _edges(located: DataFrame) -> DataFrame:
    """:func:`outside_log`'s findings and the past-walk-end ones of :func:`cq_to_log` and
    :func:`index_to_log`, from one aggregation of :func:`_located` (was four, each re-reading
    units or items). Groups as theirs: per queue (units) or index file (items), and side
    (``before``/``after`` the log; ``past``: per CommitLog file, at or past its walk end)."""
    o, kind = F.col("offset"), F.col("kind")
    ix = kind == "ix"
    out_side = F.when(o < F.col("log_start"), "before").when(o >= F.col("log_end"), "after")
    past = F.when(F.col("log_file").isNotNull() & (o >= F.col("end")), "past")
    rows = located.where((ix | (F.col("size") != _PRE_BLANK)) & (out_side.isNotNull() | past.isNotNull())).select(
        "*", F.explode(F.array_compact(F.array(out_side, past))).alias("_side"))
    is_past = F.col("_side") == "past"
    g = rows.select(
        "store", "kind", "_side", "topic", "queue_id", "log_start", "log_end", "file", "position",
        F.when(ix, F.col("file")).alias("_gfile"), F.when(is_past, F.col("log_file")).alias("_lf"),
        F.when(is_past, F.col("end")).alias("_end"),
        F.when(ix, F.col("item_no").cast("long")).otherwise(F.col("queue_offset")).alias("_ord"))
    a = g.groupBy("store", "kind", "_side", "topic", "queue_id", "log_start", "log_end", "_gfile", "_lf", "_end").agg(
        F.count(F.lit(1)).alias("_n"), F.min("_ord").alias("_ord"), F.min_by("file", "_ord").alias("file"),
        F.min_by("position", "_ord").alias("position"))
    side, n = F.col("_side"), F.col("_n")
    cq, before, after = kind == "cq", side == "before", side == "after"
    message = (
        F.when(cq & before, F.format_string(
            "%s: %d unit(s) point before the first CommitLog file (%d); their files were cleaned up", _qname(), n,
            F.col("log_start")))
        .when(cq & after, F.format_string("%s: %d unit(s) point past the last CommitLog file (end %d)", _qname(), n,
                                          F.col("log_end")))
        .when(cq, F.format_string(
            "%s: %d unit(s) from queue offset %d point at or past %d, where the readable log of this file ends",
            _qname(), n, F.col("_ord"), F.col("_end")))
        .when(before, F.format_string("%d item(s) point before the first CommitLog file (%d)", n, F.col("log_start")))
        .when(after, F.format_string("%d item(s) point past the last CommitLog file (end %d)", n, F.col("log_end")))
        .otherwise(F.format_string("%d item(s) point at or past %d, where the readable log of this file ends", n,
                                   F.col("_end"))))
    return a.select(
        F.when(before, "info").otherwise("error").alias("severity"),
        F.when(cq, F.when(before, "cq_units_before_log_start").otherwise("cq_units_past_log_end"))
        .otherwise(F.when(before, "index_items_before_log_start").otherwise("index_items_past_log_end")).alias("kind"),
        "store", "file", F.col("position").cast("long").alias("offset"), message.alias("message"))


_R_COLS = ["r_file", "r_topic", "r_qid", "r_qo", "r_size", "r_tags", "r_expects", "r_hashes"]


def _cq_checks() -> dict[str, Column]:
    """What a unit must share with the record it points at (verify's ``_cq_to_log``)."""
    return {
        "topic/queue": (F.col("r_topic") == F.col("topic")) & (F.col("r_qid") == F.col("queue_id")),
        "queue offset": F.col("r_qo") == F.col("queue_offset"),
        "size": F.col("r_size") == F.col("size"),
        "tags code": (F.col("r_tags") == F.col("tags_code")) | (F.col("r_topic") == SCHEDULE_TOPIC)
        | (F.col("tags_code") <= MAX_ADDR),
    }


def suspects(records: DataFrame, ptrs: DataFrame) -> DataFrame:
    """The rows the CQ and index checks report on, from one pass over pointers and records.

    Pointers (before their file's walk end) get their record's columns (``r_*``, null where no
    record starts) by a left join on ``(store, offset)``; records that expect a unit and that no
    unit with their topic, queue and queue offset points at (``kind = 'r'``) are an anti join of
    the records with the pointers that matched. Both joins hash the records (no sort, no window:
    the window over pointers and records together cost 1.5x). Kept: pointers with no record,
    units that disagree with their record, items whose hash the record lacks, and the records
    no unit confirms — few on a healthy store, so the caller persists the result and every check
    reads it."""
    rec = records.where(F.col("record_type") == "message").select(
        "store", "offset", F.col("file").alias("r_file"), F.col("topic").alias("r_topic"),
        F.col("queue_id").alias("r_qid"), F.col("queue_offset").alias("r_qo"), F.col("size").alias("r_size"),
        F.col("tags_code").alias("r_tags"), _expects_unit().alias("r_expects"), F.col("key_hashes").alias("r_hashes"))
    p = ptrs.where(F.col("offset") < F.col("end")).select(*_POINTER_COLS)
    joined = p.join(rec.hint("shuffle_hash"), ["store", "offset"], "left")
    kind = F.col("kind")
    same = (kind == "cq") & (F.col("topic") == F.col("r_topic")) & (F.col("queue_id") == F.col("r_qid")) \
        & (F.col("queue_offset") == F.col("r_qo"))
    no_rec = F.col("r_topic").isNull()
    bad = joined.where(
        ((kind == "cq") & (F.col("size") != _PRE_BLANK) & (no_rec | ~_all(list(_cq_checks().values()))))
        | ((kind == "ix") & (no_rec | ~F.array_contains(F.col("r_hashes"), F.col("key_hash")))))
    ok = joined.where(same).select("store", "offset")
    lone = rec.where(F.col("r_expects")).drop("r_hashes").join(ok.hint("shuffle_hash"), ["store", "offset"],
                                                                 "left_anti")
    return bad.unionByName(lone.withColumn("kind", F.lit("r")), allowMissingColumns=True)


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


def _cq_suspects(sus: DataFrame) -> DataFrame:
    """The units among the suspects that point at no record or disagree with it, to cap."""
    group = ["store", "log_file", "topic", "queue_id"]
    j = sus.where((F.col("kind") == "cq") & (F.col("size") != _PRE_BLANK))
    checks = _cq_checks()
    what = F.concat_ws(", ", *[F.when(~c, F.lit(k)) for k, c in checks.items()])
    keep = ("log_file", "topic", "queue_id", "queue_offset", "_kr")
    no_rec = _finding(
        j.where(F.col("r_topic").isNull()).withColumn("_kr", F.lit(0)), "error", "cq_unit_no_record", "file",
        "position", F.format_string("%s queue offset %d: unit points at %d, where no record starts", _qname(),
                                    F.col("queue_offset"), F.col("offset")), keep)
    mismatch = _finding(
        j.where(F.col("r_topic").isNotNull() & ~_all(list(checks.values()))).withColumn("_kr", F.lit(1)),
        "error", "cq_unit_mismatch", "file", "position", F.format_string(
            "%s queue offset %d -> record at %d: %s differ (unit size %d tags %d; record queue offset %d size %d "
            "tags %d)", _qname(), F.col("queue_offset"), F.col("offset"), what, F.col("size"),
            F.col("tags_code"), F.col("r_qo"), F.col("r_size"), F.col("r_tags")), keep)
    # verify lists a group's no-record units first, then its mismatches, each in queue order
    return _to_cap(no_rec.unionByName(mismatch), group, [F.col("_kr"), F.col("queue_offset")], F.col("file"),
                   F.col("offset"), "units")


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


def _index_suspects(sus: DataFrame) -> DataFrame:
    """The items among the suspects that point at no record or at one without their key, to cap."""
    group = ["store", "log_file", "file"]
    j = sus.where(F.col("kind") == "ix")
    keep = ("log_file", "item_no")
    no_rec = _finding(j.where(F.col("r_topic").isNull()), "error", "index_item_no_record", "file", "position",
                      F.format_string("item %d points at %d, where no record starts", F.col("item_no"),
                                      F.col("offset")), keep)
    wrong = j.where(F.col("r_topic").isNotNull() & ~F.array_contains(F.col("r_hashes"), F.col("key_hash")))
    wrong_key = _finding(wrong, "error", "index_item_wrong_key", "file", "position", F.format_string(
        "item %d (hash %d) points at the record at %d, which has no key with that hash", F.col("item_no"),
        F.col("key_hash"), F.col("offset")), keep)
    return _to_cap(no_rec.unionByName(wrong_key), group, [F.col("item_no")], F.col("file"), F.col("offset"), "items")


def log_to_cq(sus: DataFrame, units: DataFrame, queues: DataFrame, walks: DataFrame) -> DataFrame:
    """Every record (but PREPARED/ROLLBACK) has its unit: ``not_in_consume_queue`` (warning) when the
    queue or the unit is missing, ``consume_queue_points_elsewhere`` when its unit points elsewhere.

    A record is fine when a unit with its topic, queue and queue offset points at it (found by
    :func:`suspects`); only the other records (few) are looked up by queue offset."""
    return _cap_all(_log_to_cq(sus, units, queues, walks))


def _log_to_cq(sus: DataFrame, units: DataFrame, queues: DataFrame, walks: DataFrame) -> DataFrame:
    m = (sus.where(F.col("kind") == "r")
         .select("store", "offset", F.col("r_file").alias("file"), F.col("r_topic").alias("topic"),
                 F.col("r_qid").alias("queue_id"), F.col("r_qo").alias("queue_offset"))
         .join(F.broadcast(queues), ["store", "topic", "queue_id"], "left")
         .join(F.broadcast(walks.select("store", "file", F.col("end").alias("_end"))), ["store", "file"]))
    keep = ("_end",)
    no_queue = _finding(m.where(F.col("q_base").isNull()), "warning", "not_in_consume_queue", "file", "offset",
                        F.format_string("record (queue offset %d) has no consume queue at all", F.col("queue_offset")),
                        keep)
    past = _finding(m.where(F.col("queue_offset") >= F.col("q_end")), "warning", "not_in_consume_queue", "file",
                    "offset", F.format_string(
                        "%s queue offset %d is at or past the consume queue's end %d "
                        "(not dispatched yet; recovery re-dispatches it)", _qname(), F.col("queue_offset"),
                        F.col("q_end")), keep)
    inside = m.where((F.col("queue_offset") >= F.col("q_base")) & (F.col("queue_offset") < F.col("q_end")))
    u = units.select("store", "topic", "queue_id", "queue_offset", F.col("commit_log_offset").alias("u_off"))
    # hash the few records (without AQE a sort-merge join would sort every unit)
    wrong = inside.hint("shuffle_hash").join(u, ["store", "topic", "queue_id", "queue_offset"]).where(
        F.col("u_off") != F.col("offset"))
    elsewhere = _finding(wrong, "error", "consume_queue_points_elsewhere", "file", "offset", F.format_string(
        "%s queue offset %d: its unit points at %d, not at this record", _qname(), F.col("queue_offset"),
        F.col("u_off")), keep)
    return _to_cap(no_queue.unionByName(past), ["store", "file"], [F.col("offset")], F.col("file"), F.col("_end"),
                   "records missing from consume queues").unionByName(
        _to_cap(elsewhere, ["store", "file"], [F.col("offset")], F.col("file"), F.col("_end"), "records"))


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
    aggregation or window over few rows."""
    from pyspark import StorageLevel

    inp = inputs
    spark = inp.records.sparkSession
    w = file_walks(inp.records, inp.files)
    walk_rows = w.collect()
    walks = _local(spark, walk_rows, w.schema)
    local = _local(spark, walk_findings(walk_rows, inp.store_rows), schemas.finding_schema())
    located = _located(inp.units, inp.items, walks, inp.stores, inp.misaligned)
    sus = suspects(inp.records, located).persist(StorageLevel.MEMORY_AND_DISK)
    inp.derived.append(sus)
    parts = [
        inp.driver,
        local,
        damage_findings(inp.records, walks, check_crc=check_crc),
        _edges(located),
        _cap_all(_log_to_cq(sus, inp.units, inp.queues, walks).unionByName(_cq_suspects(sus))
                 .unionByName(_index_suspects(sus))),
    ]
    findings = parts[0]
    for p in parts[1:]:
        findings = findings.unionByName(p)
    # few rows: one partition sorted, not a range partitioning (which samples its input in a job of its own)
    findings = findings.repartition(1).sortWithinPartitions("store", "file", "offset", "kind", "message")
    summary = findings.groupBy("store", "severity", "kind").agg(F.count(F.lit(1)).alias("findings")).orderBy(
        "store", "severity", "kind")
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
      tags and keys (approximate), and the ConsumeQueue's end and ``lag`` (records at or past it);
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

    def pct(p: float) -> Column:
        return F.percentile_approx(size, p, 1000)

    by_hour = (msgs.withColumn("hour", F.date_trunc("hour", F.timestamp_millis("store_timestamp")))
               .groupBy("store", "topic", "queue_id", "hour")
               .agg(F.count(F.lit(1)).alias("messages"), F.sum(size).alias("bytes"), pct(0.5).alias("size_p50"),
                    pct(0.9).alias("size_p90"), pct(0.99).alias("size_p99"))
               .orderBy("store", "topic", "queue_id", "hour"))
    lag = msgs.where(_expects_unit()).join(inp.queues, ["store", "topic", "queue_id"], "left").groupBy(
        "store", "topic", "queue_id").agg(
        F.sum(F.when(F.col("queue_offset") >= F.coalesce(F.col("q_end"), F.lit(0)), 1).otherwise(0)).alias("lag"))
    topics = (msgs.groupBy("store", "topic", "queue_id").agg(
        F.count(F.lit(1)).alias("messages"), F.sum(size).alias("bytes"),
        F.min("queue_offset").alias("min_queue_offset"), F.max("queue_offset").alias("max_queue_offset"),
        pct(0.5).alias("size_p50"), pct(0.99).alias("size_p99"), F.max(size).alias("size_max"),
        F.approx_count_distinct("tags").alias("distinct_tags"),
        F.sum(F.size("keys")).alias("key_occurrences"),
        F.min("store_timestamp").alias("first_store_timestamp"), F.max("store_timestamp").alias("last_store_timestamp"))
        .join(inp.queues.select("store", "topic", "queue_id", F.col("q_end").alias("cq_max_offset")),
              ["store", "topic", "queue_id"], "full")
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
