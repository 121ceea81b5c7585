"""IndexService on real files: build rules, rolls, naming (golden #16), crash load, queries."""

from __future__ import annotations

import os
import struct
import tempfile
from datetime import UTC, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqlab.clock import ManualClock
from rmqlab.codec.flags import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)
from rmqlab.codec.index_layout import index_key_hash
from rmqlab.codec.walk import DispatchRequest
from rmqlab.errors import ReadOnlyStore
from rmqlab.events import EventBus, EventRecorder, IndexFileRolled
from rmqlab.store.index_file import LONG_MAX
from rmqlab.store.index_service import IndexService
from rmqlab.store.store_checkpoint import StoreCheckpoint

T0 = 1_700_000_000_123


def req(topic: str, offset: int, ts: int, keys: str | None = None, uniq: str | None = None,
        sys_flag: int = 0) -> DispatchRequest:
    return DispatchRequest(topic, 0, offset, 100, 0, ts, 0, keys, uniq, sys_flag, 0, None)


class Env:
    def __init__(self, root: Path, *, slots: int = 8, items: int = 64, batch: int = 64,
                 clock: ManualClock | None = None, bus: EventBus | None = None) -> None:
        self.root = root
        self.clock = clock or ManualClock(T0)
        self.checkpoint = StoreCheckpoint(str(root / "checkpoint"))
        self.bus = bus
        self.slots, self.items, self.batch = slots, items, batch
        self.svc = self.service()

    def service(self, **kw: object) -> IndexService:
        args: dict[str, object] = dict(
            hash_slot_num=self.slots, index_num=self.items, checkpoint=self.checkpoint,
            clock=self.clock, max_msgs_num_batch=self.batch, bus=self.bus,
        )
        args.update(kw)
        return IndexService(str(self.root / "index"), **args)  # type: ignore[arg-type]

    def q(self, topic: str, key: str, max_num: int = 64, begin: int = 0,
          end: int = LONG_MAX) -> list[int]:
        return self.svc.query_offset(topic, key, max_num, begin, end).phy_offsets

    def close(self) -> None:
        self.svc.shutdown()
        self.checkpoint.shutdown()


@pytest.fixture
def env(tmp_path: Path):  # type: ignore[no-untyped-def]
    e = Env(tmp_path)
    yield e
    e.close()


# --- naming (golden #16) ------------------------------------------------------------------------


@pytest.mark.parametrize(("tz", "name"), [
    (UTC, "20231114221320123"),
    (timezone(timedelta(hours=8)), "20231115061320123"),  # Asia/Shanghai
])
def test_golden_16_file_name_from_clock(tmp_path: Path, tz: timezone, name: str) -> None:
    e = Env(tmp_path, clock=ManualClock(T0, tz=tz))
    e.svc.build_index(req("TopicTest", 0, T0, keys="k1"))
    assert [f.name for f in e.svc.index_files] == [name]
    assert os.listdir(tmp_path / "index") == [name]
    e.close()


# --- build rules ---------------------------------------------------------------------------------


def test_uniq_key_then_each_non_empty_key_token(env: Env) -> None:
    env.svc.build_index(req("T", 0, T0, keys=" a  b a ", uniq="U1"))
    f = env.svc.index_files[0]
    assert f.index_count == 5  # U1, a, b, a
    hashes = [f.read_item(n)[0] for n in range(1, 5)]
    assert hashes == [index_key_hash(k) for k in ("T#U1", "T#a", "T#b", "T#a")]
    assert env.q("T", "a") == [0, 0]  # a key repeated in one message is returned twice
    assert env.q("T", "U1") == [0]
    assert env.q("Other", "a") == []


def test_skips_already_indexed_offsets_and_rollbacks(env: Env) -> None:
    env.svc.build_index(req("T", 500, T0, keys="a"))
    env.svc.build_index(req("T", 400, T0, keys="a"))  # below end_phy_offset: re-dispatch, skipped
    env.svc.build_index(req("T", 600, T0, keys="a", sys_flag=TRANSACTION_ROLLBACK_TYPE))
    env.svc.build_index(req("T", 700, T0, keys="a", sys_flag=TRANSACTION_PREPARED_TYPE))
    env.svc.build_index(req("T", 800, T0, keys="a", sys_flag=TRANSACTION_COMMIT_TYPE))
    env.svc.build_index(req("T", 900, T0, keys=None, uniq=None))  # nothing to index
    assert env.q("T", "a") == [800, 700, 500]


@pytest.mark.parametrize("batch", [False, True])
def test_the_record_at_the_end_offset_is_indexed_again_unless_this_process_completed_it(
        tmp_path: Path, batch: bool) -> None:
    """RocketMQ indexes again the record at the last file's end_phy_offset (equal is not
    below: a crash may have cut its keys short). One this process indexed whole is skipped: it
    is dispatched again only after an interrupt, and would get duplicate items."""
    e = Env(tmp_path)

    def build(offset: int, keys: str) -> None:
        r = req("T", offset, T0, keys=keys)
        if batch:
            e.svc.build_index_batch(np.array([offset]), np.array([T0]), np.array([0]), ["T"], [keys], [None])
        else:
            e.svc.build_index(r)

    build(500, "a")
    build(500, "a")  # complete: skipped
    assert e.q("T", "a") == [500]
    e.svc.shutdown()
    e.svc = e.service()
    assert e.svc.load(True)
    build(500, "b")  # after a restart nothing says the record is complete: RocketMQ's rule
    assert e.q("T", "b") == [500]
    assert e.q("T", "a") == [500]
    e.close()


def test_disabled_index_builds_nothing(tmp_path: Path) -> None:
    e = Env(tmp_path)
    svc = e.service(message_index_enable=False)
    svc.build_index(req("T", 0, T0, keys="a"))
    assert svc.index_files == []
    assert not (tmp_path / "index").exists()
    e.close()


# --- roll ----------------------------------------------------------------------------------------


def test_roll_inherits_header_and_updates_checkpoint(tmp_path: Path) -> None:
    bus = EventBus()
    rec = EventRecorder(bus)
    e = Env(tmp_path, items=4, bus=bus)  # 3 items per file
    for i in range(3):
        e.svc.build_index(req("T", i * 100, T0 + i * 1500, keys="k"))
    first = e.svc.index_files[0]
    assert first.is_write_full()
    assert len(e.svc.index_files) == 1  # the roll happens when the next key arrives
    e.clock.advance(5)
    e.svc.build_index(req("T", 300, T0 + 7000, keys="k"))
    first, second = e.svc.index_files
    assert second.name == "20231114221320128"
    assert (second.begin_phy_offset, second.end_phy_offset) == (300, 300)
    assert second.begin_timestamp == T0 + 7000
    # the first item's diff was computed against the inherited begin (T0 + 3000): 4 s
    assert second.read_item(1)[2] == 4
    # the full file was flushed and its end time checkpointed (and the checkpoint persisted)
    assert e.checkpoint.index_msg_timestamp == first.end_timestamp == T0 + 3000
    on_disk = struct.unpack(">qqq", (tmp_path / "checkpoint").read_bytes()[:24])
    assert on_disk[2] == T0 + 3000
    assert struct.unpack(">ii", Path(first.file_name).read_bytes()[32:40]) == (1, 4)
    assert rec.of(IndexFileRolled) == [IndexFileRolled(first.name, second.name)]
    assert e.q("T", "k") == [300, 200, 100, 0]
    e.close()


def test_roll_mid_message_and_name_collision(tmp_path: Path) -> None:
    e = Env(tmp_path, items=3)  # 2 items per file; the clock never moves
    e.svc.build_index(req("T", 0, T0, keys="a b c d e"))
    names = [f.name for f in e.svc.index_files]
    assert names == ["20231114221320123", "20231114221320124", "20231114221320125"]
    assert [f.index_count for f in e.svc.index_files] == [3, 3, 2]
    # the header inherited by an empty rolled file is still offset 0 -> begin stays 0 (> 0 rule)
    assert e.svc.index_files[1].begin_phy_offset == 0
    for k in "abcde":
        assert e.q("T", k) == [0]
    e.close()


# --- query rules ---------------------------------------------------------------------------------


def test_query_caps_and_stops(tmp_path: Path) -> None:
    e = Env(tmp_path, items=4, batch=5)
    for i in range(12):  # 4 files of 3 items, one item per second
        e.svc.build_index(req("T", i * 10, T0 + i * 1000, keys="k"))
    assert len(e.svc.index_files) == 4
    newest_first = [110, 100, 90, 80, 70, 60, 50, 40, 30, 20, 10, 0]
    assert e.q("T", "k", max_num=100) == newest_first[:5]  # capped by max_msgs_num_batch
    assert e.q("T", "k", max_num=4) == newest_first[:4]
    r = e.svc.query_offset("T", "k", 3, 0, LONG_MAX)
    assert (r.index_last_update_timestamp, r.index_last_update_phyoffset) == (T0 + 11000, 110)
    # window: files are searched newest first and the search stops after the first file that
    # begins before `begin`
    assert e.q("T", "k", begin=T0 + 7000) == [110, 100, 90, 80, 70]
    # the first item of a rolled file has a diff against the inherited begin (previous end), so
    # offset 60, stored at T0+6000, is indexed at T0+7000 and falls inside this window
    assert e.q("T", "k", begin=T0 + 7000, end=T0 + 8000) == [80, 70, 60]
    r = e.svc.query_offset("T", "none", 32, 0, LONG_MAX)
    assert r.phy_offsets == []
    assert r.index_last_update_timestamp == T0 + 11000  # the newest file's end, found or not
    e.close()


def test_empty_service_query(env: Env) -> None:
    r = env.svc.query_offset("T", "k", 32, 0, LONG_MAX)
    assert (r.phy_offsets, r.index_last_update_timestamp, r.index_last_update_phyoffset) == (
        [], 0, 0)


# --- load ---------------------------------------------------------------------------------------


def _three_files(tmp_path: Path) -> Env:
    e = Env(tmp_path, items=3)
    for i in range(5):  # files: [0,1] full, [2,3] full, [4] open
        e.clock.advance(1000)
        e.svc.build_index(req("T", i * 100, T0 + i * 1000, keys="k"))
    assert [f.index_count for f in e.svc.index_files] == [3, 3, 2]
    assert e.checkpoint.index_msg_timestamp == T0 + 3000
    e.svc.shutdown()
    return e


def test_load_after_clean_exit_keeps_everything(tmp_path: Path) -> None:
    e = _three_files(tmp_path)
    svc = e.service()
    assert svc.load(True)
    assert [f.index_count for f in svc.index_files] == [3, 3, 2]
    assert svc.query_offset("T", "k", 32, 0, LONG_MAX).phy_offsets == [400, 300, 200, 100, 0]
    svc.shutdown()
    e.checkpoint.shutdown()


def test_load_after_crash_drops_files_newer_than_checkpoint(tmp_path: Path) -> None:
    e = _three_files(tmp_path)
    newest = sorted(os.listdir(tmp_path / "index"))[-1]
    (tmp_path / "index" / "notanumber").write_bytes(b"x")
    (tmp_path / "index" / "1_000").write_bytes(b"x")  # Python int() would take it, Java won't
    svc = e.service()
    assert svc.load(False)
    assert [f.index_count for f in svc.index_files] == [3, 3]
    assert not (tmp_path / "index" / newest).exists()
    reasons = {os.path.basename(f): r for f, r in svc.load_report}
    assert reasons["notanumber"] == reasons["1_000"] == "non_numeric_name"
    assert "end_timestamp" in reasons[newest]
    assert reasons[newest].endswith("destroyed")
    # recovery re-dispatches from an older position: offsets already indexed are skipped
    for i in range(2, 6):
        svc.build_index(req("T", i * 100, T0 + i * 1000, keys="k"))
    # ... but not the message *at* the kept file's end_phy_offset (offset < end is the rule):
    # RocketMQ indexes it a second time, so it comes back twice
    assert svc.query_offset("T", "k", 32, 0, LONG_MAX).phy_offsets == [
        500, 400, 300, 300, 200, 100, 0]
    svc.shutdown()
    e.checkpoint.shutdown()


def test_read_only_load_keeps_and_reports(tmp_path: Path) -> None:
    e = _three_files(tmp_path)
    e.checkpoint.shutdown()
    before = {p.name: p.read_bytes() for p in (tmp_path / "index").iterdir()}
    cp = StoreCheckpoint(str(tmp_path / "checkpoint"), read_only=True)
    svc = IndexService(str(tmp_path / "index"), hash_slot_num=8, index_num=3, checkpoint=cp,
                       clock=ManualClock(), read_only=True)
    assert svc.load(False)
    assert len(svc.index_files) == 3
    assert len(svc.load_report) == 1
    assert svc.load_report[0].reason.endswith("(kept: read-only)")
    assert svc.query_offset("T", "k", 32, 0, LONG_MAX).phy_offsets == [400, 300, 200, 100, 0]
    with pytest.raises(ReadOnlyStore):
        svc.build_index(req("T", 1000, T0, keys="k"))  # last file has room, but read-only
    svc.shutdown()
    cp.shutdown()
    assert {p.name: p.read_bytes() for p in (tmp_path / "index").iterdir()} == before


def test_missing_dir_loads_empty(tmp_path: Path) -> None:
    cp = StoreCheckpoint(str(tmp_path / "checkpoint"))
    svc = IndexService(str(tmp_path / "index"), hash_slot_num=8, index_num=3, checkpoint=cp,
                       clock=ManualClock())
    assert svc.load(False)
    assert svc.index_files == []
    cp.shutdown()


# --- maintenance ---------------------------------------------------------------------------------


def test_delete_expired_file_never_deletes_the_last(tmp_path: Path) -> None:
    e = _three_files(tmp_path)
    svc = e.service()
    svc.load(True)
    assert svc.delete_expired_file(100) == 0  # first file ends at 100: not below
    assert svc.delete_expired_file(101) == 1
    assert svc.delete_expired_file(10_000) == 1  # the last file always stays
    assert len(svc.index_files) == 1
    assert len(os.listdir(tmp_path / "index")) == 1
    svc.destroy()
    assert os.listdir(tmp_path / "index") == []
    e.checkpoint.shutdown()


def test_flush_checkpoints_the_newest_full_file(env: Env) -> None:
    env.svc.build_index(req("T", 0, T0, keys="k"))
    env.svc.flush()
    assert env.checkpoint.index_msg_timestamp == 0  # nothing full yet
    f = env.svc.index_files[0]
    assert struct.unpack(">ii", Path(f.file_name).read_bytes()[32:40]) == (1, 2)


def test_creation_failure_sets_index_error(tmp_path: Path) -> None:
    (tmp_path / "index").write_bytes(b"a file where the directory should be")
    e = Env(tmp_path)
    start = e.clock.now_ms()
    e.svc.build_index(req("T", 0, T0, keys="k"))
    assert e.svc.index_file_error
    assert e.clock.now_ms() - start == 3000  # three attempts, 1 s apart
    e.close()


# --- model ---------------------------------------------------------------------------------------

KEYS = ["Aa", "BB", "k1", "k2", "x", "shared"]
_msgs = st.lists(
    st.tuples(st.sampled_from(["T", "U"]), st.lists(st.sampled_from(KEYS), max_size=3),
              st.integers(0, 2500)),
    min_size=1, max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(msgs=_msgs, topic=st.sampled_from(["T", "U"]), key=st.sampled_from(KEYS),
       max_num=st.integers(1, 80))
def test_service_matches_newest_first_model(
    msgs: list[tuple[str, list[str], int]], topic: str, key: str, max_num: int
) -> None:
    model: list[tuple[int, int]] = []  # (key hash, phy) in put order
    with tempfile.TemporaryDirectory() as d:
        e = Env(Path(d), slots=4, items=5, batch=16)  # 4 items per file: many rolls
        off, ts = 0, T0
        for t, keys, dt in msgs:
            ts += dt
            e.svc.build_index(req(t, off, ts, keys=" ".join(keys) if keys else None))
            model.extend((index_key_hash(f"{t}#{k}"), off) for k in keys)
            off += 100
        h = index_key_hash(f"{topic}#{key}")
        expected = [p for kh, p in reversed(model) if kh == h][: min(max_num, 16)]
        assert e.q(topic, key, max_num) == expected
        e.close()
