"""Replay the Binder (repo2docker) set-up from ``binder/`` only, then run notebooks 01-09, 11 and 12 in it.

Binder itself is not reachable from here, so this does what repo2docker does, in a fresh virtual
environment: the Python of ``binder/runtime.txt`` when this machine has it (else this one),
``pip install -r binder/requirements.txt`` from the repository root (its ``-e .`` must resolve
there), ``binder/postBuild`` with that environment first on PATH, then every teaching notebook
executed by that environment's own kernel. ``binder/apt.txt`` is checked for the JRE Spark needs
(apt is not replayed: it would change this machine). pip's cache is reused, so a warm run takes a
couple of minutes; skipped when PyPI cannot be reached.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
BINDER = REPO / "binder"
PIP_TIMEOUT_S = 420
NOTEBOOKS_TIMEOUT_S = 600

RUNNER = textwrap.dedent('''
    """Run inside the Binder venv: execute notebooks two at a time, report JSON on stdout.

    Kernels get 300 s to start: three fresh kernels at once on a loaded 2-core CI box once took
    more than nbclient's default 60 s (CI of stop 10's first try)."""
    import json, sys, time
    from concurrent.futures import ThreadPoolExecutor
    from pathlib import Path
    import nbclient, nbformat

    nb_dir = Path(sys.argv[1])
    paths = sorted(p for p in nb_dir.glob("[0-9][0-9]_*.ipynb") if not p.name.startswith("10_"))  # 10: Spark

    def run(path):
        nb = nbformat.read(path, as_version=4)
        started = time.monotonic()
        error = None
        try:
            nbclient.NotebookClient(nb, timeout=120, startup_timeout=300, kernel_name="python3",
                                    resources={"metadata": {"path": str(nb_dir)}}).execute()
        except Exception as e:
            error = f"{type(e).__name__}: {str(e)[-1500:]}"
        outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
        errors = [f"{o.get('ename')}: {o.get('evalue')}" for o in outputs if o.get("output_type") == "error"]
        return {"name": path.name, "error": error, "errors": errors, "seconds": round(time.monotonic() - started, 1)}

    probe = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import sys; print(sys.prefix)")])
    nbclient.NotebookClient(probe, timeout=60, startup_timeout=300, kernel_name="python3").execute()
    kernel_prefix = probe.cells[0].outputs[0]["text"].strip()
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(run, paths))
    print(json.dumps({"kernel_prefix": kernel_prefix, "results": results}))
''')


def _pypi_reachable() -> str | None:
    try:
        with urllib.request.urlopen("https://pypi.org/simple/pip/", timeout=15) as r:
            return None if r.status == 200 else f"PyPI answered HTTP {r.status}"
    except OSError as e:
        return f"PyPI is not reachable ({e})"


def _runtime_python() -> tuple[str, str]:
    """The interpreter for ``binder/runtime.txt``'s version if installed here, else this one."""
    wanted = (BINDER / "runtime.txt").read_text().strip().removeprefix("python-")
    pyenv = sorted(Path.home().glob(f".pyenv/versions/{wanted}*/bin/python{wanted}"), reverse=True)
    for candidate in (f"python{wanted}", *map(str, pyenv)):
        try:
            out = subprocess.run([candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                                 capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if out.returncode == 0 and out.stdout.strip() == wanted:
            return candidate, wanted
    return sys.executable, "{}.{}".format(*sys.version_info[:2])


def test_binder_files_are_what_repo2docker_needs() -> None:
    reqs = [line.strip() for line in (BINDER / "requirements.txt").read_text().splitlines()
            if line.strip() and not line.lstrip().startswith("#")]
    assert any(r.startswith(("-e .", ".")) for r in reqs), "binder/requirements.txt must install rmqlab itself"
    assert any("widgets" in r for r in reqs), reqs
    assert any("spark" in r for r in reqs), reqs  # notebook 10
    assert (BINDER / "runtime.txt").read_text().strip() == "python-3.12"
    assert "openjdk-17-jre-headless" in (BINDER / "apt.txt").read_text().split()
    post = BINDER / "postBuild"
    assert os.access(post, os.X_OK), "postBuild must be executable"
    lines = [ln for ln in post.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    assert lines[0].startswith("set -e"), "postBuild must start with set -e (fail loudly)"


def test_binder_replay_runs_the_notebooks(tmp_path: Path) -> None:
    reason = _pypi_reachable()
    if reason:
        pytest.skip(f"cannot replay the Binder install: {reason}")
    python, version = _runtime_python()
    venv = tmp_path / "binder-venv"
    subprocess.run([python, "-m", "venv", str(venv)], check=True, timeout=120)
    bin_dir = venv / "bin"
    env = {**os.environ, "VIRTUAL_ENV": str(venv), "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
           "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONNOUSERSITE": "1"}
    env.pop("PYTHONPATH", None)
    started = time.monotonic()
    pip = subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "-q", "-r", "binder/requirements.txt"],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
    assert pip.returncode == 0, f"pip install -r binder/requirements.txt failed:\n{pip.stderr[-4000:]}"
    pip_s = time.monotonic() - started

    post = subprocess.run([str(BINDER / "postBuild")], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)
    assert post.returncode == 0, f"postBuild failed:\n{post.stdout[-2000:]}\n{post.stderr[-2000:]}"
    summary = next((ln for ln in post.stdout.splitlines() if ln.startswith("rmqlab binder:")), "")
    assert f"python {version}" in summary, post.stdout
    assert "pyspark" in summary, post.stdout
    assert "missing" not in summary, post.stdout

    runner = tmp_path / "run_notebooks.py"
    runner.write_text(RUNNER)
    run = subprocess.run([str(bin_dir / "python"), str(runner), str(REPO / "notebooks")], cwd=REPO / "notebooks",
                         env=env, capture_output=True, text=True, timeout=NOTEBOOKS_TIMEOUT_S)
    assert run.returncode == 0, f"notebook runner failed:\n{run.stderr[-4000:]}"
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert Path(report["kernel_prefix"]).resolve() == venv.resolve(), "notebooks ran in the wrong environment"
    results = report["results"]
    assert [r["name"][:2] for r in results] == [f"{i:02d}" for i in (*range(1, 10), 11, 12)]
    failed = [r for r in results if r["error"] or r["errors"]]
    assert failed == [], json.dumps(failed, indent=1)
    print(f"binder replay: python {version}, pip {pip_s:.0f} s, notebooks "
          + ", ".join(f"{r['name'][:2]} {r['seconds']} s" for r in results))
