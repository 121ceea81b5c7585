"""Named crash points: ``crash_point("before_commit_log_flush")`` kills the process there, on demand.

The engine calls :func:`crash_point` at a few places where a crash leaves an interesting state
on disk (bbolt's gofail points ``beforeSyncDataPages``/``beforeSyncMetaPage`` are the model).
It does nothing unless the environment variable ``RMQLAB_CRASH_AT`` names the point when this
module is first imported::

    RMQLAB_CRASH_AT=before_commit_log_flush        # the first hit kills the process
    RMQLAB_CRASH_AT=index_roll:3                   # the third hit kills it
    RMQLAB_CRASH_AT=index_roll:3,after_commit_log_flush   # several points; the first to fire wins

"Kill" means ``os.kill(os.getpid(), SIGKILL)``: no ``finally`` blocks, no atexit, no flush — the
process image vanishes, but everything already written to the page cache (mmap'd files, written
file descriptors) survives, exactly as when an operator runs ``kill -9`` on a broker. A power
loss is a different failure (unflushed pages are lost too); ``rmqlab.testing.crash`` simulates
that separately.

Cost when unset: one dict membership test per call (the environment is read once, at import).
:func:`arm` replaces the configuration at run time (for tests that fork or that pass an
``action`` other than SIGKILL, e.g. raising an exception in-process).

The points (keep :data:`CRASH_POINTS` in step with the calls in the engine):
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable

__all__ = ["CRASH_POINTS", "ENV_VAR", "arm", "crash_point", "disarm", "hits", "is_armed"]

ENV_VAR = "RMQLAB_CRASH_AT"

CRASH_POINTS: dict[str, str] = {
    "after_append_before_dispatch": "MessageStore.put_message: record in the CommitLog, not yet "
    "acknowledged (nor flushed in SYNC_FLUSH), CQ and index not yet built",
    "after_cq_put_before_index_put": "dispatch: the CQ unit is written, the index keys are not",
    "before_commit_log_flush": "flush services: about to force the CommitLog",
    "after_commit_log_flush": "flush services: CommitLog forced, SYNC_FLUSH producers not yet told",
    "before_checkpoint_flush": "FlushConsumeQueueService: CQs flushed, checkpoint not yet written",
    "checkpoint_flush_mid": "StoreCheckpoint.flush: fields written to the mapping, not yet forced",
    "index_roll": "IndexService roll: new index file created, the full one not yet flushed and "
    "the checkpoint's index timestamp not yet raised",
}
__doc__ = (__doc__ or "") + "".join(f"\n* ``{k}``: {v}" for k, v in CRASH_POINTS.items()) + "\n"


def _kill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _parse(spec: str) -> dict[str, int]:
    armed: dict[str, int] = {}
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        name, _, nth = part.partition(":")
        armed[name.strip()] = int(nth) if nth.strip() else 1
    return armed


# Empty unless something is armed: MessageStore.put_message reads ``faults._armed`` directly to
# skip its after-append step (a call per put) when nothing there could fire.
_armed: dict[str, int] = _parse(os.environ.get(ENV_VAR, ""))
_hits: dict[str, int] = {}
_action: Callable[[], None] = _kill
_lock = threading.Lock()


def crash_point(name: str) -> None:
    """Kill the process here if ``RMQLAB_CRASH_AT`` armed ``name`` and this is the N-th hit."""
    if name in _armed:
        _fire(name)


def is_armed(name: str) -> bool:
    """True if ``name`` is armed (code with a shortcut around a crash point checks this)."""
    return name in _armed


def _fire(name: str) -> None:
    with _lock:
        n = _hits.get(name, 0) + 1
        _hits[name] = n
        due = n == _armed.get(name)
    if due:
        _action()


def arm(spec: str, action: Callable[[], None] | None = None) -> None:
    """Arm points as ``RMQLAB_CRASH_AT`` would (``"name[:N],..."``); reset hit counts.

    ``action`` replaces the SIGKILL (e.g. a function raising an exception) for in-process tests.
    """
    global _armed, _action
    unknown = set(_parse(spec)) - set(CRASH_POINTS)
    if unknown:
        raise ValueError(f"unknown crash points {sorted(unknown)}; known: {sorted(CRASH_POINTS)}")
    with _lock:
        _hits.clear()
        _armed = _parse(spec)
        _action = action or _kill


def disarm() -> None:
    """No point fires any more (the no-op state of an unset ``RMQLAB_CRASH_AT``)."""
    arm("")


def hits() -> dict[str, int]:
    """How often each armed point was reached so far."""
    with _lock:
        return dict(_hits)
