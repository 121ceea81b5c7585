"""``run_demo`` writes a self-contained HTML report with plotly figures and the step log."""

from __future__ import annotations

import pytest

pytest.importorskip("plotly")

from rmqlab.demo import run_demo


def test_run_demo_writes_report(tmp_path):
    lines: list[str] = []
    out = tmp_path / "report.html"
    summary = run_demo(str(out), echo=lines.append)
    page = out.read_text("utf-8")
    assert page.count("plotly-graph-div") >= 8
    assert "Plotly.newPlot" in page
    assert "cdn.plot.ly" not in page.split("</script>", 1)[0]
    for line in lines:
        assert line.split(":")[0].replace("&", "&amp;") in page
    assert summary["recovery"]["mode"] == "abnormal"
    assert summary["recovery"]["process_offset"] == summary["flushed_before_crash"]
    assert summary["query"]["offsets"]
    assert summary["query"]["late_found"] == 0
    assert summary["cleanup"]["trigger"] == "time_up"
    assert summary["cleanup"]["now_local"][11:16] == "04:00"
    assert len(summary["cleanup"]["kept"]) == 1
    assert summary["index_walk_steps"] >= 1
    assert summary["store_dir"] is None
    assert summary["messages_acknowledged"] == summary["messages_written"]
    assert lines
    assert lines == summary["steps"]


def test_run_demo_does_not_depend_on_this_machines_disk(tmp_path, monkeypatch):
    """A laptop disk 95 % full makes the real probe refuse puts; the demo's simulated disk keeps its story."""
    import rmqlab.store.cleanup as cleanup

    monkeypatch.setattr(cleanup, "system_disk_usage", lambda path: 0.95)
    summary = run_demo(str(tmp_path / "report.html"), echo=lambda line: None)
    assert summary["messages_written"] == summary["messages_acknowledged"] == 162
    assert summary["recovery"]["process_offset"] == summary["flushed_before_crash"]
    assert summary["query"]["offsets"]
    assert summary["cleanup"]["trigger"] == "time_up"
    assert "simulated one, 50% full" in summary["steps"][0]
