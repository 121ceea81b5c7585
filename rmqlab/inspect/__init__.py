"""Read-only views of any store dir (never changes a byte of what it reads).

``import rmqlab.inspect`` stays light (no pandas): ``Finding`` and ``verify`` load on first use,
from ``rmqlab.inspect.checks``. (That module was called ``verify`` until stop 18: once anything had
imported it, ``from rmqlab.inspect import verify`` gave the module, not the function.)
"""

import importlib
from typing import Any

from rmqlab.inspect.snapshot import Damage, StoreSnapshot, open_snapshot

__all__ = ["Damage", "Finding", "StoreSnapshot", "open_snapshot", "verify"]


def __getattr__(name: str) -> Any:
    if name in ("Finding", "verify"):
        module = importlib.import_module("rmqlab.inspect.checks")
        globals().update(Finding=module.Finding, verify=module.verify)
        return globals()[name]
    raise AttributeError(name)
