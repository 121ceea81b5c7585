"""Shared pytest fixtures (keep additive: several suites rely on these names)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

# Hypothesis fails a test when one example takes over its 200 ms deadline and its replay does not
# ("Unreliable test timings"): one 0.3 s stall of the process (a busy CI machine) fails a codec test
# whose examples take a millisecond. The tests check results, not speed: no deadline, and no
# too_slow health check (the time spent generating examples), for all.
settings.register_profile("rmqlab", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("rmqlab")

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


@pytest.fixture(autouse=True)
def _quiet_disk(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stores opened by tests see a half-full disk unless a test injects its own probe.

    Cleanup runs in ``step()`` with the real ``usedPercent`` by default; on a nearly full CI disk
    that would delete files or refuse writes in tests about something else. Tests of the real
    probe use the marker ``real_disk``.
    """
    if request.node.get_closest_marker("real_disk") is None:
        monkeypatch.setattr("rmqlab.store.cleanup.system_disk_usage", lambda path: 0.5)
