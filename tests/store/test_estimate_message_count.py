"""``MessageStore.estimate_message_count``: RocketMQ 5.x ``DefaultMessageStore.estimateMessageCount``
over real files (CQ files of 10 units and BatchCQ files of 8 units, so both roll).

Exact answers are checked against counts made another way (a ``get_message`` walk, or the units
read with ``units()``); sampled answers against the Java formula recomputed here from the units;
the Java tests' own numbers (``ConsumeQueueTest``, ``BatchConsumeMessageTest``) against stores
built the way those tests build theirs.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rmqlab.clock import ManualClock
from rmqlab.codec.flags import INNER_BATCH_FLAG
from rmqlab.config import MessageStoreConfig
from rmqlab.errors import RmqlabError
from rmqlab.store.message import Message
from rmqlab.store.message_filter import TagFilter
from rmqlab.store.message_store import MessageStore

V5 = "5.3.3"
CQ_FILE = 10 * 20  # 10 units a ConsumeQueue file
BCQ_FILE = 8 * 46  # 8 units a BatchConsumeQueue file
TAGS = ("TagA", "TagB", "TagC")
LONG_MAX = 2**63 - 1


def _cfg(root: Path, version: str = V5, **kw: object) -> MessageStoreConfig:
    return MessageStoreConfig.small(str(root), rocketmq_version=version, mapped_file_size_consume_queue=CQ_FILE,
                                    mapper_file_size_batch_consume_queue=BCQ_FILE, **kw)


def _open(root: Path, version: str = V5, **kw: object) -> MessageStore:
    return MessageStore.open(root, _cfg(root, version, **kw), threaded=False, clock=ManualClock())


def _put_tags(store: MessageStore, topic: str, tags: list[str | None], body: bytes = b"x") -> None:
    for t in tags:
        assert store.put_message(Message(topic, body, tags=t, queue_id=0)).ok
    store.step()


def _put_batches(store: MessageStore, topic: str, batches: list[tuple[str, int]]) -> None:
    """One inner-batch record per ``(tag, size)``, as RocketMQ's BatchConsumeMessageTest puts them."""
    for tag, n in batches:
        msg = Message(topic, b"y", tags=tag, sys_flag=INNER_BATCH_FLAG, properties={"INNER_NUM": str(n)})
        assert store.put_message(msg).ok
    store.step()


def _walk_count(store: MessageStore, topic: str, lo: int, hi: int, flt: TagFilter) -> int:
    """Messages of queue offsets [lo, hi) that ``get_message`` returns through ``flt``."""
    count, offset = 0, lo
    while offset < hi:
        with store.get_message("g", topic, 0, offset, 32, flt) as got:
            count += sum(1 for m in got.messages if lo <= m.decode().queue_offset < hi)
            if got.next_begin_offset <= offset:
                break
            offset = got.next_begin_offset
    return count


def _cq_codes(store: MessageStore, topic: str) -> list[int]:
    cq = store.consume_queue_store.find_consume_queue(topic, 0, create=False)
    assert cq is not None
    return cq.units()["tags_code"].tolist()


def _java_reference(codes: list[int], weights: list[int], lo: int, hi: int, span: int, flt: TagFilter,
                    max_scan: int, threshold: int) -> int:
    """The Java loop re-derived for units [lo, hi) all in written files: exact, or once
    ``max_scan`` units are scanned / more than ``threshold`` units matched,
    ``(long) (match * span * 1.0 / raw)`` (floor: small positive values)."""
    match = raw = matched = 0
    for scanned, (code, weight) in enumerate(zip(codes[lo:hi], weights[lo:hi], strict=True), start=1):
        if flt.is_matched_by_consume_queue(code):
            match += weight
            matched += 1
        raw += weight
        if scanned >= max_scan or matched > threshold:
            return match * span // raw
    return match


# ------------------------------------------------------------------------------------------
# arguments


def test_no_filter_is_to_minus_from_and_arguments_are_clamped(tmp_path: Path) -> None:
    with _open(tmp_path / "s") as store:
        _put_tags(store, "T", ["TagA"] * 5)
        est = store.estimate_message_count
        assert est("T", 0, 0, 5) == 5
        assert est("T", 0, 2, 1000) == 998  # no filter: `to` past the max offset is not clamped
        assert est("Unknown", 3, 0, 7) == 7
        assert est("T", 0, -10, 4) == 4  # from < 0 becomes 0
        assert est("T", 0, 4, 4) == 0
        assert est("T", 0, 5, 2) == 0
        assert est("T", 0, 5, 2, TagFilter("TagA")) == 0
        assert est("T", 0, -3, 0, TagFilter("TagA")) == 0
        assert est("T", 0, -LONG_MAX - 1, LONG_MAX) == LONG_MAX


def test_bad_offsets_and_a_closed_store_are_refused(tmp_path: Path) -> None:
    store = _open(tmp_path / "s")
    with pytest.raises(TypeError, match="from_offset must be an int"):
        store.estimate_message_count("T", 0, "0", 5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="to_offset must be an int"):
        store.estimate_message_count("T", 0, 0, 5.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="from_offset"):
        store.estimate_message_count("T", 0, True, 5)
    with pytest.raises(ValueError, match="Java long"):
        store.estimate_message_count("T", 0, 0, 2**63)
    store.shutdown()
    with pytest.raises(RmqlabError, match="shut down"):
        store.estimate_message_count("T", 0, 0, 5, TagFilter("TagA"))


def test_a_queue_without_units_answers_to_minus_from(tmp_path: Path) -> None:
    """RocketMQ makes an empty queue on the lookup; its estimate is -1 (no file in the range),
    which the facade turns into ``to - from``. Invalid names answer as absent queues, as in
    ``get_message``/``get_max_offset_in_queue``."""
    with _open(tmp_path / "s") as store:
        store.create_topic("Empty", 1)
        store.create_topic("Batched", 1, queue_type="BatchCQ")
        f = TagFilter("TagA")
        for topic, qid in [("Empty", 0), ("Never", 0), ("Batched", 0), ("../x", 0), ("Empty", -1)]:
            assert store.estimate_message_count(topic, qid, 3, 10, f) == 7
        store.get_message("g", "Empty", 0, 0, 1).release()  # a queue object without files: the same
        assert store.estimate_message_count("Empty", 0, 3, 10, f) == 7


# ------------------------------------------------------------------------------------------
# ConsumeQueue


def _mixed_tags(n: int, seed: int) -> list[str | None]:
    rnd = random.Random(seed)
    return [rnd.choice([*TAGS, None]) for _ in range(n)]


@pytest.mark.parametrize("version", ["4.9.8", V5])
def test_tag_filter_on_a_mixed_queue_is_exact_under_the_thresholds(tmp_path: Path, version: str) -> None:
    tags = _mixed_tags(95, seed=7)  # 9 full CQ files and 5 units in the 10th
    with _open(tmp_path / "s", version) as store:
        _put_tags(store, "T", tags)
        assert store.get_max_offset_in_queue("T", 0) == 95
        for expr in ("TagA", "TagB || TagC", "*", "TagZ"):
            f = TagFilter(expr)
            for lo, hi in [(0, 95), (0, 10), (3, 7), (9, 31), (10, 20), (47, 95), (94, 95), (0, 1)]:
                want = _walk_count(store, "T", lo, hi, f)
                assert store.estimate_message_count("T", 0, lo, hi, f) == want, (expr, lo, hi)


def test_a_range_past_the_last_unit_skips_the_partly_written_file(tmp_path: Path) -> None:
    """``to`` is not clamped: the last file's window reaches past its read position, so
    ``selectMappedBuffer`` gives nothing and that file counts 0; past every file, -1 -> to - from."""
    with _open(tmp_path / "s") as store:
        _put_tags(store, "T", ["TagA"] * 95)
        f = TagFilter("TagA")
        assert store.estimate_message_count("T", 0, 92, 100, f) == 0
        assert store.estimate_message_count("T", 0, 85, 100, f) == 5  # units 85..89 of the full 9th file
        assert store.estimate_message_count("T", 0, 0, 1000, f) == 90
        assert store.estimate_message_count("T", 0, 100, 120, f) == 20  # no file overlaps: to - from


def test_sampling_follows_the_java_formula(tmp_path: Path) -> None:
    tags = _mixed_tags(300, seed=11)
    with _open(tmp_path / "s", max_consume_queue_scan=20, sample_count_threshold=7) as store:
        _put_tags(store, "T", tags)
        codes = _cq_codes(store, "T")
        ones = [1] * len(codes)
        rnd = random.Random(3)
        cases = [(0, 300), (100, 150), (5, 25), (5, 24), (290, 300), (13, 250)]
        cases += [tuple(sorted(rnd.sample(range(301), 2))) for _ in range(40)]
        sampled = 0
        for expr in ("TagA", "TagA || TagB", "*"):
            f = TagFilter(expr)
            for lo, hi in cases:
                want = _java_reference(codes, ones, lo, hi, hi - lo, f, 20, 7)
                assert store.estimate_message_count("T", 0, lo, hi, f) == want, (expr, lo, hi)
                sampled += want != _walk_count(store, "T", lo, hi, f)
        assert sampled > 10  # the cases do leave the exact path


def test_sampling_rounds_toward_zero(tmp_path: Path) -> None:
    """8 of the first 20 units match, so [0, 103) gives 8 * 103 / 20 = 41.2 -> 41, and [0, 107)
    gives 42.8 -> 42 (truncated, not rounded)."""
    tags = (["TagA", "TagB", "TagA", "TagB", "TagB"] * 30)[:150]  # 2 of every 5
    with _open(tmp_path / "s", max_consume_queue_scan=20, sample_count_threshold=1000) as store:
        _put_tags(store, "T", tags)
        f = TagFilter("TagA")
        assert store.estimate_message_count("T", 0, 0, 103, f) == 41
        assert store.estimate_message_count("T", 0, 0, 107, f) == 42
        assert store.estimate_message_count("T", 0, 0, 20, f) == 8  # stops on its last unit: exact


def test_from_below_the_min_offset_moves_the_window(tmp_path: Path) -> None:
    """After cleanup deletes the first CommitLog file and the CQ files wholly before it, a window
    starting below the min offset starts at the min offset and keeps its length."""
    clock = ManualClock()
    root = tmp_path / "s"
    cfg = _cfg(root)
    with MessageStore.open(root, cfg, threaded=False, clock=clock) as store:
        tags = _mixed_tags(150, seed=5)
        for t in tags:  # ~1 KB records: ~60 a 64 KiB CommitLog file
            assert store.put_message(Message("T", b"b" * 900, tags=t, queue_id=0)).ok
        store.step()
        first = store.commit_log.mapped_file_queue.mapped_files[0]
        clock.advance(100 * 3600 * 1000)
        os.utime(first.file_name, ns=(0, 0))
        store.execute_delete_files_manually()
        store.step()
        store.step()
        lo = store.get_min_offset_in_queue("T", 0)
        assert lo > 0
        f = TagFilter("TagA || TagC")
        for start, length in [(0, 25), (lo - 1, 7), (0, 150)]:
            shifted = _walk_count(store, "T", lo, min(lo + length, 150), f)
            assert store.estimate_message_count("T", 0, start, start + length, f) == shifted, (start, length)
        # a window wholly below the min offset is moved too (it is not answered 0)
        assert store.estimate_message_count("T", 0, 0, 3, f) == _walk_count(store, "T", lo, lo + 3, f)


def test_java_consume_queue_test_values(tmp_path: Path) -> None:
    """RocketMQ's ConsumeQueueTest: 200 messages tagged TagA/TagB/TagC in turn, 10-unit CQ files,
    ConsumeQueueExt on (tags codes read through the ext run)."""
    with _open(tmp_path / "s", enable_consume_queue_ext=True) as store:
        _put_tags(store, "StoreTest", [TAGS[i % 3] for i in range(200)])
        cq = store.consume_queue_store.find_consume_queue("StoreTest", 0, create=False)
        assert cq is not None
        assert cq.consume_queue_ext is not None
        f = TagFilter("TagA")
        assert cq.estimate_message_count(0, 199, f) == 67
        assert cq.estimate_message_count(0, 1000, f) == 67
        assert cq.estimate_message_count(100, 150, f, max_consume_queue_scan=20, sample_count_threshold=10) == 15
        # no file overlaps [1000, 10000) or [100, 0): -1 in the source (that test says 0, see the report)
        assert cq.estimate_message_count(1000, 10000, f) == -1
        assert cq.estimate_message_count(100, 0, f) == -1
        assert store.estimate_message_count("StoreTest", 0, 1000, 10000, f) == 9000


def test_an_unresolvable_ext_address_answers_to_minus_from(tmp_path: Path) -> None:
    """With ConsumeQueueExt on, RocketMQ reads every tags code through the ext run and throws
    (NullPointerException) on one that resolves to nothing; rmqlab's queue answers -1 there."""
    with _open(tmp_path / "s", enable_consume_queue_ext=True) as store:
        _put_tags(store, "T", ["TagA"] * 12)
        cq = store.consume_queue_store.find_consume_queue("T", 0, create=False)
        assert cq is not None
        assert cq.consume_queue_ext is not None
        f = TagFilter("TagA")
        assert store.estimate_message_count("T", 0, 0, 12, f) == 12
        mf = cq.mapped_file_queue.mapped_files[0]
        mf.buffer[5 * 20 + 12 : 5 * 20 + 20] = (7).to_bytes(8, "big")  # unit 5: a plain tags code
        assert cq.estimate_message_count(0, 12, f) == -1
        assert store.estimate_message_count("T", 0, 0, 12, f) == 12
        assert cq.estimate_message_count(0, 5, f) == 5  # the scan stops before unit 5
        assert cq.estimate_message_count(6, 12, f) == 6


# ------------------------------------------------------------------------------------------
# BatchConsumeQueue


def _bcq_units(store: MessageStore, topic: str) -> tuple[list[int], list[int], list[int]]:
    bcq = store.consume_queue_store.find_batch_queue(topic, 0, create=False)
    assert bcq is not None
    u = bcq.units()
    return u["tags_code"].tolist(), u["batch_size"].tolist(), u["msg_base_offset"].tolist()


def _unit_of(bases: list[int], offset: int) -> int:
    return max(i for i, b in enumerate(bases) if b <= offset)


def test_java_batch_consume_message_test_values(tmp_path: Path) -> None:
    """RocketMQ's BatchConsumeMessageTest: 200 inner batches of 10 and 20 messages in turn,
    tagged TagA/TagB/TagC in turn; the estimate counts messages, its limits count units."""
    with _open(tmp_path / "s") as store:
        store.create_topic("B", 1, queue_type="BatchCQ")
        _put_batches(store, "B", [(TAGS[i % 3], 10 * (i % 2 + 1)) for i in range(200)])
        assert store.get_max_offset_in_queue("B", 0) == 3000
        bcq = store.consume_queue_store.find_batch_queue("B", 0, create=False)
        assert bcq is not None
        assert len(bcq.mapped_file_queue.mapped_files) == 25
        f = TagFilter("TagA")
        assert bcq.estimate_message_count(0, 2999, f) == 1000
        assert bcq.estimate_message_count(0, LONG_MAX, f) == -1
        assert bcq.estimate_message_count(100000, 1000000, f) == -1
        assert bcq.estimate_message_count(100, 0, f) == -1
        assert bcq.estimate_message_count(1000, 2000, f, max_consume_queue_scan=20, sample_count_threshold=10) == 300
        assert store.estimate_message_count("B", 0, 0, 2999, f) == 1000
        # `to` at or past the max offset selects no unit: the facade answers to - from, unfiltered
        assert store.estimate_message_count("B", 0, 0, 3000, f) == 3000
        assert store.estimate_message_count("B", 0, 10, 5000, f) == 4990


def test_batch_queue_ranges_against_the_units(tmp_path: Path) -> None:
    rnd = random.Random(17)
    batches = [(rnd.choice(TAGS), rnd.randint(1, 9)) for _ in range(60)]
    with _open(tmp_path / "s", max_consume_queue_scan=12, sample_count_threshold=4) as store:
        store.create_topic("B", 1, queue_type="BatchCQ")
        _put_batches(store, "B", batches)
        codes, sizes, bases = _bcq_units(store, "B")
        top = store.get_max_offset_in_queue("B", 0)
        assert top == sum(n for _, n in batches)
        for expr in ("TagA", "TagB || TagC", "*"):
            f = TagFilter(expr)
            for _ in range(60):
                lo, hi = sorted(rnd.sample(range(top), 2))
                ulo, uhi = _unit_of(bases, lo), _unit_of(bases, hi)
                if ulo == uhi:  # one unit: scanned window of 0 bytes, or none at a file start
                    want = (hi - lo) if ulo % 8 == 0 else 0
                else:
                    want = _java_reference(codes, sizes, ulo, uhi, hi - lo, f, 12, 4)
                assert store.estimate_message_count("B", 0, lo, hi, f) == want, (expr, lo, hi)


def test_batch_queue_exact_under_the_thresholds(tmp_path: Path) -> None:
    """Under the thresholds the answer is the matching units' batch sizes summed: the unit
    holding ``from`` counted whole, the one holding ``to`` not at all."""
    with _open(tmp_path / "s") as store:
        store.create_topic("B", 1, queue_type="BatchCQ")
        _put_batches(store, "B", [("TagA", 3), ("TagB", 2), ("TagA", 5), ("TagA", 1), ("TagC", 4)])
        f = TagFilter("TagA")  # offsets: A 0-2, B 3-4, A 5-9, A 10, C 11-14
        assert store.estimate_message_count("B", 0, 0, 14, f) == 9
        assert store.estimate_message_count("B", 0, 1, 11, f) == 9  # unit [0,3) counted whole
        assert store.estimate_message_count("B", 0, 1, 10, f) == 8  # the unit holding `to` not at all
        assert store.estimate_message_count("B", 0, 4, 6, f) == 0  # unit B only
        assert store.estimate_message_count("B", 0, 6, 8, f) == 0  # one unit, not at a file start: nothing scanned
        assert store.estimate_message_count("B", 0, 0, 2, f) == 2  # one unit opening its file: -1 -> to - from


# ------------------------------------------------------------------------------------------
# memory topics


def test_memory_topic_counts_held_messages_exactly(tmp_path: Path) -> None:
    record = 200  # about the encoded size of one message below
    with _open(tmp_path / "s", memory_topic_enable=True, memory_store_max_bytes=40 * record) as store:
        store.create_topic("M", 1, memory=True)
        tags = _mixed_tags(100, seed=23)
        for t in tags:
            assert store.put_message(Message("M", b"m" * 60, tags=t, queue_id=0)).ok
        lo = store.get_min_offset_in_queue("M", 0)
        top = store.get_max_offset_in_queue("M", 0)
        assert 0 < lo < top == 100
        f = TagFilter("TagA || TagB")

        def exact(a: int, b: int) -> int:
            return sum(1 for t in tags[a:b] if t in ("TagA", "TagB"))

        assert store.estimate_message_count("M", 0, lo, top, f) == exact(lo, top)
        assert store.estimate_message_count("M", 0, lo + 3, top + 50, f) == exact(lo + 3, top)
        assert store.estimate_message_count("M", 0, 0, 10, f) == exact(lo, lo + 10)  # moved up to the min
        assert store.estimate_message_count("M", 0, top, top + 9, f) == 0
        assert store.estimate_message_count("M", 7, 0, 9, f) == 0  # a queue that never held a message
        assert store.estimate_message_count("M", 0, 0, 10) == 10  # no filter: the facade's fast path


# ------------------------------------------------------------------------------------------
# invariant


@pytest.fixture(scope="module")
def mixed_store(tmp_path_factory: pytest.TempPathFactory) -> MessageStore:
    store = _open(tmp_path_factory.mktemp("estimate") / "s")
    _put_tags(store, "T", _mixed_tags(95, seed=31))
    yield store  # type: ignore[misc]
    store.shutdown()


@given(
    lo=st.integers(-20, 130),
    length=st.integers(-5, 140),
    tags=st.sets(st.sampled_from([*TAGS, "*"]), min_size=1),
)
def test_estimate_stays_within_the_range_and_is_exact_inside_the_queue(
    mixed_store: MessageStore, lo: int, length: int, tags: set[str]
) -> None:
    store, hi = mixed_store, lo + length
    f = TagFilter(" || ".join(sorted(tags)))
    est = store.estimate_message_count("T", 0, lo, hi, f)
    start = max(lo, 0)
    assert 0 <= est <= max(hi - start, 0)
    codes = _cq_codes(store, "T")
    exact = sum(1 for c in codes[start:max(min(hi, 95), start)] if f.is_matched_by_consume_queue(c))
    if hi <= start:  # from >= to (after from < 0 became 0)
        assert est == 0
    elif hi <= 95:  # under the thresholds and inside the written units: the exact count
        assert est == exact
    elif start < 95:  # past the end: the partly written last file (units 90..94) is skipped
        assert est == exact - sum(1 for c in codes[max(start, 90):95] if f.is_matched_by_consume_queue(c))
    else:  # no file overlaps the range: to - from
        assert est == (hi - start if start >= 100 else 0)
