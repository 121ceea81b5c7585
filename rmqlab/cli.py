"""The ``rmqlab`` command: thin argument parsing over the library; heavy imports inside commands.

Errors a user can cause (no such dir, not a store, bad option) print one line and exit 2.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from rmqlab.errors import RmqlabError

__all__ = ["main"]

TABLE_ROWS = 1000  # rows a table shows without --limit: a person reads them, a script asks for JSON


def _sample_store() -> Path:
    return Path(__file__).resolve().parent.parent / "data" / "clean-small"


class _Group(click.Group):
    """Turns every error a user can cause into one line ``rmqlab: error: ...`` and exit code 2."""

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        # the engine logs what RocketMQ logs ("[BUG] ..."): without a logging set-up of the caller's
        # own, Python would print such records bare on stderr; they go out as rmqlab warnings instead
        for stream in (sys.stdout, sys.stderr):  # a file name that is not UTF-8 prints escaped, not as a crash
            try:
                stream.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
            except (AttributeError, ValueError, OSError):
                pass
        engine_log, handler = logging.getLogger("rmqlab"), None
        if not logging.getLogger().handlers and not engine_log.handlers:
            handler = _EchoHandler(logging.WARNING)
            engine_log.addHandler(handler)
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.Abort:
            _fail("aborted", 1, standalone_mode)
        except click.ClickException as e:  # usage errors (bad option, missing argument) included
            _fail(e.format_message(), 2, standalone_mode)
        except (RmqlabError, OSError) as e:
            _fail(str(e) if not isinstance(e, OSError) or not e.filename else f"{e.filename}: {e.strerror}",
                  2, standalone_mode)
        finally:
            if handler is not None:
                engine_log.removeHandler(handler)
        if not standalone_mode:
            return rv
        sys.exit(rv if isinstance(rv, int) else 0)


class _EchoHandler(logging.Handler):
    """Log records as ``rmqlab: warning: message`` lines on stderr (click's, so CliRunner sees
    them): what the engine logs as RocketMQ would ("[BUG] ...") is damage seen, not the command
    failing (``rmqlab: error:`` stays the last line of a command that failed)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            click.echo(f"rmqlab: warning: {record.getMessage()}", err=True)
        except Exception:  # a handler never raises into the code that logged
            self.handleError(record)


def _fail(message: str, code: int, standalone_mode: bool) -> None:
    click.echo(f"rmqlab: error: {' '.join(message.split())}", err=True)
    if standalone_mode:
        sys.exit(code)
    raise SystemExit(code)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="rmqlab")
def main() -> None:
    """rmqlab: learn, teach and operate Apache RocketMQ's storage engine.

    Every inspection command opens the store read-only (it never writes, locks or recovers);
    add --json or --json-lines for scripts (see README "Scripted inspection").

    Example: rmqlab inspect data/clean-small
    """


@main.command()
@click.argument("store", required=False, type=click.Path(file_okay=False, path_type=Path))
@click.option("--records", default=5, show_default=True, help="How many records of STORE to print.")
@click.option("--out", "out_html", default="rmqlab-demo-report.html", show_default=True,
              type=click.Path(dir_okay=False, path_type=Path), help="Where to write the HTML report.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of the story.")
@click.option("--keep", is_flag=True, help="Keep the temporary store the demo writes (default: delete it).")
def demo(store: Path | None, records: int, out_html: Path, as_json: bool, keep: bool) -> None:
    """The main job: read a real RocketMQ store, then run the engine's whole story on a temp store.

    1. Reads STORE (default: data/clean-small, written by Apache RocketMQ 4.9.8) read-only and
       prints its topics, queues and first records.
    2. On an embedded temporary store: writes messages across topics, rolls files, flushes,
       simulates a power loss, recovers, queries by key, and plans cleanup 73 hours later, printing
       each step; then writes a self-contained HTML report with the widgets' figures (--out).

    Example: rmqlab demo --records 3 --out /tmp/report.html
    """
    from rmqlab import render
    from rmqlab.demo import run_demo
    from rmqlab.inspect import open_snapshot

    path = store or _sample_store()
    if store is None and not path.is_dir():
        raise click.ClickException(f"sample store not found at {path} (run from a clone of rmqlab)")
    out: dict[str, Any] = {"store": str(path)}
    with open_snapshot(path) as snap:
        topics = snap.topics()
        first = snap.messages(limit=records)
        out["commit_log_files"] = len(snap.files().query("kind == 'commitlog'"))
        out["abort_present"] = snap.abort_present
        out["queues"] = topics.to_dict(orient="records")
        out["first_records"] = first.to_dict(orient="records")
    c = render.console
    if not as_json:
        c.print(f"[bold]1. Reading {path}[/bold] ({out['commit_log_files']} CommitLog files, abort file "
                f"{'present' if out['abort_present'] else 'absent'})")
        render.table("Messages per topic and queue", list(topics.columns), topics.itertuples(index=False))
        cols = [k for k in ("commit_log_offset", "store_size", "topic", "queue_id", "queue_offset", "tags",
                            "keys", "msg_id") if k in first.columns]
        render.table(f"First {records} records", cols, first[cols].itertuples(index=False))
        c.print("\n[bold]2. The engine's story on a temporary store[/bold]")
    summary = run_demo(str(out_html), keep_store=keep, echo=(lambda line: None) if as_json else c.print)
    out["demo"] = summary
    if as_json:
        render.print_json(out)
    else:
        c.print(f"\nReport: [bold]{summary.get('report', out_html)}[/bold] (open it in a browser)")


@main.command()
@click.option("--no-browser", is_flag=True, help="Do not open a browser (print the URL).")
@click.option("--port", type=click.IntRange(1, 65535), default=None, help="Port for JupyterLab.")
def lab(no_browser: bool, port: int | None) -> None:
    """Open JupyterLab on the teaching notebooks (needs the widgets extra).

    Example: rmqlab lab --no-browser --port 8888
    """
    import subprocess

    notebooks = Path(__file__).resolve().parent.parent / "notebooks"
    if not notebooks.is_dir():
        raise click.ClickException(f"notebooks not found at {notebooks} (run from a clone of rmqlab)")
    try:
        import jupyterlab  # noqa: F401
    except ImportError:
        raise click.ClickException("JupyterLab is missing: pip install 'rmqlab[widgets]'") from None
    cmd = [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={notebooks}"]
    if no_browser:
        cmd.append("--no-browser")
    if port:
        cmd.append(f"--port={port}")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    raise SystemExit(subprocess.call(cmd))


# ====================================================================================== inspection
# Shared options: every inspection command takes STORE, opens it read-only, and prints tables for
# people or --json (one document) / --json-lines (one object per line) for scripts.


def _output_options(f: Any) -> Any:
    f = click.option("--json-lines", "json_lines", is_flag=True, help="One JSON object per line.")(f)
    f = click.option("--json", "as_json", is_flag=True, help="One JSON document.")(f)
    return f


def _store_options(f: Any) -> Any:
    f = click.option("--index-num", type=click.IntRange(min=1), default=None,
                     help="Items per index file (auto-detected for the default and small layouts).")(f)
    f = click.option("--hash-slot-num", type=click.IntRange(min=1), default=None,
                     help="Hash slots per index file (auto-detected for the default and small layouts).")(f)
    f = click.argument("store", type=click.Path(path_type=Path))(f)
    return f


def _mode(as_json: bool, json_lines: bool) -> str:
    if as_json and json_lines:
        raise click.UsageError("--json and --json-lines are mutually exclusive")
    return "json" if as_json else "json-lines" if json_lines else "table"


def _open(store: Path, hash_slot_num: int | None, index_num: int | None) -> Any:
    from rmqlab.inspect import open_snapshot

    if (hash_slot_num is None) != (index_num is None):
        raise click.UsageError("--hash-slot-num and --index-num go together")
    snap = open_snapshot(store, hash_slot_num=hash_slot_num, index_num=index_num)
    if snap.dledger_commit_log:  # every answer about messages is then about commitlog/ alone
        click.echo(f"rmqlab: warning: {snap.dledger_commit_log}: a DLedger CommitLog (enableDLegerCommitLog), not "
                   "read: the broker's messages are there, so commitlog/ shows none of them", err=True)
    return snap


def _warn_damage(damage: list[Any]) -> None:
    for d in damage:
        click.echo(f"rmqlab: warning: damaged record in commitlog/{d.file} at offset {d.offset}: {d.reason}"
                   f"{' (' + d.detail + ')' if d.detail else ''}; walk of that file stopped", err=True)


def _warn_physical_offset(file: str | None, at: int, says: int) -> None:
    click.echo(f"rmqlab: warning: the record at CommitLog offset {at} ({file}) says it is at {says} (its "
               "PHYSICALOFFSET field: damaged, or a stale record of a reused file); commit_log_offset and msg_id "
               "show the field, as RocketMQ decodes it (rmqlab verify reports it)", err=True)


def _warn_short_index(snap: Any) -> None:
    """Index files too short for their layout are skipped by every index command: say which."""
    for path, size in snap.index_short:
        click.echo(f"rmqlab: warning: index/{os.path.basename(path)} is {size} bytes, shorter than its layout; "
                   "skipped (rmqlab verify reports it)", err=True)


def _body(rec: Any, body: str) -> dict[str, Any]:
    d: dict[str, Any] = rec.to_dict(body="hex" if body == "hex" else "none")
    if body == "text":
        d["body"] = rec.body.decode("utf-8", errors="replace")
    return d


_BODY = click.option("--body", type=click.Choice(["none", "text", "hex"]), default="none", show_default=True,
                     help="How to show message bodies.")


@main.command()
@_store_options
@_output_options
def inspect(store: Path, hash_slot_num: int | None, index_num: int | None, as_json: bool, json_lines: bool) -> None:
    """Summary of a store: files per kind, topics/queues with offsets and lag, checkpoint, abort.

    JSON keys: store, abort_present, commit_log {files, file_size, min_offset, max_offset},
    consume_queue_file_size, batch_consume_queues (5.x BatchCQ queues), index {files, hash_slot_num,
    index_num, error}, files_per_kind
    [{kind, files, bytes}], queues [topics() rows], checkpoint (or null).

    Example: rmqlab inspect data/clean-small --json
    """
    from rmqlab import render

    mode = _mode(as_json, json_lines)
    with _open(store, hash_slot_num, index_num) as snap:
        files = snap.files()
        per_kind = files.groupby("kind", sort=True)["size"].agg(["count", "sum"]).reset_index()
        kinds = [{"kind": r.kind, "files": int(r.count), "bytes": int(r.sum)} for r in per_kind.itertuples()]
        queues = snap.topics()
        cp = snap.checkpoint()
        out = {
            "store": snap.path,
            "abort_present": snap.abort_present,
            "commit_log": {"files": len(snap.commit_log_files), "file_size": snap.commit_log_file_size,
                           "min_offset": snap.min_offset, "max_offset": snap.max_offset},
            "consume_queue_file_size": snap.consume_queue_file_size,
            "batch_consume_queues": len(snap.batch_consume_queues),
            "index": {"files": len(snap.index_paths), "hash_slot_num": snap.hash_slot_num,
                      "index_num": snap.index_num, "error": snap.index_error or None},
            "files_per_kind": kinds,
            "queues": render.frame_rows(queues),
            "checkpoint": render.frame_rows(cp)[0] if len(cp) else None,
        }
    if render.emit(out, out["queues"], mode):
        return
    c = render.console
    cl = out["commit_log"]
    abort = "[red]present[/red] (unclean exit)" if out["abort_present"] else "absent"
    c.print(f"[bold]{out['store']}[/bold]  abort file {abort}")
    c.print(f"CommitLog: {cl['files']} files of {cl['file_size']} bytes, "
            f"offsets {cl['min_offset']}..{cl['max_offset']}")
    render.table("Files per kind", ["kind", "files", "bytes"], ([k["kind"], k["files"], k["bytes"]] for k in kinds))
    render.frame_table("Topics and queues (CQ offsets, CommitLog counts, lag = records not yet in the CQ)", queues,
                       ["topic", "queue_id", "min_offset", "max_offset", "messages", "bytes", "lag"])
    if out["checkpoint"]:
        render.table("Checkpoint", ["field", "value", "utc"],
                     ([k, v, render.ms_to_iso(v) if "timestamp" in k else ""] for k, v in out["checkpoint"].items()))
    else:
        c.print("Checkpoint: missing")


def _check_topic(topic: str) -> None:
    """A topic name no broker accepts can only be a typo: an error (InvalidTopic, exit 2), not
    "0 messages". Checked as a consume queue directory name, so retry/DLQ/LMQ names pass."""
    from rmqlab.codec.names import validate_topic

    validate_topic(topic, max_length=255)


@main.command()
@_store_options
@click.option("--topic", help="Only this topic.")
@click.option("--queue", "queue_id", type=click.IntRange(min=0), help="Only this queue id.")
@click.option("--from-offset", type=click.IntRange(min=0), default=None, help="Start at this CommitLog offset.")
@click.option("--limit", type=click.IntRange(min=0), default=None, help="At most this many messages.")
@_BODY
@_output_options
def messages(store: Path, hash_slot_num: int | None, index_num: int | None, topic: str | None,
             queue_id: int | None, from_offset: int | None, limit: int | None, body: str, as_json: bool,
             json_lines: bool) -> None:
    """Messages in CommitLog order (damage is reported on stderr, never a traceback).

    JSON: a list of messages (--json-lines: one per line) with keys commit_log_offset, store_size,
    topic, queue_id, queue_offset, tags, tags_code, keys, uniq_key, msg_id, flag, sys_flag,
    born_timestamp, store_timestamp, born_host, store_host, body_length, body_crc, crc_ok, file,
    and body (text or hex) unless --body none. JSON is written as the log is read (constant
    memory on any store); the table shows the first 1,000 messages unless --limit is given.

    Example: rmqlab messages data/clean-small --topic TopicA --queue 1 --limit 5 --body text
    """
    from rmqlab import render
    from rmqlab.codec.message import MessageRecord
    from rmqlab.inspect.frames import message_row

    if topic is not None:
        _check_topic(topic)
    mode = _mode(as_json, json_lines)
    # a table is read by a person: the first TABLE_ROWS unless --limit says otherwise
    cap = limit if limit is not None or mode != "table" else TABLE_ROWS + 1
    damage: list[Any] = []
    elsewhere: list[tuple[str, int, int]] = []  # (file, position, what its PHYSICALOFFSET says)

    def rows(snap: Any) -> Iterator[dict[str, Any]]:
        n = 0
        if cap == 0:
            return
        for file, off, rec in snap.iter_records(start=from_offset, damage=damage):
            if not isinstance(rec, MessageRecord):
                continue
            if (topic is not None and rec.topic != topic) or (queue_id is not None and rec.queue_id != queue_id):
                continue
            if rec.commit_log_offset != off:
                elsewhere.append((f"commitlog/{file}", off, rec.commit_log_offset))
            row = message_row(rec, file)
            if body == "text":
                row["body"] = rec.body.decode("utf-8", errors="replace")
                if mode == "table" and len(row["body"]) > 60:
                    row["body"] = row["body"][:60] + "..."
            elif body == "hex":
                row["body"] = rec.body.hex()
            yield row
            n += 1
            if cap is not None and n >= cap:
                return

    with _open(store, hash_slot_num, index_num) as snap:
        if from_offset is not None:  # any byte: the walk starts at the first record from there
            at = snap.record_start_at_or_after(from_offset)
            if at is not None and at != from_offset:
                click.echo(f"rmqlab: note: no message starts at CommitLog offset {from_offset}; starting at the "
                           f"next one, {at}", err=True)
                from_offset = at
        # scripts get each message as it is read: a store's messages need not fit in memory
        if mode == "json-lines":
            render.print_json_lines(rows(snap))
        elif mode == "json":
            render.print_json_array(rows(snap))
        else:
            got = list(rows(snap))
    if mode == "table":
        more = limit is None and len(got) > TABLE_ROWS
        got = got[:TABLE_ROWS] if more else got
        cols = ["commit_log_offset", "store_size", "topic", "queue_id", "queue_offset", "tags", "keys", "msg_id"]
        cols += ["body"] if body != "none" else ["body_length"]
        render.table(f"{'first ' if more else ''}{len(got)} messages", cols, ([r[c] for c in cols] for r in got))
        if more:
            click.echo(f"rmqlab: showing the first {TABLE_ROWS:,} messages; --limit N shows N, --json-lines "
                       "streams them all", err=True)
    for file, at, says in elsewhere[:10]:
        _warn_physical_offset(file, at, says)
    if len(elsewhere) > 10:
        click.echo(f"rmqlab: warning: {len(elsewhere) - 10:,} more records say they are elsewhere", err=True)
    _warn_damage(damage)


@main.command()
@_store_options
@click.argument("topic")
@click.argument("queue_id", metavar="QUEUE", type=click.IntRange(min=0))
@click.option("--from", "start", type=click.IntRange(min=0), default=None, help="First queue offset.")
@click.option("--limit", type=click.IntRange(min=0), default=None, help="At most this many units.")
@click.option("--tags", "tags", default=None, metavar="EXPR",
              help='Only units a consumer subscribed to EXPR ("TagA || TagB", "*" for all) is served: '
                   "the broker's tag filter, by tags code.")
@_output_options
def cq(store: Path, hash_slot_num: int | None, index_num: int | None, topic: str, queue_id: int,
       start: int | None, limit: int | None, tags: str | None, as_json: bool, json_lines: bool) -> None:
    """The ConsumeQueue units of one queue (valid units; pre-blank units left out).

    JSON: a list of {queue_offset, commit_log_offset, size, tags_code, file, position, ext_address},
    written as read, except that a unit holding a ConsumeQueueExt address (enableConsumeQueueExt)
    shows it as ext_address (else null) and the real tags code from its ext unit as tags_code (null
    when it resolves to nothing, as RocketMQ's readers pass it); the table shows the first 1,000 units unless
    --limit is given. A 5.x BatchConsumeQueue (batchconsumequeue/, topics of queue.type=BatchCQ) gives one
    unit per record instead: {queue_offset, batch_size, commit_log_offset, size, tags_code, store_timestamp,
    file, position}, from the unit holding queue offset --from.

    --tags keeps the units RocketMQ's tag filter serves a consumer subscribed to EXPR: tags code equal
    to the Java hash of one of its tags (so a hash collision passes, as on the broker; the client
    re-checks the tag string), or no tags code to compare (an unresolved ext unit); --limit then
    counts matching units. A count goes to stderr: how many of the units read matched.

    Example: rmqlab cq data/clean-small TopicA 0 --from 10 --limit 5
    """
    from rmqlab.store.message_filter import TagFilter

    mode = _mode(as_json, json_lines)
    with _open(store, hash_slot_num, index_num) as snap:
        if (topic, queue_id) not in snap.consume_queues and (topic, queue_id) not in snap.batch_consume_queues:
            _check_topic(topic)  # "../x" or "" is a typo, not "no consume queue ../x/0" (a damaged dir's name is shown)
        read_limit = limit if tags is None else None
        if (topic, queue_id) in snap.batch_consume_queues and (topic, queue_id) not in snap.consume_queues:
            df = snap.batch_consume_queue(topic, queue_id, start, read_limit)
        else:
            df = snap.consume_queue(topic, queue_id, start, read_limit)
    title = f"{topic}/{queue_id}: {len(df)} units"
    if tags is not None:
        flt = TagFilter(tags)
        read = len(df)
        if not flt.match_all:
            codes = df["tags_code"]
            df = df[codes.isna() | codes.isin(list(flt.code_set))]
        if limit is not None:
            df = df.iloc[:limit]
        title = f"{topic}/{queue_id}: {len(df)} units for {flt.expression!r}"
        click.echo(f"rmqlab: {len(df):,} of {read:,} units read match {flt.expression!r}"
                   + (f" (--limit {limit})" if limit is not None else ""), err=True)
    _emit_frame(df, mode, title, "units", capped=limit is None)


@main.command()
@_store_options
@click.option("--delay-levels", default=None, metavar="LEVELS",
              help='The broker\'s messageDelayLevel, e.g. "1s 5s 10s" (default: RocketMQ\'s 18 levels).')
@_output_options
def delays(store: Path, hash_slot_num: int | None, index_num: int | None, delay_levels: str | None, as_json: bool,
           json_lines: bool) -> None:
    """Delayed messages: per delay level, how far delivery got (config/delayOffset.json) and what
    still waits in its SCHEDULE_TOPIC_XXXX queue.

    JSON: {store, source ("file", "bak" or null), error, levels: [{level, queue_id, delay_ms, offset,
    min_offset, max_offset, waiting, next_due_ms}]}; offset is null when the file has none for the
    level (delivery starts at 0), next_due_ms when nothing waits.

    Example: rmqlab delays data/clean-small --json
    """
    from rmqlab import render
    from rmqlab.errors import ConfigError
    from rmqlab.inspect.frames import delay_levels as parse_levels

    mode = _mode(as_json, json_lines)
    if delay_levels is not None:
        try:
            parse_levels(delay_levels)
        except ConfigError as e:
            raise click.BadParameter(str(e), param_hint="--delay-levels") from None
    with _open(store, hash_slot_num, index_num) as snap:
        df = snap.delays(delay_levels)
        rows = render.frame_rows(df)
        out = {"store": snap.path, "source": df.attrs["source"], "error": df.attrs["error"] or None, "levels": rows}
    if render.emit(out, rows, mode):
        return
    source = {"file": "config/delayOffset.json", "bak": "config/delayOffset.json.bak"}.get(out["source"] or "",
                                                                                          "no delayOffset.json")
    render.table(f"Delay levels ({source})", ["level", "queue", "delay", "delivered to", "queue max", "waiting",
                                              "next due (UTC)"],
                 ([r["level"], r["queue_id"], r["delay_ms"], "-" if r["offset"] is None else r["offset"],
                   r["max_offset"], r["waiting"], render.ms_to_iso(r["next_due_ms"] or 0)] for r in rows))
    if out["error"]:
        click.echo(f"rmqlab: {out['error']}", err=True)


@main.command()
@_store_options
@click.option("--wheel", is_flag=True, help="Show the timer wheel's non-empty slots instead of the messages.")
@click.option("--limit", type=click.IntRange(min=0), default=None, help="At most this many rows.")
@click.option("--precision-ms", type=click.IntRange(1, 2**31 - 1), default=1000, show_default=True,
              help="The broker's timerPrecisionMs (not stored in the files).")
@_output_options
def timers(store: Path, hash_slot_num: int | None, index_num: int | None, wheel: bool, limit: int | None,
           precision_ms: int, as_json: bool, json_lines: bool) -> None:
    """5.x timer messages (TIMER_DELIVER_MS / TIMER_DELAY_SEC): which are still pending, when each
    is due, for which real topic and queue; from timerwheel, timerlog/ and config/timercheck.

    Pending: units in the wheel's slots at or after the checkpoint's read time (stage "wheel"), and
    rmq_sys_wheel_timer messages after its queue offset, not yet in the wheel (stage "queue").
    JSON: {store, checkpoint, note, damage, timers: [{stage, kind, slot_ms, due_ms, real_topic,
    real_queue_id, uniq_key, keys, tags, commit_log_offset, size_py, timer_log_offset, queue_offset,
    enqueue_ms, roll_times, cancelled, problem}]}; with --wheel, "slots" instead of "timers".
    A store without timer files (every 4.9.8 store) gives no rows and a note.

    Example: rmqlab timers path/to/store --limit 20
    """
    from rmqlab import render

    mode = _mode(as_json, json_lines)
    with _open(store, hash_slot_num, index_num) as snap:
        cp = snap.timer_checkpoint()
        df = snap.timer_wheel(precision_ms) if wheel else snap.timers(precision_ms, limit=limit)
        if wheel and limit is not None:
            df = df.iloc[:limit]
        rows = render.frame_rows(df)
        out = {"store": snap.path, "checkpoint": (render.frame_rows(cp) or [None])[0],
               "note": df.attrs.get("note") or cp.attrs.get("note") or None, "damage": df.attrs.get("damage", []),
               "slots" if wheel else "timers": rows}
    if render.emit(out, rows, mode):
        return
    c = out["checkpoint"]
    if c:
        click.echo(f"config/timercheck: read time {render.ms_to_iso(c['last_read_time_ms'])}, queue offset "
                   f"{c['last_timer_queue_offset']}, timerlog flushed to {c['last_timer_log_flush_pos']}")
    if wheel:
        render.table("Timer wheel (non-empty slots)", ["slot", "time (UTC)", "first pos", "last pos", "num",
                                                       "pending", "index ok"],
                     ([r["slot"], render.ms_to_iso(r["time_ms"]), r["first_pos"], r["last_pos"], r["num"],
                       r["pending"], r["index_ok"]] for r in rows))
    else:
        render.table("Pending timer messages", ["stage", "kind", "due (UTC)", "real topic", "queue", "uniq key",
                                                "commit log offset", "cancelled", "problem"],
                     ([r["stage"], r["kind"] or "-", render.ms_to_iso(r["due_ms"] or 0), r["real_topic"] or "-",
                       "-" if r["real_queue_id"] is None else r["real_queue_id"], r["uniq_key"] or "-",
                       "-" if r["commit_log_offset"] is None else r["commit_log_offset"],
                       "yes" if r["cancelled"] else "", r["problem"]] for r in rows))
    if out["note"]:
        click.echo(f"rmqlab: {out['note']}", err=True)
    for d in out["damage"]:
        click.echo(f"rmqlab: warning: damage in {d['file']} at offset {d['offset']}: {d['reason']}"
                   f"{' (' + d['detail'] + ')' if d['detail'] else ''}", err=True)


def _emit_frame(df: Any, mode: str, title: str, what: str, *, capped: bool = True) -> None:
    """A frame as streamed JSON / JSON lines, or a table of its first TABLE_ROWS rows
    (``capped``: the user gave no limit of their own) with a note on stderr saying so."""
    from rmqlab import render

    if mode == "json-lines":
        render.print_json_lines(render.iter_frame_rows(df))
    elif mode == "json":
        render.print_json_array(render.iter_frame_rows(df))
    elif capped and len(df) > TABLE_ROWS:
        render.frame_table(f"{title} (the first {TABLE_ROWS:,})", df.iloc[:TABLE_ROWS])
        click.echo(f"rmqlab: showing the first {TABLE_ROWS:,} of {len(df):,} {what}; --json or --json-lines "
                   "has them all", err=True)
    else:
        render.frame_table(title, df)


@main.command()
@_store_options
@click.option("--msg-id", help="Offset msgId (store host + offset), or a UNIQ_KEY (searched).")
@click.option("--offset", "phy_offset", type=click.IntRange(min=0), help="CommitLog offset of the record.")
@_BODY
@_output_options
def get(store: Path, hash_slot_num: int | None, index_num: int | None, msg_id: str | None,
        phy_offset: int | None, body: str, as_json: bool, json_lines: bool) -> None:
    """One fully decoded record, by offset msgId, UNIQ_KEY or CommitLog offset.

    An offset msgId is decoded to its CommitLog offset; when no record with that store host
    starts there, the id is looked up as a UNIQ_KEY (client message id) by walking the log.
    JSON keys: msg_id, uniq_key, topic, queue_id, queue_offset, commit_log_offset, store_size,
    version, magic, body_crc, crc_ok, prop_crc_ok (the 5.x __CRC32# property holds the CRC of the
    rest of the record; null when the record has none), flag, sys_flag, transaction_type,
    born_timestamp, born_host, store_timestamp, store_host, reconsume_times,
    prepared_transaction_offset, tags, tags_code, keys, properties, body_length, file, and body
    (unless --body none).

    Example: rmqlab get data/clean-small --offset 0 --body text
    """
    from rmqlab import render
    from rmqlab.codec.message import MessageRecord
    from rmqlab.codec.msg_id import InvalidMessageId, decode_offset_msg_id
    from rmqlab.codec.prop_crc import tail_prop_crc_ok

    mode = _mode(as_json, json_lines)
    if (msg_id is None) == (phy_offset is None):
        raise click.UsageError("give exactly one of --msg-id and --offset")
    with _open(store, hash_slot_num, index_num) as snap:
        rec, at = None, phy_offset
        if phy_offset is not None:
            rec = snap.read_record(phy_offset, any_physical_offset=True)
            if rec is None:
                raise click.ClickException(f"no record starts at CommitLog offset {phy_offset}")
        else:
            assert msg_id is not None
            try:
                _ip, port, off = decode_offset_msg_id(msg_id)
                rec = snap.read_record(off)
                if rec is not None and (rec.store_host[1] != port or rec.msg_id != msg_id.upper()):
                    rec = None
            except InvalidMessageId:
                if not all(ch in "0123456789abcdefABCDEF" for ch in msg_id) or not msg_id:
                    raise
            if rec is None:
                for _, where, r in snap.iter_records(damage=[]):
                    if isinstance(r, MessageRecord) and r.uniq_key is not None and r.uniq_key.upper() == msg_id.upper():
                        rec, at = r, where
                        break
            else:
                at = rec.commit_log_offset
            if rec is None:
                raise click.ClickException(f"no message with id {msg_id} (neither an offset msgId nor a UNIQ_KEY here)")
        out = _body(rec, body)
        where = at if at is not None else rec.commit_log_offset
        mf = snap.file_of(where)
        whole = tail_prop_crc_ok(mf.buffer, where - mf.file_from_offset, rec.store_size) if mf is not None else None
        fields = list(out.items())
        fields.insert([k for k, _ in fields].index("crc_ok") + 1, ("prop_crc_ok", whole))
        out = dict(fields)
        out["file"] = f"commitlog/{mf.name}" if mf is not None else None
        if at is not None and rec.commit_log_offset != at:
            _warn_physical_offset(out["file"], at, rec.commit_log_offset)
    if not render.emit(out, [out], mode):
        render.table(f"Record at {rec.commit_log_offset}", ["field", "value"], out.items())


@main.command()
@_store_options
@click.option("--topic", required=True, help="Topic of the key.")
@click.option("--key", required=True, help="A KEYS entry or a UNIQ_KEY.")
@click.option("--begin", type=int, default=0, show_default=True, help="Earliest store time (epoch ms).")
@click.option("--end", type=int, default=2**63 - 1, help="Latest store time (epoch ms; default: no limit).")
@_output_options
def query(store: Path, hash_slot_num: int | None, index_num: int | None, topic: str, key: str, begin: int,
          end: int, as_json: bool, json_lines: bool) -> None:
    """Messages carrying a key, found through the index (exact match; collisions shown).

    The index returns every item whose key hash and time match; a *collision* is such an item
    whose message does not carry the key (RocketMQ leaves that check to the client).
    JSON keys: topic, key, begin, end, matches [{commit_log_offset, msg_id, topic, queue_id,
    queue_offset, keys, uniq_key, store_timestamp, index_file, item}], collisions [same keys],
    index_offsets (what the store's queryMessage returns, newest first).

    Example: rmqlab query data/clean-small --topic TopicA --key shared-1
    """
    from rmqlab import render

    # an empty key is never indexed: say so rather than print "0 messages" (the hash of
    # "topic#" may even collide with real items)
    _check_topic(topic)
    if not key:
        raise click.BadParameter("must not be empty (the index holds no empty key)", param_hint="'--key'")
    mode = _mode(as_json, json_lines)
    with _open(store, hash_slot_num, index_num) as snap:
        _warn_short_index(snap)
        chain = snap.index_chain(topic, key, begin, end)
        hits = chain[chain.hash_matches & chain.time_in_window]
        matches, collisions = [], []
        for r in hits.itertuples(index=False):
            rec = snap.read_record(int(r.phy_offset))
            row = {"commit_log_offset": int(r.phy_offset), "msg_id": rec.msg_id if rec else None,
                   "topic": rec.topic if rec else None, "queue_id": rec.queue_id if rec else None,
                   "queue_offset": rec.queue_offset if rec else None, "keys": " ".join(rec.keys) if rec else None,
                   "uniq_key": rec.uniq_key if rec else None,
                   "store_timestamp": rec.store_timestamp if rec else None, "index_file": r.file,
                   "item": int(r.item)}
            (matches if r.message_has_key else collisions).append(row)
    out = {"topic": topic, "key": key, "begin": begin, "end": end, "matches": matches, "collisions": collisions,
           "index_offsets": [int(x) for x in hits.phy_offset]}
    if render.emit(out, matches + collisions, mode):
        return
    cols = ["commit_log_offset", "msg_id", "queue_id", "queue_offset", "keys", "store_timestamp", "index_file"]
    render.table(f"{len(matches)} messages with {topic}#{key}", cols, ([m[c] for c in cols] for m in matches))
    if collisions:
        render.table(f"{len(collisions)} hash collisions (same hash, key absent)", ["topic", *cols],
                     ([m["topic"], *(m[c] for c in cols)] for m in collisions))


@main.command()
@_store_options
@click.option("--file", "file", help="Show slot usage of this index file (name).")
@click.option("--chain", nargs=2, metavar="TOPIC KEY", default=None, help="Walk the chain of TOPIC#KEY.")
@_output_options
def index(store: Path, hash_slot_num: int | None, index_num: int | None, file: str | None,
          chain: tuple[str, str] | None, as_json: bool, json_lines: bool) -> None:
    """Index files: headers, slot usage and chain lengths, or one key's chain walk.

    JSON: without options a list of index files {name, path, size, begin_timestamp,
    end_timestamp, begin_phy_offset, end_phy_offset, hash_slot_count, index_count, items,
    hash_slot_num, index_num, used_slots, max_chain_length}; --file: a list of used slots
    {slot, item, chain_length}; --chain: a list of steps {file, item, position, key_hash,
    phy_offset, time_diff, prev_index, time, hash_matches, time_in_window, stop, message_found,
    message_topic, message_keys, message_has_key, collision}, newest file first.

    Example: rmqlab index data/clean-small --chain TopicA shared-1
    """
    from rmqlab import render

    if chain:
        _check_topic(chain[0])
        if not chain[1]:
            raise click.BadParameter("the key must not be empty (the index holds no empty key)",
                                     param_hint="'--chain'")
    mode = _mode(as_json, json_lines)
    with _open(store, hash_slot_num, index_num) as snap:
        _warn_short_index(snap)
        if chain:
            df = snap.index_chain(*chain)
        elif file:
            df = snap.index_slots(file)
        else:
            df = snap.index_files()
    if file and not chain:
        _emit_frame(df, mode, f"Used slots of {file}: {len(df):,}", "used slots")
        return
    rows = render.frame_rows(df)
    if render.emit(rows, rows, mode):
        return
    if chain:
        _chain_table(f"Chain of {chain[0]}#{chain[1]} (newest file first)", rows)
    else:
        _index_files_table(rows)


def _index_files_table(rows: list[dict[str, Any]]) -> None:
    """The columns a person compares across index files; the header counters, path and sizes
    stay in --json (the caption gives the sizes when every file shares them)."""
    from rmqlab import render

    cols = ["name", "items", "used_slots", "max_chain_length", "begin_phy_offset", "end_phy_offset",
            "begin_timestamp", "end_timestamp"]
    sizes = {(r["hash_slot_num"], r["index_num"]) for r in rows}
    caption = None
    if len(sizes) == 1:
        slots, items = sizes.pop()
        caption = f"every file: {slots:,} hash slots, {items - 1:,} items at most (all columns: --json)"
    render.table(f"{len(rows)} index files", cols, ([r[c] for c in cols] for r in rows), caption)


def _chain_table(title: str, rows: list[dict[str, Any]]) -> None:
    """One line per chain step with what the walk made of it in words (all flags: --json)."""
    from rmqlab import render

    def verdict(r: dict[str, Any]) -> str:
        if not r["hash_matches"]:
            said = "other key (same slot)"
        elif not r["time_in_window"]:
            said = "outside the time window"
        elif not r["message_found"]:
            said = "returned; no record at that offset"
        elif r["message_has_key"]:
            said = "match"
        else:
            said = f"collision: {r['message_topic']} keys {r['message_keys'] or '-'}"
        return f"{said}; walk stops: {r['stop'].replace('_', ' ')}" if r["stop"] else said

    cols = ["file", "item", "prev_index", "phy_offset", "time"]
    found = sum(1 for r in rows if r["message_has_key"] and r["time_in_window"])
    render.table(title, [*cols, "verdict"], ([*(r[c] for c in cols), verdict(r)] for r in rows),
                 f"{len(rows)} steps, {found} matching messages (all columns: --json)")


@main.command()
@_store_options
@click.option("--crc", is_flag=True, help="Also check every body CRC, and the whole-record CRC of each "
                                         "record carrying the 5.x __CRC32# property.")
@_output_options
def verify(store: Path, hash_slot_num: int | None, index_num: int | None, crc: bool, as_json: bool,
           json_lines: bool) -> None:
    """Cross-check CommitLog, ConsumeQueues, index and checkpoint; print every finding.

    Exit status: 0 no errors or warnings (info findings allowed), 1 findings, 2 cannot read.
    A progress bar goes to stderr when it is a terminal (never with --json/--json-lines).
    JSON: {findings: [{severity, kind, file, offset, message}], counts: {error, warning, info},
    ok}; --json-lines streams one finding per line as it is found.

    Example: rmqlab verify data/clean-small --crc
    """
    from rmqlab import render
    from rmqlab.inspect.checks import verify as run_verify

    mode = _mode(as_json, json_lines)
    counts = {"error": 0, "warning": 0, "info": 0}
    found: list[dict[str, Any]] = []
    with _open(store, hash_slot_num, index_num) as snap, _progress(snap, mode) as advance:
        for f in run_verify(snap, check_crc=crc, progress=advance):
            counts[f.severity] += 1
            d = f.to_dict()
            if mode == "json-lines":
                render.print_json_lines([d])
            elif mode == "json":
                found.append(d)
            else:
                style = {"error": "red", "warning": "yellow"}.get(f.severity, "dim")
                render.console.print(f"[{style}]{f.severity:7}[/{style}] {f.kind:32} {f.file} @{f.offset}: "
                                     f"{f.message}", soft_wrap=True)
    ok = counts["error"] == 0 and counts["warning"] == 0
    if mode == "json":
        render.print_json({"findings": found, "counts": counts, "ok": ok})
    elif mode == "table":
        render.console.print("OK" if ok else f"{counts['error']} errors, {counts['warning']} warnings, "
                             f"{counts['info']} info found")
    if not ok:
        sys.exit(1)


class _progress:
    """A rich progress bar over the CommitLog bytes, on stderr, only when it is a terminal."""

    def __init__(self, snap: Any, mode: str) -> None:
        self.total = sum(mf.mapped_length for mf in snap.commit_log_files)
        self.enabled = mode == "table" and sys.stderr.isatty()
        self.bar: Any = None

    def __enter__(self) -> Any:
        if not self.enabled:
            return None
        from rich.console import Console
        from rich.progress import Progress

        self.bar = Progress(console=Console(stderr=True), transient=True)
        self.bar.start()
        task = self.bar.add_task("verifying", total=self.total)
        return lambda n: self.bar.advance(task, n)

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()


@main.command()
@_store_options
@click.option("--dry-run", is_flag=True, help="Print the plan (required: this command never changes files).")
@click.option("--rocketmq-version", type=click.Choice(["4.9.8", "5.3.3"]), default="4.9.8", show_default=True,
              help="Whose recovery rules to apply.")
@_output_options
def recover(store: Path, hash_slot_num: int | None, index_num: int | None, dry_run: bool, rocketmq_version: str,
            as_json: bool, json_lines: bool) -> None:
    """Explain what recovery will do when the store is next opened (read-only).

    Recovery itself happens when MessageStore.open() (or the broker) opens the store, from the
    same plan; this command only prints it, so --dry-run is required.
    JSON: RecoveryPlan.to_dict(): mode, rocketmq_version, max_phy_offset_of_consume_queue,
    checkpoint {...}, start_file, start_reason, candidates, records_checked, bytes_checked,
    process_offset, last_valid_offset, stop_file, stop_offset, stop_reason, dispatch_from,
    files_to_delete, truncate_file, truncate_position, truncate_consume_queues,
    destroy_consume_queues, steps [{phase, file, offset, decision, reason}], notes.

    Example: rmqlab recover tests/fixtures/crash-tail/store --dry-run
    """
    from rmqlab import render

    mode = _mode(as_json, json_lines)
    if not dry_run:
        raise click.UsageError(
            "recover only explains (--dry-run): recovery happens when MessageStore.open() or the broker opens "
            "the store; copy the store and open the copy to carry it out")
    with _open(store, hash_slot_num, index_num) as snap:
        plan = snap.explain_recovery(rocketmq_version=rocketmq_version)
    out = plan.to_dict()
    if render.emit(out, out["steps"], mode):
        return
    c = render.console
    c.print(f"[bold]{plan.mode} recovery[/bold] ({plan.rocketmq_version}): start at {plan.start_file} "
            f"({plan.start_reason})")
    c.print(f"walk checks {plan.records_checked} records, stops at {plan.stop_offset} in {plan.stop_file}: "
            f"{plan.stop_reason}")
    c.print(f"new max physical offset {plan.process_offset}; consume queues' max offset "
            f"{plan.max_phy_offset_of_consume_queue}"
            + ("; consume queues truncated" if plan.truncate_consume_queues else ""))
    if plan.dispatch_from is not None:
        c.print(f"re-dispatch from {plan.dispatch_from}")
    if plan.truncate_file:
        c.print(f"truncate {plan.truncate_file} at position {plan.truncate_position}")
    for name in plan.files_to_delete:
        c.print(f"delete {name}")
    render.table("Steps", ["phase", "file", "offset", "decision", "reason"],
                 ([s["phase"], s["file"], s["offset"], s["decision"], s["reason"]] for s in out["steps"]))
    for n in plan.notes:
        c.print(f"note: {n}")


@main.command()
@_store_options
@click.option("--plan", "plan_only", is_flag=True, help="Print the plan (required: nothing is deleted).")
@click.option("--now", help="Time of the cleanup round, ISO 8601 (default: now). Its zone is deleteWhen's.")
@click.option("--disk-ratio", type=click.FloatRange(0.0, 1.0), default=None,
              help="Disk usage 0.0-1.0 to assume (default: the real usage of the store's file system).")
@click.option("--file-reserved-time", type=click.IntRange(min=0), default=72, show_default=True,
              help="fileReservedTime in hours.")
@click.option("--delete-when", default="04", show_default=True, help="deleteWhen hours, e.g. '04' or '03;04'.")
@_output_options
def cleanup(store: Path, hash_slot_num: int | None, index_num: int | None, plan_only: bool, now: str | None,
            disk_ratio: float | None, file_reserved_time: int, delete_when: str, as_json: bool,
            json_lines: bool) -> None:
    """Explain what one CommitLog cleanup round would delete, and why (read-only).

    JSON: CleanupPlan.to_dict(): now_ms, now_local, tz, local_hour, delete_when_hours,
    is_time_up, physic_ratio, logics_ratio, thresholds, file_reserved_time_ms, triggers, trigger,
    files [{name, decision, why, reason, ...}], to_delete, summary, ...

    Example: rmqlab cleanup data/clean-small --plan --now 2030-01-01T04:00:00+00:00 --disk-ratio 0.5
    """
    import datetime as dt

    from rmqlab import render
    from rmqlab.config import MessageStoreConfig

    mode = _mode(as_json, json_lines)
    if not plan_only:
        raise click.UsageError("cleanup only explains (--plan): the store's CleanCommitLogService deletes files "
                               "when the store runs")
    when = None
    if now is not None:
        try:
            when = dt.datetime.fromisoformat(now)
        except ValueError:
            raise click.BadParameter(f"not an ISO 8601 time: {now!r}", param_hint="--now") from None
    config = MessageStoreConfig(file_reserved_time=file_reserved_time, delete_when=delete_when)
    with _open(store, hash_slot_num, index_num) as snap:
        plan = snap.explain_cleanup(now=when, disk_ratio=disk_ratio, config=config)
    out = plan.to_dict()
    if render.emit(out, out["files"], mode):
        return
    render.console.print(plan.summary())
    cols = ["name", "decision", "why", "reason"]
    render.table("Files (oldest first)", cols, ([f.get(c, "") for c in cols] for f in out["files"]))




def _register_spark() -> None:
    from rmqlab.spark.commands import spark

    main.add_command(spark)


_register_spark()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
