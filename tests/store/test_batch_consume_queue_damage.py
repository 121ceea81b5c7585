"""BatchConsumeQueue recovery over random damage: the 3-file walk read from the bytes by a plain
loop, a read-only open that changes no byte, and a writable open, all give the same answers."""

from __future__ import annotations

import os
import struct
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqlab.codec.batch_consume_queue_unit import is_valid_unit, pack_unit, unpack_unit
from rmqlab.store.batch_consume_queue import BatchConsumeQueue
from tests.store.test_batch_consume_queue import FILE, PER_FILE, UNIT, make_units, tree_hash

DAMAGE = st.tuples(
    st.integers(0, 5),  # file (modulo the count)
    st.integers(0, PER_FILE - 1),  # unit
    st.sampled_from(["zero", "neg_size", "batch0", "neg_base", "neg_offset", "bytes", "valid"]),
    st.binary(min_size=UNIT, max_size=UNIT),
)


def damage_bytes(kind: str, raw: bytes, noise: bytes) -> bytes:
    u = list(unpack_unit(raw, 0))
    if kind == "zero":
        return bytes(UNIT)
    if kind == "bytes":
        return noise
    if kind == "valid":  # another valid-looking unit: recovery cannot tell
        return pack_unit(u[0] + 1, u[1], 7, u[3], u[4] + 1000, u[5])
    field = {"neg_size": 1, "batch0": 5, "neg_base": 4, "neg_offset": 0}[kind]
    u[field] = 0 if kind == "batch0" else -5
    return struct.pack(">qiqqqhii", *u)


def expected(files: list[bytes]) -> tuple[list[tuple], int, int, int]:
    """(visible units, min, max, max physic offset) by RocketMQ's recover, from the bytes."""
    n = len(files)
    units_of = [[unpack_unit(f, i * UNIT) for i in range(PER_FILE)] for f in files]
    start = max(0, n - 3)
    keep = [PER_FILE] * start
    max_phy = -1
    for k in range(start, n):
        count = 0
        for u in units_of[k]:
            if not is_valid_unit(u[0], u[1], u[4], u[5]):
                break
            count += 1
            max_phy = u[0]
        keep.append(count)
        if count < PER_FILE:
            break
    if max_phy == -1 and start > 0:  # rmqlab: from the last trusted file (RocketMQ keeps -1)
        max_phy = units_of[start - 1][-1][0]
    visible = [u for k, c in enumerate(keep) for u in units_of[k][:c]]
    first = units_of[0][:keep[0]]
    mn = first[0][4] if first else -1
    last = next((units_of[k][c - 1] for k, c in list(enumerate(keep))[-2:][::-1] if c), None)
    if keep[-1] == 0 and len(keep) < 2:
        last = None
    mx = last[4] + last[5] if last else 0
    return visible, mn, mx, max_phy


def answers(q: BatchConsumeQueue) -> tuple:
    return ([tuple(int(x) for x in r) for r in q.units().tolist()], q.get_min_offset_in_queue(),
            q.get_max_offset_in_queue(), q.get_max_physic_offset())


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(n_units=st.integers(1, 6 * PER_FILE), damage=st.lists(DAMAGE, max_size=3))
def test_recovery_over_random_damage(tmp_path_factory, n_units, damage):
    root = str(tmp_path_factory.mktemp("bcq") / "batchconsumequeue")
    q = BatchConsumeQueue("TopicB", 0, root, FILE)
    for u in make_units(n_units):
        assert q.put_batch_message_position_info(*u.args())
    q.flush(0)
    q.shutdown()
    names = sorted(os.listdir(q.queue_dir))
    for f, i, kind, noise in damage:
        path = Path(q.queue_dir, names[f % len(names)])
        data = bytearray(path.read_bytes())
        data[i * UNIT : (i + 1) * UNIT] = damage_bytes(kind, bytes(data[i * UNIT : (i + 1) * UNIT]), noise)
        path.write_bytes(bytes(data))
    files = [Path(q.queue_dir, n).read_bytes() for n in names]
    expect = expected(files)

    before = tree_hash(root)
    ro = BatchConsumeQueue("TopicB", 0, root, FILE, read_only=True)
    assert ro.load()
    ro_steps = ro.recover()
    assert answers(ro) == expect
    # damaged bases can be anything (up to 2**63): ask around each unit's base, not every offset
    probes = sorted({-1, expect[2], expect[2] - 1} | {u[4] + d for u in expect[0] for d in (-1, 0, 1)})
    lookups = [(x, ro.find_unit(x), ro.get(x)) for x in probes]
    by_time = [ro.get_offset_in_queue_by_time(t) for t in (0, 1_700_000_000_010, 1 << 60)]
    ro.shutdown()
    assert tree_hash(root) == before

    rw = BatchConsumeQueue("TopicB", 0, root, FILE)
    assert rw.load()
    rw_steps = rw.recover()
    assert answers(rw) == expect
    assert [(x, rw.find_unit(x), rw.get(x)) for x in probes] == lookups
    assert [rw.get_offset_in_queue_by_time(t) for t in (0, 1_700_000_000_010, 1 << 60)] == by_time
    assert [(s.file, s.offset) for s in rw_steps] == [(s.file, s.offset) for s in ro_steps]
    kept_files = len(rw.mapped_file_queue.mapped_files)
    assert sorted(os.listdir(rw.queue_dir)) == names[:kept_files]
