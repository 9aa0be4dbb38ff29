"""``taxbreak diff``: hand-built analyses, goldens on planted traces, the Nsight A/B pair."""
from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

from taxbreak.cli.main import main
from taxbreak.report.diff import diff_analyses, diff_summaries, metric_change
from taxbreak.report.diff_render import render_diff_text

from .fake import XSS_KERNEL, make_analysis, phase_metrics
from .traces import write_planted


def test_metric_change_units_and_missing_values():
    assert metric_change(100.0, 110.0) == {"base": 100.0, "new": 110.0, "delta": 10.0, "delta_pct": 10.0}
    assert metric_change(None, 5.0) == {"base": None, "new": 5.0, "delta": None, "delta_pct": None}
    assert metric_change(float("nan"), 5.0)["base"] is None
    assert math.isinf(metric_change(0.0, 2.0)["delta_pct"])


def test_diff_summaries_covers_phases_of_either_side():
    base = {"all": phase_metrics(), "phases": {"prefill": phase_metrics()}}
    new = {"all": phase_metrics(1.1), "phases": {"decode": phase_metrics()}}
    out = diff_summaries(base, new)
    assert list(out) == ["all", "decode", "prefill"]
    assert out["decode"]["present"] == {"base": False, "new": True}
    assert out["decode"]["hdbi"]["delta"] is None
    assert out["all"]["orchestration_us"]["delta"] == pytest.approx(110.0)
    assert out["all"]["orchestration_us"]["delta_pct"] == pytest.approx(10.0)


def test_diff_analyses_ops_classes_and_one_sided_kernels():
    a = make_analysis()
    b = make_analysis(1.5, kernel_names=["gemm_kernel", "new_kernel"])
    d = diff_analyses(a, b, "a", "b", top=5)
    assert d["ops"][0] == {"op_name": "aten::mm", "base": 30.0, "new": 45.0, "delta": 15.0, "delta_pct": 50.0}
    assert d["kernels"]["only_in_base"] == [{"name": XSS_KERNEL, "count": 2},
                                            {"name": "vectorized_elementwise_kernel", "count": 2}]
    assert d["kernels"]["only_in_new"] == [{"name": "new_kernel", "count": 3}]
    classes = {r["kernel_class"]: r for r in d["kernel_classes"]}
    # per kernel: ΔFT python 3 + dispatch 2 + floor 4.5 µs, plus ΔCT 2 µs on library kernels
    assert classes["library_gemm"]["base"] == pytest.approx(2 * 11.5)
    assert classes["other"]["base"] == pytest.approx(2 * 9.5)


def test_text_golden_on_planted_traces(tmp_path, golden):
    base = write_planted(tmp_path / "base.json")
    new = write_planted(tmp_path / "new.json", xss=True, extra_python_us=3.0)
    result = CliRunner().invoke(main, ["diff", str(base), str(new), "--floor-us", "4.5"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    text = result.stdout.replace(str(tmp_path), "TMP")
    golden("diff_planted.txt", text)
    assert "<script>alert(1)</script>" in text  # a terminal shows trace strings verbatim


def test_json_golden_on_planted_traces(tmp_path, golden):
    base = write_planted(tmp_path / "base.json")
    new = write_planted(tmp_path / "new.json", xss=True, extra_python_us=3.0)
    result = CliRunner().invoke(main, ["diff", str(base), str(new), "--json", "--floor-us", "4.5"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["scopes"]["all"]["framework_python_us"] == {"base": 5.0, "new": 8.0, "delta": 3.0, "delta_pct": 60.0}
    assert data["scopes"]["decode"]["hdbi"]["delta"] == pytest.approx(18 / 58.5 - 18 / 55.5, abs=1e-5)
    golden("diff_planted.json", result.stdout.replace(str(tmp_path), "TMP"))


def test_diff_of_missing_input_is_one_line_error(tmp_path):
    result = CliRunner().invoke(main, ["diff", str(tmp_path / "a.json"), str(tmp_path / "b.json")])
    assert result.exit_code == 1
    assert result.stderr.startswith("error[input.not_found]") and "Traceback" not in result.stderr


def test_nsight_ab_pair(shared_traces):
    fixtures = shared_traces / "nsys-ai" / "tests" / "fixtures"
    base, new = fixtures / "mfu_2gpu_before.sqlite", fixtures / "mfu_2gpu_after.sqlite"
    result = CliRunner().invoke(main, ["diff", str(base), str(new), "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    d = json.loads(result.stdout)
    kernels = d["scopes"]["all"]["kernels"]
    assert (kernels["base"], kernels["new"], kernels["delta"]) == (4010, 3587, -423)
    assert d["scopes"]["all"]["hdbi"]["base"] > d["scopes"]["all"]["hdbi"]["new"]
    assert d["scopes"]["all"]["kernels_per_token"]["delta"] is None  # no token count in an Nsight export
    assert {r["op_name"] for r in d["ops"]} >= {"aten::copy_", "aten::mul"}
    assert d["kernels"]["only_in_base_count"] == 0 and d["kernels"]["only_in_new_count"] == 0
    text = render_diff_text(d)
    assert "not measured" in text
    # 128,137 µs of orchestration in base: past four digits, so in ms (terminal_fit.duration)
    t_orch = d["scopes"]["all"]["orchestration_us"]
    row = next(line for line in text.splitlines() if line.startswith("│ T_Orchestrate "))
    assert f"{t_orch['base'] / 1e3:,.1f} ms" in row and " µs │" not in row.split("│")[2]


def test_diff_durations_follow_the_four_digit_rule_of_the_main_report():
    from taxbreak.report.diff_render import fmt_cell, fmt_delta

    assert [fmt_cell(v, "orchestration_us") for v in (999.94, 9_999.0, 10_000.0, 999_940.0, 2_500_000.0)] == \
        ["999.9 µs", "9,999 µs", "10.0 ms", "999.9 ms", "2.50 s"]
    assert fmt_delta(12_345.0, "orchestration_us") == "+12.3 ms" and fmt_delta(-3.0, "x") == "-3.0 µs"
    assert fmt_cell(12_345, "kernels") == "12,345" and fmt_cell(0.3241, "hdbi") == "0.324"
    assert fmt_cell(None, "orchestration_us") == "not measured" and fmt_cell(float("nan"), missing="absent") == "absent"
