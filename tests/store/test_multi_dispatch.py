"""Multi-dispatch (LMQ) in the engine: enable_multi_dispatch / enable_lmq dispatch a record's unit
into the queues its INNER_MULTI_DISPATCH names, at the offsets INNER_MULTI_QUEUE_OFFSET gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqlab.clock import ManualClock
from rmqlab.config import MessageStoreConfig
from rmqlab.events import Dispatched, EventRecorder
from rmqlab.inspect import open_snapshot
from rmqlab.store.message import Message
from rmqlab.store.message_store import MessageStore
from rmqlab.store.results import GetMessageStatus
from rmqlab.testing.crash import simulate_process_kill
from tests.multi_dispatch_store import ROUTES, write_multi_dispatch_store


def _put_routed(store: MessageStore, clock: ManualClock, start: int, n: int, lmq: bool = True) -> None:
    """Messages ``start..start+n`` as ``write_multi_dispatch_store`` puts them, offsets from the queues."""
    for i in range(start, start + n):
        queue_id = (i // len(ROUTES)) % 2
        names = ROUTES[i % len(ROUTES)]
        props = {}
        if names:
            offs = [store.get_max_offset_in_queue(q, 0 if lmq and q.startswith("%LMQ%") else queue_id)
                    for q in names]
            props = {"INNER_MULTI_DISPATCH": ",".join(names), "INNER_MULTI_QUEUE_OFFSET": ",".join(map(str, offs))}
        r = store.put_message(Message("Chat", b"hello %d " % i * (1 + i % 5), tags=f"T{i % 3}", keys=[f"k{i}"],
                                      queue_id=queue_id, properties=props))
        assert r.ok, r
        store.step()  # the next message's offsets read the queues (a broker reads its offset table)
        clock.advance(1000)


def _cq_bytes(root: Path) -> dict[str, bytes]:
    files = sorted((root / "consumequeue").rglob("0*"))
    return {str(p.relative_to(root)): p.read_bytes() for p in files if p.is_file()}


def _open(root: Path, clock: ManualClock, **changes: object) -> MessageStore:
    config = MessageStoreConfig.small(str(root), **changes)
    return MessageStore.open(str(root), config, clock=clock, threaded=False)


def test_units_are_those_a_broker_writes(tmp_path: Path) -> None:
    """Byte for byte the consume queues of ``write_multi_dispatch_store`` (4.9.8's dispatcher, by hand)."""
    write_multi_dispatch_store(tmp_path / "want", messages=40)
    clock = ManualClock()
    with _open(tmp_path / "got", clock, enable_multi_dispatch=True, enable_lmq=True) as store:
        _put_routed(store, clock, 0, 40)
        got = store.get_message("g", "%LMQ%room-1", 0, 0, 32)
        with got:
            assert got.status is GetMessageStatus.FOUND
            assert [m.decode().body for m in got.messages] == [
                b"hello %d " % i * (1 + i % 5) for i in range(40) if "%LMQ%room-1" in ROUTES[i % len(ROUTES)]]
        assert store.get_max_offset_in_queue("Fanout", 1) == 5
    assert _cq_bytes(tmp_path / "got") == _cq_bytes(tmp_path / "want")
    with open_snapshot(tmp_path / "got") as snap:
        assert [f for f in snap.verify() if f.severity != "info"] == []


def test_without_enable_lmq_an_lmq_name_keeps_the_record_queue_id(tmp_path: Path) -> None:
    clock = ManualClock()
    with _open(tmp_path / "s", clock, enable_multi_dispatch=True) as store:
        _put_routed(store, clock, 0, 16, lmq=False)
        assert store.get_max_offset_in_queue("%LMQ%room-1", 0) == 4
        assert store.get_max_offset_in_queue("%LMQ%room-1", 1) == 4
    with open_snapshot(tmp_path / "s") as snap:
        assert [f for f in snap.verify() if f.severity != "info"] == []


def test_off_by_default_as_in_rocketmq(tmp_path: Path) -> None:
    clock = ManualClock()
    with _open(tmp_path / "s", clock) as store:
        _put_routed(store, clock, 0, 8)
        assert store.get_max_offset_in_queue("Chat", 0) == 4
        assert store.consume_queue_store.find_consume_queue("%LMQ%room-1", 0, create=False) is None
    assert not (tmp_path / "s" / "consumequeue" / "%LMQ%room-1").exists()


def test_dispatched_events_and_unreadable_offsets(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Records a broker stored with offsets its dispatcher cannot read: rmqlab skips their extra
    units (RocketMQ's reput would retry the record forever) and says so; names RocketMQ would
    turn into a directory outside ``consumequeue/`` get no unit."""
    clock = ManualClock()
    root = tmp_path / "s"
    store = _open(root, clock)  # off: the properties are stored as given, as by a broker's producer
    for props in ({"INNER_MULTI_DISPATCH": "%LMQ%a,%LMQ%b", "INNER_MULTI_QUEUE_OFFSET": "0,0"},
                  {"INNER_MULTI_DISPATCH": "%LMQ%a", "INNER_MULTI_QUEUE_OFFSET": "x"},  # parseLong fails
                  {"INNER_MULTI_DISPATCH": "%LMQ%a,../x", "INNER_MULTI_QUEUE_OFFSET": "1,0"}):  # a bad name
        assert store.put_message(Message("Chat", b"m", queue_id=3, properties=props)).ok
    simulate_process_kill(store)  # never dispatched: recovery dispatches them
    with _open(root, clock, enable_multi_dispatch=True, enable_lmq=True) as store:
        store.step()
        assert store.get_max_offset_in_queue("Chat", 3) == 3
        assert store.get_max_offset_in_queue("%LMQ%a", 0) == 2  # records 1 and 3
        assert store.get_max_offset_in_queue("%LMQ%b", 0) == 1
        rec = EventRecorder(store.bus)  # and a put now: the unit's events, its own first
        named = {"INNER_MULTI_DISPATCH": "%LMQ%b,%LMQ%a"}
        r = store.put_message(Message("Chat", b"m", queue_id=3, properties=named))
        store.step()
        got = [(e.topic, e.queue_id, e.queue_offset) for e in rec.of(Dispatched)]
        assert got == [("Chat", 3, 3), ("%LMQ%b", 0, 1), ("%LMQ%a", 0, 2)]
        assert {e.commit_log_offset for e in rec.of(Dispatched)} == {r.wrote_offset}
    assert "cannot be read" in caplog.text
    assert "'../x'" in caplog.text
    assert not (tmp_path / "x").exists()


def test_the_store_assigns_the_offsets_as_4_9_8(tmp_path: Path) -> None:
    """Messages that only name their queues: the store sets INNER_MULTI_QUEUE_OFFSET from its
    queue offset table under the put lock (a producer's own value is replaced), in the broker
    map's order without WAIT, and moves the offsets on; the queues and their bytes are those a
    broker's dispatcher leaves, and the offsets carry on after a reopen."""
    from rmqlab.codec.properties import java_hashmap_order

    write_multi_dispatch_store(tmp_path / "want", messages=40)
    clock = ManualClock()
    root = tmp_path / "got"
    with _open(root, clock, enable_multi_dispatch=True, enable_lmq=True) as store:
        for i in range(40):
            names = ROUTES[i % len(ROUTES)]
            props = {"INNER_MULTI_DISPATCH": ",".join(names), "INNER_MULTI_QUEUE_OFFSET": "99"} if names else {}
            r = store.put_message(Message("Chat", b"hello %d " % i * (1 + i % 5), tags=f"T{i % 3}", keys=[f"k{i}"],
                                          queue_id=(i // len(ROUTES)) % 2, properties=props))
            assert r.ok, r
            if i % 3 == 0:
                store.step()  # dispatch may lag: the offsets come from the put side's table
            clock.advance(1000)
        store.step()
        five = store.get_message("g", "Chat", 1, 0, 32)
        with five:
            md = [m.decode() for m in five.messages if "INNER_MULTI_DISPATCH" in m.decode().properties]
        assert md
        for m in md:
            keys = list(m.properties)
            inserted = ["KEYS", "TAGS", "WAIT", "INNER_MULTI_DISPATCH", "UNIQ_KEY", "CLUSTER",
                        "INNER_MULTI_QUEUE_OFFSET"]
            assert keys == [k for k in java_hashmap_order(inserted, 16) if k != "WAIT"]
    assert _cq_bytes(root) == _cq_bytes(tmp_path / "want")
    with _open(root, clock, enable_multi_dispatch=True, enable_lmq=True) as store:
        r = store.put_message(Message("Chat", b"after", properties={"INNER_MULTI_DISPATCH": "%LMQ%room-1,Fanout"},
                                      queue_id=1))
        assert r.ok
        assert store.look_message_by_offset(r.wrote_offset).properties["INNER_MULTI_QUEUE_OFFSET"] == "20,5"
        store.step()
        assert store.get_max_offset_in_queue("%LMQ%room-1", 0) == 21
        assert store.get_max_offset_in_queue("Fanout", 1) == 6


def test_prepared_messages_get_offsets_that_do_not_move(tmp_path: Path) -> None:
    clock = ManualClock()
    with _open(tmp_path / "s", clock, enable_multi_dispatch=True, enable_lmq=True) as store:
        prepared = 0x4  # TRANSACTION_PREPARED_TYPE: offsets written, not moved on (never dispatched)
        for sys_flag, want in ((prepared, "0"), (0, "0"), (prepared, "1"), (0, "1")):
            r = store.put_message(Message("Chat", b"m", sys_flag=sys_flag,
                                          properties={"INNER_MULTI_DISPATCH": "%LMQ%a"}))
            assert r.ok, r
            assert store.look_message_by_offset(r.wrote_offset).properties["INNER_MULTI_QUEUE_OFFSET"] == want
        store.step()
        assert store.get_max_offset_in_queue("%LMQ%a", 0) == 2


@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
def test_a_delayed_message_naming_queues_is_refused(tmp_path: Path, version: str) -> None:
    clock = ManualClock()
    named = {"INNER_MULTI_DISPATCH": "%LMQ%a"}
    with _open(tmp_path / "a", clock, enable_multi_dispatch=True, rocketmq_version=version) as store:
        r = store.put_message(Message("Chat", b"m", delay_time_level=3, properties=named))
        assert r.status.name == "MESSAGE_ILLEGAL"
        assert "delayed" in r.reason


def _imqo(store: MessageStore, r) -> str | None:
    return store.look_message_by_offset(r.wrote_offset).properties.get("INNER_MULTI_QUEUE_OFFSET")


def test_the_store_assigns_lmq_offsets_as_5_3_3(tmp_path: Path) -> None:
    """5.3.3's ConsumeQueue.assignQueueOffset: only %LMQ% queues get an offset (another name an
    empty one), WAIT is left out of the stored string, each LMQ queue moves on once per time it is
    named, and prepared halves and %RETRY% topics are stored as sent."""
    from rmqlab.codec.properties import java_hashmap_order

    clock = ManualClock()
    root = tmp_path / "s"

    def put(store: MessageStore, names: str, topic: str = "Chat", **kw: object):
        r = store.put_message(Message(topic, b"m", queue_id=1, properties={"INNER_MULTI_DISPATCH": names,
                                                                          "INNER_MULTI_QUEUE_OFFSET": "99"}, **kw))
        assert r.ok, r
        return r

    with _open(root, clock, enable_multi_dispatch=True, enable_lmq=True, rocketmq_version="5.3.3") as store:
        r = put(store, "%LMQ%a,%LMQ%b")
        assert _imqo(store, r) == "0,0"
        keys = list(store.look_message_by_offset(r.wrote_offset).properties)
        inserted = ["WAIT", "INNER_MULTI_DISPATCH", "INNER_MULTI_QUEUE_OFFSET", "UNIQ_KEY", "CLUSTER"]
        assert keys == [k for k in java_hashmap_order(inserted, 128) if k != "WAIT"]
        assert _imqo(store, put(store, "%LMQ%b")) == "1"
        store.step()
        assert (store.get_max_offset_in_queue("%LMQ%a", 0), store.get_max_offset_in_queue("%LMQ%b", 0)) == (1, 2)
        assert _imqo(store, put(store, "%LMQ%a,%LMQ%a")) == "1,1"
        assert _imqo(store, put(store, "%LMQ%a")) == "3"  # moved on twice by the one above (4.9.8: once)
        raw = store.look_message_by_offset(put(store, "Fanout").wrote_offset).properties_raw
        assert b"INNER_MULTI_QUEUE_OFFSET\x01\x02" in raw  # join of one null: empty, which a reader drops
        half = put(store, "%LMQ%b", sys_flag=0x4)  # TRANSACTION_PREPARED_TYPE: not assigned at all
        retry = put(store, "%LMQ%b", topic="%RETRY%g")
        for r in (half, retry):
            rec = store.look_message_by_offset(r.wrote_offset)
            assert (rec.properties["INNER_MULTI_QUEUE_OFFSET"], rec.properties["WAIT"]) == ("99", "true")
    with _open(root, clock, enable_multi_dispatch=True, enable_lmq=True, rocketmq_version="5.3.3") as store:
        assert _imqo(store, put(store, "%LMQ%b")) == "2"  # the offsets carry on after a reopen


def test_recovery_dispatches_what_the_crash_left_undispatched(tmp_path: Path) -> None:
    """Records written but not dispatched before a kill: reopened with the same config, reput
    builds their units in the multi-dispatch queues too (the answers the broker would give)."""
    clock = ManualClock()
    root = tmp_path / "s"
    store = _open(root, clock, enable_multi_dispatch=True, enable_lmq=True)
    _put_routed(store, clock, 0, 20)
    for i in range(20, 28):  # put, never dispatched: offsets from the broker's own count
        names = ROUTES[i % len(ROUTES)]
        props = {}
        if names:
            base = [sum(1 for j in range(i) if q in ROUTES[j % len(ROUTES)] and
                        (q.startswith("%LMQ%") or (j // len(ROUTES)) % 2 == (i // len(ROUTES)) % 2)) for q in names]
            props = {"INNER_MULTI_DISPATCH": ",".join(names), "INNER_MULTI_QUEUE_OFFSET": ",".join(map(str, base))}
        assert store.put_message(Message("Chat", b"late %d" % i, queue_id=(i // len(ROUTES)) % 2,
                                         properties=props)).ok
    store.commit_log.mapped_file_queue.flush(0)
    simulate_process_kill(store)
    assert store.get_max_offset_in_queue("%LMQ%room-1", 0) == 10  # what dispatch had done
    with _open(root, clock, enable_multi_dispatch=True, enable_lmq=True) as again:
        again.step()
        assert again.get_max_offset_in_queue("%LMQ%room-1", 0) == 14
        assert again.get_max_offset_in_queue("%LMQ%room-2", 0) == 14
        got = again.get_message("g", "%LMQ%room-2", 0, 10, 32)
        with got:
            assert [m.decode().body for m in got.messages] == [b"late %d" % i for i in range(20, 28)
                                                                if "%LMQ%room-2" in ROUTES[i % len(ROUTES)]]
    with open_snapshot(root) as snap:
        assert [f for f in snap.verify() if f.severity != "info"] == []


def test_lmq_queue_limit(tmp_path: Path) -> None:
    """4.9.8's checkLmqMessage: past max_lmq_consume_queue_num LMQ queues a put naming queues is
    refused with LMQ_CONSUME_QUEUE_NUM_EXCEEDED (others go on); the count survives a reopen and
    falls when a queue is destroyed."""
    clock = ManualClock()
    root = tmp_path / "s"
    changes = {"enable_multi_dispatch": True, "enable_lmq": True, "max_lmq_consume_queue_num": 2}
    with _open(root, clock, **changes) as store:
        for name in ("%LMQ%a", "%LMQ%b", "%LMQ%c"):
            assert store.put_message(Message("Chat", b"m", properties={"INNER_MULTI_DISPATCH": name})).ok
            store.step()
        assert store.consume_queue_store.lmq_queue_count == 3
        r = store.put_message(Message("Chat", b"m", properties={"INNER_MULTI_DISPATCH": "%LMQ%a"}))
        assert r.status.name == "LMQ_CONSUME_QUEUE_NUM_EXCEEDED"
        assert "3 LMQ consume queues" in r.reason
        assert "4.9.8" in r.reason  # what a 4.9.8 broker does instead (its check is dead code)
        assert store.put_message(Message("Chat", b"plain")).ok
    with _open(root, clock, **changes) as store:
        assert store.consume_queue_store.lmq_queue_count == 3
        assert store.consume_queue_store.destroy_queue("%LMQ%c", 0)
        assert store.consume_queue_store.lmq_queue_count == 2
        assert store.put_message(Message("Chat", b"m", properties={"INNER_MULTI_DISPATCH": "%LMQ%a"})).ok
    with _open(root, clock, enable_multi_dispatch=True, max_lmq_consume_queue_num=0) as store:  # enable_lmq off
        assert store.put_message(Message("Chat", b"m", properties={"INNER_MULTI_DISPATCH": "%LMQ%a"})).ok


@pytest.mark.parametrize("version", ["4.9.8", "5.3.3"])
def test_retry_topics_multi_dispatch_in_4_9_8_only(tmp_path: Path, version: str) -> None:
    """5.x's checkMultiDispatchQueue skips records of %RETRY%, schedule and timer topics; 4.9.8 does not."""
    clock = ManualClock()
    named = {"INNER_MULTI_DISPATCH": "%LMQ%a", "INNER_MULTI_QUEUE_OFFSET": "0"}
    with _open(tmp_path / "s", clock, enable_multi_dispatch=True, enable_lmq=True, rocketmq_version=version) as store:
        assert store.put_message(Message("%RETRY%group", b"m", properties=named)).ok
        store.step()
        assert store.get_max_offset_in_queue("%RETRY%group", 0) == 1
        assert store.get_max_offset_in_queue("%LMQ%a", 0) == (1 if version == "4.9.8" else 0)


def test_a_message_the_offsets_make_too_big_is_an_unknown_error(tmp_path: Path) -> None:
    """4.9.8's rebuildMsgInner re-encodes the message with INNER_MULTI_QUEUE_OFFSET; when that
    encode fails, the put answers UNKNOWN_ERROR (nothing is written, no offset moves)."""
    clock = ManualClock()
    with _open(tmp_path / "s", clock, enable_multi_dispatch=True, enable_lmq=True) as store:
        from rmqlab.store.message import build_properties_and_map

        names = ",".join(f"%LMQ%q{i}" for i in range(40))

        def message(pad: int) -> Message:
            return Message("Chat", b"m", properties={"INNER_MULTI_DISPATCH": names, "pad": "x" * pad})

        props, _ = build_properties_and_map(message(0), "F" * 32, cluster=store.config.broker_cluster_name,
                                            rocketmq_version="4.9.8")
        full = message(32767 - len(props))  # exactly the limit before the offsets are added
        probe = store.put_message(full)
        assert probe.status.name == "UNKNOWN_ERROR", probe
        assert "INNER_MULTI_QUEUE_OFFSET" in probe.reason
        assert store.get_max_phy_offset() == 0
        assert store.put_message(Message("Chat", b"m", properties={"INNER_MULTI_DISPATCH": "%LMQ%q0"})).ok
        store.step()
        assert store.get_max_offset_in_queue("%LMQ%q0", 0) == 1
        assert store.get_max_offset_in_queue("Chat", 0) == 1
    with _open(tmp_path / "plain", clock) as plain:  # the same message fits without the offsets
        assert plain.put_message(full).ok


def test_threaded_producers_share_lmq_offsets(tmp_path: Path) -> None:
    """Four producer threads naming the same LMQ queue on a threaded store: the offsets, drawn
    under the put lock, are 0..n-1 with no gap or repeat, and each unit points at the record
    that carries its offset."""
    import threading

    from rmqlab.codec.multi_dispatch import multi_dispatch_pairs

    root = tmp_path / "s"
    config = MessageStoreConfig.small(str(root), enable_multi_dispatch=True, enable_lmq=True)
    per, threads = 150, 4
    with MessageStore.open(str(root), config, threaded=True) as store:
        def producer(t: int) -> None:
            for i in range(per):
                r = store.put_message(Message("Chat", b"%d-%d" % (t, i), queue_id=t,
                                              properties={"INNER_MULTI_DISPATCH": "%LMQ%shared,%LMQ%mine" + str(t)}))
                assert r.ok, r

        ts = [threading.Thread(target=producer, args=(t,)) for t in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert store.wait_dispatched()
        n = per * threads
        assert store.get_max_offset_in_queue("%LMQ%shared", 0) == n
        seen = []
        offset = 0
        while offset < n:
            with store.get_message("g", "%LMQ%shared", 0, offset, 32) as got:
                for k, m in enumerate(got.messages):
                    pairs = dict(multi_dispatch_pairs(m.decode().properties))
                    seen.append(pairs["%LMQ%shared"])
                    assert pairs["%LMQ%shared"] == offset + k
                offset = got.next_begin_offset
        assert seen == list(range(n))
        for t in range(threads):
            assert store.get_max_offset_in_queue(f"%LMQ%mine{t}", 0) == per
