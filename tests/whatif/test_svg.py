"""SVG line charts: unmeasured points break the line, an empty chart says so."""
from __future__ import annotations

import xml.etree.ElementTree as ET

from taxbreak.whatif.svg import Chart, Series, render_chart

NS = "{http://www.w3.org/2000/svg}"


def test_unmeasured_point_breaks_the_line():
    chart = Chart("t", "batch", "µs", [Series("S=8", [1, 2, 4, 8], [1.0, None, 3.0, 4.0])])
    root = ET.fromstring(render_chart(chart))
    lines = root.findall(f"{NS}polyline")
    assert [len(p.get("points").split()) for p in lines] == [1, 2]
    assert len(root.findall(f"{NS}circle")) == 3


def test_log2_x_axis_spaces_powers_of_two_evenly():
    chart = Chart("t", "batch", "µs", [Series("a", [1, 2, 4], [1.0, 2.0, 3.0])])
    xs = [float(c.get("cx")) for c in ET.fromstring(render_chart(chart)).findall(f"{NS}circle")]
    assert abs((xs[1] - xs[0]) - (xs[2] - xs[1])) < 0.11


def test_chart_without_values_says_not_measured():
    chart = Chart("HDBI", "batch", "HDBI", [Series("a", [1, 2], [None, None])])
    svg = render_chart(chart)
    assert "not measured" in svg and "<polyline" not in svg
    ET.fromstring(svg)  # well-formed


def test_reference_line_and_fixed_top():
    chart = Chart("HDBI", "b", "HDBI", [Series("a", [1, 2], [0.2, 0.4])], reference_y=0.5,
                  reference_label="HDBI = 0.5", y_max=1.0)
    root = ET.fromstring(render_chart(chart))
    dashed = [ln for ln in root.findall(f"{NS}line") if ln.get("stroke-dasharray")]
    assert len(dashed) == 1 and "HDBI = 0.5" in render_chart(chart)
