"""Sweep line charts (matplotlib SVG): unmeasured points break the line, log2 x
ticks at every point, reference and transition lines, an empty chart says so."""
from __future__ import annotations

import math
import xml.etree.ElementTree as ET

from taxbreak.whatif.svg import Chart, Series, chart_figure, has_values, render_chart

NS = "{http://www.w3.org/2000/svg}"


def test_unmeasured_point_breaks_the_line():
    chart = Chart("t", "batch", "µs", [Series("S=8", [1, 2, 4, 8], [1.0, None, 3.0, 4.0])])
    line = chart_figure(chart).axes[0].lines[0]
    ys = line.get_ydata()
    assert ys[0] == 1.0 and math.isnan(ys[1]) and list(ys[2:]) == [3.0, 4.0]
    root = ET.fromstring(render_chart(chart, "c"))
    group = next(g for g in root.iter(f"{NS}g") if g.get("id") == "c-series-0")
    path = group.find(f"{NS}path").get("d")
    assert path.count("M") == 2  # two runs: [1] and [3, 4]


def test_log2_x_axis_ticks_every_point():
    chart = Chart("t", "batch", "µs", [Series("a", [1, 2, 4], [1.0, 2.0, 3.0])])
    ax = chart_figure(chart).axes[0]
    assert ax.get_xscale() == "log" and list(ax.get_xticks()) == [1, 2, 4]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "4"]
    assert ax.get_xlabel() == "batch" and ax.get_ylabel() == "µs"


def test_chart_without_values_says_not_measured():
    chart = Chart("HDBI", "batch", "HDBI", [Series("a", [1, 2], [None, None])])
    assert not has_values(chart)
    svg = render_chart(chart)
    assert "not measured" in svg
    ET.fromstring(svg)  # well-formed


def test_reference_line_marker_and_fixed_top():
    chart = Chart("HDBI", "b", "HDBI", [Series("a", [1, 2], [0.2, 0.4])], reference_y=0.5,
                  reference_label="HDBI = 0.5", y_max=1.0, markers=[(1.5, "a")])
    ax = chart_figure(chart).axes[0]
    assert ax.get_ylim() == (0.0, 1.0)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["a", "HDBI = 0.5", "a: transition at 1.5"]
    svg = render_chart(chart, "h")
    assert 'id="h-reference"' in svg and 'id="h-marker-0"' in svg and svg == render_chart(chart, "h")


def test_unmeasured_sweep_plots_collapse_into_one_sentence():
    from taxbreak.whatif.sweep_report import unplotted_sentence

    empty = [Series("S=8", [1, 2], [None, None])]
    charts = [Chart("prefill: HDBI vs batch size", "batch size", "HDBI", empty),
              Chart("decode: HDBI vs sequence length", "sequence length", "HDBI", empty),
              Chart("decode: kernels per token vs batch size", "batch size", "kernels per token", empty)]
    assert unplotted_sentence(charts) == \
        "Not plotted, no point measured: HDBI (decode, prefill); kernels per token (decode)."
    assert unplotted_sentence([]) == ""


def test_cpu_sweep_page_names_its_unmeasured_plots_in_one_sentence(tmp_path):
    import json

    from taxbreak.whatif.sweep import run_sweep
    from taxbreak.whatif.sweep_report import write_sweep_outputs

    from .test_sweep_unit import CONFIG, _step

    def cpu_profile(config, point, run_dir):  # no device: every device-side metric is None
        run_dir.mkdir(parents=True, exist_ok=True)
        steps = [_step("prefill", 0, 100.0 * point.batch, None, 400.0, 300.0),
                 _step("decode", 1, 50.0 + point.batch, None, 200.0, 150.0)]
        (run_dir / "summary.json").write_text(json.dumps({"steps": steps, "all": {"floor_us": None}}))

    run_sweep(CONFIG, tmp_path, profile_point=cpu_profile)
    out = write_sweep_outputs(tmp_path)
    page = (tmp_path / "sweep.html").read_text()
    assert page.count("Not plotted, no point measured:") == 1
    assert "HDBI (decode, prefill)" in page and "not measured: no values to plot" not in page
    drawn = {p.name for p in out["plots"]}
    assert "prefill-step_us-vs-batch.svg" in drawn and "prefill-hdbi-vs-batch.svg" not in drawn
    assert page.count("<svg") == len(drawn)
