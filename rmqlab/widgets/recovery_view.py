"""RecoveryView: a RecoveryPlan drawn as a walk over the CommitLog files."""

from __future__ import annotations

from typing import Any, ClassVar

from rmqlab.events import RecoveryStep
from rmqlab.widgets import figures
from rmqlab.widgets._base import View, figure_widget, set_figure
from rmqlab.widgets._source import COMMITLOG

__all__ = ["RecoveryView"]


class RecoveryView(View):
    """The plan a live store recovered with at open (or, for a snapshot, what recovery would do):
    start candidates, the checked range, where it cut and why, what it truncates or deletes;
    the plan's steps and notes as a table. ``plan`` may also be passed explicitly.

    State: ``plan`` (the RecoveryPlan drawn).
    """

    ROUTES: ClassVar[dict[type, tuple[str, ...]]] = {RecoveryStep: ("plan",)}

    def __init__(self, source: Any, *, plan: Any = None, **kwargs: Any) -> None:
        self._explicit = plan
        self.plan = plan
        super().__init__(source, **kwargs)

    def _build(self) -> None:
        import ipywidgets as w

        self.figure = figure_widget()
        self.steps = w.HTML()
        self.widget = w.VBox([self.figure, self.steps])

    def show(self, plan: Any) -> None:
        """Draw ``plan`` (e.g. a dry-run plan) instead of the source's."""
        self._explicit = plan
        self.refresh()

    def retarget(self, store: Any) -> None:
        self._explicit = None
        super().retarget(store)

    def _update(self, flags: frozenset[str]) -> None:
        self.plan = self._explicit if self._explicit is not None else self.source.recovery_plan()
        files = self.source.queue_state(COMMITLOG).files
        set_figure(self.figure, figures.recovery_spec(self.plan, files))
        self.steps.value = figures.recovery_steps_html(self.plan)
