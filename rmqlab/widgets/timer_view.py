"""TimerView: 5.x timer messages in the wheel -- slots over the coming seconds, the read time,
the timerlog, ``config/timercheck`` and the last enqueues and dequeues."""

from __future__ import annotations

from typing import Any, ClassVar

from rmqlab.events import Dispatched, TimerDequeued, TimerEnqueued
from rmqlab.widgets import timer_figures
from rmqlab.widgets._base import View, figure_widget, set_figure
from rmqlab.widgets._timer_source import TimerState, timer_state

__all__ = ["TimerView"]


class TimerView(View):
    """The timer wheel of a 5.x store (``timer_wheel_enable``), live or on a snapshot.

    Figure: one stacked bar per valid slot from a few ticks before the read time to
    ``horizon_s`` seconds ahead (messages, rolls, delete markers), with markers for now, the
    read time and the checkpoint's ``lastReadTimeMs``. Below: the live position beside the
    checkpoint's values and the timerlog's write position, then the last enqueues/dequeues.

    Redraws on ``TimerEnqueued``/``TimerDequeued`` and on dispatch (a put into
    ``rmq_sys_wheel_timer`` waits there until the timer service enqueues it). A manual clock's
    advance publishes nothing: call :meth:`refresh` after moving it. State: ``state``
    (:class:`~rmqlab.widgets._timer_source.TimerState`).
    """

    ROUTES: ClassVar[dict[type, tuple[str, ...]]] = {
        TimerEnqueued: ("timer",), TimerDequeued: ("timer",), Dispatched: ("timer",)}

    def __init__(self, source: Any, *, horizon_s: float = 60, event_rows: int = 20, **kwargs: Any) -> None:
        self.horizon_s = horizon_s
        self.event_rows = event_rows
        self.state = TimerState(False)
        super().__init__(source, **kwargs)

    def _build(self) -> None:
        import ipywidgets as w

        self.figure = figure_widget()
        self.status = w.HTML()
        self.events = w.HTML()
        self.widget = w.VBox([self.figure, w.HBox([self.status, self.events],
                                                  layout=w.Layout(flex_flow="row wrap", grid_gap="16px"))])

    def _update(self, flags: frozenset[str]) -> None:
        self.state = state = timer_state(self.source, int(self.horizon_s * 1000))
        set_figure(self.figure, timer_figures.timer_wheel_spec(state))
        self.status.value = timer_figures.timer_status_html(state)
        self.events.value = timer_figures.timer_events_html(state, self.event_rows)
