"""Driver-side audit steps equal verify's, on random values (no Spark session needed)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.spark

_ts = st.one_of(st.just(0), st.integers(1, 2**41))


@settings(max_examples=200, deadline=None)
@given(present=st.booleans(), has_files=st.booleans(), physic=_ts, logics=_ts, index=_ts,
       newest=st.lists(st.one_of(st.none(), _ts), max_size=3))
def test_checkpoint_findings_equal_verify(present: bool, has_files: bool, physic: int, logics: int, index: int,
                                          newest: list[int | None]) -> None:
    from rmqlab.inspect.checks import _check_checkpoint
    from rmqlab.spark.jobs import walk_findings

    cp = SimpleNamespace(physic_msg_timestamp=physic, logics_msg_timestamp=logics, index_msg_timestamp=index)
    snap = SimpleNamespace(checkpoint_values=lambda: cp if present else None,
                           commit_log_files=[object()] if has_files else [])
    newest_ts = max([n for n in newest if n is not None], default=0)
    want = [("/s", f.severity, f.kind, f.file, f.offset, f.message) for f in _check_checkpoint(snap, newest_ts)]
    walks: list[dict[str, Any]] = [
        {"store": "/s", "file": f"commitlog/{i:020d}", "newest": n, "has_blank": True, "has_error": False, "last": 1,
         "mapped_length": 1, "end": 0} for i, n in enumerate(newest)]
    store = ("/s", 0, 0, int(has_files), int(present), physic if present else None, logics if present else None,
             index if present else None, 1024, 1)
    got = [(s, sev, kind, file, off, msg) for sev, kind, s, file, off, msg in walk_findings(walks, [store])]
    assert got == want


def test_not_full_only_for_non_last_files_without_blank_or_damage() -> None:
    from rmqlab.spark.jobs import walk_findings

    base = {"store": "/s", "newest": None, "mapped_length": 10, "end": 7}
    walks = [
        {**base, "file": "a", "has_blank": False, "has_error": False, "last": 0},
        {**base, "file": "b", "has_blank": True, "has_error": False, "last": 0},
        {**base, "file": "c", "has_blank": False, "has_error": True, "last": 0},
        {**base, "file": "d", "has_blank": False, "has_error": False, "last": 1},
        {**base, "file": "e", "has_blank": False, "has_error": False, "last": 0, "mapped_length": 0},
    ]
    got = walk_findings(walks, [("/s", 0, 0, 0, 0, None, None, None, 1024, 1)])
    assert [(f[1], f[3], f[4]) for f in got] == [("file_not_full", "a", 7)]


def test_shuffle_partitions_follow_the_log_size() -> None:
    from rmqlab.spark.jobs import BYTES_PER_SHUFFLE_PARTITION, shuffle_partitions_for

    spark = SimpleNamespace(sparkContext=SimpleNamespace(defaultParallelism=4))
    assert shuffle_partitions_for(spark, 0) == 4  # type: ignore[arg-type]
    assert shuffle_partitions_for(spark, 10 * BYTES_PER_SHUFFLE_PARTITION + 1) == 11  # type: ignore[arg-type]
    assert shuffle_partitions_for(spark, 10**15) == 2000  # type: ignore[arg-type]


def test_package_functions_survive_importing_the_job_module() -> None:
    """``rmqlab.spark.audit``/``stats`` stay the functions after the job module is imported (a
    submodule named ``audit`` used to replace the function on the package)."""
    import rmqlab.spark
    import rmqlab.spark.jobs

    assert rmqlab.spark.audit.__module__ == "rmqlab.spark"
    assert rmqlab.spark.stats.__module__ == "rmqlab.spark"
    assert rmqlab.spark.jobs.audit.__doc__


def test_a_new_session_starts_quietly() -> None:
    """The driver logs errors only (rmqlab/spark/log4j2.properties, shipped as package data):
    no "default log4j profile", "Setting default log level to WARN" or WARN lines from Spark's
    start-up, no pandas-3 FutureWarning."""
    import subprocess
    import sys

    pytest.importorskip("pyspark")
    code = ("from rmqlab.spark import get_session; s = get_session('local[1]', 'quiet');"
            "print(s.read.format('rmq_commitlog').load('data/clean-small').count()); s.stop()")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       cwd=Path(__file__).resolve().parents[2])
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "600"
    for noise in ("default log4j profile", "default log level", " WARN ", "FutureWarning", "Reconfiguration failed"):
        assert noise not in r.stderr, r.stderr
