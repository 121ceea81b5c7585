"""Expired-file cleanup (spec §8): decide first, as a plan; then carry the plan out.

``plan_cleanup`` is pure: from the CommitLog files (name, offset, mtime, readers), the clock, the
two disk ratios and the config it computes RocketMQ's ``CleanCommitLogService`` decision — is it
time (``deleteWhen``), is the disk above a threshold (``isSpaceToDelete``, 4.9.8 or 5.x rules),
is there a manual request — and, for every file, delete or keep and *why*. The CLI's
``cleanup --plan``, the widgets and :class:`CleanCommitLogService` all call it, so what is
explained is exactly what is done: the service only executes the plan and records outcomes
(e.g. a reader grabbed a file between planning and acting).

Per-file rules (``deleteExpiredFileByTime``): files are walked oldest first and the newest file
is never deleted; a file goes if ``now >= mtime + fileReservedTime`` or the disk is above the
clean-forcibly ratio (``cleanFileForciblyEnable``); the walk stops at the first file that is
kept (never delete from the middle), at the first file still held by readers (its destroy
starts the ``destroyMapedFileIntervalForcibly`` clock), or after the batch limit.

Disk-full (writes refused): RocketMQ sets the flag in ``isSpaceToDelete`` and, every 10 s, in
``isSpaceFull()`` (``physicRatio > diskSpaceWarningLevelRatio``), which has the last word; both
4.9.8 and 5.x schedule ``isSpaceFull``. rmqlab applies both in that order on every run, so the
CommitLog is writeable again as soon as a run sees the ratio drop to the warning level or below.

``CleanConsumeQueueService`` then deletes ConsumeQueue and index files that only point below the
CommitLog's new min offset (spec §8.2, §3.6, §4.5) and corrects every queue's min offset.

Thread-safety: the services are driven by one runner thread each; ``execute_delete_files_manually``
may be called from any thread (one int store).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from rmqlab.config import MessageStoreConfig
from rmqlab.errors import ConfigError
from rmqlab.events import CleanupDecision, FileDeleted
from rmqlab.files.fs import DiskUsageProbe, system_disk_usage
from rmqlab.files.mapped_file_queue import DELETE_FILES_BATCH_MAX

if TYPE_CHECKING:
    from rmqlab.files.mapped_file import MappedFile
    from rmqlab.store.message_store import MessageStore

__all__ = [
    "MAX_MANUAL_DELETE_FILE_TIMES",
    "CleanCommitLogService",
    "CleanConsumeQueueService",
    "CleanupPlan",
    "CommitLogFileInfo",
    "ConsumeQueueCleanupPlan",
    "ConsumeQueueCleanupReport",
    "FileDecision",
    "FileOutcome",
    "plan_cleanup",
    "plan_consume_queue_cleanup",
]

#: ``executeDeleteFilesManually`` sets the manual counter to this (admin DELETE_EXPIRED_COMMITLOG).
MAX_MANUAL_DELETE_FILE_TIMES = 20
_HOUR_MS = 3_600_000
_JAVA_INT = re.compile(r"[+-]?[0-9]+")

# Rules (which trigger made a file go) and "why" codes (spec §8.1 "why not deleted" (a)-(f)).
RULE_TIME_UP, RULE_SPACE_FULL, RULE_FORCED, RULE_MANUAL, RULE_NONE = (
    "time_up", "space_full", "forced", "manual", "none")
WHY = {
    "expired": "older than the reserved time",
    "forced": "disk above the clean-forcibly ratio: deleted whatever its age",
    "no_trigger": "(a) no trigger this run",
    "newest_file": "(b) the newest file is never deleted",
    "older_file_kept": "(c) an older file was kept this round (never delete from the middle)",
    "not_expired": "(d) not expired and the disk is below the clean-forcibly thresholds",
    "still_referenced": "(e) still referenced by readers",
    "batch_limit": "(f) batch limit reached this round",
    "not_dispatched": "(g) holds records not dispatched yet (rmqlab: RocketMQ would delete them)",
}


# ----------------------------------------------------------------------------------------------
# plan (pure)


@dataclass(frozen=True, slots=True)
class CommitLogFileInfo:
    """What the plan needs of one CommitLog file.

    ``ref_count`` counts *readers* holding the file (the file's own reference excluded);
    ``available`` is False once a destroy has started (a "hanged" file), at ``first_destroy_ms``.
    """

    name: str
    file_from_offset: int
    size: int
    last_modified_ms: int
    ref_count: int = 0
    available: bool = True
    first_destroy_ms: int = 0

    @classmethod
    def from_mapped_file(cls, mf: MappedFile) -> CommitLogFileInfo:
        available = mf.is_available()
        # MappedFile keeps one reference of its own while available (ReferenceResource).
        readers = max(mf.ref_count - (1 if available else 0), 0)
        return cls(
            mf.name, mf.file_from_offset, mf.file_size, mf.get_last_modified_timestamp(), readers,
            available, mf.first_shutdown_timestamp,
        )


@dataclass(frozen=True, slots=True)
class FileDecision:
    """One file's verdict. ``why`` is a code from :data:`WHY`; ``reason`` the sentence for people.

    ``destroy_attempt``: the action calls ``destroy`` on this file — every file to delete, and
    the first file still held by readers (RocketMQ's destroy call marks it unavailable and
    starts the forcible-destroy clock even though the file survives this round).
    """

    name: str
    file_from_offset: int
    age_ms: int
    expires_at_ms: int
    last_modified_ms: int
    rule: str
    decision: str  # "delete" | "keep"
    why: str
    reason: str
    destroy_attempt: bool = False


@dataclass(frozen=True, slots=True)
class FileOutcome:
    """What the action did with a file it tried to destroy."""

    name: str
    planned: str  # "delete" | "keep"
    result: str  # "deleted" | "still_referenced" | "gone"
    note: str = ""


@dataclass(frozen=True)
class CleanupPlan:
    """A CleanCommitLogService round: inputs, derived flags, trigger and one decision per file.

    Ratios are fractions (0.86 = 86 % used; -1.0 = unknown). Times are ms since the epoch.
    ``outcomes``/``executed``/``hanged_file_retry`` are filled in by the service after acting.
    """

    rocketmq_version: str
    now_ms: int
    now_local: str  # ISO time in the clock's zone
    tz: str
    local_hour: int
    delete_when: str
    delete_when_hours: tuple[int, ...]
    is_time_up: bool
    physic_ratio: float
    logics_ratio: float
    disk_max_used_space_ratio: float
    disk_space_clean_forcibly_ratio: float
    disk_space_warning_level_ratio: float
    file_reserved_time_ms: int
    clean_file_forcibly_enable: bool
    batch_max: int
    destroy_mapped_file_interval_forcibly: int
    delete_commit_log_files_interval: int
    manual_delete_remaining: int
    manual_delete_remaining_after: int
    is_space_to_delete: bool
    clean_immediately: bool
    clean_at_once: bool
    disk_full: bool
    disk_flag_marks: tuple[str, ...]
    triggers: tuple[str, ...]
    trigger: str
    files: tuple[FileDecision, ...]
    executed: bool = False
    outcomes: tuple[FileOutcome, ...] = ()
    hanged_file_retry: str = ""

    def __repr__(self) -> str:
        return (f"CleanupPlan({self.now_local}, trigger={self.trigger!r}, delete={self.to_delete}, "
                f"keep={len(self.kept)}, disk_full={self.disk_full}, executed={self.executed})")

    @property
    def fired(self) -> bool:
        return self.trigger != RULE_NONE

    @property
    def to_delete(self) -> list[str]:
        return [d.name for d in self.files if d.decision == "delete"]

    @property
    def kept(self) -> list[str]:
        return [d.name for d in self.files if d.decision == "keep"]

    @property
    def deleted(self) -> list[str]:
        """Files the action actually deleted (empty before execution)."""
        return [o.name for o in self.outcomes if o.result == "deleted"]

    def decision_for(self, name: str) -> FileDecision:
        for d in self.files:
            if d.name == name:
                return d
        raise KeyError(name)

    def summary(self) -> str:
        if not self.fired:
            return (f"no cleanup: not in delete hours {list(self.delete_when_hours)} (local hour "
                    f"{self.local_hour}), disk {self.physic_ratio:.2f} <= {self.disk_max_used_space_ratio:.2f}, "
                    "no manual request")
        why = "" if self.triggers == (self.trigger,) else f" ({', '.join(self.triggers) or 'forced'})"
        return (f"trigger {self.trigger}{why}: delete {len(self.to_delete)} of {len(self.files)} files"
                + ("; disk full, writes refused" if self.disk_full else ""))

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly (lists, str, numbers, bools), for ``cleanup --plan --json`` and widgets."""
        out = asdict(self)
        for key in ("delete_when_hours", "disk_flag_marks", "triggers"):
            out[key] = list(out[key])
        out["files"] = [dict(d) for d in out["files"]]
        out["outcomes"] = [dict(o) for o in out["outcomes"]]
        out["to_delete"] = self.to_delete
        out["summary"] = self.summary()
        return out

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), **kwargs)


def _delete_when_hours(delete_when: str) -> tuple[int, ...]:
    """``deleteWhen.split(";")`` each parsed like ``Integer.parseInt`` (RocketMQ ``isItTimeToDo``).
    Java's ``split`` drops trailing empty strings: ``"04;"`` is hour 4, ``";;"`` no hour at all."""
    tokens = delete_when.split(";")
    while delete_when and tokens and not tokens[-1]:
        tokens.pop()
    hours = []
    for token in tokens:
        if not _JAVA_INT.fullmatch(token):
            raise ConfigError(f"delete_when {delete_when!r}: {token!r} is not an hour (Integer.parseInt)")
        hours.append(int(token))
    return tuple(hours)


def _is_space_to_delete(
    physic: float, logics: float, ratio: float, forcibly: float, warning: float, is_v4: bool
) -> tuple[bool, bool, list[str]]:
    """RocketMQ ``isSpaceToDelete``: (result, cleanImmediately, disk-flag marks in order)."""
    marks: list[str] = []
    clean_immediately = False

    def three_way(label: str, value: float) -> str:
        nonlocal clean_immediately
        if value > warning:
            marks.append(f"{label} {value:.2f} > warning {warning:.2f}: mark disk full")
            clean_immediately = True
            return "warning"
        if value > forcibly:
            clean_immediately = True
            return "forcibly"
        marks.append(f"{label} {value:.2f} <= clean-forcibly {forcibly:.2f}: mark disk ok")
        return "ok"

    if is_v4:
        # 4.9.8: per path, flags then "< 0 or > ratio" returns at once (logics not looked at).
        three_way("commitlog disk", physic)
        if physic < 0 or physic > ratio:
            return True, clean_immediately, marks
        three_way("consumequeue disk", logics)
        return logics < 0 or logics > ratio, clean_immediately, marks
    # 5.x: any path above clean-forcibly returns True at once; then the ratio test on both.
    if three_way("commitlog disk", physic) != "ok":
        return True, clean_immediately, marks
    if three_way("consumequeue disk", logics) != "ok":
        return True, clean_immediately, marks
    return (physic < 0 or physic > ratio or logics < 0 or logics > ratio), clean_immediately, marks


def _hours(ms: int) -> str:
    return f"{ms / _HOUR_MS:.1f} h"


def _would_destroy(f: CommitLogFileInfo, now_ms: int, interval_forcibly: int) -> bool:
    """Does ``MappedFile.destroy(interval_forcibly, now)`` delete the file (spec §7.6)?"""
    if f.available:
        return f.ref_count <= 0  # the first call drops the file's own reference only
    return f.ref_count <= 0 or now_ms - f.first_destroy_ms >= interval_forcibly


def plan_cleanup(
    files: Sequence[CommitLogFileInfo],
    *,
    now_ms: int,
    physic_ratio: float,
    logics_ratio: float,
    config: MessageStoreConfig,
    tz: timezone,
    manual_delete_remaining: int = 0,
    dispatched_offset: int | None = None,
) -> CleanupPlan:
    """Decide one CleanCommitLogService round (spec §8.1) without touching anything.

    ``files`` oldest first (the CommitLog's order). ``physic_ratio`` is the min ``usedPercent``
    over the CommitLog paths, ``logics_ratio`` that of ``<root>/consumequeue``.
    ``dispatched_offset`` (the live store's reput offset; None: RocketMQ's rules alone) keeps
    every file with records not dispatched yet (why ``not_dispatched``). RocketMQ deletes them
    when dispatch lags behind cleanup (a full disk that stopped dispatch, then forced cleanup):
    the reput then jumps to the new min offset and the consume queue maps queue offsets to the
    wrong records. rmqlab keeps them until they are dispatched.
    """
    c = config
    hours = _delete_when_hours(c.delete_when)
    local = datetime.fromtimestamp(now_ms / 1000, tz)
    local_hour = local.hour
    is_time_up = local_hour in hours
    ratio = c.disk_max_used_space_ratio_value
    forcibly = c.disk_space_clean_forcibly_ratio_value
    warning = c.disk_space_warning_level_ratio_value
    is_space, clean_immediately, marks = _is_space_to_delete(
        physic_ratio, logics_ratio, ratio, forcibly, warning, c.is_v4)
    # isSpaceFull() (every 10 s, both versions) has the last word on the disk-full flag.
    disk_full = physic_ratio > warning
    marks.append(f"isSpaceFull: commitlog disk {physic_ratio:.2f} "
                 + (f"> warning {warning:.2f}: disk full" if disk_full else f"<= warning {warning:.2f}: disk ok"))
    manual = manual_delete_remaining > 0
    triggers = tuple(name for name, on in ((RULE_TIME_UP, is_time_up), (RULE_SPACE_FULL, is_space),
                                          (RULE_MANUAL, manual)) if on)
    fired = bool(triggers)
    clean_at_once = c.clean_file_forcibly_enable and clean_immediately
    trigger = (RULE_FORCED if clean_at_once else triggers[0]) if fired else RULE_NONE
    batch_max = DELETE_FILES_BATCH_MAX if c.is_v4 else c.delete_file_batch_max
    reserved = c.file_reserved_time * _HOUR_MS
    interval = c.destroy_mapped_file_interval_forcibly

    ctx = _Walk(now_ms, reserved, interval, batch_max, fired, clean_at_once, triggers, trigger,
                physic_ratio, logics_ratio, forcibly, warning, ratio, c.clean_file_forcibly_enable,
                hours, local_hour, dispatched_offset)
    decisions = tuple(ctx.decide(files))
    return CleanupPlan(
        rocketmq_version=c.rocketmq_version, now_ms=now_ms,
        now_local=local.isoformat(timespec="milliseconds"), tz=str(tz), local_hour=local_hour,
        delete_when=c.delete_when, delete_when_hours=hours, is_time_up=is_time_up,
        physic_ratio=physic_ratio, logics_ratio=logics_ratio, disk_max_used_space_ratio=ratio,
        disk_space_clean_forcibly_ratio=forcibly, disk_space_warning_level_ratio=warning,
        file_reserved_time_ms=reserved, clean_file_forcibly_enable=c.clean_file_forcibly_enable,
        batch_max=batch_max, destroy_mapped_file_interval_forcibly=interval,
        delete_commit_log_files_interval=c.delete_commit_log_files_interval,
        manual_delete_remaining=manual_delete_remaining,
        manual_delete_remaining_after=manual_delete_remaining - 1 if (fired and manual) else manual_delete_remaining,
        is_space_to_delete=is_space, clean_immediately=clean_immediately, clean_at_once=clean_at_once,
        disk_full=disk_full, disk_flag_marks=tuple(marks), triggers=triggers, trigger=trigger,
        files=decisions,
    )


@dataclass
class _Walk:
    """The ``deleteExpiredFileByTime`` walk, as decisions (kept apart to keep plan_cleanup short)."""

    now: int
    reserved: int
    interval: int
    batch_max: int
    fired: bool
    clean_at_once: bool
    triggers: tuple[str, ...]
    trigger: str
    physic: float
    logics: float
    forcibly: float
    warning: float
    ratio: float
    forcibly_enabled: bool
    hours: tuple[int, ...]
    local_hour: int
    dispatched: int | None

    def decide(self, files: Sequence[CommitLogFileInfo]) -> Iterable[FileDecision]:
        stop: tuple[str, str] | None = None  # (why, reason) for every later file
        deleted = 0
        last = len(files) - 1
        for i, f in enumerate(files):
            expired = self.now >= f.last_modified_ms + self.reserved
            if not self.fired:
                yield self._make(f, "keep", "no_trigger", self._no_trigger_reason())
            elif i == last:
                yield self._make(f, "keep", "newest_file", "the newest CommitLog file is never deleted by cleanup")
            elif stop is not None:
                yield self._make(f, "keep", *stop)
            elif self.dispatched is not None and f.file_from_offset + f.size > self.dispatched:
                yield self._make(f, "keep", "not_dispatched", (
                    f"not dispatched yet: the reput is at offset {self.dispatched}, this file ends at "
                    f"{f.file_from_offset + f.size}; deleting it would take records from the consume queues "
                    "before they reach them (RocketMQ deletes it anyway)"))
                stop = ("older_file_kept", f"an older file ({f.name}) holds records not dispatched yet; "
                        "files are never deleted from the middle")
            elif not (expired or self.clean_at_once):
                yield self._make(f, "keep", "not_expired", self._not_expired_reason(f))
                stop = ("older_file_kept", f"an older file ({f.name}) was kept this round; "
                        "files are never deleted from the middle")
            elif not _would_destroy(f, self.now, self.interval):
                yield self._make(f, "keep", "still_referenced", self._referenced_reason(f), attempt=True)
                stop = ("older_file_kept", f"an older file ({f.name}) is still referenced by readers; "
                        "files are never deleted from the middle")
            else:
                rule, why = (self.triggers[0], "expired") if expired else (RULE_FORCED, "forced")
                yield self._make(f, "delete", why, self._delete_reason(f, expired), rule=rule, attempt=True)
                deleted += 1
                if deleted >= self.batch_max:
                    stop = ("batch_limit", f"batch limit of {self.batch_max} deletions per round reached; "
                            "the next round continues")

    def _make(self, f: CommitLogFileInfo, decision: str, why: str, reason: str, *, rule: str | None = None,
              attempt: bool = False) -> FileDecision:
        return FileDecision(f.name, f.file_from_offset, self.now - f.last_modified_ms,
                            f.last_modified_ms + self.reserved, f.last_modified_ms,
                            self.trigger if rule is None else rule, decision, why, reason, attempt)

    def _no_trigger_reason(self) -> str:
        return (f"no trigger: local hour {self.local_hour:02d} is not a delete hour {list(self.hours)}, "
                f"disk (commitlog {self.physic:.2f}, consumequeue {self.logics:.2f}) is not above "
                f"{self.ratio:.2f}, and no manual delete was requested")

    def _not_expired_reason(self, f: CommitLogFileInfo) -> str:
        age, left = self.now - f.last_modified_ms, f.last_modified_ms + self.reserved - self.now
        disk = ("cleanFileForciblyEnable is false" if not self.forcibly_enabled else
                f"disk (commitlog {self.physic:.2f}, consumequeue {self.logics:.2f}) is not above "
                f"the clean-forcibly ratio {self.forcibly:.2f}")
        return (f"not expired: last modified {_hours(age)} ago, kept {_hours(self.reserved)}, "
                f"expires in {_hours(left)}; {disk}")

    def _referenced_reason(self, f: CommitLogFileInfo) -> str:
        if f.available:
            return (f"still referenced by {f.ref_count} reader(s): destroy starts now and is forced "
                    f"{self.interval / 1000:g} s later if they do not release it")
        waited = self.now - f.first_destroy_ms
        return (f"still referenced by {f.ref_count} reader(s) {waited / 1000:g} s after the first destroy "
                f"attempt; forced after {self.interval / 1000:g} s")

    def _delete_reason(self, f: CommitLogFileInfo, expired: bool) -> str:
        if expired:
            return (f"expired: last modified {_hours(self.now - f.last_modified_ms)} ago >= reserved "
                    f"{_hours(self.reserved)} (trigger: {', '.join(self.triggers)})")
        return (f"disk above the clean-forcibly ratio {self.forcibly:.2f} (commitlog {self.physic:.2f}, "
                f"consumequeue {self.logics:.2f}): deleted although only {_hours(self.now - f.last_modified_ms)} old")


# ----------------------------------------------------------------------------------------------
# CleanCommitLogService


class CleanCommitLogService:
    """RocketMQ ``CleanCommitLogService``: plan with :func:`plan_cleanup`, then execute the plan.

    ``disk_probe(path) -> usedPercent`` (default :func:`~rmqlab.files.fs.system_disk_usage`) is
    injectable, so a test can say "the disk is 86 % full". ``last_plan`` is the latest round's
    plan with outcomes. Not thread-safe beyond ``execute_delete_files_manually``.
    """

    name = "clean_commit_log"

    def __init__(self, store: MessageStore, *, disk_probe: DiskUsageProbe | None = None) -> None:
        self.store = store
        self.disk_probe: DiskUsageProbe = disk_probe or system_disk_usage
        self.manual_delete_file_several_times = 0
        self.last_redelete_timestamp = 0
        self.last_plan: CleanupPlan | None = None
        self._marked_disk_full = False

    def interval_ms(self) -> float:
        return self.store.config.clean_resource_interval

    def initial_delay_ms(self) -> float:
        """The broker schedules cleanup 60 s after start (threaded runner only)."""
        return 60_000

    def execute_delete_files_manually(self) -> None:
        """``executeDeleteFilesManually``: the next 20 rounds delete expired files at any hour."""
        self.manual_delete_file_several_times = MAX_MANUAL_DELETE_FILE_TIMES

    # --- inputs ------------------------------------------------------------------------------
    def disk_ratios(self) -> tuple[float, float]:
        """(min usedPercent over the CommitLog paths, usedPercent of ``<root>/consumequeue``)."""
        c = self.store.config
        physic = 100.0
        for path in c.commit_log_dir.strip().split(","):
            physic = min(physic, self.disk_probe(path))
        return physic, self.disk_probe(os.path.join(c.store_path_root_dir, "consumequeue"))

    def file_infos(self) -> list[CommitLogFileInfo]:
        return [CommitLogFileInfo.from_mapped_file(mf) for mf in self.store.commit_log.mapped_file_queue.mapped_files]

    def plan(self, now_ms: int | None = None, disk_ratio: float | None = None) -> CleanupPlan:
        """This round's plan for the live store (no side effects); ``disk_ratio`` overrides both."""
        clock = self.store.clock
        physic, logics = (disk_ratio, disk_ratio) if disk_ratio is not None else self.disk_ratios()
        return plan_cleanup(
            self.file_infos(), now_ms=clock.now_ms() if now_ms is None else now_ms, physic_ratio=physic,
            logics_ratio=logics, config=self.store.config, tz=clock.tz(),
            manual_delete_remaining=self.manual_delete_file_several_times,
            dispatched_offset=self.store.reput.reput_from_offset,
        )

    # --- one round ---------------------------------------------------------------------------
    def run_once(self) -> CleanupPlan:
        plan = self.plan()
        bus = self.store.bus
        if bus.active:
            for d in plan.files:
                bus.publish(CleanupDecision(d.name, d.rule, d.decision, d.reason))
        self._apply_disk_flag(plan)
        if plan.fired and plan.manual_delete_remaining > 0:
            self.manual_delete_file_several_times = max(self.manual_delete_file_several_times - 1, 0)
        outcomes = self._execute(plan) if plan.fired else ()
        retry = self._redelete_hanged_file()
        plan = replace(plan, executed=True, outcomes=outcomes, hanged_file_retry=retry)
        self.last_plan = plan
        return plan

    def _apply_disk_flag(self, plan: CleanupPlan) -> None:
        """Refuse writes while the disk is full; allow them again once it is not (RunningFlags)."""
        cl = self.store.commit_log
        if self.store.is_shutdown:
            return
        if plan.disk_full:
            if cl.writeable:
                cl.writeable = False
                cl.not_writeable_reason = (
                    f"disk full: commit log disk {plan.physic_ratio:.0%} used > diskSpaceWarningLevelRatio "
                    f"{plan.disk_space_warning_level_ratio:.0%}; writes are refused until cleanup frees space")
                self._marked_disk_full = True
        elif self._marked_disk_full:
            self._marked_disk_full = False
            if not cl.writeable and cl.not_writeable_reason.startswith("disk full"):
                cl.writeable = True
                cl.not_writeable_reason = ""

    def _execute(self, plan: CleanupPlan) -> tuple[FileOutcome, ...]:
        """Destroy the planned files in order; stop at the first that survives (still held)."""
        mfq = self.store.commit_log.mapped_file_queue
        by_name = {mf.name: mf for mf in mfq.mapped_files}
        bus = self.store.bus
        candidates = len(plan.files) - 1
        outcomes: list[FileOutcome] = []
        deleted: list[MappedFile] = []
        try:
            for i, d in enumerate(plan.files):
                if not d.destroy_attempt:
                    continue
                mf = by_name.get(d.name)
                if mf is None:
                    outcomes.append(FileOutcome(d.name, d.decision, "gone", "no longer in the CommitLog"))
                    break
                if not mf.destroy(plan.destroy_mapped_file_interval_forcibly, plan.now_ms):
                    note = "" if d.decision == "keep" else "a reader took it after planning"
                    outcomes.append(FileOutcome(d.name, d.decision, "still_referenced", note))
                    break
                deleted.append(mf)
                note = "" if d.decision == "delete" else "its readers released it after planning"
                outcomes.append(FileOutcome(d.name, d.decision, "deleted", note))
                if bus.active:
                    bus.publish(FileDeleted("commitlog", mf.file_name, mf.file_from_offset, f"cleanup: {d.rule}"))
                if d.decision != "delete" or len(deleted) >= plan.batch_max:
                    break
                if plan.delete_commit_log_files_interval > 0 and i + 1 < candidates:
                    self.store.clock.sleep_ms(plan.delete_commit_log_files_interval)
        finally:
            mfq.delete_files(deleted)
        return tuple(outcomes)

    def _redelete_hanged_file(self) -> str:
        """``reDeleteHangedFile``: every ``redeleteHangedFileInterval`` retry an unavailable first file."""
        c = self.store.config
        now = self.store.clock.now_ms()
        if now - self.last_redelete_timestamp <= c.redelete_hanged_file_interval:
            return ""
        self.last_redelete_timestamp = now
        mfq = self.store.commit_log.mapped_file_queue
        first = mfq.get_first_mapped_file()
        if first is None or first.is_available():
            return ""
        if mfq.retry_delete_first_file(c.destroy_mapped_file_interval_forcibly, now):
            return f"deleted hanged file {first.name}"
        return f"hanged file {first.name} still referenced"


# ----------------------------------------------------------------------------------------------
# CleanConsumeQueueService


@dataclass(frozen=True)
class ConsumeQueueCleanupPlan:
    """Which CQ and index files lie wholly below ``min_offset`` (read-only estimate, spec §3.6/§4.5)."""

    min_offset: int
    queue_files: dict[str, list[str]]  # "topic-queueId" -> file names
    index_files: list[str]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ConsumeQueueCleanupReport:
    ran: bool
    min_offset: int
    queues_touched: tuple[str, ...] = ()
    files_deleted: int = 0
    index_files_deleted: int = 0
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["queues_touched"] = list(self.queues_touched)
        return out


def _cq_file_expired(mf: MappedFile, file_size: int, min_offset: int, unit_size: int = 20) -> bool | None:
    """Last unit's CommitLog offset < ``min_offset``? None when unreadable (hanged -> True).
    ``unit_size`` 46 for a BatchConsumeQueue (``deleteExpiredFileByOffset`` with its unit)."""
    sel = mf.select_mapped_buffer(file_size - unit_size)
    if sel is None:
        return None if mf.is_available() else True
    with sel:
        return int.from_bytes(sel.buffer[:8], "big", signed=True) < min_offset


def plan_consume_queue_cleanup(
    consume_queue_store: Any, index_service: Any, min_offset: int
) -> ConsumeQueueCleanupPlan:
    """What ``CleanConsumeQueueService`` would delete for ``min_offset``, without deleting."""
    queues: dict[str, list[str]] = {}
    every = [(t, q, cq, 20) for t, q, cq in consume_queue_store.all_queues()]
    every += [(t, q, bcq, 46) for t, q, bcq in consume_queue_store.all_batch_queues()]
    for topic, queue_id, cq, unit in every:
        mfq = cq.mapped_file_queue
        names = []
        for mf in mfq.mapped_files[:-1]:
            if not _cq_file_expired(mf, mfq.mapped_file_size, min_offset, unit):
                break
            names.append(mf.name)
        if names:
            queues[f"{topic}-{queue_id}"] = names
    index: list[str] = []
    for f in index_service.index_files[:-1]:
        if f.end_phy_offset >= min_offset:
            break
        index.append(f.name)
    return ConsumeQueueCleanupPlan(min_offset, queues, index)


class CleanConsumeQueueService:
    """RocketMQ ``CleanConsumeQueueService`` (spec §8.2): after CommitLog files went, delete CQ
    files whose last unit points below the new min offset, correct every queue's min offset,
    then delete index files whose ``end_phy_offset`` is below it."""

    name = "clean_consume_queue"

    def __init__(self, store: MessageStore) -> None:
        self.store = store
        self.last_physical_min_offset = 0

    def interval_ms(self) -> float:
        return self.store.config.clean_resource_interval

    def initial_delay_ms(self) -> float:
        return 60_000

    def plan(self, min_offset: int | None = None) -> ConsumeQueueCleanupPlan:
        s = self.store
        return plan_consume_queue_cleanup(
            s.consume_queue_store, s.index_service, s.commit_log.get_min_offset() if min_offset is None else min_offset)

    def run_once(self) -> ConsumeQueueCleanupReport:
        s = self.store
        min_offset = s.commit_log.get_min_offset()
        if min_offset <= self.last_physical_min_offset:
            return ConsumeQueueCleanupReport(False, min_offset, reason=(
                f"CommitLog min offset {min_offset} has not moved past {self.last_physical_min_offset}"))
        interval = s.config.delete_consume_queue_files_interval
        touched: list[str] = []
        total = 0
        cqs = s.consume_queue_store
        for topic, queue_id, cq in [*cqs.all_queues(), *cqs.all_batch_queues()]:  # (5.x: BatchCQ ones too)
            deleted = cq.delete_expired_file(min_offset, s.clock.now_ms())
            if deleted > 0:
                touched.append(f"{topic}-{queue_id}")
                total += deleted
                if interval > 0:
                    s.clock.sleep_ms(interval)
        index_deleted = s.index_service.delete_expired_file(min_offset)
        # Only now (RocketMQ records it first): a round cut short (an interrupt) is run again,
        # not skipped until the CommitLog's min offset moves.
        self.last_physical_min_offset = min_offset
        return ConsumeQueueCleanupReport(True, min_offset, tuple(touched), total, index_deleted)
