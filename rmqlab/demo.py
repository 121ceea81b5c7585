"""``rmqlab demo``: one guided run of the engine, told step by step and saved as an HTML report.

On a temporary store with tiny files and a manual clock: write messages across three topics
(files roll), flush, write a few more that are never flushed, lose power
(:func:`rmqlab.testing.crash.simulate_power_loss`: every byte past a file's flushed position is
gone, ``abort`` stays), reopen (abnormal recovery: the report shows the plan — where the walk
started, what it checked, where it cut and why), query by key through the index, and plan the
cleanup of 73 hours later at 04:00 (delete-when hour), then the same hour with the disk 86 %
full. The report is one self-contained HTML file (plotly.js inlined: it opens offline).

Needs plotly (the ``widgets`` extra); no Jupyter, no widgets.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

__all__ = ["run_demo"]

_TOPICS = ("Orders", "Payments", "Audit")
_HOUR_MS = 3_600_000


def _at_or_after_hour(ms: int, hour: int, tz: Any) -> int:
    """The first ``hour``:00 local time at or after ``ms``."""
    now = datetime.fromtimestamp(ms / 1000, tz)
    target = now.replace(hour=hour, minute=0, second=0, microsecond=0)
    if target < now:
        target += timedelta(days=1)
    return int(target.timestamp() * 1000)


def run_demo(out_html: str, *, keep_store: bool = False, echo: Callable[[str], Any] = print,
             messages: int = 150, unflushed: int = 12) -> dict[str, Any]:
    """Run the demo, write the report to ``out_html`` and return a summary dict.

    ``keep_store`` keeps the temporary store dir (its path is in the summary as ``store_dir``);
    ``echo`` receives each step as one line of text (the report repeats them).
    """
    from rmqlab.clock import ManualClock
    from rmqlab.config import MessageStoreConfig
    from rmqlab.files.fs import FixedDiskUsage
    from rmqlab.store.message import Message
    from rmqlab.store.message_store import MessageStore
    from rmqlab.testing.crash import IndexFlushRecorder, simulate_power_loss
    from rmqlab.widgets import figures, require_widgets
    from rmqlab.widgets._source import COMMITLOG, Source

    require_widgets(widgets=False)
    log: list[str] = []

    def say(line: str) -> None:
        log.append(line)
        echo(line)

    started = time.monotonic()
    store_dir = tempfile.mkdtemp(prefix="rmqlab-demo-")
    # Files get real mtimes (cleanup reads them), so the manual clock starts at the real time.
    clock = ManualClock(time.time_ns() // 1_000_000)
    config = MessageStoreConfig.small(store_dir, mapped_file_size_commit_log=16 * 1024)
    # A simulated disk, 50 % full: this machine's own disk must not change the story (above 90 %
    # the real probe makes the store refuse every put, above 85 % cleanup deletes at once).
    disk = FixedDiskUsage(0.50)
    sections: list[tuple[str, Any]] = []
    summary: dict[str, Any] = {"store_dir": store_dir if keep_store else None, "report": os.path.abspath(out_html)}
    store = None
    acked = 0
    try:
        with IndexFlushRecorder() as recorder:
            store = MessageStore.open(store_dir, config, clock=clock, threaded=False, disk_probe=disk)
            say(f"1. opened an empty store in {store_dir}: CommitLog files of {config.mapped_file_size_commit_log:,} "
                f"bytes, ConsumeQueue files of 64 units, index files of 64 slots / 256 items; services are stepped "
                f"by hand, the clock is manual and the disk a simulated one, {disk.ratio:.0%} full")
            for i in range(messages):
                topic = _TOPICS[i % len(_TOPICS)]
                body = (f"{topic} event {i}: " + "x" * (40 + (i * 37) % 300)).encode()
                acked += store.put_message(Message(topic, body, tags=f"tag{i % 4}", keys=[f"{topic.lower()}-{i}"],
                                                   queue_id=i % 2)).ok
                clock.advance(250)
                if i % 25 == 24:
                    store.step()
            store.step()
            flushed = store.flush()
            files = store.commit_log.mapped_file_queue.mapped_files
            refused = f" ({messages - acked} refused)" if acked < messages else ""
            say(f"2. wrote {messages} messages{refused} across {', '.join(_TOPICS)} (2 queues each): the CommitLog "
                f"rolled into {len(files)} files (each ends with a blank record); dispatch built the consume queues "
                f"and the index; flushed to offset {flushed:,}")
            src = Source(store)
            for i in range(unflushed):
                acked += store.put_message(Message("Orders", f"late order {i}".encode(), tags="late",
                                                   keys=[f"late-{i}"], queue_id=0)).ok
            max_before = store.get_max_phy_offset()
            say(f"3. wrote {unflushed} more messages and did not flush them: the CommitLog ends at {max_before:,}, "
                f"flushed only to {store.commit_log.mapped_file_queue.flushed_where:,}")
            sections.append(("Mapped files before the crash", figures.mapped_files_figure(src.queue_state(COMMITLOG))))
            loss = simulate_power_loss(store, recorder)
            store = None
            zeroed = sum(loss.zeroed.values())
            say(f"4. power loss: every byte past each file's flushed position is gone ({zeroed:,} bytes zeroed in "
                f"{len(loss.zeroed)} file(s), {len(loss.deleted)} never-flushed file(s) removed); 'abort' stays, "
                f"so the next open knows the last exit was not clean")

        store = MessageStore.open(store_dir, config, clock=clock, threaded=False, disk_probe=disk)
        plan = store.recovery_plan
        assert plan is not None
        src = Source(store)
        say(f"5. reopened: {plan.mode} recovery started at file {plan.start_file} ({plan.start_reason}); "
            f"{plan.records_checked} records checked; stopped at {plan.stop_offset:,}: {plan.stop_reason}; "
            f"valid data ends at {plan.process_offset:,}, so {max_before - plan.process_offset:,} bytes "
            f"({unflushed} unflushed messages) are lost")
        sections.append(("Recovery: where the walk started, what it checked, where it cut", figures.recovery_figure(
            plan, src.queue_state(COMMITLOG).files)))
        sections.append(("Recovery steps", figures.recovery_steps_html(plan)))
        store.wait_dispatched()

        key_topic, key = "Orders", "orders-3"
        result = store.query_message(key_topic, key)
        offsets = [m.commit_log_offset for m in result.messages]
        say(f"6. query by key {key_topic}#{key}: {len(result.messages)} message(s) at CommitLog offset(s) {offsets} "
            f"(the index hashes 'topic#key' into a slot and walks the slot's chain)")
        lost = store.query_message("Orders", "late-0")
        say(f"   query Orders#late-0 (written, never flushed): {len(lost.messages)} message(s)")
        records: list[Any] = []
        for mf in src.mapped_files(COMMITLOG):
            records.extend(src.scan_records(mf)[0])
        sections.append(("CommitLog records after recovery (colour = topic, grey = blank end-of-file records)",
                         figures.commit_log_figure(records, src.queue_state(COMMITLOG).files)))
        if offsets:
            rec, raw = src.read_record(offsets[0])
            sections.append((f"The record of {key_topic}#{key}, field by field", figures.record_html(
                rec, raw, offset=offsets[0])))
        base, units = src.cq_units("Orders", 0)
        sections.append(("ConsumeQueue Orders/0", figures.consume_queue_figure("Orders", 0, base, units,
                                                                               dispatch=src.dispatch_state())))
        index_files = src.index_files()
        if index_files:
            from rmqlab.inspect.frames import index_items

            # the file holding the key (index files roll every 255 items), else the newest
            f, walk = index_files[-1], src.index_walk(key_topic, key, index_files[-1])
            for candidate in reversed(index_files):
                steps = src.index_walk(key_topic, key, candidate)
                if any(w.message_has_key for w in steps):
                    f, walk = candidate, steps
                    break
            lengths = figures.chain_lengths(index_items(f)["key_hash"], f.hash_slot_num)
            sections.append((f"Index file {f.name}: slot occupancy", figures.index_heatmap_figure(lengths)))
            sections.append(("Index chain lengths", figures.chain_histogram_figure(lengths)))
            sections.append((f"Index walk for {key_topic}#{key}", figures.index_walk_figure(
                walk, key=f"{key_topic}#{key}")))
            summary["index_walk_steps"] = len(walk)
            summary["index_collisions"] = sum(w.collision for w in walk)

        tz = clock.tz()
        when = _at_or_after_hour(clock.now_ms() + 73 * _HOUR_MS, 4, tz)
        cleanup = store.plan_cleanup(now_ms=when, disk_ratio=0.5)
        say(f"7. cleanup planned for {cleanup.now_local[:16]} (73 h later, at the 04:00 delete hour), disk 50 %: "
            f"{cleanup.summary()}")
        for d in cleanup.files:
            say(f"   {d.name}: {d.decision} — {d.reason}")
        forced = store.plan_cleanup(now_ms=clock.now_ms(), disk_ratio=0.86)
        say(f"8. the same files right now with the disk 86 % full: {forced.summary()}")
        sections.append(("Cleanup 73 h later at 04:00 (disk 50 %)", figures.cleanup_timeline_figure(cleanup)))
        sections.append(("Disk usage vs thresholds", figures.disk_gauge_figure(cleanup)))
        sections.append(("Cleanup decisions", figures.cleanup_table_html(cleanup)))
        sections.append(("Cleanup now with the disk 86 % full", figures.cleanup_timeline_figure(forced)))
        sections.append(("Mapped files after recovery", figures.mapped_files_figure(src.queue_state(COMMITLOG))))

        summary.update({
            "messages_written": messages + unflushed,
            "messages_acknowledged": acked,
            "messages_unflushed": unflushed,
            "commit_log_files": len(src.mapped_files(COMMITLOG)),
            "flushed_before_crash": flushed,
            "max_offset_before_crash": max_before,
            "bytes_zeroed": zeroed,
            "recovery": {"mode": plan.mode, "start_file": plan.start_file, "records_checked": plan.records_checked,
                         "process_offset": plan.process_offset, "stop_reason": plan.stop_reason},
            "query": {"topic": key_topic, "key": key, "offsets": offsets, "late_found": len(lost.messages)},
            "cleanup": {"now_local": cleanup.now_local, "trigger": cleanup.trigger, "to_delete": cleanup.to_delete,
                        "kept": cleanup.kept},
            "cleanup_disk_86": {"trigger": forced.trigger, "to_delete": forced.to_delete},
        })
        say(f"9. report written to {os.path.abspath(out_html)} ({time.monotonic() - started:.1f} s)")
        page = figures.report_html("rmqlab demo: write, crash, recover, query, clean up", sections, log=log)
        os.makedirs(os.path.dirname(os.path.abspath(out_html)), exist_ok=True)
        with open(out_html, "w", encoding="utf-8") as fh:
            fh.write(page)
        summary["steps"] = list(log)
        return summary
    finally:
        if store is not None:
            store.shutdown()
        if not keep_store:
            shutil.rmtree(store_dir, ignore_errors=True)
