"""Seeded damage fuzz of the scripted-inspection face (the 3 a.m. promise, README "Scripted inspection").

Every damage of the harness's catalogue (``tests/cli/damage_harness.py``: flipped bytes,
truncations to 0-3 bytes or anywhere, garbage appended, renamed files, a directory for a file and
a file for a directory, a FIFO for a file, junk in every directory, illegal topic dirs, names that
are not UTF-8, huge sparse files, missing subdirs, symlinks leading out of the store, nowhere or
in a loop, an empty store dir, no store, a file for a store; mode-000 files, which root reads
anyway, so as root those cases run in a child pytest under ``setpriv`` without the capability
that lets root read them) is applied once to a copy of a store that has that kind of file -- the two RocketMQ 4.9.8
reference stores, a 5.3.3 timer store, a ConsumeQueueExt + BatchConsumeQueue store -- and a
seeded sample of every inspection command (good and bad arguments, JSON and
tables) runs in-process, plus the Python API. Each must answer (exit 0/1 with JSON that parses,
or exit 2 with one ``rmqlab: error:`` line), log nothing but ``rmqlab:`` lines, finish under a
watchdog, and leave every byte, mtime and name of the store (and of what its symlinks point at)
as it was. A failure names the store, the damage and the command; ``python -m
tests.cli.damage_harness N`` sweeps N seeds of the whole catalogue on every store by hand.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli import damage_harness as h

SEED = 20261129


def _sources_with(name: str) -> list[str]:
    """Which stores a damage is tried on: those that hold its kind of file."""
    kind = name.split(":")[1] if ":" in name else ""
    if kind in ("timerlog", "timerwheel"):
        return ["timer"]
    if kind in ("batchconsumequeue", "consumequeue_ext"):
        return ["ext+batch"]
    if kind == "config":
        return ["timer", "clean-small"]  # config/timercheck and delayOffset.json
    return ["clean-small", "crash-tail", "timer", "ext+batch"]


CASES = []
for _i, _name in enumerate(h.catalogue()):
    if _name.startswith("unreadable:") and h.reads_mode_000():
        continue  # root reads a mode-000 file: these cases run under setpriv (the last test)
    _choices = _sources_with(_name)
    CASES.append((_choices[_i % len(_choices)], _name))


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, h.Source]:
    base = tmp_path_factory.mktemp("damage-sources")
    return {"clean-small": h.reference_source("clean-small"), "crash-tail": h.reference_source("crash-tail"),
            "timer": h.timer_source(base), "ext+batch": h.batch_ext_source(base)}


@pytest.mark.parametrize(("source", "damage"), CASES, ids=[f"{s}-{d}" for s, d in CASES])
def test_inspection_survives_damage(sources: dict[str, h.Source], tmp_path: Path, source: str, damage: str) -> None:
    src = sources[source]
    did, problems = h.run_case(src, damage, SEED, tmp_path, commands_sample=9, table_sample=3)
    assert did is not None, f"{damage} found nothing to damage in {source}: the case tests nothing"
    assert not problems, "\n".join(f"{source} / {did}: {' '.join(a[:1] + a[2:])}: {p.what}: {p.detail[-800:]}"
                                   for a, p in problems)


#: what lets root read a mode-000 file; dropped from the bounding set, so an exec'd root keeps none
_READ_OVERRIDE = "-dac_override,-dac_read_search"
_REPO = Path(__file__).resolve().parents[2]


def test_mode_000_cases_run_as_root_without_the_read_override() -> None:
    """As root, every unreadable case above is skipped (root reads a mode-000 file), so run them,
    and the CLI's own unreadable-file test, in a child pytest that has root's uid but not the
    capabilities that override file modes: each must pass, none skip."""
    if not h.reads_mode_000():
        pytest.skip("this user cannot read a mode-000 file: the unreadable cases ran above")
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("no setpriv (util-linux) to drop CAP_DAC_OVERRIDE: the unreadable cases cannot run as root")
    drop = [setpriv, f"--inh-caps={_READ_OVERRIDE}", f"--bounding-set={_READ_OVERRIDE}"]
    probe = subprocess.run([*drop, sys.executable, "-c", "from tests.cli.damage_harness import reads_mode_000 as r; "
                            "raise SystemExit(r())"], cwd=_REPO, capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"setpriv could not drop the read override here (exit {probe.returncode}): {probe.stderr[-300:]}")
    kinds = [name for name in h.catalogue() if name.startswith("unreadable:")]
    r = subprocess.run([*drop, sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs",
                        "tests/cli/test_cli_damage_fuzz.py", "tests/cli/test_cli.py::test_unreadable_file_exits_2",
                        "-k", "unreadable"], cwd=_REPO, capture_output=True, text=True, timeout=600)
    tail = r.stdout[-3000:] + r.stderr[-1000:]
    assert r.returncode == 0, tail
    summary = re.search(r"(\d+) passed(.*) in ", r.stdout)
    assert summary is not None, tail
    assert int(summary.group(1)) == len(kinds) + 1, tail  # one case per kind, and the CLI's test
    assert "skipped" not in summary.group(2), tail
