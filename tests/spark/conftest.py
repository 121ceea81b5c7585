"""One session-scoped local[2] SparkSession, and a directory of store dirs with planted faults.

Spark start-up and each job cost seconds on these machines, so the stores are built once and
most tests read or audit all of them in a single job.
"""

from __future__ import annotations

import os
import shutil
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    pytest.importorskip("pyspark")
    from rmqlab.spark.session import get_session

    session = get_session("local[2]", "rmqlab-tests", {
        "spark.sql.shuffle.partitions": "1", "spark.default.parallelism": "2",
        "spark.sql.adaptive.enabled": "false",
    })
    yield session
    session.stop()


def _copy(name: str, dest: Path) -> Path:
    shutil.copytree(FIXTURES / name / "store", dest)
    return dest


def _write_rmqlab_store(root: Path) -> Path:
    from rmqlab.clock import ManualClock
    from rmqlab.config import MessageStoreConfig
    from rmqlab.store.message import Message
    from rmqlab.store.message_store import MessageStore

    config = MessageStoreConfig.small(str(root))
    clock = ManualClock()
    with MessageStore.open(str(root), config, clock=clock, threaded=False) as store:
        for i in range(300):
            store.put_message(Message(f"Topic{i % 3}", f"body {i} ".encode() * (1 + i % 50), tags=f"T{i % 4}",
                                      keys=[f"k{i}", f"shared-{i % 7}"], queue_id=i % 4))
            clock.advance(1000)
        store.step()
    return root


@pytest.fixture(scope="session")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """name -> store dir: the reference stores (copied), an rmqlab-written one, and damaged ones."""
    from rmqlab.testing import damage

    base = tmp_path_factory.mktemp("spark-stores")
    out: dict[str, Path] = {
        "clean-small": _copy("clean-small", base / "clean-small"),
        "crash-tail": _copy("crash-tail", base / "crash-tail"),  # 40 records without CQ units
        "rmqlab": _write_rmqlab_store(base / "rmqlab"),
    }
    # a CQ unit pointing at the wrong record: TopicA/0 unit 3 -> the record of unit 5
    s = out["cq-wrong"] = _copy("clean-small", base / "cq-wrong")
    cq = s / "consumequeue" / "TopicA" / "0" / "00000000000000000000"
    five = damage.read_bytes(cq, 5 * 20, 8)
    damage.set_bytes(cq, 3 * 20, five)
    # an index item pointing at another message (one without that key)
    s = out["index-wrong"] = _copy("clean-small", base / "index-wrong")
    idx = sorted((s / "index").iterdir())[0]
    item2 = 40 + 64 * 4 + 2 * 20
    phy = struct.unpack(">q", damage.read_bytes(idx, item2 + 4, 8))[0]
    other = 18803 if phy != 18803 else 21726
    damage.set_bytes(idx, item2 + 4, struct.pack(">q", other))
    # an index item linking to itself (an indexing cut short): its chain's older items unreachable
    s = out["index-chain"] = _copy("clean-small", base / "index-chain")
    idx = sorted((s / "index").iterdir())[-1]
    item = 40 + 64 * 4 + 87 * 20
    if struct.unpack(">i", damage.read_bytes(idx, item + 16, 4))[0] <= 0:
        raise AssertionError("index-chain: item 87 of the last index file should link to an older item")
    damage.set_bytes(idx, item + 16, struct.pack(">i", 87))
    # a torn record in the middle of a non-last file: bad magic, the walk of the file stops
    s = out["torn"] = _copy("clean-small", base / "torn")
    damage.set_bytes(s / "commitlog" / "00000000000000065536", 0x0 + 4, b"\x00\x00\x00\x01")
    # a CommitLog file name that is not a multiple of the file size: the audit's range-join path
    s = out["misaligned"] = _copy("clean-small", base / "misaligned")
    (s / "commitlog" / "00000000000000524288").rename(s / "commitlog" / "00000000000000524000")
    # a broker's multi-dispatch (LMQ) units, good ones and one put at another queue offset
    from tests.multi_dispatch_store import write_multi_dispatch_store

    s = base / "lmq"
    write_multi_dispatch_store(s)
    out["lmq"] = s
    room1 = s / "consumequeue" / "%LMQ%room-1" / "0" / f"{0:020d}"
    damage.set_bytes(room1, 2 * 20 + 12, damage.read_bytes(room1, 3 * 20 + 12, 8))  # unit 2's tags = unit 3's
    # a 5.x store whose consume queues are in RocksDB (not read: no not_in_consume_queue flood)
    # and which has compaction files (not read): two notes, nothing else
    s = out["rocksdb"] = _copy("clean-small", base / "rocksdb")
    plant_rocksdb_consume_queue(s, keep_file_queues=False)
    plant_compaction_files(s)
    # a DLedger broker's store: its CommitLog files under dledger-n0/data, commitlog/ empty (not
    # read: one note, and no unit is called past the log's end)
    s = out["dledger"] = _copy("clean-small", base / "dledger")
    (s / "dledger-n0" / "data").mkdir(parents=True)
    for f in sorted((s / "commitlog").iterdir()):
        f.rename(s / "dledger-n0" / "data" / f.name)
    # an empty store (commitlog/ exists, no files) and a store of blank records only
    empty = out["empty"] = base / "empty"
    (empty / "commitlog").mkdir(parents=True)
    blank = out["blank-only"] = base / "blank-only"
    (blank / "commitlog").mkdir(parents=True)
    for n in range(2):
        data = bytearray(65536)
        struct.pack_into(">ii", data, 0, 65536, -875286124)
        (blank / "commitlog" / f"{n * 65536:020d}").write_bytes(bytes(data))
    return out


def plant_rocksdb_consume_queue(root: Path, *, keep_file_queues: bool) -> None:
    """What a 5.x broker with ``storeType=defaultRocksDB`` leaves in ``consumequeue/``: a RocksDB
    database's files (their content is RocksDB's business; only the names say what it is),
    without the file queues unless ``keep_file_queues`` (``rocksdbCQDoubleWriteEnable``)."""
    cq = root / "consumequeue"
    if not keep_file_queues and cq.is_dir():
        shutil.rmtree(cq)
    cq.mkdir(exist_ok=True)
    (cq / "CURRENT").write_text("MANIFEST-000005\n")
    (cq / "MANIFEST-000005").write_bytes(b"\x00" * 64)
    (cq / "OPTIONS-000007").write_text("[Version]\n")
    (cq / "000009.sst").write_bytes(b"\x01" * 128)
    (cq / "LOG").write_text("rocksdb log\n")


def plant_compaction_files(root: Path) -> None:
    """A 5.x compaction store's files (``cleanup.policy=COMPACTION`` topics)."""
    d = root / "compaction" / "compactionLog" / "Compacted" / "0"
    d.mkdir(parents=True)
    (d / f"{0:020d}").write_bytes(b"\x02" * 256)
    (root / "compaction" / "position-checkpoint").write_text("0")


def store_paths(stores: dict[str, Path], *names: str) -> list[str]:
    return [os.path.abspath(stores[n]) for n in (names or stores)]


EXT_FILE = 1000  # tiny ConsumeQueueExt files: 49 units each, so every queue's run rolls


def _write_ext_store(root: Path, n: int, queues: int) -> Path:
    """A store written with ``enable_consume_queue_ext`` (and small CQ files): tagged, untagged
    and delayed messages (the schedule topic's tags codes are due times, through ext units too)."""
    from rmqlab.clock import ManualClock
    from rmqlab.config import MessageStoreConfig
    from rmqlab.store.message import Message
    from rmqlab.store.message_store import MessageStore

    config = MessageStoreConfig.small(str(root), enable_consume_queue_ext=True,
                                      mapped_file_size_consume_queue_ext=EXT_FILE)
    clock = ManualClock(1_700_000_000_000)
    with MessageStore.open(str(root), config, clock=clock, threaded=False) as store:
        for i in range(n):
            msg = Message("Orders", b"b%d" % i, tags=["TagA", "TagB", None][i % 3], keys=[f"k{i}"],
                          queue_id=i % queues, delay_time_level=1 if i % 50 == 7 else 0)
            assert store.put_message(msg).ok
            clock.advance(3)
        store.step()
        assert store.wait_dispatched()
    return root


@pytest.fixture(scope="session")
def ext_stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """name -> store dir written with ConsumeQueueExt: clean; damaged (queue 1's last ext file
    deleted, one of its units saying another tag, queue 0's second ext file cut short and a
    unit's size field zeroed); and one whose consumequeue_ext/ is gone (over 1000 units lost in
    one queue: the cap)."""
    from rmqlab.codec.java_hash import java_hash
    from rmqlab.testing import damage

    base = tmp_path_factory.mktemp("spark-ext-stores")
    out = {"ext": _write_ext_store(base / "ext", 400, 2)}
    s = out["ext-damaged"] = base / "ext-damaged"
    shutil.copytree(out["ext"], s)
    q1 = s / "consumequeue_ext" / "Orders" / "1"
    files = sorted(q1.iterdir())
    files[-1].unlink()
    damage.set_bytes(files[0], 3 * 20 + 2, struct.pack(">q", java_hash("TagZ")))
    q0 = sorted((s / "consumequeue_ext" / "Orders" / "0").iterdir())
    damage.set_bytes(q0[0], 5 * 20, struct.pack(">h", 0))
    with open(q0[1], "r+b") as fh:
        fh.truncate(EXT_FILE // 2)
    s = out["ext-no-run"] = _write_ext_store(base / "ext-no-run", 1100, 1)
    shutil.rmtree(s / "consumequeue_ext")
    return out


@pytest.fixture(scope="session")
def batch_stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """name -> store dir with a 5.x BatchConsumeQueue (``tests/batch_cq_store.py``, byte by byte):
    clean, and with the faults ``tests/inspect/test_batch_consume_queue_inspect.py`` plants, and
    more: shadowed queue offsets, a bad INNER_NUM, a stale record, units past the log or its
    walk end, a queue with plain files too, an empty queue and many mismatches (for the caps)."""
    from rmqlab.codec import batch_consume_queue_unit as bcq
    from rmqlab.testing import damage
    from tests.batch_cq_store import batch_file, patch_unit, write_batch_store

    base = tmp_path_factory.mktemp("spark-batch-stores")
    out: dict[str, Path] = {}

    def make(name: str) -> tuple[Path, list[Any]]:
        out[name] = base / name
        return out[name], write_batch_store(out[name])

    make("bcq")
    s, _ = make("bcq-batch-size")  # a unit claiming 4 messages where the record holds 5 (INNER_NUM)
    patch_unit(s, 2, bcq.MSG_BATCH_SIZE_INDEX, ">h", 4)
    s, _ = make("bcq-single-2")  # a single record's unit claiming 2 messages
    patch_unit(s, 1, bcq.MSG_BATCH_SIZE_INDEX, ">h", 2)
    s, _ = make("bcq-tags")  # a wrong tags code (a wrong store time is no check of RocketMQ's)
    patch_unit(s, 5, 12, ">q", 99)
    patch_unit(s, 4, bcq.MSG_STORE_TIME_OFFSET_INDEX, ">q", 7)
    s, _ = make("bcq-mid-record")  # pointing into the middle of a record
    patch_unit(s, 6, 0, ">q", 3)
    s, units = make("bcq-elsewhere")  # unit 7 points at unit 8's record
    patch_unit(s, 7, 0, ">q", units[8][0])
    s, _ = make("bcq-torn-tail")  # the last unit gone: its record is not dispatched yet
    patch_unit(s, 8, 0, ">q", -1)
    s, _ = make("bcq-short-file")  # the second file cut: the queue stops after its 2 units
    with open(batch_file(s, 4), "r+b") as f:
        f.truncate(100)
    s, _ = make("bcq-dup-base")  # unit 3 starts at unit 4's queue offset: a lookup finds unit 3
    patch_unit(s, 3, bcq.MSG_BASE_OFFSET_INDEX, ">q", 10)
    s, units = make("bcq-inner-num")  # record 2's INNER_NUM is no number
    log = s / "commitlog" / f"{0:020d}"
    at = log.read_bytes().find(b"INNER_NUM\x015", units[2][0])
    assert units[2][0] < at < units[2][0] + units[2][1]
    damage.set_bytes(log, at + 10, b"x")
    s, units = make("bcq-stale")  # record 6 (an inner batch) says it is elsewhere
    damage.set_bytes(log := s / "commitlog" / f"{0:020d}", units[6][0] + 28, struct.pack(">q", 12345))
    s, _ = make("bcq-past-end")  # a unit past the last CommitLog file
    patch_unit(s, 5, 0, ">q", 10**6)
    s, units = make("bcq-torn-log")  # record 5 torn: units 5.. point past the walk's end
    damage.set_bytes(s / "commitlog" / f"{0:020d}", units[5][0] + 4, b"\x00\x00\x00\x01")
    s, _ = make("bcq-also-plain")  # plain files too: Batched/0 is checked as a plain queue only
    (s / "consumequeue" / "Batched" / "0").mkdir(parents=True)
    shutil.copy(s / "consumequeue" / "Plain" / "0" / f"{0:020d}", s / "consumequeue" / "Batched" / "0")
    s, _ = make("bcq-empty-queue")  # no valid unit: every record is past the queue's end 0
    patch_unit(s, 0, 0, ">q", -1)
    s, _ = make("bcq-tags-all")  # every unit's tags code wrong: 9 mismatches in one group
    for i in range(9):
        patch_unit(s, i, 12, ">q", 99)
    return out
