"""The shape every view shares: a Source, a Throttle fed by the store's bus, figure widgets
updated in place from the pure builders in :mod:`rmqlab.widgets.figures`."""

from __future__ import annotations

import copy
import functools
from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any, ClassVar

import numpy as np

from rmqlab.widgets import require_widgets
from rmqlab.widgets._source import Source, as_source
from rmqlab.widgets._throttle import ALL, EventRouter, Throttle

__all__ = ["ALL", "View", "figure_widget", "set_figure"]


def set_figure(target: Any, new: Any) -> bool:
    """Make FigureWidget ``target`` show ``new``: a :data:`~rmqlab.widgets.figures.Spec` (or a
    ``go.Figure``, taken as its JSON).

    Diffs against the spec applied last (kept on the widget) and sends only the trace and layout
    properties (top level: ``x``, ``marker``, ``xaxis``...) that changed, through
    ``plotly_update`` (one message per set of changed keys), without re-validating them: the builders
    make valid specs, and plotly's validation of thousands of hover strings and offsets on every
    redraw was most of a redraw's cost. When the number or types of traces change, the traces are
    replaced (created with their orientation) and the whole layout is sent again. Returns True
    when they were (click handlers must be re-added).
    """
    spec = new.to_plotly_json() if hasattr(new, "to_plotly_json") else new
    data: list[dict[str, Any]] = list(spec.get("data", ()))
    layout = dict(spec.get("layout", {}))
    if isinstance(layout.get("template"), str):
        layout["template"] = _template(layout["template"])
    types = [t.get("type", "scatter") for t in data]
    prev = getattr(target, "_rmq_applied", None)
    prev_layout: dict[str, Any] = prev[1] if prev is not None else {}
    replaced = prev is None or [t.type for t in target.data] != types
    if replaced:
        target.data = ()
        # A trace is created with its orientation: plotly.js answers a restyle that turns a bar
        # trace horizontal by swapping the x and y axes, types included (a time line whose traces
        # were replaced drew its dates on a category axis and lost its bars).
        target.add_traces([{"type": t, **_created_with(d)} for t, d in zip(types, data, strict=True)])
        old_traces: list[dict[str, Any]] = [_created_with(d) for d in data]
        # and the whole layout goes again, in case a new trace changed it some other way
        old_layout: dict[str, Any] = {}
    else:
        old_traces, old_layout = prev
    indexes, changes = [], []
    for i, (old, fresh) in enumerate(zip(old_traces, data, strict=True)):
        diff = {k: v for k, v in fresh.items() if k not in _FIXED and not (k in old and _same(old[k], v))}
        diff.update((k, None) for k in old if k not in fresh and k not in _FIXED)  # None: back to the default
        if diff:
            indexes.append(i)
            changes.append(diff)
    relayout = {k: v for k, v in layout.items() if not (k in old_layout and _same(old_layout[k], v))}
    if "template" in relayout and relayout["template"] is not None:
        relayout["template"] = copy.deepcopy(relayout["template"])  # the cached template stays unshared
    relayout.update((k, None) for k in prev_layout if k not in layout)
    # Never Undefined for a trace that lacks one of an update's keys: plotly.js stores it as a
    # present-but-undefined attribute (``marker: undefined`` then breaks its next newPlot). A
    # changed trace re-sends its unchanged value of a key other traces changed; traces that have
    # no value for some key (and are not removing it) go in a separate update.
    union = {k for d in changes for k in d}
    groups: dict[frozenset[str], list[int]] = {}
    for n, (i, diff) in enumerate(zip(indexes, changes, strict=True)):
        groups.setdefault(frozenset(k for k in union if k in diff or k in data[i]), []).append(n)
    updates = [({k: [changes[n][k] if k in changes[n] else data[indexes[n]][k] for n in members] for k in keys},
                [indexes[n] for n in members]) for keys, members in groups.items()] or [({}, [])]
    for u, (restyle, trace_indexes) in enumerate(updates):
        lay = relayout if u == 0 else {}
        if restyle or lay:
            _plotly_update(target, restyle, lay, trace_indexes)
    for i, diff in zip(indexes, changes, strict=True):
        _forget(target.data[i], diff)
    _forget(target.layout, relayout)
    target._rmq_applied = (data, layout)
    return replaced


def _plotly_update(target: Any, restyle: dict[str, list[Any]], relayout: dict[str, Any], indexes: list[int]) -> None:
    """``target.plotly_update(restyle, relayout, indexes)`` minus its check of every key path
    against the trace (each check reads the property, copying lists of thousands of hover
    strings: most of a small redraw's time). The keys come from the builders, so they are valid."""
    for key, values in restyle.items():
        for i, value in zip(indexes, values, strict=True):
            target._set_in(target._data[i], key, value)
    for key, value in relayout.items():
        target._set_in(target._layout, key, value)
    target._send_update_msg(restyle, relayout, indexes)
    if restyle:
        target._dispatch_trace_change_callbacks(restyle, indexes)
    if relayout:
        target._dispatch_layout_change_callbacks(relayout)


def _forget(obj: Any, keys: Iterable[str]) -> None:
    """Drop plotly's cached child objects (``layout.shapes``, ``trace.marker``...) for ``keys``:
    ``plotly_update`` writes the raw props but leaves those caches stale; plotly rebuilds them
    from the props on the next access, as it does after an unvalidated ``__setitem__``."""
    for k in keys:
        obj._compound_props.pop(k, None)
        obj._compound_array_props.pop(k, None)


_FIXED = frozenset({"type", "uid"})


def _created_with(trace: dict[str, Any]) -> dict[str, Any]:
    """What of a trace spec goes into the trace as it is created (before any restyle): its
    orientation, the one property whose later change makes plotly.js rearrange the axes."""
    return {"orientation": trace["orientation"]} if "orientation" in trace else {}


def figure_widget() -> Any:
    """An empty ``go.FigureWidget`` for :func:`set_figure` to fill. Made with an empty template:
    plotly's default one costs ~30 ms to validate per widget, and the first ``set_figure`` sends
    the spec's own template anyway."""
    import plotly.graph_objects as go

    return go.FigureWidget(layout={"template": {}})


@functools.cache
def _template(name: str) -> dict[str, Any]:
    """A named template as the JSON plotly would send (resolved once; the browser knows no names)."""
    import plotly.io as pio

    return pio.templates[name].to_plotly_json()


def _same(a: Any, b: Any) -> bool:
    """``a`` equals ``b`` as plotly would draw them (numpy arrays by value, dicts recursively)."""
    if a is b:
        return True
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.shape == b.shape
                and a.dtype == b.dtype and bool(np.array_equal(a, b, equal_nan=a.dtype.kind == "f")))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(v, b[k]) for k, v in a.items())
    if type(a) is not type(b):
        return False
    try:
        return bool(a == b)
    except (ValueError, TypeError):  # a list holding arrays: call it changed
        return False


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
