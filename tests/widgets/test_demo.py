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
    assert lines
    assert lines == summary["steps"]
