"""A put interrupted by an exception (a notebook's interrupt button: KeyboardInterrupt) leaves
a store that goes on working: no put lock left taken, no file request stuck, no queue offset
skipped or repeated, no ConsumeQueue unit pointing at the wrong record, every acknowledged
message found at its queue offset and by its key (interrupted dispatch: see
test_interrupted_dispatch.py).

Found by interrupting a put loop at random moments the way a signal does
(``PyThreadState_SetAsyncExc``: the exception is raised at the thread's next check between
bytecodes, mostly while a new CommitLog file was being created). Before the fixes a stepped
store then answered CREATE_MAPEDFILE_FAILED to every later put (the allocate service's request
was left taken and never created), or the exact put path skipped a queue offset for good.
That path then undid its offset in an except clause, which a second interrupt could cut short
(1 run in ~100 of the threaded case): the twice test below interrupts every place of a put and
again in the cleanup that set off, deterministically, in two models of where interrupts land
(line events; the exact call/return events of EventInterrupter, which also found a SYNC_FLUSH
group-commit round keeping its slot).
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from rmqlab import Message, MessageStore, MessageStoreConfig
from rmqlab.files import FixedDiskUsage, mapped_file_queue
from rmqlab.files.mapped_file import MappedFile
from rmqlab.inspect import open_snapshot, verify
from rmqlab.store.results import PutMessageResult, PutMessageStatus
from tests.store.trace_interrupts import Interrupt, NthLineTracer, run_interrupted_at_event, run_traced


def _store(tmp_path: Path, **changes: object) -> MessageStore:
    root = tmp_path / "store"
    return MessageStore.open(root, MessageStoreConfig.small(str(root), **changes), threaded=False)


def _errors(root: Path) -> list:
    with open_snapshot(root) as snap:
        return [f for f in verify(snap) if f.severity == "error"]


def test_a_file_creation_interrupted_once_is_retried_by_the_next_put(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = _store(tmp_path)
    real = MappedFile.__init__
    calls = {"n": 0}

    def interrupted_once(self: MappedFile, *args: object, **kwargs: object) -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise Interrupt
        real(self, *args, **kwargs)  # type: ignore[arg-type]

    try:
        first = None
        for i in range(200):  # 64 KiB files: the third put of 30 KB rolls
            if i == 1:
                monkeypatch.setattr(MappedFile, "__init__", interrupted_once)
            try:
                r = store.put_message(Message("T", b"x" * 30_000, keys=[f"k{i}"]))
            except Interrupt:
                first = i
                continue
            assert r.status is PutMessageStatus.PUT_OK, (i, r.status)
        assert first is not None
        assert calls["n"] > 1
        store.wait_dispatched()
        assert store.get_max_offset_in_queue("T", 0) == 199  # one put interrupted, none lost after it
    finally:
        store.shutdown()
    assert _errors(tmp_path / "store") == []


def test_the_exact_put_path_interrupted_while_rolling_keeps_queue_offsets_dense(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # user properties take the exact path, which reserves queue offsets before it asks for the
    # next file: an interrupt there used to leave the offset reserved and never written
    store = _store(tmp_path)
    real = mapped_file_queue.MappedFileQueue.get_last_mapped_file_for
    state = {"armed": False, "fired": 0}

    def interrupted(self: mapped_file_queue.MappedFileQueue, *args: object, **kwargs: object) -> MappedFile | None:
        if state["armed"]:
            state["armed"] = False
            state["fired"] += 1
            raise Interrupt
        return real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(mapped_file_queue.MappedFileQueue, "get_last_mapped_file_for", interrupted)
    acked = 0
    try:
        for i in range(60):
            state["armed"] = i % 7 == 3
            try:
                r = store.put_message(Message("T", b"x" * 20_000, keys=[f"k{i}"], properties={"user": "p"}))
            except Interrupt:
                continue
            assert r.ok
            assert r.queue_offset == acked  # no offset skipped by an interrupted put
            acked += 1
        assert state["fired"] > 2
        store.wait_dispatched()
        assert store.get_max_offset_in_queue("T", 0) == acked
    finally:
        store.shutdown()
    assert _errors(tmp_path / "store") == []


_WHERE: list[str] = []  # where the last interrupts landed, for failure messages


def _interrupted_twice(at: int, then: int, fn: Callable[[], object]) -> bool:
    """``fn()`` interrupted at its ``at``-th line (:class:`NthLineTracer`), and again at the
    ``then``-th place after it where CPython checks for an interrupt (a function entered, a
    call returned: a profile function's call, return and c_return events), in whatever
    cleanup the first one set off. The trace function cannot raise twice: CPython removes
    one that raised (and a profile function that raised: one each)."""
    state = {"armed": False, "events": 0}
    _WHERE.clear()

    class First(NthLineTracer):
        def line(self, frame: FrameType, event: str, arg: object) -> Any:
            try:
                return super().line(frame, event, arg)
            finally:
                if self.fired and not state["armed"]:
                    _WHERE[:] = [f"{frame.f_code.co_name}:{frame.f_lineno}"]
                state["armed"] = self.fired

    def second(frame: FrameType, event: str, arg: object) -> None:
        if state["armed"] and event in ("call", "return", "c_return"):
            state["events"] += 1
            if state["events"] == then:
                _WHERE.append(f"{frame.f_code.co_name}:{frame.f_lineno} ({event}"
                              f"{' ' + getattr(arg, '__name__', '') if event == 'c_return' else ''})")
                raise Interrupt

    def guarded() -> None:
        try:
            fn()
        finally:
            state["armed"] = False  # not in the test's own code after fn

    previous = sys.getprofile()
    sys.setprofile(second)
    try:
        return run_traced(First(at), guarded)
    finally:
        sys.setprofile(previous)


@pytest.mark.parametrize("model", ["lines", "events"])
@pytest.mark.parametrize("path", ["fast", "exact", "batch", "exact-batch", "sync"])
def test_a_put_interrupted_twice_anywhere_skips_no_queue_offset(tmp_path: Path, path: str, model: str) -> None:
    # every put rolls the CommitLog (5 KB of records in 8 KiB files), cut short at each place
    # where an interrupt can land (lines: NthLineTracer's model, second interrupts 1-8 checks
    # later; events: EventInterrupter's exact one, none or 1-3 later), the second landing in
    # the cleanup the first set off. A put that undid its queue offset in an except clause
    # skipped an offset when the second interrupt cut the undo short; the next put then got an
    # offset one too high. A group-commit round cut short kept its slot (FLUSH_DISK_TIMEOUT).
    props = {"user": "p"} if path.startswith("exact") else None  # user properties: the exact path (_put)
    n = [0]

    def put(store: MessageStore) -> PutMessageResult:
        n[0] += 1
        if path.endswith("batch"):  # the column and row batch paths, and _put with several records
            return store.put_messages([Message("T", b"x" * 1600, keys=[f"k{n[0]}-{j}"], properties=props)
                                       for j in range(3)])  # fmt: skip
        return store.put_message(Message("T", b"x" * 5000, keys=[f"k{n[0]}"], properties=props))

    def fresh(i: int) -> tuple[Path, MessageStore]:
        root = tmp_path / f"store{i}"
        # sync: 5.3.3's group commit flushes until done (4.9.8 flushes twice, so a put after
        # interrupted ones, whose records wait unflushed, can span three 8 KiB files and time out)
        sync = {"flush_disk_type": "SYNC_FLUSH", "rocketmq_version": "5.3.3"} if path == "sync" else {}
        config = MessageStoreConfig.small(str(root), mapped_file_size_commit_log=8192, **sync)
        return root, MessageStore.open(root, config, threaded=False)

    def interrupted(at: int, then: int) -> int:
        fn = functools.partial(put, store)
        if model == "lines":
            return _interrupted_twice(at, then, fn)
        hooks = run_interrupted_at_event(at, then, fn)
        _WHERE[:] = hooks.where
        return hooks.fired

    root, store = fresh(0)
    if model == "lines":
        counter = NthLineTracer(None)
        assert not run_traced(counter, functools.partial(put, store))
        places, thens = counter.n, range(1, 9)
    else:
        places, thens = run_interrupted_at_event(None, 0, functools.partial(put, store)).n, range(4)
    assert places > 50, places
    fired = 0
    for at in range(1, places + 1):
        for then in thens:
            fired += interrupted(at, then)
            r = put(store)  # not traced
            assert r.ok, (at, then, _WHERE, r.status)
            store.step()
            assert r.queue_offset + r.append_result.msg_num == store.get_max_offset_in_queue("T", 0), (at, then, _WHERE)
        if at % 50 == 0:  # a new store now and then: 8 KiB files pile up
            store.shutdown()
            assert _errors(root) == []
            shutil.rmtree(root)
            root, store = fresh(at)
    store.shutdown()
    assert _errors(root) == []
    assert fired > places


def _interrupt_a_put_loop(root: str, changes: dict, seconds: float) -> dict:
    """Run in a fresh interpreter (below): a thread puts (single, exact path, batches) into a
    stepped store and steps it (with ``changes["threaded"]``: a threaded store, its services in
    their own threads); this thread raises an exception in it every few milliseconds, as a
    signal would. In pytest's own process the exception could also land in the hooks it and
    hypothesis run in any thread (garbage collector callbacks, the unraisable-exception hook)
    and fail the test for reasons of their own."""
    changes = dict(changes)
    threaded = bool(changes.pop("threaded", False))
    # a simulated half-full disk (a child process: the suite's conftest patch does not reach it)
    store = MessageStore.open(root, MessageStoreConfig.small(root, **changes), threaded=threaded,
                              disk_probe=FixedDiskUsage(0.5))
    rnd = random.Random(5)
    done = threading.Event()
    interrupts, acked = [0], []

    count = [0]  # messages tried: keys stay unique when loop() starts again

    def loop() -> None:
        while True:  # an interrupt can land anywhere: on the loop's own lines too, so they are inside the try
            try:
                if done.is_set():
                    break
                i = count[0]
                count[0] = i + 1
                c = rnd.random()
                topic, qid, body = f"T{i % 2}", i % 3, b"x" * rnd.randrange(3000)
                key = f"k{i}"
                if c < 0.5:
                    r = store.put_message(Message(topic, body, keys=[key], queue_id=qid))
                elif c < 0.7:  # user properties: the exact path
                    r = store.put_message(Message(topic, body, keys=[key], queue_id=qid, properties={"user": "p"}))
                else:
                    topic, qid, key = "T0", 1, f"k{i}-0"
                    r = store.put_messages([Message(topic, b"z" * 200, keys=[f"k{i}-{j}"], queue_id=qid)
                                            for j in range(rnd.randint(1, 6))])  # fmt: skip
                if r.ok:
                    acked.append((r.wrote_offset, r.queue_offset, topic, qid, key))
                if i % 7 == 0 and not threaded:
                    store.step()
            except Interrupt:
                interrupts[0] += 1

    def guarded() -> None:
        while not done.is_set():  # the one line outside loop's try: at its back edge
            try:
                loop()
            except Interrupt:
                interrupts[0] += 1

    t = threading.Thread(target=guarded)
    t.start()
    deadline = time.monotonic() + seconds
    # an exception lands only while the loop runs Python code: on a busy machine (a SYNC_FLUSH put
    # waiting on a slow disk) fewer land in ``seconds``, so go on until more than 20 did (60 s more at most)
    while time.monotonic() < deadline or (interrupts[0] <= 20 and time.monotonic() < deadline + 60):
        time.sleep(rnd.uniform(0.0005, 0.005))
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(t.ident), ctypes.py_object(Interrupt))
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(t.ident), None)  # none left pending
    done.set()
    t.join(60)
    out = {"alive": t.is_alive(), "interrupts": interrupts[0], "locked": store.commit_log.put_lock.locked()}
    out["after_ok"] = store.put_message(Message("T0", b"after", keys=["after"])).ok  # still writable
    out["dispatched"] = store.wait_dispatched()
    out["misplaced"] = []
    # acknowledged messages are where their results say (the last ones, and a sample: a query
    # walks hundreds of 256-item index files here)
    for wrote, q, topic, qid, key in acked[-50:] + random.Random(9).sample(acked, min(250, len(acked))):
        got = store.get_message("g", topic, qid, q, 1)
        if [m.commit_log_offset for m in got.messages] != [wrote]:
            out["misplaced"].append(("get", wrote))
        got.release()
        if wrote not in [m.commit_log_offset for m in store.query_message(topic, key, max_num=64).messages]:
            out["misplaced"].append(("query", wrote))
    store.shutdown()
    out["errors"] = [f.to_dict() for f in _errors(Path(root))][:5]
    return out


@pytest.mark.parametrize("changes", [{}, {"transient_store_pool_enable": True}, {"flush_disk_type": "SYNC_FLUSH"},
                                     {"threaded": True}, {"threaded": True, "transient_store_pool_enable": True},
                                     {"threaded": True, "flush_disk_type": "SYNC_FLUSH"}],
                         ids=["async", "pool", "sync", "threaded", "threaded-pool", "threaded-sync"])
def test_puts_interrupted_at_random_moments(tmp_path: Path, changes: dict) -> None:
    import rmqlab

    here = str(Path(rmqlab.__file__).resolve().parents[1])  # the child imports this very rmqlab
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, __file__, str(tmp_path / "store"), json.dumps(changes), "1.5"],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not out["alive"]
    assert out["interrupts"] > 20
    assert not out["locked"]
    assert out["after_ok"]
    assert out["dispatched"]
    assert out["misplaced"] == []
    assert out["errors"] == []


if __name__ == "__main__":
    print(json.dumps(_interrupt_a_put_loop(sys.argv[1], json.loads(sys.argv[2]), float(sys.argv[3]))))
