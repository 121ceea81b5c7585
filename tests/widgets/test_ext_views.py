"""Views of a store written with ``enable_consume_queue_ext``: the consume queue view shows each
unit's ext address and the tags code it resolves to (or "unresolved"), live and on a snapshot, as
the engine and inspection report them; the recovery view shows what recovery did to the ext runs.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from rmqlab.clock import ManualClock
from rmqlab.codec.consume_queue_ext_unit import is_ext_addr, undecorate
from rmqlab.codec.java_hash import java_hash
from rmqlab.config import MessageStoreConfig
from rmqlab.inspect.snapshot import open_snapshot
from rmqlab.store.message import Message
from rmqlab.store.message_store import MessageStore
from rmqlab.testing.damage import zero_range
from rmqlab.widgets import ConsumeQueueView, RecoveryView

EXT_FILE = 1000  # 49 units a file, then the end marker
T0 = 1_700_000_000_000
TAGS = ["TagA", "TagB", None]


def _open(root: Path, *, start: bool = True) -> MessageStore:
    config = MessageStoreConfig.small(str(root), enable_consume_queue_ext=True,
                                      mapped_file_size_consume_queue_ext=EXT_FILE)
    return MessageStore.open(root, config, clock=ManualClock(T0), threaded=False, start=start)


def _write(store: MessageStore, n: int) -> None:
    for i in range(n):
        assert store.put_message(Message("Orders", b"b%d" % i, tags=TAGS[i % 3], queue_id=0)).ok
        store.clock.advance(3)  # type: ignore[attr-defined]
    store.step()
    assert store.wait_dispatched()


def _want(store: MessageStore) -> list[int]:
    """The tags code of each unit's record (0 without a tag, as dispatch stores it)."""
    cq = store.consume_queue_store.find_consume_queue("Orders", 0)
    out = []
    for q in range(cq.get_max_offset_in_queue()):
        rec = store.look_message_by_offset(*cq.get_unit(q)[:2])
        out.append(java_hash(rec.tags) if rec.tags else 0)
    return out


def test_consume_queue_view_shows_addresses_and_resolved_tags_codes(tmp_path: Path) -> None:
    store = _open(tmp_path / "s")
    try:
        _write(store, 200)
        want = _want(store)
        cq = store.consume_queue_store.find_consume_queue("Orders", 0)
        view = ConsumeQueueView(store, "Orders", 0, autoupdate=False)
        rows = view.rows
        assert [r["tags_code"] for r in rows] == want
        assert [r["ext_address"] for r in rows] == [cq.get_unit(q)[2] for q in range(len(rows))]
        assert all(is_ext_addr(r["ext_address"]) for r in rows)
        table = view.table.value
        assert "<th>ext address</th>" in table
        assert "unresolved" not in table
        last = rows[-1]
        assert f"<td>{last['tags_code']}</td><td>{last['ext_address']} (offset {undecorate(last['ext_address']):,})" \
            in table
        hover = " ".join(h for t in view.figure.data for h in (t.hovertext or ()))
        assert f"ext address {last['ext_address']}" in hover

        # lose the run from its third file on, as a power loss before the ext flush would
        cq.consume_queue_ext.mapped_file_queue.truncate_dirty_files(2 * EXT_FILE)
        view.refresh()
        lost = [r for r in view.rows if undecorate(r["ext_address"]) >= 2 * EXT_FILE]
        assert lost
        assert all(r["tags_code"] is None for r in lost)
        assert all(r["tags_code"] == w for r, w in zip(view.rows, want, strict=True) if r not in lost)
        assert view.table.value.count("<i>unresolved</i>") == min(len(lost), view.table_rows)
        assert f"{len(lost)} ext address(es) unresolved" in view.figure.layout.title.text
        # the view says what the engine's readers filter with (None: matches every filter)
        assert [r["tags_code"] for r in view.rows] == [cq.resolve_tags_code(cq.get_unit(q)[2])
                                                       for q in range(len(want))]
        view.close()
    finally:
        store.shutdown()


def test_consume_queue_view_of_a_snapshot_shows_what_inspection_reports(tmp_path: Path) -> None:
    store = _open(tmp_path / "s")
    _write(store, 200)
    cq = store.consume_queue_store.find_consume_queue("Orders", 0)
    # the 4th file's positions go to 0 (its bytes stay on disk, which inspection reads), the 5th is deleted
    cq.consume_queue_ext.mapped_file_queue.truncate_dirty_files(3 * EXT_FILE)
    store.shutdown()
    with open_snapshot(tmp_path / "s") as snap:
        view = ConsumeQueueView(snap, "Orders", 0, autoupdate=False)
        frame = snap.consume_queue("Orders", 0)
        rows = pd.DataFrame(view.rows)
        assert rows["ext_address"].tolist() == frame["ext_address"].tolist()
        got = [None if pd.isna(t) else int(t) for t in rows["tags_code"]]
        assert got == [None if pd.isna(t) else int(t) for t in frame["tags_code"]]
        gone = [undecorate(a) >= 4 * EXT_FILE for a in rows["ext_address"]]
        assert any(gone)
        assert [t is None for t in got] == gone
        assert "<i>unresolved</i>" in view.table.value
        view.close()


def test_recovery_view_shows_the_ext_runs(tmp_path: Path) -> None:
    root = tmp_path / "s"
    store = _open(root)
    _write(store, 200)
    store.shutdown()
    cq_dir = root / "consumequeue" / "Orders" / "0"
    zero_range(cq_dir / sorted(os.listdir(cq_dir))[-1], 0)  # the CQ's last file loses its units
    with open_snapshot(root) as snap:
        explained = RecoveryView(snap)
        html = explained.steps.value
        explained.close()
    store = _open(root, start=False)
    try:
        view = RecoveryView(store)
        assert view.steps.value == html  # what was explained is what was done
        ext = [s for s in view.plan.steps if s.phase == "consume_queue_ext"]
        deleted = [s for s in ext if s.decision == "delete file"]
        assert deleted
        assert "ConsumeQueueExt runs" in html
        assert f"1 run(s) walked, {len(deleted)} file(s) deleted" in html
        for s in ext:
            assert f"<td>{s.file}</td><td>{s.offset:,}</td><td>{s.decision}</td>" in html
        # the ext section comes before the CommitLog walk's steps
        assert html.index("ConsumeQueueExt runs") < html.index("walk from here")
        view.close()
    finally:
        store.shutdown()
