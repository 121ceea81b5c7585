"""Option ``columns``: a subset read builds exactly the full read's values for those columns.

Runs the readers in-process (no Spark session): ``read(partition)`` is what a Spark worker calls.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqlab.codec.index_layout import index_key, index_key_hash
from rmqlab.spark import schemas
from rmqlab.spark.sources import CommitLogReader, ConsumeQueueReader, IndexReader
from tests.spark.conftest import store_paths

pytestmark = pytest.mark.spark

_ALL = [c[0] for c in schemas.COMMIT_LOG_COLUMNS]


def _read(reader: Any) -> pa.Table:
    return pa.Table.from_batches([b for p in reader.partitions() for b in reader.read(p)], schema=reader.arrow)


def _commitlog(paths: list[str], columns: list[str] | None, **opts: str) -> pa.Table:
    options = {"paths": ",".join(paths), **opts}
    if columns is not None:
        options["columns"] = ",".join(columns)
    schema = schemas.commit_log_schema(opts.get("include_body") == "true", columns)
    return _read(CommitLogReader(options, schema))


def _all_stores(stores: dict[str, Path]) -> list[str]:
    return store_paths(stores, "clean-small", "crash-tail", "rmqlab", "torn", "empty", "blank-only", "cq-wrong")


@pytest.fixture(scope="module")
def full(stores: dict[str, Path]) -> pa.Table:
    return _commitlog(_all_stores(stores), None, include_blank="true", include_body="true", split_bytes="30000")


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from([*_ALL, "body", "key_hashes"]), min_size=1, max_size=8, unique=True))
def test_any_subset_equals_the_full_read(full: pa.Table, stores: dict[str, Path], columns: list[str]) -> None:
    got = _commitlog(_all_stores(stores), columns, include_blank="true", split_bytes="30000")
    assert got.schema == schemas.arrow_schema(schemas.commit_log_schema(columns=columns))
    for name in columns:
        if name == "key_hashes":
            continue  # not in the full read: checked against the index dispatcher's keys below
        assert got[name].combine_chunks().equals(full[name].combine_chunks()), name


def test_key_hashes_are_the_index_key_hashes(full: pa.Table, stores: dict[str, Path]) -> None:
    got = _commitlog(_all_stores(stores), ["record_type", "key_hashes"], include_blank="true")
    rows = full.select(["record_type", "topic", "keys", "uniq_key"]).to_pylist()
    hashes = got["key_hashes"].to_pylist()
    assert len(rows) == len(hashes)
    assert any(hashes)
    for r, h in zip(rows, hashes, strict=True):
        if r["record_type"] != "message":
            assert h is None
            continue
        keys = [*(r["keys"] or []), *([r["uniq_key"]] if r["uniq_key"] else [])]
        assert h == sorted({index_key_hash(index_key(r["topic"], k)) for k in keys})


def test_properties_map_equals_the_snapshot(full: pa.Table, stores: dict[str, Path]) -> None:
    from rmqlab.inspect import open_snapshot

    for path in store_paths(stores, "clean-small", "rmqlab"):
        with open_snapshot(path) as snap:
            want = {off: dict(r.properties) for _, off, r in snap.iter_records(damage=[]) if hasattr(r, "properties")}
        rows = full.filter(pa.compute.equal(full["store_path"], os.path.abspath(path)))
        rows = rows.filter(pa.compute.equal(rows["record_type"], "message")).select(["offset", "properties"])
        got = {r["offset"]: dict(r["properties"]) for r in rows.to_pylist()}
        assert got == want
        assert got


def test_unknown_columns_are_refused() -> None:
    with pytest.raises(ValueError, match="nope"):
        schemas.commit_log_schema(columns=["offset", "nope"])
    with pytest.raises(ValueError, match="repeated"):
        schemas.index_schema(columns=["slot", "slot"])
    assert schemas.parse_columns(" a, b ,") == ["a", "b"]
    assert schemas.parse_columns("") is None


def test_cq_and_index_subsets(stores: dict[str, Path]) -> None:
    paths = ",".join(store_paths(stores, "clean-small", "crash-tail", "rmqlab"))
    for reader, schema_of, names in (
        (ConsumeQueueReader, schemas.consume_queue_schema, ["commit_log_offset", "store_path", "queue_offset"]),
        (IndexReader, schemas.index_schema, ["phy_offset", "key_hash", "store_path", "item_no"]),
    ):
        whole = _read(reader({"paths": paths}, schema_of()))
        part = _read(reader({"paths": paths, "columns": ",".join(names)}, schema_of(names)))
        assert part.num_rows == whole.num_rows > 0
        assert part.equals(whole.select(names))


def test_packed_cq_partitions_read_the_same_rows(stores: dict[str, Path]) -> None:
    from rmqlab.spark.sources import ConsumeQueueFiles, ConsumeQueuePartition

    paths = ",".join(store_paths(stores, "clean-small", "crash-tail", "rmqlab", "cq-wrong"))
    tables, counts = [], []
    for per in ("0", "1", "100", "2000000"):
        r = ConsumeQueueReader({"paths": paths, "units_per_partition": per, "include_pre_blank": "true"},
                               schemas.consume_queue_schema())
        parts = r.partitions()
        counts.append(len(parts))
        assert all(isinstance(p, ConsumeQueuePartition if per == "0" else ConsumeQueueFiles) for p in parts)
        tables.append(_read(r))
    assert counts[0] == counts[1] > counts[2] > counts[3] == 1
    assert all(t.equals(tables[0]) for t in tables[1:])
    assert tables[0].num_rows > 0
