"""Read-only views of any store dir (never changes a byte of what it reads).

``import rmqlab.inspect`` stays light (no pandas): ``Finding`` and ``verify`` load on first use.
"""

import importlib
from typing import Any

from rmqlab.inspect.snapshot import Damage, StoreSnapshot, open_snapshot

__all__ = ["Damage", "Finding", "StoreSnapshot", "open_snapshot", "verify"]


def __getattr__(name: str) -> Any:
    if name in ("Finding", "verify"):
        module = importlib.import_module("rmqlab.inspect.verify")
        # importing the submodule bound the name ``verify`` to the module: rebind the function
        globals().update(Finding=module.Finding, verify=module.verify)
        return globals()[name]
    raise AttributeError(name)
