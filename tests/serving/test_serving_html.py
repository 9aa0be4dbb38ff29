"""HTML sections of the serving figures: content, n/a with the reason, trace strings escaped."""
from __future__ import annotations

import json

from click.testing import CliRunner

from taxbreak.cli.main import main
from taxbreak.decompose.analysis import analyze
from taxbreak.report.html import render_html
from taxbreak.report.serving_html import graph_cost_section, overlap_section, ranks_section
from taxbreak.synth.planted import PlantedLaunch, PlantedOp, PlantedSpec, PlantedStep, build
from taxbreak.synth.ranks import PlantedRanksSpec, RankWork as W, build_ranks
from taxbreak.synth.write_kineto import write_kineto


def _analysis():
    def op(nodes, host_ns, py_ns):
        launch = PlantedLaunch("<script>k</script>", 1_000, 0, host_ns, 1_000, 20_000, False, graph_kernels=nodes)
        return PlantedOp("model.py(1): forward", "aten::add", py_ns, [launch])
    steps = [PlantedStep("decode", [op(4, 17_320, 2_000)]),
             PlantedStep("decode", [op(10, 20_800, 3_000)], sync_first_ns=50_000)]
    return analyze(build(PlantedSpec(steps)).tables)


def test_report_has_overlap_and_graph_cost_sections():
    page = render_html(_analysis())
    assert "Overlap per step" in page and "CUDA-graph launch cost per node" in page
    assert "cudaStreamSynchronize" in page and "<script>k</script>" not in page


def test_sections_say_why_not_measured():
    assert "not measured (no step markers" in overlap_section(
        {"overlap": {"reason": "no step markers: overlap between steps needs the steps", "steps": []}})
    assert "not measured (no graph launch" in graph_cost_section(
        {"graph_launch_cost": {"reason": "no graph launch with device work in the trace", "devices": {}}})
    assert "not measured (one rank" in ranks_section({"reason": "one rank: skew needs two"})


def test_ranks_html_page(tmp_path):
    planted = build_ranks(PlantedRanksSpec([[W(), W()], [W(python_ns=300_000), W()]], steps=[2]))
    for i, tables in enumerate(planted.tables):
        write_kineto(tables, tmp_path / f"rank{i}.json")
    out = CliRunner().invoke(main, ["ranks", str(tmp_path), "--json", "-q", "--html", str(tmp_path / "r.html")])
    assert out.exit_code == 0, out.output
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "Cross-rank skew" in page and "python" in page and "298.0" in page
    assert json.loads(out.output)["ranks"]["collectives"] == 2
