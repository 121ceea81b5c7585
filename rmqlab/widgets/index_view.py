"""IndexView: slot occupancy, chain lengths, and a key's chain walk step by step."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from rmqlab.events import FileDeleted, IndexFileRolled, IndexPut
from rmqlab.inspect.frames import index_items
from rmqlab.widgets import figures
from rmqlab.widgets._base import View, figure_widget, set_figure
from rmqlab.widgets._source import WalkStep

__all__ = ["IndexView"]


class IndexView(View):
    """For one index file (the newest by default): a heat map of slot occupancy, a histogram of
    chain lengths, and, for ``topic``/``key``, the walk slot -> item -> prev item ... as
    ``IndexFile.walk_chain`` does it, with hash collisions marked; ``step`` reveals it one item
    at a time.

    State: ``file`` (name), ``lengths`` (items per slot), ``walk`` (:class:`WalkStep` list; the
    engine's steps are ``[w.step for w in walk]``), ``upto`` (steps drawn).
    """

    ROUTES: ClassVar[dict[type, tuple[str, ...]]] = {
        IndexPut: ("index",), IndexFileRolled: ("index",), FileDeleted: ("index",)}

    def __init__(self, source: Any, *, file: str | None = None, topic: str = "", key: str = "", **kwargs: Any) -> None:
        self.file = file
        self.topic = topic
        self.key = key
        self.lengths = np.zeros(0, np.int64)
        self.walk: list[WalkStep] = []
        self.upto = 0
        super().__init__(source, **kwargs)

    def _build(self) -> None:
        import ipywidgets as w

        self.heatmap = figure_widget()
        self.histogram = figure_widget()
        self.walk_figure = figure_widget()
        self.picker = w.Dropdown(options=[], description="file")
        self.picker.observe(self._on_pick, names="value")
        self.topic_box = w.Text(value=self.topic, description="topic")
        self.key_box = w.Text(value=self.key, description="key")
        walk_btn = w.Button(description="walk")
        walk_btn.on_click(lambda _b: self.walk_key(self.topic_box.value, self.key_box.value, upto=0))
        step_btn = w.Button(description="next step")
        step_btn.on_click(lambda _b: self.step())
        all_btn = w.Button(description="whole walk")
        all_btn.on_click(lambda _b: self.show_upto(len(self.walk)))
        wrap = w.Layout(flex_flow="row wrap")  # a notebook narrower than both figures puts one under the other
        self.widget = w.VBox([
            self.picker, w.HBox([self.heatmap, self.histogram], layout=wrap),
            w.HBox([self.topic_box, self.key_box, walk_btn, step_btn, all_btn], layout=wrap), self.walk_figure,
        ])

    def _on_pick(self, change: dict[str, Any]) -> None:
        if change["new"] and change["new"] != self.file:
            self.file = change["new"]
            self.refresh()

    def _index_file(self) -> Any:
        files = self.source.index_files()
        for f in files:
            if f.name == self.file:
                return f
        return files[-1] if files else None

    def _update(self, flags: frozenset[str]) -> None:
        files = self.source.index_files()
        names = [f.name for f in files]
        if list(self.picker.options) != names:
            self.picker.options = names
        f = self._index_file()
        if f is None:
            self.lengths = np.zeros(0, np.int64)
            return
        if self.file not in names:
            self.file = f.name
        if self.picker.value != f.name:
            self.picker.value = f.name
        items = index_items(f)
        self.lengths = figures.chain_lengths(items["key_hash"], f.hash_slot_num)
        set_figure(self.heatmap, figures.index_heatmap_spec(self.lengths, title=f"index {f.name}"))
        set_figure(self.histogram, figures.chain_histogram_spec(self.lengths))
        if self.key:
            self._walk(f)

    def _walk(self, f: Any) -> None:
        self.walk = self.source.index_walk(self.topic, self.key, f)
        self.upto = min(self.upto, len(self.walk)) if self.upto >= 0 else len(self.walk)
        self._draw_walk()

    def _draw_walk(self) -> None:
        fig = figures.index_walk_spec(self.walk, key=f"{self.topic}#{self.key}", upto=self.upto)
        set_figure(self.walk_figure, fig)

    def walk_key(self, topic: str, key: str, *, upto: int | None = None) -> list[WalkStep]:
        """Walk ``topic#key`` in the current file; ``upto`` steps drawn (None: all)."""
        self.topic, self.key = topic, key
        self.topic_box.value, self.key_box.value = topic, key
        self.upto = -1 if upto is None else upto
        f = self._index_file()
        if f is not None:
            self._walk(f)
        return self.walk

    def step(self) -> int:
        """Reveal one more step of the walk; returns how many are drawn."""
        return self.show_upto(self.upto + 1)

    def show_upto(self, n: int) -> int:
        self.upto = max(0, min(n, len(self.walk)))
        self._draw_walk()
        return self.upto
