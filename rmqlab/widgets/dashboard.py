"""StoreDashboard: every view of one live store, plus the controls a lesson needs."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from rmqlab.widgets import figures, require_widgets
from rmqlab.widgets._base import close_widget_tree
from rmqlab.widgets._source import as_source
from rmqlab.widgets._throttle import ALL, EventRouter, Throttle
from rmqlab.widgets.cleanup_view import CleanupView
from rmqlab.widgets.commit_log_view import CommitLogView
from rmqlab.widgets.consume_queue_view import ConsumeQueueView
from rmqlab.widgets.index_view import IndexView
from rmqlab.widgets.mapped_file_view import MappedFileView
from rmqlab.widgets.recovery_view import RecoveryView

__all__ = ["CRASH_MODES", "StoreDashboard"]

#: ``power_loss``: bytes past each file's flushed position are lost (rmqlab.testing.crash);
#: ``process_kill``: the process dies, everything written to the mappings survives.
CRASH_MODES = ("power_loss", "process_kill")

CrashFn = Callable[[Any, str], Any]

_SHOWN = "shown"  # flag: the view's tab was selected (redraw what it missed while hidden)


class StoreDashboard:
    """The six views of ``store`` in tabs, driven by one bus subscription and one redraw thread
    (≤ ``max_hz`` redraws a second for all views together), and controls: put N messages, step
    the services, flush, crash, recover (reopen), query by key, advance the clock.

    The dashboard holds no storage logic. It calls the store's API (``put_message``, ``step``,
    ``flush``, ``query_message``, ``MessageStore.open``) and, to crash, ``crash(store, mode)``:
    by default :func:`rmqlab.testing.crash.simulate_power_loss` for ``power_loss`` (an
    ``IndexFlushRecorder`` is kept active while the dashboard lives, so index files come back as
    of their last flush) and ``rmqlab.testing.crash.simulate_process_kill`` for ``process_kill``
    when that helper exists (else: see :func:`_abandon`). Pass your own ``crash`` (and ``reopen(path,
    old_store) -> store``) to replace them.

    Methods mirror the buttons (``put``, ``step``, ``flush``, ``crash``, ``recover``, ``query``,
    ``advance_hours``, ``jump_to_hour``), so a notebook cell or a test can drive it too.

    Only the view in the selected tab follows the store's events; the others note what changed
    (``stale``) and redraw when their tab is selected, so a store writing flat out pays for one
    figure, not six. Actions (the buttons, :meth:`redraw`) redraw every view.
    """

    def __init__(self, store: Any, *, crash: CrashFn | None = None, reopen: Callable[[str, Any], Any] | None = None,
                 max_hz: float = 10.0) -> None:
        require_widgets()
        self.store = store
        self.source = as_source(store)
        self._crash_fn = crash
        self._reopen_fn = reopen
        self._recorder: Any = None
        if crash is None and self.source.live:
            from rmqlab.testing.crash import IndexFlushRecorder

            self._recorder = IndexFlushRecorder().__enter__()
        self.crashed = False
        self.log_lines: list[str] = []
        self._seq = 0
        self.log_view = self.commit_log_view = CommitLogView(self.source, autoupdate=False)
        self.views: dict[str, Any] = {
            "files": MappedFileView(self.source, autoupdate=False),
            "log": self.commit_log_view,
            "consume queue": ConsumeQueueView(self.source, commit_log_view=self.commit_log_view, autoupdate=False),
            "index": IndexView(self.source, autoupdate=False),
            "recovery": RecoveryView(self.source, autoupdate=False),
            "cleanup": CleanupView(self.source, autoupdate=False),
        }
        routes: dict[type, list[str]] = {}
        # Recovery and cleanup change on actions (recover, clock moves, files rolling), not per
        # message: every action redraws all views, so only the per-message views follow events.
        for name, view in self.views.items():
            if name in ("recovery", "cleanup"):
                continue
            for cls, flags in view.ROUTES.items():
                routes.setdefault(cls, []).extend(f"{name}:{f}" for f in flags)
        self.routes = routes
        self.stale: dict[str, set[str]] = {name: set() for name in self.views}
        self.tabs: Any = None
        self.throttle = Throttle(self._redraw, max_hz=max_hz)
        self._router: EventRouter | None = None
        self._subscribe()
        self._build()

    # ------------------------------------------------------------------ plumbing
    def _subscribe(self) -> None:
        if self.source.live and self._router is None:
            self._router = EventRouter(self.source.bus, self.throttle, self.routes)

    def _unsubscribe(self) -> None:
        if self._router is not None:
            self._router.close()
            self._router = None

    @property
    def visible(self) -> str | None:
        """Name of the view in the selected tab (None before the tabs exist: all count as shown)."""
        if self.tabs is None or self.tabs.selected_index is None:
            return None
        return list(self.views)[self.tabs.selected_index]

    def show(self, name: str) -> None:
        """Select the tab of view ``name`` (it is redrawn as it is shown)."""
        if self.tabs is not None:
            self.tabs.selected_index = list(self.views).index(name)

    def _on_tab(self, change: dict[str, Any]) -> None:
        # Always mark (not only when stale): a redraw running now may still be noting flags for it.
        name = self.visible
        if name is not None:
            self.throttle.mark(f"{name}:{_SHOWN}")

    def _redraw(self, flags: frozenset[str]) -> None:
        if self.crashed:
            return
        visible = self.visible
        for name, view in self.views.items():
            mine = {f.split(":", 1)[1] for f in flags if f.startswith(name + ":")}
            if ALL in flags:
                mine.add(ALL)
            if not mine:
                continue
            if ALL not in mine and visible is not None and name != visible:
                self.stale[name] |= mine - {_SHOWN}  # hidden: redrawn when its tab is selected
                continue
            mine |= self.stale[name]
            self.stale[name] = set()
            mine.discard(_SHOWN)
            if mine:
                with view.throttle._draw_lock:  # a view's own redraws (a fading file) may run meanwhile
                    view._update(frozenset(mine))

    def redraw(self) -> None:
        """Redraw every view (throttled, off this thread)."""
        self.throttle.mark(ALL)

    def close(self) -> None:
        self._unsubscribe()
        self.throttle.close()
        for view in self.views.values():
            view.close()
        close_widget_tree(self.widget)
        if self._recorder is not None:
            self._recorder.__exit__(None, None, None)
            self._recorder = None

    def say(self, text: str) -> None:
        """Append a line to the dashboard's log (escaped)."""
        self.log_lines.append(text)
        del self.log_lines[:-200]
        if hasattr(self, "log"):
            self.log.value = "<br>".join(figures.esc(line) for line in reversed(self.log_lines[-30:]))

    # ------------------------------------------------------------------ actions
    def put(self, count: int = 10, *, topic: str = "TopicA", queue_id: int = 0, tags: str = "TagA",
            keys: str = "key-{i}", size: int = 64) -> list[Any]:
        """Put ``count`` messages; ``keys`` is formatted with ``i`` (a running number). To a
        BatchCQ topic of a 5.x store (whose queues take inner batches only) the ``count`` messages
        go as one batch (``put_messages``): one CommitLog record, one unit of its batch queue."""
        from rmqlab.store.message import Message

        msgs = []
        for _ in range(count):
            i = self._seq
            self._seq += 1
            body = (f"{topic} message {i} " * (size // 8 + 1)).encode()[:size]
            msgs.append(Message(topic, body, tags=tags or None, keys=keys.format(i=i).split(), queue_id=queue_id))
        if self.store.consume_queue_store.is_batch_topic(topic):
            result = self.store.put_messages(msgs)
            self.say(f"put a batch of {count} message(s) to {topic}/{queue_id} (BatchCQ: one record): "
                     + ("ok" if result.ok else f"{result.status.name} {result.reason}".strip()))
            self.redraw()
            return [result]
        results = [self.store.put_message(msg) for msg in msgs]
        ok = sum(r.ok for r in results)
        self.say(f"put {count} message(s) to {topic}/{queue_id}: {ok} ok"
                 + (f", last status {results[-1].status.name}" if results and not results[-1].ok else ""))
        self.redraw()
        return results

    def step(self) -> dict[str, Any]:
        """Run every service once (stepped store); a threaded store runs them by itself."""
        if self.store.threaded:
            self.say("services run in background threads (threaded store): nothing to step")
            return {}
        done = self.store.step()
        self.say("step: " + _step_summary(done, self.store))
        self.redraw()
        return done

    def flush(self) -> int:
        where = self.store.flush()
        self.say(f"flush: CommitLog flushed to {where:,}")
        self.redraw()
        return where

    def crash(self, mode: str = "power_loss") -> Any:
        """Crash the store (``CRASH_MODES``); views freeze until :meth:`recover`."""
        if mode not in CRASH_MODES:
            raise ValueError(f"crash mode must be one of {CRASH_MODES}, not {mode!r}")
        self._unsubscribe()
        self.crashed = True
        self._crash_path = self.store.config.store_path_root_dir
        if self._crash_fn is not None:
            result = self._crash_fn(self.store, mode)
        else:
            result = _default_crash(self.store, mode, self._recorder)
        self.say(f"crash ({mode}): {_crash_summary(result)}")
        return result

    def recover(self) -> Any:
        """Reopen the store (recovery runs) and point every view at it."""
        old = self.store
        path = getattr(self, "_crash_path", None) or old.config.store_path_root_dir
        if not old.is_shutdown and not self.crashed:
            old.shutdown()
        if self._reopen_fn is not None:
            new = self._reopen_fn(path, old)
        else:
            from rmqlab.store.message_store import MessageStore

            new = MessageStore.open(path, old.config, clock=old.clock, bus=old.bus, threaded=old.threaded,
                                    disk_probe=old.disk_probe)
        self.store = new
        self.crashed = False
        self.source.retarget(new)
        self._subscribe()
        plan = new.recovery_plan
        if plan is not None:
            self.say(f"recovered ({plan.mode}): walked from {plan.start_file}, {plan.records_checked} record(s) "
                     f"checked, valid data ends at {plan.process_offset:,}: {plan.stop_reason}")
        self.throttle.mark(ALL)
        return new

    def query(self, topic: str, key: str) -> Any:
        """``query_message(topic, key)``; also walks the key's chain in the index view, shown."""
        result = self.store.query_message(topic, key)
        self.say(f"query {topic}#{key}: {len(result.messages)} message(s) at "
                 f"{[m.commit_log_offset for m in result.messages]}, {result.collisions_discarded} collision(s)")
        # The answer is the walk: show it (the click otherwise changed only a hidden tab and the log).
        self.show("index")
        view = self.views["index"]
        with view.throttle._draw_lock:  # the redraw the tab switch asked for may run meanwhile
            view.walk_key(topic, key)
        if result.messages:
            self.commit_log_view.select(result.messages[0].commit_log_offset)
        return result

    def advance_hours(self, hours: float) -> int:
        clock = self.store.clock
        if not hasattr(clock, "advance_hours"):
            self.say("the store's clock is the system clock: open it with clock=ManualClock() to move time")
            return int(clock.now_ms())
        now = clock.advance_hours(hours)
        self.say(f"clock advanced {hours:g} h")
        self.redraw()
        return int(now)

    def jump_to_hour(self, hour: int = 4) -> int:
        clock = self.store.clock
        if not hasattr(clock, "jump_to_hour"):
            self.say("the store's clock is the system clock: open it with clock=ManualClock() to move time")
            return int(clock.now_ms())
        now = clock.jump_to_hour(hour)
        self.say(f"clock moved to the next {hour:02d}:00")
        self.redraw()
        return int(now)

    # ------------------------------------------------------------------ widgets
    def _build(self) -> None:
        import ipywidgets as w

        lay = w.Layout(width="170px")
        topic = w.Text(value="TopicA", description="topic", layout=lay)
        queue = w.BoundedIntText(value=0, min=0, max=1023, description="queue", layout=lay)
        tags = w.Text(value="TagA", description="tags", layout=lay)
        keys = w.Text(value="key-{i}", description="keys", layout=lay)
        size = w.BoundedIntText(value=64, min=0, max=4_000_000, description="size", layout=lay)
        count = w.BoundedIntText(value=10, min=1, max=1_000_000, description="N", layout=lay)
        mode = w.Dropdown(options=CRASH_MODES, value="power_loss", description="crash", layout=w.Layout(width="220px"))
        qkey = w.Text(value="key-0", description="key", layout=lay)
        hours = w.FloatText(value=73, description="hours", layout=lay)
        self.log = w.HTML()

        def button(label: str, action: Callable[[], Any]) -> Any:
            b = w.Button(description=label, layout=w.Layout(width="auto"))

            def run(_b: Any) -> None:
                try:
                    action()
                except Exception as e:  # show it in the log, keep the dashboard alive
                    self.say(f"{label} failed: {type(e).__name__}: {e}")

            b.on_click(run)
            return b

        # Rows wrap: beside JupyterLab's file browser (or on a projector's larger font) a notebook's
        # output is narrower than one row of controls, and an HBox that does not wrap cuts off
        # whatever is at its end (the "put N" button).
        wrap = w.Layout(flex_flow="row wrap")
        controls = w.VBox([
            w.HBox([topic, queue, tags, keys, size, count,
                    button("put N", lambda: self.put(count.value, topic=topic.value, queue_id=queue.value,
                                                     tags=tags.value, keys=keys.value, size=size.value))],
                   layout=wrap),
            w.HBox([button("step services", self.step), button("flush", self.flush), mode,
                    button("crash", lambda: self.crash(mode.value)), button("recover (reopen)", self.recover)],
                   layout=wrap),
            w.HBox([qkey, button("query by key", lambda: self.query(topic.value, qkey.value)), hours,
                    button("advance clock", lambda: self.advance_hours(hours.value)),
                    button("jump to 04:00", lambda: self.jump_to_hour(4))], layout=wrap),
        ])
        self.tabs = tabs = w.Tab(children=[v.widget for v in self.views.values()])
        for i, name in enumerate(self.views):
            tabs.set_title(i, name)
        tabs.observe(self._on_tab, names="selected_index")
        self.widget = w.VBox([controls, tabs, w.HTML("<b>log</b>"), self.log])
        self.say(f"dashboard on {os.path.basename(self.source.store.config.store_path_root_dir)}"
                 if self.source.store is not None else "dashboard on a snapshot (read-only)")

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)


def _step_summary(done: dict[str, Any], store: Any) -> str:
    """What one ``store.step()`` did, in words: records dispatched, where the CommitLog is
    flushed to, the cleanup decision and the consume-queue cleanup."""
    parts = []
    if "reput" in done:
        parts.append(f"dispatched {done['reput']} record(s)")
    if "flush_commit_log" in done:
        parts.append(f"CommitLog flushed to {store.commit_log.mapped_file_queue.flushed_where:,}")
    plan = done.get("clean_commit_log")
    if hasattr(plan, "summary"):
        deleted = sum(o.result == "deleted" for o in plan.outcomes)
        held = sum(o.result == "still_referenced" for o in plan.outcomes)
        done_text = ((f", {deleted} deleted" if plan.outcomes else "")
                     + (f", {held} still held by a reader" if held else ""))
        parts.append(f"cleanup: {plan.summary()}{done_text}")
    cq = done.get("clean_consume_queue")
    if cq is not None and hasattr(cq, "ran"):
        parts.append(f"consume queue cleanup: {cq.files_deleted} file(s) and {cq.index_files_deleted} index "
                     f"file(s) deleted" if cq.ran else f"consume queue cleanup skipped ({cq.reason})")
    return "; ".join(parts) or _short(done)


def _crash_summary(result: Any) -> str:
    """What a simulated crash left, in words (a power loss: what was lost past the flushed offset
    and which files it touched); anything else as its text."""
    if all(hasattr(result, a) for a in ("flushed_where", "max_offset", "zeroed", "deleted")):
        lost = max(result.max_offset - result.flushed_where, 0)
        return (f"only flushed bytes survive: CommitLog flushed to {result.flushed_where:,} of "
                f"{result.max_offset:,} written ({lost:,} bytes of CommitLog lost); "
                f"{sum(result.zeroed.values()):,} bytes zeroed in {len(result.zeroed)} file(s), "
                f"{len(result.deleted)} file(s) never flushed deleted")
    return _short(result)


def _short(value: Any, limit: int = 160) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _default_crash(store: Any, mode: str, recorder: Any = None) -> Any:
    from rmqlab.testing import crash as crash_mod

    if mode == "power_loss":
        return crash_mod.simulate_power_loss(store, recorder)
    return crash_mod.simulate_process_kill(store)
