"""The shape every view shares: a Source, a Throttle fed by the store's bus, figure widgets
updated in place from the pure builders in :mod:`rmqlab.widgets.figures`."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any, ClassVar

from rmqlab.widgets import require_widgets
from rmqlab.widgets._source import Source, as_source
from rmqlab.widgets._throttle import ALL, EventRouter, Throttle

__all__ = ["ALL", "View", "set_figure"]


def set_figure(target: Any, new: Any) -> bool:
    """Make FigureWidget ``target`` show Figure ``new`` inside one ``batch_update``.

    Traces are updated in place when the count and types match (one message to the browser);
    otherwise replaced. Returns True when traces were replaced (click handlers must be re-added).
    """
    replaced = False
    with target.batch_update():
        if len(target.data) == len(new.data) and all(a.type == b.type for a, b in zip(target.data, new.data,
                                                                                        strict=True)):
            for trace, fresh in zip(target.data, new.data, strict=True):
                d = fresh.to_plotly_json()
                d.pop("type", None)
                d.pop("uid", None)
                trace.update(d, overwrite=True)
        else:
            target.data = ()
            target.add_traces(list(new.data))
            replaced = True
        target.layout.update(new.layout.to_plotly_json(), overwrite=True)
    return replaced


def close_widget_tree(widget: Any) -> None:
    """Close ``widget`` and every child (ipywidgets does not close children on its own)."""
    if widget is None:
        return
    for child in getattr(widget, "children", ()):
        close_widget_tree(child)
    close = getattr(widget, "close", None)
    if callable(close):
        close()
    unobserve_all = getattr(widget, "unobserve_all", None)  # traitlets: drop Python-side observers too
    if callable(unobserve_all):
        unobserve_all()


class View(ABC):
    """Base of the views: ``source`` (live store or snapshot), ``widget`` (what is displayed),
    ``refresh()`` (redraw now), ``close()`` (unsubscribe). ``ROUTES`` maps event classes to the
    dirty flags they set; subclasses implement ``_update(flags)`` and ``_build()``."""

    ROUTES: ClassVar[dict[type, tuple[str, ...]]] = {}

    def __init__(self, source: Any, *, autoupdate: bool = True, max_hz: float = 10.0) -> None:
        require_widgets()
        self.source: Source = as_source(source)
        self.throttle = Throttle(self._update, max_hz=max_hz)
        self._router: EventRouter | None = None
        self.autoupdate = autoupdate
        self.widget: Any = None
        self._build()
        self.subscribe()
        self.refresh()

    # --- lifecycle ---------------------------------------------------------------------------
    def subscribe(self) -> None:
        if self.autoupdate and self.source.live and self._router is None:
            self._router = EventRouter(self.source.bus, self.throttle, self.ROUTES)

    def unsubscribe(self) -> None:
        if self._router is not None:
            self._router.close()
            self._router = None

    def retarget(self, store: Any) -> None:
        """Follow a reopened store (the dashboard's recover)."""
        self.unsubscribe()
        self.source.retarget(store)
        self.subscribe()
        self.refresh()

    def close(self) -> None:
        """Unsubscribe, stop redrawing and close the widgets (their observers can no longer fire,
        so a closed view never re-plans against a store that was shut down)."""
        self.unsubscribe()
        self.throttle.close()
        close_widget_tree(self.widget)

    def refresh(self, flags: Iterable[str] = (ALL,)) -> None:
        """Redraw now, in this thread (serialised with the throttle's background redraws, so
        two threads never rebuild the same figure at once)."""
        with self.throttle._draw_lock:
            self._update(frozenset(flags))

    @property
    def flags(self) -> frozenset[str]:
        """Every flag this view redraws on."""
        return frozenset(f for fs in self.ROUTES.values() for f in fs)

    # --- subclass hooks ----------------------------------------------------------------------
    @abstractmethod
    def _build(self) -> None:
        """Create the view's widgets (``self.widget`` and its figures)."""

    @abstractmethod
    def _update(self, flags: frozenset[str]) -> None:
        """Redraw the parts named by ``flags`` from the source's current state."""

    # --- display -----------------------------------------------------------------------------
    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)
