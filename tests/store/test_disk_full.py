"""A disk that fills up under a writing store: puts are refused with a clear reason, nothing is
written where the file system has no room, and the store goes on once space returns.

Store files are sparse mappings, and a write to a page the file system cannot give a block makes
the kernel raise SIGBUS, which kills the process (a notebook's kernel, with no message at all).
That is what a threaded store did on a full 2 MiB tmpfs before pages were made writable ahead
of each write (``MappedFile.reserve``). Each case runs in a child process on a small tmpfs, so
a regression shows as a signal, not as a dead test run. Mounting needs root: skipped otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rmqlab import Message, MessageStore, MessageStoreConfig
from rmqlab.errors import DiskFull
from rmqlab.inspect import open_snapshot, verify


@pytest.fixture
def small_fs(tmp_path: Path) -> Path:
    """A 4 MiB tmpfs at ``tmp_path/fs``, 3 MiB of it taken by ``filler`` (deleted to free it)."""
    mnt = tmp_path / "fs"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.decode().strip()}")
    try:
        with open(mnt / "filler", "wb") as f:
            f.write(b"f" * (3 << 20))
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _fill(root: str, threaded: bool) -> dict:
    """Put 1 KiB messages until the disk is full (a stepped store steps only then), free the
    filler, put again; the answers."""
    config = MessageStoreConfig.small(root)
    store = MessageStore.open(root, config, threaded=threaded)
    acked: list[tuple[int, int]] = []
    out: dict = {"refused": 0, "reasons": [], "step_errors": []}
    n = 0
    while out["refused"] < 5 and n < 20_000:
        r = store.put_message(Message("T", b"x" * 1000, keys=[f"k{n}"]))
        n += 1
        if r.ok:
            acked.append((r.queue_offset, r.wrote_offset))
        else:
            out["refused"] += 1
            out["reasons"].append(f"{r.status.name}: {r.reason}")
    if not threaded:  # dispatch and cleanup only now (cleanup would free space all along)
        try:
            store.step()
        except DiskFull as e:  # what a person sees: dispatch found no room either
            out["step_errors"].append(str(e))
    os.remove(os.path.join(os.path.dirname(root), "filler"))
    if not threaded:  # cleanup's check lifts the "disk full" refusal it set (RocketMQ's RunningFlags)
        store.step()
    out["resumed"] = sum(store.put_message(Message("T", b"y" * 1000, keys=[f"r{i}"])).ok for i in range(50))
    if not threaded:
        store.step()
    out["dispatched"] = store.wait_dispatched(30)
    out["acked"] = len(acked)
    low = store.get_min_phy_offset()  # cleanup deletes the oldest files of a full disk, RocketMQ's rule
    kept = [(q, w) for q, w in acked if w >= low]
    out["kept"] = len(kept)
    out["missing"] = [(q, w) for q, w in kept if [m.commit_log_offset for m in
                      store.get_message("g", "T", 0, q, 1).messages] != [w]][:5]  # fmt: skip
    store.shutdown()
    with open_snapshot(root) as snap:
        out["errors"] = [f.to_dict() for f in verify(snap) if f.severity == "error"][:3]
    return out


@pytest.mark.parametrize("threaded", [False, True], ids=["stepped", "threaded"])
def test_full_disk_refuses_puts_then_resumes(small_fs: Path, threaded: bool) -> None:
    import rmqlab

    here = str(Path(rmqlab.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, __file__, str(small_fs / "store"), str(threaded)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-3000:])  # -7: killed by SIGBUS
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["refused"] == 5
    assert all(r.startswith("SERVICE_NOT_AVAILABLE: ") and "no space left" in r for r in out["reasons"]), out
    assert out["acked"] > 100
    assert out["kept"] > 0
    assert out["resumed"] == 50
    assert out["dispatched"]
    assert out["missing"] == []
    assert out["errors"] == []


def _recover(root: str) -> dict:
    """A crashed store whose queues and index must be rebuilt, opened on a full disk, then
    again once space returns."""
    filler = os.path.join(os.path.dirname(root), "filler")
    os.remove(filler)  # the whole 4 MiB (a fuller disk would make cleanup delete old files)
    config = MessageStoreConfig.small(root)
    store = MessageStore.open(root, config, threaded=False)
    for i in range(600):
        assert store.put_message(Message("T", b"x" * 1000, keys=[f"k{i}"])).ok
    store.step()
    store.abandon()  # as a kill leaves it: abort stays, recovery runs
    for sub in ("consumequeue", "index"):
        shutil.rmtree(os.path.join(root, sub))  # recovery re-dispatches everything
    with open(filler, "wb") as f:  # every block taken
        try:
            while True:
                f.write(b"f" * 65536)
                f.flush()
        except OSError:
            pass
    out: dict = {}
    try:
        MessageStore.open(root, config, threaded=False).shutdown()
        out["first_open"] = "opened"
    except DiskFull as e:
        out["first_open"] = str(e)
    os.remove(filler)
    store = MessageStore.open(root, config, threaded=False)
    out["max_offset"] = store.get_max_offset_in_queue("T", 0)
    # by queue offset: index keys follow RocketMQ's rule after an abnormal exit (with the default
    # message_index_safe=false, index files newer than the checkpoint go, and the failed open
    # wrote some), so they are not what this test is about
    with store.get_message("g", "T", 0, 0, 32) as first:
        out["first"] = [m.decode().keys for m in first.messages[:2]]
    out["found"] = sum(store.look_message_by_offset(store.get_commit_log_offset_in_queue("T", 0, q)) is not None
                       for q in range(0, 600, 7))  # fmt: skip
    store.shutdown()
    return out


def test_recovery_on_a_full_disk_says_so_and_recovers_once_space_returns(small_fs: Path) -> None:
    import rmqlab

    here = str(Path(rmqlab.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, __file__, str(small_fs / "store"), "recover"],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-3000:])
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "consumequeue" in out["first_open"]
    assert "no space left" in out["first_open"]
    assert out["max_offset"] == 600
    assert out["first"] == [["k0"], ["k1"]]
    assert out["found"] == len(range(0, 600, 7))


if __name__ == "__main__":
    if sys.argv[2] == "recover":
        print(json.dumps(_recover(sys.argv[1])))
    else:
        print(json.dumps(_fill(sys.argv[1], sys.argv[2] == "True")))
