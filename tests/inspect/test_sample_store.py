"""data/rmqlab-small is exactly what scripts/make_sample_store.py writes, and it verifies clean."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from rmqlab.inspect import open_snapshot

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "rmqlab-small"


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_regenerating_gives_identical_bytes(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("make_sample_store", ROOT / "scripts" / "make_sample_store.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = module.make(tmp_path / "rmqlab-small")
    assert _files(out) == _files(SAMPLE)


def test_sample_store_is_clean_and_complete() -> None:
    with open_snapshot(SAMPLE) as snap:
        assert [f for f in snap.verify(check_crc=True) if f.severity != "info"] == []
        topics = snap.topics()
        assert topics.messages.sum() == 360
        assert set(topics.topic) == {"OrderTopic", "TopicA", "TopicB"}
        assert topics.lag.sum() == 0
        chain = snap.index_chain("TopicA", "shared-3")
        assert chain.message_has_key.any()
