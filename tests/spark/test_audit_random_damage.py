"""The Spark audit and ``verify()`` agree on randomly damaged copies of the reference stores.

Two readers of one store, written apart (Spark's data sources and SQL, and numpy over mapped
files), must report the same findings. Copies get 1-4 seeded injuries each
(:func:`rmqlab.testing.damage.injure_randomly`). The seeds include the copies on which the two
once differed: a grown or cut file made one reader take the wrong file size or index layout
(the audit then checked no index item of the store), and a ConsumeQueue file grown by damage
was read past its end (units made of garbage, the queue's next file never read). Copies of the
5.x store with a BatchConsumeQueue (``tests/batch_cq_store.py``) are injured too, with seeds
that hit its batch queue files (stray files beside them, cut, flipped and deleted ones).
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from rmqlab.testing import damage

pytestmark = pytest.mark.spark

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
#: seeds whose copies the two readers once reported differently, and a few more
SEEDS = (3, 4, 5, 16, 17, 29, 36, 69, 0, 1, 2, 6, 7, 8, 9, 10)
#: seeds (+ 2000) whose injuries of the batch store give batch queue findings of many kinds
BATCH_SEEDS = (0, 5, 14, 15, 21, 41, 50, 52)


def _copies(base: Path) -> dict[str, list[tuple[str, str]]]:
    out = {}
    for seed in SEEDS:
        root = base / f"s{seed}"
        shutil.copytree(FIXTURES / ("clean-small", "crash-tail")[seed % 2] / "store", root)
        out[str(root)] = damage.injure_randomly(root, random.Random(1000 + seed))
    from tests.batch_cq_store import write_batch_store

    for seed in BATCH_SEEDS:
        root = base / f"b{seed}"
        write_batch_store(root)
        out[str(root)] = damage.injure_randomly(root, random.Random(2000 + seed))
    return out


def test_audit_equals_verify_on_damaged_copies(spark: Any, tmp_path: Path) -> None:
    from rmqlab.errors import NotAStore
    from rmqlab.inspect import open_snapshot
    from rmqlab.spark.jobs import audit

    injuries = _copies(tmp_path)
    want: dict[str, list[tuple[Any, ...]]] = {}
    for path in injuries:
        try:
            with open_snapshot(path) as snap:
                want[path] = sorted((f.severity, f.kind, f.file, f.offset, f.message) for f in snap.verify())
        except NotAStore:
            continue  # nothing left to audit (every marker deleted): the CLI says so
    assert len(want) >= len(SEEDS) + len(BATCH_SEEDS) - 2
    assert sum(any("batch queue" in f[4] for f in w) for w in want.values()) >= len(BATCH_SEEDS) // 2
    findings, _ = audit(spark, list(want))
    got: dict[str, list[tuple[Any, ...]]] = {p: [] for p in want}
    for r in findings.collect():
        got[os.path.realpath(r.store)].append((r.severity, r.kind, r.file, r.offset, r.message))
    for path in want:
        assert sorted(got[path]) == want[path], (path, injuries[path])
