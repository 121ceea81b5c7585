"""The writer's dispatch hints give reput exactly the DispatchRequest parsing would give.

``CommitLog.dispatch_hints`` lets ReputMessageService skip re-parsing a record it was told about
under the put lock; these tests put every shape of message the hint logic distinguishes and
compare each dispatched request with ``check_message_and_return_size`` on the stored bytes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqlab import MessageStore, MessageStoreConfig
from rmqlab.clock import ManualClock
from rmqlab.codec import flags
from rmqlab.codec.walk import DispatchRequest, check_message_and_return_size
from rmqlab.store.message import Message


def _messages() -> list[Message]:
    return [
        Message("TopicA", b"plain"),
        Message("TopicA", b"tagged", tags="TagA", keys=["k1", "k2", "k1"], queue_id=1),
        Message("TopicA", b"keys-string", keys="a  b", tags="T"),
        Message("TopicB", b"user props", properties={"p1": "v1", "p2": "v2"}),
        Message("TopicB", b"separator in a value", properties={"bad": "x\x01y", "e": "\x02"}),
        Message("TopicB", b"empty value", properties={"empty": ""}),
        Message("TopicB", b"v6 born", born_host=("::1", 9)),
        Message("TopicC", b"prepared", sys_flag=flags.TRANSACTION_PREPARED_TYPE),
        Message("TopicC", b"rollback", sys_flag=flags.TRANSACTION_ROLLBACK_TYPE),
        Message("TopicC", b"delay level", delay_time_level=3, tags="D"),
        Message(flags.SCHEDULE_TOPIC, b"scheduled", tags="S", properties={"DELAY": "2"}),
        Message("TopicC", b"explicit uniq", uniq_key="UNIQ-FIXED"),
        Message("TopicC", "ünïcödé".encode(), tags="标签", keys=["ключ"]),
    ]


@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
def test_hinted_requests_equal_parsed_requests(tmp_path: Path, version: str) -> None:
    config = MessageStoreConfig.small(str(tmp_path / "s"), rocketmq_version=version)
    store = MessageStore.open(tmp_path / "s", config, clock=ManualClock(), threaded=False)
    try:
        seen: list[DispatchRequest] = []
        store.reput.listeners.append(seen.append)
        msgs = _messages() * 3
        for m in msgs:
            assert store.put_message(m).ok
        hinted = len(store.commit_log.dispatch_hints)
        assert hinted > 0
        store.wait_dispatched()
        assert len(store.commit_log.dispatch_hints) == 0  # every hint consumed at its offset
        assert len(seen) == len(msgs)
        for req in seen:
            sel = store.commit_log.get_message(req.commit_log_offset, req.msg_size)
            assert sel is not None
            with sel:
                size, ok, parsed = check_message_and_return_size(
                    sel.buffer, 0, check_crc=False, read_body=False, rocketmq_version=version,
                    delay_level_table=config.delay_level_table,
                    max_delay_level=max(config.delay_level_table),
                )
            assert ok
            assert size == req.msg_size
            assert req == parsed
            assert list(req.properties or {}) == list(parsed.properties or {})
    finally:
        store.shutdown()


def test_a_hint_that_disagrees_with_the_bytes_is_ignored(tmp_path: Path) -> None:
    store = MessageStore.open(tmp_path / "s", MessageStoreConfig.small(str(tmp_path / "s")),
                              clock=ManualClock(), threaded=False)
    try:
        seen: list[DispatchRequest] = []
        store.reput.listeners.append(seen.append)
        r = store.put_message(Message("TopicA", b"x", tags="TagA", keys="k"))
        hints = store.commit_log.dispatch_hints
        size, q, ts, ts_pos, d = hints[r.wrote_offset]
        hints[r.wrote_offset] = (size, q + 5, ts, ts_pos, ("WrongTopic", *d[1:]))
        store.wait_dispatched()
        assert [req.topic for req in seen] == ["TopicA"]
        assert seen[0].consume_queue_offset == 0
    finally:
        store.shutdown()


def test_reopened_store_dispatches_by_parsing(tmp_path: Path) -> None:
    path = tmp_path / "s"
    config = MessageStoreConfig.small(str(path))
    with MessageStore.open(path, config, clock=ManualClock(), threaded=False) as store:
        for i in range(20):
            store.put_message(Message("TopicA", b"x" * i, tags="T", keys=f"k{i}"))
    with MessageStore.open(path, config, clock=ManualClock(), threaded=False) as store:
        assert store.commit_log.dispatch_hints == {}
        assert len(store.query_message("TopicA", "k7").messages) == 1
        assert store.get_max_offset_in_queue("TopicA", 0) == 20
