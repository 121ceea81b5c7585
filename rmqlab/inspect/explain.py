"""Explain recovery and cleanup on a read-only snapshot with the engine's own plan functions.

``explain_recovery`` gathers exactly what ``MessageStore.load()`` feeds ``plan_recovery`` — the
CommitLog files' bytes, the consume queues' max physical offset (their ``recover()`` run in
read-only mode: nothing truncated), the checkpoint file and whether ``abort`` exists — and returns
the same ``RecoveryPlan``. ``explain_cleanup`` builds ``CommitLogFileInfo`` from the files (name,
offset, size, mtime; no readers) and calls ``plan_cleanup``. Neither changes a byte.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from rmqlab.codec.checkpoint import Checkpoint
from rmqlab.codec.consume_queue_ext_unit import MIN_EXT_FILE_SIZE
from rmqlab.codec.index_layout import index_file_size
from rmqlab.codec.names import BATCH_CONSUME_QUEUE_DIR, CONSUME_QUEUE_EXT_DIR
from rmqlab.config import MessageStoreConfig
from rmqlab.errors import ConfigError

if TYPE_CHECKING:
    from rmqlab.inspect.snapshot import StoreSnapshot
    from rmqlab.store.cleanup import CleanupPlan
    from rmqlab.store.recovery import RecoveryPlan

__all__ = ["explain_cleanup", "explain_recovery", "snapshot_config"]


def snapshot_config(snap: StoreSnapshot, config: MessageStoreConfig | None = None,
                    **changes: Any) -> MessageStoreConfig:
    """``config`` (default: RocketMQ's defaults) with the sizes inferred from the snapshot."""
    base = config or MessageStoreConfig()
    return base.with_(
        store_path_root_dir=snap.path,
        mapped_file_size_commit_log=snap.commit_log_file_size,
        mapped_file_size_consume_queue=snap.consume_queue_file_size,
        max_hash_slot_num=snap.hash_slot_num,
        max_index_num=snap.index_num,
        **changes,
    )


def explain_recovery(snap: StoreSnapshot, *, config: MessageStoreConfig | None = None,
                     rocketmq_version: str | None = None,
                     enable_consume_queue_ext: bool | None = None) -> RecoveryPlan:
    """The ``RecoveryPlan`` opening this store would compute and carry out (nothing is changed).

    Index files an abnormal-exit load would destroy (end timestamp newer than the checkpoint's
    index timestamp) are listed in ``plan.notes``.

    ``enable_consume_queue_ext`` (None: on when ``config`` has it on or the store holds
    ``consumequeue_ext/`` files, as a store written with it is reopened with it): the consume
    queues are then recovered with their ext runs, read-only, and the plan's first steps say
    what that does to each run (its walk from the first file, its cut after the last address
    the recovered queue holds). Off with ext files present, a note says they are left alone.
    """
    from rmqlab.store.consume_queue_store import ConsumeQueueStore, batch_queues_under_v4
    from rmqlab.store.recovery import (
        CommitLogFileView,
        index_end_past_log,
        note_ext_min_correction,
        note_ext_recovery,
        note_units_past_log,
        plan_recovery,
    )

    changes: dict[str, Any] = {"rocketmq_version": rocketmq_version} if rocketmq_version else {}
    ext_files = bool(snap.consume_queue_exts)
    ext = enable_consume_queue_ext
    if ext is None:
        ext = bool(config is not None and config.enable_consume_queue_ext) or ext_files
    changes["enable_consume_queue_ext"] = ext
    if ext and ext_files and snap.consume_queue_ext_file_size >= MIN_EXT_FILE_SIZE:
        # (shorter, no ext file is whole: the configured size stays, and the load below says so)
        changes["mapped_file_size_consume_queue_ext"] = snap.consume_queue_ext_file_size
    cfg = snapshot_config(snap, config, **changes)
    # 5.x: the BatchConsumeQueues recover too (their steps lead the plan); every batchconsumequeue/
    # topic is taken as BatchCQ here (opening the store checks it against topics.json)
    batch_topics = frozenset(t for t, _q in getattr(snap, "batch_consume_queues", {}))
    cqs = ConsumeQueueStore(os.path.join(snap.path, "consumequeue"), cfg.consume_queue_file_size,
                            rocketmq_version=cfg.rocketmq_version, read_only=True,
                            ext_store_path=os.path.join(snap.path, CONSUME_QUEUE_EXT_DIR) if ext else None,
                            ext_file_size=cfg.mapped_file_size_consume_queue_ext,
                            bit_map_length=cfg.bit_map_length_consume_queue_ext,
                            batch_store_path=None if cfg.is_v4 else os.path.join(snap.path, BATCH_CONSUME_QUEUE_DIR),
                            batch_file_size=getattr(snap, "batch_consume_queue_file_size", None)
                            or cfg.mapper_file_size_batch_consume_queue,
                            batch_topics=lambda: batch_topics)
    try:
        load_failures = _load_failures(snap, cfg, cqs)
        cq_max = cqs.recover()
        checkpoint = snap.checkpoint_values() or Checkpoint()
        views = [CommitLogFileView(mf.name, mf.file_from_offset, mf.buffer) for mf in snap.commit_log_files]
        plan = plan_recovery(views, cfg.mapped_file_size_commit_log, last_exit_ok=not snap.abort_present,
                             max_phy_offset_of_consume_queue=cq_max, checkpoint=checkpoint, config=cfg)
        v5_queues = batch_queues_under_v4(snap.path) if cfg.is_v4 else ""
        plan.notes[:0] = ([v5_queues] if v5_queues else []) + load_failures + _index_short_notes(snap)
        plan.steps[:0] = cqs.batch_recovery_steps
        note_ext_recovery(plan, cqs.ext_recovery_steps, ext_enabled=ext, ext_files_present=ext_files)
        _note_ext_cut_short(plan, cqs)
        if plan.truncate_consume_queues:  # what MessageStore._apply_recovery adds
            note_units_past_log(plan, cqs.units_past_log(plan.process_offset))
        if views and plan.mode != "empty":  # then recoverTopicQueueTable, with the log's min offset
            cqs.recover_topic_queue_table(views[0].file_from_offset)
            note_ext_min_correction(plan, cqs.ext_min_steps)
    finally:
        cqs.shutdown()
    if not snap.index_error:
        kept = []
        for f in snap.index_files_opened():
            if snap.abort_present and f.end_timestamp > checkpoint.index_msg_timestamp:
                plan.notes.append(
                    f"index file {f.name} will be destroyed at load: end_timestamp {f.end_timestamp} > checkpoint "
                    f"index_msg_timestamp {checkpoint.index_msg_timestamp} (rebuilt by re-dispatch)")
            else:
                kept.append(f)
        if kept:
            index_end_past_log(plan, kept[-1].name, kept[-1].end_phy_offset)
    return plan


def _note_ext_cut_short(plan: RecoveryPlan, cqs: Any) -> None:
    """An ext file whose units run past its end was cut (the broker never writes across a file's
    end); unless a load-failure note names it already, say the broker would not start."""
    for _topic, _qid, cq in cqs.all_queues():
        ext = cq.consume_queue_ext
        cut = ext.cut_short if ext is not None else None
        if cut is None or any(cut[0] in n for n in plan.notes):
            continue
        path, at, length = cut
        plan.notes.insert(0, f"RocketMQ's load fails (consume queue ext: {path}: the unit at {at} runs past the file's "
                             f"end at {length}, so the file is cut short): the broker does not start and no recovery "
                             "runs; this plan is what recovery would do once the file is fixed")


def _index_short_notes(snap: StoreSnapshot) -> list[str]:
    """Index files not of the layout's size: RocketMQ maps them at its configured size unchecked
    (a short file grows, its cut chains are lost; another layout is searched in the wrong slots);
    rmqlab's MessageStore.open refuses the store and says why."""
    if snap.index_error:
        return [f"index: {snap.index_error}; MessageStore.open with these index sizes refuses to load the store "
                "(RocketMQ maps each index file at its configured size unchecked)"]
    size = index_file_size(snap.hash_slot_num, snap.index_num)
    return [f"index: {path}: {n:,} bytes, shorter than its layout's {size:,} (a cut file): rmqlab's "
            "MessageStore.open refuses to load the store until it is moved out of index/ (its keys are then not "
            "found); RocketMQ maps it at the configured size unchecked, growing it" for path, n in snap.index_short]


def _load_failures(snap: StoreSnapshot, cfg: MessageStoreConfig, cqs: Any) -> list[str]:
    """Load the CommitLog and consume queue files as ``MessageStore.load()`` does (read-only) and
    say where RocketMQ's load would fail (a file of the wrong length, a name past Long.MAX_VALUE):
    the broker then does not start and no recovery runs, and the consume queues after the failing
    one are not loaded (their offsets are missing from the plan)."""
    from rmqlab.files.mapped_file_queue import MappedFileQueue

    out = []
    log = MappedFileQueue(snap.commit_log_dir, cfg.mapped_file_size_commit_log, read_only=True)
    try:
        if not log.load():
            out.append(f"commit log: {log.load_error}")
    except OSError as e:  # a symlink looping or leading nowhere: listed, but no file to read
        out.append(f"commit log: {e.filename}: {e.strerror}")
    finally:
        log.close()
    try:
        if not cqs.load():
            out.append(f"consume queue: {cqs.load_error} (the queues after it are left out of this plan)")
    except OSError as e:
        out.append(f"consume queue: {e.filename}: {e.strerror} (the queues after it are left out of this plan)")
    # rmqlab reads a short last file as a trimmed sample; RocketMQ's load wants every file whole
    lasts = [("commit log", snap.commit_log_files[-1:], cfg.mapped_file_size_commit_log)]
    lasts += [("consume queue", q.files[-1:], cfg.consume_queue_file_size) for q in snap.consume_queues.values()]
    if cfg.enable_consume_queue_ext:
        lasts += [("consume queue ext", q.files[-1:], cfg.mapped_file_size_consume_queue_ext)
                  for q in snap.consume_queue_exts.values()]
    for what, files, size in lasts:
        for mf in files:
            if 0 < mf.mapped_length < size:
                out.append(f"{what}: {mf.file_name}: length {mf.mapped_length} does not match the mapped file "
                           f"size {size} (a last file cut short, by a copy or a disk; rmqlab reads it as written "
                           "up to there)")
    return [f"RocketMQ's load fails ({w}): the broker does not start and no recovery runs; this plan is "
            "what recovery would do once the file is fixed" for w in out]


def explain_cleanup(snap: StoreSnapshot, *, now: datetime | int | None = None, disk_ratio: float | None = None,
                    config: MessageStoreConfig | None = None, tz: timezone | None = None) -> CleanupPlan:
    """The ``CleanupPlan`` of one CleanCommitLogService round at ``now`` with the disk ``disk_ratio`` full.

    ``now``: a datetime or epoch ms (default: the system clock, read here, never in the plan);
    ``tz``: the zone ``deleteWhen`` hours are read in (default: ``now``'s zone, else UTC);
    ``disk_ratio`` (0.0-1.0; default: the real usage of the store's file system) is used for both
    the CommitLog and the ConsumeQueue ratios.
    """
    from rmqlab.files.fs import system_disk_usage
    from rmqlab.store.cleanup import CommitLogFileInfo, plan_cleanup

    cfg = snapshot_config(snap, config)
    if now is None:
        now = datetime.now(UTC)
    if isinstance(now, datetime):
        if now.tzinfo is None:
            now = now.replace(tzinfo=UTC)
        zone = tz or timezone(now.utcoffset() or timedelta(0))
        now_ms = int(now.timestamp() * 1000)
    else:
        zone, now_ms = tz or UTC, int(now)
    try:  # the plan reads the hour of day (deleteWhen) in UTC and in the zone: both need a calendar date
        for z in (UTC, zone):
            datetime.fromtimestamp(now_ms / 1000, z)
    except (OverflowError, OSError, ValueError):
        why = f"now must be a date in years 1..9999, in UTC and in its zone, not epoch ms {now_ms}"
        raise ConfigError(why) from None
    if disk_ratio is None:
        physic = system_disk_usage(snap.commit_log_dir if os.path.isdir(snap.commit_log_dir) else snap.path)
        logics = system_disk_usage(os.path.join(snap.path, "consumequeue"))
    elif not 0.0 <= disk_ratio <= 1.0:  # NaN fails too
        raise ConfigError(f"disk_ratio must be between 0.0 and 1.0 (a share of the disk), not {disk_ratio!r}")
    else:
        physic = logics = disk_ratio
    files = [
        CommitLogFileInfo(mf.name, mf.file_from_offset, snap.commit_log_file_size,
                          os.stat(mf.file_name).st_mtime_ns // 1_000_000)
        for mf in snap.commit_log_files
    ]
    return plan_cleanup(files, now_ms=now_ms, physic_ratio=physic, logics_ratio=logics, config=cfg,
                        tz=zone)
