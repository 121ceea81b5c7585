"""The live reput meeting inner-batch records another writer put past its offset, with INNER_NUM /
INNER_BASE the 5.x parser rejects or a BatchConsumeQueue skips.

5.x ``CommitLog.checkMessageAndReturnSize`` calls ``setBatchSizeIfNeeded`` inside its try: with
both INNER_NUM and INNER_BASE present, ``Short.parseShort`` / ``Long.parseLong`` throwing gives
``DispatchRequest(-1, false)``. ``DefaultMessageStore.ReputMessageService.doReput`` then ends the
round; a master (``brokerId == MASTER_ID``) also moves ``reputFromOffset`` by
``result.getSize() - readSize`` -- past every record up to the end of the data it read from that
file -- while a slave stays and meets the record again next round. Values that parse (negative
ones) or a missing INNER_BASE / INNER_NUM give a successful request; ``BatchConsumeQueue.
putMessagePositionInfoWrapper`` writes no unit for it ("[NOTIFYME]unexpected dispatch request")
and the reput goes on. Recovery's walks (``tests/store/test_fast_walk.py``) stop at the same
records; here the records are appended raw to the live CommitLog file past the reput offset, as
a broker (or an HA master's bytes) would leave them, and the batched (columnar) reput and the
one-by-one reput are run on the same bytes.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from rmqlab.clock import ManualClock
from rmqlab.codec.flags import INNER_BATCH_FLAG, NEED_UNWRAP_FLAG
from rmqlab.codec.message import encode_message
from rmqlab.config import MessageStoreConfig
from rmqlab.store import dispatch
from rmqlab.store.dispatch import ReputMessageService
from rmqlab.store.message import Message
from rmqlab.store.message_store import MessageStore
from tests.store.test_dispatch_batch import queue_and_index_bytes

T0 = 1_764_000_000_000
_INNER = INNER_BATCH_FLAG | NEED_UNWRAP_FLAG

#: INNER_NUM / INNER_BASE values Java's parse rejects: the record fails without a size
UNPARSABLE = [
    pytest.param({"INNER_NUM": "x", "INNER_BASE": "2"}, id="num-not-a-number"),
    pytest.param({"INNER_NUM": "40000", "INNER_BASE": "2"}, id="num-not-a-short"),
    pytest.param({"INNER_NUM": "3", "INNER_BASE": "two"}, id="base-not-a-number"),
    pytest.param({"INNER_NUM": " 3", "INNER_BASE": "2"}, id="num-with-a-space"),
]
#: values that parse (or are not both there): the record is dispatched, its BatchCQ unit skipped
SKIPPED = [
    pytest.param({"INNER_NUM": "-3", "INNER_BASE": "2"}, id="num-negative"),
    pytest.param({"INNER_NUM": "3", "INNER_BASE": "-2"}, id="base-negative"),
    pytest.param({"INNER_NUM": "3"}, id="base-missing"),
    pytest.param({"INNER_NUM": "3", "INNER_BASE": ""}, id="base-empty"),  # (a pair with no value is not read)
    pytest.param({"INNER_BASE": "x"}, id="num-missing-base-garbled"),
]


def _config(root: Path, role: str) -> MessageStoreConfig:
    return MessageStoreConfig.small(str(root), rocketmq_version="5.3.3", broker_role=role)


def _mode(monkeypatch: pytest.MonkeyPatch, batched: bool) -> None:
    if batched:  # every round batched (columns), however few records are behind
        monkeypatch.setattr(dispatch, "SMALL_ROUND_RECORDS", 0)
        monkeypatch.setattr(dispatch, "SMALL_ROUND_BYTES", 0)
    else:
        monkeypatch.setattr(ReputMessageService, "batching", lambda self: False)


def _append_raw(store: MessageStore, records: list[tuple[str, int, int, dict[str, str]]]) -> list[int]:
    """Append ``(topic, queue offset, sys flag, properties)`` records to the last CommitLog file,
    bytes only (no queue offset table, no dispatch hint), as another writer leaves them.
    Returns their offsets."""
    cl = store.commit_log
    offsets = []
    with cl.put_lock:
        mf = cl.mapped_file_queue.mapped_files[-1]
        for i, (topic, queue_offset, sys_flag, props) in enumerate(records):
            at = mf.file_from_offset + mf.wrote_position
            rec = encode_message(topic=topic, body=b"raw-%d" % i, queue_offset=queue_offset, commit_log_offset=at,
                                 sys_flag=sys_flag, store_timestamp=T0 + i, born_timestamp=T0 + i,
                                 properties={"TAGS": "t", **props})
            assert mf.append_message(rec)
            offsets.append(at)
    return offsets


def _layout(bad: dict[str, str]) -> list[tuple[str, int, int, dict[str, str]]]:
    """A good inner batch, the record under test, a good inner batch, a plain record of Q."""
    return [
        ("B", 0, _INNER, {"INNER_NUM": "2", "INNER_BASE": "0"}),
        ("B", 2, _INNER, bad),
        ("B", 2, _INNER, {"INNER_NUM": "4", "INNER_BASE": "2"}),
        ("Q", 0, 0, {}),
    ]


def _bcq_units(store: MessageStore) -> list[tuple[int, int, int]]:
    bcq = store.consume_queue_store.find_batch_queue("B", 0, create=False)
    if bcq is None:
        return []
    u = bcq.units()
    return list(zip(u["commit_log_offset"].tolist(), u["msg_base_offset"].tolist(), u["batch_size"].tolist(),
                    strict=True))


def _run(root: Path, role: str, bad: dict[str, str], monkeypatch: pytest.MonkeyPatch, batched: bool
         ) -> tuple[list[int], MessageStore]:
    """Open a store, append the layout raw past the reput offset, run three reput rounds."""
    _mode(monkeypatch, batched)
    store = MessageStore.open(str(root), _config(root, role), clock=ManualClock(), threaded=False)
    store.create_topic("B", queue_type="BatchCQ")
    assert store.put_message(Message("P", b"own", tags="t", uniq_key="OWN-1")).ok  # the store's own record, dispatched
    store.reput.run_once()
    offsets = _append_raw(store, _layout(bad))
    for _ in range(3):
        store.reput.run_once()
    return offsets, store


@pytest.mark.parametrize("batched", [True, False], ids=["batched", "one-by-one"])
@pytest.mark.parametrize("bad", UNPARSABLE)
def test_a_master_skips_the_rest_of_the_file_data_at_an_unparsable_pair(
        tmp_path: Path, bad: dict[str, str], batched: bool, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="rmqlab.store.dispatch"):
        offsets, store = _run(tmp_path / "s", "ASYNC_MASTER", bad, monkeypatch, batched)
    try:
        end = store.get_max_phy_offset()
        assert store.reput.reput_from_offset == end  # past the record and all after it in the file
        assert _bcq_units(store) == [(offsets[0], 0, 2)]  # only the record before it
        assert store.get_max_offset_in_queue("Q", 0) == 0  # the plain record after it: never dispatched
        assert f"COMMITLOG OFFSET: {offsets[1]}" in caplog.text
        # the reput goes on with what is written next
        r = store.put_message(Message("P", b"next", tags="t"))
        assert r.ok
        store.reput.run_once()
        assert store.get_max_offset_in_queue("P", 0) == 2
        assert store.reput.reput_from_offset == store.get_max_phy_offset()
    finally:
        store.shutdown()
        monkeypatch.undo()
    # recovery walks stop at the same record: the CommitLog ends there after a reopen
    with MessageStore.open(str(tmp_path / "s"), _config(tmp_path / "s", "ASYNC_MASTER"), clock=ManualClock(),
                           threaded=False) as again:
        assert again.get_max_phy_offset() == offsets[1]
        assert _bcq_units(again) == [(offsets[0], 0, 2)]
        assert again.get_max_offset_in_queue("B", 0) == 2


@pytest.mark.parametrize("batched", [True, False], ids=["batched", "one-by-one"])
@pytest.mark.parametrize("bad", UNPARSABLE[:3])
def test_a_slave_stops_at_an_unparsable_pair_round_after_round(
        tmp_path: Path, bad: dict[str, str], batched: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    offsets, store = _run(tmp_path / "s", "SLAVE", bad, monkeypatch, batched)
    try:
        assert store.reput.reput_from_offset == offsets[1]
        assert _bcq_units(store) == [(offsets[0], 0, 2)]
        assert store.get_max_offset_in_queue("Q", 0) == 0
        assert store.reput.run_once() == 0
        assert store.reput.reput_from_offset == offsets[1]
    finally:
        store.abandon()
        monkeypatch.undo()


@pytest.mark.parametrize("batched", [True, False], ids=["batched", "one-by-one"])
@pytest.mark.parametrize("bad", SKIPPED)
def test_a_pair_that_parses_or_is_incomplete_gets_no_unit_and_the_reput_goes_on(
        tmp_path: Path, bad: dict[str, str], batched: bool, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        offsets, store = _run(tmp_path / "s", "ASYNC_MASTER", bad, monkeypatch, batched)
    try:
        assert store.reput.reput_from_offset == store.get_max_phy_offset()
        assert _bcq_units(store) == [(offsets[0], 0, 2), (offsets[2], 2, 4)]
        assert store.get_max_offset_in_queue("B", 0) == 6
        assert store.get_max_offset_in_queue("Q", 0) == 1
        assert "[NOTIFYME]unexpected dispatch request" in caplog.text
        assert "COMMITLOG OFFSET" not in caplog.text
    finally:
        store.shutdown()
        monkeypatch.undo()


@pytest.mark.parametrize("role", ["ASYNC_MASTER", "SLAVE"])
@pytest.mark.parametrize("bad", [UNPARSABLE[0], UNPARSABLE[2], SKIPPED[0], SKIPPED[2]])
def test_batched_and_one_by_one_leave_the_same_files(tmp_path: Path, bad: dict[str, str], role: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    got = []
    for batched in (True, False):
        root = tmp_path / f"b{batched}"
        _offsets, store = _run(root, role, bad, monkeypatch, batched)
        try:
            got.append((store.reput.reput_from_offset, store.checkpoint.logics_msg_timestamp))
            store.checkpoint.flush()
        finally:
            store.abandon()
            monkeypatch.undo()
        got.append(queue_and_index_bytes(root))
    assert got[0] == got[2]
    assert got[1].keys() == got[3].keys()
    for k in got[1]:
        assert got[1][k] == got[3][k], k
