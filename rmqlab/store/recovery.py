"""Recovery at load (spec §6): decide where the CommitLog's valid data ends, then cut there.

``plan_recovery`` is pure: given the CommitLog files' bytes, the consume queues' max physical
offset and the checkpoint, it returns a ``RecoveryPlan`` saying which file the walk starts from
and why, every decision on the way, where it stopped and why, and what will be truncated or
deleted. ``apply_recovery`` carries a plan out on a live store. The CLI's ``recover --dry-run``,
the widgets and the engine all use the same plan, so what is explained is exactly what is done.

Normal recovery (clean shutdown): 4.9.8 starts at the third-from-last file, 5.3.3 at the last
file starting at or below the consume queues' max physical offset. Abnormal recovery (``abort``
present): the newest file whose first record's store time is <= the checkpoint's min timestamp
(index-safe: min timestamp index), every record from there re-dispatched to CQ and index.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

from rmqlab.codec import flags
from rmqlab.codec.checkpoint import Checkpoint
from rmqlab.codec.message import MessageRecord, decode_message, store_timestamp_position
from rmqlab.codec.prop_crc import MISSING, OK, ZERO, check_prop_crc, java_expected_crc, record_crc
from rmqlab.codec.walk import DispatchRequest, batch_fields, check_message_and_return_size
from rmqlab.config import MessageStoreConfig
from rmqlab.errors import CorruptRecord
from rmqlab.events import RecoveryStep
from rmqlab.store.fast_walk import FastChecker

__all__ = [
    "CommitLogFileView",
    "RecoveryPlan",
    "StartCandidate",
    "note_ext_min_correction",
    "note_ext_recovery",
    "plan_recovery",
]

_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")


@dataclass(frozen=True)
class CommitLogFileView:
    """What recovery needs of one CommitLog file: its name, start offset and bytes."""

    name: str
    file_from_offset: int
    buffer: memoryview | bytes


@dataclass(frozen=True)
class StartCandidate:
    """Abnormal recovery's test of one file's first record (newest file first)."""

    file: str
    magic_ok: bool
    store_timestamp: int
    threshold: int
    matched: bool
    reason: str


@dataclass
class RecoveryPlan:
    mode: str  # "normal" | "abnormal" | "empty"
    rocketmq_version: str
    max_phy_offset_of_consume_queue: int
    checkpoint: Checkpoint
    start_file: str | None = None
    start_index: int = 0
    start_reason: str = ""
    candidates: list[StartCandidate] = field(default_factory=list)
    records_checked: int = 0
    bytes_checked: int = 0
    process_offset: int = 0  # end of the valid data: the new max physical offset
    last_valid_offset: int = -1  # start offset of the last valid record (5.x confirm offset)
    stop_file: str | None = None
    stop_offset: int = 0
    stop_reason: str = ""
    dispatch_from: int | None = None  # re-dispatch valid records from here (None: none)
    dispatch_above: int = -1  # 5.x normal recovery: only records past the CQ max offset
    files_to_delete: list[str] = field(default_factory=list)
    truncate_file: str | None = None
    truncate_position: int | None = None
    truncate_consume_queues: bool = False
    destroy_consume_queues: bool = False
    steps: list[RecoveryStep] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: the walk checked __CRC32# instead of the body CRC (5.x force_verify_prop_crc with check_crc_on_recover)
    prop_crc: bool = False
    #: the walk stopped (4.9.8 rules) at a well-formed V2 record, which only 5.x writes: the store
    #: was written by 5.x, and MessageStore.open refuses rather than cut the log there
    written_by_v5: bool = False
    #: the walk's accepted record positions per file (re-dispatch reuses them; not part of the plan)
    accepted: FastChecker | None = field(default=None, repr=False, compare=False)

    def step(self, phase: str, file: str, offset: int, decision: str, reason: str = "") -> None:
        self.steps.append(RecoveryStep(phase, file, offset, decision, reason))

    def to_dict(self) -> dict[str, object]:
        return {
            "mode": self.mode,
            "rocketmq_version": self.rocketmq_version,
            "max_phy_offset_of_consume_queue": self.max_phy_offset_of_consume_queue,
            "checkpoint": {
                "physic_msg_timestamp": self.checkpoint.physic_msg_timestamp,
                "logics_msg_timestamp": self.checkpoint.logics_msg_timestamp,
                "index_msg_timestamp": self.checkpoint.index_msg_timestamp,
                "min_timestamp": self.checkpoint.min_timestamp,
                "min_timestamp_index": self.checkpoint.min_timestamp_index,
            },
            "start_file": self.start_file,
            "start_reason": self.start_reason,
            "candidates": [c.__dict__ for c in self.candidates],
            "records_checked": self.records_checked,
            "bytes_checked": self.bytes_checked,
            "process_offset": self.process_offset,
            "last_valid_offset": self.last_valid_offset,
            "stop_file": self.stop_file,
            "stop_offset": self.stop_offset,
            "stop_reason": self.stop_reason,
            "dispatch_from": self.dispatch_from,
            "files_to_delete": list(self.files_to_delete),
            "truncate_file": self.truncate_file,
            "truncate_position": self.truncate_position,
            "truncate_consume_queues": self.truncate_consume_queues,
            "destroy_consume_queues": self.destroy_consume_queues,
            "steps": [s.__dict__ if hasattr(s, "__dict__") else _step_dict(s) for s in self.steps],
            "notes": list(self.notes),
        }


def _step_dict(s: RecoveryStep) -> dict[str, object]:
    return {"phase": s.phase, "file": s.file, "offset": s.offset, "decision": s.decision, "reason": s.reason}


def _first_record_candidate(
    view: CommitLogFileView, checkpoint: Checkpoint, config: MessageStoreConfig
) -> StartCandidate:
    """``isMappedFileMatchedRecover`` (4.9.8 / 5.3.3, file-based CQ)."""
    buf = view.buffer
    index_safe = config.message_index_enable and config.message_index_safe
    threshold = checkpoint.min_timestamp_index if index_safe else checkpoint.min_timestamp
    if len(buf) < 8:
        return StartCandidate(view.name, False, 0, threshold, False, "file shorter than a record header")
    magic = _INT.unpack_from(buf, 4)[0]
    magic_ok = magic == flags.MESSAGE_MAGIC_CODE_V1 or (
        not config.is_v4 and magic == flags.MESSAGE_MAGIC_CODE_V2
    )
    if not magic_ok:
        return StartCandidate(view.name, False, 0, threshold, False, f"first record magic {magic & 0xFFFFFFFF:#010x}")
    sys_flag = _INT.unpack_from(buf, 36)[0]
    ts = _LONG.unpack_from(buf, store_timestamp_position(sys_flag))[0]
    if ts == 0:
        return StartCandidate(view.name, True, 0, threshold, False, "first record store timestamp is 0")
    which = "min_timestamp_index" if index_safe else "min_timestamp"
    if ts <= threshold:
        return StartCandidate(view.name, True, ts, threshold, True,
                              f"store time {ts} <= checkpoint {which} {threshold}")
    return StartCandidate(view.name, True, ts, threshold, False, f"store time {ts} > checkpoint {which} {threshold}")


def _normal_start(files: Sequence[CommitLogFileView], cq_max: int, plan: RecoveryPlan, v4: bool) -> int:
    n = len(files)
    if v4:
        plan.start_reason = "4.9.8 normal recovery starts at the third-from-last file"
        return max(0, n - 3)
    for i in range(n - 1, 0, -1):
        if files[i].file_from_offset <= cq_max:
            plan.start_reason = f"last file starting at or below the consume queues' max offset {cq_max}"
            return i
    plan.start_reason = "no later file starts below the consume queues' max offset: first file"
    return 0


def index_end_past_log(plan: RecoveryPlan, name: str, end_phy_offset: int) -> bool:
    """Note on ``plan`` that the last index file ``name`` ends past the recovered log, and that
    its end is cut back to it (True), or nothing when it does not (False).

    RocketMQ's ``IndexService.buildIndex`` skips a record below the last file's
    ``endPhyOffset`` as already indexed; after recovery truncates the CommitLog below that end
    (damage, a lost tail), the messages written next land below it and stay out of the index
    until the log passes it. rmqlab cuts the end back to the new log end instead.
    """
    end = plan.process_offset
    if plan.mode == "empty" or end_phy_offset <= end:
        return False
    reason = (f"index file {name} ends at phy offset {end_phy_offset}, past the recovered log end {end}: its "
              f"end is cut back to {end} so messages written from there on are indexed (RocketMQ "
              f"{plan.rocketmq_version} keeps {end_phy_offset} and leaves every message below it out of the index)")
    plan.step("index", name, end_phy_offset, f"cut end_phy_offset to {end}", reason)
    plan.notes.append(reason)
    return True


def note_units_past_log(plan: RecoveryPlan, cuts: Sequence[RecoveryStep]) -> None:
    """Add the consume queue units cut for ending past the log (``ConsumeQueue.
    truncate_dirty_logic_files``) to ``plan``'s steps and notes, naming its RocketMQ version."""
    for step in cuts:
        reason = step.reason.replace("4.9.8/5.3.3", plan.rocketmq_version)
        plan.step(step.phase, step.file, step.offset, step.decision, reason)
        plan.notes.append(reason)


def note_ext_recovery(plan: RecoveryPlan, steps: Sequence[RecoveryStep], *, ext_enabled: bool,
                      ext_files_present: bool = False) -> None:
    """Add what consume queue recovery did to the ConsumeQueueExt runs (``steps``: each run's
    walk from its first file, then its truncation by the last address the recovered queue
    holds) to the front of ``plan.steps`` -- it runs before the CommitLog walk -- and say in the
    notes what the CommitLog's cut does not do to them.

    Only consume queue recovery trims an ext run. When the CommitLog is cut below the queues'
    max offset, their units past the log are dropped but the ext units those held stay:
    RocketMQ 4.9.8/5.3.3 leave ``truncateDirtyLogicFiles`` by ``return`` before its
    ``truncateByMaxAddress`` call (apache/rocketmq#10755), and rmqlab's engine does the same.
    """
    if not ext_enabled:
        if ext_files_present:
            plan.notes.append("consumequeue_ext/ holds files but enable_consume_queue_ext is off: opening the "
                              "store this way leaves them alone (RocketMQ creates no ext run), and the consume "
                              "queues' ext addresses resolve to nothing (tag filters pass every message)")
        return
    plan.steps[:0] = steps
    # (truncate_consume_queues holds on a clean store too, where the queues end exactly at the log:
    # units are cut only when they go past it)
    if plan.truncate_consume_queues and plan.max_phy_offset_of_consume_queue > plan.process_offset:
        plan.notes.append(
            f"the consume queues are cut at {plan.process_offset:,} (units past the recovered log), but their "
            f"ConsumeQueueExt runs are not: RocketMQ {plan.rocketmq_version} returns from truncateDirtyLogicFiles "
            "before it reaches truncateByMaxAddress (apache/rocketmq#10755), so the ext units of the units cut "
            "stay, never referenced, and re-dispatched records get new ones after them")


def note_ext_min_correction(plan: RecoveryPlan, steps: Sequence[RecoveryStep]) -> None:
    """Add the ext files the queues' min offset correction deletes (``recoverTopicQueueTable``
    -> ``correctMinOffset`` -> ``truncateByMinAddress``, the last thing loading does) to the end
    of ``plan.steps``, with a note: files of a run older than the CommitLog's first file go."""
    if not steps:
        return
    plan.steps.extend(steps)
    plan.notes.append(
        f"{len(steps)} ConsumeQueueExt file(s) end before the ext address of their queue's first unit at or past "
        "the CommitLog's min offset: loading deletes them (correctMinOffset -> truncateByMinAddress)")


def plan_recovery(
    files: Sequence[CommitLogFileView],
    file_size: int,
    *,
    last_exit_ok: bool,
    max_phy_offset_of_consume_queue: int,
    checkpoint: Checkpoint,
    config: MessageStoreConfig,
    fast: bool = True,
) -> RecoveryPlan:
    """Compute what recovery will do, without changing anything (``fast=False``: check every
    record with the per-record code only; the plan is the same)."""
    v4 = config.is_v4
    plan = RecoveryPlan(
        mode="normal" if last_exit_ok else "abnormal",
        rocketmq_version=config.rocketmq_version,
        max_phy_offset_of_consume_queue=max_phy_offset_of_consume_queue,
        checkpoint=checkpoint,
    )
    if not files:
        plan.mode = "empty"
        plan.destroy_consume_queues = True
        plan.step("start_file", "", 0, "no commit log files", "every consume queue is destroyed")
        return plan

    if last_exit_ok:
        index = _normal_start(files, max_phy_offset_of_consume_queue, plan, v4)
    else:
        index = -1
        for i in range(len(files) - 1, -1, -1):
            cand = _first_record_candidate(files[i], checkpoint, config)
            plan.candidates.append(cand)
            plan.step("start_file", cand.file, files[i].file_from_offset,
                      "start here" if cand.matched else "skip", cand.reason)
            if cand.matched:
                index = i
                break
        if index < 0:
            index = 0
            plan.start_reason = "no file's first record is old enough: start at the first file"
        else:
            plan.start_reason = plan.candidates[-1].reason
        plan.dispatch_from = files[index].file_from_offset
    plan.start_index = index
    plan.start_file = files[index].name
    plan.step("start_file", files[index].name, files[index].file_from_offset, "walk from here", plan.start_reason)
    if last_exit_ok and not v4:
        plan.dispatch_above = max_phy_offset_of_consume_queue

    _walk(files, index, plan, config, fast=fast)

    offset = plan.process_offset
    for view in files:
        if view.file_from_offset + file_size > offset:
            if offset >= view.file_from_offset:
                plan.truncate_file = view.name
                plan.truncate_position = offset - view.file_from_offset
            else:
                plan.files_to_delete.append(view.name)
                plan.step("truncate", view.name, view.file_from_offset, "delete file",
                          "starts after the end of the valid data")
    if plan.truncate_file is not None:
        plan.step("truncate", plan.truncate_file, offset, f"set positions to {plan.truncate_position}",
                  "end of the valid data")
    plan.truncate_consume_queues = max_phy_offset_of_consume_queue >= offset
    if plan.truncate_consume_queues:
        plan.step("consume_queue", "", offset, "truncate consume queues",
                  f"their max physical offset {max_phy_offset_of_consume_queue} >= {offset}")
    return plan


def _walk(files: Sequence[CommitLogFileView], index: int, plan: RecoveryPlan, config: MessageStoreConfig,
          *, fast: bool = True) -> None:
    """The record walk shared by both modes: stops at the first record that fails a check.

    With ``fast`` (the default) a :class:`~rmqlab.store.fast_walk.FastChecker` certifies runs of
    records in bulk (numpy field checks, ``codec.crc.crc32`` (isal's) over the body); every record it does not
    certify -- blanks, the end of the data, damage, anything that produces a note -- goes through
    ``check_message_and_return_size`` and ``_rmqlab_checks`` exactly as with ``fast=False``, so
    the plan (counters, offsets, steps, notes, stop reason) is the same either way
    (``tests/store/test_fast_walk.py`` compares them on random and damaged stores).
    """
    check_crc = config.check_crc_on_recover
    version = config.rocketmq_version
    # 5.x forceVerifyPropCRC: with checkCRCOnRecover, __CRC32# is checked instead of the body CRC
    prop_crc = check_crc and config.force_verify_prop_crc and version != "4.9.8"
    plan.prop_crc = prop_crc
    fc = FastChecker(version != "4.9.8", check_crc, keep_positions=True, prop_crc=prop_crc) if fast else None
    plan.accepted = fc
    view = files[index]
    buf = view.buffer
    pos = 0
    while True:
        if fc is not None:
            pos, n, nbytes, last = fc.advance(buf, pos, view.file_from_offset)
            if n:
                plan.records_checked += n
                plan.bytes_checked += nbytes
                plan.last_valid_offset = view.file_from_offset + last
        if len(buf) - pos < 8 and pos < len(buf):
            size, ok = -1, False
            reason = "fewer than 8 bytes left in the file"
        elif pos >= len(buf):
            size, ok, reason = -1, False, "end of a short file"
        else:
            size, ok, _req = check_message_and_return_size(buf, pos, check_crc=check_crc, read_body=True,
                                                           rocketmq_version=version,
                                                           force_verify_prop_crc=prop_crc)
            reason = ""
        if ok and size > 0:
            reason = _rmqlab_checks(buf, pos, size, _req, view.file_from_offset + pos, check_crc, plan)
            if not reason:
                plan.last_valid_offset = view.file_from_offset + pos
                plan.records_checked += 1
                plan.bytes_checked += size
                if fc is not None:
                    fc.slow_accepted(view.file_from_offset, pos)
                pos += size
                continue
        if ok and size == 0:
            plan.step("record", view.name, view.file_from_offset + pos, "blank record: next file", "end of file")
            index += 1
            if index >= len(files):
                plan.stop_file, plan.stop_offset = view.name, view.file_from_offset + pos
                plan.stop_reason = "blank record in the last file"
                pos = len(buf) if len(buf) else pos
                # RocketMQ: processOffset stays at this file's start + position of the blank
                break
            view = files[index]
            buf = view.buffer
            pos = 0
            continue
        plan.stop_file, plan.stop_offset = view.name, view.file_from_offset + pos
        plan.stop_reason = reason or _why_bad(buf, pos, size, check_crc, version, prop_crc)
        plan.step("record", view.name, view.file_from_offset + pos, "stop", plan.stop_reason)
        if version.startswith("4.") and _well_formed_v2(buf, pos, check_crc):
            plan.written_by_v5 = True
            plan.notes.insert(0, written_by_v5_text(view.name, view.file_from_offset + pos))
        break
    if plan.stop_reason == "blank record in the last file":
        plan.process_offset = plan.stop_offset
    else:
        plan.process_offset = view.file_from_offset + pos


def _well_formed_v2(buf: memoryview | bytes, pos: int, check_crc: bool) -> bool:
    """Whether the record at ``pos`` has the V2 magic and passes every check of 5.x's walk."""
    if pos + 8 > len(buf) or _INT.unpack_from(buf, pos + 4)[0] != flags.MESSAGE_MAGIC_CODE_V2:
        return False
    size, ok, _req = check_message_and_return_size(buf, pos, check_crc=check_crc, read_body=True,
                                                   rocketmq_version="5.3.3")
    return ok and size > 0


def written_by_v5_text(file: str, offset: int) -> str:
    """Why a 4.9.8 open refuses a store holding a V2 record (file and offset named)."""
    return (f"commitlog/{file} at offset {offset}: a well-formed V2 record (a topic over 127 bytes), which only "
            "RocketMQ 5.x writes: this store was written by 5.x. RocketMQ 4.9.8's recovery stops there and cuts the "
            f"log, dropping every record from {offset} on; rmqlab's MessageStore.open with "
            "rocketmq_version='4.9.8' refuses instead. Open it with "
            "rocketmq_version='5.3.3' (CLI: --rocketmq-version 5.3.3)")


def _rmqlab_checks(buf: memoryview | bytes, pos: int, size: int, req: DispatchRequest | None, offset: int,
                   check_crc: bool, plan: RecoveryPlan) -> str:
    """Checks rmqlab adds to a record RocketMQ accepted; a non-empty result stops the walk there.

    They can only fire on damage: a record RocketMQ itself wrote always carries its own offset
    and never ends its properties with a zero byte, so for a valid store the walk,
    and hence ``process_offset``, is exactly RocketMQ's.
    """
    version = plan.rocketmq_version
    if req is not None and req.commit_log_offset != offset:
        plan.notes.append(
            f"record at {offset} passes magic, CRC and length checks but its PHYSICALOFFSET is "
            f"{req.commit_log_offset}: a stale record left over in a reused file (RocketMQ issue 10017). "
            f"rmqlab stops here; RocketMQ {version} would have accepted it and walked on."
        )
        return f"stale record: PHYSICALOFFSET {req.commit_log_offset} != its position {offset}"
    if req is not None and req.properties is not None and buf[pos + size - 1] == 0:
        plan.notes.append(
            f"record at {offset}: body CRC and lengths pass but the properties end with a zero byte, "
            f"which no broker writes (they end with 0x02 or the last value's text): the tail of a torn "
            f"write (the body CRC does not cover the properties, RocketMQ issue 7437). rmqlab stops "
            f"here; RocketMQ {version} would have accepted it with damaged keys, tags and uniq key."
        )
        return "torn record: properties end with a zero byte"
    if plan.prop_crc:
        if req is not None and check_prop_crc(buf, pos, size, req.properties) == ZERO:
            plan.notes.append(
                f"record at {offset}: its __CRC32# property says 0 and the CRC of its first {size - 20} bytes "
                f"really is 0: accepted. A RocketMQ 5.x broker without the fix of issue 9121 (PR 9122, January "
                f"2025: its forceVerifyPropCRC check required expectedCRC > 0) treats a CRC of 0 as damage and "
                f"would have cut the log here, dropping this and every later record; with the fix it is accepted "
                f"as here."
            )
    elif check_crc and _INT.unpack_from(buf, pos + 8)[0] == 0 and _body_length(buf, pos) > 0:
        plan.notes.append(
            f"record at {offset} has body CRC 0 and crc32(body) & 0x7FFFFFFF really is 0: accepted. "
            f"RocketMQ versions with issue 9121 (fixed by PR 9122) treated a CRC of 0 as a failed check "
            f"and would have cut the log here, dropping this and every later record."
        )
    return ""


def _body_length(buf: memoryview | bytes, pos: int) -> int:
    sys_flag = _INT.unpack_from(buf, pos + 36)[0]
    at = store_timestamp_position(sys_flag) + 8 + (20 if sys_flag & flags.STOREHOSTADDRESS_V6_FLAG else 8) + 12
    return int(_INT.unpack_from(buf, pos + at)[0])


def _inner_batch_fault(buf: memoryview | bytes, pos: int, check_crc: bool) -> str:
    """Why a 5.x record that decodes (CRC included when checked) failed: its INNER_NUM /
    INNER_BASE pair, which 5.x ``setBatchSizeIfNeeded`` parses inside ``checkMessageAndReturnSize``'s
    try (``Short.parseShort`` / ``Long.parseLong``). Empty if that is not the cause."""
    try:
        rec = decode_message(buf, pos, check_crc=check_crc)
    except (CorruptRecord, ValueError, struct.error, IndexError):
        return ""
    if not isinstance(rec, MessageRecord):
        return ""
    props = rec.properties
    try:
        batch_fields(props)
    except ValueError:
        return (f"INNER_NUM {props.get(flags.PROPERTY_INNER_NUM)!r} / INNER_BASE "
                f"{props.get(flags.PROPERTY_INNER_BASE)!r}: not a short / long (5.x parses them while "
                f"checking the record and fails it)")
    return ""


def _prop_crc_fault(buf: memoryview | bytes, pos: int) -> str:
    """Why a 5.x record failed ``forceVerifyPropCRC``'s check (empty if that is not the cause)."""
    try:
        rec = decode_message(buf, pos, check_crc=False)
    except (CorruptRecord, ValueError, struct.error, IndexError):
        return ""
    if not isinstance(rec, MessageRecord):
        return ""
    props = rec.properties or None
    verdict = check_prop_crc(buf, pos, rec.store_size, props)
    if verdict == MISSING:
        return (f"no {flags.PROPERTY_CRC32} property, which force_verify_prop_crc requires "
                "(5.x forceVerifyPropCRC fails the record)")
    if verdict in (ZERO, OK):
        return ""
    value = props[flags.PROPERTY_CRC32] if props else ""
    return (f"{flags.PROPERTY_CRC32} {value!r} (= {java_expected_crc(value)}) is not the CRC "
            f"{record_crc(buf, pos, rec.store_size)} of the record's first {rec.store_size - 20} bytes: "
            "damage outside the body, which the body CRC cannot see (force_verify_prop_crc)")


def _why_bad(buf: memoryview | bytes, pos: int, size: int, check_crc: bool, version: str,
             prop_crc: bool = False) -> str:
    """Name the check a record failed (zeros = the normal end of the log)."""
    total = _INT.unpack_from(buf, pos)[0]
    magic = _INT.unpack_from(buf, pos + 4)[0]
    if total == 0 and magic == 0:
        return "end of data (zeros)"
    if magic not in (flags.MESSAGE_MAGIC_CODE_V1, flags.MESSAGE_MAGIC_CODE_V2):
        return f"bad magic {magic & 0xFFFFFFFF:#010x}"
    if magic == flags.MESSAGE_MAGIC_CODE_V2 and version.startswith("4."):
        return "V2 magic, which 4.9.8 does not accept"
    if size > 0:
        return f"total size {total} does not match the recomputed length (half message)"
    if total <= 0 or pos + total > len(buf):
        return f"total size {total} runs past the end of the file (torn record)"
    if prop_crc:
        why = _prop_crc_fault(buf, pos)
        if why:
            return why
    if version != "4.9.8":
        why = _inner_batch_fault(buf, pos, check_crc and not prop_crc)
        if why:
            return why
    if prop_crc:
        return "unreadable fields"
    if check_crc:
        return "body CRC mismatch or unreadable fields"
    return "unreadable fields"
