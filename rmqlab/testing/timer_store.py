"""A 5.3.3 store with timer messages in a state a broker's ``TimerMessageStore`` can leave, written
by hand (for tests, the README's ``rmqlab timers`` example and notebooks:
``python -m rmqlab.testing.timer_store DIR``).

rmqlab's engine runs the timer wheel itself (``rmqlab.store.timer_store``); this writer exists to
pin a scenario the engine would not stop in on its own -- a unit whose record does not exist, a
message behind the read time, a queue unit not enqueued yet, a delete marker in the
``REAL_TOPIC+UNIQ_KEY`` form of newer brokers -- for the read-only side. The
``rmq_sys_wheel_timer`` records are put through a ``MessageStore`` opened with
``timer_wheel_enable=False`` (so its engine files nothing) with the properties
``HookUtils.transformTimerMessage`` sets (``TIMER_OUT_MS`` rounded to the tick, ``REAL_TOPIC``,
``REAL_QID``), and the timer files are written with rmqlab's codecs following
``TimerMessageStore.doEnqueue`` / ``TimerLog.append`` / ``TimerWheel.putSlot`` step by step: the
unit's ``prevPos`` is the slot's ``lastPos`` (-1 for a slot not yet written for that tick), the
slot keeps its first unit and moves its last one, ``num`` counts +1 per unit and -1 per DELETE
unit, a unit that does not fit with 16 bytes to spare ends the file with the blank, a due time
beyond the roll window parks the unit as ROLL. The wheel is created sparse (truncate), never
written whole. Opening the result with a 5.3.3 ``MessageStore`` (timerlog files of 200 bytes:
``mapped_file_size_timer_log=200``) hands the pending messages back when due.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from rmqlab.clock import ManualClock
from rmqlab.codec.java_hash import java_hash
from rmqlab.codec.names import offset_to_file_name
from rmqlab.codec.timer_checkpoint import TimerCheckpoint
from rmqlab.codec.timer_log import (
    MAGIC_DEFAULT,
    MAGIC_DELETE,
    MAGIC_ROLL,
    TIMER_TOPIC,
    UNIT_SIZE,
    TimerLogUnit,
    encode_timer_log_blank,
    needs_blank,
)
from rmqlab.codec.timer_wheel import TIMER_WHEEL_FILE_SIZE, TimerSlot, slot_index
from rmqlab.config import MessageStoreConfig
from rmqlab.store.message import Message
from rmqlab.store.message_store import MessageStore

T0 = 1_700_000_000_000
PRECISION = 1000
ROLL_WINDOW_SLOTS = 3600 * 24 * 2  # timerRollWindowSlot default
LOG_FILE_SIZE = 3 * UNIT_SIZE + 44  # 200: three units, then 44 bytes < 52 + 16 -> the blank


def timer_out_ms(deliver_ms: int, precision_ms: int = PRECISION) -> int:
    """``HookUtils.transformTimerMessage``'s rounding: one tick earlier on a tick boundary, else down."""
    return deliver_ms - precision_ms if deliver_ms % precision_ms == 0 else deliver_ms // precision_ms * precision_ms


@dataclass
class TimerWriter:
    """The wheel, the timerlog and their appends, in memory, then written to a store dir."""

    file_size: int = LOG_FILE_SIZE
    wheel: dict[int, TimerSlot] = field(default_factory=dict)
    files: dict[int, bytearray] = field(default_factory=dict)  # file start -> bytes
    wrote: int = 0  # absolute timerlog write position

    def _slot(self, delayed_ms: int) -> TimerSlot:
        s = self.wheel.get(slot_index(delayed_ms, PRECISION))
        return s if s is not None and s.time == delayed_ms // PRECISION else TimerSlot(-1, -1, -1)

    def append(self, data: bytes) -> int:
        start = self.wrote - self.wrote % self.file_size
        if start not in self.files:
            self.files[start] = bytearray(self.file_size)
        buf = self.files[start]
        pos = self.wrote - start
        if needs_blank(pos, self.file_size, len(data)):
            buf[pos:pos + 16] = encode_timer_log_blank(self.file_size - pos)
            self.wrote = start + self.file_size
            return self.append(data)
        buf[pos:pos + len(data)] = data
        self.wrote += len(data)
        return start + pos

    def enqueue(self, offset_py: int, size_py: int, delayed_ms: int, write_ms: int, real_topic: str | None,
                delete: bool = False) -> int:
        """``doEnqueue``: returns the unit's timerlog offset."""
        magic = MAGIC_DEFAULT
        window = ROLL_WINDOW_SLOTS * PRECISION
        if delayed_ms - write_ms >= window:
            magic |= MAGIC_ROLL
            if delayed_ms - write_ms - window < ROLL_WINDOW_SLOTS // 3 * PRECISION:
                delayed_ms = write_ms + ROLL_WINDOW_SLOTS // 2 * PRECISION
            else:
                delayed_ms = write_ms + window
        if delete:
            magic |= MAGIC_DELETE
        slot = self._slot(delayed_ms)
        unit = TimerLogUnit(slot.last_pos, magic, write_ms, delayed_ms, offset_py, size_py,
                            java_hash(real_topic) if real_topic else 0)
        pos = self.append(unit.pack())
        self.wheel[slot_index(delayed_ms, PRECISION)] = TimerSlot.for_time(
            delayed_ms, pos if slot.first_pos == -1 else slot.first_pos, pos,
            slot.num - 1 if delete else slot.num + 1, slot.magic, PRECISION)
        return pos

    def write(self, root: Path, checkpoint: TimerCheckpoint) -> None:
        wheel = root / "timerwheel"
        with open(wheel, "wb") as f:
            f.truncate(TIMER_WHEEL_FILE_SIZE)  # sparse: only the written slots take disk blocks
        with open(wheel, "r+b") as f:
            for index, slot in self.wheel.items():
                f.seek(index * 32)
                f.write(slot.pack())
        (root / "timerlog").mkdir(exist_ok=True)
        for start, buf in self.files.items():
            (root / "timerlog" / offset_to_file_name(start)).write_bytes(bytes(buf))
        (root / "config").mkdir(exist_ok=True)
        (root / "config" / "timercheck").write_bytes(checkpoint.pack())


@dataclass
class TimerStore:
    """What :func:`write_timer_store` wrote, for the tests' expectations."""

    root: Path
    offsets: dict[str, int]  # message name -> commit-log offset
    uniq: dict[str, str]  # message name -> UNIQ_KEY
    units: dict[str, int]  # message name -> timerlog offset
    out_ms: dict[str, int]  # message name -> TIMER_OUT_MS


def write_timer_store(root: Path) -> TimerStore:
    """Seven ``rmq_sys_wheel_timer`` messages and the timer files after six were enqueued.

    Slot A (T0+9 s): ``m0`` (Orders/1), ``m1`` (Orders/2), ``del1`` (DELETE for m1) -- a chain of
    three; slot B (T0+20 s): ``m2`` (Payments/0) and ``ghost``, a unit whose commit-log record does
    not exist; slot C (T0+2 days): ``far`` (due T0+3 days, parked as ROLL); slot D (T0-6 s): ``old``,
    behind the checkpoint's read time (delivered); ``late`` (Orders/0) is in the queue after the
    checkpoint's queue offset (not enqueued yet). Timerlog files of 200 bytes: 3 units + blank each.
    """
    config = replace(MessageStoreConfig.small(str(root)), rocketmq_version="5.3.3", timer_wheel_enable=False)
    clock = ManualClock(T0)
    plan = [  # name, real topic, real queue, deliver ms, extra properties
        ("m0", "Orders", 1, T0 + 10_000, {}),
        ("m1", "Orders", 2, T0 + 9_500, {}),
        ("m2", "Payments", 0, T0 + 20_700, {}),
        ("del1", "Orders", 2, T0 + 9_500, None),
        ("far", "Orders", 0, T0 + 3 * 86_400_000, {}),
        ("old", "Orders", 0, T0 - 5_000, {}),
        ("late", "Orders", 0, T0 + 30_000, {}),
    ]
    offsets, sizes, out = {}, {}, {}
    uniq = {name: f"7F000001303900000000{i:012X}" for i, (name, *_rest) in enumerate(plan)}
    with MessageStore.open(str(root), config, clock=clock, threaded=False) as store:
        for name, topic, qid, deliver, extra in plan:
            props = {"TIMER_DELIVER_MS": str(deliver), "TIMER_OUT_MS": str(timer_out_ms(deliver)),
                     "REAL_TOPIC": topic, "REAL_QID": str(qid)}
            if extra is None:
                props["TIMER_DEL_UNIQKEY"] = f"Orders+{uniq['m1']}"  # TimerMessageStore.buildDeleteKey(topic, uk)
            r = store.put_message(Message(TIMER_TOPIC, name.encode() * 3, tags="TagA", keys=[f"key-{name}"],
                                          properties=props, uniq_key=uniq[name]))
            assert r.ok, r
            assert r.append_result is not None
            offsets[name] = r.append_result.wrote_offset
            sizes[name] = r.append_result.wrote_bytes
            out[name] = timer_out_ms(deliver)
        store.step()
    writer = TimerWriter()
    units = {}
    for name, topic, _qid, _deliver, extra in plan[:6]:
        write = T0 - 60_000 if name == "old" else T0
        units[name] = writer.enqueue(offsets[name], sizes[name], out[name], write, topic, delete=extra is None)
        if name == "m2":
            units["ghost"] = writer.enqueue(10**9, 300, out["m2"], T0, "Ghost")
    writer.write(root, TimerCheckpoint(last_read_time_ms=T0, last_timer_log_flush_pos=writer.wrote,
                                       last_timer_queue_offset=6, master_timer_queue_offset=6,
                                       state_version=0, timestamp=T0, counter=7))
    assert os.path.getsize(root / "timerwheel") == TIMER_WHEEL_FILE_SIZE
    return TimerStore(root, offsets, uniq, units, out)


if __name__ == "__main__":  # python -m rmqlab.testing.timer_store DIR
    if len(sys.argv) != 2 or os.path.exists(sys.argv[1]):
        sys.exit("usage: python -m rmqlab.testing.timer_store NEW_DIR (a directory that does not exist yet)")
    write_timer_store(Path(sys.argv[1]))
    print(sys.argv[1])
