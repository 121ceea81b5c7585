"""A message whose fields cannot become a record is refused with MESSAGE_ILLEGAL naming the
field, on every put path, and leaves the store exactly as a put never made.

The put paths pack fields straight into the mapped file without looking first; before this,
``queue_id=2**31`` raised ``struct.error: 'i' format requires ...`` out of ``put_message``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rmqlab import Message, MessageStore, MessageStoreConfig, open_snapshot
from rmqlab.clock import ManualClock
from rmqlab.store.message import message_field_error
from rmqlab.store.results import PutMessageStatus

BAD = [
    ({"queue_id": 2**31}, "queue_id 2147483648 is outside the Java int range"),
    ({"flag": -(2**40)}, "flag -1099511627776 is outside the Java int range"),
    ({"sys_flag": 2**33}, "sys_flag 8589934592 is outside the Java int range"),
    ({"reconsume_times": 2**31}, "reconsume_times 2147483648 is outside"),
    ({"born_timestamp": 2**63}, "born_timestamp 9223372036854775808 is outside the Java long range"),
    ({"prepared_transaction_offset": 2**64}, "prepared_transaction_offset 18446744073709551616 is outside"),
    ({"born_host": "nohost"}, "born_host 'nohost' is not 'ip:port'"),
    ({"born_host": ("999.1.1.1", 1)}, "born_host ('999.1.1.1', 1) is not"),
    ({"keys": [1, 2]}, "keys must be a str or a sequence of str"),
    ({"body": "text"}, "body must be bytes-like, not str (encode text first"),
]
# the fast path (no user properties), the exact path (user properties), a list batch
PATHS = ["fast", "exact", "batch"]


def _open(root: Path, **kw: Any) -> MessageStore:
    cfg = MessageStoreConfig.small(str(root), **kw)
    return MessageStore.open(str(root), cfg, clock=ManualClock(), threaded=False)


def _put(store: MessageStore, path: str, **fields: Any) -> Any:
    props = {"p": "v"} if path == "exact" else None
    fields = {"body": b"x" * 100, "keys": "k", **fields}
    msg = Message("T", tags="t", properties=props, **fields)
    if path == "batch":
        shared = {k: v for k, v in fields.items() if k == "queue_id"}  # a batch shares its queue
        return store.put_messages([Message("T", b"ok", tags="t", **shared), msg])
    return store.put_message(msg)


# a batch record stores 0 as its prepared transaction offset (RocketMQ's encodeBatch): unused there
CASES = [
    pytest.param(path, bad, reason, id=f"{path}-{next(iter(bad))}-{i}")
    for i, (bad, reason) in enumerate(BAD)
    for path in PATHS
    if not (path == "batch" and "prepared_transaction_offset" in bad)
]


@pytest.mark.parametrize(("path", "bad", "reason"), CASES)
def test_refused_with_the_field_named(tmp_path: Path, path: str, bad: dict[str, Any], reason: str) -> None:
    store = _open(tmp_path / "s")
    try:
        assert _put(store, path).status is PutMessageStatus.PUT_OK
        end = store.get_max_phy_offset()
        r = _put(store, path, **bad)
        assert r.status is PutMessageStatus.MESSAGE_ILLEGAL
        assert reason in r.reason
        if path == "batch" and "queue_id" not in bad:
            assert r.reason.startswith("message 1: ")  # which message of the batch
        assert store.get_max_phy_offset() == end  # nothing written, no queue offset taken
        ok = _put(store, path)
        assert ok.status is PutMessageStatus.PUT_OK
        assert ok.append_result.wrote_offset == end
        store.step()
        n = 4 if path == "batch" else 2
        assert store.get_max_offset_in_queue("T", 0) == n
    finally:
        store.shutdown()
    with open_snapshot(str(tmp_path / "s")) as snap:  # the files are whole: no half record past the end
        assert [f for f in snap.verify(check_crc=True) if f.severity != "info"] == []
        assert len(snap.messages()) == n


def test_memory_topics_refuse_the_same_way(tmp_path: Path) -> None:
    store = _open(tmp_path / "s", memory_topic_enable=True)
    try:
        store.create_topic("T", memory=True)
        for bad, reason in BAD:
            for path in ("fast", "batch")[: 1 if "prepared_transaction_offset" in bad else 2]:
                r = _put(store, path, **bad)
                assert r.status is PutMessageStatus.MESSAGE_ILLEGAL, (bad, path)
                assert reason in r.reason
        assert _put(store, "fast").queue_offset == 0
    finally:
        store.shutdown()


def test_field_checker_passes_good_messages() -> None:
    # a real bug in an encoder must not be reported as the caller's mistake
    assert message_field_error(Message("T", b"x")) is None
    assert message_field_error(Message("T", bytearray(b"x"), born_host="[::1]:10911", born_timestamp=-1)) is None
    assert message_field_error(Message("T", memoryview(b"x"), keys=("a", "b"), queue_id=2**31 - 1)) is None
