"""The notebooks in a real browser: JupyterLab + headless Debian Chromium driven by Playwright.

What a person sees after "Run All": plotly figures drawn, the pointer markers of the mapped-file
view in the legend, a click on a CommitLog record decoding it in the panel below, and the cleanup
plan changing when the disk-ratio slider is moved. Screenshots go to ``tests/browser/artifacts/``
(git-ignored).

JupyterLab serves a temporary copy of ``notebooks/`` and ``data/`` (so relative paths such as
``../data/clean-small`` work and the repository is not touched), with an empty token, its own
settings (news and update checks off) and workspaces.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
CHROMIUM = shutil.which("chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]
RUN_TIMEOUT_MS = 120_000

if CHROMIUM is None:
    pytest.skip("Debian's chromium is not installed (apt-get install chromium); Playwright cannot download "
                "browsers here", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api")
pytest.importorskip("jupyterlab")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("lab")
    shutil.copytree(REPO / "notebooks", root / "notebooks", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    shutil.copytree(REPO / "data", root / "data")
    settings = root / ".settings"
    notification = settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    notification.parent.mkdir(parents=True)
    notification.write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    port = _free_port()
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
           "--ServerApp.token=", "--ServerApp.password=", "--LabApp.expose_app_in_browser=True",
           f"--ServerApp.root_dir={root}", f"--LabApp.user_settings_dir={settings}",
           f"--LabApp.workspaces_dir={root / '.workspaces'}", "--ServerApp.open_browser=False"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(root / ".runtime"), "JUPYTER_CONFIG_DIR": str(root / ".config")}
    log = open(root / "lab.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=root)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"JupyterLab exited ({proc.returncode}):\n{(root / 'lab.log').read_text()[-3000:]}")
            with contextlib.suppress(OSError), urllib.request.urlopen(f"{base}/api/status", timeout=2) as r:
                if r.status == 200:
                    break
            if time.monotonic() > deadline:
                pytest.fail(f"JupyterLab did not start in 60 s:\n{(root / 'lab.log').read_text()[-3000:]}")
            time.sleep(0.25)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    p = context.new_page()
    try:
        yield p
    finally:
        context.close()


def shot(page: Any, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=False)
    return path


_FIND = """(name) => {
  const app = window.jupyterapp;
  if (!app) return null;
  return Array.from(app.shell.widgets('main')).find(w => w.context && w.context.path.endsWith(name)) || null;
}"""

_KERNEL_IDLE = """(name) => {
  const w = (FIND)(name);
  const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
  return !!(k && k.status === 'idle' && w.content && w.content.widgets.length > 0);
}""".replace("FIND", _FIND)

_RUN_ALL = """async (name) => {
  const app = window.jupyterapp;
  const w = (FIND)(name);
  app.shell.activateById(w.id);
  await app.commands.execute('notebook:run-all-cells');
}""".replace("FIND", _FIND)

_ALL_RAN = """(name) => {
  const w = (FIND)(name);
  const k = w && w.sessionContext.session && w.sessionContext.session.kernel;
  if (!k || k.status !== 'idle') return false;
  return w.content.widgets.every(c => c.model.type !== 'code' || c.model.executionCount !== null);
}""".replace("FIND", _FIND)

_ERRORS = """() => Array.from(document.querySelectorAll(
    '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'))
  .map(e => e.innerText).filter(t => t.includes('Error') || t.includes('Traceback'))"""


def open_and_run(page: Any, base: str, notebook: str) -> None:
    """Open ``notebooks/<notebook>`` in a fresh workspace, wait for its kernel, run every cell and
    wait until each code cell has an execution count and the kernel is idle again."""
    workspace = Path(notebook).stem.replace("_", "-")
    page.goto(f"{base}/lab/workspaces/{workspace}/tree/notebooks/{notebook}?reset")
    try:
        page.wait_for_function(_KERNEL_IDLE, arg=notebook, timeout=60_000, polling=250)
        page.evaluate(_RUN_ALL, notebook)
        page.wait_for_function(_ALL_RAN, arg=notebook, timeout=RUN_TIMEOUT_MS, polling=250)
        page.wait_for_selector(".js-plotly-plot .main-svg", timeout=30_000)
    except Exception:
        shot(page, f"{workspace}-FAILED")
        raise
    errors = page.evaluate(_ERRORS)
    assert errors == [], errors


_PAST_THE_EDGE = """() => [...document.querySelectorAll('.jp-OutputArea-output')].flatMap((o) => {
  const edge = o.getBoundingClientRect().right + 1;
  return [...o.querySelectorAll('.js-plotly-plot, .widget-button')]
    .filter((e) => e.getBoundingClientRect().width > 0 && e.getBoundingClientRect().right > edge)
    .map((e) => (e.innerText || (e.querySelector('.gtitle') || {}).textContent || e.className).slice(0, 60));
})"""


def assert_nothing_past_the_edge(page: Any) -> None:
    """No figure or button of any output runs past the output's right edge, where a person sees it
    cut off (the output scrolls sideways): what a notebook beside JupyterLab's file browser shows."""
    past = page.evaluate(_PAST_THE_EDGE)
    assert past == [], past


def output_with_plot(page: Any, index: int = 0) -> Any:
    """The ``index``-th cell output area holding a plotly figure."""
    return page.locator(".jp-OutputArea-output", has=page.locator(".js-plotly-plot")).nth(index)


def test_mapped_files_show_pointer_markers(lab: str, page: Any) -> None:
    open_and_run(page, lab, "01_mapped_files_and_pointers.ipynb")
    plots = page.locator(".js-plotly-plot")
    assert plots.count() >= 2  # commit log files and a consume queue
    out = output_with_plot(page, 0)
    out.scroll_into_view_if_needed()
    out.locator(".legendtext").nth(2).wait_for(state="attached", timeout=20_000)
    legend = out.locator(".legendtext").all_text_contents()  # SVG: no innerText
    assert {"wrote", "committed", "flushed"} <= set(legend), legend
    # one marker per file on each pointer row; four CommitLog files after the notebook ran
    assert out.locator(".scatterlayer .trace .point").count() >= 3 * 4
    title = out.locator(".gtitle").first.text_content() or ""
    assert "commitlog" in title, title
    assert "(live)" in title, title
    assert_nothing_past_the_edge(page)
    shot(page, "01_mapped_files")


def test_click_on_commit_log_record_decodes_it(lab: str, page: Any) -> None:
    open_and_run(page, lab, "02_commitlog_record_and_write_path.ipynb")
    out = output_with_plot(page, 0)
    out.scroll_into_view_if_needed()
    detail = out.locator(".widget-html-content").last
    # the notebook's last select() showed a blank record; a click on a message must replace it
    page.wait_for_function("(el) => el.innerText.includes('blank end-of-file record')",
                           arg=detail.element_handle(), timeout=20_000)
    bars = out.locator(".barlayer .trace .point path")
    bars.nth(10).wait_for(state="visible", timeout=20_000)  # the figure's data arrives over the widget comm
    target = bars.nth(3)
    box = target.bounding_box()
    assert box is not None
    assert box["width"] > 0
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.wait_for_function("(el) => el.innerText.includes('BODYCRC')", arg=detail.element_handle(),
                           timeout=20_000)
    text = detail.inner_text()
    for field in ("MAGICCODE", "BODYCRC", "QUEUEOFFSET", "PHYSICALOFFSET", "TOPIC", "PROPERTIES"):
        assert field in text, field
    assert "0xDAA320A7" in text
    shot(page, "02_commitlog_click")


def test_index_view_fits_and_walks(lab: str, page: Any) -> None:
    """Notebook 04's IndexView: the heat map and the chain histogram side by side ran 430 px past
    the output's edge; they wrap now. "whole walk" draws every step of the key's chain."""
    open_and_run(page, lab, "04_index_file_and_hash_chains.ipynb")
    out = page.locator(".jp-OutputArea-output", has=page.locator(".gtitle", has_text="chain length histogram")).first
    out.scroll_into_view_if_needed()
    walk = out.locator(".js-plotly-plot", has=page.locator(".gtitle", has_text="chain walk")).first
    expect = sync_api.expect
    expect(walk).to_be_visible(timeout=20_000)
    assert_nothing_past_the_edge(page)
    out.get_by_role("button", name="whole walk", exact=True).click()
    expect(walk.locator(".gtitle")).to_contain_text("(done)", timeout=20_000)
    page.wait_for_function(
        "(gd) => [...gd.querySelectorAll('.scatterlayer .point')]"
        ".filter((p) => p.getBoundingClientRect().width > 2).length >= 2",
        arg=walk.element_handle(), timeout=20_000)
    shot(page, "04_index_walk")


def test_disk_slider_changes_cleanup_decision(lab: str, page: Any) -> None:
    open_and_run(page, lab, "07_expired_file_cleanup.ipynb")
    view = page.locator(".jp-OutputArea-output", has=page.locator(".widget-slider", has_text="disk ratio")).first
    view.scroll_into_view_if_needed()
    table = view.locator(".widget-html-content", has=page.locator("table.rmq-cleanup"))
    page.wait_for_function("(el) => el.innerText.includes('no cleanup')", arg=table.element_handle(),
                           timeout=20_000)
    decisions = table.locator("tr td:nth-child(4)")  # file, age, rule, decision, why, reason
    assert set(decisions.all_inner_texts()) == {"keep"}
    timeline = view.locator(".js-plotly-plot").first
    assert _time_axis(timeline) == {"x": "date", "x_set": "date", "y": "category", "traces": 1, "drawn": 5}
    assert_nothing_past_the_edge(page)
    shot(page, "07_cleanup_before")
    slider = view.locator(".widget-slider", has_text="disk ratio")
    readout = slider.locator(".widget-readout")
    assert readout.inner_text().strip() in ("0.50", "0.5")
    readout.click()
    page.keyboard.press("Control+A")
    page.keyboard.type("0.86")
    page.keyboard.press("Enter")
    page.wait_for_function("(el) => el.innerText.includes('forced')", arg=table.element_handle(), timeout=20_000)
    text = table.inner_text()
    assert "space_full" in text, text[:500]
    after = decisions.all_inner_texts()
    assert after.count("delete") >= 1, after
    assert after[-1] == "keep", after  # the newest file always stays
    assert readout.inner_text().strip() == "0.86"
    # the gauge follows the slider too
    assert "86" in (view.locator(".js-plotly-plot").last.text_content() or "")
    # and the time line is still one: a "delete" bar trace joined the "keep" one
    page.wait_for_function("(gd) => gd.data.length === 2", arg=timeline.element_handle(), timeout=20_000)
    assert _time_axis(timeline) == {"x": "date", "x_set": "date", "y": "category", "traces": 2, "drawn": 5}
    shot(page, "07_cleanup_disk_86")


def _time_axis(plot: Any) -> dict[str, Any]:
    """What a person sees of a plotly time line of files: the x axis's type as drawn
    (``_fullLayout``) and as set, the y axis's type as drawn, the bar traces and the bars drawn
    (one per file, each with a width). Once, re-made traces left it with a category x axis of
    millisecond counts, then with dates but no bar at all."""
    return plot.evaluate("""(gd) => ({x: gd._fullLayout.xaxis.type, x_set: gd.layout.xaxis.type,
        y: gd._fullLayout.yaxis.type, traces: gd.data.filter((t) => t.type === 'bar').length,
        drawn: [...gd.querySelectorAll('.barlayer .point path')]
            .filter((p) => p.getBoundingClientRect().width > 1).length})""")


def test_dashboard_controls_drive_the_store(lab: str, page: Any) -> None:
    """Notebook 06's StoreDashboard: tabs with live figures, and its buttons move the engine.

    The screenshot ``06_dashboard.png`` is the one the README shows (docs/dashboard.png).
    """
    open_and_run(page, lab, "06_crash_and_recovery.ipynb")
    dashboard = page.locator(".jp-OutputArea-output", has=page.locator(".lm-TabBar, .widget-tab")).last
    dashboard.scroll_into_view_if_needed()
    expect = sync_api.expect
    for label in ("put N", "flush", "crash", "recover"):
        expect(dashboard.get_by_role("button", name=label, exact=False).first).to_be_visible(timeout=30_000)
    # every control whole inside the output (a row that did not wrap cut "put N" to "pu")
    area = dashboard.bounding_box()
    assert area is not None
    for label in ("put N", "step services", "flush", "crash", "recover (reopen)", "query by key",
                  "advance clock", "jump to 04:00"):
        box = dashboard.get_by_role("button", name=label, exact=True).first.bounding_box()
        assert box is not None, label
        assert area["x"] <= box["x"], label
        assert box["x"] + box["width"] <= area["x"] + area["width"] + 0.5, (label, box, area)
    before = dashboard.inner_text()
    dashboard.get_by_role("button", name="put N", exact=False).first.click()
    page.wait_for_function("(t) => document.body.innerText !== t", arg=before, timeout=30_000, polling=250)
    expect(dashboard.locator(".js-plotly-plot").first).to_be_visible(timeout=30_000)
    dashboard.screenshot(path=str(ARTIFACTS / "06_dashboard.png"))
    # "query by key" shows the index tab with the key's chain walk drawn: the slot and its items
    # as points of some size
    dashboard.get_by_role("button", name="step services", exact=True).click()  # dispatch: index built
    dashboard.get_by_role("button", name="query by key", exact=True).click()
    current = dashboard.locator(".lm-TabBar-tab.lm-mod-current")
    expect(current).to_have_text("index", timeout=20_000)
    walk = dashboard.locator(".js-plotly-plot", has=page.locator(".gtitle", has_text="chain walk")).first
    expect(walk).to_be_visible(timeout=20_000)
    page.wait_for_function(
        "(gd) => [...gd.querySelectorAll('.scatterlayer .point')]"
        ".filter((p) => p.getBoundingClientRect().width > 2).length >= 2",
        arg=walk.element_handle(), timeout=20_000)
    assert_nothing_past_the_edge(page)
    shot(page, "06_dashboard_query")


def test_memory_store_view_follows_puts(lab: str, page: Any) -> None:
    """Notebook 08's MemoryStoreView: bytes per memory topic against the threshold, the per-queue
    table, and the "put 10" button moving both."""
    open_and_run(page, lab, "08_memory_store.ipynb")
    out = output_with_plot(page, 0)
    out.scroll_into_view_if_needed()
    expect = sync_api.expect
    title = out.locator(".gtitle").first
    expect(title).to_contain_text("memory store:", timeout=20_000)
    assert "evicted" in (title.text_content() or "")
    table = out.locator("table.rmq-memory")
    expect(table).to_be_visible(timeout=20_000)
    assert "Prices" in table.inner_text()
    assert "threshold" in (out.locator(".annotation-text").first.text_content() or "")
    before = title.text_content() or ""
    out.get_by_role("button", name="put 10").click()
    expect(out.locator(".gtitle").first).not_to_have_text(before, timeout=20_000)
    assert_nothing_past_the_edge(page)
    shot(page, "08_memory_store")


def test_timer_and_schedule_views_follow_the_clock(lab: str, page: Any) -> None:
    """Notebook 11: the ScheduleView's levels and table, the TimerView's wheel (bars per slot by
    kind, the read-time marker, the events table), and its buttons putting a timer message and
    moving the clock until it is delivered."""
    open_and_run(page, lab, "11_delayed_and_timer_messages.ipynb")
    expect = sync_api.expect
    sched = page.locator(".jp-OutputArea-output", has=page.locator(".gtitle", has_text="delay levels:")).first
    sched.scroll_into_view_if_needed()
    expect(sched.locator("table.rmq-delay-levels")).to_be_visible(timeout=20_000)
    rows = sched.locator("table.rmq-delay-levels tr")
    assert rows.count() == 1 + 3, sched.locator("table.rmq-delay-levels").inner_text()  # levels 1, 2 and 3 used
    expect(sched.locator("table.rmq-delay-deliveries")).to_contain_text("Orders/0", timeout=20_000)
    shot(page, "11_schedule_view")

    wheel = page.locator(".jp-OutputArea-output", has=page.locator(".gtitle", has_text="timer wheel:")).first
    wheel.scroll_into_view_if_needed()
    legend = wheel.locator(".legendtext")
    legend.nth(2).wait_for(state="attached", timeout=20_000)
    assert legend.all_text_contents() == ["message", "roll (due beyond the window)", "delete marker"]
    notes = " ".join(wheel.locator(".annotation-text").all_text_contents())
    assert "read time" in notes, notes
    assert "now" in notes, notes
    events = wheel.locator("table.rmq-timer-events")
    expect(events).to_contain_text("delivered", timeout=20_000)
    assert_nothing_past_the_edge(page)
    plot = wheel.locator(".js-plotly-plot").first

    def drawn_bars() -> int:
        return plot.evaluate("(gd) => [...gd.querySelectorAll('.barlayer .point path')]"
                             ".filter((p) => p.getBoundingClientRect().height > 1).length")

    title = wheel.locator(".gtitle").first
    before = title.text_content() or ""
    bars_before = drawn_bars()
    wheel.get_by_role("button", name="put: in 7 s").click()  # a new slot 7 s ahead
    expect(title).not_to_have_text(before, timeout=20_000)
    page.wait_for_function(f"(gd) => [...gd.querySelectorAll('.barlayer .point path')]"
                           f".filter((p) => p.getBoundingClientRect().height > 1).length > {bars_before}",
                           arg=plot.element_handle(), timeout=20_000)
    shot(page, "11_timer_view_put")
    delivered = events.inner_text().count("delivered")
    for _ in range(2):
        wheel.get_by_role("button", name="advance 5 s").click()
        time.sleep(0.3)
    page.wait_for_function(f"(el) => el.innerText.split('delivered').length - 1 > {delivered}",
                           arg=events.element_handle(), timeout=20_000)
    assert drawn_bars() >= 1
    shot(page, "11_timer_view_delivered")
