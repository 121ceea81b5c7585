"""verify(): clean stores are clean; lag and planted faults are found with the right file and offset."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rmqlab.codec.index_layout import item_position
from rmqlab.inspect import open_snapshot
from rmqlab.inspect.checks import Finding, verify


def _problems(path: Path, **kw: Any) -> list[Finding]:
    with open_snapshot(path) as snap:
        return [f for f in verify(snap, **kw) if f.severity != "info"]


def test_clean_small_is_clean(reference_store: Callable[[str], Path]) -> None:
    assert _problems(reference_store("clean-small"), check_crc=True) == []


def test_rmqlab_written_store_is_clean(tmp_path: Path) -> None:
    from rmqlab.clock import ManualClock
    from rmqlab.config import MessageStoreConfig
    from rmqlab.store.message import Message
    from rmqlab.store.message_store import MessageStore

    root = str(tmp_path / "s")
    clock = ManualClock()
    with MessageStore.open(root, MessageStoreConfig.small(root), clock=clock, threaded=False) as store:
        for i in range(300):
            store.put_message(Message(f"T{i % 3}", b"x" * (i % 200), tags=f"tag{i % 4}", keys=[f"k{i % 17}"],
                                      queue_id=i % 2))
            clock.advance(7)
        store.step()
    assert _problems(Path(root), check_crc=True) == []


def test_crash_tail_reports_the_undispatched_records(reference_store: Callable[[str], Path],
                                                     reference_manifest: Callable[[str], dict[str, Any]]) -> None:
    want = {m["commitLogOffset"] for m in reference_manifest("crash-tail")["messages"] if not m["dispatchedBeforeEnd"]}
    with open_snapshot(reference_store("crash-tail")) as snap:
        found = list(verify(snap))
    lag = [f for f in found if f.kind == "not_in_consume_queue"]
    assert {f.offset for f in lag} == want
    assert len(lag) == 40
    assert all(f.severity == "warning" and f.file.startswith("commitlog/") for f in lag)
    assert [f.kind for f in found if f not in lag] == ["abort_present"]


def _cq_path(root: Path, topic: str = "TopicA", qid: int = 0) -> Path:
    return root / "consumequeue" / topic / str(qid) / "00000000000000000000"


def _patch(path: Path, pos: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(pos)
        f.write(data)


def test_cq_unit_pointing_at_a_wrong_offset(store_copy: Callable[[str], Path]) -> None:
    root = store_copy("clean-small")
    cq = _cq_path(root)
    units = cq.read_bytes()
    other = struct.unpack_from(">q", units, 4 * 20)[0]
    mine = struct.unpack_from(">q", units, 3 * 20)[0]
    _patch(cq, 3 * 20, struct.pack(">q", other))
    found = _problems(root)
    rel = "consumequeue/TopicA/0/00000000000000000000"
    assert any(f.kind == "cq_unit_mismatch" and f.file == rel and f.offset == 60 for f in found), found
    assert any(f.kind == "consume_queue_points_elsewhere" and f.offset == mine for f in found), found


def test_cq_unit_with_a_wrong_tags_code(store_copy: Callable[[str], Path]) -> None:
    root = store_copy("clean-small")
    cq = _cq_path(root)
    tags = struct.unpack_from(">q", cq.read_bytes(), 5 * 20 + 12)[0]
    _patch(cq, 5 * 20 + 12, struct.pack(">q", tags + 1))
    found = _problems(root)
    assert [(f.kind, f.file, f.offset) for f in found] == [
        ("cq_unit_mismatch", "consumequeue/TopicA/0/00000000000000000000", 100)]
    assert "tags code" in found[0].message


def test_index_item_pointing_at_a_wrong_message(store_copy: Callable[[str], Path]) -> None:
    root = store_copy("clean-small")
    index = sorted((root / "index").iterdir())[0]
    pos = item_position(64, 1)
    phy = struct.unpack_from(">q", index.read_bytes(), pos + 4)[0]
    with open_snapshot(root) as snap:
        msgs = snap.messages()
    other = int(msgs.commit_log_offset[msgs.commit_log_offset != phy].iloc[-1])
    _patch(index, pos + 4, struct.pack(">q", other))
    found = _problems(root)
    assert [(f.kind, f.file, f.offset) for f in found] == [("index_item_wrong_key", f"index/{index.name}", pos)]
    _patch(index, pos + 4, struct.pack(">q", other + 1))
    assert [(f.kind, f.offset) for f in _problems(root)] == [("index_item_no_record", pos)]


def test_flipped_body_byte_found_with_crc(store_copy: Callable[[str], Path]) -> None:
    root = store_copy("clean-small")
    with open_snapshot(root) as snap:
        msgs = snap.messages()
    row = msgs[msgs.body_length > 10].iloc[20]
    off, sys_flag = int(row.commit_log_offset), int(row.sys_flag)
    body = off + 72 + (20 if sys_flag & 0x10 else 8) + (20 if sys_flag & 0x20 else 8)
    name = f"{off - off % 65536:020d}"
    path = root / "commitlog" / name
    pos = body - (off - off % 65536) + 3
    _patch(path, pos, bytes([path.read_bytes()[pos] ^ 0xFF]))
    assert _problems(root) == []
    found = _problems(root, check_crc=True)
    assert [(f.kind, f.file, f.offset) for f in found] == [("commitlog_crc_mismatch", f"commitlog/{name}", off)]


def test_garbage_tail(store_copy: Callable[[str], Path]) -> None:
    root = store_copy("clean-small")
    with open_snapshot(root) as snap:
        end = snap.max_offset
    name = f"{end - end % 65536:020d}"
    _patch(root / "commitlog" / name, end % 65536, b"\x00\x00\x00\x40\x12\x34\x56\x78garbage!")
    found = _problems(root)
    assert [(f.kind, f.file, f.offset) for f in found] == [("commitlog_bad_magic", f"commitlog/{name}", end)]


def test_a_file_named_past_long_max_is_a_stray_file(store_copy: Callable[[str], Path]) -> None:
    """Found by fuzzing: ``inspect`` ended in an OverflowError on such a name (a 20-digit name,
    but no Java long). It is reported like any other stray file, and the file table still builds."""
    root = store_copy("clean-small")
    stray = root / "consumequeue" / "TopicA" / "0" / "99999999999999999999"
    stray.write_bytes(b"\x01" * 100)
    found = _problems(root)
    assert [(f.kind, f.file) for f in found] == [("unexpected_file", "consumequeue/TopicA/0/99999999999999999999")]
    assert "Long.MAX_VALUE" in found[0].message
    with open_snapshot(root) as snap:
        files = snap.files()
    assert "consumequeue/TopicA/0/99999999999999999999" in set(files["path"])


def test_records_in_a_file_ending_past_long_max_are_not_read(store_copy: Callable[[str], Path]) -> None:
    """A real CommitLog file copied under a name near Long.MAX_VALUE (name + file size past it):
    its record offsets overflowed (numpy wrapped them below zero, so verify reported a stale record
    at every one). Now one finding names the file and says why, the walk stops at its start and
    the rest of the store is checked as before: the real last file is still the last one."""
    import json

    from click.testing import CliRunner

    from rmqlab.cli import main
    from tests.inspect.conftest import full_inspection

    root = store_copy("clean-small")
    name = "09223372036854774784"  # 2**63 - 1024: records from byte 1024 on would be past a long
    (root / "commitlog" / name).write_bytes((root / "commitlog" / "00000000000000065536").read_bytes())
    base = int(name)
    found = _problems(root)
    assert [(f.kind, f.file, f.offset) for f in found] == [
        ("file_name_misaligned", f"commitlog/{name}", base), ("file_gap", f"commitlog/{name}", base),
        ("commitlog_offset_overflow", f"commitlog/{name}", base)]
    assert found[2].message == (
        f"file name {base} + file size 65536 = {base + 65536} is past Long.MAX_VALUE ({2**63 - 1}): its offsets "
        "overflow a signed 64-bit long, RocketMQ could never have written this file; the walk of this file stops here")
    with open_snapshot(root) as snap:
        assert snap.max_offset == 583309  # the real log's end, as without the file
        damage: list[Any] = []
        msgs = snap.messages(damage=damage)
        assert [(d.file, d.offset, d.reason) for d in damage] == [(name, base, "offset_overflow")]
        assert name not in set(msgs.file)
        offsets = np.concatenate([c.offset for _, c in snap.scan()])
        assert offsets.min() >= 0
        assert offsets.max() < 583309
        assert int(snap.topics().messages.sum()) == len(msgs) == 600  # clean-small's, none counted twice
    r = CliRunner().invoke(main, ["verify", str(root), "--json"])
    assert r.exit_code == 1
    assert [f["kind"] for f in json.loads(r.stdout)["findings"]] == [f.kind for f in found]
    full_inspection(root)  # every frame and command: no traceback


def test_torn_tail_and_file_gap(store_copy: Callable[[str], Path]) -> None:
    root = store_copy("clean-small")
    with open_snapshot(root) as snap:
        last = snap.messages().iloc[-1]
    off = int(last.commit_log_offset)
    name = f"{off - off % 65536:020d}"
    # a torn record: TOTALSIZE and magic of the last record kept, its end beyond the file
    _patch(root / "commitlog" / name, off % 65536, struct.pack(">i", 65536))
    (root / "commitlog" / "00000000000000196608").unlink()
    found = _problems(root)
    kinds = {(f.kind, f.file, f.offset) for f in found}
    assert ("commitlog_truncated", f"commitlog/{name}", off) in kinds or \
        ("commitlog_size_out_of_range", f"commitlog/{name}", off) in kinds or \
        any(f.offset == off and f.kind.startswith("commitlog_") for f in found), found
    assert any(f.kind == "file_gap" and f.file == "commitlog/00000000000000262144" for f in found), found


@pytest.mark.parametrize("rel", ["consumequeue/TopicA/1/00000000000000000000", "commitlog/00000000000000065536"])
def test_a_file_grown_by_damage_is_the_only_one_reported(store_copy: Callable[[str], Path], rel: str) -> None:
    # the file size is what most files agree on: bytes appended to one file used to make it the
    # inferred size, and every other file of the store was then reported the wrong size
    root = store_copy("clean-small")
    size = (root / rel).stat().st_size
    with open(root / rel, "ab") as f:
        f.write(b"\x00\x00\x00\x01" * 1000)
    with open_snapshot(root) as snap:
        assert (snap.commit_log_file_size, snap.consume_queue_file_size) == (65536, 1280)
    found = _problems(root)
    start = int(rel.rsplit("/", 1)[1])  # a file-level finding is at the file's first offset
    assert [(f.kind, f.file, f.offset) for f in found] == [("file_size_mismatch", rel, start)], found
    assert found[0].message.endswith(f"file is {size + 4000} bytes, expected {size}")


@pytest.mark.parametrize("name", ["clean-small", "crash-tail"])
def test_verify_streams(name: str, reference_store: Callable[[str], Path]) -> None:
    seen: list[int] = []
    with open_snapshot(reference_store(name)) as snap:
        it = verify(snap, progress=seen.append)
        next(it, None)  # a generator: nothing is computed before it is iterated
        list(it)
        assert sum(seen) == sum(mf.mapped_length for mf in snap.commit_log_files)


def test_verify_from_the_package_is_the_function_whatever_was_imported_first() -> None:
    # The checks lived in a submodule named ``verify``: once something (the CLI, the Spark audit)
    # had imported it, ``from rmqlab.inspect import verify`` returned that module.
    import subprocess
    import sys

    code = ("import rmqlab.inspect.checks, rmqlab.spark.jobs, rmqlab.cli\n"
            "from rmqlab.inspect import Finding, verify\n"
            "assert callable(verify) and verify.__name__ == 'verify', verify\n"
            "assert isinstance(Finding, type)\n")
    subprocess.run([sys.executable, "-c", code], check=True)
    import importlib.util

    import rmqlab.inspect

    clashes = [n for n in rmqlab.inspect.__all__ if importlib.util.find_spec(f"rmqlab.inspect.{n}") is not None]
    assert clashes == []  # a submodule named like an export replaces it once imported


def _last_index(root: Path) -> tuple[Path, int, list[tuple[int, int, int]]]:
    """The last index file of a store, its index_count and its items (key hash, phy, prev) by number."""
    index = sorted((root / "index").iterdir())[-1]
    data = index.read_bytes()
    count = struct.unpack_from(">i", data, 36)[0]
    items = [struct.unpack_from(">iqxxxxi", data, item_position(64, n)) for n in range(count)]
    return index, count, items


def test_index_item_linking_to_itself_cuts_its_chain(store_copy: Callable[[str], Path]) -> None:
    """What an indexing interrupted between a slot update and the count left once the next
    item was written over the one the slot named: that item's prev is itself."""
    root = store_copy("clean-small")
    index, count, items = _last_index(root)
    n = max(i for i in range(1, count) if items[i][2] > 0 and items[items[i][2]][2] > 0)  # 2+ older in its chain
    _patch(index, item_position(64, n) + 16, struct.pack(">i", n))
    found = _problems(root)
    assert [(f.kind, f.file) for f in found] == [("index_prev_bad", f"index/{index.name}"),
                                                 ("index_items_unreachable", f"index/{index.name}")]
    assert found[0].offset == item_position(64, n)
    assert f"item {n} links to {n}" in found[0].message
    older, chain = items[n][2], []
    while older > 0:
        chain.append(older)
        older = items[older][2]
    assert found[1].offset == item_position(64, min(chain))
    assert found[1].message.startswith(f"{len(chain)} item(s) no slot chain reaches")


def test_index_slot_naming_an_item_past_the_count(store_copy: Callable[[str], Path]) -> None:
    root = store_copy("clean-small")
    index, count, items = _last_index(root)
    slot = items[count - 1][0] % 64  # the newest item's slot: its whole chain hangs on it
    _patch(index, 40 + slot * 4, struct.pack(">i", count))
    found = _problems(root)
    assert [(f.kind, f.offset) for f in found][:1] == [("index_slot_bad", 40 + slot * 4)]
    assert [f.kind for f in found][1:] == ["index_items_unreachable"]
    assert f"slot {slot} names item {count} of {count - 1}" in found[0].message


def test_an_unreachable_item_whose_key_is_indexed_again_is_info(store_copy: Callable[[str], Path]) -> None:
    """An indexing interrupted after the count moved and before the slot: rmqlab indexes the
    record again, so the orphan item costs a slot of the file and nothing else."""
    root = store_copy("clean-small")
    index, count, items = _last_index(root)
    key_hash, phy, _prev = items[count - 1]
    _patch(index, item_position(64, count), struct.pack(">iqii", key_hash, phy, 0, 0))
    _patch(index, 36, struct.pack(">i", count + 1))
    assert _problems(root) == []
    with open_snapshot(root) as snap:
        info = [f for f in verify(snap) if f.kind == "index_items_unreachable"]
    assert [(f.severity, f.offset) for f in info] == [("info", item_position(64, count))]


# ------------------------------------------------------------------ multi-dispatch (LMQ) stores
@pytest.fixture
def lmq_store(tmp_path: Path) -> tuple[Path, dict[tuple[str, int], list[int]]]:
    from tests.multi_dispatch_store import write_multi_dispatch_store

    root = tmp_path / "lmq"
    return root, write_multi_dispatch_store(root)


def test_multi_dispatch_units_are_not_damage(lmq_store: tuple[Path, dict]) -> None:
    """A broker with enableMultiDispatch/enableLmq leaves units that point at records of another
    topic and queue offset; they are what the records ask for, so verify finds nothing."""
    root, units = lmq_store
    assert {k for k, v in units.items() if v} == {("%LMQ%room-1", 0), ("%LMQ%room-2", 0), ("Fanout", 0),
                                                  ("Fanout", 1)}
    assert _problems(root, check_crc=True) == []
    with open_snapshot(root) as snap:
        assert next(iter(snap.scan()))[1].multi_dispatch is None  # only when asked for
        _mf, cols = next(iter(snap.scan(with_multi_dispatch=True)))
        assert cols.multi_dispatch is not None
        assert cols.multi_dispatch[1] == (("%LMQ%room-1", 1), ("%LMQ%room-2", 0))
        assert cols.multi_dispatch[3] == ()


def test_plain_stores_have_no_multi_dispatch_column(reference_store: Callable[[str], Path]) -> None:
    with open_snapshot(reference_store("clean-small")) as snap:
        assert all(c.multi_dispatch is None for _mf, c in snap.scan(with_multi_dispatch=True))


def _unit(path: Path, i: int) -> bytes:
    return path.read_bytes()[i * 20 : (i + 1) * 20]


def test_multi_dispatch_units_in_the_wrong_place_are_found(lmq_store: tuple[Path, dict]) -> None:
    from rmqlab.testing import damage

    root, _units = lmq_store
    room1 = root / "consumequeue" / "%LMQ%room-1" / "0" / f"{0:020d}"
    u0, u1 = _unit(room1, 0), _unit(room1, 1)
    damage.set_bytes(room1, 0, u1)  # two units swapped: each at the other's queue offset
    damage.set_bytes(room1, 20, u0)
    # a unit pointing at a record that names no multi-dispatch queue (message 3 of Chat/0)
    chat = root / "consumequeue" / "Chat" / "0" / f"{0:020d}"
    room2 = root / "consumequeue" / "%LMQ%room-2" / "0" / f"{0:020d}"
    damage.set_bytes(room2, 0, _unit(chat, 3))
    # a Fanout unit in the other queue id: Fanout is not an LMQ name, so only the record's own id
    fan0 = root / "consumequeue" / "Fanout" / "0" / f"{0:020d}"
    fan1 = root / "consumequeue" / "Fanout" / "1" / f"{0:020d}"
    damage.set_bytes(fan1, 0, _unit(fan0, 0))
    found = [(f.kind, f.file, f.offset) for f in _problems(root)]
    assert sorted(found) == sorted([
        ("cq_not_monotonic", "consumequeue/%LMQ%room-1/0/00000000000000000000", 0),
        ("cq_not_monotonic", "consumequeue/%LMQ%room-2/0/00000000000000000000", 0),
        ("cq_unit_mismatch", "consumequeue/%LMQ%room-1/0/00000000000000000000", 0),
        ("cq_unit_mismatch", "consumequeue/%LMQ%room-1/0/00000000000000000000", 20),
        ("cq_unit_mismatch", "consumequeue/%LMQ%room-2/0/00000000000000000000", 0),
        ("cq_unit_mismatch", "consumequeue/Fanout/1/00000000000000000000", 0),
    ])
