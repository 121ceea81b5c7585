"""ConsumeQueueView: the 20-byte units of one queue, each linked to its CommitLog record."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from rmqlab.codec.consume_queue_unit import CQ_UNIT_DTYPE, MAX_ADDR
from rmqlab.events import Appended, Dispatched, FileDeleted, FileTruncated
from rmqlab.widgets import figures
from rmqlab.widgets._base import View, figure_widget, set_figure

__all__ = ["ConsumeQueueView"]


class ConsumeQueueView(View):
    """Units of ``topic``/``queue_id`` as a strip (x = queue offset, y = CommitLog offset) and a
    table; the reput offset and how far dispatch is behind (live store). Clicking a unit (or
    :meth:`select_unit`) decodes the record it points at into ``detail`` and, when
    ``commit_log_view`` is given, selects it there too.

    With ``enable_consume_queue_ext`` a unit's stored tags code is an ext address: ``ext`` then
    holds what the engine (or inspection, for a snapshot) resolves each to, and the table, the
    hover text and ``rows`` show the address and the resolved tags code, or "unresolved".

    State: ``base`` (first queue offset held), ``units`` (numpy copy), ``rows`` (list of dicts;
    ``tags_code`` is the resolved code, None where an address resolves to nothing, and
    ``ext_address`` the address or None, as in inspection's CQ frame), ``ext`` (``(resolved,
    tags_code)`` beside ``units``, or None when no unit holds an address), ``dispatch`` (reput
    state or None).
    """

    ROUTES: ClassVar[dict[type, tuple[str, ...]]] = {
        Dispatched: ("cq",), FileDeleted: ("cq",), FileTruncated: ("cq",), Appended: ("lag",)}

    def __init__(self, source: Any, topic: str | None = None, queue_id: int | None = None, *,
                 commit_log_view: Any = None, table_rows: int = 200, **kwargs: Any) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.commit_log_view = commit_log_view
        self.table_rows = table_rows
        self.base = 0
        self.units = np.empty(0, CQ_UNIT_DTYPE)
        self.ext: tuple[np.ndarray, np.ndarray] | None = None
        self.dispatch: dict[str, int] | None = None
        self.commit_log_min = 0  # units below it point into deleted CommitLog files ("removed")
        super().__init__(source, **kwargs)

    @property
    def rows(self) -> list[dict[str, int | None]]:
        rows: list[dict[str, int | None]] = [
            {"queue_offset": self.base + i, "commit_log_offset": int(u["commit_log_offset"]), "size": int(u["size"]),
             "tags_code": int(u["tags_code"])} for i, u in enumerate(self.units)]
        if self.ext is not None:
            found, tags = self.ext
            for i, row in enumerate(rows):
                address = row["tags_code"]
                is_address = address is not None and address <= MAX_ADDR
                row["ext_address"] = address if is_address else None
                if is_address:
                    row["tags_code"] = int(tags[i]) if found[i] else None
        return rows

    def _build(self) -> None:
        import ipywidgets as w

        self.figure = figure_widget()
        self.picker = w.Dropdown(options=[], description="queue")
        self.picker.observe(self._on_pick, names="value")
        self.table = w.HTML()
        self.detail = w.HTML("<i>click a unit to see its CommitLog record</i>")
        # the record's detail goes under the unit table when the notebook is too narrow for both
        self.widget = w.VBox([self.picker, self.figure,
                              w.HBox([self.table, self.detail], layout=w.Layout(flex_flow="row wrap"))])

    def _queue_label(self, t: str, q: int) -> str:
        return f"{t}/{q}"

    def _on_pick(self, change: dict[str, Any]) -> None:
        value = change["new"]
        if not value:
            return
        t, _, q = value.rpartition("/")
        if (t, int(q)) != (self.topic, self.queue_id):
            self.topic, self.queue_id = t, int(q)
            self.refresh()

    def _update(self, flags: frozenset[str]) -> None:
        keys = self.source.consume_queue_keys()
        if (self.topic is None or self.queue_id is None) and keys:
            self.topic, self.queue_id = keys[0]
        labels = [self._queue_label(t, q) for t, q in keys]
        if list(self.picker.options) != labels:
            self.picker.options = labels
        if self.topic is not None and self.queue_id is not None:
            if self._queue_label(self.topic, self.queue_id) in labels:
                self.picker.value = self._queue_label(self.topic, self.queue_id)
            self.base, self.units = self.source.cq_units(self.topic, self.queue_id)
            self.ext = self.source.cq_ext(self.topic, self.queue_id, self.units)
        self.dispatch = self.source.dispatch_state()
        self.commit_log_min = self.source.commit_log_min_offset()
        set_figure(self.figure, figures.consume_queue_spec(self.topic or "-", self.queue_id or 0, self.base,
                                                             self.units, dispatch=self.dispatch,
                                                             commit_log_min=self.commit_log_min, ext=self.ext))
        self.table.value = figures.consume_queue_table_html(self.base, self.units, limit=self.table_rows,
                                                            commit_log_min=self.commit_log_min, ext=self.ext)
        for trace in self.figure.data:
            if self._on_click not in getattr(trace, "_click_callbacks", []):
                trace.on_click(self._on_click)

    def _on_click(self, trace: Any, points: Any, state: Any = None) -> None:
        inds = list(getattr(points, "point_inds", []) or [])
        if inds and trace.customdata is not None:
            self.select_unit(int(trace.customdata[inds[0]]))

    def select_unit(self, queue_offset: int) -> str:
        """Show the CommitLog record unit ``queue_offset`` points at; returns the HTML shown."""
        i = queue_offset - self.base
        if not 0 <= i < len(self.units):
            self.detail.value = f"<i>no unit at queue offset {queue_offset}</i>"
            return self.detail.value
        offset = int(self.units[i]["commit_log_offset"])
        if offset < self.commit_log_min:
            self.detail.value = (f"<div>unit {queue_offset} → CommitLog offset {offset:,}: <b>removed</b>. "
                                 f"Cleanup deleted the CommitLog file that held it (the CommitLog now starts at "
                                 f"{self.commit_log_min:,}). The unit stays until cleanup deletes its whole "
                                 f"ConsumeQueue file; a get for it answers OFFSET_TOO_SMALL (or "
                                 f"MESSAGE_WAS_REMOVING).</div>")
            return self.detail.value
        rec, raw = self.source.read_record(offset)
        self.detail.value = (f"<div>unit {queue_offset} → CommitLog offset {offset:,}</div>"
                             + figures.record_html(rec, raw, offset=offset))
        if self.commit_log_view is not None:
            self.commit_log_view.select(offset)
        return self.detail.value
