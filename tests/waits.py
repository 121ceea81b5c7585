"""Polling for a condition a background thread brings about (threaded stores): no timing asserts,
only a generous deadline after which the test fails."""

from __future__ import annotations

import time
from collections.abc import Callable


def until(cond: Callable[[], object], timeout: float = 30.0, poll: float = 0.005) -> bool:
    """True as soon as ``cond()`` is; False if it is still not after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return bool(cond())
        time.sleep(poll)
    return True
