"""Interrupts raised from a trace function, for tests of code cut short by KeyboardInterrupt.

A trace function that raises makes the exception appear at a line of the traced frame, so a
test can try every place between two statements, deterministically (a signal lands at random).
"""

from __future__ import annotations

import linecache
import re
from types import FrameType


class Interrupt(BaseException):
    """Stands for KeyboardInterrupt (which pytest would take for the user's own): like it, not
    an ``Exception``, so no ``except Exception`` handler of rmqlab takes it for an error."""


_RETURN_NAME = re.compile(r"return \w+")
_AFTER_WITH: set[int] = set()  # frames whose last line event was a ``with`` line


def no_real_interrupt_here(frame: FrameType) -> bool:
    """Line events where a trace function may raise but no real interrupt can land (CPython
    3.11 checks for one only at calls and backward jumps): a ``with`` line (also fired on the
    way out, before ``__exit__``), the line after it (fired before the block is protected), a
    ``try:`` line (its no-op is outside the enclosing ``with``'s handler), and ``return
    name`` (no call: an interrupt lands after the call before, maybe inside a ``try`` this
    line follows). Raising there would leave the lock of ``with lock:`` taken, or a store
    open and running that ``MessageStore.open`` was about to hand back."""
    key = id(frame)
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
    if line.startswith("try:") or _RETURN_NAME.fullmatch(line):
        return True
    if line.startswith("with "):
        _AFTER_WITH.add(key)
        return True
    if key in _AFTER_WITH:
        _AFTER_WITH.discard(key)
        return True
    return False
