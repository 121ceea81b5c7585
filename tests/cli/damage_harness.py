"""A 3 a.m. damage harness: one damage from a broad catalogue on a copy of a store, then every
inspection command (CLI in-process and the Python API) under a watchdog, with the store's bytes,
mtimes and listing compared before and after.

Used by ``tests/cli/test_cli_damage_fuzz.py`` (a seeded sample) and runnable by hand for a wide
sweep: ``python -m tests.cli.damage_harness [N]`` prints every combination that breaks a promise.

The promise checked (README "Scripted inspection"): inspection never changes a byte of the
directory it reads; a damaged file, bad topic, path outside the store or wrong argument gets a
clear error (exit 2, one ``rmqlab: error:`` line) or findings/warnings -- never a traceback, a
hang, or output that does not parse.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import stat
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from rmqlab.cli import main
from rmqlab.errors import RmqlabError
from rmqlab.testing import damage

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SMALL_INDEX = ["--hash-slot-num", "64", "--index-num", "256"]
CALL_TIMEOUT_S = 20  # one command on a ~1 MB store takes well under a second; more is a hang


# ------------------------------------------------------------------------------------- sources
@dataclass
class Source:
    """A clean store to damage and the arguments that make sense for it."""

    name: str
    root: Path
    topic: str
    queue: int
    offset: int  # a record's CommitLog offset
    msg_id: str
    uniq_key: str
    key: str
    index_file: str | None


def _describe(name: str, root: Path) -> Source:
    from rmqlab.inspect import open_snapshot

    with open_snapshot(root) as snap:
        rec = next(snap.iter_messages())
        keyed = next((r for r in snap.iter_messages() if r.keys), rec)
        names = [os.path.basename(p) for p in snap.index_paths]
        queue = next(iter(sorted(snap.consume_queues or snap.batch_consume_queues)), (rec.topic, rec.queue_id))
    return Source(name, root, queue[0], queue[1], rec.commit_log_offset, rec.msg_id, rec.uniq_key or rec.msg_id,
                  keyed.keys[0] if keyed.keys else "k", names[0] if names else None)


def reference_source(name: str) -> Source:
    return _describe(name, FIXTURES / name / "store")


def timer_source(base: Path) -> Source:
    """A 5.3.3 store with timerlog/, timerwheel, config/timercheck (rmqlab.testing.timer_store)."""
    from rmqlab.testing.timer_store import write_timer_store

    root = base / "timer-store"
    if not root.exists():
        write_timer_store(root)
    return _describe("timer", root)


def batch_ext_source(base: Path) -> Source:
    """A store written with enableConsumeQueueExt (consumequeue_ext/) plus a 5.x BatchConsumeQueue
    (batchconsumequeue/) beside it."""
    root = base / "ext-store"
    if not root.exists():
        from rmqlab.clock import ManualClock
        from rmqlab.config import MessageStoreConfig
        from rmqlab.store.message import Message
        from rmqlab.store.message_store import MessageStore

        config = MessageStoreConfig.small(str(root), enable_consume_queue_ext=True,
                                          mapped_file_size_consume_queue_ext=1000)
        clock = ManualClock(1_700_000_000_000)
        with MessageStore.open(root, config, clock=clock, threaded=False) as store:
            for i in range(120):
                m = Message("Orders", b"b%d" % i, tags=["TagA", "TagB", None][i % 3], keys=[f"k-{i}"], queue_id=i % 2)
                assert store.put_message(m).ok
                clock.advance(3)
            store.step()
            assert store.wait_dispatched()
        from tests.batch_cq_store import write_batch_store

        other = base / "batch-only"
        write_batch_store(other)
        shutil.copytree(other / "batchconsumequeue", root / "batchconsumequeue")
    return _describe("ext+batch", root)


# ------------------------------------------------------------------------------------- damages
KINDS = {  # file kind -> glob(s) under the store root
    "commitlog": ["commitlog/*"],
    "consumequeue": ["consumequeue/*/*/*"],
    "index": ["index/*"],
    "checkpoint": ["checkpoint"],
    "config": ["config/*.json", "config/*.bak", "config/timercheck"],
    "timerlog": ["timerlog/*"],
    "timerwheel": ["timerwheel"],
    "batchconsumequeue": ["batchconsumequeue/*/*/*"],
    "consumequeue_ext": ["consumequeue_ext/*/*/*"],
}


def files_of(root: Path, kind: str) -> list[Path]:
    return sorted(p for g in KINDS[kind] for p in root.glob(g) if p.is_file() and not p.is_symlink())


def _pick(root: Path, kind: str, rng: random.Random) -> Path | None:
    files = [p for p in files_of(root, kind) if kind != "timerwheel" or p.stat().st_size]
    return rng.choice(files) if files else None


def _flip(root: Path, kind: str, rng: random.Random, outside: Path) -> str | None:
    path = _pick(root, kind, rng)
    if path is None or not path.stat().st_size:
        return None
    size = path.stat().st_size
    # near the start (headers, first records/units) half the time: where damage matters most
    hi = size if rng.random() < 0.5 else min(size, 4096)
    where = sorted(rng.randrange(hi) for _ in range(rng.randint(1, 16)))
    for off in where:
        damage.set_bytes(path, off, bytes([rng.randrange(256)]))
    return f"{path.relative_to(root)}: bytes changed at {where[:6]}"


def _truncate(root: Path, kind: str, rng: random.Random, outside: Path) -> str | None:
    path = _pick(root, kind, rng)
    if path is None:
        return None
    size = path.stat().st_size
    length = rng.choice([0, 1, 2, 3, rng.randrange(size + 1)])
    damage.truncate_file(path, min(length, size))
    return f"{path.relative_to(root)}: truncated to {min(length, size)}"


def _extend(root: Path, kind: str, rng: random.Random, outside: Path) -> str | None:
    path = _pick(root, kind, rng)
    if path is None:
        return None
    with open(path, "ab") as f:
        f.write(rng.randbytes(rng.choice([1, 3, 20, 777, 5000])))
    return f"{path.relative_to(root)}: garbage appended"


def _rename(root: Path, kind: str, rng: random.Random, outside: Path) -> str | None:
    path = _pick(root, kind, rng)
    if path is None:
        return None
    base = int(path.name) if path.name.isdigit() else 0
    new = rng.choice([path.name + ".bak", "x" + path.name[1:], f"{base + rng.randint(1, 999):020d}",
                      f"{base}", f"{base + 1:020d}", "0" * 21, f"{2**63 - 7:020d}", f"{2**64:020d}"])
    target = path.with_name(new)
    if target.exists():
        return None
    path.rename(target)
    return f"{path.relative_to(root)} renamed to {new}"


def _file_to_dir(root: Path, kind: str, rng: random.Random, outside: Path) -> str | None:
    path = _pick(root, kind, rng)
    if path is None:
        return None
    path.unlink()
    path.mkdir()
    (path / "inner").write_bytes(b"x")
    return f"{path.relative_to(root)} is now a directory"


def _dir_to_file(root: Path, rng: random.Random) -> str | None:
    dirs = sorted(p for p in root.rglob("*") if p.is_dir() and not p.is_symlink())
    if not dirs:
        return None
    path = rng.choice(dirs)
    shutil.rmtree(path)
    path.write_bytes(rng.randbytes(rng.choice([0, 20, 1280])))
    return f"{path.relative_to(root)} is now a file"


def _junk_everywhere(root: Path, rng: random.Random) -> str | None:
    dirs = [root, *sorted(p for p in root.rglob("*") if p.is_dir() and not p.is_symlink())]
    names = ["junk", ".DS_Store", "x.tmp", "123", "99999999999999999999", f"{rng.randrange(10**19):020d}",
             "00000000000000000000.bak", "-1", "٣٣"]
    for d in dirs:
        name = rng.choice(names)
        if not (d / name).exists():
            (d / name).write_bytes(rng.randbytes(rng.randint(0, 300)))
    return f"a junk file in each of {len(dirs)} directories"


def _bad_topic_dir(root: Path, rng: random.Random) -> str | None:
    for top in ("consumequeue", "batchconsumequeue", "consumequeue_ext"):
        parent = root / top
        if not parent.is_dir():
            continue
        topics = sorted(p for p in parent.iterdir() if p.is_dir())
        if not topics:
            continue
        name = rng.choice(["bad topic", "x" * 300, "a/../b".replace("/", "%2F"), "..", ".", "-", "tab\there",
                           "ünï", "%RETRY%g", "%LMQ%x", "\\back"])
        if len(name) > 255:  # longer than NAME_MAX: no file system holds it; 255 is the longest
            name = "y" * 255
        target = parent / name
        if name in (".", "..") or target.exists():
            target = parent / (name + "_")
        shutil.copytree(rng.choice(topics), target)
        return f"{top}/{target.name[:40]!r} (illegal topic dir)"
    return None


def _non_utf8(root: Path, rng: random.Random) -> str | None:
    """Names that are not UTF-8 (from another system, or a damaged directory): a queue's topic
    dir copied under one, and a stray file so named in a random directory."""
    raw = b"bad\xff\xfe" + bytes([rng.randrange(0x80, 0x100)])
    topics = sorted(p for p in root.glob("consumequeue/*") if p.is_dir())
    done = []
    if topics:
        shutil.copytree(os.fsencode(rng.choice(topics)), os.fsencode(root / "consumequeue") + b"/" + raw + b"topic")
        done.append("a consumequeue/ topic dir")
    dirs = [root, *sorted(p for p in root.rglob("*") if p.is_dir() and not p.is_symlink())]
    where = os.fsencode(rng.choice(dirs)) + b"/junk" + raw
    with open(where, "wb") as f:
        f.write(b"x")
    done.append(os.fsdecode(where)[len(str(root)) + 1:] + " (a file)")
    return "named with bytes that are not UTF-8: " + ", ".join(done)


def _sparse(root: Path, rng: random.Random) -> str | None:
    kinds = [k for k in ("commitlog", "index", "consumequeue", "checkpoint", "timerwheel") if files_of(root, k)]
    choice = rng.choice([*kinds, "root"])
    size = rng.choice([2**31 + 5, 2**32, 2**40])
    path = root / "huge.bin" if choice == "root" else rng.choice(files_of(root, choice))
    with open(path, "ab") as f:
        f.truncate(size)
    return f"{path.relative_to(root)}: sparse, {size} bytes"


def _missing(root: Path, rng: random.Random) -> str | None:
    dirs = [p for p in ("commitlog", "consumequeue", "index", "config", "timerlog", "batchconsumequeue",
                        "consumequeue_ext") if (root / p).is_dir()]
    queue_dirs = sorted(p for p in root.glob("consumequeue/*/*") if p.is_dir())
    plain = [p for p in ("checkpoint", "timerwheel", "config/delayOffset.json", "config/timercheck")
             if (root / p).exists()]
    choice = rng.choice(dirs + [str(q.relative_to(root)) for q in queue_dirs[:3]] + plain)
    path = root / choice
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()
    else:
        return None
    return f"{choice} removed"


def _symlink_out(root: Path, rng: random.Random, outside: Path) -> str | None:
    kind = rng.choice(["commitlog", "consumequeue", "index", "checkpoint", "config", "dir", "loop", "dangling",
                       "stray"])
    if kind == "stray":  # a junk-named link to nothing in some directory (a copy tool's leftover)
        dirs = [root, *sorted(p for p in root.rglob("*") if p.is_dir() and not p.is_symlink()), root / "compaction"]
        where = rng.choice(dirs)
        where.mkdir(exist_ok=True)
        (where / "stray-link").symlink_to(outside / "gone")
        return f"{(where / 'stray-link').relative_to(root)}: a symlink to nothing"
    if kind == "dir":
        target = outside / "outside-topic"
        (target / "0").mkdir(parents=True, exist_ok=True)
        (target / "0" / f"{0:020d}").write_bytes(bytes(1280))
        link = root / "consumequeue" / "OutsideTopic"
        if not link.parent.is_dir():
            return None
        link.symlink_to(target)
        return "consumequeue/OutsideTopic -> a directory outside the store"
    if kind in ("loop", "dangling"):
        link = root / "commitlog" / f"{10**15:020d}"
        if not link.parent.is_dir():
            return None
        link.symlink_to(link if kind == "loop" else outside / "nothing-here")
        return f"commitlog/{link.name}: {kind} symlink"
    path = _pick(root, kind, rng)
    if path is None:
        return None
    target = outside / ("copy-of-" + path.name)
    shutil.copyfile(path, target)
    path.unlink()
    path.symlink_to(target)
    return f"{path.relative_to(root)} -> a file outside the store"


def _empty_store(root: Path, rng: random.Random) -> str:
    shutil.rmtree(root)
    root.mkdir()
    return "empty store dir"


def _no_such(root: Path, rng: random.Random) -> str:
    shutil.rmtree(root)
    return "path does not exist"


def _a_file(root: Path, rng: random.Random) -> str:
    shutil.rmtree(root)
    root.write_bytes(b"not a store\n")
    return "path is a file"


@cache
def reads_mode_000() -> bool:
    """Whether this process reads a file whose mode is 000 anyway (root with CAP_DAC_OVERRIDE):
    probed, not guessed from the uid, so that root run under ``setpriv`` without the capability
    gets the unreadable cases (``test_cli_damage_fuzz.py`` does that as root)."""
    with tempfile.TemporaryDirectory() as d:
        probe = Path(d) / "mode-000"
        probe.write_bytes(b"x")
        probe.chmod(0)
        try:
            probe.read_bytes()
        except PermissionError:
            return False
        return True


def _unreadable(root: Path, kind: str, rng: random.Random, outside: Path) -> str | None:
    if reads_mode_000():  # root reads a mode-000 file anyway: nothing to test
        return None
    path = _pick(root, kind, rng)
    if path is None:
        return None
    path.chmod(0)
    return f"{path.relative_to(root)}: chmod 000"


#: the by-hand sweep also links files to /dev/zero; not in the suite, where a regression would
#: read until the OOM killer ends the whole run (a FIFO takes the same not-a-regular-file path)
DEV_ZERO = False


def _special(root: Path, kind: str, rng: random.Random, outside: Path) -> str | None:
    """A FIFO (a read blocks for ever: the watchdog fires) or a symlink to /dev/zero (a read never
    ends; :data:`DEV_ZERO`) for a file."""
    path = _pick(root, kind, rng)
    if path is None:
        return None
    path.unlink()
    if not DEV_ZERO or rng.random() < 0.5:
        os.mkfifo(path)
        return f"{path.relative_to(root)} is a FIFO"
    path.symlink_to("/dev/zero")
    return f"{path.relative_to(root)} -> /dev/zero"


PER_KIND = {"flip": _flip, "truncate": _truncate, "extend": _extend, "rename": _rename, "file_to_dir": _file_to_dir,
            "special": _special, "unreadable": _unreadable}
WHOLE = {"dir_to_file": _dir_to_file, "junk": _junk_everywhere, "bad_topic_dir": _bad_topic_dir,
         "sparse": _sparse, "missing": _missing, "non_utf8": _non_utf8, "empty": _empty_store, "no_such": _no_such,
         "a_file": _a_file}


def catalogue() -> list[str]:
    """Every damage name: ``how:kind`` for the per-kind ones, plain names for the rest."""
    out = [f"{how}:{kind}" for how in PER_KIND for kind in KINDS]
    return out + sorted(WHOLE) + ["symlink_out"]


def apply(name: str, root: Path, rng: random.Random, outside: Path) -> str | None:
    """Apply one damage; None when it does not apply to this store (no such file kind)."""
    if ":" in name:
        how, kind = name.split(":")
        if kind == "timerwheel" and how in ("flip", "extend"):
            pass
        return PER_KIND[how](root, kind, rng, outside)
    if name == "symlink_out":
        return _symlink_out(root, rng, outside)
    return WHOLE[name](root, rng)


# ------------------------------------------------------------------------------------- commands
def commands(src: Source, s: str, rng: random.Random) -> list[list[str]]:
    """Every inspection command with sensible arguments, plus a few bad ones (picked by ``rng``)."""
    t, q = src.topic, str(src.queue)
    good = [
        ["inspect", s], ["messages", s, "--limit", "50"], ["messages", s, "--topic", t, "--queue", q, "--body", "text"],
        ["messages", s, "--from-offset", str(src.offset + 3), "--limit", "5"],
        ["get", s, "--offset", str(src.offset), "--body", "hex"], ["get", s, "--msg-id", src.msg_id],
        ["get", s, "--msg-id", src.uniq_key], ["cq", s, t, q], ["cq", s, t, q, "--from", "2", "--tags", "TagA || TagB"],
        ["query", s, "--topic", t, "--key", src.key], ["index", s],
        ["index", s, "--chain", t, src.key], ["verify", s], ["verify", s, "--crc"], ["recover", s, "--dry-run"],
        ["recover", s, "--dry-run", "--rocketmq-version", "5.3.3"],
        ["cleanup", s, "--plan", "--now", "2030-01-01T04:00:00+00:00", "--disk-ratio", "0.5"],
        ["delays", s], ["timers", s], ["timers", s, "--wheel"],
    ]
    if src.index_file:
        good.append(["index", s, "--file", src.index_file])
    bad = [
        ["get", s, "--offset", "-1"], ["get", s, "--offset", str(2**63 - 1)], ["get", s, "--offset", str(2**64)],
        ["get", s, "--offset", "abc"], ["get", s, "--msg-id", "zz"], ["get", s, "--msg-id", "0" * 32],
        ["get", s, "--msg-id", "FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF"], ["get", s, "--msg-id", ""],
        ["cq", s, "NoSuchTopic", "0"], ["cq", s, "../x", "0"], ["cq", s, t, "-1"], ["cq", s, t, str(2**31)],
        ["cq", s, t, str(2**70)], ["cq", s, t, q, "--from", str(2**63 - 1)], ["cq", s, t, q, "--from", "-5"],
        ["cq", s, "x" * 300, "0"], ["cq", s, "", "0"], ["messages", s, "--from-offset", str(2**63 - 1)],
        ["messages", s, "--from-offset", str(2**64 + 5)], ["messages", s, "--topic", "../x"],
        ["messages", s, "--queue", "-3"], ["messages", s, "--limit", "x"],
        ["query", s, "--topic", "../x", "--key", "k"],
        ["query", s, "--topic", t, "--key", src.key, "--begin", "9" * 30],
        ["query", s, "--topic", t, "--key", src.key, "--begin", "10", "--end", "5"],
        ["query", s, "--topic", t, "--key", src.key, "--begin", str(-2**63)],
        ["index", s, "--file", "../../checkpoint"], ["index", s, "--file", "nope"], ["index", s, "--file", ""],
        ["index", s, "--chain", "bad topic", "k"], ["index", s, "--hash-slot-num", "0", "--index-num", "1"],
        ["index", s, "--hash-slot-num", str(2**40), "--index-num", str(2**40)], ["index", s, "--hash-slot-num", "64"],
        ["cleanup", s, "--plan", "--now", "yesterday"], ["cleanup", s, "--plan", "--delete-when", "25;xx"],
        ["cleanup", s, "--plan", "--disk-ratio", "2"], ["cleanup", s, "--plan", "--file-reserved-time", str(2**62)],
        ["cleanup", s, "--plan", "--now", "9999-12-31T23:59:59+14:00"], ["cleanup", s],
        ["delays", s, "--delay-levels", "1x 2y"], ["delays", s, "--delay-levels", ""],
        ["delays", s, "--delay-levels", "9999999999999999999d"], ["timers", s, "--precision-ms", str(2**62)],
        ["timers", s, "--limit", "-1"], ["recover", s], ["verify", s, "--json", "--json-lines"],
        ["messages", s, *SMALL_INDEX, "--limit", "3"],
        ["cleanup", s, "--plan", "--now", "9999-12-31T23:59:59-14:00"], ["cq", s, t, q, "--tags", ""],
        ["cq", s, t, q, "--tags", "||"], ["cq", s, t, q, "--tags", "*", "--limit", "0"], ["index", s, "--chain", t, ""],
        ["query", s, "--topic", t, "--key", ""], ["get", s, "--msg-id", "F" * 56], ["get", s, "--msg-id", "F" * 40],
        ["messages", s, "--from-offset", "1", "--json-lines"], ["cq", s, t, q, "--json-lines"],
        ["verify", s, "--crc", "--json-lines"], ["timers", s, "--wheel", "--limit", "1"],
    ]
    return good + rng.sample(bad, min(len(bad), 8))


# ------------------------------------------------------------------------------------- running
class Hang(Exception):
    pass


@contextmanager
def watchdog(seconds: int) -> Iterator[None]:
    """SIGALRM after ``seconds``: raises :class:`Hang` in the main thread (a hung mmap walk or loop)."""

    def fire(signum: int, frame: Any) -> None:
        raise Hang(f"no answer within {seconds} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def tree_state(*roots: Path) -> dict[str, Any]:
    """Every entry under ``roots`` (symlinks not followed): kind, mode, size, mtime_ns, and the
    bytes' sha256 (sparse files: size and mtime only, their holes are not read)."""
    out: dict[str, Any] = {}
    for root in roots:
        if not os.path.lexists(root):
            out[str(root)] = None
            continue
        paths = [root] if not root.is_dir() or root.is_symlink() else [root, *root.rglob("*")]
        for p in paths:
            st = os.lstat(p)
            entry: tuple[Any, ...] = (stat.S_IFMT(st.st_mode), st.st_mode, st.st_size, st.st_mtime_ns)
            if stat.S_ISREG(st.st_mode) and st.st_size <= 64 << 20 and st.st_mode & 0o400:
                entry += (hashlib.sha256(p.read_bytes()).hexdigest(),)
            elif stat.S_ISLNK(st.st_mode):
                entry += (os.readlink(p),)
            out[str(p)] = entry
    return out


#: when a list, every exit-2 error line is appended (args, line): for a person to review
ERRORS: list[tuple[list[str], str]] | None = None


@dataclass
class Problem:
    what: str
    detail: str


def check_cli(args: list[str], *, store_missing: bool = False) -> Problem | None:
    """Run one CLI command in-process; a Problem when it breaks the promise."""
    try:
        with watchdog(CALL_TIMEOUT_S):
            r = CliRunner().invoke(main, args)
    except Hang as e:
        return Problem("hang", str(e))
    if isinstance(r.exception, Hang):
        return Problem("hang", str(r.exception))
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        import traceback

        tb = "".join(traceback.format_exception(r.exception))[-1500:]
        return Problem("traceback", f"{r.exception!r}\n{tb}")
    if r.exit_code not in (0, 1, 2):
        return Problem("exit code", f"{r.exit_code}: {r.stderr[-300:]}")
    if "Traceback" in r.stderr or "Traceback" in r.stdout:
        return Problem("traceback text", r.stderr[-600:])
    stray = [x for x in r.stderr.splitlines() if x.strip() and not x.startswith("rmqlab: ")]
    if stray and r.exit_code in (0, 1):  # a log record or a library warning leaking through
        return Problem("stray stderr", "\n".join(stray[:3]))
    if ERRORS is not None and r.exit_code == 2:
        ERRORS.append((args, r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""))
    if r.exit_code == 2:
        lines = r.stderr.strip().splitlines()  # warnings may come first; the error is the last line
        if not lines or not lines[-1].startswith("rmqlab: error: ") or not all(x.startswith("rmqlab: ") for x in lines):
            return Problem("error format", r.stderr[-300:])
        if r.stdout:
            return Problem("stdout on error", r.stdout[:200])
        if len(lines[-1]) > 600:
            return Problem("error not short", lines[-1][:600])
    if r.exit_code in (0, 1) and ("--json" in args) and "--json-lines" not in args:
        try:
            doc = json.loads(r.stdout)
        except ValueError as e:
            return Problem("bad json", f"{e}: {r.stdout[:200]!r} / {r.stderr[-300:]}")
        why = wrong_answer(args, doc, r.stderr)
        if why:
            return Problem("wrong answer", why)
    if r.exit_code in (0, 1) and "--json-lines" in args and "--json" not in args:
        for line in r.stdout.splitlines():
            try:
                json.loads(line)
            except ValueError as e:
                return Problem("bad json line", f"{e}: {line[:200]!r}")
    return None


def _opt(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


def wrong_answer(args: list[str], doc: Any, stderr: str = "") -> str:
    """What a JSON answer says that cannot be true, whatever the damage ("" when nothing). A
    record whose PHYSICALOFFSET field lies is shown with that field (as RocketMQ decodes it) and
    a warning saying so: then the offsets are not checked against positions."""
    cmd = args[0]
    if "says it is at" in stderr:
        return ""
    if cmd == "get" and _opt(args, "--offset") is not None and doc["commit_log_offset"] != int(
            _opt(args, "--offset") or 0):
        return f"get --offset answered the record at {doc['commit_log_offset']}"
    if cmd == "messages":
        offsets = [m["commit_log_offset"] for m in doc]
        if offsets != sorted(set(offsets)):
            return "messages not in CommitLog order (or repeated)"
        topic, queue = _opt(args, "--topic"), _opt(args, "--queue")
        if any((topic is not None and m["topic"] != topic) or (queue is not None and m["queue_id"] != int(queue))
               for m in doc):
            return "messages outside the --topic/--queue asked for"
        start = _opt(args, "--from-offset")
        if start is not None and offsets and offsets[0] < int(start):
            return f"messages --from-offset {start} began at {offsets[0]}"
        limit = _opt(args, "--limit")
        if limit is not None and len(doc) > int(limit):
            return f"{len(doc)} messages for --limit {limit}"
        if any(m["file"] and int(m["file"]) > m["commit_log_offset"] for m in doc):
            return "a message before the start of the file said to hold it"
    if cmd == "cq" and isinstance(doc, list):
        qo = [u["queue_offset"] for u in doc]
        if qo != sorted(set(qo)):
            return "cq units not in queue-offset order"
        start = _opt(args, "--from")
        if start is not None and qo and qo[0] < int(start) and "batch_size" not in doc[0]:
            return f"cq --from {start} began at {qo[0]}"
    if cmd == "query":
        key, topic = _opt(args, "--key"), _opt(args, "--topic")
        for m in doc["matches"]:
            if m["topic"] != topic or key not in [*(m["keys"] or "").split(" "), m["uniq_key"]]:
                return f"query match without {topic}#{key}: {m}"
    if cmd == "verify":
        counts = {k: sum(1 for f in doc["findings"] if f["severity"] == k) for k in ("error", "warning", "info")}
        if counts != doc["counts"] or doc["ok"] != (counts["error"] == counts["warning"] == 0):
            return "verify counts or ok disagree with its findings"
    if cmd == "inspect":
        cl = doc["commit_log"]
        if cl["files"] and not cl["min_offset"] <= cl["max_offset"]:
            return f"inspect: min_offset {cl['min_offset']} > max_offset {cl['max_offset']}"
    return ""


def api_calls(src: Source) -> list[tuple[str, Callable[[Any], Any]]]:
    t, q = src.topic, src.queue
    calls: list[tuple[str, Callable[[Any], Any]]] = [
        ("files", lambda s: s.files()), ("messages", lambda s: s.messages(limit=100)),
        ("messages(topic)", lambda s: s.messages(t, queue_id=q)), ("topics", lambda s: s.topics()),
        ("consume_queue", lambda s: s.consume_queue(t, q)),
        ("consume_queue(from)", lambda s: s.consume_queue(t, q, 3, 5)),
        ("batch_consume_queue", lambda s: s.batch_consume_queue("Batched", 0)),
        ("index_files", lambda s: s.index_files()), ("index_chain", lambda s: s.index_chain(t, src.key)),
        ("checkpoint", lambda s: s.checkpoint()), ("delays", lambda s: s.delays()),
        ("timer_checkpoint", lambda s: s.timer_checkpoint()), ("timer_wheel", lambda s: s.timer_wheel()),
        ("timer_log", lambda s: s.timer_log()), ("timers", lambda s: s.timers()),
        ("verify", lambda s: list(s.verify(check_crc=True))), ("explain_recovery", lambda s: s.explain_recovery()),
        ("explain_cleanup", lambda s: s.explain_cleanup(now=1_900_000_000_000, disk_ratio=0.5)),
        ("read_record", lambda s: s.read_record(src.offset)), ("read_record(huge)", lambda s: s.read_record(2**63 - 1)),
        ("record_start_at_or_after", lambda s: s.record_start_at_or_after(src.offset + 1)),
    ]
    if src.index_file:
        calls.append(("index_slots", lambda s: s.index_slots(src.index_file)))
    return calls


def check_api(src: Source, path: Path) -> list[Problem]:
    """The Python API on ``path``: every frame and walk returns or raises an RmqlabError."""
    from rmqlab.inspect import open_snapshot

    problems: list[Problem] = []

    def guarded(what: str, fn: Callable[[], Any]) -> Any:
        try:
            with watchdog(CALL_TIMEOUT_S):
                return fn()
        except Hang as e:
            problems.append(Problem(f"api {what}: hang", str(e)))
        except RmqlabError:
            pass
        except PermissionError as e:  # a mode-000 file (not as root): the file system said no, naming it
            if not e.filename:
                problems.append(Problem(f"api {what}: PermissionError naming no file", str(e)))
        except Exception as e:  # the point: anything else is a bug
            import traceback

            problems.append(Problem(f"api {what}: {type(e).__name__}",
                                    "".join(traceback.format_exception(e))[-1500:]))
        return None

    snap = guarded("open_snapshot", lambda: open_snapshot(path))
    if snap is None:
        return problems
    try:
        for what, fn in api_calls(src):
            guarded(what, lambda fn=fn: fn(snap))  # type: ignore[misc]
    finally:
        snap.close()
    return problems


def run_case(src: Source, damage_name: str, seed: int, work: Path, *, commands_sample: int | None = None,
             table_sample: int | None = None, api: bool = True) -> tuple[str | None, list[tuple[list[str], Problem]]]:
    """Copy ``src`` to ``work``, apply one damage, run the commands (``commands_sample`` of them
    picked by the seed, else all; each with --json, and ``table_sample`` of them as tables too,
    None: all) and the API; ``(damage done or None when it does not apply, problems)``."""
    rng = random.Random(f"{src.name}/{damage_name}/{seed}")
    root, outside = work / "store", work / "outside"
    for p in (root, outside):
        if p.is_symlink() or p.is_file():
            p.unlink()
        elif p.exists():
            shutil.rmtree(p)
    shutil.copytree(src.root, root, symlinks=True)
    outside.mkdir()
    (root / "lock").unlink(missing_ok=True)  # not a promise about lock files: none is taken either
    did = apply(damage_name, root, rng, outside)
    if did is None:
        return None, []
    s = str(root)
    before = tree_state(root, outside)
    problems: list[tuple[list[str], Problem]] = []
    cmds = commands(src, s, rng)
    if commands_sample is not None:
        cmds = rng.sample(cmds, min(commands_sample, len(cmds)))
    tables = set(range(len(cmds)) if table_sample is None else rng.sample(range(len(cmds)),
                                                                            min(table_sample, len(cmds))))
    for i, args in enumerate(cmds):
        variants = [[*args, "--json"]] + ([args] if i in tables else [])
        if args[0] in ("index", "query", "messages") and rng.random() < 0.3:
            variants.append([*args, *SMALL_INDEX, "--json-lines"])
        for v in variants:
            p = check_cli(v)
            if p is not None:
                problems.append((v, p))
    if api:
        problems += [(["api"], p) for p in check_api(src, root)]
    after = tree_state(root, outside)
    if after != before:
        changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        problems.append((["*"], Problem("store changed", f"{changed[:5]}")))
    return did, problems


if __name__ == "__main__":  # a wide sweep by hand
    import sys
    import tempfile

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    ERRORS = []
    DEV_ZERO = True
    only = sys.argv[2] if len(sys.argv) > 2 else ""
    base = Path(tempfile.mkdtemp(prefix="rmqlab-damage-"))
    sources = [reference_source("clean-small"), reference_source("crash-tail"), timer_source(base),
               batch_ext_source(base)]
    seen: set[tuple[str, str]] = set()
    for seed in range(n):
        for src in sources:
            for name in catalogue():
                if only and only not in name:
                    continue
                did, problems = run_case(src, name, seed, base / "w", table_sample=None if seed == 0 else 0)
                for args, p in problems:
                    sig = (p.what, p.detail.strip().splitlines()[-1][:120] if p.detail.strip() else "")
                    if sig in seen:
                        continue
                    seen.add(sig)
                    print(f"== {src.name} / {name} / seed {seed}: {did}\n   {args[:1] + args[2:]}\n   {p.what}: "
                          f"{p.detail[-1200:]}", flush=True)
    import re

    shapes: dict[str, str] = {}
    for args, line in ERRORS:
        shape = re.sub(r"\d+", "N", line.replace(str(base), "<base>"))[:160]
        shapes.setdefault(shape, f"{args[:1] + args[2:]}: {line[:400]}")
    for shape in sorted(shapes):
        print("ERR", shapes[shape])
    print("done", base)
