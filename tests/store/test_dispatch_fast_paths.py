"""The per-record fast paths of reput's small rounds against their exact paths: the index
(``IndexService._build_one``: cached key hashes, one ``IndexFile.put_hashes`` per record) and
the consume queue (``ConsumeQueue.put_message_position_info``'s common case) must leave the
same bytes, counters and checkpoint as ``_build_one_exact`` / ``_put_message_position_info_exact``."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from rmqlab.clock import ManualClock
from rmqlab.codec.flags import TRANSACTION_COMMIT_TYPE, TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE
from rmqlab.store import index_service as index_service_module
from rmqlab.store.consume_queue import ConsumeQueue
from rmqlab.store.index_service import IndexService
from rmqlab.store.store_checkpoint import StoreCheckpoint

T0 = 1_700_000_000_123
_PREFIX = "7F0000011A2B18B4AAC2"  # a UNIQ_KEY's fixed part (ip + pid + class loader hash)

_key_token = st.sampled_from(["k", "t0", "t1", "order-1", "é", "键", "\U0001F600x", "A" * 30, "", "k k"])
_keys = st.one_of(st.none(), st.lists(_key_token, max_size=4).map(" ".join))
_uniq = st.one_of(
    st.none(),
    st.just(""),
    st.text(alphabet="AB é", max_size=14),
    st.integers(0, 2**48).map(lambda n: f"{_PREFIX}{n:012X}"),
    st.integers(0, 2**16).map(lambda n: f"Z{_PREFIX}{n:012X}"),
    # one producer: same time digits for a few records, counter digits running
    st.tuples(st.integers(0, 2), st.integers(0xFFFD, 0x10002)).map(lambda t: f"{_PREFIX}{t[0]:08X}{t[1] & 0xFFFF:04X}"),
    st.integers(0, 3).map(lambda n: f"{_PREFIX}0000000{n}ZZZ\x7f"),
    st.integers(0, 999).map(lambda n: f"{_PREFIX}{n:011d}é"),  # non-ASCII suffix
)
_record = st.tuples(
    st.integers(-300, 5000),  # offset step (negative: below the file's end, skipped)
    st.sampled_from([0, 0, 0, TRANSACTION_PREPARED_TYPE, TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE]),
    st.sampled_from(["TopicA", "TopicB", "主题"]),
    st.sampled_from([0, 1, 999, 1000, 1500, 3_000_000, -5000]),  # store timestamp step
    _uniq,
    _keys,
)


def _index_files(root: Path) -> dict[str, bytes]:
    out = {p.name: p.read_bytes() for p in sorted((root / "index").glob("*"))} if (root / "index").exists() else {}
    out["checkpoint"] = (root / "checkpoint").read_bytes()
    return out


def _build(root: Path, records: list[tuple[int, int, str, int, str | None, str | None]], slots: int, items: int,
           fast: bool) -> dict[str, bytes]:
    clock = ManualClock(T0)
    root.mkdir(parents=True)
    checkpoint = StoreCheckpoint(str(root / "checkpoint"))
    svc = IndexService(str(root / "index"), hash_slot_num=slots, index_num=items, checkpoint=checkpoint,
                       clock=clock)
    build = svc._build_one if fast else svc._build_one_exact
    offset, ts = 0, T0
    try:
        for i, (step, sys_flag, topic, dt, uniq, keys) in enumerate(records):
            offset = max(0, offset + step)
            ts += dt
            build(offset, sys_flag, topic, ts, uniq, keys)
            if i % 7 == 0:
                clock.advance(1000)
        svc.flush()
        checkpoint.flush()
    finally:
        svc.shutdown()
        checkpoint.shutdown()
    return _index_files(root)


@settings(max_examples=150, deadline=None)
@given(records=st.lists(_record, max_size=60), slots=st.sampled_from([1, 2, 3, 7, 64]),
       items=st.sampled_from([2, 3, 5, 17, 400]), cache_max=st.sampled_from([1, 3, 4096]))
def test_build_one_fast_path_equals_exact(records: list[tuple[int, int, str, int, str | None, str | None]],
                                          slots: int, items: int, cache_max: int) -> None:
    saved = index_service_module._HASH_CACHE_MAX
    index_service_module._HASH_CACHE_MAX = cache_max  # tiny caches: cleared all the time
    try:
        with tempfile.TemporaryDirectory() as d:
            fast = _build(Path(d) / "fast", records, slots, items, True)
            exact = _build(Path(d) / "exact", records, slots, items, False)
    finally:
        index_service_module._HASH_CACHE_MAX = saved
    assert fast == exact


_unit = st.tuples(
    st.integers(-3, 400),  # commit log offset step (<= 0: a duplicate or overlap)
    st.integers(1, 300),  # size
    st.integers(-(2**40), 2**40),  # tags code
    st.sampled_from([1, 1, 1, 1, 0, -1, 2, 5]),  # queue offset step (0/-1: repeat, 2/5: gap)
)


def _cq_run(root: Path, first_offset: int, units: list[tuple[int, int, int, int]], file_units: int,
            fast: bool) -> tuple[dict[str, bytes], list[bool], int, int, list[object], int]:
    cq = ConsumeQueue("TopicT", 0, str(root), file_units * 20)
    put = cq.put_message_position_info if fast else cq._put_message_position_info_exact
    results = []
    offset, cq_offset = 1000, first_offset
    try:
        for step, size, tags, qstep in units:
            offset = max(0, offset + step)
            results.append(put(offset, size, tags, cq_offset))
            cq_offset = max(0, cq_offset + qstep)
            offset += size
        files = {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
        return (files, results, cq.duplicates_skipped, cq.max_physic_offset, list(cq.order_warnings),
                cq.min_logic_offset)
    finally:
        cq.shutdown()


@settings(max_examples=150, deadline=None)
@given(first=st.sampled_from([0, 0, 1, 3, 7]), units=st.lists(_unit, max_size=50),
       file_units=st.sampled_from([1, 2, 3, 8, 100]))
def test_cq_single_put_fast_path_equals_exact(first: int, units: list[tuple[int, int, int, int]],
                                              file_units: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        fast = _cq_run(Path(d) / "fast", first, units, file_units, True)
        exact = _cq_run(Path(d) / "exact", first, units, file_units, False)
    assert fast == exact
