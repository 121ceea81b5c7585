"""The cheap redraw path: spec diffs applied without plotly's validation must show exactly what
the validated figure shows; latched ``reset`` flags must not lose a truncation; hidden tabs
catch up when shown; the committed/flushed labels stay readable."""

from __future__ import annotations

import base64
import json
import time

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqlab.clock import ManualClock
from rmqlab.codec.consume_queue_unit import CQ_UNIT_DTYPE
from rmqlab.config import MessageStoreConfig
from rmqlab.store.message import Message
from rmqlab.store.message_store import MessageStore
from rmqlab.widgets import CommitLogView, MappedFileView, StoreDashboard, figures
from rmqlab.widgets._base import set_figure
from rmqlab.widgets._source import FileState, QueueState, RecordInfo
from tests.widgets.conftest import put_many


def _shown(fig) -> dict:
    """What the browser would draw: the figure's JSON, trace uids dropped, and empty layout lists
    (``shapes: []``: no shapes) left out as plotly's validated JSON leaves them out."""
    out = _plain(json.loads(pio.to_json(fig, validate=False)))
    for t in out.get("data", []):
        t.pop("uid", None)
    out["layout"] = {k: v for k, v in out.get("layout", {}).items() if v != []}
    return out


def _plain(v):
    """JSON with plotly's base64 typed arrays (``{"dtype", "bdata"}``) decoded to plain lists, NaN
    as a string."""
    if isinstance(v, dict):
        if set(v) in ({"dtype", "bdata"}, {"dtype", "bdata", "shape"}):
            arr = np.frombuffer(base64.b64decode(v["bdata"]), dtype=v["dtype"])
            if "shape" in v:
                arr = arr.reshape([int(x) for x in str(v["shape"]).split(",")])
            return _plain(arr.tolist())
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, float) and v != v:
        return "NaN"  # equal to itself, unlike nan
    return v


def _validated(spec) -> dict:
    return _shown(figures.to_figure(spec))


# ---------------------------------------------------------------- random builder inputs
_STATUS = st.sampled_from(["full", "active", "empty", "deleted"])


@st.composite
def queue_states(draw):
    size = draw(st.sampled_from([1024, 4096, 65536]))
    n = draw(st.integers(0, 5))
    files = []
    for i in range(n):
        wrote = draw(st.integers(0, size))
        committed = draw(st.integers(0, wrote))
        flushed = draw(st.integers(0, committed))
        files.append(FileState(f"{i * size:020d}", i * size, size, wrote, committed, flushed, draw(_STATUS)))
    end = n * size
    committed_where = draw(st.none() | st.integers(0, max(end, 0)))
    flushed_where = draw(st.none() | st.integers(0, committed_where if committed_where is not None else end))
    if draw(st.booleans()) and committed_where is not None:
        flushed_where = committed_where  # equal pointers: one combined label
    pending = tuple(FileState(f"{(n + j) * size:020d}", (n + j) * size, size, 0, 0, 0, "pending")
                    for j in range(draw(st.integers(0, 2))))
    return QueueState("commitlog", tuple(files), committed_where, flushed_where, pending, live=draw(st.booleans()))


@st.composite
def record_lists(draw):
    out, off = [], 0
    for _ in range(draw(st.integers(0, 12))):
        if draw(st.integers(0, 9)) == 0:
            size = draw(st.integers(8, 500))
            out.append(RecordInfo(off, size, "blank", f"{off:020d}"))
        else:
            size = draw(st.integers(90, 400))
            topic = draw(st.sampled_from(["A", "B", "<b>C</b>", "D&E"]))
            out.append(RecordInfo(off, size, "message", "00000000000000000000", topic, draw(st.integers(0, 3)),
                                  draw(st.integers(0, 99)), draw(st.none() | st.sampled_from(["t1", "<t>"])),
                                  draw(st.sampled_from(["", "k1", "k1 k2"]))))
        off += size
    return out


@st.composite
def cq_units(draw):
    n = draw(st.integers(0, 12))
    units = np.zeros(n, CQ_UNIT_DTYPE)
    for i in range(n):
        units[i] = (draw(st.integers(0, 1 << 40)), draw(st.sampled_from([100, 300, 0x7FFFFFFF])),
                    draw(st.integers(-(1 << 40), 1 << 40)))
    return units


def _specs(kind, draw_values):
    if kind == "files":
        return [figures.mapped_files_spec(s) for s in draw_values]
    if kind == "log":
        return [figures.commit_log_spec(r) for r in draw_values]
    if kind == "cq":
        return [figures.consume_queue_spec("T", 0, 5, u, dispatch={"reput_from_offset": 7, "behind_bytes": 3})
                for u in draw_values]
    return [figures.index_heatmap_spec(np.asarray(v, np.int64)) for v in draw_values]


_SEQUENCES = st.one_of(
    st.tuples(st.just("files"), st.lists(queue_states(), min_size=1, max_size=3)),
    st.tuples(st.just("log"), st.lists(record_lists(), min_size=1, max_size=3)),
    st.tuples(st.just("cq"), st.lists(cq_units(), min_size=1, max_size=3)),
    st.tuples(st.just("heat"), st.lists(st.lists(st.integers(0, 5), min_size=0, max_size=50), min_size=1,
                                        max_size=3)),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_SEQUENCES)
def test_diffed_widget_equals_validated_figure(seq):
    """After each of a sequence of redraws the widget holds exactly the validated figure's JSON
    (trace counts changing, properties appearing and disappearing included)."""
    kind, values = seq
    fw = go.FigureWidget()
    sent = _record(fw)
    for spec in _specs(kind, values):
        set_figure(fw, spec)
        assert _shown(fw) == _validated(spec)
    _check_messages(sent)


def _record(fw) -> list:
    """Capture the update messages ``fw`` sends to the browser."""
    sent: list = []
    real = fw._send_update_msg

    def send(restyle_data, relayout_data, trace_indexes=None, **kw):
        sent.append((restyle_data, relayout_data, trace_indexes))
        return real(restyle_data, relayout_data, trace_indexes, **kw)

    fw._send_update_msg = send
    return sent


def _check_messages(sent) -> None:
    """Every restyle value is one value per listed trace and never Undefined: plotly.js stores an
    undefined value as a present attribute (``marker: undefined``), which breaks its next newPlot."""
    from plotly.basedatatypes import Undefined

    for restyle, _relayout, indexes in sent:
        for values in restyle.values():
            assert len(values) == len(indexes)
            assert not any(v is Undefined for v in values)


def test_unchanged_spec_sends_nothing_and_changes_send_only_themselves():
    fw = go.FigureWidget()
    sent = _record(fw)
    state = QueueState("commitlog", (FileState("0" * 20, 0, 1024, 10, 10, 5, "active"),), 10, 5, live=True)
    assert set_figure(fw, figures.mapped_files_spec(state)) is True  # first draw: traces added
    sent.clear()
    assert set_figure(fw, figures.mapped_files_spec(state)) is False
    assert sent == []  # nothing changed: no message
    moved = QueueState("commitlog", (FileState("0" * 20, 0, 1024, 20, 10, 5, "active"),), 10, 5, live=True)
    set_figure(fw, figures.mapped_files_spec(moved))
    _check_messages(sent)
    names = {fw.data[i].name for _, _, indexes in sent for i in indexes}
    assert names == {"file", "written", "wrote"}  # hover texts and the wrote marker moved
    assert len(sent) == 1  # one message: "file" re-sends its unchanged x along with its new hover text
    assert all(relayout == {} for _, relayout, _ in sent)
    assert list(fw.data[4].x) == [20]


def test_replaced_traces_are_created_horizontal_and_the_whole_layout_is_sent_again():
    """plotly.js answers a restyle that turns a bar trace horizontal by swapping the x and y axes,
    types included: a CleanupView whose "keep" trace was joined by a "delete" one drew its dates
    on a number axis, then lost every bar (tests/browser: the disk slider). Re-made traces are
    created with their orientation, never restyled to it, and the layout goes again whole."""
    fw = go.FigureWidget()
    added: list = []
    real_add = fw._send_addTraces_msg

    def add(new_traces_data, **kw):
        added.append(new_traces_data)
        return real_add(new_traces_data, **kw)

    fw._send_addTraces_msg = add
    sent = _record(fw)
    first = {"data": [{"type": "bar", "orientation": "h", "y": ["a", "b"], "base": [0, 5], "x": [3, 3]}],
             "layout": {"xaxis": {"type": "date"}, "yaxis": {"autorange": "reversed"}, "title": {"text": "one"}}}
    second = {"data": [{"type": "bar", "orientation": "h", "y": ["a"], "base": [0], "x": [3]},
                       {"type": "bar", "orientation": "h", "y": ["b"], "base": [5], "x": [3]}],
              "layout": {"xaxis": {"type": "date"}, "yaxis": {"autorange": "reversed"}, "title": {"text": "two"}}}
    assert set_figure(fw, first) is True
    added.clear()
    sent.clear()
    assert set_figure(fw, second) is True  # one trace -> two: re-made
    assert [t.get("orientation") for t in added[0]] == ["h", "h"]
    _check_messages(sent)
    assert all("orientation" not in restyle for restyle, _, _ in sent)  # no change of orientation follows
    relayouts = [relayout for _, relayout, _ in sent if relayout]
    assert len(relayouts) == 1
    assert set(relayouts[0]) == {"xaxis", "yaxis", "title"}  # all of it, not only the changed title
    assert _shown(fw) == _validated(second)
    # a layout key the next spec drops is still reset when the traces are re-made
    third = {"data": [{"type": "bar", "orientation": "h", "y": ["a"], "base": [0], "x": [3]}],
             "layout": {"xaxis": {"type": "date"}}}
    sent.clear()
    set_figure(fw, third)
    relayout = next(r for _, r, _ in sent if r)
    assert relayout["yaxis"] is None
    assert relayout["title"] is None


def test_set_figure_accepts_a_figure_and_template_is_sent_resolved():
    fw = go.FigureWidget()
    fig = figures.chain_histogram_figure(np.array([0, 1, 1, 2]))
    set_figure(fw, fig)
    assert _shown(fw) == _shown(fig)
    set_figure(fw, figures.chain_histogram_spec(np.array([0, 1, 3])))
    assert isinstance(fw.layout.template.to_plotly_json(), dict)
    assert _shown(fw) == _validated(figures.chain_histogram_spec(np.array([0, 1, 3])))


# ---------------------------------------------------------------- committed/flushed labels
def _labels(state):
    return figures.mapped_files_spec(state)["layout"]["annotations"]


def _top_margin(state):
    return figures.mapped_files_spec(state)["layout"]["margin"]["t"]


def _files(n=4, size=1000):
    return tuple(FileState(f"{i * size:020d}", i * size, size, size, size, size, "full") for i in range(n))


def test_equal_where_gives_one_combined_label():
    (label,) = _labels(QueueState("commitlog", _files(), 2500, 2500, live=True))
    assert "committed_where" in label["text"]
    assert "flushed_where" in label["text"]
    assert "2,500" in label["text"]


def test_close_where_labels_are_staggered():
    state = QueueState("commitlog", _files(), 2500, 2400, live=True)
    c, f = _labels(state)
    assert c["text"].startswith("committed_where")
    assert f["text"].startswith("flushed_where")
    assert f["yshift"] - c["yshift"] >= 12  # a row apart: the labels are 10 px text
    assert (c["y"], c["yanchor"]) == (f["y"], f["yanchor"]) == (1.0, "bottom")  # above the plot area
    assert _top_margin(state) >= 40 + 2 * 12  # room for both rows under the title


def test_far_where_labels_share_one_row():
    state = QueueState("commitlog", _files(), 3900, 100, live=True)
    c, f = _labels(state)
    assert c["yshift"] == f["yshift"] == 0
    assert (c["x"], f["x"]) == (3900, 100)
    assert _top_margin(state) < 40 + 2 * 12


def test_no_where_labels_for_a_snapshot():
    state = QueueState("commitlog", _files(), None, None)
    assert _labels(state) == []
    assert _top_margin(state) == 40


def test_mapped_file_view_labels_after_commit_and_flush(tmp_path):
    """With the transient store pool, commit then flush leaves committed_where == flushed_where:
    the view shows one label naming both, where it used to draw two on top of each other."""
    cfg = MessageStoreConfig.small(str(tmp_path / "s"), mapped_file_size_commit_log=8 * 1024,
                                   transient_store_pool_enable=True)
    store = MessageStore.open(str(tmp_path / "s"), cfg, clock=ManualClock(time.time_ns() // 1_000_000), threaded=False)
    try:
        view = MappedFileView(store, autoupdate=False)
        put_many(store, 30)
        store.flush()
        view.refresh()
        mfq = store.commit_log.mapped_file_queue
        assert mfq.committed_where == mfq.flushed_where > 0
        assert [a.text for a in view.figure.layout.annotations] == [
            f"committed_where = flushed_where {mfq.flushed_where:,}"]
        view.close()
    finally:
        store.shutdown()


# ---------------------------------------------------------------- commit log: reset without a rescan
def test_latched_reset_keeps_unchanged_files_and_catches_truncation(store, monkeypatch):
    put_many(store, 60)
    view = CommitLogView(store, autoupdate=False)
    scanned = []
    real = view.source.scan_records
    monkeypatch.setattr(view.source, "scan_records", lambda mf, pos=0: scanned.append((mf.name, pos)) or real(mf, pos))
    flags = frozenset({"records", "reset"})  # what the latched router always marks
    view._update(flags)
    full = [name for name, pos in scanned if pos == 0]
    assert full == []  # nothing rescanned from the start
    # cut the log inside its last file, then write different (bigger) records over the cut
    mfq = store.commit_log.mapped_file_queue
    cut = view.records[-10].offset
    mfq.truncate_dirty_files(cut)
    for i in range(6):
        store.put_message(Message("T9", b"y" * 700, keys=[f"z{i}"]))
    view._update(flags)
    fresh = CommitLogView(store, autoupdate=False)
    assert view.records == fresh.records
    assert [r.topic for r in view.records if r.kind == "message"][-6:] == ["T9"] * 6
    view.close()
    fresh.close()


# ---------------------------------------------------------------- dashboard: hidden tabs catch up
def test_hidden_tabs_catch_up_when_shown(store):
    dash = StoreDashboard(store)
    try:
        assert dash.visible == "files"
        put_many(store, 20)  # events only: no dashboard action
        dash.throttle.flush()
        assert dash.views["files"].state.files[-1].wrote == mfq_wrote(store)
        assert len(dash.views["log"].records) == 0  # hidden: not redrawn
        assert dash.stale["log"]
        assert dash.stale["consume queue"]
        dash.tabs.selected_index = list(dash.views).index("log")
        dash.throttle.flush()
        assert len([r for r in dash.views["log"].records if r.kind == "message"]) == 20
        assert not dash.stale["log"]
        assert dash.stale["consume queue"]  # still hidden
        dash.redraw()  # an action redraws every view
        dash.throttle.flush()
        assert not any(dash.stale.values())
        assert not dash.throttle.errors
    finally:
        dash.close()


def mfq_wrote(store) -> int:
    return store.commit_log.mapped_file_queue.mapped_files[-1].wrote_position


@pytest.mark.parametrize("n", [0, 3])
def test_hover_text_stays_escaped_on_the_fast_path(store, n):
    store.put_message(Message("T", b"<script>alert(1)</script>", tags="<script>", keys=["<script>"]))
    put_many(store, n)
    view = CommitLogView(store, autoupdate=False)
    assert all("<script>" not in h for t in view.figure.data for h in (t.hovertext or ()))
    view.close()


@pytest.mark.parametrize("max_records", [7, 50, 2000])
def test_commit_log_view_decodes_only_the_newest_records(store, max_records):
    """Hopping over records that cannot be shown gives the same records as a full scan."""
    view = CommitLogView(store, autoupdate=False, max_records=max_records)
    for start in (0, 40, 45, 120):  # big and small steps, across file rolls
        put_many(store, {0: 40, 40: 5, 45: 75, 120: 3}[start], start=start)
        view.refresh(["records"])
        full: list = []
        for mf in view.source.mapped_files("commitlog"):
            full += view.source.scan_records(mf, 0)[0]
        assert view.records == full[-max_records:]
    view.close()
