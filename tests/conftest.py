"""Shared pytest fixtures (keep additive: several suites rely on these names)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
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


@pytest.fixture(scope="session", autouse=True)
def _quiet_disk() -> Iterator[None]:
    """Stores opened by tests see a half-full disk unless a test injects its own probe.

    Cleanup runs in ``step()`` with the real ``usedPercent`` by default; on a nearly full disk
    (over 90 %: RocketMQ's disk-full rule) every store a test builds would refuse its puts, and over
    75 % cleanup would delete files, in tests about something else. Session-wide, so module-scoped
    stores are built under it too, and with its own ``MonkeyPatch``, so a test calling
    ``monkeypatch.undo()`` on the shared fixture cannot bring the real disk back. Tests of the
    real probe use the marker ``real_disk`` (see ``_real_disk``).
    """
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("rmqlab.store.cleanup.system_disk_usage", lambda path: 0.5)
        yield


@pytest.fixture(autouse=True)
def _real_disk(request: pytest.FixtureRequest) -> Iterator[None]:
    """The machine's real disk probe, for tests marked ``real_disk``."""
    if request.node.get_closest_marker("real_disk") is None:
        yield
        return
    from rmqlab.files.fs import system_disk_usage

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("rmqlab.store.cleanup.system_disk_usage", system_disk_usage)
        yield
