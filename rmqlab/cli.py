"""The ``rmqlab`` command: thin argument parsing over the library; heavy imports inside commands.

Errors a user can cause (no such dir, not a store, bad option) print one line and exit 2.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import click

from rmqlab.errors import RmqlabError

__all__ = ["main"]


def _sample_store() -> Path:
    return Path(__file__).resolve().parent.parent / "data" / "clean-small"


class _Group(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except RmqlabError as e:
            click.echo(f"rmqlab: error: {e}", err=True)
            ctx.exit(2)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="rmqlab")
def main() -> None:
    """rmqlab: learn, teach and operate Apache RocketMQ's storage engine."""


@main.command()
@click.argument("store", required=False, type=click.Path(file_okay=False, path_type=Path))
@click.option("--records", default=5, show_default=True, help="How many records to print.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of tables.")
@click.option("--keep", is_flag=True, help="Keep the store rmqlab writes (default: delete it).")
def demo(store: Path | None, records: int, as_json: bool, keep: bool) -> None:
    """The main job: read a real RocketMQ store, then write, reopen and query one with rmqlab.

    STORE defaults to the sample store in data/ (written by Apache RocketMQ 4.9.8).

    Example: rmqlab demo --records 3
    """
    from rmqlab import render
    from rmqlab.inspect import open_snapshot

    path = store or _sample_store()
    if store is None and not path.is_dir():
        raise click.ClickException(f"sample store not found at {path} (run from a clone of rmqlab)")
    out: dict[str, Any] = {"store": str(path)}
    with open_snapshot(path) as snap:
        topics = snap.topics()
        first = snap.messages(limit=records)
        out["commit_log_files"] = len(snap.commit_log_files)
        out["commit_log_file_size"] = snap.commit_log_file_size
        out["abort_present"] = snap.abort_present
        out["queues"] = topics.to_dict(orient="records")
        out["first_records"] = first.to_dict(orient="records")
    workdir = tempfile.mkdtemp(prefix="rmqlab-demo-")
    try:
        written = _write_and_query_demo(os.path.join(workdir, "store"))
    finally:
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    out["rmqlab_store"] = written
    if as_json:
        render.print_json(out)
        return
    c = render.console
    c.print(f"[bold]1. Reading {path}[/bold] ({out['commit_log_files']} CommitLog files of "
            f"{out['commit_log_file_size']} bytes, abort file {'present' if out['abort_present'] else 'absent'})")
    render.table("Messages per topic and queue", list(topics.columns), topics.itertuples(index=False))
    cols = ["commit_log_offset", "store_size", "topic", "queue_id", "queue_offset", "tags", "keys", "msg_id"]
    render.table(f"First {records} records", cols, first[cols].itertuples(index=False))
    c.print(f"\n[bold]2. Writing a store with rmqlab[/bold] in {written['path']}"
            + ("" if keep else " (deleted afterwards; --keep keeps it)"))
    c.print(f"   put {written['messages']} messages -> {written['commit_log_files']} CommitLog files, "
            f"max physical offset {written['max_phy_offset']}")
    c.print(f"   reopened ({written['recovery_mode']} recovery): max physical offset "
            f"{written['reopened_max_phy_offset']}, queue offsets {written['queue_max_offsets']}")
    c.print(f"   query_message(topic=DemoTopic, key={written['query_key']!r}) -> offsets "
            f"{written['query_offsets']}")


def _write_and_query_demo(root: str) -> dict[str, Any]:
    from rmqlab.clock import ManualClock
    from rmqlab.config import MessageStoreConfig
    from rmqlab.store.message import Message
    from rmqlab.store.message_store import MessageStore

    config = MessageStoreConfig.small(root)
    clock = ManualClock()
    n = 400
    with MessageStore.open(root, config, clock=clock, threaded=False) as store:
        for i in range(n):
            store.put_message(Message("DemoTopic", f"hello {i} ".encode() * (1 + i % 40), tags=f"Tag{i % 3}",
                                      keys=[f"order-{i % 25}"], queue_id=i % 4))
            clock.advance(5)
        store.step()
        max_phy = store.get_max_phy_offset()
        files = len(store.commit_log.mapped_file_queue.mapped_files)
    with MessageStore.open(root, config, clock=clock, threaded=False) as store:
        q = store.query_message("DemoTopic", "order-7", 32)
        return {
            "path": root,
            "messages": n,
            "commit_log_files": files,
            "max_phy_offset": max_phy,
            "recovery_mode": store.recovery_plan.mode if store.recovery_plan else "",
            "reopened_max_phy_offset": store.get_max_phy_offset(),
            "queue_max_offsets": [store.get_max_offset_in_queue("DemoTopic", i) for i in range(4)],
            "query_key": "order-7",
            "query_offsets": q.phy_offsets,
        }


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
