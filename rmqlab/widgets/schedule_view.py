"""ScheduleView: delayed messages (delay levels) waiting in ``SCHEDULE_TOPIC_XXXX`` and their delivery."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from rmqlab.events import Dispatched, ScheduleDelivered
from rmqlab.widgets import timer_figures
from rmqlab.widgets._base import View, figure_widget, set_figure
from rmqlab.widgets._timer_source import ScheduleState, schedule_state

__all__ = ["ScheduleView"]


class ScheduleView(View):
    """The schedule service of a 4.9.8 or 5.x store, live or on a snapshot.

    Figure: each waiting delayed message a dot on its level's row at its due time (seconds
    from now), the level's next due one circled. Below: per level the delivered offset
    (``config/delayOffset.json``), queue max, waiting, next due; then the last deliveries.
    ``levels``: the rows to draw (default: the levels with anything queued).

    Redraws on ``ScheduleDelivered`` and on dispatch (a delayed put gets its unit, and due
    time, when dispatched). A manual clock's advance publishes nothing: call :meth:`refresh`.
    State: ``state`` (:class:`~rmqlab.widgets._timer_source.ScheduleState`).
    """

    ROUTES: ClassVar[dict[type, tuple[str, ...]]] = {ScheduleDelivered: ("schedule",), Dispatched: ("schedule",)}

    def __init__(self, source: Any, *, levels: Sequence[int] | None = None, due_limit: int = 200,
                 **kwargs: Any) -> None:
        self.levels = levels
        self.due_limit = due_limit
        self.state = ScheduleState(False, 0, ())
        super().__init__(source, **kwargs)

    def _build(self) -> None:
        import ipywidgets as w

        self.figure = figure_widget()
        self.table = w.HTML()
        self.deliveries = w.HTML()
        self.widget = w.VBox([self.figure, w.HBox([self.table, self.deliveries],
                                                  layout=w.Layout(flex_flow="row wrap", grid_gap="16px"))])

    def _update(self, flags: frozenset[str]) -> None:
        self.state = state = schedule_state(self.source, self.due_limit)
        set_figure(self.figure, timer_figures.schedule_spec(state, self.levels))
        self.table.value = timer_figures.schedule_table_html(state)
        self.deliveries.value = timer_figures.schedule_deliveries_html(state)
