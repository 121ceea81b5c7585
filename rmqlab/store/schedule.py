"""ScheduleMessageService: delayed messages come due (4.9.8: the store's; 5.x: the broker's).

A put with a delay level is stored in ``SCHEDULE_TOPIC_XXXX``, queue ``level - 1``
(``CommitLog._schedule``), and dispatch writes the time it is due as the unit's tags code
(spec 2.10). One task per level (RocketMQ's ``DeliverDelayedMessageTimerTask``) walks that queue
from its offset: a unit that is due (its time, capped at now + the level's delay, has come) is
put back into its real topic and queue (``CommitLog.put_timeup``) and the level's offset moves
past it; the first unit that is not due yet stops the task until its next run. A task runs
1 s after start, then every 100 ms; its offsets are persisted to ``config/delayOffset.json``
every ``flush_delay_offset_interval`` ms (first after 10 s) and at shutdown, and loaded (and
corrected into each queue's [min, max]) at open. RocketMQ's rules are kept where they matter
to what is stored:

* units are walked to the end of the consume queue file that holds the task's offset; the next
  run goes on from there;
* a unit whose record is gone (expired) is skipped, and so is one whose real topic is the
  transaction half topic ("[BUG]" in RocketMQ's log);
* a record the put refuses (a full disk, an invalid real topic) or cannot rebuild (no
  ``REAL_TOPIC``, a ``REAL_QID`` that is not an int) stops its level at that unit, retried
  every 100 ms, as RocketMQ retries it; ``status()`` says which and why (RocketMQ only logs).

One rule goes beyond RocketMQ's. 4.9.8's abnormal recovery dispatches schedule records again
before the delay levels are parsed, so their units get the tag's hash as tags code, not a due
time (spec 2.10; rmqlab writes the same bytes). 4.9.8 then delivers those messages at once, up
to two hours early. rmqlab takes a tags code below 2**31 (a hash: a due time is an epoch
millisecond) for what it is and computes the due time from the record's store time, as RocketMQ
itself does when a unit's ext entry is lost; ``status()`` counts them (``recomputed``) and the
log says what 4.9.8 would have done.

Time is the store's clock, so a notebook makes a message due with ``clock.advance(...)`` and one
``store.step()``. Delivery is synchronous (``enableScheduleAsyncDeliver`` off, RocketMQ's
default).
"""

from __future__ import annotations

import logging
import os
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rmqlab.clock import Clock
from rmqlab.codec.consume_queue_unit import is_ext_addr
from rmqlab.codec.delay_offset import DelayOffsetError, decode_delay_offsets, encode_delay_offsets
from rmqlab.codec.flags import PROPERTY_REAL_QUEUE_ID, PROPERTY_REAL_TOPIC
from rmqlab.codec.message import MessageRecord
from rmqlab.config import MessageStoreConfig
from rmqlab.errors import ScheduleRecordError
from rmqlab.events import EventBus, ScheduleDelivered
from rmqlab.store.results import PutMessageResult
from rmqlab.store.topic_config import load_config, string_to_file

if TYPE_CHECKING:
    from rmqlab.store.consume_queue import ConsumeQueue

__all__ = ["DELAY_OFFSET_FILE", "RECENT_DELIVERIES", "LevelStatus", "ScheduleMessageService"]

log = logging.getLogger(__name__)

DELAY_OFFSET_FILE = "delayOffset.json"
FIRST_DELAY_TIME = 1000  # ms from start to each level's first run
DELAY_FOR_A_WHILE = 100  # ms between runs
PERSIST_FIRST_DELAY = 10_000  # ms from start to the first periodic persist
_TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
_NOT_A_TIME = 1 << 31  # a tags code below this is a tag's hash (a Java int), not an epoch-ms due time
RECENT_DELIVERIES = 64  # deliveries kept for ``recent_deliveries`` (a view made later still lists them)


@dataclass(slots=True)
class LevelStatus:
    """One delay level: what ``status()`` reports."""

    level: int
    delay_ms: int
    offset: int  # the persisted offset: the unit after the last one delivered
    task_offset: int  # where the next run starts (past skipped units too)
    max_offset: int  # units in the schedule queue
    due_ms: int  # clock time of the next run
    delivered: int = 0  # since open
    skipped: int = 0  # since open: record gone, or a transaction half
    recomputed: int = 0  # since open: units whose tags code was a hash, due time taken from the record
    stuck: str = ""  # why the unit at task_offset is not delivered ("" when nothing is wrong)
    next_due_ms: int | None = None  # due time of the unit at task_offset (None: nothing waits)

    @property
    def waiting(self) -> int:
        """Units not delivered yet."""
        return max(0, self.max_offset - self.offset)


class ScheduleMessageService:
    """Delivers due delayed messages; ``run_once()`` for the runners (see ``services.py``).

    ``find_queue(queue_id)`` gives ``SCHEDULE_TOPIC_XXXX``'s consume queue (or None),
    ``look(offset, size)`` the record a unit points at, ``pickup(offset, size)`` its store time
    (-1 when it is gone), ``deliver(record)`` puts it back
    (``CommitLog.put_timeup`` plus the store's after-put work).
    """

    name = "schedule"

    def __init__(
        self,
        config: MessageStoreConfig,
        clock: Clock,
        bus: EventBus,
        config_dir: str,
        *,
        find_queue: Callable[[int], ConsumeQueue | None],
        look: Callable[[int, int], MessageRecord | None],
        pickup: Callable[[int, int], int],
        deliver: Callable[[MessageRecord], PutMessageResult],
    ) -> None:
        self.config = config
        self.clock = clock
        self.bus = bus
        self.path = os.path.join(config_dir, DELAY_OFFSET_FILE)
        self.version = config.rocketmq_version
        self.delay_level_table = config.delay_level_table
        self.offset_table: dict[int, int] = {}
        self.data_version: dict[str, int] | None = None  # 5.x: dataVersion as loaded / last written
        self.corrections: list[str] = []  # what load() corrected, as RocketMQ logs it
        self.loaded_from: str | None = None  # "file", "bak" or None (nothing to load)
        self._find_queue = find_queue
        self._look = look
        self._pickup = pickup
        self._deliver = deliver
        self._levels: dict[int, LevelStatus] = {}
        self._recomputed_up_to: dict[int, int] = {}  # level -> last unit counted in ``recomputed``
        self._persist_due = 0
        self._persisted: dict[int, int] | None = None
        # the last deliveries with the clock time they happened, kept whether or not anyone listens
        self.recent: deque[tuple[int, ScheduleDelivered]] = deque(maxlen=RECENT_DELIVERIES)
        self.started = False

    # ------------------------------------------------------------------ load / persist
    def load(self) -> bool:
        """``ConfigManager.load`` then ``correctDelayOffset``: the file, else its ``.bak``
        (missing or empty: nothing to load, still True); False when the one it must read is not
        a delay offset table. Call after the consume queues are recovered, as 4.9.8 does."""
        ok, self.loaded_from = load_config(self.path, self._decode, (DelayOffsetError,))
        if not ok:
            return False
        self._correct_delay_offset()
        self._persisted = dict(self.offset_table)
        return True

    @property
    def load_error(self) -> str:
        return f"{self.path}.bak: not a delay offset table (and {DELAY_OFFSET_FILE} unreadable)"

    def _decode(self, text: str) -> None:
        table, version = decode_delay_offsets(text)
        self.offset_table.update(table)
        self.data_version = version

    def _correct_delay_offset(self) -> None:
        """Each level's offset into its queue's [min, max] (``correctDelayOffset``); a queue the
        store lacks counts as empty, as RocketMQ's lookup creates it empty."""
        for level in sorted(self.delay_level_table):
            current = self.offset_table.get(level)
            if current is None:
                continue
            cq = self._find_queue(level - 1)
            lo = cq.get_min_offset_in_queue() if cq is not None else 0
            hi = cq.get_max_offset_in_queue() if cq is not None else 0
            fixed = lo if current < lo else hi if current > hi else current
            if fixed != current:
                note = (f"delay level {level}: offset {current} outside its schedule queue [{lo}, {hi}], "
                        f"corrected to {fixed}")
                log.error("correct delay offset: %s", note)
                self.corrections.append(note)
                self.offset_table[level] = fixed

    def encode(self) -> str:
        return encode_delay_offsets(self.offset_table, self.version, self.data_version)

    def persist(self) -> None:
        """Write ``config/delayOffset.json`` (``MixAll.string2File``: the old content to
        ``.bak``). 5.x's ``dataVersion`` counter moves when the table changed since the last
        write."""
        if self.version != "4.9.8" and (self.data_version is None or self.offset_table != self._persisted):
            old = self.data_version or {}
            self.data_version = {"counter": old.get("counter", 0) + 1, "stateVersion": old.get("stateVersion", 0),
                                 "timestamp": self.clock.now_ms()}
        string_to_file(self.encode(), self.path, rocketmq_version=self.version)
        self._persisted = dict(self.offset_table)

    # ------------------------------------------------------------------ running
    def start(self) -> None:
        """One task per level, each first run ``FIRST_DELAY_TIME`` from now, from its offset."""
        now = self.clock.now_ms()
        self._levels = {
            level: LevelStatus(level, delay, self.offset_table.get(level, 0), self.offset_table.get(level, 0), 0,
                               now + FIRST_DELAY_TIME)
            for level, delay in sorted(self.delay_level_table.items())
        }  # fmt: skip
        self._persist_due = now + PERSIST_FIRST_DELAY
        self.started = True

    def interval_ms(self) -> float:
        if not self._levels:
            return float(DELAY_FOR_A_WHILE)
        wait = min(s.due_ms for s in self._levels.values()) - self.clock.now_ms()
        return float(min(DELAY_FOR_A_WHILE, max(1, wait)))

    def run_once(self) -> int:
        """Run every level whose task is due; persist when that is due. Returns the messages
        delivered."""
        if not self.started:
            return 0
        delivered = 0
        now = self.clock.now_ms()
        for state in self._levels.values():
            if now >= state.due_ms:
                delivered += self._run_level(state, now)
        if now >= self._persist_due:
            self._persist_due = now + self.config.flush_delay_offset_interval
            self.persist()
        return delivered

    def _run_level(self, state: LevelStatus, now: int) -> int:
        """``executeOnTimeup`` of one level: deliver the due units from ``task_offset`` to the end
        of their consume queue file. Returns how many were delivered."""
        state.due_ms = now + DELAY_FOR_A_WHILE
        cq = self._find_queue(state.level - 1)
        if cq is None:
            return 0
        state.max_offset = cq.get_max_offset_in_queue()
        start = state.task_offset
        sbr = cq.get_index_buffer(start)
        if sbr is None:
            lo, hi = cq.get_min_offset_in_queue(), state.max_offset
            if lo > start or hi < start:
                reset = lo if lo > start else hi
                log.error("schedule CQ offset invalid. offset=%d, cqMinOffset=%d, cqMaxOffset=%d, queueId=%d",
                          start, lo, hi, state.level - 1)
                state.task_offset = reset
            return 0
        delivered = 0
        try:
            data = bytes(sbr.buffer[: sbr.size - sbr.size % 20])
        finally:
            sbr.release()
        # the units come out a chunk at a time with their ext addresses resolved by numpy (an
        # address it cannot resolve stays one, for _due_from_ext): the walk usually stops at the
        # first unit, not yet due, of a long queue
        for i, (phy, size, tags_code) in enumerate(cq.iter_units_resolved(data)):
            if is_ext_addr(tags_code):
                tags_code = self._due_from_ext(cq, state, phy, size, tags_code)
            if tags_code < _NOT_A_TIME:  # (an ext unit of 4.9.8's re-dispatch holds the hash too)
                tags_code = self._due_from_record(state, start + i, phy, size, tags_code)
            at = self.clock.now_ms()
            due = at if tags_code > at + state.delay_ms else tags_code  # correctDeliverTimestamp
            offset = start + i
            state.task_offset = offset
            if due > at:
                state.stuck = ""
                return delivered
            rec = self._look(phy, size)
            if rec is None:  # expired with its CommitLog file
                state.skipped += 1
                continue
            if rec.properties.get(PROPERTY_REAL_TOPIC) == _TRANS_HALF_TOPIC:
                log.error("[BUG] the real topic of schedule msg is %s, discard the msg at %d", _TRANS_HALF_TOPIC, phy)
                state.skipped += 1
                continue
            try:
                result = self._deliver(rec)
            except ScheduleRecordError as e:
                self._stuck(state, str(e))
                return delivered
            if not result.ok:
                self._stuck(state, f"the put of the record at {phy} was refused: {result.status.name} "
                                   f"{result.reason}".rstrip())  # fmt: skip
                return delivered
            self.offset_table[state.level] = offset + 1
            state.offset = offset + 1
            state.delivered += 1
            state.stuck = ""
            delivered += 1
            props = rec.properties
            event = ScheduleDelivered(state.level, offset, phy, props[PROPERTY_REAL_TOPIC],
                                      int(props[PROPERTY_REAL_QUEUE_ID]), result.wrote_offset)
            self.recent.append((self.clock.now_ms(), event))
            if self.bus.active:
                self.bus.publish(event)
        state.task_offset = start + len(data) // 20
        return delivered

    def _due_from_ext(self, cq: ConsumeQueue, state: LevelStatus, phy: int, size: int, address: int) -> int:
        """The due time of a unit whose tags code is a ConsumeQueueExt address: its ext unit's
        tags code; when that is lost, the record's store time + the level's delay, as RocketMQ
        re-computes it ("can't find consume queue extend file content")."""
        unit = cq.get_ext(address)
        if unit is not None:
            return unit.tags_code
        log.error("[BUG] can't find consume queue extend file content! addr=%d, offsetPy=%d, sizePy=%d",
                  address, phy, size)
        stored = self._pickup(phy, size)
        return address if stored < 0 else stored + state.delay_ms  # (gone: skipped below, as in Java)

    def _due_from_record(self, state: LevelStatus, offset: int, phy: int, size: int, tags_code: int) -> int:
        """The due time of a unit whose tags code is a tag's hash (see the module docstring):
        the record's store time + the level's delay (``computeDeliverTimestamp``); the hash as
        it is when the record is gone (the unit is then skipped)."""
        stored = self._pickup(phy, size)
        if stored < 0:
            return tags_code
        due = stored + state.delay_ms
        if offset <= self._recomputed_up_to.get(state.level, -1):
            return due  # counted (and logged) at an earlier run
        self._recomputed_up_to[state.level] = offset
        if not state.recomputed:
            log.warning("delay level %d, schedule queue offset %d: tags code %d is not a due time (4.9.8's "
                        "abnormal recovery re-dispatched the record before parsing the delay levels); due at "
                        "%d, its store time + %d ms (RocketMQ 4.9.8 delivers it at once)", state.level, offset,
                        tags_code, due, state.delay_ms)  # fmt: skip
        state.recomputed += 1
        return due

    def _stuck(self, state: LevelStatus, why: str) -> None:
        if state.stuck != why:  # once per cause, not every 100 ms
            log.error("delay level %d stops at schedule queue offset %d: %s (RocketMQ retries it every %d ms)",
                      state.level, state.task_offset, why, DELAY_FOR_A_WHILE)
        state.stuck = why

    def status(self) -> list[LevelStatus]:
        """Every level's offsets and progress (a copy; ``max_offset`` and ``next_due_ms`` read now)."""
        out = []
        for level, state in sorted(self._levels.items()):
            cq = self._find_queue(level - 1)
            hi = cq.get_max_offset_in_queue() if cq is not None else 0
            due = self._waiting(cq, state, state.task_offset, 1) if cq is not None else []
            out.append(LevelStatus(level, state.delay_ms, state.offset, state.task_offset, hi, state.due_ms,
                                   state.delivered, state.skipped, state.recomputed, state.stuck,
                                   due[0][1] if due else None))  # fmt: skip
        return out

    def waiting(self, level: int, limit: int = 200) -> list[tuple[int, int]]:
        """The units of ``level`` not delivered yet (from its offset), at most ``limit``, as
        ``(schedule queue offset, due ms)``: the due time as the level's task reads it (an ext
        address resolved, a tag hash replaced by store time + delay), before its cap at now +
        delay. Reads only (nothing counted or logged); [] before ``start()``."""
        state = self._levels.get(level)
        cq = self._find_queue(level - 1)
        return [] if state is None or cq is None else self._waiting(cq, state, state.offset, limit)

    def _waiting(self, cq: ConsumeQueue, state: LevelStatus, start: int, limit: int) -> list[tuple[int, int]]:
        end = min(cq.get_max_offset_in_queue(), start + limit)
        out = []
        for offset in range(max(start, cq.get_min_offset_in_queue()), end):
            unit = cq.get_unit(offset)
            if unit is None:
                break
            phy, size, tags_code = unit
            if is_ext_addr(tags_code):
                ext = cq.get_ext(tags_code)
                tags_code = ext.tags_code if ext is not None else -1
            if tags_code < _NOT_A_TIME:
                stored = self._pickup(phy, size)
                if stored < 0:
                    continue  # gone: the task skips it
                tags_code = stored + state.delay_ms
            out.append((offset, tags_code))
        return out

    def recent_deliveries(self) -> list[tuple[int, ScheduleDelivered]]:
        """The last ``RECENT_DELIVERIES`` deliveries as ``(clock ms, event)``, oldest first."""
        return list(self.recent)

    def shutdown(self) -> None:
        """Stop and persist (``ScheduleMessageService.shutdown``)."""
        if self.started:  # persist first: a shutdown cut short and called again writes it then
            self.persist()
            self.started = False

    def describe(self) -> dict[str, Any]:
        """A JSON-ready summary (CLI, notebooks)."""
        return {
            "file": self.path,
            "loaded_from": self.loaded_from,
            "corrections": list(self.corrections),
            "levels": [
                {"level": s.level, "delay_ms": s.delay_ms, "offset": s.offset, "max_offset": s.max_offset,
                 "waiting": s.waiting, "delivered": s.delivered, "skipped": s.skipped, "recomputed": s.recomputed,
                 "stuck": s.stuck}
                for s in self.status()
            ],
        }  # fmt: skip

