"""rmq_commitlog / rmq_consumequeue / rmq_index return what single-process inspection returns."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from tests.spark.conftest import store_paths

pytestmark = pytest.mark.spark

_MSG_COLS = ["file", "offset", "size", "topic", "queue_id", "queue_offset", "tags", "tags_code", "keys", "uniq_key",
             "msg_id", "flag", "sys_flag", "born_timestamp", "store_timestamp", "born_host", "store_host",
             "body_length", "body_crc", "crc_ok"]


def _snapshot_messages(path: str) -> pd.DataFrame:
    from rmqlab.inspect import open_snapshot

    with open_snapshot(path) as snap:
        df = snap.messages(damage=[])
    df = df.rename(columns={"commit_log_offset": "offset", "store_size": "size"})
    df["file"] = "commitlog/" + df["file"]
    # frames keep KEYS as stored; the Spark column holds the tokens the index dispatcher indexes
    df["keys"] = df["keys"].map(lambda raw: " ".join(k for k in raw.split(" ") if k) if isinstance(raw, str) else "")
    df["store_path"] = os.path.abspath(path)
    return df


def _norm(df: pd.DataFrame, cols: list[str]) -> pd.DataFrame:
    out = df[cols].copy()
    for c in cols:
        out[c] = out[c].astype(object).where(out[c].notna(), None)
    return out.sort_values(cols[:2]).reset_index(drop=True)


@pytest.fixture(scope="module")
def commitlog(spark: Any, stores: dict[str, Any]) -> pd.DataFrame:
    paths = store_paths(stores, "clean-small", "crash-tail", "rmqlab", "torn", "empty", "blank-only")
    df = spark.read.format("rmq_commitlog").load(",".join(paths)).drop("properties", "born_time", "store_time")
    pdf = df.toPandas()
    pdf["keys"] = pdf["keys"].map(lambda k: " ".join(k) if k is not None else None)
    return pdf


@pytest.mark.parametrize("name", ["clean-small", "crash-tail", "rmqlab", "torn"])
def test_commitlog_rows_equal_snapshot_messages(commitlog: pd.DataFrame, stores: dict[str, Any], name: str) -> None:
    path = os.path.abspath(stores[name])
    got = commitlog[(commitlog.store_path == path) & (commitlog.record_type == "message")]
    want = _snapshot_messages(path)
    assert len(got) == len(want) > 0
    pd.testing.assert_frame_equal(_norm(got, _MSG_COLS), _norm(want, _MSG_COLS), check_dtype=False)


def test_damage_is_a_row_and_ends_the_file(commitlog: pd.DataFrame, stores: dict[str, Any]) -> None:
    from rmqlab.inspect import open_snapshot

    path = os.path.abspath(stores["torn"])
    errors = commitlog[(commitlog.store_path == path) & (commitlog.record_type == "error")]
    damage: list[Any] = []
    with open_snapshot(path) as snap:
        snap.messages(damage=damage)
    assert [(r.file, r.offset, r.error) for r in errors.itertuples()] == \
        [(f"commitlog/{d.file}", d.offset, d.reason) for d in damage] == [("commitlog/00000000000000065536", 65536,
                                                                              "bad_magic")]
    in_file = commitlog[(commitlog.store_path == path) & (commitlog.file == "commitlog/00000000000000065536")]
    assert list(in_file.record_type) == ["error"]


def test_empty_and_blank_only_stores_have_no_messages(commitlog: pd.DataFrame, stores: dict[str, Any]) -> None:
    for name in ("empty", "blank-only"):
        assert not (commitlog.store_path == os.path.abspath(stores[name])).any()


def test_manifest_facts(commitlog: pd.DataFrame, stores: dict[str, Any], reference_manifest: Any) -> None:
    for name in ("clean-small", "crash-tail"):
        rows = commitlog[commitlog.store_path == os.path.abspath(stores[name])].set_index("offset")
        msgs = reference_manifest(name)["messages"]
        assert len(rows) == len(msgs)
        for m in msgs:
            r = {k: (None if isinstance(v, float) and v != v else v)
                 for k, v in rows.loc[m["commitLogOffset"]].to_dict().items()}
            got = [r[c] for c in ("msg_id", "uniq_key", "topic", "queue_id", "queue_offset", "size", "tags_code",
                                  "store_timestamp", "body_crc", "sys_flag", "flag", "tags")]
            assert got == [m["msgId"], m["uniqKey"], m["topic"], m["queueId"], m["queueOffset"], m["storeSize"],
                           m["tagsCode"], m["storeTimestamp"], m["bodyCRC"], m["sysFlag"], m["flag"], m["tags"]]
            assert r["keys"] == " ".join(k for k in (m["keys"] or "").split(" ") if k)


def test_split_bytes_gives_the_same_rows(spark: Any, stores: dict[str, Any]) -> None:
    path = store_paths(stores, "clean-small")[0]
    reader = spark.read.format("rmq_commitlog").option("include_blank", "true")
    whole = reader.load(path)
    split = reader.option("split_bytes", "16384").load(path)
    assert split.rdd.getNumPartitions() > whole.rdd.getNumPartitions() == 9
    from chispa import assert_df_equality

    cols = ["store_path", "file", "offset", "size", "record_type", "msg_id", "keys"]
    assert_df_equality(split.select(*cols), whole.select(*cols), ignore_row_order=True)


def test_a_file_ending_past_long_max_is_one_error_row(spark: Any, stores: dict[str, Any], tmp_path: Path) -> None:
    """Records in a CommitLog file whose name + file size is past Long.MAX_VALUE: the read failed
    (Arrow refused the error row's offset past a long; message offsets had wrapped below zero).
    Now the file is one ``offset_overflow`` error row at its name, as the snapshot's walk reports
    it, and every other row is the snapshot's (split or not)."""
    import shutil

    from rmqlab.inspect import open_snapshot

    root = tmp_path / "stray"
    shutil.copytree(stores["clean-small"], root)
    name = "09223372036854774784"
    (root / "commitlog" / name).write_bytes((root / "commitlog" / "00000000000000065536").read_bytes())
    path = str(root)
    damage: list[Any] = []
    with open_snapshot(path) as snap:
        snap.messages(damage=damage)
    want = _snapshot_messages(path)
    for split in ("0", "16384"):
        pdf = spark.read.format("rmq_commitlog").option("split_bytes", split).load(path).toPandas()
        errors = pdf[pdf.record_type == "error"]
        assert [(r.file, r.offset, r.error, r.error_detail) for r in errors.itertuples()] == \
            [(f"commitlog/{d.file}", d.offset, d.reason, d.detail) for d in damage] == \
            [(f"commitlog/{name}", int(name), "offset_overflow", damage[0].detail)]
        got = pdf[pdf.record_type == "message"]
        assert len(got) == len(want) == 600
        assert got.offset.between(0, 583309).all()


def test_multi_dispatch_column(spark: Any, stores: dict[str, Any]) -> None:
    """``multi_dispatch`` (asked for by name): a record's (queue, queue offset) pairs, as the
    snapshot's scan reads them; null for records without any, and for a whole plain store."""
    from rmqlab.inspect import open_snapshot

    for name in ("lmq", "clean-small"):
        path = store_paths(stores, name)[0]
        rows = (spark.read.format("rmq_commitlog").option("columns", "offset,multi_dispatch").load(path)
                .orderBy("offset").collect())
        got = {r["offset"]: tuple((m["queue"], m["queue_offset"]) for m in r["multi_dispatch"])
               for r in rows if r["multi_dispatch"] is not None}
        with open_snapshot(path) as snap:
            want = {int(c.offset[i]): md for _mf, c in snap.scan(with_multi_dispatch=True)
                    for i, md in enumerate(c.multi_dispatch or ()) if md}
        assert got == want
        assert bool(got) == (name == "lmq")


def test_consume_queue_rows_equal_snapshot(spark: Any, stores: dict[str, Any], ext_stores: dict[str, Any]) -> None:
    """The rows are the snapshot's CQ frames, ConsumeQueueExt stores included: the resolved tags
    code (null, in both, where an address resolves to nothing) and ``ext_address``."""
    from chispa import assert_df_equality

    from rmqlab.inspect import open_snapshot
    from rmqlab.spark import schemas

    paths = store_paths(stores, "clean-small", "crash-tail", "rmqlab") + store_paths(ext_stores)
    got = spark.read.format("rmq_consumequeue").load(",".join(paths))
    frames = []
    for p in paths:
        with open_snapshot(p) as snap:
            for topic, qid in snap.consume_queues:
                f = snap.consume_queue(topic, qid)
                f.insert(0, "queue_id", np.int32(qid))
                f.insert(0, "topic", topic)
                f.insert(0, "store_path", p)
                frames.append(f)
    want = pd.concat(frames, ignore_index=True)
    want["size"] = want["size"].astype(np.int32)
    want["valid"] = True
    lost = want["tags_code"].isna()
    assert (want["ext_address"].notna() | ~lost).all()  # only an ext address can lose its tags code
    want["tags_code"] = want["tags_code"].astype(object).where(~lost, None)
    want["ext_address"] = want["ext_address"].astype(object).where(want["ext_address"].notna(), None)
    assert lost.sum() > 1100
    assert want["ext_address"].notna().sum() == 400 + 400 + 1100  # every unit of the three ext stores
    cols = ["store_path", "topic", "queue_id", "file", "queue_offset", "position", "commit_log_offset", "size",
            "tags_code", "ext_address", "valid"]
    assert got.columns == [c[0] for c in schemas.CONSUME_QUEUE_COLUMNS]
    assert got.columns == cols
    expected = spark.createDataFrame(want[cols].astype(object).to_dict("records"), got.select(*cols).schema)
    assert_df_equality(got.select(*cols), expected, ignore_row_order=True, ignore_nullable=True)


def test_index_rows_equal_index_items(spark: Any, stores: dict[str, Any]) -> None:
    from rmqlab.inspect import open_snapshot
    from rmqlab.inspect.frames import index_items

    paths = store_paths(stores, "clean-small", "crash-tail", "rmqlab")
    got = spark.read.format("rmq_index").load(",".join(paths)).toPandas()
    n = 0
    for p in paths:
        with open_snapshot(p) as snap:
            for f in snap.index_files_opened():
                items = index_items(f)
                rows = got[(got.store_path == p) & (got.file == f"index/{f.name}")].sort_values("item_no")
                assert list(rows.item_no) == list(range(1, len(items) + 1))
                assert list(rows.key_hash) == items["key_hash"].tolist()
                assert list(rows.phy_offset) == items["phy_offset"].tolist()
                assert list(rows.prev_index) == items["prev_index"].tolist()
                assert (rows.slot == rows.key_hash % f.hash_slot_num).all()
                assert (rows.index_count == f.index_count).all()
                n += len(items)
    assert n == len(got) > 0


def test_items_per_partition_gives_the_same_rows(spark: Any, stores: dict[str, Any]) -> None:
    """An index file split into tasks of N items (the audit spreads one big file over every core)
    reads the same rows, item numbers included."""
    from rmqlab.spark.sources import written_index_items

    paths = ",".join(store_paths(stores, "clean-small", "rmqlab"))
    cols = ["store_path", "file", "item_no", "key_hash", "phy_offset", "slot", "index_count"]
    whole = spark.read.format("rmq_index").load(paths)
    split = spark.read.format("rmq_index").option("items_per_partition", "7").load(paths)
    assert split.rdd.getNumPartitions() > whole.rdd.getNumPartitions()
    want = sorted(tuple(r) for r in whole.select(*cols).collect())
    assert sorted(tuple(r) for r in split.select(*cols).collect()) == want
    assert written_index_items(store_paths(stores, "clean-small", "rmqlab")) == len(want)


def test_sources_import_only_codec_from_rmqlab() -> None:
    """Its own imports (``import rmqlab`` itself still loads the package's eager __init__)."""
    import ast

    import rmqlab.spark.sources as mod

    tree = ast.parse(Path(mod.__file__).read_text("utf-8"))
    names = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module} | {
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    ours = {n for n in names if n.startswith("rmqlab")}
    assert all(n.startswith(("rmqlab.codec", "rmqlab.errors", "rmqlab.spark")) for n in ours), ours


@pytest.mark.parametrize("units", [0, 1, 10, 1023, 1024, 1025, 5119, 5120, 5121, 30_000])
@pytest.mark.parametrize("tail", [b"", b"\x00" * 7, b"\x01" * 13])
def test_valid_count_read_in_chunks(tmp_path: Path, units: int, tail: bytes) -> None:
    """The chunked read of a CQ file counts what reading it whole counts, for every stop around
    the chunk boundaries (1,024, 5,120 units), a full file and a partial unit at its end."""
    import io

    from rmqlab.codec.consume_queue_unit import CQ_UNIT_DTYPE
    from rmqlab.spark.sources import _valid_count, _valid_count_file

    full = 30_000
    arr = np.zeros(full, CQ_UNIT_DTYPE)
    arr["commit_log_offset"][:units] = np.arange(units) * 100
    arr["size"][:units] = 100
    data = arr.tobytes() + tail
    for nominal in (full * 20, len(data), 2_000 * 20):
        want = _valid_count(data[:nominal])
        assert _valid_count_file(io.BytesIO(data), nominal) == want, nominal
