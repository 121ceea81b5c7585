"""DataFrame builders over a :class:`~rmqlab.inspect.snapshot.StoreSnapshot` (read-only).

Fixed-size units (ConsumeQueue units, index items and slots) are read as numpy structured arrays
over the mapped bytes and turned into columns directly; only variable-size CommitLog records are
decoded one by one. Column names are stable snake_case: the CLI's JSON uses the same names.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from rmqlab.codec.consume_queue_unit import CQ_STORE_UNIT_SIZE
from rmqlab.codec.flags import PROPERTY_KEYS, TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE
from rmqlab.codec.index_layout import (
    HASH_SLOT_SIZE,
    INDEX_HEADER_SIZE,
    INDEX_ITEM_DTYPE,
    INDEX_SIZE,
    index_key,
    index_key_hash,
    item_position,
)
from rmqlab.codec.message import MessageRecord

if TYPE_CHECKING:
    from rmqlab.inspect.snapshot import Damage, StoreSnapshot
    from rmqlab.store.index_file import IndexFile

__all__ = [
    "CHAIN_COLUMNS",
    "CQ_COLUMNS",
    "FILE_COLUMNS",
    "INDEX_FILE_COLUMNS",
    "MESSAGE_COLUMNS",
    "SLOT_COLUMNS",
    "TOPIC_COLUMNS",
    "checkpoint_frame",
    "consume_queue_frame",
    "files_frame",
    "index_chain_frame",
    "index_files_frame",
    "index_items",
    "index_slots_frame",
    "message_row",
    "messages_frame",
    "record_has_key",
    "record_key_hashes",
    "topics_frame",
]

FILE_COLUMNS = [
    "kind", "path", "name", "topic", "queue_id", "file_from_offset", "size", "file_size",
    "wrote_position", "flushed_position", "index_count", "mtime_ms",
]
MESSAGE_COLUMNS = [
    "commit_log_offset", "store_size", "topic", "queue_id", "queue_offset", "tags", "tags_code", "keys",
    "uniq_key", "msg_id", "flag", "sys_flag", "born_timestamp", "store_timestamp", "born_host", "store_host",
    "body_length", "body_crc", "crc_ok", "file",
]
CQ_COLUMNS = ["queue_offset", "commit_log_offset", "size", "tags_code", "file", "position"]
INDEX_FILE_COLUMNS = [
    "name", "path", "size", "begin_timestamp", "end_timestamp", "begin_phy_offset", "end_phy_offset",
    "hash_slot_count", "index_count", "items", "hash_slot_num", "index_num", "used_slots", "max_chain_length",
]
SLOT_COLUMNS = ["slot", "item", "chain_length"]
CHAIN_COLUMNS = [
    "file", "item", "position", "key_hash", "phy_offset", "time_diff", "prev_index", "time", "hash_matches",
    "time_in_window", "stop", "message_found", "message_topic", "message_keys", "message_has_key", "collision",
]
TOPIC_COLUMNS = [
    "topic", "queue_id", "min_offset", "max_offset", "cq_units", "cq_bytes", "cq_max_phy_offset",
    "messages", "bytes", "min_queue_offset", "max_queue_offset", "lag",
]


def _rel(snap: StoreSnapshot, path: str) -> str:
    return os.path.relpath(path, snap.path)


def _mtime_ms(path: str) -> int:
    return os.stat(path).st_mtime_ns // 1_000_000


# ---------------------------------------------------------------------------------------- files
def files_frame(snap: StoreSnapshot) -> pd.DataFrame:
    """Every file of the store, one row each, with the positions recoverable from its bytes.

    ``wrote_position`` (= ``flushed_position``: on disk both are what is readable): CommitLog,
    the end of the valid records (file size after a blank record); ConsumeQueue, units until
    the first invalid one * 20; index, the byte just past item ``index_count - 1``.
    """
    from rmqlab.inspect.snapshot import scan_end

    rows: list[dict[str, Any]] = []

    def row(kind: str, path: str, **kw: Any) -> None:
        base = {c: None for c in FILE_COLUMNS}
        base.update(kind=kind, path=_rel(snap, path), name=os.path.basename(path), size=os.path.getsize(path),
                    mtime_ms=_mtime_ms(path))
        base.update(kw)
        if base["wrote_position"] is not None:
            base["flushed_position"] = base["wrote_position"]
        rows.append(base)

    for mf in snap.commit_log_files:
        row("commitlog", mf.file_name, file_from_offset=mf.file_from_offset, file_size=snap.commit_log_file_size,
            wrote_position=scan_end(mf.buffer))
    for q in snap.consume_queues.values():
        for mf in q.files:
            row("consumequeue", mf.file_name, topic=q.topic, queue_id=q.queue_id, file_from_offset=mf.file_from_offset,
                file_size=snap.consume_queue_file_size,
                wrote_position=len(q.valid_units(mf)) * CQ_STORE_UNIT_SIZE)
    if not snap.index_error:
        for f in snap.index_files_opened():
            row("index", f.file_name, file_size=f.file_size, index_count=f.index_count,
                wrote_position=item_position(f.hash_slot_num, f.index_count))
    else:
        for p in snap.index_paths:
            row("index", p)
    _other_files(snap, row)
    df = pd.DataFrame(rows, columns=FILE_COLUMNS)
    for c in ("queue_id", "file_from_offset", "file_size", "wrote_position", "flushed_position", "index_count"):
        df[c] = df[c].astype("Int64")
    return df


def _other_files(snap: StoreSnapshot, row: Any) -> None:
    mapped = {"commitlog", "consumequeue", "index"}
    for dirpath, dirnames, filenames in os.walk(snap.path):
        rel = os.path.relpath(dirpath, snap.path)
        top = rel.split(os.sep)[0]
        if top in mapped:
            if rel == top:
                # stray (non-numeric) files directly in a mapped dir are still listed
                for n in sorted(filenames):
                    full = os.path.join(dirpath, n)
                    if not n.isdigit():
                        row("other", full)
            dirnames[:] = [] if top != "consumequeue" else dirnames
            continue
        for n in sorted(filenames):
            full = os.path.join(dirpath, n)
            if rel == "." and n in ("checkpoint", "abort", "lock"):
                kind = n
            else:
                kind = "config" if top == "config" else "other"
            row(kind, full)
        dirnames.sort()


# ---------------------------------------------------------------------------------------- messages
def message_row(rec: MessageRecord, file: str = "") -> dict[str, Any]:
    return {
        "commit_log_offset": rec.commit_log_offset,
        "store_size": rec.store_size,
        "topic": rec.topic,
        "queue_id": rec.queue_id,
        "queue_offset": rec.queue_offset,
        "tags": rec.tags,
        "tags_code": rec.tags_code,
        "keys": rec.properties.get(PROPERTY_KEYS),  # as stored (None: no KEYS property)
        "uniq_key": rec.uniq_key,
        "msg_id": rec.msg_id,
        "flag": rec.flag,
        "sys_flag": rec.sys_flag,
        "born_timestamp": rec.born_timestamp,
        "store_timestamp": rec.store_timestamp,
        "born_host": f"{rec.born_host[0]}:{rec.born_host[1]}",
        "store_host": f"{rec.store_host[0]}:{rec.store_host[1]}",
        "body_length": len(rec.body),
        "body_crc": rec.body_crc,
        "crc_ok": rec.crc_ok,
        "file": file,
    }


def messages_frame(snap: StoreSnapshot, topic: str | None = None, start: int | None = None,
                   limit: int | None = None, *, queue_id: int | None = None,
                   damage: list[Damage] | None = None) -> pd.DataFrame:
    """One row per message in CommitLog order, from CommitLog offset ``start``.

    Damage ends the walk of a file: pass ``damage=[]`` to collect it instead of raising.
    """
    rows: list[dict[str, Any]] = []
    if limit is None or limit > 0:
        for file, _off, rec in snap.iter_records(start=start, damage=damage):
            if not isinstance(rec, MessageRecord):
                continue
            if (topic is not None and rec.topic != topic) or (queue_id is not None and rec.queue_id != queue_id):
                continue
            rows.append(message_row(rec, file))
            if limit is not None and len(rows) >= limit:
                break
    return pd.DataFrame(rows, columns=MESSAGE_COLUMNS)


# ---------------------------------------------------------------------------------------- consume queue
def consume_queue_frame(snap: StoreSnapshot, topic: str, queue_id: int, start: int | None = None,
                        limit: int | None = None) -> pd.DataFrame:
    """The queue's valid units (pre-blank units dropped), from queue offset ``start``."""
    q = snap.consume_queues.get((topic, queue_id))
    if q is None:
        from rmqlab.errors import ConfigError

        raise ConfigError(f"no consume queue {topic}/{queue_id} in {snap.path}")
    cols: dict[str, list[np.ndarray]] = {c: [] for c in CQ_COLUMNS}
    taken = 0
    for mf in q.files:
        units = q.valid_units(mf)
        first = mf.file_from_offset // CQ_STORE_UNIT_SIZE
        lo = max(0, (start or 0) - first)
        part = units[lo:]
        if limit is not None:
            part = part[: max(0, limit - taken)]
        keep = part["size"] != 0x7FFFFFFF  # pre-blank units fill a queue's first file
        pos = np.arange(lo, lo + len(part))[keep]
        cols["queue_offset"].append(first + pos)
        cols["commit_log_offset"].append(part["commit_log_offset"][keep].astype(np.int64))
        cols["size"].append(part["size"][keep].astype(np.int64))
        cols["tags_code"].append(part["tags_code"][keep].astype(np.int64))
        cols["position"].append(pos * CQ_STORE_UNIT_SIZE)
        cols["file"].append(np.full(len(pos), _rel(snap, mf.file_name), dtype=object))
        taken += int(keep.sum())
        if len(units) * CQ_STORE_UNIT_SIZE < mf.file_size or (limit is not None and taken >= limit):
            break
    data = {c: (np.concatenate(v) if v else np.empty(0, np.int64)) for c, v in cols.items()}
    df = pd.DataFrame(data, columns=CQ_COLUMNS)
    for c in CQ_COLUMNS:
        if c != "file":
            df[c] = df[c].astype(np.int64)
    return df


# ---------------------------------------------------------------------------------------- index
def index_items(f: IndexFile) -> np.ndarray:
    """Items 1 .. index_count-1 of an index file as a zero-copy structured array."""
    buf = f.mapped_file.buffer
    base = INDEX_HEADER_SIZE + f.hash_slot_num * HASH_SLOT_SIZE
    count = min(max(f.index_count - 1, 0), max(0, (len(buf) - base) // INDEX_SIZE - 1))
    return np.frombuffer(buf, INDEX_ITEM_DTYPE, count=count, offset=base + INDEX_SIZE) if count else \
        np.empty(0, INDEX_ITEM_DTYPE)


def _slots(f: IndexFile) -> np.ndarray:
    buf = f.mapped_file.buffer
    n = min(f.hash_slot_num, max(0, (len(buf) - INDEX_HEADER_SIZE) // HASH_SLOT_SIZE))
    return np.frombuffer(buf, ">i4", count=n, offset=INDEX_HEADER_SIZE)


def _chain_lengths(f: IndexFile) -> np.ndarray:
    """Items per slot: every item of a slot's chain has ``key_hash % slots == slot``."""
    items = index_items(f)
    return np.bincount(items["key_hash"].astype(np.int64) % f.hash_slot_num, minlength=f.hash_slot_num)


def index_files_frame(snap: StoreSnapshot) -> pd.DataFrame:
    rows = []
    for f in snap.index_files_opened():
        lengths = _chain_lengths(f)
        rows.append({
            "name": f.name, "path": _rel(snap, f.file_name), "size": f.mapped_file.mapped_length,
            "begin_timestamp": f.begin_timestamp, "end_timestamp": f.end_timestamp,
            "begin_phy_offset": f.begin_phy_offset, "end_phy_offset": f.end_phy_offset,
            "hash_slot_count": f.hash_slot_count, "index_count": f.index_count, "items": max(f.index_count - 1, 0),
            "hash_slot_num": f.hash_slot_num, "index_num": f.index_num,
            "used_slots": int(np.count_nonzero(_slots(f))), "max_chain_length": int(lengths.max(initial=0)),
        })
    return pd.DataFrame(rows, columns=INDEX_FILE_COLUMNS)


def index_slots_frame(snap: StoreSnapshot, file: str, *, used_only: bool = True) -> pd.DataFrame:
    """Per slot of one index file: the newest item number and the chain length."""
    f = snap.index_file(file)
    heads = _slots(f).astype(np.int64)
    lengths = _chain_lengths(f)[: len(heads)]
    slot = np.arange(len(heads), dtype=np.int64)
    if used_only:
        keep = heads != 0
        slot, heads, lengths = slot[keep], heads[keep], lengths[keep]
    return pd.DataFrame({"slot": slot, "item": heads, "chain_length": lengths.astype(np.int64)},
                        columns=SLOT_COLUMNS)


def record_key_hashes(rec: MessageRecord) -> set[int]:
    """Index key hashes a record is indexed under: ``topic#uniq_key`` and each ``topic#key``."""
    keys = list(rec.keys)
    if rec.uniq_key:
        keys.append(rec.uniq_key)
    return {index_key_hash(index_key(rec.topic, k)) for k in keys}


def record_has_key(rec: MessageRecord, topic: str, key: str) -> bool:
    return rec.topic == topic and (key in rec.keys or rec.uniq_key == key)


def index_chain_frame(snap: StoreSnapshot, topic: str, key: str, begin: int = 0,
                      end: int = 2**63 - 1) -> pd.DataFrame:
    """The slot chain of ``topic#key`` in every index file, newest file first, step by step.

    ``hash_matches & time_in_window`` is what the store's ``query_message`` returns;
    ``collision`` marks a returned item whose message does not carry the key (equal hash).
    """
    rows = []
    full = index_key(topic, key)
    for f in reversed(snap.index_files_opened()):
        for s in f.walk_chain(full, begin, end):
            rec = snap.read_record(s.phy_offset) if s.hash_matches else None
            has = rec is not None and record_has_key(rec, topic, key)
            rows.append({
                "file": f.name, "item": s.item, "position": item_position(f.hash_slot_num, s.item),
                "key_hash": s.key_hash, "phy_offset": s.phy_offset, "time_diff": s.time_diff,
                "prev_index": s.prev_index, "time": s.time, "hash_matches": s.hash_matches,
                "time_in_window": s.time_in_window, "stop": s.stop, "message_found": rec is not None,
                "message_topic": rec.topic if rec else None, "message_keys": " ".join(rec.keys) if rec else None,
                "message_has_key": has, "collision": bool(s.hash_matches and s.time_in_window and not has),
            })
    return pd.DataFrame(rows, columns=CHAIN_COLUMNS)


# ---------------------------------------------------------------------------------------- checkpoint
def checkpoint_frame(snap: StoreSnapshot) -> pd.DataFrame:
    """One row: the five stored values plus the derived ``min_timestamp``/``min_timestamp_index``
    (no rows when the checkpoint file is missing or short)."""
    cp = snap.checkpoint_values()
    cols = ["physic_msg_timestamp", "logics_msg_timestamp", "index_msg_timestamp", "master_flushed_offset",
            "confirm_phy_offset", "min_timestamp", "min_timestamp_index"]
    if cp is None:
        return pd.DataFrame([], columns=cols)
    return pd.DataFrame([{c: getattr(cp, c) for c in cols}], columns=cols)


# ---------------------------------------------------------------------------------------- topics
def topics_frame(snap: StoreSnapshot) -> pd.DataFrame:
    """Per topic/queue: the CQ's offsets, units and bytes, the CommitLog's count and bytes, and
    ``lag``: records in the log (not PREPARED/ROLLBACK) at or past the CQ's max offset.

    ``min_offset``/``max_offset`` are the CQ's (like ``get_min/max_offset_in_queue``, 0/0 when
    there is no CQ); ``min_queue_offset``/``max_queue_offset`` the records' own (-1 when none).
    """
    cq: dict[tuple[str, int], tuple[int, int, int, int, int]] = {}
    for key, q in snap.consume_queues.items():
        base, units = q.units()
        real = units[units["size"] != 0x7FFFFFFF]
        first = base + (len(units) - len(real))
        end_phy = int(real["commit_log_offset"][-1]) + int(real["size"][-1]) if len(real) else -1
        cq[key] = (first, base + len(units), len(real), int(real["size"].astype(np.int64).sum()), end_phy)
    log: dict[tuple[str, int], list[int]] = {}
    for _, _, rec in snap.iter_records(damage=[]):
        if not isinstance(rec, MessageRecord):
            continue
        k = (rec.topic, rec.queue_id)
        s = log.get(k)
        if s is None:
            s = log[k] = [0, rec.queue_offset, rec.queue_offset, 0, 0]
        s[0] += 1
        s[1] = min(s[1], rec.queue_offset)
        s[2] = max(s[2], rec.queue_offset)
        s[3] += rec.store_size
        tx = rec.transaction_type
        if tx not in (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE) and \
                rec.queue_offset >= cq.get(k, (0, 0))[1]:
            s[4] += 1
    rows = []
    for k in sorted(set(cq) | set(log)):
        lo, hi, n, b, end_phy = cq.get(k, (0, 0, 0, 0, -1))
        ln, lmin, lmax, lb, lag = log.get(k, [0, -1, -1, 0, 0])
        rows.append({"topic": k[0], "queue_id": k[1], "min_offset": lo, "max_offset": hi, "cq_units": n,
                     "cq_bytes": b, "cq_max_phy_offset": end_phy, "messages": ln, "bytes": lb,
                     "min_queue_offset": lmin, "max_queue_offset": lmax, "lag": lag})
    return pd.DataFrame(rows, columns=TOPIC_COLUMNS)
