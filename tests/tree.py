"""The bytes of a directory tree, for tests that promise "no byte changed"."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def tree_digest(root: str | os.PathLike[str]) -> dict[str, str]:
    """path relative to ``root`` -> sha256 of the file's bytes, for every file below ``root``."""
    root = Path(root)
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}
