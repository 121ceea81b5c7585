"""MappedFileView: the files of one mapped-file queue with their wrote/committed/flushed pointers."""

from __future__ import annotations

import time
from typing import Any, ClassVar

from rmqlab.events import (
    Appended,
    Committed,
    Dispatched,
    FileCreated,
    FileDeleted,
    FileTruncated,
    FileWarmed,
    Flushed,
    IndexPut,
    Rolled,
)
from rmqlab.widgets import figures
from rmqlab.widgets._base import View, figure_widget, set_figure
from rmqlab.widgets._source import COMMITLOG, FileState, QueueState

__all__ = ["MappedFileView"]


class MappedFileView(View):
    """Each file of ``queue`` (``commitlog``, ``consumequeue/<topic>/<id>`` or ``index``) as a bar
    of its size; pointers as markers; the queue's committed/flushed where as lines; pending
    pre-allocations hatched; deleted files fade out over ``fade_s`` seconds.

    State for tests and notebooks: ``state`` (:class:`QueueState`), ``ghosts`` (fading files).
    """

    ROUTES: ClassVar[dict[type, tuple[str, ...]]] = {
        cls: ("files",) for cls in (Appended, Committed, Flushed, FileCreated, FileDeleted, FileTruncated,
                                    FileWarmed, Rolled, Dispatched, IndexPut)}

    def __init__(self, source: Any, queue: str = COMMITLOG, *, fade_s: float = 3.0, **kwargs: Any) -> None:
        self.queue = queue
        self.fade_s = fade_s
        self.state = QueueState(queue, ())
        self._deleted_at: dict[str, tuple[FileState, float]] = {}
        self.ghosts: list[FileState] = []
        super().__init__(source, **kwargs)

    def _build(self) -> None:
        import ipywidgets as w

        self.figure = figure_widget()
        self.queue_picker = w.Dropdown(options=self.source.queues(), value=self.queue, description="queue")
        self.queue_picker.observe(self._on_queue, names="value")
        self.widget = w.VBox([self.queue_picker, self.figure])

    def _on_queue(self, change: dict[str, Any]) -> None:
        if change["new"] == self.queue:
            return
        self.queue = change["new"]
        self.state = QueueState(self.queue, ())
        self._deleted_at.clear()
        self.refresh()

    def _update(self, flags: frozenset[str]) -> None:
        prev = {f.name: f for f in self.state.files}
        self.state = state = self.source.queue_state(self.queue)
        now = time.monotonic()
        current = {f.name for f in state.files}
        for name, f in prev.items():
            if name not in current and name not in self._deleted_at:
                self._deleted_at[name] = (f, now)
        ghosts = []
        for name, (f, t) in list(self._deleted_at.items()):
            age = now - t
            if age >= self.fade_s or name in current:
                del self._deleted_at[name]
                continue
            ghosts.append(FileState(f.name, f.start, f.size, f.wrote, f.committed, f.flushed, "deleted",
                                    round(1.0 - age / self.fade_s, 3)))
        self.ghosts = ghosts
        set_figure(self.figure, figures.mapped_files_spec(state, ghosts))
        if ghosts:
            self.throttle.mark("fade")  # keep fading at the throttle's rate
        options = self.source.queues()
        if list(self.queue_picker.options) != options and self.queue in options:
            self.queue_picker.options = options
