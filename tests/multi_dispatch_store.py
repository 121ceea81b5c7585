"""A store as a broker with ``enableMultiDispatch`` + ``enableLmq`` leaves it (RocketMQ MQTT, LMQ).

rmqlab's engine does not multi-dispatch yet, so the extra units are written the way 4.9.8's
``DefaultMessageStore.multiDispatchLmqQueue`` writes them: after the record's own unit, the same
``(offset, size, tagsCode)`` at the queue offset ``INNER_MULTI_QUEUE_OFFSET`` names, queue id 0
for ``%LMQ%`` names, the record's own queue id for other names. The properties carry the
offsets a broker's ``MultiDispatch.wrapMultiDispatch`` assigns (one counter per queue).
"""

from __future__ import annotations

from pathlib import Path

from rmqlab.clock import ManualClock
from rmqlab.codec.names import is_lmq_topic
from rmqlab.config import MessageStoreConfig
from rmqlab.store.message import Message
from rmqlab.store.message_store import MessageStore

#: per message i: the multi-dispatch queues it names
ROUTES = (["%LMQ%room-1"], ["%LMQ%room-1", "%LMQ%room-2"], ["%LMQ%room-2", "Fanout"], [])


def write_multi_dispatch_store(root: Path, messages: int = 40) -> dict[tuple[str, int], list[int]]:
    """Write the store; returns ``(queue, queue id) -> commit-log offsets`` of its multi-dispatch units."""
    config = MessageStoreConfig.small(str(root))
    clock = ManualClock()
    counters: dict[tuple[str, int], int] = {}
    units: dict[tuple[str, int], list[int]] = {}
    with MessageStore.open(str(root), config, clock=clock, threaded=False) as store:
        for i in range(messages):
            queue_id = (i // len(ROUTES)) % 2
            names = ROUTES[i % len(ROUTES)]
            targets = [(n, 0 if is_lmq_topic(n) else queue_id) for n in names]
            props = {}
            if names:
                props = {"INNER_MULTI_DISPATCH": ",".join(names),
                         "INNER_MULTI_QUEUE_OFFSET": ",".join(str(counters.get(t, 0)) for t in targets)}
            r = store.put_message(Message("Chat", b"hello %d " % i * (1 + i % 5), tags=f"T{i % 3}",
                                          keys=[f"k{i}"], queue_id=queue_id, properties=props))
            assert r.ok, r
            store.step()  # the record's own unit first, as the broker's dispatcher does
            rec = store.look_message_by_offset(r.wrote_offset)
            assert rec is not None
            for t in targets:
                q = counters.get(t, 0)
                cq = store.consume_queue_store.find_consume_queue(*t)
                assert cq is not None
                assert cq.put_message_position_info(r.wrote_offset, r.append_result.wrote_bytes, rec.tags_code, q)
                counters[t] = q + 1
                units.setdefault(t, []).append(r.wrote_offset)
            clock.advance(1000)
    return units
