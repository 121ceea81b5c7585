"""Live and static views of a store for Jupyter: ipywidgets + plotly ``FigureWidget``.

Every view works on a live :class:`~rmqlab.store.message_store.MessageStore` (it subscribes to
the store's event bus and redraws at most 10 times a second) or on a read-only snapshot
(:func:`rmqlab.inspect.snapshot.open_snapshot`, or a store dir path). Views hold view state
only: they read the engine's state and call its plan functions, never change a byte themselves.

The optional dependencies (``ipywidgets``, ``plotly``, ``anywidget``) are imported lazily, when a
view is first used, so ``import rmqlab.widgets`` is cheap; a missing one raises an ImportError
naming the ``widgets`` extra. :mod:`rmqlab.widgets.figures` needs plotly only (no widgets).
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "CleanupView",
    "CommitLogView",
    "ConsumeQueueView",
    "IndexView",
    "MappedFileView",
    "MemoryStoreView",
    "RecoveryView",
    "ScheduleView",
    "StoreDashboard",
    "TimerView",
    "require_widgets",
]

_VIEWS = {
    "MappedFileView": "mapped_file_view",
    "CommitLogView": "commit_log_view",
    "ConsumeQueueView": "consume_queue_view",
    "IndexView": "index_view",
    "MemoryStoreView": "memory_store_view",
    "RecoveryView": "recovery_view",
    "CleanupView": "cleanup_view",
    "StoreDashboard": "dashboard",
    "TimerView": "timer_view",
    "ScheduleView": "schedule_view",
}

_INSTALL_HINT = "pip install 'rmqlab[widgets]'  (ipywidgets, plotly and anywidget)"


def require_widgets(*, widgets: bool = True) -> None:
    """Import the optional dependencies now; ImportError naming the ``widgets`` extra if missing.

    ``widgets=False`` checks plotly only (enough for :mod:`rmqlab.widgets.figures`).
    """
    names = ("plotly", "ipywidgets", "anywidget") if widgets else ("plotly",)
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError as e:
            raise ImportError(
                f"rmqlab.widgets needs {name!r}, which is not installed: {_INSTALL_HINT}"
            ) from e


def __getattr__(name: str) -> Any:
    module = _VIEWS.get(name)
    if module is None:
        raise AttributeError(f"module 'rmqlab.widgets' has no attribute {name!r}")
    require_widgets()
    return getattr(importlib.import_module(f"rmqlab.widgets.{module}"), name)
