"""Read-only views of any store dir (never changes a byte of what it reads)."""

from rmqlab.inspect.snapshot import Damage, StoreSnapshot, open_snapshot

__all__ = ["Damage", "StoreSnapshot", "open_snapshot"]
