"""Widget state after driving a store: no browser, no kernel (ipywidgets falls back to dummy comms)."""

from __future__ import annotations

import numpy as np
import pytest

from rmqlab.inspect.snapshot import open_snapshot
from rmqlab.store.message import Message
from rmqlab.widgets import (
    CleanupView,
    CommitLogView,
    ConsumeQueueView,
    IndexView,
    MappedFileView,
    RecoveryView,
    StoreDashboard,
    figures,
)
from rmqlab.widgets.figures import record_html
from tests.widgets.conftest import put_many

EVIL = "<script>alert(1)</script>"


def _trace(fig, name):
    return next(t for t in fig.data if t.name == name)


def test_mapped_file_pointers_at_right_offsets(store):
    view = MappedFileView(store, autoupdate=False)
    put_many(store, 60)
    view.refresh()
    mfq = store.commit_log.mapped_file_queue
    files = mfq.mapped_files
    assert len(files) > 1
    assert [f.name for f in view.state.files] == [mf.name for mf in files]
    for ptr, attr in (("wrote", "wrote_position"), ("committed", "committed_position"),
                      ("flushed", "flushed_position")):
        assert list(_trace(view.figure, ptr).x) == [mf.file_from_offset + getattr(mf, attr) for mf in files]
    store.flush()
    view.refresh()
    flushed = list(_trace(view.figure, "flushed").x)
    assert flushed == [mf.file_from_offset + mf.flushed_position for mf in files]
    assert flushed[-1] == mfq.flushed_where
    assert view.state.flushed_where == mfq.flushed_where
    assert any(s["x0"] == mfq.flushed_where for s in view.figure.layout.shapes)
    # pre-allocation requests show as pending bars
    pending = {f.name for f in view.state.pending}
    assert pending == {r.file_path.rsplit("/", 1)[-1] for r in store.allocate_service.pending_requests()} - {
        mf.name for mf in files}
    view.close()


def test_mapped_file_view_live_updates_through_bus(store):
    view = MappedFileView(store)  # subscribed
    put_many(store, 5)
    view.throttle.flush()
    assert view.state.files[-1].wrote == store.commit_log.mapped_file_queue.mapped_files[-1].wrote_position
    view.close()


def test_deleted_file_fades(store):
    view = MappedFileView(store, autoupdate=False, fade_s=60)
    put_many(store, 60)
    view.refresh()
    first = store.commit_log.mapped_file_queue.mapped_files[0]
    store.commit_log.mapped_file_queue.delete_files([first]) if first.destroy(0) else None
    view.refresh()
    assert [g.name for g in view.ghosts] == [first.name]
    assert 0 < view.ghosts[0].opacity <= 1
    view.close()


def test_commit_log_view_records_and_blank(store):
    put_many(store, 60)
    view = CommitLogView(store, autoupdate=False)
    messages = [r for r in view.records if r.kind == "message"]
    assert len(messages) == 60
    blanks = [r for r in view.records if r.kind == "blank"]
    assert len(blanks) == len(store.commit_log.mapped_file_queue.mapped_files) - 1
    assert {t.name for t in view.figure.data} >= {"T0", "T1", "T2", "blank (EOF)"}
    # incremental: more puts appear without rescanning old files
    put_many(store, 3, start=60)
    view.refresh(["records"])
    assert len([r for r in view.records if r.kind == "message"]) == 63
    view.close()


def test_click_decodes_record(store):
    put_many(store, 5)
    view = CommitLogView(store, autoupdate=False)
    from plotly.callbacks import Points

    trace = _trace(view.figure, "T1")
    view._on_click(trace, Points(point_inds=[0], xs=[0], ys=[0], trace_name="T1", trace_index=0))
    assert view.selected == trace.customdata[0]
    assert "TOTALSIZE" in view.detail.value
    assert "T1" in view.detail.value
    view.close()


def test_decoded_panel_escapes_everything(store):
    store.put_message(Message(f"T{EVIL[:0]}evil", EVIL.encode(), tags=EVIL, keys=[EVIL]))
    view = CommitLogView(store, autoupdate=False)
    html = view.select(0)
    assert "<script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    # a topic with markup, straight through the builder (the store refuses such topic names)
    rec, raw = view.source.read_record(0)
    import dataclasses

    evil = dataclasses.replace(rec, topic=EVIL, properties={**rec.properties, "KEYS": EVIL})
    out = record_html(evil, raw, offset=0)
    assert "<script>" not in out
    assert out.count("&lt;script&gt;") >= 2
    # and in the hover text of the log figure
    assert all("<script>" not in (h or "") for t in view.figure.data for h in (t.hovertext or ()))
    view.close()


def test_consume_queue_rows_equal_units(store):
    put_many(store, 40)
    store.step()
    view = ConsumeQueueView(store, "T1", 1, autoupdate=False)
    cq = store.consume_queue_store.find_consume_queue("T1", 1, create=False)
    units = cq.units()
    assert [(r["commit_log_offset"], r["size"], r["tags_code"]) for r in view.rows] == [
        (int(u["commit_log_offset"]), int(u["size"]), int(u["tags_code"])) for u in units]
    assert [r["queue_offset"] for r in view.rows] == list(range(len(units)))
    assert view.dispatch["behind_bytes"] == 0
    html = view.select_unit(2)
    assert f"{int(units[2]['commit_log_offset']):,}" in html
    view.close()


def test_consume_queue_view_links_commit_log_view(store):
    put_many(store, 10)
    store.step()
    log = CommitLogView(store, autoupdate=False)
    view = ConsumeQueueView(store, "T0", 0, commit_log_view=log, autoupdate=False)
    view.select_unit(0)
    assert log.selected == view.rows[0]["commit_log_offset"]


def test_index_walk_equals_walk_chain(store):
    put_many(store, 100)
    store.step()
    view = IndexView(store, autoupdate=False)
    f = store.index_service.index_files[-1]
    key = next(k for k in (f"k{i}" for i in range(99, 0, -1)) if f.walk_chain(f"T{int(k[1:]) % 3}#{k}"))
    topic = f"T{int(key[1:]) % 3}"
    walk = view.walk_key(topic, key)
    assert [w.step for w in walk] == f.walk_chain(f"{topic}#{key}")
    assert any(w.message_has_key for w in walk)
    assert not any(w.collision for w in walk if w.message_has_key)
    assert int(view.lengths.sum()) == f.index_count - 1
    view.show_upto(0)
    assert view.step() == 1
    view.close()


def test_index_collision_marked(store):
    # "Aa" and "BB" have the same Java hash: topic#Aa and topic#BB collide in every slot count.
    store.put_message(Message("T", b"a", keys=["xAa"]))
    store.put_message(Message("T", b"b", keys=["xBB"]))
    store.step()
    view = IndexView(store, autoupdate=False)
    walk = view.walk_key("T", "xAa")
    assert any(w.collision for w in walk)
    assert any(w.message_has_key for w in walk)
    view.close()


def test_cleanup_view_matches_plan_and_sliders_replan(store):
    put_many(store, 60)
    store.step()  # dispatched: cleanup keeps files with records the reput has not reached
    view = CleanupView(store, autoupdate=False)
    plan = store.plan_cleanup(now_ms=view.now_ms, disk_ratio=view.disk_ratio)
    assert [(d.name, d.decision, d.rule, d.why) for d in view.plan.files] == [
        (d.name, d.decision, d.rule, d.why) for d in plan.files]
    before = view.plan.now_ms
    view.hours_ahead.value = 80
    assert view.plan.now_ms - before >= 80 * 3_600_000 - 1000
    view.simulate_disk.value = True
    view.disk_slider.value = 0.86
    assert view.plan.physic_ratio == pytest.approx(0.86)
    assert view.plan.trigger == "forced"
    expected = store.plan_cleanup(now_ms=view.now_ms, disk_ratio=0.86)
    assert [(d.name, d.decision) for d in view.plan.files] == [(d.name, d.decision) for d in expected.files]
    assert {d.decision for d in view.plan.files} == {"delete", "keep"}
    view.close()
    closed_plan = view.plan
    view.disk_slider.value = 0.2  # a closed view no longer re-plans (its store may be shut down)
    assert view.plan is closed_plan


def test_cleanup_time_line_keeps_its_now_label_inside_the_plot(store):
    """The "now" label hangs from the line towards the side with room: right of it while now is
    in the left half of the axis (not over the file names), left of it once the clock has moved
    past the middle (the label was cut off at the plot's right edge)."""
    put_many(store, 60)
    store.step()
    view = CleanupView(store, autoupdate=False)

    def label() -> tuple[str, str]:
        spec = figures.cleanup_timeline_spec(view.plan)
        (note,) = spec["layout"]["annotations"]
        lo, hi = spec["layout"]["xaxis"]["range"]
        assert lo <= note["x"] <= hi
        assert "now" in note["text"]
        return note["xanchor"], note["x"]

    assert label()[0] == "left"  # now: the files' bars run far to the right of it
    view.hours_ahead.value = 200  # past every expiry: now sits at the right end
    assert label()[0] == "right"
    view.close()


def test_consume_queue_view_marks_units_whose_commit_log_file_was_deleted(tmp_path):
    """After cleanup deletes CommitLog files, a queue keeps units pointing into them until its
    own file goes: drawn "removed" (not as live units), counted in the title, and a click on one
    says why there is no record instead of "no record at offset"."""
    import time

    from rmqlab import MessageStore, MessageStoreConfig
    from rmqlab.clock import ManualClock

    disk = {"ratio": 0.5}
    cfg = MessageStoreConfig.small(str(tmp_path / "store"), mapped_file_size_commit_log=8 * 1024)
    store = MessageStore.open(str(tmp_path / "store"), cfg, clock=ManualClock(time.time_ns() // 1_000_000),
                              threaded=False, disk_probe=lambda _path: disk["ratio"])
    try:
        put_many(store, 60)
        store.step()
        view = ConsumeQueueView(store, "T0", 0, autoupdate=False)
        assert [len(t.x) for t in view.figure.data if t.name == "removed"] == [0]
        disk["ratio"] = 0.86  # forced cleanup: every CommitLog file but the newest goes
        store.step()
        first = store.get_min_phy_offset()
        assert first > 0
        disk["ratio"] = 0.5
        put_many(store, 12, start=60)  # live units after the removed ones
        store.step()
        view.refresh()
        assert view.commit_log_min == first
        removed = next(t for t in view.figure.data if t.name == "removed")
        live = next(t for t in view.figure.data if t.name == "unit")
        assert len(removed.x) > 0
        assert all(y < first for y in removed.y)
        assert all(y >= first for y in live.y)
        assert f"{len(removed.x)} removed" in view.figure.layout.title.text
        assert view.table.value.count("(removed)") == len(removed.x)  # the table says so too
        html = view.select_unit(int(removed.x[0]))
        assert "removed" in html
        assert "deleted" in html
        html = view.select_unit(int(live.x[0]))
        assert "TOTALSIZE" in html
        view.close()
    finally:
        store.shutdown()


def test_recovery_view_draws_plan(store, tmp_path):
    put_many(store, 30)
    store.shutdown()
    snap = open_snapshot(tmp_path / "store")
    try:
        view = RecoveryView(snap)
        assert view.plan is not None
        assert view.plan.mode == "normal"
        assert "stop" in [t.name for t in view.figure.data]
        assert view.plan.stop_reason in view.steps.value or "stop" in view.steps.value
        view.close()
    finally:
        snap.close()


def test_views_work_on_a_snapshot(store, tmp_path):
    put_many(store, 50)
    store.step()
    store.shutdown()
    with open_snapshot(tmp_path / "store") as snap:
        files = MappedFileView(snap)
        assert files.state.committed_where is None
        assert len(files.state.files) >= 2
        log = CommitLogView(snap)
        assert len([r for r in log.records if r.kind == "message"]) == 50
        cq = ConsumeQueueView(snap, "T0", 0)
        assert len(cq.rows) == len(snap.consume_queue("T0", 0))
        idx = IndexView(snap)
        assert idx.lengths.sum() > 0
        cl = CleanupView(snap, disk_ratio=0.5)
        assert cl.plan is not None
        assert len(cl.plan.files) == len(snap.commit_log_files)
        for v in (files, log, cq, idx, cl):
            v.close()


def test_dashboard_put_flush_crash_recover_query(store):
    dash = StoreDashboard(store)
    try:
        dash.put(30, topic="Orders", keys="order-{i}", size=200)
        dash.step()
        said = dash.log.value
        assert "step: dispatched 30 record(s); CommitLog flushed to " in said  # words, not reprs
        assert "cleanup: no cleanup" in said
        assert "CleanupPlan(" not in said
        dash.flush()
        dash.put(5, topic="Orders", keys="late-{i}")
        dash.throttle.flush()
        assert not dash.throttle.errors
        flushed = store.commit_log.mapped_file_queue.flushed_where
        dash.crash("power_loss")
        assert f"CommitLog flushed to {flushed:,} of " in dash.log.value
        assert "PowerLossReport(" not in dash.log.value
        new = dash.recover()
        assert new is not store
        assert new.recovery_plan.mode == "abnormal"
        assert new.get_max_phy_offset() == flushed
        dash.throttle.flush()
        assert not dash.throttle.errors
        assert dash.views["recovery"].plan is new.recovery_plan
        assert dash.visible == "files"
        r = dash.query("Orders", "order-3")
        assert len(r.messages) == 1
        assert dash.views["index"].walk
        # the answer is shown: the index tab, with the walk drawn in it
        assert dash.visible == "index"
        walk_points = [len(t.x) for t in dash.views["index"].walk_figure.data if t.x is not None]
        assert sum(walk_points) >= 2  # the slot and the item found
        assert dash.commit_log_view.selected == r.messages[0].commit_log_offset
        dash.advance_hours(73)
        dash.jump_to_hour(4)
        dash.throttle.flush()
        assert dash.views["cleanup"].plan.local_hour == 4
        assert any("recovered (abnormal)" in line for line in dash.log_lines)
        new.shutdown()
    finally:
        dash.close()


def test_dashboard_process_kill(store):
    dash = StoreDashboard(store)
    try:
        dash.put(20)
        end = store.get_max_phy_offset()
        dash.crash("process_kill")
        new = dash.recover()
        assert new.recovery_plan.mode == "abnormal"
        assert new.get_max_phy_offset() == end  # nothing written to a mapping is lost by a kill
        new.shutdown()
    finally:
        dash.close()


def test_figure_widgets_send_arrays(store):
    put_many(store, 20)
    view = ConsumeQueueView(store, "T0", 0, autoupdate=False)
    assert isinstance(np.asarray(view.figure.data[0].x), np.ndarray)
    view.close()
