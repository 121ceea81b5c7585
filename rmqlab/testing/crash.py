"""Crash a store on purpose, reopen it, and compare what survived with what was acknowledged.

Two failure models, simulated differently because they lose different things:

**Process kill** (:func:`run_writer_and_kill`): ``python -m rmqlab.testing.crash_writer`` opens a
store (``threaded=True``, the real background services) and puts a deterministic stream of
messages; after each acknowledged put it appends one JSON line to an *ack log* (write + flush,
one ``write(2)`` per line, no fsync: a SIGKILL does not lose the page cache, so the ack log is
exactly as durable as the store's own mmap writes). The parent sends SIGKILL after a random
delay, or the child kills itself at a named crash point (``RMQLAB_CRASH_AT``, see
:mod:`rmqlab.faults`). What a kill loses: the process's private memory only — an unfinished
``memcpy`` into the mapping (a torn record), transient-store-pool buffers not yet committed to the
file, in-memory checkpoint fields never flushed. Everything written to a mapping survives.

**Power loss** (:func:`simulate_power_loss`): run a store *in process*, stepped
(``threaded=False``), stop at any moment *without* shutdown, and call
``simulate_power_loss(store)``. It rewrites the files to what a machine that lost power at that
instant could have on disk in the worst case:

* CommitLog, ConsumeQueue and ConsumeQueueExt files: every byte from the file's ``flushed_position`` on is zeroed
  (the kernel wrote back none of the dirty pages); trailing files never flushed at all
  (``flushed_position == 0``), and CommitLog files preallocated but not yet in use, are deleted
  (their directory entry was never made durable);
* index files: content as of their last ``IndexFile.flush()`` (recorded by :class:`IndexFlushRecorder`,
  which must wrap the run), zeros if written but never flushed — deleted if created after the
  last flush of any file;
* ``checkpoint``: as on disk (it is only ever changed by ``flush()``, which forces it); ``abort``
  and ``lock``: as they are;
* 5.x timer files: ``timerlog/`` files like CommitLog files (cut at their flushed position);
  ``timerwheel`` and ``config/timercheck`` as on disk (the engine writes them only in a forced
  flush, as RocketMQ does).

Not simulated: reordering inside one file beyond the flushed prefix (pages written back out of
order: use :mod:`rmqlab.testing.damage` for that), metadata loss of flushed files, and torn
sectors inside the flushed prefix.

:func:`reopen_and_check` then opens the store (abnormal recovery, since ``abort`` exists),
dispatches, and returns a :class:`CrashReport`: which acknowledged messages are present, lost or
changed, consistency problems between CommitLog, ConsumeQueues and index, and the recovery plan.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from rmqlab.clock import SystemClock
from rmqlab.codec.consume_queue_unit import is_ext_addr, undecorate
from rmqlab.codec.message import BlankRecord, MessageRecord
from rmqlab.codec.walk import iter_records
from rmqlab.config import ASYNC_FLUSH, SYNC_FLUSH, MessageStoreConfig
from rmqlab.errors import CorruptRecord
from rmqlab.files.fs import FixedDiskUsage
from rmqlab.store.index_file import IndexFile
from rmqlab.store.message import Message
from rmqlab.store.message_store import MessageStore
from rmqlab.store.recovery import RecoveryPlan

__all__ = [
    "Ack",
    "CrashReport",
    "IndexFlushRecorder",
    "KillResult",
    "PowerLossReport",
    "ScaledClock",
    "WriterSpec",
    "make_message",
    "read_acks",
    "reopen_and_check",
    "run_writer_and_kill",
    "simulate_power_loss",
    "simulate_process_kill",
    "wait_for_first_ack",
    "writer_config",
]

_TX_MASK = 0xC


# ---------------------------------------------------------------------------------------------
# the workload


@dataclass(frozen=True)
class WriterSpec:
    """What the writer does: store sizes, flush mode, how many messages, which seed."""

    store_dir: str
    ack_log: str
    flush_mode: str = "ASYNC"  # "ASYNC" | "SYNC"
    transient_store_pool: bool = False
    commit_log_size: int = 64 * 1024
    cq_units: int = 64
    count: int = 1500
    seed: int = 0
    rocketmq_version: str = "4.9.8"
    clock_speed: float = 1.0  # >1: store time runs faster, so recovery starts past file 0
    producers: int = 1  # >1: threads putting at once (SYNC_FLUSH: group commit), acks logged as they come
    ext_file_size: int = 0  # >0: enable_consume_queue_ext with ext files of this many bytes

    def to_argv(self) -> list[str]:
        return ["--spec", json.dumps(dataclasses.asdict(self))]

    @classmethod
    def from_json(cls, text: str) -> WriterSpec:
        return cls(**json.loads(text))


def writer_config(spec: WriterSpec) -> MessageStoreConfig:
    """Small files and short service intervals, so a second of writing rolls files and flushes."""
    return MessageStoreConfig.small(
        spec.store_dir,
        rocketmq_version=spec.rocketmq_version,
        mapped_file_size_commit_log=spec.commit_log_size,
        mapped_file_size_consume_queue=spec.cq_units * 20,
        flush_disk_type=SYNC_FLUSH if spec.flush_mode == "SYNC" else ASYNC_FLUSH,
        transient_store_pool_enable=spec.transient_store_pool,
        transient_store_pool_size=3,
        flush_interval_commit_log=5,
        flush_commit_log_thorough_interval=50,
        commit_interval_commit_log=5,
        commit_commit_log_thorough_interval=20,
        flush_interval_consume_queue=20,
        flush_consume_queue_thorough_interval=100,
        enable_consume_queue_ext=spec.ext_file_size > 0,
        mapped_file_size_consume_queue_ext=spec.ext_file_size or 48 * 1024 * 1024,
    )


class ScaledClock:
    """System time that runs ``speed`` times faster (from now on); sleeps shrink to match.

    With speed 300, one real second is five store minutes, so a short workload spreads its store
    timestamps far beyond the checkpoint's 3 s margin and abnormal recovery starts at a later file.
    """

    def __init__(self, speed: float) -> None:
        self.speed = speed
        self._t0 = time.time_ns() // 1_000_000
        self._m0 = time.monotonic_ns()

    def now_ms(self) -> int:
        return self._t0 + int((time.monotonic_ns() - self._m0) * self.speed) // 1_000_000

    def sleep_ms(self, ms: float) -> None:
        if ms > 0:
            time.sleep(ms / 1000.0 / self.speed)

    def tz(self) -> Any:
        return SystemClock().tz()


def make_message(seed: int, i: int, rng: random.Random) -> Message:
    """Message ``i`` of the workload: 3 topics x 4 queues, bodies 0..700 bytes, two keys."""
    body = rng.randbytes(rng.choice((0, 1, 17, 100, 300, 700)) if i % 97 else 0)
    return Message(
        topic=f"CrashTopic{i % 3}",
        body=body,
        tags=f"tag{i % 5}",
        keys=[f"k{seed}-{i}", f"g{i % 7}"],
        queue_id=(i * 7) % 4,
        uniq_key=f"{seed & 0xFFFFFFFF:08X}{i:024X}",
    )


@dataclass(frozen=True)
class Ack:
    """One acknowledged message, as the writer logged it."""

    i: int
    offset: int
    size: int
    msg_id: str
    uniq: str
    topic: str
    queue_id: int
    queue_offset: int
    sha: str
    keys: tuple[str, ...]

    @property
    def end(self) -> int:
        return self.offset + self.size


def _acks_for(result: Any, msgs: list[tuple[int, Message]], rocketmq_version: str = "4.9.8") -> list[Ack]:
    """The acks of one put. A 5.x batch's records all carry the batch's own UNIQ_KEY (the 5.x
    producer gives the batch one; its properties are appended to each message's, and the later
    key wins), which the put does not return: those acks get ``uniq=""`` (not compared)."""
    batch_uniq = len(msgs) > 1 and not rocketmq_version.startswith("4.")
    ar = result.append_result
    ids = ar.msg_id.split(",")
    offsets = [int(x[-16:], 16) for x in ids]
    ends = [*offsets[1:], ar.wrote_offset + ar.wrote_bytes]
    out = []
    for n, ((i, m), off, end, mid) in enumerate(zip(msgs, offsets, ends, ids, strict=True)):
        keys = tuple(m.keys) if not isinstance(m.keys, str) else tuple(m.keys.split())
        uniq = "" if batch_uniq else m.uniq_key or ""
        out.append(Ack(i, off, end - off, mid, uniq, m.topic, m.queue_id, ar.logics_offset + n,
                       hashlib.sha256(m.body).hexdigest(), keys))
    return out


def run_workload(spec: WriterSpec, on_ready: Any = None) -> int:
    """Open the store and put ``spec.count`` messages (every 10th put a batch of 3); log acks.

    With ``spec.producers`` > 1, that many threads put at once: thread ``t`` takes the blocks of
    ten messages ``t``, ``t + producers``, ... (a batch of 3 at the end of each block), and the
    acks go to the log in the order the puts return, which is not the CommitLog's order.
    """
    clock = ScaledClock(spec.clock_speed) if spec.clock_speed != 1.0 else SystemClock()
    # a simulated half-full disk: on a machine whose disk is over 90 % full the real probe would
    # make the writer's store refuse every put (RocketMQ's disk-full rule) in a test about crashes
    store = MessageStore.open(spec.store_dir, writer_config(spec), clock=clock, threaded=True,
                              disk_probe=FixedDiskUsage(0.5))
    done = 0
    lock = threading.Lock()
    with open(spec.ack_log, "a", encoding="utf-8") as log:

        def put(batch: list[tuple[int, Message]]) -> None:
            nonlocal done
            msgs = [m for _, m in batch]
            result = store.put_message(msgs[0]) if len(msgs) == 1 else store.put_messages(msgs)
            if result.ok:
                lines = "".join(json.dumps(dataclasses.asdict(a)) + "\n"
                                for a in _acks_for(result, batch, spec.rocketmq_version))
                with lock:
                    log.write(lines)
                    log.flush()
                    done += len(batch)

        def batch_from(i: int, n: int, rng: random.Random) -> list[tuple[int, Message]]:
            first = make_message(spec.seed, i, rng)
            batch = [(i, first)]
            for j in range(i + 1, i + n):
                m = make_message(spec.seed, j, rng)
                m.topic, m.queue_id = first.topic, first.queue_id
                batch.append((j, m))
            return batch

        if on_ready is not None:
            on_ready()
        if spec.producers <= 1:
            rng = random.Random(spec.seed)
            i = 0
            while i < spec.count:
                batch = batch_from(i, 3, rng) if i % 10 == 9 else [(i, make_message(spec.seed, i, rng))]
                put(batch)
                i += len(batch)
            return done

        def produce(t: int) -> None:
            rng = random.Random(spec.seed * 7919 + t)
            for block in range(t * 10, spec.count, spec.producers * 10):
                end = min(block + 10, spec.count)
                i = block
                while i < end:
                    batch = batch_from(i, 3, rng) if i == block + 7 and end - i >= 3 else [
                        (i, make_message(spec.seed, i, rng))]
                    put(batch)
                    i += len(batch)

        threads = [threading.Thread(target=produce, args=(t,), daemon=True) for t in range(spec.producers)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    return done


def read_acks(path: str | os.PathLike[str]) -> list[Ack]:
    """Complete lines of an ack log (a line cut by the kill is ignored)."""
    acks: list[Ack] = []
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if not line.endswith("\n"):
                    break
                d = json.loads(line)
                d["keys"] = tuple(d["keys"])
                acks.append(Ack(**d))
    except FileNotFoundError:
        pass
    return acks


@dataclass(frozen=True)
class KillResult:
    returncode: int | None
    how: str  # "sigkill_by_parent" | "crash_point" | "exited"
    elapsed_s: float
    stderr: str = ""

    @property
    def killed(self) -> bool:
        return self.returncode == -signal.SIGKILL


def wait_for_first_ack(ack_log: str | os.PathLike[str], proc: subprocess.Popen[str], timeout_s: float = 30.0) -> bool:
    """Wait until the writer ``proc`` logged a whole ack line in ``ack_log`` (False: it exited
    first, or ``timeout_s`` passed)."""
    deadline = time.monotonic() + timeout_s
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            with open(ack_log, encoding="utf-8") as f:
                if f.readline().endswith("\n"):
                    return True
        except FileNotFoundError:
            pass
        time.sleep(0.005)
    return False


def run_writer_and_kill(
    spec: WriterSpec,
    *,
    delay_s: float | None = None,
    crash_at: str | None = None,
    timeout_s: float = 30.0,
    after_first_ack: bool = False,
) -> KillResult:
    """Run the writer in a subprocess; SIGKILL it ``delay_s`` after it is ready (with
    ``after_first_ack``: after its first acknowledged put, ``timeout_s`` at most, for a test
    that needs one whatever the machine's speed), or let the crash point ``crash_at``
    (``"name[:N]"``) kill it. A writer that finishes its workload first stays alive (services
    running) until killed; with ``crash_at`` it exits with status 3 if the point was not
    reached within 2 s after the workload."""
    env = dict(os.environ)
    env.pop("RMQLAB_CRASH_AT", None)
    if crash_at:
        env["RMQLAB_CRASH_AT"] = crash_at
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "rmqlab.testing.crash_writer", *spec.to_argv()],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True,
    )
    assert proc.stdout is not None
    how = "exited"
    try:
        line = proc.stdout.readline()  # "READY", or "" when it died first
        if line.strip() == "READY" and delay_s is not None:
            if after_first_ack:
                wait_for_first_ack(spec.ack_log, proc, timeout_s)
            try:
                proc.wait(timeout=delay_s)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGKILL)
                how = "sigkill_by_parent"
        rc = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = proc.wait()
        how = "timeout"
    if how == "exited" and rc == -signal.SIGKILL:
        how = "crash_point"
    err = proc.stderr.read() if proc.stderr else ""
    if proc.stdout:
        proc.stdout.close()
    if proc.stderr:
        proc.stderr.close()
    return KillResult(rc, how, time.monotonic() - started, err[-2000:])


# ---------------------------------------------------------------------------------------------
# power loss


class IndexFlushRecorder(contextlib.AbstractContextManager["IndexFlushRecorder"]):
    """While active, remembers the bytes of every index file at each ``IndexFile.flush()``:
    what a power loss would leave of it (index files are not append-only, so a flushed position
    is not enough)."""

    def __init__(self) -> None:
        self.flushed: dict[str, bytes] = {}
        self._orig: Any = None

    def __enter__(self) -> IndexFlushRecorder:
        self._orig = IndexFile.flush
        recorder = self

        def flush(f: IndexFile) -> None:
            recorder._orig(f)
            if not f.read_only and os.path.exists(f.file_name):
                with open(f.file_name, "rb") as fh:
                    recorder.flushed[f.file_name] = fh.read()

        IndexFile.flush = flush  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        IndexFile.flush = self._orig  # type: ignore[method-assign]


@dataclass
class PowerLossReport:
    """What :func:`simulate_power_loss` did to each file."""

    flushed_where: int
    max_offset: int
    zeroed: dict[str, int] = field(default_factory=dict)  # path -> bytes zeroed
    deleted: list[str] = field(default_factory=list)
    index_restored: list[str] = field(default_factory=list)
    #: "<topic>/<queueId>" -> the ext run's flushed offset at the cut: its units from there on are lost
    ext_flushed: dict[str, int] = field(default_factory=dict)


def _mapped_files(store: MessageStore) -> Iterator[tuple[str, list[Any]]]:
    yield "commitlog", list(store.commit_log.mapped_file_queue.mapped_files)
    for topic, qid, cq in store.consume_queue_store.all_queues():
        yield f"{topic}/{qid}", list(cq.mapped_file_queue.mapped_files)
        if cq.consume_queue_ext is not None:
            yield f"ext {topic}/{qid}", list(cq.consume_queue_ext.mapped_file_queue.mapped_files)
    for topic, qid, bcq in store.consume_queue_store.all_batch_queues():  # 5.x BatchCQ topics
        yield f"batch {topic}/{qid}", list(bcq.mapped_file_queue.mapped_files)
    if store.timer is not None and not store.timer.closed:
        # the timer wheel and config/timercheck reach their mappings only in a forced flush
        # (TimerWheel.flush, TimerCheckpoint.flush): a power loss keeps them as they are
        yield "timerlog", list(store.timer.timer_log.mapped_file_queue.mapped_files)


def simulate_process_kill(store: MessageStore) -> str:
    """In-process stand-in for SIGKILL: ``store.abandon()`` (services stopped, nothing flushed,
    ``abort`` left, every written byte kept, lock released). For a real kill of a real process
    use :func:`run_writer_and_kill`."""
    store.abandon()
    return "process killed: services stopped, nothing flushed, abort left, page cache kept"


def simulate_power_loss(store: MessageStore, recorder: IndexFlushRecorder | None = None) -> PowerLossReport:
    """Abandon ``store`` (no shutdown: it must not be used again) and rewrite its files to the
    worst case a power loss allows (see the module docstring). Releases the store's lock."""
    mfq = store.commit_log.mapped_file_queue
    report = PowerLossReport(mfq.flushed_where, mfq.get_max_offset())
    for topic, qid, cq in store.consume_queue_store.all_queues():
        if cq.consume_queue_ext is not None:
            report.ext_flushed[f"{topic}/{qid}"] = cq.consume_queue_ext.mapped_file_queue.flushed_where
    plan: list[tuple[str, int]] = []
    for _, files in _mapped_files(store):
        keep_any = False
        for mf in reversed(files):
            pos = mf.flushed_position
            if pos == 0 and not keep_any:
                plan.append((mf.file_name, -1))
            else:
                keep_any = True
                plan.append((mf.file_name, pos))
    index_files = [f.file_name for f in store.index_service.index_files]
    store.abandon()  # services stop first, so nothing writes while the files are rewritten
    # Close every mapping first, so our writes cannot be overwritten by the abandoned store.
    for _, files in _mapped_files(store):
        for mf in files:
            with contextlib.suppress(Exception):
                mf.close()
    for f in store.index_service.index_files:
        with contextlib.suppress(Exception):
            f.mapped_file.close()
    with contextlib.suppress(Exception):
        store.checkpoint._mm.close()  # type: ignore[union-attr]
    from rmqlab.testing.damage import zero_range

    # Files on disk but not (yet) in the queue: the allocate service's preallocated next files.
    kept = {path for path, pos in plan if pos >= 0}
    known = {path for path, _ in plan}
    cl_dir = store.config.commit_log_dir
    last_kept = max((int(os.path.basename(p)) for p in kept if os.path.dirname(p) == cl_dir), default=-1)
    for name in os.listdir(cl_dir) if os.path.isdir(cl_dir) else []:
        path = os.path.join(cl_dir, name)
        if name.isdigit() and path not in known and int(name) > last_kept:
            plan.append((path, -1))
    for path, pos in plan:
        if pos < 0:
            os.remove(path)
            report.deleted.append(path)
        else:
            n = zero_range(path, pos)
            if n:
                report.zeroed[path] = n
    flushed = recorder.flushed if recorder is not None else {}
    for path in index_files:
        if path in flushed:
            with open(path, "r+b") as fh:
                fh.write(flushed[path])
            report.index_restored.append(path)
        else:
            os.remove(path)
            report.deleted.append(path)
    return report


# ---------------------------------------------------------------------------------------------
# reopen and check


@dataclass
class CrashReport:
    """What survived a crash, and whether CommitLog, CQs and index agree."""

    plan: RecoveryPlan
    acked: int
    present: list[Ack] = field(default_factory=list)
    lost: list[Ack] = field(default_factory=list)
    changed: list[tuple[Ack, str]] = field(default_factory=list)
    records: int = 0
    unacked_records: int = 0  # survived although never acknowledged (killed before the ack)
    max_offset: int = 0
    problems: list[str] = field(default_factory=list)  # consistency violations
    index_missing: list[tuple[int, str]] = field(default_factory=list)  # (offset, key)
    index_dropped_files: list[str] = field(default_factory=list)
    #: CQ units whose ext address resolves to no unit, or to one with another tags code or store
    #: time: (queue "<topic>/<queueId>", queue offset, ext offset, what was found). Not counted as
    #: problems: RocketMQ flushes a CQ before its ext run, so a power loss between the two leaves
    #: such units (``ConsumeQueue.flush``); after a kill there must be none.
    ext_mismatches: list[tuple[str, int, int, str]] = field(default_factory=list)

    @property
    def consistent(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        p = self.plan
        return (
            f"acked={self.acked} present={len(self.present)} lost={len(self.lost)} changed={len(self.changed)} "
            f"records={self.records} unacked={self.unacked_records} problems={len(self.problems)} "
            f"index_missing={len(self.index_missing)} ext_mismatches={len(self.ext_mismatches)} mode={p.mode} "
            f"start={p.start_file} "
            f"process_offset={p.process_offset} stop={p.stop_reason!r}"
        )


def _walk_commit_log(store: MessageStore, report: CrashReport) -> dict[int, MessageRecord]:
    """Every record in [min offset, max offset); damage (CRC included) noted as problems."""
    records: dict[int, MessageRecord] = {}
    mfq = store.commit_log.mapped_file_queue
    max_off = store.get_max_phy_offset()
    expected = store.get_min_phy_offset()
    for mf in mfq.mapped_files:
        base = mf.file_from_offset
        if base >= max_off:
            break
        end = min(mf.file_size, max_off - base)
        pos = base
        try:
            for off, rec in iter_records(mf.buffer, 0, end, check_crc=False, file=mf.file_name, base_offset=base):
                if isinstance(rec, BlankRecord):
                    pos = base + mf.file_size
                    break
                if not rec.crc_ok:
                    report.problems.append(f"record at {off}: body CRC mismatch (kept: the walk goes on)")
                if rec.commit_log_offset != off:
                    report.problems.append(f"record at {off} says PHYSICALOFFSET {rec.commit_log_offset}")
                records[off] = rec
                pos = off + rec.store_size
        except CorruptRecord as e:
            report.problems.append(f"corrupt record below the max offset {max_off}: {e}")
            return records
        if pos != min(base + mf.file_size, max_off) and pos != base + mf.file_size:
            report.problems.append(f"{mf.name}: records end at {pos}, expected {min(base + mf.file_size, max_off)}")
        expected = pos
    if records and expected < max_off:
        report.problems.append(f"records end at {expected}, max offset is {max_off}")
    return records


def _check_consume_queues(store: MessageStore, records: dict[int, MessageRecord], report: CrashReport) -> None:
    from rmqlab.codec.walk import compute_tags_code

    for topic, qid, cq in store.consume_queue_store.all_queues():
        lo, hi = cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue()
        for q in range(lo, hi):
            unit = cq.get_unit(q)
            if unit is None:
                report.problems.append(f"CQ {topic}/{qid} offset {q}: no unit below max {hi}")
                continue
            off, size, tags = unit
            if size == 0x7FFFFFFF and off == 0:
                continue  # pre-blank unit
            rec = records.get(off)
            if rec is None:
                report.problems.append(f"CQ {topic}/{qid} offset {q}: points at {off}, no record starts there")
                continue
            want_tags = compute_tags_code(rec.topic, rec.properties, rec.store_timestamp)
            if is_ext_addr(tags):
                _check_ext_unit(cq, f"{topic}/{qid}", q, tags, want_tags, rec, report)
                tags = want_tags
            got = (rec.topic, rec.queue_id, rec.queue_offset, rec.store_size, want_tags)
            if got != (topic, qid, q, size, tags):
                report.problems.append(f"CQ {topic}/{qid} offset {q} unit {unit} disagrees with record {got}")
    for off, rec in records.items():
        if rec.sys_flag & _TX_MASK not in (0, 8):
            continue
        cq = store.consume_queue_store.find_consume_queue(rec.topic, rec.queue_id, create=False)
        unit = cq.get_unit(rec.queue_offset) if cq is not None else None
        if unit is None or unit[0] != off or unit[1] != rec.store_size:
            report.problems.append(f"record at {off} ({rec.topic}/{rec.queue_id} q{rec.queue_offset}) "
                                   f"missing from its CQ (unit {unit})")


def _check_ext_unit(cq: Any, queue: str, q: int, address: int, want_tags: int, rec: MessageRecord,
                    report: CrashReport) -> None:
    unit = cq.get_ext(address)
    if unit is None or (unit.tags_code, unit.msg_store_time) != (want_tags, rec.store_timestamp):
        found = "nothing" if unit is None else f"tags {unit.tags_code} time {unit.msg_store_time}"
        report.ext_mismatches.append((queue, q, undecorate(address), found))


def _check_index(store: MessageStore, records: dict[int, MessageRecord], report: CrashReport) -> None:
    for off, rec in records.items():
        keys = [k for k in (rec.uniq_key, *rec.keys) if k]
        for key in keys:
            if key.startswith("g"):
                continue  # shared keys: hundreds of hits, capped at 64 per query
            found = store.query_message(rec.topic, key, max_num=64).messages
            if not any(m.commit_log_offset == off for m in found):
                report.index_missing.append((off, key))


def reopen_and_check(
    store_dir: str | os.PathLike[str],
    acks: list[Ack],
    config: MessageStoreConfig,
    *,
    check_index: bool = True,
    put_after: bool = True,
) -> CrashReport:
    """Open the store, recover, dispatch, and compare it with ``acks`` (see module docstring).

    ``put_after`` also appends one message after recovery and checks it lands at the recovered
    max offset with the next queue offset (the store is writable and its tables are right).
    """
    store = MessageStore.open(os.fspath(store_dir), config, threaded=False)
    try:
        assert store.recovery_plan is not None
        report = CrashReport(store.recovery_plan, len(acks))
        report.index_dropped_files = [e.file for e in store.index_service.load_report]
        store.wait_dispatched()
        report.max_offset = store.get_max_phy_offset()
        records = _walk_commit_log(store, report)
        report.records = len(records)
        acked_offsets = set()
        for ack in acks:
            acked_offsets.add(ack.offset)
            rec = records.get(ack.offset)
            if rec is None:
                report.lost.append(ack)
                continue
            why = []
            if rec.store_size != ack.size:
                why.append(f"size {rec.store_size} != {ack.size}")
            if ack.uniq and rec.uniq_key != ack.uniq:
                why.append(f"uniq {rec.uniq_key} != {ack.uniq}")
            if hashlib.sha256(rec.body).hexdigest() != ack.sha:
                why.append("body differs")
            if (rec.topic, rec.queue_id, rec.queue_offset) != (ack.topic, ack.queue_id, ack.queue_offset):
                why.append(f"queue {(rec.topic, rec.queue_id, rec.queue_offset)}")
            if why:
                report.changed.append((ack, "; ".join(why)))
            else:
                report.present.append(ack)
        report.unacked_records = sum(1 for off in records if off not in acked_offsets)
        _check_consume_queues(store, records, report)
        if check_index:
            _check_index(store, records, report)
        if put_after:
            _check_put_after(store, report)
    finally:
        store.shutdown()
    return report


def _check_put_after(store: MessageStore, report: CrashReport) -> None:
    msg = Message("CrashTopic0", b"after-recovery", queue_id=0, keys=["after"])
    cq = store.consume_queue_store.find_consume_queue("CrashTopic0", 0, create=False)
    want_q = cq.get_max_offset_in_queue() if cq is not None else 0
    want_off = report.max_offset
    r = store.put_message(msg)
    if not r.ok:
        report.problems.append(f"put after recovery failed: {r.status} {r.reason}")
        return
    ar = r.append_result
    assert ar is not None
    if ar.logics_offset != want_q:
        report.problems.append(f"put after recovery got queue offset {ar.logics_offset}, expected {want_q}")
    if ar.wrote_offset != want_off and ar.wrote_offset % store.config.mapped_file_size_commit_log != 0:
        report.problems.append(f"put after recovery landed at {ar.wrote_offset}, expected {want_off}")
