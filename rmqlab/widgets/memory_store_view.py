"""MemoryStoreView: what the memory store holds per memory topic, against its threshold."""

from __future__ import annotations

from typing import Any, ClassVar

from rmqlab.events import MemoryEvicted, MemoryPut
from rmqlab.widgets import figures
from rmqlab.widgets._base import View, figure_widget, set_figure
from rmqlab.widgets._source import MemoryState

__all__ = ["MemoryStoreView"]


class MemoryStoreView(View):
    """Bytes held per memory topic and in all, against the threshold; a table per queue of the
    offsets held (min..max), messages held and evicted, and bytes.

    Follows the store's ``MemoryPut`` and ``MemoryEvicted`` events. State: ``state``
    (:class:`~rmqlab.widgets._source.MemoryState`).
    """

    ROUTES: ClassVar[dict[type, tuple[str, ...]]] = {MemoryEvicted: ("memory",), MemoryPut: ("memory",)}

    def __init__(self, source: Any, **kwargs: Any) -> None:
        self.state = MemoryState(False)
        super().__init__(source, **kwargs)

    def _build(self) -> None:
        import ipywidgets as w

        self.figure = figure_widget()
        self.table = w.HTML()
        self.widget = w.VBox([self.figure, self.table])

    def _update(self, flags: frozenset[str]) -> None:
        self.state = state = self.source.memory_state()
        set_figure(self.figure, figures.memory_store_spec(state))
        self.table.value = figures.memory_table_html(state)
