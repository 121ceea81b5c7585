"""Dispatch: the ReputMessageService turns CommitLog records into ConsumeQueue units and index keys.

It walks the CommitLog from ``reput_from_offset`` (spec §6.6): every valid record becomes a
``DispatchRequest`` handed to each ``CommitLogDispatcher`` (build consume queue, build index),
a blank record jumps to the next file, a damaged record with a known size is skipped, anything
else stops the round. Listeners are told about arriving messages so long-polling readers wake.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from rmqlab.codec import flags
from rmqlab.codec.walk import DispatchRequest, check_message_and_return_size, new_dispatch_request
from rmqlab.events import Dispatched, EventBus
from rmqlab.faults import crash_point

if TYPE_CHECKING:
    from rmqlab.store.commit_log import CommitLog, DispatchHint
    from rmqlab.store.consume_queue_store import ConsumeQueueStore
    from rmqlab.store.index_service import IndexService
    from rmqlab.store.store_checkpoint import StoreCheckpoint

__all__ = [
    "CommitLogDispatcher",
    "CommitLogDispatcherBuildConsumeQueue",
    "CommitLogDispatcherBuildIndex",
    "ReputMessageService",
]

_TX_MASK = 0xC
_HINT_HEAD = struct.Struct(">ii12xqq")  # TOTALSIZE, MAGICCODE, QUEUEOFFSET@20, PHYSICALOFFSET@28
_LONG = struct.Struct(">q")
_CQ_TYPES = (flags.TRANSACTION_NOT_TYPE, flags.TRANSACTION_COMMIT_TYPE)


def _from_hint(
    buf: memoryview, pos: int, limit: int, offset: int, hint: DispatchHint, v5: bool
) -> DispatchRequest | None:
    """The DispatchRequest of the record at ``pos`` (absolute ``offset``) built from what the
    writer recorded, if the stored header agrees with it (TOTALSIZE, magic, queue offset,
    physical offset, store timestamp); None means "parse the record instead".

    This is the same request ``check_message_and_return_size`` would return for the record the
    writer encoded (the writer only records fields it knows the parser reads back unchanged),
    so reput still walks the log offset by offset exactly as RocketMQ does; the hint only saves
    re-parsing properties that were built a moment ago.
    """
    size, queue_offset, store_ts, ts_pos, d = hint
    if pos + size > limit:
        return None
    total, magic, stored_queue_offset, phys = _HINT_HEAD.unpack_from(buf, pos)
    if (
        total != size
        or phys != offset
        or stored_queue_offset != queue_offset
        or not (magic == flags.MESSAGE_MAGIC_CODE_V1 or (v5 and magic == flags.MESSAGE_MAGIC_CODE_V2))
        or _LONG.unpack_from(buf, pos + ts_pos)[0] != store_ts
    ):
        return None
    topic, queue_id, tags_code, keys, uniq_key, sys_flag, prepared, properties = d
    return new_dispatch_request(
        topic, queue_id, offset, size, tags_code, store_ts, queue_offset, keys, uniq_key,
        sys_flag, prepared, properties,
    )  # fmt: skip


class CommitLogDispatcher(Protocol):
    def dispatch(self, request: DispatchRequest) -> None: ...


class CommitLogDispatcherBuildConsumeQueue:
    """Appends a CQ unit for NOT and COMMIT transaction types (PREPARED/ROLLBACK never enter a CQ)."""

    def __init__(self, consume_queue_store: ConsumeQueueStore, checkpoint: StoreCheckpoint,
                 bus: EventBus) -> None:
        self.cq_store = consume_queue_store
        self.checkpoint = checkpoint
        self.bus = bus

    def dispatch(self, req: DispatchRequest) -> None:
        if (req.sys_flag & _TX_MASK) not in _CQ_TYPES:
            return
        if self.cq_store.put_message_position_info(
            req.topic, req.queue_id, req.commit_log_offset, req.msg_size, req.tags_code,
            req.consume_queue_offset,
        ):
            self.checkpoint.logics_msg_timestamp = req.store_timestamp
        if self.bus.active:
            self.bus.publish(Dispatched(req.topic, req.queue_id, req.consume_queue_offset,
                                        req.commit_log_offset, req.msg_size, req.tags_code,
                                        req.store_timestamp))


class CommitLogDispatcherBuildIndex:
    def __init__(self, index_service: IndexService, enabled: bool) -> None:
        self.index_service = index_service
        self.enabled = enabled

    def dispatch(self, req: DispatchRequest) -> None:
        crash_point("after_cq_put_before_index_put")
        if self.enabled:
            self.index_service.build_index(req)


class ReputMessageService:
    """Builds consume queues and the index behind the CommitLog. ``run_once`` dispatches all
    complete records between ``reput_from_offset`` and the CommitLog's max offset."""

    name = "reput"

    def __init__(
        self,
        commit_log: CommitLog,
        dispatchers: list[CommitLogDispatcher],
        *,
        rocketmq_version: str = "4.9.8",
        delay_level_table: dict[int, int] | None = None,
    ) -> None:
        self.commit_log = commit_log
        self.dispatchers = dispatchers
        self.version = rocketmq_version
        self.delay_level_table = delay_level_table or {}
        self.max_delay_level = max(self.delay_level_table, default=0)
        self.reput_from_offset = 0
        self.listeners: list[Callable[[DispatchRequest], None]] = []
        self.lock = threading.Lock()
        self.arrived = threading.Condition()

    def interval_ms(self) -> float:
        return 1.0

    def dispatch_behind_bytes(self) -> int:
        return max(0, self.commit_log.get_max_offset() - self.reput_from_offset)

    def is_commit_log_available(self) -> bool:
        return self.reput_from_offset < self.commit_log.get_max_offset()

    def do_dispatch(self, req: DispatchRequest) -> None:
        for d in self.dispatchers:
            d.dispatch(req)

    def run_once(self) -> int:
        """Dispatch everything available now; returns the number of records dispatched."""
        with self.lock:
            count = self._reput()
        if count:
            with self.arrived:
                self.arrived.notify_all()
        return count

    def _reput(self) -> int:
        cl = self.commit_log
        count = 0
        min_offset = cl.get_min_offset()
        if self.reput_from_offset < min_offset:
            self.reput_from_offset = min_offset
        end = cl.get_max_offset()
        check = check_message_and_return_size
        listeners = self.listeners
        dispatchers = self.dispatchers
        hints = cl.dispatch_hints
        v5 = self.version != "4.9.8"
        while self.reput_from_offset < end:
            sel = cl.get_data(self.reput_from_offset)
            if sel is None:
                break
            try:
                buf, limit, pos = sel.buffer, sel.size, 0
                if limit <= 0:
                    return count
                while pos < limit:
                    hint = hints.pop(self.reput_from_offset, None) if hints else None
                    req = None if hint is None else _from_hint(buf, pos, limit, self.reput_from_offset, hint, v5)
                    if req is not None:
                        size, ok = req.msg_size, True
                    else:
                        size, ok, req = check(
                            buf, pos, check_crc=False, read_body=False, rocketmq_version=self.version,
                            delay_level_table=self.delay_level_table, max_delay_level=self.max_delay_level,
                        )
                    if ok and size > 0 and req is not None:
                        for d in dispatchers:
                            d.dispatch(req)
                        for listener in listeners:
                            listener(req)
                        pos += size
                        self.reput_from_offset += size
                        count += 1
                    elif ok and size == 0:  # blank: the rest of this file is filler
                        self.reput_from_offset = cl.roll_next_file(self.reput_from_offset)
                        break
                    elif size > 0:  # damaged but sized: skip it, like RocketMQ
                        pos += size
                        self.reput_from_offset += size
                    else:
                        return count
            finally:
                sel.release()
        return count

    def wait_for_arrival(self, timeout_s: float) -> bool:
        """Block until new records were dispatched or ``timeout_s`` passes (long polling)."""
        with self.arrived:
            return self.arrived.wait(timeout_s)
