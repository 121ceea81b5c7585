"""Pure figure builders: plain state, plans and records -> figure specs and ``go.Figure``.

No widgets and no engine objects with behaviour: inputs are the value types of
:mod:`rmqlab.widgets._source` (``QueueState``, ``RecordInfo``, ``WalkStep``), the engine's plan
dataclasses (``RecoveryPlan``, ``CleanupPlan``) and numpy arrays. Each ``*_spec`` builder returns
a :data:`Spec` (plain dicts and numpy arrays, nothing validated: cheap to build and to compare);
each ``*_figure`` is the same spec as a validated ``go.Figure``. The live views diff specs into
their ``FigureWidget`` (:func:`rmqlab.widgets._base.set_figure`); the static HTML report
(``rmqlab demo``) embeds the figures. HTML fragments (decoded record, tables) escape every piece of stored text:
a topic, key or body of ``<script>...`` stays text.

Axes: "offset" axes are absolute CommitLog (or queue) byte offsets; time axes are local time of
the plan's clock.
"""

from __future__ import annotations

import functools
import html
import math
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import numpy as np
import plotly.graph_objects as go

from rmqlab.codec import flags as _flags
from rmqlab.codec.batch_consume_queue_unit import INVALID_POS
from rmqlab.codec.consume_queue_ext_unit import undecorate
from rmqlab.codec.consume_queue_unit import MAX_ADDR
from rmqlab.codec.message import BlankRecord, MessageRecord, host_length, store_timestamp_position

if TYPE_CHECKING:
    from rmqlab.store.cleanup import CleanupPlan
    from rmqlab.store.recovery import RecoveryPlan
    from rmqlab.widgets._source import FileState, MemoryState, QueueState, RecordInfo, WalkStep

__all__ = [
    "STATUS_COLORS",
    "Spec",
    "batch_consume_queue_figure",
    "batch_consume_queue_spec",
    "batch_consume_queue_table_html",
    "chain_histogram_figure",
    "chain_histogram_spec",
    "chain_lengths",
    "cleanup_table_html",
    "cleanup_timeline_figure",
    "cleanup_timeline_spec",
    "commit_log_figure",
    "commit_log_spec",
    "consume_queue_figure",
    "consume_queue_spec",
    "consume_queue_table_html",
    "disk_gauge_figure",
    "disk_gauge_spec",
    "esc",
    "index_heatmap_figure",
    "index_heatmap_spec",
    "index_walk_figure",
    "index_walk_spec",
    "mapped_files_figure",
    "mapped_files_spec",
    "memory_store_figure",
    "memory_store_spec",
    "memory_table_html",
    "record_html",
    "recovery_figure",
    "recovery_spec",
    "recovery_steps_html",
    "report_html",
    "to_figure",
    "topic_color",
]

STATUS_COLORS = {
    "full": "#9ecae1", "active": "#6baed6", "empty": "#deebf7", "pending": "#fdd0a2", "deleted": "#d9d9d9",
}
POINTER_STYLE = {  # pointer -> (marker symbol, colour)
    "wrote": ("triangle-down", "#08519c"),
    "committed": ("diamond", "#756bb1"),
    "flushed": ("triangle-up", "#31a354"),
}
_PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf")
_BLANK_COLOR = "#bdbdbd"
_ROW_HEIGHT = 28
_HOUR_MS = 3_600_000

Spec = dict[str, Any]
"""A figure as plain data: ``{"data": [trace dicts, each with its "type"], "layout": {...}}``."""


def to_figure(spec: Spec) -> go.Figure:
    """``spec`` as a validated ``go.Figure`` (the static report, ``to_html``)."""
    return go.Figure(data=spec["data"], layout=spec["layout"])


def esc(value: Any) -> str:
    """``html.escape(str(value))``: every stored string goes through here before display."""
    return html.escape("" if value is None else str(value), quote=True)


def topic_color(topic: str, topics: Sequence[str]) -> str:
    return _PALETTE[topics.index(topic) % len(_PALETTE)] if topic in topics else _PALETTE[0]


def _base_layout(title: str, height: int = 260, **kw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "title": {"text": esc(title), "x": 0.01, "font": {"size": 14}},
        "height": height, "margin": {"l": 90, "r": 20, "t": 40, "b": 40},
        "legend": {"orientation": "h", "y": -0.25}, "barmode": "overlay", "template": "plotly_white",
    }
    out.update(kw)
    return out


# ---------------------------------------------------------------------------------------------
# mapped files

def _file_hover(f: FileState) -> str:
    return (f"<b>{esc(f.name)}</b> ({esc(f.status)})<br>start {f.start:,} size {f.size:,}<br>"
            f"wrote {f.wrote:,} committed {f.committed:,} flushed {f.flushed:,}<br>"
            f"absolute: wrote {f.start + f.wrote:,} flushed {f.start + f.flushed:,}")


def mapped_files_spec(state: QueueState, ghosts: Sequence[FileState] = ()) -> Spec:
    """Each file a bar of its size on an absolute offset axis; the written part darker; the three
    pointers as markers (one row each) at ``start + position``; the queue's ``committed_where``
    and ``flushed_where`` as vertical lines; pending pre-allocations hatched; deleted files
    (``ghosts``) fading with their ``opacity``. The two lines' labels sit above the plot and
    never overlap: one label naming both when the two are equal, a row each when they are close.

    Traces, in order (the live view updates them in place): capacity, written, pending, deleted,
    wrote, committed, flushed.
    """
    files = list(state.files)
    cap = dict(
        type="bar", name="file", orientation="h", y=["files"] * len(files), base=[f.start for f in files],
        x=[f.size for f in files], marker={"color": [STATUS_COLORS.get(f.status, "#ccc") for f in files],
                                           "line": {"color": "#555", "width": 1}},
        hovertext=[_file_hover(f) for f in files], hoverinfo="text", customdata=[f.name for f in files],
    )
    written = dict(
        type="bar", name="written", orientation="h", y=["files"] * len(files), base=[f.start for f in files],
        x=[f.wrote for f in files], width=0.35, marker={"color": "#3182bd"},
        hovertext=[_file_hover(f) for f in files], hoverinfo="text",
    )
    pend = list(state.pending)
    pending = dict(
        type="bar", name="pre-allocating", orientation="h", y=["files"] * len(pend), base=[f.start for f in pend],
        x=[f.size for f in pend], marker={"color": STATUS_COLORS["pending"], "pattern": {"shape": "/"},
                                          "line": {"color": "#e6550d", "width": 1}},
        hovertext=[f"<b>{esc(f.name)}</b><br>pre-allocation requested (next / next-next file)" for f in pend],
        hoverinfo="text",
    )
    gh = list(ghosts)
    deleted = dict(
        type="bar", name="deleted", orientation="h", y=["files"] * len(gh), base=[f.start for f in gh],
        x=[f.size for f in gh],
        marker={"color": STATUS_COLORS["deleted"], "opacity": [f.opacity for f in gh]},
        hovertext=[f"<b>{esc(f.name)}</b><br>deleted" for f in gh], hoverinfo="text",
    )
    traces: list[Any] = [cap, written, pending, deleted]
    for ptr, (symbol, color) in POINTER_STYLE.items():
        xs = [f.start + getattr(f, ptr) for f in files]
        traces.append(dict(
            type="scatter", name=ptr, mode="markers", x=xs, y=[ptr] * len(files),
            marker={"symbol": symbol, "size": 11, "color": color},
            hovertext=[f"{ptr} of {esc(f.name)}: {getattr(f, ptr):,} (absolute {x:,})" for f, x in zip(files, xs,
                                                                                                      strict=True)],
            hoverinfo="text", customdata=[f.name for f in files],
        ))
    shapes: list[dict[str, Any]] = []
    for where, color in ((state.committed_where, "#756bb1"), (state.flushed_where, "#31a354")):
        if where is not None:
            shapes.append({"type": "line", "x0": where, "x1": where, "yref": "paper", "y0": 0, "y1": 1,
                           "line": {"color": color, "dash": "dash", "width": 2}})
    annotations, rows = _where_labels(state, files)
    title = f"{state.queue}: {len(files)} file(s)" + (" (live)" if state.live else " (snapshot)")
    layout = _base_layout(title, height=240 + _LABEL_ROW_PX * rows, shapes=shapes, annotations=annotations,
                          margin={"l": 90, "r": 20, "t": 40 + _LABEL_ROW_PX * rows, "b": 40},
                          xaxis={"title": {"text": "offset (bytes)"}, "tickformat": ","},
                          yaxis={"categoryorder": "array", "categoryarray": ["flushed", "committed", "wrote", "files"]})
    return {"data": traces, "layout": layout}


#: committed_where / flushed_where labels closer than this share of the axis get a row each.
_LABEL_CLOSE = 0.4  # labels are ~150 px wide; a plot is 400-900 px
_LABEL_ROW_PX = 14  # one row of 10 px text


def _where_labels(state: QueueState, files: Sequence[FileState]) -> tuple[list[dict[str, Any]], int]:
    """Annotations for the two queue lines, in a band above the plot area (off the bars), and how
    many rows of text the band needs: far apart, one row, each label at its line; equal, one
    label naming both; close (the labels would overlap), the flushed label a row higher."""
    c, f = state.committed_where, state.flushed_where

    def label(x: int, text: str, color: str, row: int) -> dict[str, Any]:
        return {"x": x, "yref": "paper", "y": 1.0, "yanchor": "bottom", "yshift": _LABEL_ROW_PX * row,
                "xanchor": "left", "showarrow": False, "text": text, "font": {"size": 10, "color": color}}

    if c is not None and f is not None and c == f:
        return [label(c, f"committed_where = flushed_where {c:,}", "#756bb1", 0)], 1
    span = max([x.start + x.size for x in files] + [c or 0, f or 0, 1]) - min([x.start for x in files] + [c or 0,
                                                                                                         f or 0])
    close = c is not None and f is not None and abs(c - f) < _LABEL_CLOSE * max(span, 1)
    out = [label(where, f"{name} {where:,}", color, row if close else 0)
           for name, where, color, row in (("committed_where", c, "#756bb1", 0), ("flushed_where", f, "#31a354", 1))
           if where is not None]
    return out, (2 if close else 1) if out else 0


def mapped_files_figure(state: QueueState, ghosts: Sequence[FileState] = ()) -> go.Figure:
    """:func:`mapped_files_spec` as a Figure."""
    return to_figure(mapped_files_spec(state, ghosts))


# ---------------------------------------------------------------------------------------------
# commit log

def _record_hover(r: RecordInfo) -> str:
    if r.kind == "blank":
        return f"<b>blank (end of file)</b><br>offset {r.offset:,}<br>fills {r.size:,} bytes<br>{esc(r.file)}"
    return (f"<b>{esc(r.topic)}</b> q{r.queue_id} #{r.queue_offset}<br>offset {r.offset:,} size {r.size:,}<br>"
            f"tags {esc(r.tags)}<br>keys {esc(r.keys)}<br>{esc(r.file)}")


def commit_log_spec(records: Sequence[RecordInfo], files: Sequence[FileState] = (), *,
                    title: str = "CommitLog records") -> Spec:
    """Records along the log (bar width = bytes), one trace per topic (sorted), blank EOF records
    hatched grey in the last trace; file boundaries as dotted lines. ``customdata`` of every bar
    is the record's offset (what a click selects)."""
    topics = sorted({r.topic for r in records if r.kind == "message"})
    traces = []
    for topic in topics:
        rs = [r for r in records if r.kind == "message" and r.topic == topic]
        offsets = np.fromiter((r.offset for r in rs), np.int64, len(rs))  # arrays: validated and sent as binary
        traces.append(dict(
            type="bar", name=esc(topic), orientation="h", y=np.full(len(rs), "log", dtype=object), base=offsets,
            x=np.fromiter((r.size for r in rs), np.int64, len(rs)), customdata=offsets,
            hovertext=[_record_hover(r) for r in rs],
            hoverinfo="text", marker={"color": topic_color(topic, topics), "line": {"color": "white", "width": 0.5}},
        ))
    blanks = [r for r in records if r.kind == "blank"]
    traces.append(dict(
        type="bar", name="blank (EOF)", orientation="h", y=["log"] * len(blanks), base=[r.offset for r in blanks],
        x=[r.size for r in blanks], customdata=[r.offset for r in blanks],
        hovertext=[_record_hover(r) for r in blanks], hoverinfo="text",
        marker={"color": _BLANK_COLOR, "pattern": {"shape": "x"}},
    ))
    shapes = [{"type": "line", "x0": f.start, "x1": f.start, "yref": "paper", "y0": 0, "y1": 1,
               "line": {"color": "#888", "dash": "dot", "width": 1}} for f in files]
    layout = _base_layout(f"{title}: {sum(r.kind == 'message' for r in records)} message(s), {len(blanks)} blank",
                          height=220, shapes=shapes, barmode="overlay",
                          xaxis={"title": {"text": "CommitLog offset (bytes)"}, "tickformat": ","},
                          clickmode="event")
    return {"data": traces, "layout": layout}


def commit_log_figure(records: Sequence[RecordInfo], files: Sequence[FileState] = (), *,
                      title: str = "CommitLog records") -> go.Figure:
    """:func:`commit_log_spec` as a Figure."""
    return to_figure(commit_log_spec(records, files, title=title))


def _field_spans(rec: MessageRecord) -> list[tuple[str, int, int, str]]:
    """(field, start, length, value) of every field of a V1/V2 record, in layout order."""
    bh = host_length(rec.sys_flag, _flags.BORNHOST_V6_FLAG)
    sh = host_length(rec.sys_flag, _flags.STOREHOSTADDRESS_V6_FLAG)
    st = store_timestamp_position(rec.sys_flag)
    tl = 2 if rec.version == 2 else 1
    topic_b = rec.topic.encode("utf-8")
    out = [
        ("TOTALSIZE", 0, 4, str(rec.store_size)),
        ("MAGICCODE", 4, 4, f"0x{rec.magic & 0xFFFFFFFF:08X} (V{rec.version})"),
        ("BODYCRC", 8, 4, f"{rec.body_crc} ({'ok' if rec.crc_ok else 'MISMATCH'})"),
        ("QUEUEID", 12, 4, str(rec.queue_id)),
        ("FLAG", 16, 4, str(rec.flag)),
        ("QUEUEOFFSET", 20, 8, str(rec.queue_offset)),
        ("PHYSICALOFFSET", 28, 8, str(rec.commit_log_offset)),
        ("SYSFLAG", 36, 4, f"{rec.sys_flag} (tx type {rec.transaction_type})"),
        ("BORNTIMESTAMP", 40, 8, _ms_text(rec.born_timestamp)),
        ("BORNHOST", 48, bh, f"{rec.born_host[0]}:{rec.born_host[1]}"),
        ("STORETIMESTAMP", st, 8, _ms_text(rec.store_timestamp)),
        ("STOREHOSTADDRESS", st + 8, sh, f"{rec.store_host[0]}:{rec.store_host[1]}"),
    ]
    pos = st + 8 + sh
    body_len = len(rec.body)
    for name, length, value in (
        ("RECONSUMETIMES", 4, str(rec.reconsume_times)),
        ("PREPAREDTRANSACTIONOFFSET", 8, str(rec.prepared_transaction_offset)),
        ("BODYLENGTH", 4, str(body_len)),
        ("BODY", body_len, _text_preview(rec.body)),
        ("TOPICLENGTH", tl, str(len(topic_b))),
        ("TOPIC", len(topic_b), rec.topic),
        ("PROPERTIESLENGTH", 2, str(len(rec.properties_raw))),
        ("PROPERTIES", len(rec.properties_raw), "; ".join(f"{k}={v}" for k, v in rec.properties.items())),
    ):
        out.append((name, pos, length, value))
        pos += length
    return out


def _ms_text(ms: int) -> str:
    try:
        return f"{ms} ({datetime.fromtimestamp(ms / 1000).astimezone().isoformat(timespec='milliseconds')})"
    except (OverflowError, OSError, ValueError):
        return str(ms)


def _text_preview(data: bytes, limit: int = 2000) -> str:
    text = data[:limit].decode("utf-8", errors="replace")
    return text + (f" … ({len(data):,} bytes)" if len(data) > limit else "")


def _hex(data: bytes, limit: int = 48) -> str:
    shown = data[:limit].hex(" ")
    return shown + (f" … (+{len(data) - limit:,} bytes)" if len(data) > limit else "")


def record_html(rec: MessageRecord | BlankRecord | None, raw: bytes, *, offset: int | None = None) -> str:
    """A record decoded field by field: name, byte range, value, bytes (hex). All text escaped."""
    if rec is None:
        return f"<div class='rmq-record'><i>no record at offset {esc(offset)}</i></div>"
    if isinstance(rec, BlankRecord):
        return (f"<div class='rmq-record'><b>blank end-of-file record</b> at offset {esc(offset)}: "
                f"TOTALSIZE {rec.size:,} (bytes left in the file), "
                f"MAGICCODE 0x{_flags.BLANK_MAGIC_CODE & 0xFFFFFFFF:08X}"
                f"<br><code>{esc(_hex(raw))}</code></div>")
    rows = []
    for name, start, length, value in _field_spans(rec):
        rows.append(f"<tr><td><b>{esc(name)}</b></td><td>{start}..{start + length}</td><td>{esc(value)}</td>"
                    f"<td><code>{esc(_hex(raw[start:start + length]))}</code></td></tr>")
    head = (f"<b>{esc(rec.topic)}</b> queue {rec.queue_id} offset {rec.queue_offset} · msgId {esc(rec.msg_id)} · "
            f"tags {esc(rec.tags)} · keys {esc(' '.join(rec.keys))}")
    return (f"<div class='rmq-record'><div>{head}</div><table class='rmq-fields' style='font-size:12px'>"
            "<tr><th>field</th><th>bytes</th><th>value</th><th>raw</th></tr>" + "".join(rows) + "</table></div>")


# ---------------------------------------------------------------------------------------------
# consume queue

def _tags_texts(tags: np.ndarray, ext: tuple[np.ndarray, np.ndarray] | None) -> list[str]:
    """Each unit's tags code as a view says it: the code; for an ext address, the address, its
    ext offset and the tags code it resolves to, or "unresolved" (RocketMQ's null tags code)."""
    out = [str(t) for t in tags.tolist()]
    if ext is None:
        return out
    found, real = ext
    for i in np.flatnonzero(tags <= MAX_ADDR).tolist():
        a = int(tags[i])
        code = str(int(real[i])) if found[i] else "unresolved"
        out[i] = f"{code} (ext address {a}, ext offset {undecorate(a):,})"
    return out


def consume_queue_spec(topic: str, queue_id: int, base: int, units: np.ndarray, *,
                       dispatch: dict[str, int] | None = None, limit: int = 2000,
                       commit_log_min: int = 0, ext: tuple[np.ndarray, np.ndarray] | None = None) -> Spec:
    """One marker per 20-byte unit: x = queue offset, y = the CommitLog offset it points at,
    size ~ message bytes; pre-blank units (size 0x7FFFFFFF) grey at y = 0. Units pointing below
    ``commit_log_min`` (their CommitLog file was deleted by cleanup; a get answers
    OFFSET_TOO_SMALL or MESSAGE_WAS_REMOVING for them) are hollow grey crosses, "removed". The
    reput offset (where dispatch will read next) is a horizontal line when the store is live.
    Only the last ``limit`` units are drawn (the title says how many the queue holds).
    ``ext``: ``(resolved, tags_code)`` beside ``units`` (``Source.cq_ext``); a unit whose tags code
    is a ConsumeQueueExt address then shows the address and what it resolves to (or
    "unresolved": it matches every tag filter) on hover, and those that resolve to nothing are
    counted in the title."""
    total = len(units)
    if total > limit:
        base, units = base + total - limit, units[total - limit:]
        ext = None if ext is None else (ext[0][total - limit:], ext[1][total - limit:])
    n = len(units)
    q = np.arange(base, base + n)
    off = units["commit_log_offset"].astype(np.int64) if n else np.empty(0, np.int64)
    size = units["size"].astype(np.int64) if n else np.empty(0, np.int64)
    tags = units["tags_code"].astype(np.int64) if n else np.empty(0, np.int64)
    blank = size == 0x7FFFFFFF
    hover = [f"queue offset {a}<br>CommitLog offset {b:,}<br>size {c}<br>tags code {esc(d)}"
             for a, b, c, d in zip(q.tolist(), off.tolist(), size.tolist(), _tags_texts(tags, ext), strict=True)]
    unresolved = int(((tags <= MAX_ADDR) & ~ext[0]).sum()) if ext is not None else 0
    gone = ~blank & (off < commit_log_min)
    real = ~blank & ~gone
    traces = [
        dict(type="scatter", name="unit", mode="markers", x=q[real], y=off[real], customdata=q[real],
                   hovertext=[h for h, r in zip(hover, real, strict=True) if r], hoverinfo="text",
                   marker={"size": np.clip(np.sqrt(size[real].clip(min=1)) / 2, 5, 16), "color": "#3182bd"}),
        dict(type="scatter", name="removed", mode="markers", x=q[gone], y=off[gone], customdata=q[gone],
             hoverinfo="text",
             hovertext=[f"{h}<br>its CommitLog file was deleted (CommitLog starts at {commit_log_min:,})"
                        for h, g in zip(hover, gone, strict=True) if g],
             marker={"size": 7, "color": _BLANK_COLOR, "symbol": "x-thin-open", "line": {"width": 2}}),
        dict(type="scatter", name="pre-blank", mode="markers", x=q[blank], y=np.zeros(int(blank.sum())),
             hoverinfo="text",
                   hovertext=[h for h, b in zip(hover, blank, strict=True) if b],
                   marker={"size": 6, "color": _BLANK_COLOR, "symbol": "square"}),
    ]
    shapes, annotations = _dispatch_line(dispatch)
    title = (f"ConsumeQueue {topic}/{queue_id}: {total} unit(s)" + (f", last {n} drawn" if total > n else "")
             + (f", {int(gone.sum())} removed" if gone.any() else "")
             + (f", {unresolved} ext address(es) unresolved" if unresolved else ""))
    return {"data": traces, "layout": _base_layout(
        title, height=260, shapes=shapes, annotations=annotations, clickmode="event",
        xaxis={"title": {"text": "queue offset"}}, yaxis={"title": {"text": "CommitLog offset"}, "tickformat": ","})}


def consume_queue_figure(topic: str, queue_id: int, base: int, units: np.ndarray, *,
                         dispatch: dict[str, int] | None = None, limit: int = 2000,
                         commit_log_min: int = 0, ext: tuple[np.ndarray, np.ndarray] | None = None) -> go.Figure:
    """:func:`consume_queue_spec` as a Figure."""
    return to_figure(consume_queue_spec(topic, queue_id, base, units, dispatch=dispatch, limit=limit,
                                        commit_log_min=commit_log_min, ext=ext))


_UNRESOLVED_TITLE = ("the ext address resolves to nothing (its ext unit is gone): RocketMQ filters with a null "
                     "tags code, which matches every tag filter")


def consume_queue_table_html(base: int, units: np.ndarray, *, limit: int = 200, commit_log_min: int = 0,
                             ext: tuple[np.ndarray, np.ndarray] | None = None) -> str:
    """The last ``limit`` units as an HTML table (queue offset, CommitLog offset, size, tags code);
    units pointing below ``commit_log_min`` (their CommitLog file is deleted) greyed, "removed".
    With ``ext`` (``(resolved, tags_code)`` beside ``units``, ``Source.cq_ext``) an "ext address"
    column is added: for a unit whose stored tags code is a ConsumeQueueExt address, the address
    and its ext offset, and in the tags code column the code it resolves to, or "unresolved"."""
    n = len(units)
    first = max(0, n - limit)
    rows = []
    for i in range(first, n):
        u = units[i]
        size = int(u["size"])
        offset = int(u["commit_log_offset"])
        stored = int(u["tags_code"])
        gone = size != 0x7FFFFFFF and offset < commit_log_min
        style = " style='color:#999' title='its CommitLog file was deleted'" if gone else ""
        tags, address = f"<td>{stored}</td>", "<td></td>" if ext is not None else ""
        if ext is not None and stored <= MAX_ADDR:
            address = f"<td>{stored} (offset {undecorate(stored):,})</td>"
            tags = (f"<td>{int(ext[1][i])}</td>" if ext[0][i]
                    else f"<td title='{esc(_UNRESOLVED_TITLE)}'><i>unresolved</i></td>")
        rows.append(f"<tr{style}><td>{base + i}</td><td>{offset:,}{' (removed)' if gone else ''}</td>"
                    f"<td>{'pre-blank' if size == 0x7FFFFFFF else size}</td>{tags}{address}</tr>")
    note = f"<div><i>showing the last {limit} of {n} units</i></div>" if first else ""
    return (note + "<table class='rmq-cq' style='font-size:12px'><tr><th>queue offset</th><th>CommitLog offset</th>"
            "<th>size</th><th>tags code</th>" + ("<th>ext address</th>" if ext is not None else "") + "</tr>"
            + "".join(rows) + "</table>")


# ---------------------------------------------------------------------------------------------
# batch consume queue (5.x)

def _dispatch_line(dispatch: dict[str, int] | None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The reput offset as a dashed horizontal line and its label (none for a snapshot)."""
    if dispatch is None:
        return [], []
    y = dispatch["reput_from_offset"]
    return ([{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": y, "y1": y,
              "line": {"color": "#e6550d", "dash": "dash"}}],
            [{"xref": "paper", "x": 0, "y": y, "xanchor": "left", "yanchor": "bottom", "showarrow": False,
              "text": f"reput offset {y:,} (behind {dispatch['behind_bytes']:,} B)",
              "font": {"size": 10, "color": "#e6550d"}}])


def batch_consume_queue_spec(topic: str, queue_id: int, units: np.ndarray, *,
                             dispatch: dict[str, int] | None = None, limit: int = 2000,
                             commit_log_min: int = 0) -> Spec:
    """A 5.x BatchConsumeQueue (46-byte units, ``BCQ_UNIT_DTYPE``): one marker per unit at x = its
    msgBaseOffset (the queue offset of the record's first message), y = the CommitLog offset of
    the record, size ~ batch size, and a bar over the queue offsets the unit stands for
    (``msgBaseOffset .. + batchSize - 1``: an inner batch is one record, one unit, many offsets).
    Units pointing below ``commit_log_min`` are grey crosses, "removed", as in
    :func:`consume_queue_spec`; the reput offset likewise. Only the last ``limit`` units are drawn.
    ``customdata`` is each unit's msgBaseOffset (what a click selects)."""
    total = len(units)
    if total > limit:
        units = units[total - limit:]
    n = len(units)
    base = units["msg_base_offset"].astype(np.int64) if n else np.empty(0, np.int64)
    batch = units["batch_size"].astype(np.int64) if n else np.empty(0, np.int64)
    off = units["commit_log_offset"].astype(np.int64) if n else np.empty(0, np.int64)
    size = units["size"].astype(np.int64) if n else np.empty(0, np.int64)
    tags = units["tags_code"].astype(np.int64) if n else np.empty(0, np.int64)
    hover = [f"queue offsets {a}..{a + k - 1} ({k} message(s))<br>CommitLog offset {b:,}<br>size {c}<br>"
             f"tags code {d}" for a, k, b, c, d in zip(base.tolist(), batch.tolist(), off.tolist(), size.tolist(),
                                                        tags.tolist(), strict=True)]
    gone = off < commit_log_min
    real = ~gone
    # one segment per unit from its first to its last queue offset (NaN breaks the line between units)
    span_x = np.column_stack([base, base + np.maximum(batch, 1) - 1, np.full(n, np.nan)]).ravel()
    span_y = np.column_stack([off, off, np.full(n, np.nan)]).ravel()
    traces = [
        dict(type="scatter", name="queue offsets", mode="lines", x=span_x, y=span_y, hoverinfo="skip",
             line={"color": "#9ecae1", "width": 4}),
        dict(type="scatter", name="unit", mode="markers", x=base[real], y=off[real], customdata=base[real],
             hovertext=[h for h, r in zip(hover, real, strict=True) if r], hoverinfo="text",
             marker={"size": np.clip(4 + 2 * np.sqrt(batch[real].clip(min=1)), 5, 16), "color": "#3182bd"}),
        dict(type="scatter", name="removed", mode="markers", x=base[gone], y=off[gone], customdata=base[gone],
             hoverinfo="text",
             hovertext=[f"{h}<br>its CommitLog file was deleted (CommitLog starts at {commit_log_min:,})"
                        for h, g in zip(hover, gone, strict=True) if g],
             marker={"size": 7, "color": _BLANK_COLOR, "symbol": "x-thin-open", "line": {"width": 2}}),
    ]
    shapes, annotations = _dispatch_line(dispatch)
    messages = int(batch.sum())
    title = (f"BatchConsumeQueue {topic}/{queue_id}: {total} unit(s)" + (f", last {n} drawn" if total > n else "")
             + f", {messages} message(s)" + (" in them" if total > n else "")
             + (f", {int(gone.sum())} removed" if gone.any() else ""))
    return {"data": traces, "layout": _base_layout(
        title, height=260, shapes=shapes, annotations=annotations, clickmode="event",
        xaxis={"title": {"text": "queue offset (msgBaseOffset .. + batchSize - 1)"}},
        yaxis={"title": {"text": "CommitLog offset"}, "tickformat": ","})}


def batch_consume_queue_figure(topic: str, queue_id: int, units: np.ndarray, *,
                               dispatch: dict[str, int] | None = None, limit: int = 2000,
                               commit_log_min: int = 0) -> go.Figure:
    """:func:`batch_consume_queue_spec` as a Figure."""
    return to_figure(batch_consume_queue_spec(topic, queue_id, units, dispatch=dispatch, limit=limit,
                                              commit_log_min=commit_log_min))


def batch_consume_queue_table_html(units: np.ndarray, *, limit: int = 200, commit_log_min: int = 0) -> str:
    """The last ``limit`` units of a BatchConsumeQueue as an HTML table: msgBaseOffset, batchSize,
    CommitLog offset, size, tags code, store time; a compactedOffset column when some unit has one
    (5.x writes -1, ``INVALID_POS``, in every unit). Units pointing below ``commit_log_min`` greyed,
    "removed"."""
    n = len(units)
    first = max(0, n - limit)
    shown = units[first:]
    compacted = bool(len(shown)) and bool((shown["compacted_offset"] != INVALID_POS).any())
    rows = []
    for u in shown:
        offset = int(u["commit_log_offset"])
        gone = offset < commit_log_min
        style = " style='color:#999' title='its CommitLog file was deleted'" if gone else ""
        rows.append(f"<tr{style}><td>{int(u['msg_base_offset'])}</td><td>{int(u['batch_size'])}</td>"
                    f"<td>{offset:,}{' (removed)' if gone else ''}</td><td>{int(u['size'])}</td>"
                    f"<td>{int(u['tags_code'])}</td><td>{_ms_text(int(u['store_timestamp']))}</td>"
                    + (f"<td>{int(u['compacted_offset'])}</td>" if compacted else "") + "</tr>")
    note = f"<div><i>showing the last {limit} of {n} units</i></div>" if first else ""
    return (note + "<table class='rmq-cq rmq-bcq' style='font-size:12px'><tr><th>msgBaseOffset</th>"
            "<th>batchSize</th><th>CommitLog offset</th><th>size</th><th>tags code</th><th>store time</th>"
            + ("<th>compactedOffset</th>" if compacted else "") + "</tr>" + "".join(rows) + "</table>")


# ---------------------------------------------------------------------------------------------
# index

def chain_lengths(key_hashes: np.ndarray, hash_slot_num: int) -> np.ndarray:
    """Items per slot (every item of a slot's chain has ``key_hash % slots == slot``)."""
    return np.bincount(key_hashes.astype(np.int64) % hash_slot_num, minlength=hash_slot_num)


def index_heatmap_spec(lengths: np.ndarray, *, title: str = "index slots", max_cells: int = 4096) -> Spec:
    """Slot occupancy as a grid (row-major slot order), colour = chain length. More slots than
    ``max_cells`` are summed in equal bins (RocketMQ's 5,000,000 slots stay drawable)."""
    n = len(lengths)
    per = max(1, math.ceil(n / max_cells))
    cells = lengths if per == 1 else np.add.reduceat(lengths, np.arange(0, n, per))
    width = max(1, math.ceil(math.sqrt(len(cells))))
    grid = np.full(width * math.ceil(len(cells) / width), np.nan)
    grid[: len(cells)] = cells
    grid = grid.reshape(-1, width)
    used = int(np.count_nonzero(lengths))
    heat = {"type": "heatmap", "z": grid, "text": _heatmap_text(n, per, grid.shape), "colorscale": _blues(),
            "colorbar": {"title": {"text": "chain"}}, "hovertemplate": "%{text}<br>items %{z}<extra></extra>"}
    layout = _base_layout(f"{title}: {used:,} of {n:,} slots used" + (f" ({per} slots per cell)" if per > 1 else ""),
                          height=300, yaxis={"autorange": "reversed", "showticklabels": False},
                          xaxis={"showticklabels": False})
    return {"data": [heat], "layout": layout}


@functools.cache
def _blues() -> list[list[Any]]:
    """plotly's "Blues" as explicit stops: plotly.js has a different scale under that name, and
    specs are not resolved by plotly's validators."""
    import plotly.colors

    return plotly.colors.get_colorscale("Blues")


@functools.lru_cache(maxsize=8)
def _heatmap_text(n: int, per: int, shape: tuple[int, int]) -> list[list[str]]:
    """Hover labels of the heat map's cells: they depend on the slot count only (cached, and the
    same list object each time, so an unchanged grid costs no diff)."""
    first = np.arange(shape[0] * shape[1]).reshape(shape) * per
    return [[f"slots {a:,}..{min(a + per, n) - 1:,}" if per > 1 else f"slot {a:,}" for a in row]
            for row in first.tolist()]


def index_heatmap_figure(lengths: np.ndarray, *, title: str = "index slots", max_cells: int = 4096) -> go.Figure:
    """:func:`index_heatmap_spec` as a Figure."""
    return to_figure(index_heatmap_spec(lengths, title=title, max_cells=max_cells))


def chain_histogram_spec(lengths: np.ndarray) -> Spec:
    """How many slots have a chain of each length (empty slots left out)."""
    counts = np.bincount(lengths.astype(np.int64)) if len(lengths) else np.zeros(1, np.int64)
    xs = np.arange(1, len(counts))
    bar = {"type": "bar", "x": xs, "y": counts[1:], "marker": {"color": "#6baed6"},
           "hovertemplate": "chain length %{x}: %{y} slot(s)<extra></extra>"}
    return {"data": [bar], "layout": _base_layout(
        "chain length histogram", height=260, xaxis={"title": {"text": "items in the slot's chain"}, "dtick": 1},
        yaxis={"title": {"text": "slots"}})}


def chain_histogram_figure(lengths: np.ndarray) -> go.Figure:
    """:func:`chain_histogram_spec` as a Figure."""
    return to_figure(chain_histogram_spec(lengths))


def index_walk_spec(steps: Sequence[WalkStep], *, key: str = "", upto: int | None = None) -> Spec:
    """The walk slot -> item -> prev item ..., drawn up to step ``upto`` (all by default).

    Node colours: green = the message carries the key, red = hash collision (the store would
    return it, the message does not carry the key), grey = another key sharing the slot.
    """
    shown = list(steps if upto is None else steps[: max(0, upto)])
    slot = steps[0].slot if steps else None
    xs = list(range(len(shown) + 1))
    labels = [f"slot {slot}" if slot is not None else "slot (empty)"]
    colors = ["#fdae6b"]
    hovers = [f"slot {slot}: newest item {shown[0].step.item if shown else '-'}"]
    for w in shown:
        s = w.step
        if w.message_has_key:
            color, what = "#31a354", "carries the key"
        elif w.collision:
            color, what = "#de2d26", "HASH COLLISION: same hash, message lacks the key"
        else:
            color, what = "#bdbdbd", "another key in this slot" if not s.hash_matches else "outside the time window"
        labels.append(f"item {s.item}")
        colors.append(color)
        hovers.append(f"item {s.item}<br>hash {s.key_hash}{' =' if s.hash_matches else ' ≠'} key's<br>"
                      f"phy offset {s.phy_offset:,}<br>time {s.time}<br>prev {s.prev_index}<br>{esc(what)}"
                      + (f"<br>walk stops: {esc(s.stop)}" if s.stop else ""))
    annotations = [{"x": xs[i + 1], "y": 0, "ax": xs[i], "ay": 0, "xref": "x", "yref": "y", "axref": "x",
                    "ayref": "y", "showarrow": True, "arrowhead": 3, "arrowwidth": 1.5, "standoff": 14,
                    "startstandoff": 14, "text": ""} for i in range(len(shown))]
    nodes = {"type": "scatter", "x": xs, "y": [0] * len(xs), "mode": "markers+text", "text": labels,
             "textposition": "top center", "hovertext": hovers, "hoverinfo": "text",
             "marker": {"size": 26, "color": colors, "line": {"color": "#333", "width": 1}}}
    done = upto is None or upto >= len(steps)
    title = f"chain walk for {key!r}: {len(shown)}/{len(steps)} step(s)" + (" (done)" if done and steps else "")
    return {"data": [nodes], "layout": _base_layout(
        title, height=200, annotations=annotations, showlegend=False,
        xaxis={"visible": False, "range": [-0.6, max(len(steps), 1) + 0.6]},
        yaxis={"visible": False, "range": [-1, 1.2]})}


def index_walk_figure(steps: Sequence[WalkStep], *, key: str = "", upto: int | None = None) -> go.Figure:
    """:func:`index_walk_spec` as a Figure."""
    return to_figure(index_walk_spec(steps, key=key, upto=upto))


# ---------------------------------------------------------------------------------------------
# recovery

def recovery_spec(plan: RecoveryPlan | None, files: Sequence[FileState], file_size: int | None = None) -> Spec:
    """A RecoveryPlan as a walk over the CommitLog files: the files (deleted ones hatched red),
    the start candidates tested newest first (abnormal mode), the checked range from the start
    file to ``process_offset``, and where the walk stopped with the reason."""
    if plan is None:
        return {"data": [], "layout": _base_layout("no recovery plan", height=160)}
    size = file_size or (files[0].size if files else 0)
    known = {f.name: f for f in files}
    rows = [(f.name, f.start, f.size, f.wrote) for f in files]
    for name in plan.files_to_delete:
        if name not in known and name.isdigit():
            rows.append((name, int(name), size, 0))
    rows.sort(key=lambda r: r[1])
    doomed = set(plan.files_to_delete)
    traces: list[Any] = [dict(
        type="bar", name="file", orientation="h", y=["files"] * len(rows), base=[r[1] for r in rows],
        x=[r[2] for r in rows],
        marker={"color": ["#fcbba1" if r[0] in doomed else STATUS_COLORS["full"] for r in rows],
                "pattern": {"shape": ["/" if r[0] in doomed else "" for r in rows]},
                "line": {"color": "#555", "width": 1}},
        hovertext=[f"<b>{esc(r[0])}</b><br>start {r[1]:,}"
                   + ("<br>deleted: starts after the valid data" if r[0] in doomed else "") for r in rows],
        hoverinfo="text")]
    starts = {r[0]: r[1] for r in rows}
    cands = list(plan.candidates)
    traces.append(dict(
        type="scatter", name="start candidate", mode="markers", x=[starts.get(c.file, 0) for c in cands],
        y=["candidates"] * len(cands),
        marker={"symbol": ["star" if c.matched else "x" for c in cands], "size": 13,
                "color": ["#31a354" if c.matched else "#de2d26" for c in cands]},
        hovertext=[f"<b>{esc(c.file)}</b> #{i + 1} tested<br>{esc(c.reason)}" for i, c in enumerate(cands)],
        hoverinfo="text"))
    start = starts.get(plan.start_file or "", 0)
    traces.append(dict(
        type="bar", name="checked", orientation="h", y=["walk"], base=[start], x=[max(plan.process_offset - start, 0)],
        marker={"color": "#74c476"}, hoverinfo="text",
        hovertext=[f"walk from {esc(plan.start_file)} ({esc(plan.start_reason)})<br>{plan.records_checked} record(s), "
                   f"{plan.bytes_checked:,} bytes checked<br>valid data ends at {plan.process_offset:,}"]))
    stop_x = plan.stop_offset if plan.stop_file else plan.process_offset
    traces.append(dict(
        type="scatter", name="stop", mode="markers+text", x=[stop_x], y=["walk"], text=["stop"],
        textposition="top center",
        marker={"symbol": "x-thin-open", "size": 18, "color": "#de2d26", "line": {"width": 3}}, hoverinfo="text",
        hovertext=[f"stopped at {stop_x:,} in {esc(plan.stop_file)}<br>{esc(plan.stop_reason)}"]))
    shapes = [{"type": "line", "x0": plan.process_offset, "x1": plan.process_offset, "yref": "paper", "y0": 0, "y1": 1,
               "line": {"color": "#de2d26", "dash": "dash"}}]
    annotations = [{"x": plan.process_offset, "yref": "paper", "y": 1.0, "showarrow": False, "xanchor": "left",
                    "text": f"cut at {plan.process_offset:,}", "font": {"size": 10, "color": "#de2d26"}}]
    title = f"recovery ({plan.mode}, {plan.rocketmq_version}): stop — {plan.stop_reason or 'n/a'}"
    return {"data": traces, "layout": _base_layout(
        title, height=240, shapes=shapes, annotations=annotations,
        xaxis={"title": {"text": "CommitLog offset (bytes)"}, "tickformat": ","},
        yaxis={"categoryorder": "array", "categoryarray": ["walk", "candidates", "files"]})}


def recovery_figure(plan: RecoveryPlan | None, files: Sequence[FileState], file_size: int | None = None) -> go.Figure:
    """:func:`recovery_spec` as a Figure."""
    return to_figure(recovery_spec(plan, files, file_size))


def _steps_table(steps: Sequence[Any]) -> str:
    rows = "".join(f"<tr><td>{esc(s.phase)}</td><td>{esc(s.file)}</td><td>{s.offset:,}</td><td>{esc(s.decision)}</td>"
                   f"<td>{esc(s.reason)}</td></tr>" for s in steps)
    return ("<table class='rmq-steps' style='font-size:12px'><tr><th>phase</th><th>file</th><th>offset</th>"
            "<th>decision</th><th>reason</th></tr>" + rows + "</table>")


def recovery_steps_html(plan: RecoveryPlan | None) -> str:
    """The plan's summary, its steps as a table and its notes. The steps on ConsumeQueueExt runs
    (phase ``consume_queue_ext``: each run's walk, then its cut after the last address its
    recovered queue holds; offsets are ext offsets, not CommitLog ones; and, last thing loading
    does, the files before each queue's new first unit) get a table of their own, first, as
    consume queue recovery runs before the CommitLog walk."""
    if plan is None:
        return "<i>no recovery plan</i>"
    ext = [s for s in plan.steps if s.phase == "consume_queue_ext"]
    log = [s for s in plan.steps if s.phase != "consume_queue_ext"]
    notes = "".join(f"<li>{esc(n)}</li>" for n in plan.notes)
    summary = (f"<div><b>mode</b> {esc(plan.mode)} · <b>start</b> {esc(plan.start_file)} ({esc(plan.start_reason)}) · "
               f"<b>records checked</b> {plan.records_checked} · <b>valid data ends at</b> {plan.process_offset:,} · "
               f"<b>stop</b> {esc(plan.stop_reason)} · "
               f"<b>truncate</b> {esc(plan.truncate_file)}@{esc(plan.truncate_position)}"
               f" · <b>delete</b> {esc(', '.join(plan.files_to_delete) or '-')}</div>")
    ext_html = ""
    if ext:
        runs = sum(s.decision.startswith("positions set to") for s in ext)
        deleted = sum(s.decision == "delete file" for s in ext)
        below = sum(s.decision == "delete file" and "truncateByMinAddress" in s.reason for s in ext)
        ext_html = (f"<div class='rmq-ext-steps'><b>ConsumeQueueExt runs</b> (recovered with their consume queues, "
                    f"before the CommitLog walk; ext offsets): {runs} run(s) walked, {deleted} file(s) deleted"
                    + (f" ({below} at the end of loading: before their queue's new first unit)" if below else "")
                    + _steps_table(ext) + "</div>")
    return summary + ext_html + _steps_table(log) + (f"<ul>{notes}</ul>" if notes else "")


# ---------------------------------------------------------------------------------------------
# cleanup

def _tz_of(plan: CleanupPlan) -> Any:
    return datetime.fromisoformat(plan.now_local).tzinfo


def _local(ms: int, tz: Any) -> str:
    return datetime.fromtimestamp(ms / 1000, tz).isoformat(timespec="milliseconds")


_DECISION_COLORS = {"delete": "#de2d26", "keep": "#31a354"}


def cleanup_timeline_spec(plan: CleanupPlan) -> Spec:
    """Files on a time axis: a bar from last modification to expiry (mtime + fileReservedTime),
    coloured by the decision; "now" as a line; the delete-when hours shaded (whole hours, each
    day in range). Hover shows age, rule, why and the reason sentence."""
    tz = _tz_of(plan)
    files = list(plan.files)
    reserved = plan.file_reserved_time_ms
    traces = [dict(
        type="bar", name=decision, orientation="h", y=[f.name for f in fs],
        base=[_local(f.last_modified_ms, tz) for f in fs],
        x=[reserved] * len(fs), marker={"color": _DECISION_COLORS.get(decision, "#999"), "opacity": 0.75},
        hovertext=[f"<b>{esc(f.name)}</b>: {esc(f.decision)} (rule {esc(f.rule)}, {esc(f.why)})<br>"
                   f"age {f.age_ms / _HOUR_MS:.1f} h of {reserved / _HOUR_MS:g} h reserved<br>{esc(f.reason)}"
                   for f in fs],
        hoverinfo="text",
    ) for decision in ("delete", "keep") if (fs := [f for f in files if f.decision == decision])]
    lo = min([f.last_modified_ms for f in files] + [plan.now_ms]) - _HOUR_MS
    hi = max([f.expires_at_ms for f in files] + [plan.now_ms]) + 6 * _HOUR_MS
    shapes: list[dict[str, Any]] = []
    day = datetime.fromtimestamp(lo / 1000, tz).replace(hour=0, minute=0, second=0, microsecond=0)
    end = datetime.fromtimestamp(hi / 1000, tz)
    while day <= end and len(shapes) < 200:
        for h in plan.delete_when_hours:
            if 0 <= h < 24:
                a = day + timedelta(hours=h)
                shapes.append({"type": "rect", "xref": "x", "yref": "paper", "x0": a.isoformat(),
                               "x1": (a + timedelta(hours=1)).isoformat(), "y0": 0, "y1": 1,
                               "fillcolor": "#fdd0a2", "opacity": 0.5, "line": {"width": 0}, "layer": "below"})
        day += timedelta(days=1)
    now = _local(plan.now_ms, tz)
    shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": now, "x1": now, "y0": 0, "y1": 1,
                   "line": {"color": "#08519c", "width": 2}})
    # anchored at the line on the side with room, so the label stays inside the plot (not over
    # the file names on the left, not cut off on the right)
    left = plan.now_ms - lo < (hi - lo) / 2
    annotations = [{"x": now, "yref": "paper", "y": 1.0, "xanchor": "left" if left else "right",
                    "yanchor": "bottom", "showarrow": False, "text": f" now {plan.now_local[:16]} ",
                    "font": {"size": 10, "color": "#08519c"}}]
    title = f"cleanup at {plan.now_local[:16]} (delete when {plan.delete_when}): {plan.summary()}"
    return {"data": traces, "layout": _base_layout(
        title, height=max(220, 60 + _ROW_HEIGHT * len(files)), shapes=shapes, annotations=annotations,
        xaxis={"type": "date", "range": [_local(lo, tz), _local(hi, tz)], "title": {"text": f"local time ({plan.tz})"}},
        yaxis={"autorange": "reversed"}, barmode="overlay")}


def cleanup_timeline_figure(plan: CleanupPlan) -> go.Figure:
    """:func:`cleanup_timeline_spec` as a Figure."""
    return to_figure(cleanup_timeline_spec(plan))


def disk_gauge_spec(plan: CleanupPlan) -> Spec:
    """Disk usage vs the three thresholds: clean (diskMaxUsedSpaceRatio), clean forcibly, refuse
    writes (diskSpaceWarningLevelRatio)."""
    clean, force, refuse = (plan.disk_max_used_space_ratio * 100, plan.disk_space_clean_forcibly_ratio * 100,
                            plan.disk_space_warning_level_ratio * 100)
    value = plan.physic_ratio * 100
    unknown = value < 0
    gauge = dict(
        type="indicator", mode="gauge+number", value=max(value, 0), number={"suffix": " %", "valueformat": ".0f"},
        title={"text": "CommitLog disk used" + (" (unknown)" if unknown else "")},
        gauge={"axis": {"range": [0, 100]}, "bar": {"color": "#08519c"},
               "steps": [{"range": [0, clean], "color": "#e5f5e0"}, {"range": [clean, force], "color": "#fff7bc"},
                         {"range": [force, refuse], "color": "#fdae6b"}, {"range": [refuse, 100], "color": "#fb6a4a"}],
               "threshold": {"line": {"color": "#000", "width": 3}, "thickness": 0.8, "value": max(value, 0)}},
    )
    layout = {"height": 230, "margin": {"l": 30, "r": 30, "t": 50, "b": 10}, "annotations": [{
        "x": 0.5, "y": -0.05, "xref": "paper", "yref": "paper", "showarrow": False, "font": {"size": 10},
        "text": f"clean > {clean:.0f} % · force > {force:.0f} % · refuse writes > {refuse:.0f} %"}]}
    return {"data": [gauge], "layout": layout}


def disk_gauge_figure(plan: CleanupPlan) -> go.Figure:
    """:func:`disk_gauge_spec` as a Figure."""
    return to_figure(disk_gauge_spec(plan))


def cleanup_table_html(plan: CleanupPlan) -> str:
    rows = "".join(
        f"<tr><td>{esc(f.name)}</td><td>{f.age_ms / _HOUR_MS:.1f} h</td><td>{esc(f.rule)}</td>"
        f"<td><b style='color:{_DECISION_COLORS.get(f.decision, '#000')}'>{esc(f.decision)}</b></td>"
        f"<td>{esc(f.why)}</td><td>{esc(f.reason)}</td></tr>" for f in plan.files)
    marks = "".join(f"<li>{esc(m)}</li>" for m in plan.disk_flag_marks)
    return (f"<div><b>{esc(plan.summary())}</b></div><table class='rmq-cleanup' style='font-size:12px'>"
            "<tr><th>file</th><th>age</th><th>rule</th><th>decision</th><th>why</th><th>reason</th></tr>"
            + rows + "</table>" + (f"<ul style='font-size:11px'>{marks}</ul>" if marks else ""))


# ---------------------------------------------------------------------------------------------
# memory store

def memory_store_spec(state: MemoryState) -> Spec:
    """Bytes held per memory topic and by all topics together, as bars against the threshold (a
    dashed line): the store evicts the putting topic's oldest messages when a put would cross it.
    Hover: each topic's queues with the offsets held and how many were evicted."""
    if not state.enabled:
        return {"data": [], "layout": _base_layout("memory store: not enabled (memory_topic_enable=False, or a "
                                                   "snapshot: memory topics live in RAM only)", height=160)}
    topics = state.topics()
    by_topic = {t: [q for q in state.queues if q.topic == t] for t in topics}
    sizes = [sum(q.held_bytes or 0 for q in by_topic[t]) for t in topics]
    known = all(q.held_bytes is not None for q in state.queues)
    hover = []
    for t in topics:
        qs = by_topic[t]
        lines = "".join(f"<br>queue {q.queue_id}: offsets {q.min_offset}..{q.max_offset} ({q.held} held, "
                        f"{q.evicted} evicted" + (f", {q.held_bytes:,} B" if q.held_bytes is not None else "") + ")"
                        for q in qs)
        hover.append(f"<b>{esc(t)}</b>: {sum(q.held for q in qs)} message(s) held, "
                     f"{sum(q.evicted for q in qs)} evicted{lines}")
    bars = {"type": "bar", "name": "held by topic", "orientation": "h", "y": [esc(t) for t in topics],
            "x": sizes if known else [0] * len(topics), "hovertext": hover, "hoverinfo": "text",
            "marker": {"color": [topic_color(t, topics) for t in topics]}}
    total = {"type": "bar", "name": "all topics", "orientation": "h", "y": ["all topics"], "x": [state.total_bytes],
             "hoverinfo": "text", "marker": {"color": "#08519c"},
             "hovertext": [f"{state.total_bytes:,} of {state.threshold:,} bytes, {state.count} message(s); "
                           f"{state.evicted_count} evicted ({state.evicted_bytes:,} bytes)"]}
    shapes = [{"type": "line", "x0": state.threshold, "x1": state.threshold, "yref": "paper", "y0": 0, "y1": 1,
               "line": {"color": "#de2d26", "dash": "dash", "width": 2}}]
    annotations = [{"x": state.threshold, "yref": "paper", "y": 1.0, "yanchor": "bottom", "xanchor": "right",
                    "showarrow": False, "text": f"threshold {state.threshold:,} B",
                    "font": {"size": 10, "color": "#de2d26"}}]
    share = state.total_bytes / state.threshold if state.threshold else 0.0
    title = (f"memory store: {state.total_bytes:,} of {state.threshold:,} bytes ({share:.0%}), "
             f"{state.count} message(s) held, {state.evicted_count} evicted")
    layout = _base_layout(title, height=max(200, 90 + _ROW_HEIGHT * (len(topics) + 1)), shapes=shapes,
                          annotations=annotations, showlegend=False,
                          margin={"l": 90, "r": 20, "t": 40 + _LABEL_ROW_PX, "b": 40},  # the label above the plot
                          xaxis={"title": {"text": "bytes held"}, "tickformat": ",",
                                 "range": [0, max(state.threshold, state.total_bytes, 1) * 1.05]},
                          yaxis={"categoryorder": "array", "categoryarray": ["all topics", *reversed(
                              [esc(t) for t in topics])]})
    return {"data": [bars, total], "layout": layout}


def memory_store_figure(state: MemoryState) -> go.Figure:
    """:func:`memory_store_spec` as a Figure."""
    return to_figure(memory_store_spec(state))


def memory_table_html(state: MemoryState) -> str:
    """Per memory queue: offsets held, messages held and evicted, bytes. All text escaped."""
    if not state.enabled:
        return "<i>no memory store</i>"
    rows = "".join(
        f"<tr><td>{esc(q.topic)}</td><td>{q.queue_id}</td><td>{q.min_offset}</td><td>{q.max_offset}</td>"
        f"<td>{q.held}</td><td>{q.evicted}</td><td>{'?' if q.held_bytes is None else f'{q.held_bytes:,}'}</td></tr>"
        for q in state.queues)
    return (f"<div><b>{state.count}</b> message(s), <b>{state.total_bytes:,}</b> of {state.threshold:,} bytes; "
            f"evicted {state.evicted_count} ({state.evicted_bytes:,} bytes)</div>"
            "<table class='rmq-memory' style='font-size:12px'><tr><th>topic</th><th>queue</th><th>min offset</th>"
            "<th>max offset</th><th>held</th><th>evicted</th><th>bytes</th></tr>" + rows + "</table>")


# ---------------------------------------------------------------------------------------------
# static report

def report_html(title: str, sections: Iterable[tuple[str, Any]], *, log: Sequence[str] = ()) -> str:
    """A self-contained HTML page: each section is (heading, Figure | HTML string); plotly.js is
    inlined once (works offline); ``log`` is shown as the step-by-step account."""
    parts = []
    first = True
    for heading, item in sections:
        parts.append(f"<h2>{esc(heading)}</h2>")
        if isinstance(item, go.Figure):
            parts.append(item.to_html(full_html=False, include_plotlyjs="inline" if first else False))
            first = False
        else:
            parts.append(f"<div class='rmq-html'>{item}</div>")
    steps = "".join(f"<li>{esc(line)}</li>" for line in log)
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>" + esc(title) + "</title>"
            "<style>body{font-family:system-ui,sans-serif;margin:24px;max-width:1200px}"
            "table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:2px 6px;text-align:left}"
            "code{font-size:11px}</style></head><body>"
            f"<h1>{esc(title)}</h1><h2>What happened</h2><ul class='rmq-log' style='list-style:none;padding-left:0'>"
            f"{steps}</ul>" + "".join(parts)
            + "</body></html>")
