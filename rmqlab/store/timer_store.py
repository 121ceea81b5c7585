"""TimerMessageStore: 5.x timer messages come due (RocketMQ 5.3.3 ``store/timer``).

A 5.3.3 put of a timer message is stored in ``rmq_sys_wheel_timer`` queue 0 with ``TIMER_OUT_MS``
(``CommitLog._transform_timer``). This service is RocketMQ's enqueue, dequeue and flush threads
run as one ``run_once()`` (threaded or stepped by ``store.step()``), in this order:

* **enqueue** (``enqueue`` / ``doEnqueue``): every unit of the timer queue from
  ``curr_queue_offset`` on: a message whose ``TIMER_OUT_MS`` is before the wheel's write time
  (now, in ticks) is handed back at once (``TIMER_ENQUEUE_MS`` = Long.MAX_VALUE); any other gets
  a 52-byte unit in ``timerlog/`` chained to its slot (``prevPos`` = the slot's ``lastPos``) and
  the slot's ``lastPos``/``num`` move. A due time at or past the roll window
  (``timer_roll_window_slot`` ticks ahead) is parked as a ROLL unit in a slot inside it.
* **dequeue** (``dequeue``): each slot from ``curr_read_time_ms`` up to the write time: its chain
  walked from ``lastPos``; the DELETE units' ``TIMER_DEL_UNIQKEY`` collected first, then every
  other unit in enqueue order put back (``convert``/``doPut``): into ``REAL_TOPIC``/``REAL_QID``
  with ``TIMER_ENQUEUE_MS``/``TIMER_DEQUEUE_MS`` added (``REAL_TOPIC``/``REAL_QID`` stay in the
  stored string: RocketMQ serialises the map before clearing them), or for a ROLL unit back into
  ``rmq_sys_wheel_timer`` with ``TIMER_ROLL_TIMES`` + 1; a message whose UNIQ_KEY a delete marker
  names (as the bare key, or as ``REAL_TOPIC+UNIQ_KEY``, ``buildDeleteKey`` of newer brokers; as
  ``rmqlab timers`` reads them), a delete marker itself, and a record that is gone are not
  delivered. A put refused with
  SERVICE_NOT_AVAILABLE is retried at the next run from that message (RocketMQ retries it in a
  loop); MESSAGE_ILLEGAL / PROPERTIES_SIZE_EXCEEDED drop it, other refusals after 3 retries.
* **flush** (``TimerFlushService``, every ``timer_flush_interval_ms``): the checkpoint values
  prepared (``prepareTimerCheckPoint``), the timerlog flushed, the wheel's changed slots
  written, ``config/timercheck`` written.
* **cleanup** (every 30 s): timerlog files whose last unit's message lies below the commit log's
  min offset are deleted.

``load()`` is ``recover()``: the timerlog re-read from one file before the checkpoint's flush
position (units revise their slots' ``lastPos``; the log is truncated at the first bad unit), the
queue offset taken from the last unit's message (capped by the checkpoint's master offset and
corrected into the queue), the read time from the checkpoint but not older than now - 7 days +
60 ticks. RocketMQ's at-least-once follows: after a crash, what was enqueued or delivered since
the last checkpoint flush is enqueued or delivered again. ``shutdown()`` writes the checkpoint
and flushes the timerlog but, as RocketMQ (``TimerWheel.shutdown(false)``), not the wheel: the
next load rebuilds the slots from the timerlog.

A put back that fails is handled as ``doPut`` does: MESSAGE_ILLEGAL and PROPERTIES_SIZE_EXCEEDED
drop the message; SERVICE_NOT_AVAILABLE is retried; any other refusal (a file that could not be
created, an unknown error) is retried too, so delivery waits there rather than lose the message,
unless ``timer_skip_unknown_error`` says to skip (drop) it.

Not modelled: the timer metrics file (``config/timermetrics``), warm-up, slave dequeue handover
(a SLAVE loads and recovers but does not run).
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rmqlab.clock import Clock
from rmqlab.codec import flags
from rmqlab.codec.consume_queue_unit import units_view
from rmqlab.codec.java_hash import java_hash
from rmqlab.codec.message import MessageRecord
from rmqlab.codec.timer_checkpoint import TimerCheckpoint
from rmqlab.codec.timer_log import (
    MAGIC_DEFAULT,
    MAGIC_DELETE,
    MAGIC_ROLL,
    UNIT_SIZE,
    TimerLogUnit,
    scan_timer_log,
)
from rmqlab.codec.timer_wheel import SLOTS_TOTAL, TIMER_BLANK_SLOTS
from rmqlab.codec.walk import parse_java_long
from rmqlab.config import MessageStoreConfig
from rmqlab.events import EventBus, TimerDequeued, TimerEnqueued
from rmqlab.store.results import PutMessageResult, PutMessageStatus
from rmqlab.store.timer_files import TimerCheckpointFile, TimerLog, TimerWheel

if TYPE_CHECKING:
    from rmqlab.store.consume_queue import ConsumeQueue

__all__ = ["RECENT_EVENTS", "TIMER_CHECK_FILE", "SlotStatus", "TimerMessageStore", "TimerStatus"]

log = logging.getLogger(__name__)

TIMER_CHECK_FILE = "timercheck"
LONG_MAX = 2**63 - 1
CLEAN_INTERVAL_MS = 30_000  # the timerlog cleanup's fixed rate
_NO_RETRY = (PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED)
RECENT_EVENTS = 64  # enqueues/dequeues kept for ``recent_events`` (a view made later still sees them)
_CHAIN_WALK_LIMIT = 10_000  # units walked per slot by ``slots``; past it only the slot's num is known


@dataclass(slots=True)
class TimerStatus:
    """What ``status()`` reports (RocketMQ logs most of it as its progress line)."""

    curr_read_time_ms: int
    curr_write_time_ms: int
    curr_queue_offset: int
    max_queue_offset: int
    timer_log_end: int
    congest_num: int  # the num of every slot from the read time on (getAllCongestNum)
    enqueued: int = 0
    delivered: int = 0
    rolled: int = 0
    deleted: int = 0
    dropped: int = 0
    missing: int = 0
    stuck: str = ""

    @property
    def enqueue_behind(self) -> int:
        return max(0, self.max_queue_offset - self.curr_queue_offset)


@dataclass(frozen=True, slots=True)
class SlotStatus:
    """One valid wheel slot as ``slots()`` reports it: its tick's time, the slot's own fields
    (``num`` counts messages minus delete markers, as ``doEnqueue`` keeps it) and its chain's
    units by what dequeue will do with them (``complete`` False when the chain was longer than
    the walk limit, or broken: the counts are then partial)."""

    time_ms: int
    first_pos: int
    last_pos: int
    num: int
    messages: int = 0
    rolls: int = 0
    deletes: int = 0
    complete: bool = True

    @property
    def units(self) -> int:
        return self.messages + self.rolls + self.deletes


class TimerMessageStore:
    """The timer wheel of one store; see the module docstring. ``find_queue()`` gives
    ``rmq_sys_wheel_timer`` queue 0 (or None), ``look(offset, size)`` a record, ``deliver(record,
    topic, queue_id, properties)`` puts a rebuilt copy (``CommitLog.put_rebuilt`` plus the
    store's after-put work), ``min_phy_offset()`` the commit log's min offset."""

    name = "timer"

    def __init__(
        self,
        config: MessageStoreConfig,
        clock: Clock,
        bus: EventBus,
        root: str,
        *,
        find_queue: Callable[[], ConsumeQueue | None],
        look: Callable[[int, int], MessageRecord | None],
        deliver: Callable[[MessageRecord, str, int, dict[str, str]], PutMessageResult],
        min_phy_offset: Callable[[], int],
    ) -> None:
        self.config = config
        self.clock = clock
        self.bus = bus
        self.precision_ms = config.timer_precision_ms
        self.slots_total = SLOTS_TOTAL
        window = config.timer_roll_window_slot
        self.roll_window_slots = (self.slots_total - TIMER_BLANK_SLOTS
                                  if window > self.slots_total - TIMER_BLANK_SLOTS or window < 2 else window)
        self.wheel = TimerWheel(os.path.join(root, "timerwheel"), self.precision_ms, self.slots_total)
        self.timer_log = TimerLog(os.path.join(root, "timerlog"), config.mapped_file_size_timer_log, bus)
        self.checkpoint = TimerCheckpointFile(os.path.join(root, "config", TIMER_CHECK_FILE))
        self._find_queue = find_queue
        self._look = look
        self._deliver = deliver
        self._min_phy_offset = min_phy_offset
        self.curr_read_time_ms = 0
        self.curr_write_time_ms = 0
        self.curr_queue_offset = 0
        self.commit_read_time_ms = 0
        self.commit_queue_offset = 0
        self._last_commit_read_time_ms = 0
        self._last_commit_queue_offset = 0
        self._slot_progress: tuple[int, int] | None = None  # (slot ms, units of it done) of a slot cut short
        self._flush_due = 0
        self._clean_due = 0
        self.random = random.Random(0)  # isReject's draw
        self.counts = {"enqueued": 0, "delivered": 0, "rolled": 0, "deleted": 0, "dropped": 0, "missing": 0}
        self.stuck = ""
        # the last enqueues/dequeues with the clock time they happened, kept whether or not anyone
        # listens on the bus (a view opened later, or one whose subscription latches, still lists
        # them); one small object per timer message beside a timerlog append and a record read
        self.recent: deque[tuple[int, TimerEnqueued | TimerDequeued]] = deque(maxlen=RECENT_EVENTS)
        self.recovered_from = 0  # where recover() started reading the timerlog
        self.loaded = False
        self.started = False
        self.closed = False

    # ------------------------------------------------------------------ load / recover
    def load(self) -> bool:
        """Map the timerlog, then ``recover()``. False when a timerlog file has a wrong size
        (``load_error``)."""
        if not self.timer_log.load():
            return False
        self.recover()
        self.loaded = True
        return True

    @property
    def load_error(self) -> str:
        err = self.timer_log.mapped_file_queue.load_error
        return f"timer log: {err}; mapped_file_size_timer_log is {self.config.mapped_file_size_timer_log}"

    def format_time_ms(self, time_ms: int) -> int:
        return time_ms // self.precision_ms * self.precision_ms

    def recover(self) -> None:
        """``TimerMessageStore.recover`` (see the module docstring)."""
        cp = self.checkpoint.values
        files = self.timer_log.files()
        last_flush = cp.last_timer_log_flush_pos
        if files:
            last_flush -= files[-1].file_size
        self.recovered_from = max(0, last_flush)
        process = self._recover_and_revise(self.recovered_from, check=True)
        self.timer_log.mapped_file_queue.flushed_where = process
        queue_offset = self._revise_queue_offset(process)
        curr = cp.last_timer_queue_offset if queue_offset == -1 else queue_offset + 1
        curr = min(curr, cp.master_timer_queue_offset)
        cq = self._find_queue()
        if cq is not None:
            lo, hi = cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue()
            if curr < lo:
                log.warning("Timer currQueueOffset:%d is smaller than minOffsetInQueue:%d", curr, lo)
                curr = lo
            elif curr > hi:
                log.warning("Timer currQueueOffset:%d is larger than maxOffsetInQueue:%d", curr, hi)
                curr = hi
        self.curr_queue_offset = curr
        self.curr_read_time_ms = max(cp.last_read_time_ms, self._oldest_read_time_ms())
        min_first = self.wheel.check_phy_pos(self.curr_read_time_ms, process)
        if min_first < process:
            log.warning("Timer recheck because of minFirst:%d processOffset:%d", min_first, process)
            self._recover_and_revise(min_first, check=False)
        self.commit_read_time_ms = self.curr_read_time_ms
        self.commit_queue_offset = self.curr_queue_offset
        self.prepare_checkpoint(master=False)

    def _oldest_read_time_ms(self) -> int:
        """Ticks older than this are skipped at load: the wheel holds 7 days."""
        now = self.format_time_ms(self.clock.now_ms())
        return now - self.slots_total * self.precision_ms + TIMER_BLANK_SLOTS * self.precision_ms

    def _recover_and_revise(self, begin: int, *, check: bool) -> int:
        """``recoverAndRevise``: from the file holding ``begin``, every unit revises its slot's
        ``lastPos``; a file's blank moves on to the next file; with ``check``, the first bad unit
        (or unwritten space) ends the walk and the timerlog is truncated there. Returns where the
        walk ended (the process offset)."""
        files = self.timer_log.files()
        if not files:
            return 0
        i = len(files) - 1
        while i > 0 and begin < files[i].file_from_offset:
            i -= 1
        end = files[i].file_from_offset
        for mf in files[i:]:
            buf = mf.buffer[: mf.file_size if check else mf.read_position]
            scan = scan_timer_log(buf)
            units = scan.units
            if len(units):
                times = units["curr_write_time_ms"].astype("int64") + units["delay_ms"].astype("int64")
                for k, t in enumerate(times.tolist()):
                    self.wheel.revise_slot(t, mf.file_from_offset + k * UNIT_SIZE)
            end = mf.file_from_offset + scan.end
            if check and scan.stop not in ("blank", "end"):  # a bad unit or unwritten space: stop here
                if scan.damaged:
                    log.warning("timerlog %s: %s at %d (%s): recovery stops there", mf.name, scan.stop, scan.end,
                                scan.detail)
                break
            # (the blank or the file's end: on to the next file; the unchecked re-read goes on past
            # bad units as RocketMQ does -- rmqlab goes on with the next file)
        if check:
            self.timer_log.mapped_file_queue.truncate_dirty_files(end)
        return end

    def _revise_queue_offset(self, process: int) -> int:
        """``reviseQueueOffset``: the queue offset of the message of the unit that ends at
        ``process`` (-1 when there is none), checked against the timer queue (the unit whose
        commit log offset and size match, looking back from the record's own queue offset)."""
        unit = self.timer_log.unit_at(process - UNIT_SIZE) if process >= UNIT_SIZE else None
        if unit is None:
            return -1
        rec = self._look(unit.offset_py, unit.size_py)
        if rec is None:
            return -1
        cq = self._find_queue()
        if cq is None:
            return rec.queue_offset
        tmp = rec.queue_offset
        for _ in range(20000):
            if tmp < 0:
                log.warning("reviseQueueOffset: the message at %d is not in the timer queue", unit.offset_py)
                break
            sbr = cq.get_index_buffer(tmp)
            if sbr is None:
                tmp -= 1
                continue
            try:
                phy, size, _ = units_view(sbr.buffer[:20]).tolist()[0]
            finally:
                sbr.release()
            if (phy, size) == (unit.offset_py, unit.size_py):
                return tmp
            tmp -= 1
        return rec.queue_offset

    # ------------------------------------------------------------------ checkpoint
    def prepare_checkpoint(self, *, master: bool = True) -> None:
        """``prepareTimerCheckPoint``: the values the next flush writes (a master, once started,
        also moves the master offset and, when read time or queue offset moved, the data
        version)."""
        cp = self.checkpoint.values
        master_offset, version = cp.master_timer_queue_offset, (cp.state_version, cp.timestamp, cp.counter)
        if master:
            master_offset = self.commit_queue_offset
            if (self.commit_read_time_ms != self._last_commit_read_time_ms
                    or self.commit_queue_offset != self._last_commit_queue_offset):
                version = (0, self.clock.now_ms(), cp.counter + 1)  # stateMachineVersion 0 outside controller mode
                self._last_commit_read_time_ms = self.commit_read_time_ms
                self._last_commit_queue_offset = self.commit_queue_offset
        self.checkpoint.values = TimerCheckpoint(
            self.commit_read_time_ms, self.timer_log.mapped_file_queue.flushed_where,
            min(self.commit_queue_offset, master_offset), master_offset, *version)

    def flush(self) -> None:
        """One ``TimerFlushService`` round."""
        self.prepare_checkpoint(master=self.started)
        self.timer_log.mapped_file_queue.flush(0)
        self.wheel.flush()
        self.checkpoint.flush()

    # ------------------------------------------------------------------ running
    def start(self) -> None:
        now = self.clock.now_ms()
        self._maybe_move_write_time()
        self._flush_due = now + self.config.timer_flush_interval_ms
        self._clean_due = now + CLEAN_INTERVAL_MS
        self.started = True

    def interval_ms(self) -> float:
        return 100.0 * self.precision_ms / 1000

    def _maybe_move_write_time(self) -> None:
        now = self.format_time_ms(self.clock.now_ms())
        if self.curr_write_time_ms < now:
            self.curr_write_time_ms = now

    def run_once(self) -> dict[str, int]:
        """Enqueue what the timer queue holds, dequeue every due slot, flush and clean when due.
        Returns how many messages were enqueued and handed back this round."""
        if not self.started or self.closed:
            return {}
        before = dict(self.counts)
        self._maybe_move_write_time()
        self.enqueue()
        self._maybe_move_write_time()
        self.dequeue()
        now = self.clock.now_ms()
        if now >= self._flush_due:
            self._flush_due = now + self.config.timer_flush_interval_ms
            self.flush()
        if now >= self._clean_due:
            self._clean_due = now + CLEAN_INTERVAL_MS
            self.clean()
        return {k: v - before[k] for k, v in self.counts.items() if v != before[k]}

    def enqueue(self) -> int:
        """``enqueue(0)`` plus ``TimerEnqueuePutService``: every unit from ``curr_queue_offset``
        (to the end of its consume queue file, as RocketMQ's iterator). Returns units read."""
        cq = self._find_queue()
        if cq is None:
            return 0
        lo = cq.get_min_offset_in_queue()
        if self.curr_queue_offset < lo:
            log.warning("Timer currQueueOffset:%d is smaller than minOffsetInQueue:%d", self.curr_queue_offset, lo)
            self.curr_queue_offset = lo
        done = 0
        while True:
            start = self.curr_queue_offset
            sbr = cq.get_index_buffer(start)
            if sbr is None:
                break
            try:
                units = units_view(sbr.buffer[: sbr.size - sbr.size % 20]).tolist()
            finally:
                sbr.release()
            if not units:
                break
            for i, (phy, size, _tags) in enumerate(units):
                if size == 0x7FFFFFFF:  # a pre-blank filler unit
                    self.curr_queue_offset = start + i + 1
                    continue
                if not self._enqueue_one(start + i, phy, size):
                    self.commit_queue_offset = self.curr_queue_offset
                    return done
                done += 1
                self.curr_queue_offset = start + i + 1
        self.commit_queue_offset = self.curr_queue_offset
        return done

    def _enqueue_one(self, queue_offset: int, phy: int, size: int) -> bool:
        """One timer queue unit; False when it must be tried again (RocketMQ holds a moment and
        reads it again: an unparseable TIMER_OUT_MS, a full timerlog)."""
        rec = self._look(phy, size)
        if rec is None:  # enqueue_get_miss: gone with its commit log file
            self.counts["missing"] += 1
            return True
        try:
            delayed = parse_java_long(rec.properties.get(flags.PROPERTY_TIMER_OUT_MS) or "")
        except ValueError:
            return self._stuck(f"timer queue offset {queue_offset}: the record at {phy} has no TIMER_OUT_MS "
                               f"a Java long can hold ({rec.properties.get(flags.PROPERTY_TIMER_OUT_MS)!r})")
        real_topic = rec.properties.get(flags.PROPERTY_REAL_TOPIC)
        if delayed < self.curr_write_time_ms:  # due already: straight to the put
            self._note(TimerEnqueued(queue_offset, phy, -1, self.format_time_ms(delayed), real_topic))
            if not self._put_back(rec, LONG_MAX, MAGIC_DEFAULT, self.format_time_ms(delayed), phy, None):
                return self._stuck(f"timer queue offset {queue_offset}: the put back of the due record at {phy} "
                                   f"was refused, retried")
            self.stuck = ""
            return True
        pos, slot_ms, magic = self._do_enqueue(phy, size, delayed, rec)
        if pos == -1:
            return self._stuck(f"timer queue offset {queue_offset}: no timerlog space for its unit")
        self.stuck = ""
        self.counts["enqueued"] += 1
        self._note(TimerEnqueued(queue_offset, phy, pos, slot_ms, real_topic, bool(magic & MAGIC_ROLL),
                                 bool(magic & MAGIC_DELETE)))
        return True

    def _note(self, event: TimerEnqueued | TimerDequeued) -> None:
        """Keep ``event`` in ``recent`` and publish it."""
        self.recent.append((self.clock.now_ms(), event))
        if self.bus.active:
            self.bus.publish(event)

    def _stuck(self, why: str) -> bool:
        if self.stuck != why:
            log.error("timer: %s", why)
        self.stuck = why
        return False

    def _do_enqueue(self, phy: int, size: int, delayed: int, rec: MessageRecord) -> tuple[int, int, int]:
        """``doEnqueue``: append the unit and move the slot. Returns (timerlog offset or -1,
        slot time, magic)."""
        write = self.curr_write_time_ms
        p, window = self.precision_ms, self.roll_window_slots
        magic = MAGIC_DEFAULT
        if delayed - write >= window * p:
            magic |= MAGIC_ROLL
            # just past the window: parked half a window ahead, to give the next roll time
            near = delayed - write - window * p < window // 3 * p
            delayed = write + (window // 2 if near else window) * p
        if rec.properties.get(flags.PROPERTY_TIMER_DEL_UNIQKEY) is not None:
            magic |= MAGIC_DELETE
        real_topic = rec.properties.get(flags.PROPERTY_REAL_TOPIC)
        slot = self.wheel.get_slot(delayed)
        first, last, num, smagic = (slot.first_pos, slot.last_pos, slot.num, slot.magic) if slot else (-1, -1, 0, 0)
        unit = TimerLogUnit(last, magic, write, delayed, phy, size, java_hash(real_topic) if real_topic else 0)
        pos = self.timer_log.append(unit.pack())
        if pos != -1:
            num = num - 1 if magic & MAGIC_DELETE else num + 1
            self.wheel.put_slot(delayed, pos if first == -1 else first, pos, num, smagic)
        return pos, self.format_time_ms(delayed), magic

    def dequeue(self) -> int:
        """Every slot from ``curr_read_time_ms`` before the write time (``dequeue`` called until
        it has nothing to do). Returns the slots read."""
        slots = 0
        while self.curr_read_time_ms < self.curr_write_time_ms:
            at = self.wheel.next_slot_ms(self.curr_read_time_ms, self.curr_write_time_ms)
            if at is None:
                self._move_read_time(self.curr_write_time_ms)
                break
            self._move_read_time(at)
            if not self._dequeue_slot(at):
                break  # a put to retry at the next run
            slots += 1
            self._move_read_time(at + self.precision_ms)
        return slots

    def _move_read_time(self, to_ms: int) -> None:
        self.curr_read_time_ms = to_ms
        self.commit_read_time_ms = to_ms

    def _chain(self, slot_ms: int) -> list[tuple[int, TimerLogUnit]]:
        """The slot's units from ``lastPos`` back through ``prevPos``, in enqueue order."""
        slot = self.wheel.get_slot(slot_ms)
        out: list[tuple[int, TimerLogUnit]] = []
        pos = slot.last_pos if slot is not None else -1
        seen = 0
        while pos != -1 and seen < 10_000_000:
            unit = self.timer_log.unit_at(pos)
            if unit is None:
                break  # the file is gone or the unit was never written: the chain ends (as RocketMQ)
            out.append((pos, unit))
            pos, seen = unit.prev_pos, seen + 1
        out.reverse()
        return out

    def _dequeue_slot(self, slot_ms: int) -> bool:
        """Hand back one slot's messages; False when a put must be retried (the slot's progress
        is kept, so the retry starts at that message)."""
        chain = self._chain(slot_ms)
        if not chain:
            log.warning("dequeue time:%d but read nothing from timerLog", slot_ms)
        deletes = [u for _, u in chain if u.magic & MAGIC_DELETE and not u.magic & MAGIC_ROLL]
        normal = [u for _, u in chain if not (u.magic & MAGIC_DELETE and not u.magic & MAGIC_ROLL)]
        delete_keys: set[str] = set()
        for u in deletes:
            rec = self._look(u.offset_py, u.size_py)
            if rec is not None:
                key = rec.properties.get(flags.PROPERTY_TIMER_DEL_UNIQKEY)
                if key is not None:
                    delete_keys.add(key)
        done = self._slot_progress[1] if self._slot_progress and self._slot_progress[0] == slot_ms else 0
        for k in range(done, len(normal)):
            u = normal[k]
            rec = self._look(u.offset_py, u.size_py)
            if rec is None:
                self.counts["missing"] += 1
                self._publish(slot_ms, u.offset_py, "missing")
                continue
            uniq = rec.properties.get(flags.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            real = rec.properties.get(flags.PROPERTY_REAL_TOPIC)
            if uniq is not None and (uniq in delete_keys or f"{real}+{uniq}" in delete_keys):
                self.counts["deleted"] += 1
                self._publish(slot_ms, u.offset_py, "deleted")
                continue
            if not self._put_back(rec, u.curr_write_time_ms, u.magic, slot_ms, u.offset_py, delete_keys):
                self._slot_progress = (slot_ms, k)
                return False
        self._slot_progress = None
        return True

    def _put_back(self, rec: MessageRecord, enqueue_ms: int, magic: int, slot_ms: int, phy: int,
                  _delete_keys: set[str] | None) -> bool:
        """``convert`` + ``doPut``: False for a refusal RocketMQ retries until it passes
        (SERVICE_NOT_AVAILABLE; any refusal but the two that drop, unless
        ``timer_skip_unknown_error``)."""
        roll = bool(magic & MAGIC_ROLL)
        props = dict(rec.properties)
        if not roll and props.get(flags.PROPERTY_TIMER_DEL_UNIQKEY) is not None:
            self.counts["dropped"] += 1  # doPut: a delete marker is never delivered
            self._publish(slot_ms, phy, "dropped")
            return True
        if enqueue_ms != -1:
            props[flags.PROPERTY_TIMER_ENQUEUE_MS] = str(enqueue_ms)
        if roll:
            times = props.get(flags.PROPERTY_TIMER_ROLL_TIMES)
            props[flags.PROPERTY_TIMER_ROLL_TIMES] = str(int(times) + 1 if times is not None else 1)
        props[flags.PROPERTY_TIMER_DEQUEUE_MS] = str(self.clock.now_ms())
        if roll:
            topic, queue_id = rec.topic, rec.queue_id
        else:
            topic = props.get(flags.PROPERTY_REAL_TOPIC) or ""
            try:
                queue_id = int(props.get(flags.PROPERTY_REAL_QUEUE_ID) or "")
            except ValueError:
                self.counts["dropped"] += 1
                log.error("timer: the record at %d has no REAL_QID int: dropped", phy)
                self._publish(slot_ms, phy, "dropped")
                return True
        result = self._deliver(rec, topic, queue_id, props)
        tries = 0
        skip = self.config.timer_skip_unknown_error
        while not result.ok and result.status is not PutMessageStatus.SERVICE_NOT_AVAILABLE \
                and result.status not in _NO_RETRY and not skip and tries < 3:
            tries += 1
            result = self._deliver(rec, topic, queue_id, props)
        if result.ok:
            if "the put back" in self.stuck:
                self.stuck = ""
            self.counts["rolled" if roll else "delivered"] += 1
            self._publish(slot_ms, phy, "rolled" if roll else "delivered", topic, queue_id, result.wrote_offset)
            return True
        if result.status is PutMessageStatus.SERVICE_NOT_AVAILABLE or (result.status not in _NO_RETRY and not skip):
            self._stuck(f"the put back of the record at {phy} was refused: {result.status.name} {result.reason}")
            return False
        self.counts["dropped"] += 1
        why = "" if result.status in _NO_RETRY else " (timer_skip_unknown_error)"
        log.error("timer: the put back of the record at %d was refused (%s %s): dropped%s, as RocketMQ does", phy,
                  result.status.name, result.reason, why)
        self._publish(slot_ms, phy, "dropped", topic, queue_id)
        return True

    def _publish(self, slot_ms: int, phy: int, outcome: str, topic: str | None = None, queue_id: int = -1,
                 to_offset: int = -1) -> None:
        self._note(TimerDequeued(slot_ms, phy, outcome, topic, queue_id, to_offset))

    def clean(self) -> list[str]:
        """The timerlog cleanup round; returns the names of the files deleted."""
        return self.timer_log.delete_expired_files(self._min_phy_offset())

    # ------------------------------------------------------------------ flow control, status
    def is_reject(self, deliver_ms: int) -> bool:
        """``isReject``: a slot's ``num`` up to ``timer_congest_num_each_slot`` takes puts, from twice
        it none; in between RocketMQ refuses when ``nextInt(1000) > 1000 * excess / (limit + 0.1)``
        (so the fuller the slot, the *less* often: its rule, kept), drawn here from ``self.random``
        (seeded: a run repeats)."""
        limit = self.config.timer_congest_num_each_slot
        slot = self.wheel.get_slot(deliver_ms)
        num = slot.num if slot is not None else 0
        if num <= limit:
            return False
        if num >= 2 * limit:
            return True
        return self.random.randrange(1000) > 1000 * (num - limit) / (limit + 0.1)

    def status(self) -> TimerStatus:
        cq = self._find_queue()
        return TimerStatus(
            self.curr_read_time_ms, self.curr_write_time_ms, self.curr_queue_offset,
            cq.get_max_offset_in_queue() if cq is not None else 0,
            self.timer_log.mapped_file_queue.get_max_offset(), self.wheel.get_all_num(self.curr_read_time_ms),
            self.counts["enqueued"], self.counts["delivered"], self.counts["rolled"], self.counts["deleted"],
            self.counts["dropped"], self.counts["missing"], self.stuck,
        )  # fmt: skip

    def slots(self, from_ms: int, to_ms: int) -> list[SlotStatus]:
        """The valid slots whose tick lies in ``[from_ms, to_ms)``, oldest first, each chain walked
        (from ``lastPos`` back through ``prevPos``, at most ``_CHAIN_WALK_LIMIT`` units) to count
        its units by kind as dequeue treats them (ROLL wins over DELETE). For views and notebooks:
        ``to_ms - from_ms`` is meant to be a few minutes of ticks, not days."""
        out = []
        p = self.precision_ms
        for tick in range(from_ms // p, -(-to_ms // p)):
            slot = self.wheel.get_slot(tick * p)
            if slot is None:
                continue
            kinds = {"messages": 0, "rolls": 0, "deletes": 0}
            pos, walked = slot.last_pos, 0
            while pos != -1 and walked < _CHAIN_WALK_LIMIT:
                unit = self.timer_log.unit_at(pos)
                if unit is None:
                    break
                kind = "rolls" if unit.magic & MAGIC_ROLL else "deletes" if unit.magic & MAGIC_DELETE else "messages"
                kinds[kind] += 1
                pos, walked = unit.prev_pos, walked + 1
            out.append(SlotStatus(tick * p, slot.first_pos, slot.last_pos, slot.num, complete=pos == -1, **kinds))
        return out

    def recent_events(self) -> list[tuple[int, TimerEnqueued | TimerDequeued]]:
        """The last ``RECENT_EVENTS`` enqueues and dequeues as ``(clock ms, event)``, oldest first."""
        return list(self.recent)

    def describe(self) -> dict[str, Any]:
        s = self.status()
        return {"curr_read_time_ms": s.curr_read_time_ms, "curr_write_time_ms": s.curr_write_time_ms,
                "curr_queue_offset": s.curr_queue_offset, "enqueue_behind": s.enqueue_behind,
                "timer_log_end": s.timer_log_end, "congest_num": s.congest_num, **self.counts, "stuck": s.stuck}

    # ------------------------------------------------------------------ stop
    def shutdown(self) -> None:
        """``TimerMessageStore.shutdown``: checkpoint prepared, timerlog flushed, checkpoint
        written, the wheel unmapped without its unflushed slot changes."""
        if self.closed:
            return
        if not self.loaded:  # a load that failed: write nothing
            self.abandon()
            return
        self.prepare_checkpoint(master=self.started)
        mfq = self.timer_log.mapped_file_queue
        while not mfq.flush(0):
            pass
        self.checkpoint.close(flush=True)
        self.wheel.close()
        mfq.close()
        self.started = False
        self.closed = True

    def destroy(self) -> None:
        """Delete the timer files (after shutdown): the timerlog files and directory, the wheel,
        the checkpoint."""
        self.shutdown()
        log_dir = self.timer_log.mapped_file_queue.store_path
        for name in sorted(os.listdir(log_dir)) if os.path.isdir(log_dir) else []:
            if name.isdigit():
                os.remove(os.path.join(log_dir, name))
        with contextlib.suppress(OSError):
            os.rmdir(log_dir)
        for path in (self.wheel.path, self.checkpoint.path):
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)

    def abandon(self) -> None:
        """As a killed process: nothing flushed, every mapping dropped (the page cache keeps
        what was written into the timerlog's mappings)."""
        if self.closed:
            return
        self.checkpoint.close(flush=False)
        self.wheel.close()
        self.timer_log.mapped_file_queue.close()
        self.started = False
        self.closed = True

