"""ConsumeQueueView: the units of one queue (20-byte ConsumeQueue units, or a 5.x BatchConsumeQueue's
46-byte ones), each linked to its CommitLog record."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from rmqlab.codec.batch_consume_queue_unit import BCQ_UNIT_DTYPE
from rmqlab.codec.consume_queue_unit import CQ_UNIT_DTYPE, MAX_ADDR
from rmqlab.events import Appended, Dispatched, FileDeleted, FileTruncated
from rmqlab.widgets import figures
from rmqlab.widgets._base import View, figure_widget, set_figure
from rmqlab.widgets.figures import esc

__all__ = ["BATCH_LABEL", "ConsumeQueueView"]

#: how the queue picker marks a batch queue: ``"<topic>/<id> (BatchCQ)"`` (a topic name has no
#: space or parenthesis, so the label cannot be a plain queue's)
BATCH_LABEL = " (BatchCQ)"


class ConsumeQueueView(View):
    """Units of ``topic``/``queue_id`` as a strip (x = queue offset, y = CommitLog offset) and a
    table; the reput offset and how far dispatch is behind (live store). Clicking a unit (or
    :meth:`select_unit`) decodes the record it points at into ``detail`` and, when
    ``commit_log_view`` is given, selects it there too.

    With ``enable_consume_queue_ext`` a unit's stored tags code is an ext address: ``ext`` then
    holds what the engine (or inspection, for a snapshot) resolves each to, and the table, the
    hover text and ``rows`` show the address and the resolved tags code, or "unresolved".

    A 5.x store's BatchConsumeQueues (topics with ``queue.type=BatchCQ``) are in the picker too,
    labelled ``<topic>/<id> (BatchCQ)`` (``batch=True`` picks one from the start; None: a batch
    queue when ``topic``/``queue_id`` names only a batch queue). Their units are 46 bytes, one per
    CommitLog record: the figure puts each at its msgBaseOffset with a bar over the queue offsets
    it stands for, and the table and ``rows`` carry msgBaseOffset (as ``queue_offset``),
    batchSize, store time and compactedOffset; clicking any queue offset of a batch selects the
    unit (the record) holding it.

    State: ``batch`` (the queue shown is a batch queue), ``base`` (first queue offset held),
    ``units`` (numpy copy, ``CQ_UNIT_DTYPE`` or ``BCQ_UNIT_DTYPE``), ``rows`` (list of dicts;
    ``tags_code`` is the resolved code, None where an address resolves to nothing, and
    ``ext_address`` the address or None, as in inspection's CQ frame; a batch queue's rows:
    ``queue_offset`` (msgBaseOffset), ``batch_size``, ``commit_log_offset``, ``size``,
    ``tags_code``, ``store_timestamp``, ``compacted_offset``), ``ext`` (``(resolved, tags_code)``
    beside ``units``, or None when no unit holds an address; always None for a batch queue),
    ``dispatch`` (reput state or None).
    """

    ROUTES: ClassVar[dict[type, tuple[str, ...]]] = {
        Dispatched: ("cq",), FileDeleted: ("cq",), FileTruncated: ("cq",), Appended: ("lag",)}

    def __init__(self, source: Any, topic: str | None = None, queue_id: int | None = None, *,
                 batch: bool | None = None, commit_log_view: Any = None, table_rows: int = 200,
                 **kwargs: Any) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self._batch_wanted = batch
        self.batch = bool(batch)
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
        if self.batch:
            return [{"queue_offset": int(u["msg_base_offset"]), "batch_size": int(u["batch_size"]),
                     "commit_log_offset": int(u["commit_log_offset"]), "size": int(u["size"]),
                     "tags_code": int(u["tags_code"]), "store_timestamp": int(u["store_timestamp"]),
                     "compacted_offset": int(u["compacted_offset"])} for u in self.units]
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

    def _queue_label(self, t: str, q: int, batch: bool = False) -> str:
        return f"{t}/{q}{BATCH_LABEL if batch else ''}"

    def _on_pick(self, change: dict[str, Any]) -> None:
        value = change["new"]
        if not value:
            return
        batch = value.endswith(BATCH_LABEL)
        t, _, q = value.removesuffix(BATCH_LABEL).rpartition("/")
        if (t, int(q), batch) != (self.topic, self.queue_id, self.batch):
            self.topic, self.queue_id, self.batch = t, int(q), batch
            self._batch_wanted = batch
            self.refresh()

    def _update(self, flags: frozenset[str]) -> None:
        keys = self.source.consume_queue_keys()
        batch_keys = self.source.batch_queue_keys()
        if self.topic is None or self.queue_id is None:
            if keys:
                self.topic, self.queue_id = keys[0]
            elif batch_keys:
                self.topic, self.queue_id = batch_keys[0]
        key = (self.topic, self.queue_id)
        if self._batch_wanted is not None:
            self.batch = self._batch_wanted
        else:  # a batch queue when the name is only a batch queue's (never for a 4.x store)
            self.batch = key in batch_keys and key not in keys
        labels = [self._queue_label(t, q) for t, q in keys] + [self._queue_label(t, q, True) for t, q in batch_keys]
        if list(self.picker.options) != labels:
            self.picker.options = labels
        if self.topic is not None and self.queue_id is not None:
            label = self._queue_label(self.topic, self.queue_id, self.batch)
            if label in labels:
                self.picker.value = label
            if self.batch:
                self.units = self.source.bcq_units(self.topic, self.queue_id)
                self.base = int(self.units["msg_base_offset"][0]) if len(self.units) else 0
                self.ext = None
            else:
                self.base, self.units = self.source.cq_units(self.topic, self.queue_id)
                self.ext = self.source.cq_ext(self.topic, self.queue_id, self.units)
        elif self.batch:
            self.units = np.empty(0, BCQ_UNIT_DTYPE)
        self.dispatch = self.source.dispatch_state()
        self.commit_log_min = self.source.commit_log_min_offset()
        if self.batch:
            set_figure(self.figure, figures.batch_consume_queue_spec(
                self.topic or "-", self.queue_id or 0, self.units, dispatch=self.dispatch,
                commit_log_min=self.commit_log_min))
            self.table.value = figures.batch_consume_queue_table_html(self.units, limit=self.table_rows,
                                                                      commit_log_min=self.commit_log_min)
        else:
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

    def _unit_index(self, queue_offset: int) -> int | None:
        """Index in ``units`` of the unit holding ``queue_offset`` (None: none does). A batch
        queue's unit holds ``msgBaseOffset .. + batchSize - 1``."""
        if not self.batch:
            i = queue_offset - self.base
            return i if 0 <= i < len(self.units) else None
        units = self.units
        ends = units["msg_base_offset"].astype(np.int64) + units["batch_size"].astype(np.int64)
        i = int(np.searchsorted(ends, queue_offset, side="right"))
        if i < len(units) and int(units[i]["msg_base_offset"]) <= queue_offset:
            return i
        return None

    def select_unit(self, queue_offset: int) -> str:
        """Show the CommitLog record unit ``queue_offset`` points at (in a batch queue: the unit
        whose queue offsets hold it); returns the HTML shown."""
        i = self._unit_index(queue_offset)
        if i is None:
            self.detail.value = f"<i>no unit at queue offset {queue_offset}</i>"
            return self.detail.value
        offset = int(self.units[i]["commit_log_offset"])
        if self.batch:
            first, count = int(self.units[i]["msg_base_offset"]), int(self.units[i]["batch_size"])
            what = (f"unit {i} (queue offsets {first}..{first + count - 1}: a batch of {count} message(s) in "
                    f"one record)") if count > 1 else f"unit {i} (queue offset {first})"
        else:
            what = f"unit {queue_offset}"
        if offset < self.commit_log_min:
            queue_file = "BatchConsumeQueue" if self.batch else "ConsumeQueue"
            self.detail.value = (f"<div>{what} → CommitLog offset {offset:,}: <b>removed</b>. "
                                 f"Cleanup deleted the CommitLog file that held it (the CommitLog now starts at "
                                 f"{self.commit_log_min:,}). The unit stays until cleanup deletes its whole "
                                 f"{queue_file} file; a get for it answers OFFSET_TOO_SMALL (or "
                                 f"MESSAGE_WAS_REMOVING).</div>")
            return self.detail.value
        rec, raw = self.source.read_record(offset)
        self.detail.value = (f"<div>{esc(what)} → CommitLog offset {offset:,}</div>"
                             + figures.record_html(rec, raw, offset=offset))
        if self.commit_log_view is not None:
            self.commit_log_view.select(offset)
        return self.detail.value
