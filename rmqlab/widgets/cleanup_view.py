"""CleanupView: what CleanCommitLogService would delete, now or hours ahead, at any disk ratio."""

from __future__ import annotations

from typing import Any, ClassVar

from rmqlab.events import CleanupDecision, FileCreated, FileDeleted, Rolled
from rmqlab.widgets import figures
from rmqlab.widgets._base import View, figure_widget, set_figure

__all__ = ["CleanupView"]

_HOUR_MS = 3_600_000


class CleanupView(View):
    """Files on a time line (last modified -> expiry) with "now", the delete-when hours shaded and
    each file's decision; a disk gauge against the clean / force / refuse-writes thresholds; a
    table of rule, decision and reason per file. Two sliders re-plan live through the store's
    ``plan_cleanup``: ``hours ahead`` of the store's clock, and a simulated disk ratio (off:
    the measured ratio). Nothing is deleted: this is the plan, exactly as the service computes it.

    State: ``plan`` (the CleanupPlan drawn), ``now_ms``, ``disk_ratio`` (None = measured).
    """

    ROUTES: ClassVar[dict[type, tuple[str, ...]]] = {
        FileCreated: ("plan",), FileDeleted: ("plan",), Rolled: ("plan",), CleanupDecision: ("plan",)}

    def __init__(self, source: Any, *, hours_ahead: float = 0.0, disk_ratio: float | None = None,
                 max_hours: float = 240.0, **kwargs: Any) -> None:
        self._hours0 = hours_ahead
        self._ratio0 = disk_ratio
        self._max_hours = max_hours
        self.plan: Any = None
        self.now_ms = 0
        super().__init__(source, **kwargs)

    def _build(self) -> None:
        import ipywidgets as w

        self.timeline = figure_widget()
        self.gauge = figure_widget()
        self.hours_ahead = w.FloatSlider(value=self._hours0, min=0, max=self._max_hours, step=1,
                                         description="hours ahead", continuous_update=False,
                                         style={"description_width": "initial"})
        self.simulate_disk = w.Checkbox(value=self._ratio0 is not None, description="simulate disk ratio")
        self.disk_slider = w.FloatSlider(value=self._ratio0 if self._ratio0 is not None else 0.5, min=0.0, max=1.0,
                                         step=0.01, description="disk ratio", continuous_update=False,
                                         style={"description_width": "initial"})
        for control in (self.hours_ahead, self.simulate_disk, self.disk_slider):
            control.observe(lambda _c: self.refresh(), names="value")
        self.table = w.HTML()
        # Stacked, not side by side: a timeline and a gauge in one row overflow a notebook's width.
        self.widget = w.VBox([w.HBox([self.hours_ahead, self.simulate_disk, self.disk_slider],
                                     layout=w.Layout(flex_flow="row wrap")),
                              self.timeline, self.gauge, self.table])

    @property
    def disk_ratio(self) -> float | None:
        return float(self.disk_slider.value) if self.simulate_disk.value else None

    def _update(self, flags: frozenset[str]) -> None:
        self.now_ms = self.source.now_ms() + int(self.hours_ahead.value * _HOUR_MS)
        self.plan = plan = self.source.plan_cleanup(now_ms=self.now_ms, disk_ratio=self.disk_ratio)
        if plan is None:
            self.table.value = "<i>cleanup planning is not available for this source</i>"
            return
        set_figure(self.timeline, figures.cleanup_timeline_spec(plan))
        set_figure(self.gauge, figures.disk_gauge_spec(plan))
        self.table.value = figures.cleanup_table_html(plan)
