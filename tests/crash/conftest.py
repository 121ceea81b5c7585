"""Fixtures for the crash suite: a fresh store dir and ack log per run."""

from __future__ import annotations

import pytest

from rmqlab.testing.crash import WriterSpec


@pytest.fixture
def make_spec(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """``make_spec(**fields)`` -> a WriterSpec over a new empty directory."""

    def _make(**kw: object) -> WriterSpec:
        d = tmp_path_factory.mktemp("crash")
        return WriterSpec(store_dir=str(d / "store"), ack_log=str(d / "acks.jsonl"), **kw)  # type: ignore[arg-type]

    return _make
