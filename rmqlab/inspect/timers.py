"""5.x timer messages, read without touching the store: the wheel, the timerlog, the checkpoint,
and which timer messages are still pending (``snap.timers()``, ``rmqlab timers``).

A broker of 5.x stores a message with ``TIMER_DELIVER_MS``/``TIMER_DELAY_SEC`` in the commit log
under ``rmq_sys_wheel_timer`` queue 0 (``HookUtils.transformTimerMessage`` adds ``TIMER_OUT_MS``,
``REAL_TOPIC``, ``REAL_QID``). ``TimerMessageStore`` then reads that queue from
``lastTimerQueueOffset`` (config/timercheck) and appends a 52-byte unit per message to
``timerlog/``, chained per wheel slot through ``prevPos``; the slot in ``timerwheel`` keeps the
chain's first and last unit. Dequeue reads one slot per tick from ``lastReadTimeMs``, walks its
chain from ``lastPos`` back to ``prevPos == -1``, drops the messages a DELETE unit of the same
slot names (``TIMER_DEL_UNIQKEY``), puts ROLL units back into ``rmq_sys_wheel_timer`` (their due
time lies beyond the roll window) and the others into their real topic/queue.

So a timer message is pending when (stage ``"wheel"``) its unit hangs in the chain of a slot at
or after the checkpoint's read time, or (stage ``"queue"``) its ``rmq_sys_wheel_timer`` unit lies
at or after the checkpoint's queue offset (not yet in the wheel). What rmqlab cannot know from
the files: a broker restarted more than 7 days after it stopped skips ticks older than
``now - 7 days + 60 s`` (those messages are lost), and the precision (``timerPrecisionMs``,
default 1000) is configuration, not stored: pass ``precision_ms`` for another one.

Damage is reported, not raised, where a row can carry it (``problem``, ``df.attrs["damage"]``);
a wheel of the wrong length or a checkpoint shorter than its 56 bytes raises a
:class:`~rmqlab.errors.CorruptRecord` naming the file and offset, as RocketMQ refuses to start.
"""

from __future__ import annotations

import bisect
import mmap
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from rmqlab.codec.flags import (
    PROPERTY_KEYS,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TAGS,
    PROPERTY_TIMER_DEL_UNIQKEY,
    PROPERTY_TIMER_OUT_MS,
    PROPERTY_TIMER_ROLL_TIMES,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
)
from rmqlab.codec.java_hash import java_hash
from rmqlab.codec.names import infer_file_size, parse_offset_file_name
from rmqlab.codec.timer_checkpoint import TIMER_CHECKPOINT_DATA_SIZE, TimerCheckpoint
from rmqlab.codec.timer_log import (
    MAGIC_DELETE,
    MAGIC_ROLL,
    TIMER_LOG_FILE_SIZE,
    TIMER_LOG_UNIT_DTYPE,
    TIMER_TOPIC,
    UNIT_SIZE,
    scan_timer_log,
)
from rmqlab.codec.timer_wheel import (
    DEFAULT_TIMER_PRECISION_MS,
    SLOT_DTYPE,
    WHEEL_SLOTS,
    check_wheel_length,
    non_empty_slots,
)
from rmqlab.errors import ConfigError
from rmqlab.inspect.frames import int64_column

if TYPE_CHECKING:
    from rmqlab.codec.message import MessageRecord
    from rmqlab.inspect.snapshot import StoreSnapshot

__all__ = [
    "TIMER_CHECKPOINT_COLUMNS",
    "TIMER_COLUMNS",
    "TIMER_LOG_COLUMNS",
    "TIMER_WHEEL_COLUMNS",
    "timer_checkpoint_frame",
    "timer_checkpoint_values",
    "timer_log_frame",
    "timer_wheel_frame",
    "timers_frame",
]


TIMER_CHECKPOINT_COLUMNS = [
    "last_read_time_ms", "last_timer_log_flush_pos", "last_timer_queue_offset", "master_timer_queue_offset",
    "state_version", "timestamp", "counter",
]
TIMER_WHEEL_COLUMNS = ["slot", "time_ms", "first_pos", "last_pos", "num", "magic", "pending", "index_ok"]
TIMER_LOG_COLUMNS = [
    "timer_log_offset", "file", "position", "size", "prev_pos", "magic", "roll", "delete", "curr_write_time_ms",
    "delayed_time_ms", "offset_py", "size_py", "topic_hash",
]
TIMER_COLUMNS = [
    "stage", "kind", "slot_ms", "due_ms", "real_topic", "real_queue_id", "uniq_key", "keys", "tags",
    "commit_log_offset", "size_py", "timer_log_offset", "queue_offset", "enqueue_ms", "roll_times", "cancelled",
    "problem",
]
_NO_TIMER_FILES = ("no timer files (timerwheel, timerlog/, config/timercheck): not a 5.x store, "
                   "or timerWheelEnable=false")


# ---------------------------------------------------------------------------------------- files
def _read_only_map(path: str) -> mmap.mmap | None:
    """The whole file mapped ``ACCESS_READ`` (None for an empty file, which cannot be mapped)."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return None
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def _has_timer_files(snap: StoreSnapshot) -> bool:
    return any(os.path.exists(os.path.join(snap.path, p))
               for p in ("timerwheel", "timerlog", os.path.join("config", "timercheck")))


def timer_checkpoint_values(snap: StoreSnapshot) -> TimerCheckpoint | None:
    """``config/timercheck``'s values, None when the file is missing; ``TruncatedRecord`` naming
    the file when it is shorter than its 56 bytes."""
    path = os.path.join(snap.path, "config", "timercheck")
    if not os.path.isfile(path):
        return None
    with open(path, "rb") as f:
        raw = f.read(TIMER_CHECKPOINT_DATA_SIZE)
    return TimerCheckpoint.unpack(raw, file=os.path.join("config", "timercheck"))


def _wheel(snap: StoreSnapshot) -> tuple[np.ndarray, np.ndarray] | None:
    """``(slot indices, SLOT_DTYPE slots)`` of the non-empty slots, or None without a wheel file.
    ``CorruptRecord`` for a wheel of the wrong length (RocketMQ's start-up check)."""
    path = os.path.join(snap.path, "timerwheel")
    if not os.path.isfile(path):
        return None
    check_wheel_length(os.path.getsize(path), "timerwheel")
    mm = _read_only_map(path)
    if mm is None:
        return np.empty(0, np.int64), np.empty(0, SLOT_DTYPE)
    try:
        return non_empty_slots(mm)
    finally:
        mm.close()


@dataclass
class _LogFile:
    name: str
    base: int
    length: int
    units: np.ndarray  # valid units (a copy), TIMER_LOG_UNIT_DTYPE


@dataclass
class _TimerLog:
    files: list[_LogFile]
    file_size: int
    damage: list[dict[str, Any]]

    def locate(self, pos: int) -> tuple[_LogFile, int] | str:
        """``(file, unit number)`` of the unit at timerlog offset ``pos``, or why there is none."""
        i = bisect.bisect_right([f.base for f in self.files], pos) - 1
        if i < 0 or pos >= self.files[i].base + self.file_size:
            return f"timerlog has no file for offset {pos} (deleted or missing)"
        f = self.files[i]
        rel = pos - f.base
        if rel % UNIT_SIZE:
            return f"timerlog offset {pos} is not at a unit boundary of timerlog/{f.name}"
        k = rel // UNIT_SIZE
        if k >= len(f.units):
            end = f.base + len(f.units) * UNIT_SIZE
            return f"timerlog offset {pos} lies past the valid units of timerlog/{f.name} (they end at {end})"
        return f, k


def _timer_log(snap: StoreSnapshot, file_size: int | None) -> _TimerLog | None:
    """Every timerlog file's valid units (copied, the maps closed), and where a file is damaged:
    a length other than the file size (RocketMQ's load refuses it), a bad unit, a torn unit."""
    root = os.path.join(snap.path, "timerlog")
    if not os.path.isdir(root):
        return None
    names = sorted(n for n in os.listdir(root)
                   if parse_offset_file_name(n) is not None and os.path.isfile(os.path.join(root, n)))
    sizes = [os.path.getsize(os.path.join(root, n)) for n in names]
    size = file_size or infer_file_size([(names, sizes)], TIMER_LOG_FILE_SIZE)
    out = _TimerLog([], size, [])
    for name, length in zip(names, sizes, strict=True):
        base = parse_offset_file_name(name) or 0
        rel = f"timerlog/{name}"
        if length != size:
            out.damage.append({"file": rel, "offset": length, "reason": "length_mismatch",
                               "detail": f"{length} bytes, the other files have {size}"})
        mm = _read_only_map(os.path.join(root, name))
        if mm is None:
            out.files.append(_LogFile(name, base, 0, np.empty(0, TIMER_LOG_UNIT_DTYPE)))
            continue
        try:
            scan = scan_timer_log(mm)
            units, end, stop, detail = scan.units.copy(), scan.end, scan.stop, scan.detail
            del scan
        finally:
            mm.close()
        if stop in ("bad_unit", "truncated"):
            out.damage.append({"file": rel, "offset": end, "reason": stop, "detail": detail})
        out.files.append(_LogFile(name, base, length, units))
    return out


def _empty(columns: list[str], note: str) -> pd.DataFrame:
    df = pd.DataFrame([], columns=columns)
    df.attrs.update(note=note, damage=[])
    return df


# ---------------------------------------------------------------------------------------- frames
def timer_checkpoint_frame(snap: StoreSnapshot) -> pd.DataFrame:
    """One row: the seven values of ``config/timercheck`` (no rows, and a note, without it)."""
    cp = timer_checkpoint_values(snap)
    if cp is None:
        return _empty(TIMER_CHECKPOINT_COLUMNS, "no config/timercheck" if _has_timer_files(snap) else _NO_TIMER_FILES)
    df = pd.DataFrame([{c: getattr(cp, c) for c in TIMER_CHECKPOINT_COLUMNS}], columns=TIMER_CHECKPOINT_COLUMNS)
    df.attrs.update(note="", damage=[])
    return df


def _check_precision(precision_ms: int) -> None:
    """``timerPrecisionMs`` is a Java int of at least 1: anything else is no broker's setting."""
    if not 1 <= precision_ms <= 2**31 - 1:
        raise ConfigError(f"precision_ms (timerPrecisionMs) must be 1..{2**31 - 1}, not {precision_ms}")


def timer_wheel_frame(snap: StoreSnapshot, precision_ms: int = DEFAULT_TIMER_PRECISION_MS) -> pd.DataFrame:
    """The wheel's non-empty slots in slot order: ``time_ms`` (the tick the slot was last written
    for, times ``precision_ms``), its chain's ``first_pos``/``last_pos`` in the timerlog, ``num``,
    ``magic``; ``pending`` when its time is at or after the checkpoint's read time (dequeue has not
    reached it: slots are never cleared, so older ones are history); ``index_ok`` when the slot
    sits where its time puts it (``time % 1,209,600``) -- a slot that does not is never read."""
    _check_precision(precision_ms)
    wheel = _wheel(snap)
    if wheel is None:
        return _empty(TIMER_WHEEL_COLUMNS, _NO_TIMER_FILES)
    idx, slots = wheel
    cp = timer_checkpoint_values(snap)
    read_ms = cp.last_read_time_ms if cp else 0
    time = slots["time"].astype(np.int64)
    df = pd.DataFrame({
        "slot": idx, "time_ms": time * precision_ms, "first_pos": slots["first_pos"].astype(np.int64),
        "last_pos": slots["last_pos"].astype(np.int64), "num": slots["num"].astype(np.int32),
        "magic": slots["magic"].astype(np.int32), "pending": time * precision_ms >= read_ms,
        "index_ok": (time % WHEEL_SLOTS) == idx,
    }, columns=TIMER_WHEEL_COLUMNS)
    df.attrs.update(note="" if cp else "no config/timercheck: every slot counted as pending", damage=[])
    return df


def timer_log_frame(snap: StoreSnapshot, file_size: int | None = None) -> pd.DataFrame:
    """Every valid timerlog unit, oldest first, with its absolute ``timer_log_offset``, file and
    position, the magic decoded (``roll``, ``delete``), write and delayed time (absolute ms), the
    commit-log record it points at (``offset_py``, ``size_py``) and ``topic_hash`` (Java hash of
    the real topic). ``attrs["damage"]``: files of the wrong length, bad or torn units (each walk
    stops there, as RocketMQ's recovery would). ``file_size`` is inferred from the files unless given."""
    log = _timer_log(snap, file_size)
    if log is None:
        return _empty(TIMER_LOG_COLUMNS, _NO_TIMER_FILES)
    parts = []
    for f in log.files:
        u = f.units
        n = len(u)
        pos = np.arange(n, dtype=np.int64) * UNIT_SIZE
        write = u["curr_write_time_ms"].astype(np.int64)
        magic = u["magic"].astype(np.int32)
        parts.append(pd.DataFrame({
            "timer_log_offset": f.base + pos, "file": np.full(n, f.name, dtype=object), "position": pos,
            "size": u["size"].astype(np.int32), "prev_pos": u["prev_pos"].astype(np.int64), "magic": magic,
            "roll": (magic & MAGIC_ROLL) != 0, "delete": (magic & MAGIC_DELETE) != 0, "curr_write_time_ms": write,
            "delayed_time_ms": write + u["delay_ms"].astype(np.int64), "offset_py": u["offset_py"].astype(np.int64),
            "size_py": u["size_py"].astype(np.int32), "topic_hash": u["topic_hash"].astype(np.int32),
        }, columns=TIMER_LOG_COLUMNS))
    df = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame([], columns=TIMER_LOG_COLUMNS)
    df.attrs.update(note="", damage=log.damage, file_size=log.file_size)
    return df


# ---------------------------------------------------------------------------------------- pending
def _kind(magic: int) -> str:
    """What dequeue does with a unit: ROLL wins over DELETE (``needDelete && !needRoll``)."""
    if magic & MAGIC_ROLL:
        return "roll"
    return "delete" if magic & MAGIC_DELETE else "message"


def _int_or_na(value: str | None) -> Any:
    try:
        return int(value) if value is not None else pd.NA
    except ValueError:
        return pd.NA


def _record_row(snap: StoreSnapshot, offset: int, size: int, topic_hash: int | None) -> tuple[dict[str, Any], str]:
    """The columns a commit-log record gives a timer row, and what is wrong with it ("" if nothing)."""
    rec: MessageRecord | None = snap.read_record(offset)
    row: dict[str, Any] = {"real_topic": None, "real_queue_id": pd.NA, "uniq_key": None, "keys": None, "tags": None,
                           "roll_times": pd.NA, "_del": None, "_out": pd.NA}
    if rec is None:
        return row, f"no readable message at commit log offset {offset} (missing, damaged or deleted)"
    p = rec.properties
    row.update(real_topic=p.get(PROPERTY_REAL_TOPIC), real_queue_id=_int_or_na(p.get(PROPERTY_REAL_QUEUE_ID)),
               uniq_key=p.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX), keys=p.get(PROPERTY_KEYS),
               tags=p.get(PROPERTY_TAGS), roll_times=_int_or_na(p.get(PROPERTY_TIMER_ROLL_TIMES)),
               _del=p.get(PROPERTY_TIMER_DEL_UNIQKEY), _out=_int_or_na(p.get(PROPERTY_TIMER_OUT_MS)))
    problems = []
    if rec.topic != TIMER_TOPIC:
        problems.append(f"the record at {offset} is in topic {rec.topic!r}, not {TIMER_TOPIC}")
    if size != rec.store_size:
        problems.append(f"size {size} but the record at {offset} is {rec.store_size} bytes")
    if row["real_topic"] is None:
        problems.append("no REAL_TOPIC property")
    elif topic_hash is not None and java_hash(row["real_topic"]) != topic_hash:
        problems.append(f"topic hash {topic_hash} is not REAL_TOPIC's ({java_hash(row['real_topic'])})")
    return row, "; ".join(problems)


def _wheel_rows(snap: StoreSnapshot, log: _TimerLog, idx: np.ndarray, slots: np.ndarray, read_ms: int,
                precision_ms: int, damage: list[dict[str, Any]], limit: int | None) -> list[dict[str, Any]]:
    """Walk every pending slot's chain (``lastPos`` back through ``prevPos``), oldest slot first,
    each chain in delivery order (first unit first); mark messages a DELETE unit of the slot names.
    Stops after the slot that reaches ``limit`` rows (a slot is read whole: its DELETEs matter)."""
    rows: list[dict[str, Any]] = []
    time = slots["time"].astype(np.int64)
    order = np.argsort(time, kind="stable")
    for j in order.tolist():
        slot_ms = int(time[j]) * precision_ms
        if slot_ms < read_ms:
            continue
        if int(time[j]) % WHEEL_SLOTS != int(idx[j]):
            damage.append({"file": "timerwheel", "offset": int(idx[j]) * 32, "reason": "bad_field",
                           "detail": f"slot {int(idx[j])} holds tick {int(time[j])}, which belongs in slot "
                                     f"{int(time[j]) % WHEEL_SLOTS}: never read"})
            continue
        chain: list[dict[str, Any]] = []
        pos, seen = int(slots["last_pos"][j]), set()
        while pos != -1:
            if pos in seen:
                chain.append(_problem_row(slot_ms, pos, f"the chain of slot {int(idx[j])} loops back to {pos}"))
                break
            seen.add(pos)
            at = log.locate(pos)
            if isinstance(at, str):
                chain.append(_problem_row(slot_ms, pos, at))
                break
            f, k = at
            u = f.units[k]
            write, magic = int(u["curr_write_time_ms"]), int(u["magic"])
            rec, problem = _record_row(snap, int(u["offset_py"]), int(u["size_py"]), int(u["topic_hash"]))
            delayed = write + int(u["delay_ms"])
            if delayed // precision_ms != int(time[j]):
                problem = "; ".join(filter(None, [problem, f"unit due at {delayed} is not in this slot's tick"]))
            kind = _kind(magic)
            chain.append({"stage": "wheel", "kind": kind, "slot_ms": slot_ms,
                          "due_ms": rec["_out"] if kind == "roll" and rec["_out"] is not pd.NA else delayed,
                          "commit_log_offset": int(u["offset_py"]), "size_py": int(u["size_py"]),
                          "timer_log_offset": pos, "queue_offset": pd.NA, "enqueue_ms": write, "problem": problem,
                          **rec})
            pos = int(u["prev_pos"])
        chain.reverse()
        _mark_cancelled(chain)
        rows.extend(chain)
        if limit is not None and len(rows) >= limit:
            break
    return rows


def _problem_row(slot_ms: int, pos: int, problem: str) -> dict[str, Any]:
    return {"stage": "wheel", "kind": None, "slot_ms": slot_ms, "due_ms": pd.NA, "real_topic": None,
            "real_queue_id": pd.NA, "uniq_key": None, "keys": None, "tags": None, "commit_log_offset": pd.NA,
            "size_py": pd.NA, "timer_log_offset": pos, "queue_offset": pd.NA, "enqueue_ms": pd.NA,
            "roll_times": pd.NA, "problem": problem}


def _mark_cancelled(chain: list[dict[str, Any]]) -> None:
    """A slot's DELETE units (not ROLL) cancel the messages of the same slot whose UNIQ_KEY their
    ``TIMER_DEL_UNIQKEY`` names -- as the bare key (5.x up to 5.3) or as ``REAL_TOPIC+UNIQ_KEY``
    (newer brokers' ``buildDeleteKey``)."""
    keys = {r["_del"] for r in chain if r.get("kind") == "delete" and r.get("_del")}
    for r in chain:
        uk = r.get("uniq_key")
        r["cancelled"] = bool(r.get("kind") != "delete" and uk and (uk in keys or f"{r['real_topic']}+{uk}" in keys))


def _queue_rows(snap: StoreSnapshot, start: int, seen: set[int], limit: int | None) -> list[dict[str, Any]]:
    """``rmq_sys_wheel_timer`` queue 0 units at or after ``start`` (at most ``limit``): not yet in the wheel."""
    q = snap.consume_queues.get((TIMER_TOPIC, 0))
    if q is None:
        return []
    base, units = q.units()
    rows = []
    for k in range(max(0, start - base), len(units)):
        if limit is not None and len(rows) >= limit:
            break
        off, size = int(units["commit_log_offset"][k]), int(units["size"][k])
        if size == 0x7FFFFFFF or off in seen:  # pre-blank filler; already listed from the wheel
            continue
        rec, problem = _record_row(snap, off, size, None)
        kind = "delete" if rec["_del"] else "message"
        rows.append({"stage": "queue", "kind": kind, "slot_ms": pd.NA, "due_ms": rec["_out"],
                     "commit_log_offset": off, "size_py": size, "timer_log_offset": pd.NA, "queue_offset": base + k,
                     "enqueue_ms": pd.NA, "cancelled": False, "problem": problem, **rec})
    return rows


def timers_frame(snap: StoreSnapshot, precision_ms: int = DEFAULT_TIMER_PRECISION_MS,
                 file_size: int | None = None, limit: int | None = None) -> pd.DataFrame:
    """The timer messages still pending, in the order the broker will handle them.

    Stage ``wheel``: units in the chains of slots at or after ``lastReadTimeMs`` (oldest slot
    first; each chain first unit first); stage ``queue``: ``rmq_sys_wheel_timer`` units at or after
    ``lastTimerQueueOffset``, not yet in the wheel. ``kind``: ``message``, ``delete`` (a cancel
    request) or ``roll`` (parked in a slot inside the roll window; ``due_ms`` is then its
    ``TIMER_OUT_MS``). ``slot_ms``: when dequeue reaches the slot; ``due_ms``: the delivery time;
    real topic/queue, UNIQ_KEY, KEYS, TAGS from the ``rmq_sys_wheel_timer`` record; ``cancelled``:
    a DELETE unit of the same slot names it. A unit whose record or timerlog unit is missing or
    damaged is a row with ``problem`` set. ``attrs``: ``note``, ``damage``, ``read_time_ms``.
    """
    _check_precision(precision_ms)
    wheel = _wheel(snap)
    log = _timer_log(snap, file_size)
    cp = timer_checkpoint_values(snap)
    if wheel is None and log is None and cp is None:
        return _empty(TIMER_COLUMNS, _NO_TIMER_FILES)
    notes = []
    if cp is None:
        notes.append("no config/timercheck: read time and queue offset taken as 0")
    read_ms = cp.last_read_time_ms if cp else 0
    damage: list[dict[str, Any]] = list(log.damage) if log else []
    rows: list[dict[str, Any]] = []
    if wheel is None:
        notes.append("no timerwheel file")
    else:
        rows = _wheel_rows(snap, log or _TimerLog([], TIMER_LOG_FILE_SIZE, []), wheel[0], wheel[1], read_ms,
                           precision_ms, damage, limit)
    if limit is None or len(rows) < limit:
        seen = {r["commit_log_offset"] for r in rows if r["commit_log_offset"] is not pd.NA}
        rows.extend(_queue_rows(snap, cp.last_timer_queue_offset if cp else 0, seen,
                                None if limit is None else limit - len(rows)))
    if limit is not None:
        rows = rows[:limit]
    df = pd.DataFrame(rows, columns=TIMER_COLUMNS)
    for col in ("slot_ms", "due_ms", "real_queue_id", "commit_log_offset", "size_py", "timer_log_offset",
                "queue_offset", "enqueue_ms", "roll_times"):
        df[col] = int64_column([r.get(col) for r in rows])
    for col in ("kind", "real_topic", "uniq_key", "keys", "tags"):  # missing strings are None, not NaN
        df[col] = df[col].astype(object).where(df[col].notna(), None)
    df["cancelled"] = df["cancelled"].eq(True)
    df["problem"] = df["problem"].fillna("")
    df.attrs.update(note="; ".join(notes), damage=damage, read_time_ms=read_ms)
    return df
