"""Shared pytest fixtures (keep additive: several suites rely on these names)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

FIXTURES_DIR = Path(__file__).parent / "fixtures"
REFERENCE_STORES = ("clean-small", "crash-tail")


@pytest.fixture(scope="session")
def reference_store() -> Callable[[str], Path]:
    """``reference_store(name)`` -> ``tests/fixtures/<name>/store`` (read it, never write)."""

    def _path(name: str) -> Path:
        path = FIXTURES_DIR / name / "store"
        assert path.is_dir(), f"no reference store {name!r} under {FIXTURES_DIR}"
        return path

    return _path


@pytest.fixture(scope="session")
def reference_manifest() -> Callable[[str], dict[str, Any]]:
    """``reference_manifest(name)`` -> parsed ``manifest.json`` of a reference store (cached)."""
    cache: dict[str, dict[str, Any]] = {}

    def _load(name: str) -> dict[str, Any]:
        if name not in cache:
            cache[name] = json.loads((FIXTURES_DIR / name / "manifest.json").read_text("utf-8"))
        return cache[name]

    return _load
