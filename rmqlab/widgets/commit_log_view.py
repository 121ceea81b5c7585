"""CommitLogView: records along the log, coloured by topic; click one to decode it."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from rmqlab.codec.scan import header_hop
from rmqlab.events import Appended, FileDeleted, FileTruncated, Rolled
from rmqlab.widgets import figures
from rmqlab.widgets._base import ALL, View, figure_widget, set_figure
from rmqlab.widgets._source import COMMITLOG, RecordInfo

__all__ = ["CommitLogView"]

_HEAD = 12  # TOTALSIZE, MAGICCODE, BODYCRC: what changes when another record takes a record's place


def _heads(mf: Any, at: np.ndarray) -> np.ndarray:
    """The first ``_HEAD`` bytes at each position ``at`` of ``mf`` (clipped at its end: a blank
    record may have only 8 bytes left), one row per record."""
    buf = np.frombuffer(mf.buffer, np.uint8)
    try:
        return buf[np.minimum(at[:, None] + np.arange(_HEAD), len(buf) - 1)]
    finally:
        del buf  # no view of the mapping outlives this call (the file may be unmapped)


class CommitLogView(View):
    """The last ``max_records`` records of the CommitLog as bars (width = bytes), one colour per
    topic, blank end-of-file records hatched. Clicking a record (or :meth:`select`) shows it
    decoded field by field, with its bytes, in ``detail`` (all text HTML-escaped).

    Records are scanned incrementally: each redraw decodes only bytes appended since the last,
    and of those only the newest ``max_records`` (the others are hopped over by TOTALSIZE).
    A ``reset`` (a file truncated or deleted; the dashboard's latched events always include it)
    rescans only the files whose scanned part changed: shorter than scanned, or any scanned
    record's head (size, magic code, body CRC) no longer the same bytes (one numpy gather).
    State: ``records`` (shown, oldest first), ``selected`` (offset or None), ``detail.value``.
    """

    ROUTES: ClassVar[dict[type, tuple[str, ...]]] = {
        Appended: ("records",), Rolled: ("records",), FileDeleted: ("reset",), FileTruncated: ("reset",)}

    def __init__(self, source: Any, *, max_records: int = 2000, **kwargs: Any) -> None:
        self.max_records = max_records
        self.records: list[RecordInfo] = []
        self.selected: int | None = None
        self._scan: dict[str, tuple[list[RecordInfo], int, str]] = {}
        self._heads: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # file -> scanned records' (positions, heads)
        super().__init__(source, **kwargs)

    def _build(self) -> None:
        import ipywidgets as w

        self.figure = figure_widget()
        self.detail = w.HTML("<i>click a record to decode it</i>")
        self.widget = w.VBox([self.figure, self.detail])

    def _update(self, flags: frozenset[str]) -> None:
        files = self.source.mapped_files(COMMITLOG)
        if ALL in flags:
            self._scan.clear()
        elif "reset" in flags:
            for mf in files:
                if mf.name in self._scan and not self._unchanged(mf):
                    del self._scan[mf.name]
        names = {mf.name for mf in files}
        for name in list(self._scan):
            if name not in names:
                del self._scan[name]
                self._heads.pop(name, None)
        shown: list[RecordInfo] = []
        for mf in reversed(files):  # newest first, until enough records
            recs, pos, stop = self._scan.get(mf.name, ([], 0, "end"))
            if stop != "blank":
                starts, _ = header_hop(mf.buffer, pos, self.source.read_end(mf))
                if len(starts) > self.max_records:  # only the newest can be shown: decode just those
                    recs, pos = [], starts[-self.max_records]
                more, pos, stop = self.source.scan_records(mf, pos)
                recs = (recs + more)[-self.max_records:]
                self._scan[mf.name] = (recs, pos, stop)
                if more:
                    at = np.fromiter((r.offset for r in recs), np.int64, len(recs)) - mf.file_from_offset
                    self._heads[mf.name] = (at, _heads(mf, at))
            shown[:0] = recs
            if len(shown) >= self.max_records:
                break
        self.records = shown[-self.max_records:]
        qs = self.source.queue_state(COMMITLOG)
        fig = figures.commit_log_spec(self.records, qs.files)
        set_figure(self.figure, fig)
        for trace in self.figure.data:
            if self._on_click not in getattr(trace, "_click_callbacks", []):
                trace.on_click(self._on_click)

    def _unchanged(self, mf: Any) -> bool:
        """The scanned part of ``mf`` is still there: not cut below the scanned position, and the
        last scanned record's head (TOTALSIZE, MAGICCODE, BODYCRC) is the same bytes."""
        recs, pos, _stop = self._scan[mf.name]
        if self.source.live and mf.read_position < pos:
            return False
        if not recs:
            return True
        if mf.name not in self._heads:
            return False
        at, heads = self._heads[mf.name]
        return len(at) == len(recs) and bool(np.array_equal(_heads(mf, at), heads))

    def _on_click(self, trace: Any, points: Any, state: Any = None) -> None:
        inds = list(getattr(points, "point_inds", []) or [])
        if not inds or trace.customdata is None:
            return
        self.select(int(trace.customdata[inds[0]]))

    def select(self, offset: int) -> str:
        """Decode the record at ``offset`` into ``detail``; returns the HTML shown."""
        rec, raw = self.source.read_record(offset)
        self.selected = offset
        self.detail.value = figures.record_html(rec, raw, offset=offset)
        return self.detail.value
