"""Interrupts raised from a trace function, for tests of code cut short by KeyboardInterrupt.

A trace function that raises makes the exception appear at a line of the traced frame, so a
test can try every place between two statements, deterministically (a signal lands at random).
"""

from __future__ import annotations

import dis
import functools
import linecache
import os
import re
import sys
from collections.abc import Callable, Collection
from types import CodeType, FrameType
from typing import Any

import rmqlab
from rmqlab import MessageStore

RMQLAB = os.path.dirname(rmqlab.__file__)


class Interrupt(BaseException):
    """Stands for KeyboardInterrupt (which pytest would take for the user's own): like it, not
    an ``Exception``, so no ``except Exception`` handler of rmqlab takes it for an error."""


_RETURN_NAME = re.compile(r"return \w+")
_AFTER_WITH: set[int] = set()  # frames whose last line event was a ``with`` line


_PREV_LINE: dict[int, int] = {}  # frame id -> the line of its last line event
_CALLED: set[int] = set()  # frames that called a Python function since their last line event


def note_call(frame: FrameType) -> None:
    """Every ``call`` event (of any code): its caller's current line ran a call, which CPython
    follows with a check for a pending interrupt (a property getter, a Python ``__enter__``:
    calls no CALL instruction shows)."""
    if frame.f_back is not None:
        _CALLED.add(id(frame.f_back))


@functools.cache
def _check_lines(code: CodeType) -> frozenset[int]:
    """Lines of ``code`` (as line events number them: ``co_lines``) with an instruction after
    which CPython checks for an interrupt."""
    checks = [i.offset for i in dis.get_instructions(code)
              if i.opname.startswith("CALL") or i.opname == "JUMP_BACKWARD"]  # fmt: skip
    return frozenset(line for start, end, line in code.co_lines()
                     if line is not None and any(start <= o < end for o in checks))  # fmt: skip


def no_real_interrupt_here(frame: FrameType) -> bool:
    """Line events where a trace function may raise but no real interrupt can land. CPython
    (3.11, 3.12) checks for one only on entering a function, on a backward jump and just after
    a call returns, so a line event is a real place only at a function's first line, after a
    jump back, or after a line that made a call. Among those, not at: a ``with`` line (also
    fired on the way out, before ``__exit__``), the line after it (fired before the block is
    protected), a ``try:`` line (its no-op is outside the enclosing ``with``'s handler), and
    ``return name`` (no call: an interrupt lands after the call before, maybe inside a ``try``
    this line follows). Raising at the others would leave the lock of ``with lock:`` taken, a
    store open that ``MessageStore.open`` was about to hand back, or a commit of two stores
    with no call between (the put's queue offset and wrote position) half done."""
    key = id(frame)
    prev = _PREV_LINE.get(key)
    _PREV_LINE[key] = frame.f_lineno
    called = key in _CALLED
    _CALLED.discard(key)
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
    if line.startswith("try:") or _RETURN_NAME.fullmatch(line):
        return True
    if line.startswith("with "):
        _AFTER_WITH.add(key)
        return True
    if key in _AFTER_WITH:
        _AFTER_WITH.discard(key)
        return True
    if prev is None or called or frame.f_lineno <= prev:
        return False
    return prev not in _check_lines(frame.f_code)


def frame_done(frame: FrameType) -> None:
    """Forget a frame that returns (or raises out). CPython reuses a freed frame's memory, so
    a later frame can get the same ``id``: left in ``_AFTER_WITH``, its first line would be
    taken for "the line after a ``with``" and skipped, in some runs and not others."""
    key = id(frame)
    _AFTER_WITH.discard(key)
    _PREV_LINE.pop(key, None)
    _CALLED.discard(key)


class LineTracer:
    """A ``sys.settrace`` function: raise :class:`Interrupt` the first time ``target`` (a code
    of ``codes`` and a line of it) runs; with ``target`` None record in ``seen`` every line of
    ``codes`` that runs instead (where a later run may interrupt)."""

    def __init__(self, codes: Collection[CodeType], target: tuple[CodeType, int] | None) -> None:
        self.codes = codes
        self.target = target
        self.seen: set[tuple[CodeType, int]] = set()
        self.fired = False

    def __call__(self, frame: FrameType, event: str, arg: object) -> Any:
        code = frame.f_code
        if event == "call":
            note_call(frame)
        if event != "call" or code not in self.codes or (self.target is not None and code is not self.target[0]):
            return None
        return self.line

    def line(self, frame: FrameType, event: str, arg: object) -> Any:
        if event == "return":
            frame_done(frame)
        elif event == "line" and not no_real_interrupt_here(frame):
            here = (frame.f_code, frame.f_lineno)
            if self.target is None:
                self.seen.add(here)
            elif here == self.target and not self.fired:
                self.fired = True
                raise Interrupt
        return self.line


class NthLineTracer:
    """A ``sys.settrace`` function: count the rmqlab lines that run (``n``) and raise
    :class:`Interrupt` at line ``at`` (None: count only)."""

    def __init__(self, at: int | None) -> None:
        self.at, self.n, self.fired = at, 0, False

    def __call__(self, frame: FrameType, event: str, arg: object) -> Any:
        if event == "call":
            note_call(frame)
        code = frame.f_code  # not __del__: a collection may run one anywhere (its errors are only printed)
        if event == "call" and code.co_filename.startswith(RMQLAB) and code.co_name != "__del__":
            return self.line
        return None

    def line(self, frame: FrameType, event: str, arg: object) -> Any:
        if event == "return":
            frame_done(frame)
        elif event == "line" and not no_real_interrupt_here(frame):
            self.n += 1
            if self.n == self.at:
                self.fired = True
                raise Interrupt
        return self.line


def run_traced(tracer: Callable[..., Any], fn: Callable[[], object]) -> bool:
    """``fn()`` with ``tracer`` on; whether an :class:`Interrupt` cut it short."""
    _AFTER_WITH.clear()
    _PREV_LINE.clear()
    _CALLED.clear()
    previous = sys.gettrace()  # coverage's, a debugger's: put back after
    sys.settrace(tracer)
    try:
        fn()
    except Interrupt:
        return True
    finally:
        sys.settrace(previous)
    return False


def store_answers(store: MessageStore, messages: int, every: int = 1) -> dict[str, Any]:
    """What the interrupt tests compare: offsets of the CommitLog and of queues ``T0``/``T1``
    0-2, and the records key ``k{i}`` finds for every ``every``-th of ``messages`` (as sets:
    RocketMQ's recovery may index the last record twice, depending on where the index stood
    when the process stopped)."""
    assert store.wait_dispatched()
    out: dict[str, Any] = {"max": store.get_max_phy_offset(), "min": store.get_min_phy_offset()}
    for t in ("T0", "T1"):
        for q in range(3):
            out[f"{t}/{q}"] = (store.get_min_offset_in_queue(t, q), store.get_max_offset_in_queue(t, q))
    out["keys"] = [sorted({m.commit_log_offset for m in store.query_message(f"T{i % 2}", f"k{i}").messages})
                   for i in range(0, messages, every)]  # fmt: skip
    return out


def assert_acked_found(store: MessageStore, acked: list[tuple[str, int, int, int, str]], low: int = 0) -> None:
    """Every acknowledged ``(topic, queue_id, queue_offset, commit_log_offset, key)`` at or past
    CommitLog offset ``low`` is at its queue offset and found by its key."""
    for topic, qid, q, wrote, key in acked:
        if wrote < low:
            continue
        r = store.get_message("g", topic, qid, q, 1)
        assert [m.commit_log_offset for m in r.messages] == [wrote], (topic, qid, q, r.status)
        r.release()
        found = [m.commit_log_offset for m in store.query_message(topic, key, max_num=64).messages]
        assert wrote in found, (topic, key, wrote, found)



class EventInterrupter:
    """Raises :class:`Interrupt` where CPython itself raises one sent from outside: at the
    ``at``-th call, return or c_return event of rmqlab code (a function entered; a Python or C
    call returned to rmqlab), as a ``sys.setprofile`` function; and, with ``then``, again at
    the ``then``-th function entry or return after it (of any code), in whatever cleanup the
    first one set off, as a ``sys.settrace`` function (CPython removes a profile or trace
    function that raised, so each raises once). With ``at`` None it counts the events (``n``).

    This is the exact model of where a real interrupt lands, where :class:`NthLineTracer`
    approximates it by line events (for it, the check just after the call on the line before
    a ``try:`` lands inside the ``try``)."""

    def __init__(self, at: int | None, then: int = 0) -> None:
        self.at, self.then = at, then
        self.n = 0
        self.fired = 0
        self.after = -1  # events since the first raise: -1 before it, -2 once nothing is left to raise
        self.where: list[str] = []  # where each interrupt was raised, for failure messages

    def profile(self, frame: FrameType, event: str, arg: object) -> None:
        if self.after != -1 or event not in ("call", "return", "c_return"):
            return
        code = frame.f_code
        if not code.co_filename.startswith(RMQLAB) or code.co_name == "__del__":
            return  # __del__: a collection may run one anywhere (its errors are only printed)
        self.n += 1
        if self.n == self.at:
            self.fired += 1
            self.after = 0 if self.then else -2
            self.where.append(_place(frame, event, arg))
            raise Interrupt

    def trace(self, frame: FrameType, event: str, arg: object) -> Any:
        if self.after >= 0 and event in ("call", "return"):
            self.after += 1
            if self.after == self.then:
                self.after = -2
                self.fired += 1
                self.where.append(_place(frame, event, arg))
                raise Interrupt
        return self.trace if self.after != -2 else None


def _place(frame: FrameType, event: str, arg: object) -> str:
    what = f" {getattr(arg, '__qualname__', arg)}" if event == "c_return" else ""
    return f"{frame.f_code.co_qualname}:{frame.f_lineno} ({event}{what})"


def run_interrupted_at_event(at: int | None, then: int, fn: Callable[[], object]) -> EventInterrupter:
    """``fn()`` under an :class:`EventInterrupter` (an ``Interrupt`` out of ``fn`` is caught
    here); it tells how many events it counted and how many interrupts it raised."""
    hooks = EventInterrupter(at, then)
    profile, trace = sys.getprofile(), sys.gettrace()  # coverage's, a debugger's: put back after
    sys.setprofile(hooks.profile)
    if then:
        sys.settrace(hooks.trace)
    try:
        try:
            fn()
        finally:
            hooks.after = -2  # nothing raised in the test's own code after fn
    except Interrupt:
        pass
    finally:
        sys.setprofile(profile)
        sys.settrace(trace)
    return hooks
