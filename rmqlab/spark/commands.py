"""``rmqlab spark audit|stats``: the Spark jobs from the command line.

Registered by the main CLI with one line (``main.add_command(spark)``). Exit codes: 0 clean,
1 findings (audit), 2 user error (one line on stderr). Spark is imported inside the commands.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

__all__ = ["spark"]


def _fail(message: str) -> None:
    click.echo(f"rmqlab: error: {message}", err=True)
    raise SystemExit(2)


def _check_stores(stores: tuple[str, ...]) -> list[str]:
    from rmqlab.errors import NotAStore
    from rmqlab.inspect import open_snapshot

    out = []
    for s in stores:
        try:
            open_snapshot(s).close()
        except NotAStore as e:
            _fail(str(e))
        out.append(os.path.abspath(s))
    return out


def _conf(pairs: tuple[str, ...]) -> dict[str, str]:
    conf = {}
    for p in pairs:
        k, sep, v = p.partition("=")
        if not sep or not k:
            _fail(f"--conf wants key=value, got {p!r}")
        conf[k.strip()] = v.strip()
    return conf


@contextmanager
def _progress(session: Any, what: str) -> Iterator[None]:
    """A rich status line showing Spark's active stages (polled twice a second)."""
    from rmqlab.render import console

    stop = threading.Event()
    with console.status(what) as status:
        def poll() -> None:
            tracker = session.sparkContext.statusTracker()
            while not stop.wait(0.5):
                try:
                    stages = [tracker.getStageInfo(i) for i in tracker.getActiveStageIds()]
                    done = sum(s.numCompletedTasks for s in stages if s)
                    total = sum(s.numTasks for s in stages if s)
                    status.update(f"{what} — {len(stages)} stage(s) running, tasks {done}/{total}")
                except Exception:  # the tracker may vanish at shutdown; progress is best effort
                    return

        t = threading.Thread(target=poll, daemon=True)
        t.start()
        try:
            yield
        finally:
            stop.set()
            t.join(timeout=2)


_common = [
    click.argument("stores", nargs=-1, required=True, type=click.Path()),
    click.option("--out", required=True, type=click.Path(file_okay=False),
                 help="Output directory (Parquet + summary)."),
    click.option("--master", default="local[*]", show_default=True, help="Spark master URL."),
    click.option("--conf", "confs", multiple=True, metavar="KEY=VALUE", help="Extra Spark config (repeatable)."),
]


def _options(f: Any) -> Any:
    for opt in reversed(_common):
        f = opt(f)
    return f


@click.group("spark")
def spark() -> None:
    """Audit and summarise store dirs with Apache Spark (needs the ``spark`` extra and Java)."""


@spark.command("audit")
@_options
@click.option("--check-crc", is_flag=True,
              help="Also check every body CRC, and the __CRC32# property of records that carry one.")
def audit_cmd(stores: tuple[str, ...], out: str, master: str, confs: tuple[str, ...], check_crc: bool) -> None:
    """Cross-check CommitLog, ConsumeQueues and index of every STORE (the checks of ``verify``).

    Writes OUT/findings/ and OUT/summary/ (Parquet), OUT/summary.json and OUT/summary.html.
    Exits 1 when anything was found.

    Example: rmqlab spark audit data/clean-small --out /tmp/audit
    """
    from rmqlab.render import console
    from rmqlab.spark.jobs import audit, write_audit
    from rmqlab.spark.session import get_session

    paths = _check_stores(stores)
    session = get_session(master, "rmqlab-audit", _conf(confs))
    with _progress(session, f"auditing {len(paths)} store(s)"):
        findings, summary = audit(session, paths, check_crc=check_crc)
        doc = write_audit(findings, summary, out, paths)
    for row in doc["by_kind"]:
        console.print(f"{row['store']}: {row['severity']} {row['kind']}: {row['findings']}")
    n = doc["findings"]
    console.print(f"{n} finding(s) in {len(paths)} store(s); written to {out}" if n else f"OK; written to {out}")
    raise SystemExit(1 if n else 0)


@spark.command("stats")
@_options
def stats_cmd(stores: tuple[str, ...], out: str, master: str, confs: tuple[str, ...]) -> None:
    """Per topic/queue/hour counts, bytes, size percentiles, tag and key cardinality, index slot
    load and chain lengths, ConsumeQueue lag: Parquet under OUT plus summary.json/html.

    Example: rmqlab spark stats data/clean-small --out /tmp/stats
    """
    from rmqlab.render import console
    from rmqlab.spark.jobs import stats, write_stats
    from rmqlab.spark.session import get_session

    paths = _check_stores(stores)
    session = get_session(master, "rmqlab-stats", _conf(confs))
    with _progress(session, f"summarising {len(paths)} store(s)"):
        doc = write_stats(stats(session, paths), out, paths)
    for t in doc["topics"]:
        console.print(f"{t['store']}: {t['topic']}/{t['queue_id']}: {t['messages']} messages, {t['bytes']} bytes, "
                      f"lag {t['lag']}")
    console.print(f"written to {out}")
