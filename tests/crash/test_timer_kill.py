"""SIGKILL a 5.3.3 store while its timer wheel runs (threaded, real time), reopen it and let every
timer message come due: every acknowledged timer message reaches its real queue, at least once
(RocketMQ's timer store enqueues and delivers again what its last checkpoint flush did not cover;
never more than twice here), with its TIMER_OUT_MS."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from rmqlab.clock import ManualClock
from rmqlab.codec.flags import TIMER_TOPIC
from rmqlab.config import MessageStoreConfig
from rmqlab.store.message import Message
from rmqlab.store.message_store import MessageStore
from rmqlab.store.results import GetMessageStatus
from rmqlab.testing.crash import wait_for_first_ack


def _run_and_kill(store: Path, acks: Path, count: int, delay_s: float) -> int:
    proc = subprocess.Popen([sys.executable, "-m", "rmqlab.testing.timer_crash_writer", str(store), str(acks),
                             str(count)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=os.getcwd())
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "READY", proc.stderr.read() if proc.stderr else ""
        wait_for_first_ack(acks, proc)  # the delay counts from the first ack: a busy machine may be slow to it
        time.sleep(delay_s)
        proc.send_signal(signal.SIGKILL)
        return proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for f in (proc.stdout, proc.stderr):
            if f is not None:
                f.close()


@pytest.mark.parametrize("delay_s", [0.4, 1.3, 2.6])
def test_timer_messages_survive_a_kill(tmp_path: Path, delay_s: float) -> None:
    store_dir, ack_log = tmp_path / "store", tmp_path / "acks.jsonl"
    rc = _run_and_kill(store_dir, ack_log, 150, delay_s)
    assert rc == -signal.SIGKILL
    acked = [json.loads(line) for line in ack_log.read_text().splitlines()]
    assert acked, "the writer was killed before its first put"
    config = MessageStoreConfig.small(str(store_dir), rocketmq_version="5.3.3", mapped_file_size_timer_log=52 * 20 + 16)
    clock = ManualClock(int(time.time() * 1000) + 10_000)  # every message is due
    store = MessageStore.open(store_dir, config, clock=clock, threaded=False)
    try:
        for _ in range(4):
            store.step()
            clock.advance(1_000)
        messages, offset = [], 0
        while True:
            got = store.get_message("g", "Orders", 0, offset, 1000)
            if got.status is not GetMessageStatus.FOUND:
                break
            messages += got.messages
            offset = got.next_begin_offset
        seen = Counter(m.body.decode() for m in messages)
        outs = {m.body.decode(): m.properties["TIMER_OUT_MS"] for m in messages}
        missing = [a["body"] for a in acked if a["body"] not in seen]
        assert not missing, f"acknowledged timer messages never delivered: {missing[:5]} ({store.timer.describe()})"
        assert max(seen.values()) <= 2, seen.most_common(3)
        assert all(outs[a["body"]] == a["out_ms"] for a in acked)
        assert store.timer.status().stuck == ""
    finally:
        store.shutdown()


def _bodies(store: MessageStore, topic: str) -> list[str]:
    out, offset = [], 0
    while (got := store.get_message("g", topic, 0, offset, 1000)).status is GetMessageStatus.FOUND:
        out += [m.body.decode() for m in got.messages]
        offset = got.next_begin_offset
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_timer_messages_after_a_power_loss(tmp_path: Path, seed: int) -> None:
    """Power loss (timerlog cut at its flushed position, wheel and timercheck as last flushed):
    every timer message whose rmq_sys_wheel_timer record survived comes out, once or twice --
    unless it had come out before the cut and that record was lost with the commit log's
    unflushed tail while the timer checkpoint, flushed on its own, had moved past it (RocketMQ
    puts a due message back without waiting for the flush: ASYNC_FLUSH loses it, as any put)."""
    from rmqlab.testing.crash import simulate_power_loss

    rng = random.Random(seed)
    path = tmp_path / "s"
    config = MessageStoreConfig.small(str(path), rocketmq_version="5.3.3", mapped_file_size_timer_log=52 * 5 + 16)
    clock = ManualClock(1_790_000_000_000)
    store = MessageStore.open(path, config, clock=clock, threaded=False)
    for i in range(rng.randint(20, 60)):
        store.put_message(Message("Orders", f"t{i}".encode(), properties={"TIMER_DELAY_MS": str(rng.randint(0, 9000))}))
        if rng.random() < 0.3:
            clock.advance(rng.randint(0, 1500))
            store.step()
    delivered_before = set(_bodies(store, "Orders"))
    simulate_power_loss(store)
    store = MessageStore.open(path, config, clock=clock, threaded=False)
    try:
        survived = set(_bodies(store, TIMER_TOPIC))
        assert survived  # flushed rounds happened before the cut
        clock.advance(20_000)
        for _ in range(3):
            store.step()
        seen = Counter(_bodies(store, "Orders"))
        assert survived <= set(seen) | delivered_before, sorted(survived - set(seen) - delivered_before)[:5]
        assert max(seen.values(), default=1) <= 2
    finally:
        store.shutdown()
