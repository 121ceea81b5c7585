"""5.x BatchConsumeQueues in the widgets: the queue pickers, the files view, the consume queue view
(46-byte units with msgBaseOffset and batchSize) and the dashboard, on a live store and a snapshot;
a 4.9.8 store (which ignores ``queue.type=BatchCQ``) shows plain queues only, as before."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from plotly.callbacks import Points

from rmqlab.codec.batch_consume_queue_unit import BCQ_UNIT_DTYPE, pack_unit, units_view
from rmqlab.config import MessageStoreConfig
from rmqlab.inspect.snapshot import open_snapshot
from rmqlab.store.message import Message
from rmqlab.store.message_store import MessageStore
from rmqlab.widgets import CommitLogView, ConsumeQueueView, MappedFileView, StoreDashboard, figures
from rmqlab.widgets._source import Source
from tests.widgets.conftest import clock_outside_delete_hours, put_many

BATCHES = [3, 1, 5, 2, 4, 1, 6]  # messages per put_messages into B/0


def _open(root: Path, version: str = "5.3.3") -> MessageStore:
    cfg = MessageStoreConfig.small(str(root), rocketmq_version=version, mapped_file_size_commit_log=8 * 1024,
                                   mapper_file_size_batch_consume_queue=46 * 4)
    return MessageStore.open(str(root), cfg, clock=clock_outside_delete_hours(cfg), threaded=False)


def _fill(store: MessageStore) -> None:
    store.create_topic("B", queue_type="BatchCQ")
    for i, n in enumerate(BATCHES):
        r = store.put_messages([Message("B", b"b%d-%d" % (i, k), tags="TagB", queue_id=0) for k in range(n)])
        assert r.ok, r
        assert store.put_message(Message("P", b"plain %d" % i, tags="TagP", queue_id=0)).ok
    store.step()


@pytest.fixture
def bstore(tmp_path: Path) -> Iterator[MessageStore]:
    s = _open(tmp_path / "store")
    _fill(s)
    yield s
    if not s.is_shutdown:
        s.shutdown()


def _engine_units(store: MessageStore) -> np.ndarray:
    bcq = store.consume_queue_store.find_batch_queue("B", 0, create=False)
    assert bcq is not None
    return bcq.units()


def _trace(fig, name):
    return next(t for t in fig.data if t.name == name)


def test_source_lists_batch_queues_beside_plain_ones(bstore: MessageStore) -> None:
    src = Source(bstore)
    assert src.batch_queue_keys() == [("B", 0)]
    assert ("B", 0) not in src.consume_queue_keys()
    queues = src.queues()
    assert queues[0] == "commitlog"
    assert queues[-1] == "index"
    assert "consumequeue/P/0" in queues
    assert "batchconsumequeue/B/0" in queues
    units = src.bcq_units("B", 0)
    assert units.dtype == BCQ_UNIT_DTYPE
    assert units.tobytes() == _engine_units(bstore).tobytes()
    assert units["batch_size"].tolist() == BATCHES
    state = src.queue_state("batchconsumequeue/B/0")
    files = bstore.consume_queue_store.find_batch_queue("B", 0, create=False).mapped_file_queue.mapped_files
    assert [f.name for f in state.files] == [mf.name for mf in files]
    assert len(files) == 2  # 4 units a file: rolled
    assert [f.wrote for f in state.files] == [46 * 4, 46 * 3]
    assert state.live
    assert state.flushed_where is not None


def test_files_view_shows_a_batch_queue(bstore: MessageStore) -> None:
    view = MappedFileView(bstore, autoupdate=False)
    assert "batchconsumequeue/B/0" in view.queue_picker.options
    view.queue_picker.value = "batchconsumequeue/B/0"
    assert view.queue == "batchconsumequeue/B/0"
    assert [f.status for f in view.state.files] == ["full", "active"]
    assert list(_trace(view.figure, "wrote").x) == [f.start + f.wrote for f in view.state.files]
    view.close()


def test_consume_queue_view_of_a_batch_queue(bstore: MessageStore) -> None:
    log = CommitLogView(bstore, autoupdate=False)
    view = ConsumeQueueView(bstore, "B", 0, commit_log_view=log, autoupdate=False)
    assert view.batch  # B/0 is only a batch queue
    assert view.picker.options == ("P/0", "B/0 (BatchCQ)")
    assert view.picker.value == "B/0 (BatchCQ)"
    units = _engine_units(bstore)
    bases = np.cumsum([0, *BATCHES[:-1]]).tolist()
    assert view.rows == [
        {"queue_offset": b, "batch_size": n, "commit_log_offset": int(u["commit_log_offset"]), "size": int(u["size"]),
         "tags_code": int(u["tags_code"]), "store_timestamp": int(u["store_timestamp"]), "compacted_offset": -1}
        for b, n, u in zip(bases, BATCHES, units, strict=True)]
    assert list(_trace(view.figure, "unit").x) == bases
    assert list(_trace(view.figure, "unit").customdata) == bases
    assert f"{len(BATCHES)} unit(s), {sum(BATCHES)} message(s)" in view.figure.layout.title.text
    table = view.table.value
    assert "<th>msgBaseOffset</th><th>batchSize</th>" in table
    assert "compactedOffset" not in table  # every unit holds 5.x's -1
    assert table.count("<tr>") == len(BATCHES) + 1
    # a queue offset inside the third batch (offsets 4..8) selects its unit, i.e. its record
    html = view.select_unit(6)
    offset = int(units[2]["commit_log_offset"])
    assert f"unit 2 (queue offsets 4..8: a batch of 5 message(s) in one record) → CommitLog offset {offset:,}" \
        in html
    assert log.selected == offset
    assert "no unit at queue offset 22" in view.select_unit(sum(BATCHES))
    # a click on the marker of the last unit
    trace = _trace(view.figure, "unit")
    view._on_click(trace, Points(point_inds=[len(BATCHES) - 1], xs=[0], ys=[0], trace_name="unit",
                                 trace_index=1))
    assert log.selected == int(units[-1]["commit_log_offset"])
    view.close()
    log.close()


def test_the_picker_switches_between_plain_and_batch_queues(bstore: MessageStore) -> None:
    view = ConsumeQueueView(bstore, autoupdate=False)
    assert (view.topic, view.queue_id, view.batch) == ("P", 0, False)  # plain queues come first
    assert len(view.rows) == len(BATCHES)
    view.picker.value = "B/0 (BatchCQ)"
    assert (view.topic, view.queue_id, view.batch) == ("B", 0, True)
    assert [r["batch_size"] for r in view.rows] == BATCHES
    assert [t.name for t in view.figure.data] == ["queue offsets", "unit", "removed"]
    # more batches arrive and are dispatched: the view follows its batch queue
    assert bstore.put_messages([Message("B", b"late", queue_id=0), Message("B", b"later", queue_id=0)]).ok
    bstore.step()
    view.refresh()
    assert view.rows[-1]["queue_offset"] == sum(BATCHES)
    assert view.rows[-1]["batch_size"] == 2
    view.picker.value = "P/0"
    assert (view.topic, view.batch) == ("P", False)
    assert [r["queue_offset"] for r in view.rows] == list(range(len(BATCHES)))
    assert [t.name for t in view.figure.data] == ["unit", "removed", "pre-blank"]
    assert list(_trace(view.figure, "unit").x) == list(range(len(BATCHES)))
    view.close()


def test_batch_queue_views_on_a_snapshot(bstore: MessageStore, tmp_path: Path) -> None:
    units = _engine_units(bstore)
    bstore.shutdown()
    with open_snapshot(tmp_path / "store") as snap:
        src = Source(snap)
        assert src.batch_queue_keys() == [("B", 0)]
        assert "batchconsumequeue/B/0" in src.queues()
        assert src.bcq_units("B", 0).tobytes() == units.tobytes()  # two files: the same dtype all the same
        files = MappedFileView(snap, "batchconsumequeue/B/0")
        assert [(f.wrote, f.status) for f in files.state.files] == [(46 * 4, "full"), (46 * 3, "active")]
        assert files.state.committed_where is None
        cq = ConsumeQueueView(snap, "B", 0)
        frame = snap.batch_consume_queue("B", 0)
        assert [(r["queue_offset"], r["batch_size"], r["commit_log_offset"]) for r in cq.rows] == list(
            zip(frame["queue_offset"], frame["batch_size"], frame["commit_log_offset"], strict=True))
        assert cq.dispatch is None
        assert "CommitLog offset" in cq.select_unit(0)
        for v in (files, cq):
            v.close()


def test_dashboard_shows_batch_queues_and_puts_batches(bstore: MessageStore) -> None:
    dash = StoreDashboard(bstore)
    try:
        assert "batchconsumequeue/B/0" in dash.views["files"].queue_picker.options
        cq = dash.views["consume queue"]
        assert "B/0 (BatchCQ)" in cq.picker.options
        results = dash.put(4, topic="B", keys="bk-{i}")
        assert len(results) == 1
        assert results[0].ok
        assert results[0].append_result.msg_num == 4
        assert "put a batch of 4 message(s) to B/0 (BatchCQ: one record): ok" in dash.log.value
        dash.step()
        cq.picker.value = "B/0 (BatchCQ)"
        dash.show("consume queue")
        dash.throttle.flush()
        assert not dash.throttle.errors
        assert cq.rows[-1]["queue_offset"] == sum(BATCHES)
        assert cq.rows[-1]["batch_size"] == 4
        # plain topics still take one message per put
        assert len(dash.put(3, topic="P")) == 3
        dash.crash("process_kill")
        new = dash.recover()
        dash.throttle.flush()
        assert not dash.throttle.errors
        assert cq.batch
        assert [r["batch_size"] for r in cq.rows] == [*BATCHES, 4]
        new.shutdown()
    finally:
        dash.close()


def test_a_4_9_8_store_shows_plain_queues_only(tmp_path: Path) -> None:
    """4.9.8 keeps a BatchCQ attribute and ignores it: its queue is a plain one, as before."""
    store = _open(tmp_path / "s", version="4.9.8")
    try:
        store.create_topic("B", queue_type="BatchCQ")
        put_many(store, 6, topics=("B",))
        store.step()
        src = Source(store)
        assert src.batch_queue_keys() == []
        assert not any(q.startswith("batchconsumequeue/") for q in src.queues())
        view = ConsumeQueueView(store, "B", 0, autoupdate=False)
        assert not view.batch
        assert view.picker.options == ("B/0", "B/1")
        assert [r["queue_offset"] for r in view.rows] == [0, 1, 2]
        assert "batchSize" not in view.table.value
        view.close()
    finally:
        store.shutdown()


def test_batch_table_shows_compacted_offsets_when_a_unit_has_one() -> None:
    units = units_view(pack_unit(100, 50, 7, 1_764_000_000_000, 10, 3)
                       + pack_unit(150, 60, 7, 1_764_000_000_001, 13, 2, compacted_offset=5))
    html = figures.batch_consume_queue_table_html(units)
    assert "<th>compactedOffset</th>" in html
    assert "<td>5</td></tr>" in html
    assert "<td>-1</td></tr>" in html
    spec = figures.batch_consume_queue_spec("B", 0, units, commit_log_min=120)
    removed = next(t for t in spec["data"] if t["name"] == "removed")
    assert removed["x"].tolist() == [10]  # its record's CommitLog file is gone
    span = next(t for t in spec["data"] if t["name"] == "queue offsets")
    assert span["x"].tolist()[:2] == [10, 12]
    assert span["x"].tolist()[3:5] == [13, 14]
