"""The HTML report: escaping, self-containment, honest "not measured" values."""
from __future__ import annotations

import base64
import hashlib
import json
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import pytest
from click.testing import CliRunner

from taxbreak.cli.main import main
from taxbreak.decompose import analyze
from taxbreak.report.html import SCRIPT, render_html
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
    # one script, the package's own, allowed by its hash and nothing else
    assert html.lower().count("<script") == 1 and f"<script>{SCRIPT}</script>" in html and "<img" not in html.lower()
    assert not _tags(html) & {"img", "iframe", "object", "embed", "link"}
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=&quot;alert(2)&quot;&gt;" in html
    assert "&lt;b&gt;run&lt;/b&gt;" in html
    assert 'http-equiv="Content-Security-Policy" content="default-src &#x27;none&#x27;' in html
    digest = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
    assert f"script-src &#x27;sha256-{digest}&#x27;" in html and "unsafe-eval" not in html


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
    # one phase is all: drawn once, and the note names it
    assert "decode (= all): not measured (not drawn): framework Python (ΔFT py)" in html
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
    # device idle gaps in the step [5, 125] µs: before K1 [30, 35], K1-K2 [40, 45], K2-K3 [100, 108], after K3
    idle = [r for r in _chart(html, "timeline").iter(f"{SVG}rect") if r.get("class") == "idle"]
    assert [r.find(f"{SVG}title").text for r in idle] == [f"GPU 0 idle {us:.2f} µs" for us in (25, 5, 55, 17)]


def test_phase_table_shows_the_host_side_numbers(tmp_path):
    # ATen ops per token and host wall are measured on a CPU run too, so the table carries them
    trace = write_planted(tmp_path / "t.json")
    a = analyze(trace, floor_us=FLOOR_US, tokens=2)
    html = render_html(a, title=str(trace))
    phase_table = html[html.index('<td title="steps">steps</td>'):]
    ops = a.summary["all"]["aten_ops"]
    assert re.search(rf'<td title="aten_ops">host: ATen ops</td>(<td[^>]*>[^<]*</td>)*?<td[^>]*>{ops}</td>',
                     phase_table)
    assert '<td title="aten_ops_per_token">host: ATen ops / token</td>' in phase_table
    assert '<td title="host_thread_us">host: wall µs</td>' in phase_table
    assert not re.search(r"<td>[a-z]+_[a-z_]+</td>", html)  # no snake_case metric name as a row label


def test_cli_report_from_run_directory(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    write_planted(run / "trace.json.gz", xss=True)
    (run / "manifest.json").write_text(json.dumps(MANIFEST))
    out = tmp_path / "r.html"
    result = CliRunner().invoke(main, ["report", str(run), "-o", str(out), "--floor-us", "4.5"])
    assert result.exit_code == 0, result.output
    html = out.read_text()
    assert "llama-3.2-1b" in html and html.count("<script") == 1 and f"<script>{SCRIPT}</script>" in html
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


def _chart(html: str, name: str) -> ET.Element:
    """The inline ``<svg id=name>`` of a page (or a chart string), parsed."""
    start = html.index(f'id="{name}"')
    start = html.rindex("<svg", 0, start)
    return ET.fromstring(html[start: html.index("</svg>", start) + len("</svg>")])


def _marks(svg: str | ET.Element, tag: str = "rect") -> list[tuple[str, float, float]]:
    """(title, x, width) of every titled mark, in drawing order."""
    root = ET.fromstring(svg) if isinstance(svg, str) else svg
    return [(el.find(f"{SVG}title").text, float(el.get("x", el.get("cx", 0))), float(el.get("width", 0)))
            for el in root.iter(f"{SVG}{tag}") if el.find(f"{SVG}title") is not None]


def test_component_bars_stack_on_one_scale_with_the_device_bar_and_name_their_values():
    from taxbreak.report.svg import LABEL_W, BarGroup, Segment, component_chart

    group = BarGroup("decode", [Segment("framework_python_us", "py", 10.0), Segment("library_us", "lib", None),
                                Segment("launch_floor_us", "floor", 20.0)], device_us=60.0, hdbi=0.5,
                     orchestration_us=30.0)
    marks = _marks(component_chart([group]))
    assert [m[0] for m in marks] == ["decode · py: 10.00 µs", "decode · floor: 20.00 µs",
                                     "decode · T_DeviceActive: 60.00 µs"]  # unmeasured: no bar
    (_, x_py, w_py), (_, x_floor, w_floor), (_, x_dev, w_dev) = marks
    assert x_py == x_dev == LABEL_W and x_floor == pytest.approx(x_py + w_py, abs=1e-3)  # stacked after Python
    assert w_floor == pytest.approx(2 * w_py, abs=1e-3) and w_dev == pytest.approx(6 * w_py, abs=1e-3)
    svg = component_chart([group])
    for label in ("decode · HDBI 0.500", "T_Orchestrate 30.00 µs", "device 60.00 µs", "framework Python (ΔFT py)",
                  "launch floor (ΔKT = N·T_sys)", "device active"):
        assert f">{label}</text>" in svg
    assert "CUDA library (ΔCT)" not in svg  # the legend names what is drawn


def test_charts_with_nothing_to_show_are_not_drawn():
    from taxbreak.report.svg import BarGroup, component_chart, idle_chart, queue_chart, step_chart

    empty = BarGroup("decode", [], device_us=None, hdbi=None)
    assert component_chart([empty]) is None and queue_chart([empty]) is None
    assert idle_chart([("decode", None), ("all", {"python": 0.0})]) is None
    assert step_chart([0, 1], [("decode", [None, None])], "HDBI", "hdbi") is None


def test_one_step_is_a_bar_not_a_dot_and_unmeasured_steps_break_the_line():
    from taxbreak.report.svg import step_chart

    one = ET.fromstring(step_chart([3], [("decode", [0.25])], "HDBI", "h", y_max=1.0))
    assert [m[0] for m in _marks(one)] == ["decode step 3: 0.250"] and not list(one.iter(f"{SVG}polyline"))
    bar = next(r for r in one.iter(f"{SVG}rect") if r.find(f"{SVG}title") is not None)
    assert float(bar.get("height")) == pytest.approx(150 * 0.25, abs=0.1)  # a quarter of the 0..1 axis
    line = ET.fromstring(step_chart([0, 1, 2], [("prefill", [0.5, None, 0.7])], "HDBI", "h", y_max=1.0))
    assert len(list(line.iter(f"{SVG}polyline"))) == 2  # the unmeasured step breaks the line
    assert [m[0] for m in _marks(line, "circle")] == ["prefill step 0: 0.500", "prefill step 2: 0.700"]
    assert [t.text for t in line.iter(f"{SVG}text")][:6] == ["0", "0.2", "0.4", "0.6", "0.8", "1"]


def test_chart_svg_is_deterministic_and_script_free():
    from taxbreak.report.svg import step_chart

    a = step_chart([0, 1], [("decode", [1.0, 2.0])], "µs", "t")
    b = step_chart([0, 1], [("decode", [1.0, 2.0])], "µs", "t")
    assert a == b and a.startswith("<svg") and "<script" not in a and "<?xml" not in a
    ET.fromstring(a)  # well-formed on its own


def test_one_phase_trace_draws_each_bar_once():
    html = render_html(make_analysis(phases=("prefill",)))
    components = _chart(html, "components")
    assert [m[0] for m in _marks(components) if "T_DeviceActive" in m[0]] == \
        ["prefill (= all) · T_DeviceActive: 800 µs"]
    assert "<th>prefill (= all)</th>" in html and "<th>all</th>" not in html
    two = render_html(make_analysis())
    assert len([m for m in _marks(_chart(two, "components")) if "T_DeviceActive" in m[0]]) == 3


def test_every_note_names_its_phase():
    a = make_analysis()
    a.summary["phases"]["between"] = phase_metrics(framework_python_us=None, library_us=None)
    a.summary["all"]["launch_latency_us"] = None
    html = render_html(a)
    assert "between steps: not measured (not drawn): framework Python (ΔFT py), CUDA library (ΔCT)" in html
    assert "all: not measured (not drawn): launch latency (exposed, above floor)" in html
    assert "not measured (not drawn): framework Python" not in html.replace("between steps: not measured", "")


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


def test_neither_analyze_nor_a_report_imports_matplotlib(tmp_path):
    """The report's charts are written directly; only a sweep's charts use matplotlib."""
    import subprocess
    import sys

    trace = write_planted(tmp_path / "t.json")
    code = ("import sys\n"
            "import taxbreak.report.html, taxbreak.report.svg, taxbreak.report.timeline, taxbreak.whatif.sweep_report\n"
            "from taxbreak.cli.main import main\n"
            f"for argv in (['analyze', {str(trace)!r}, '--json'], ['report', {str(trace)!r}, '-o', "
            f"{str(tmp_path / 'r.html')!r}]):\n"
            "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
            "print('matplotlib' in sys.modules, file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stderr.strip().splitlines()[-1] == "False"


def _one_step(start_ns: int, end_ns: int):
    import pandas as pd

    return pd.DataFrame({"step": [0], "phase": ["decode"], "name": ["execute_context_0(0)_generation_1(1)"],
                         "start_ns": [start_ns], "end_ns": [end_ns], "orchestration_us": [1.0]})


def test_timeline_window_holds_the_device_work_the_step_launched():
    """A step whose host span ends before its kernels run (an engine step returning while its
    work is queued): the window runs on to the end of the work launched inside it, and no further."""
    from taxbreak.report.timeline import choose_window, render_timeline

    from .fake import make_kernels, make_tables

    tables = make_tables(make_kernels())  # launch i at 1,000,000 + 20,000·i; its kernel 8,000-13,000 ns later
    step = _one_step(1_000_000, 1_004_000)  # holds launch 0 only; kernel 0 runs 1,008,000-1,013,000
    w = choose_window(tables, step)
    assert (w.start_ns, w.end_ns) == (1_000_000, 1_013_000)
    assert "runs 9.0 µs past it to hold the device work the step launched" in w.note
    svg, shown = render_timeline(tables, step)
    assert "GPU 0 stream 7" in svg and "no device" not in svg
    assert [m[0] for m in _marks(_chart(svg, "timeline")) if m[0].startswith("&lt;") or "gemm" in m[0]] == \
        ["gemm_kernel · 5.00 µs"]
    inside = choose_window(tables, _one_step(1_000_000, 1_015_000))  # its work ends inside: unchanged
    assert (inside.start_ns, inside.end_ns, inside.note) == (1_000_000, 1_015_000, "")


def test_timeline_says_why_no_device_work_is_drawn():
    from taxbreak.report.timeline import render_timeline

    from .fake import make_kernels, make_tables

    tables = make_tables(make_kernels())
    svg, _ = render_timeline(tables, _one_step(990_000, 999_000))  # before the first launch
    assert "no device work in this window, nor launched from it (the trace holds 6 device activities elsewhere)" in svg


def test_a_crowded_step_leaves_out_deep_host_frames_not_the_device_work(tmp_path, monkeypatch):
    """Over the event limit the deepest host events go first: the kernels stay drawn (cutting
    the window in time would keep a traced Python stack and lose them)."""
    from taxbreak.report import timeline

    a = analyze(write_planted(tmp_path / "t.json"), floor_us=FLOOR_US)  # host depths 0, 1, 1, 2, 2; 3 launches, 3 kernels
    monkeypatch.setattr(timeline, "MAX_EVENTS", 9)  # room for 3 host events: depths 0 and 1
    svg, w = timeline.render_timeline(a.tables, a.steps)
    assert "Host events down to nesting depth 1 (9 of 11 events; deeper frames left out)" in w.note
    titles = [m[0] for m in _marks(_chart(svg, "timeline"))]
    assert sum("aten::" in t for t in titles) == 0 and sum("torch_" in t for t in titles) == 2
    assert len([r for r in _chart(svg, "timeline").iter(f"{SVG}rect") if r.get("class") == "ev"
                and r.get("fill") == "#59a14f"]) == 3  # the three kernels
    monkeypatch.setattr(timeline, "MAX_EVENTS", 5)  # not even depth 0 beside 6 API calls and kernels: cut in time
    _, cut = timeline.render_timeline(a.tables, a.steps)
    assert cut.end_ns < w.end_ns and "Showing the first" in cut.note
