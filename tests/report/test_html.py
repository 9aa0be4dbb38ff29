"""The HTML report: escaping, self-containment, honest "not measured" values."""
from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import pytest
from click.testing import CliRunner

from taxbreak.cli.main import main
from taxbreak.decompose import analyze
from taxbreak.report.html import render_html
from taxbreak.report.markup import Markup, esc, tag, void

from .fake import XSS_KERNEL, make_analysis, phase_metrics
from .traces import FLOOR_US, write_planted

MANIFEST = {"model": "llama-3.2-1b", "batch_size": 4, "seq_len": 128, "new_tokens": 10,
            "gpu": {"name": "NVIDIA H100 80GB HBM3"}, "cpu": {"name": "Intel Xeon 8480C"}}


def test_tag_escapes_children_and_attributes_but_not_markup():
    assert tag("td", XSS_KERNEL) == "<td>&lt;script&gt;alert(1)&lt;/script&gt;</td>"
    assert tag("rect", title='"><x>') == '<rect title="&quot;&gt;&lt;x&gt;"></rect>'
    assert tag("g", tag("b", "x"), "<y>") == "<g><b>x</b>&lt;y&gt;</g>"
    assert void("rect", class_="a", hidden=True, skip=None) == '<rect class="a" hidden/>'
    assert esc(Markup("<b>")) == "<b>"


class _Refs(HTMLParser):
    """Every element and every src/href/url() reference of a page."""

    def __init__(self):
        super().__init__()
        self.tags, self.refs = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.refs += [v for k, v in attrs if k in ("src", "href", "xlink:href", "action") and v]
        self.refs += re.findall(r"url\(([^)]*)\)", " ".join(v or "" for _, v in attrs))


SVG = "{http://www.w3.org/2000/svg}"


def _svg_group(html: str, gid: str) -> ET.Element:
    """The ``<g id=gid>`` element of the inline chart that holds it."""
    at = html.index(f'id="{gid}"')
    start = html.rindex("<svg", 0, at)
    root = ET.fromstring(html[start: html.index("</svg>", at) + len("</svg>")])
    return next(g for g in root.iter(f"{SVG}g") if g.get("id") == gid)


XML_NAMESPACES = ("http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink")  # names, not fetched


def _external_refs(html: str) -> list[str]:
    """References that leave the page: a ``#id`` of an element of the page itself stays in it."""
    parser = _Refs()
    parser.feed(html)
    ids = set(re.findall(r' id="([^"]+)"', html))
    outside = [r for r in parser.refs if not (r.startswith("#") and r[1:] in ids)]
    return outside + [u for u in re.findall(r"https?://[^\s\"'<>)]+", html) if u not in XML_NAMESPACES]


def test_chart_ids_are_unique_on_the_page():
    html = render_html(make_analysis(), manifest=MANIFEST)
    ids = re.findall(r' id="([^"]+)"', html)
    assert ids and len(ids) == len(set(ids))


def _tags(html: str) -> set[str]:
    parser = _Refs()
    parser.feed(html)
    return set(parser.tags)


def test_trace_strings_are_escaped_everywhere():
    html = render_html(make_analysis(), manifest=MANIFEST, title="<b>run</b>")
    assert "<script" not in html.lower() and "<img" not in html.lower()
    assert not _tags(html) & {"script", "img", "iframe", "object", "embed", "link"}
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=&quot;alert(2)&quot;&gt;" in html
    assert "&lt;b&gt;run&lt;/b&gt;" in html
    assert 'http-equiv="Content-Security-Policy" content="default-src &#x27;none&#x27;' in html


def test_report_is_self_contained():
    html = render_html(make_analysis(), manifest=MANIFEST)
    assert _external_refs(html) == []
    assert html.startswith("<!DOCTYPE html>") and html.count("<svg") >= 4


def test_header_shows_manifest_and_floor_source():
    html = render_html(make_analysis(), manifest=MANIFEST)
    for text in ("llama-3.2-1b", "batch_size 4, seq_len 128, new_tokens 10", "NVIDIA H100 80GB HBM3",
                 "Intel Xeon 8480C", "4.50 µs (source: published:default)"):
        assert text in html
    bare = render_html(make_analysis())
    assert "not recorded (no run manifest)" in bare and "NVIDIA H100" in bare


def test_unmeasured_values_are_labelled_never_zero():
    a = make_analysis()
    cpu_only = phase_metrics(device_active_us=None, hdbi=None, framework_python_us=None, floor_us=None,
                             floor_source="unavailable", kernels=0)
    a.summary["all"] = cpu_only
    a.summary["phases"] = {"decode": cpu_only}
    html = render_html(a)
    assert "no CUDA device in trace" in html
    assert "not measured (not drawn): framework Python (ΔFT py)" in html
    assert "not measured (unavailable: no device activity in trace)" in html
    assert re.search(r"HDBI<b class=\"missing\">not measured</b>", html)


def test_cpu_run_steps_say_not_measured_in_one_line_and_keep_the_host_chart():
    a = make_analysis()
    for step in a.summary["steps"]:
        step["hdbi"] = None
    html = render_html(a)
    assert "HDBI per step: not measured in any step (no device activity)" in html
    assert html.count('aria-label="T_Orchestrate (µs) per step"') == 1


def test_planted_trace_report_numbers(tmp_path):
    trace = write_planted(tmp_path / "t.json")
    html = render_html(analyze(trace, floor_us=FLOOR_US), title=str(trace))
    assert "4.50 µs (source: given)" in html
    assert "HDBI<b>0.324</b>" in html and "T_Orchestrate<b>37.50 µs</b>" in html
    assert "step 0 (decode) taxbreak/decode/0" in html
    # device idle gaps: before K1, K1-K2, K2-K3, after K3
    assert len(_svg_group(html, "timeline-idle0").findall(f"{SVG}path")) == 4


def test_phase_table_shows_the_host_side_numbers(tmp_path):
    # ATen ops per token and host wall are measured on a CPU run too, so the table carries them
    trace = write_planted(tmp_path / "t.json")
    a = analyze(trace, floor_us=FLOOR_US, tokens=2)
    html = render_html(a, title=str(trace))
    phase_table = html[html.index("<td>steps</td>"):]
    ops = a.summary["all"]["aten_ops"]
    assert re.search(rf"<td>aten_ops</td>(<td[^>]*>[^<]*</td>)*?<td[^>]*>{ops}</td>", phase_table)
    assert "<td>aten_ops_per_token</td>" in phase_table and "<td>host_thread_us</td>" in phase_table


def test_cli_report_from_run_directory(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    write_planted(run / "trace.json.gz", xss=True)
    (run / "manifest.json").write_text(json.dumps(MANIFEST))
    out = tmp_path / "r.html"
    result = CliRunner().invoke(main, ["report", str(run), "-o", str(out), "--floor-us", "4.5"])
    assert result.exit_code == 0, result.output
    html = out.read_text()
    assert "llama-3.2-1b" in html and "<script" not in html
    assert "aten::&lt;img src=x onerror=&quot;alert(2)&quot;&gt;" in html


def test_cli_report_errors_are_one_line(tmp_path):
    (tmp_path / "empty").mkdir()
    result = CliRunner().invoke(main, ["report", str(tmp_path / "empty")])
    assert result.exit_code == 1 and result.stderr.startswith("error[run.no_traces]")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "manifest.json").write_text("{")
    (bad / "trace.json").write_text("{}")
    result = CliRunner().invoke(main, ["report", str(bad)])
    assert result.exit_code == 1 and result.stderr.startswith("error[run.not_a_run]")
    # a sweep directory's index is not a trace: point the user at the sweep's report
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "sweep.json").write_text('{"points": []}')
    result = CliRunner().invoke(main, ["report", str(sweep)])
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error[run.not_a_run]: {sweep}: a sweep directory, not one run")
    assert str(sweep / "sweep.html") in result.stderr


SMALL_REAL = ["HolisticTraceAnalysis/tests/data/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
              "HolisticTraceAnalysis/tests/data/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
              "HolisticTraceAnalysis/tests/data/cupti_profiler/benchmark_result_924719_1679055439_trace.json.gz",
              "HolisticTraceAnalysis/tests/data/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
              "nsys-ai/tests/fixtures/mock.sqlite"]


@pytest.mark.parametrize("rel", SMALL_REAL)
def test_real_traces_render(shared_traces, rel):
    analysis = analyze(shared_traces / rel)
    html = render_html(analysis, title=rel)
    assert _external_refs(html) == []
    if not analysis.summary["all"]["kernels"]:
        assert "no CUDA device in trace" in html or "not measured" in html


def _bars(ax, gid: str) -> list[tuple[float, float]]:
    """(left, width) in data units of the bars drawn with ``gid``, top row first."""
    patches = sorted((p for p in ax.patches if (p.get_gid() or "").rsplit("-", 1)[0] == gid),
                     key=lambda p: -p.get_y())
    return [(round(p.get_x(), 6), round(p.get_width(), 6)) for p in patches]


def test_component_bars_stack_on_one_scale_with_the_device_bar():
    from taxbreak.report.svg import BarGroup, Segment, component_figure

    group = BarGroup("decode", [Segment("framework_python_us", "py", 10.0), Segment("library_us", "lib", None),
                                Segment("launch_floor_us", "floor", 20.0)], device_us=60.0, hdbi=0.5,
                     orchestration_us=30.0)
    ax = component_figure([group]).axes[0]
    assert _bars(ax, "framework_python_us") == [(0.0, 10.0)]
    assert _bars(ax, "launch_floor_us") == [(10.0, 20.0)]  # stacked after Python
    assert _bars(ax, "device_active_us") == [(0.0, 60.0)] and _bars(ax, "library_us") == []  # unmeasured: no bar
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["decode · HDBI 0.500\nT_Orchestrate 30.00 µs\ndevice 60.00 µs"]
    assert ax.get_xlabel().startswith("µs") and len(ax.get_xticks()) >= 3
    assert [t.get_text() for t in ax.get_legend().get_texts()] == \
        ["framework Python (ΔFT py)", "launch floor (ΔKT = N·T_sys)", "device active"]


def test_charts_with_nothing_to_show_are_not_drawn():
    from taxbreak.report.svg import BarGroup, component_chart, idle_chart, queue_chart, step_chart

    empty = BarGroup("decode", [], device_us=None, hdbi=None)
    assert component_chart([empty]) is None and queue_chart([empty]) is None
    assert idle_chart([("decode", None), ("all", {"python": 0.0})]) is None
    assert step_chart([0, 1], [("decode", [None, None])], "HDBI", "hdbi") is None


def test_one_step_is_a_bar_not_a_dot_and_unmeasured_steps_break_the_line():
    from taxbreak.report.svg import step_figure

    ax = step_figure([3], [("decode", [0.25])], "HDBI", y_max=1.0).axes[0]
    assert _bars(ax, "bar") == [(2.75, 0.5)] and ax.patches[0].get_height() == 0.25 and not ax.lines
    ax = step_figure([0, 1, 2], [("prefill", [0.5, None, 0.7])], "HDBI", y_max=1.0).axes[0]
    ys = ax.lines[0].get_ydata()
    assert ys[0] == 0.5 and ys[1] != ys[1] and ys[2] == 0.7  # NaN: the line breaks there
    assert ax.get_ylim() == (0.0, 1.0) and all(float(t).is_integer() for t in ax.get_xticks())


def test_chart_svg_is_deterministic_and_script_free():
    from taxbreak.report.svg import step_chart

    a = step_chart([0, 1], [("decode", [1.0, 2.0])], "µs", "t")
    b = step_chart([0, 1], [("decode", [1.0, 2.0])], "µs", "t")
    assert a == b and a.startswith("<svg") and "<script" not in a and "<?xml" not in a
    ET.fromstring(a)  # well-formed on its own


def test_sentinel_stream_is_no_stream():
    from taxbreak.report.timeline import stream_label

    assert stream_label(0, 4294967295) == "GPU 0 · no stream" and stream_label(1, 7) == "GPU 1 stream 7"


def test_idle_gaps_are_the_holes_in_the_union_of_busy_time():
    import numpy as np

    from taxbreak.report.timeline import Window, idle_gaps

    start = np.array([20, 0, 5])
    end = np.array([30, 10, 15])
    gs, ge = idle_gaps(start, end, Window(0, 40, "w"))
    assert list(zip(gs.tolist(), ge.tolist())) == [(15, 20), (30, 40)]
    gs, ge = idle_gaps(np.array([], dtype=int), np.array([], dtype=int), Window(0, 40, "w"))
    assert list(zip(gs.tolist(), ge.tolist())) == [(0, 40)]


def test_representative_step_is_the_median_decode_step():
    import pandas as pd

    from taxbreak.report.timeline import representative_step

    steps = pd.DataFrame({"step": [0, 1, 2, 3, -1], "phase": ["prefill", "decode", "decode", "decode", "between"],
                          "start_ns": [0, 10, 20, 30, None], "end_ns": [10, 20, 30, 40, None],
                          "orchestration_us": [100.0, 5.0, 9.0, 7.0, 1.0]})
    assert representative_step(steps)["step"] == 3


def test_matplotlib_is_imported_only_when_a_chart_is_drawn(tmp_path):
    """``taxbreak analyze`` and importing the report modules do not pay for matplotlib."""
    import subprocess
    import sys

    trace = write_planted(tmp_path / "t.json")
    code = ("import sys\n"
            "import taxbreak.report.html, taxbreak.report.svg, taxbreak.report.timeline, taxbreak.whatif.sweep_report\n"
            "from taxbreak.cli.main import main\n"
            f"try:\n    main(['analyze', {str(trace)!r}, '--json'])\nexcept SystemExit:\n    pass\n"
            "print('matplotlib' in sys.modules, file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stderr.strip().splitlines()[-1] == "False"
