"""``taxbreak check`` end to end on the planted trace: exit codes, messages, goldens."""
from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest
from click.testing import CliRunner

from taxbreak.cli.main import main

from .traces import FLOOR_US, write_planted

PASSING = """\
[all]
hdbi = ">= 0.3"
orchestration_us = "<= 40"
kernels = "== 3"
library_us = "<= 4"
[decode]
launch_floor_us = "< 14"
"""
FAILING = """\
[all]
hdbi = ">= 0.5"
orchestration_us = "<= 30"
kernels = "== 3"
[decode]
library_measured_us = "<= 1"
[prefill]
hdbi = ">= 0.1"
"""


def run(args, tmp_path, budget_text=None):
    if budget_text is not None:
        (tmp_path / "budget.toml").write_text(budget_text)
    return CliRunner().invoke(main, args, catch_exceptions=False)


def check_args(trace, tmp_path, *extra):
    return ["check", str(trace), "--budget", str(tmp_path / "budget.toml"), "--floor-us", str(FLOOR_US), *extra]


def test_passing_budget_exits_0(planted, tmp_path, golden):
    result = run(check_args(planted, tmp_path), tmp_path, PASSING)
    assert result.exit_code == 0, result.output
    golden("check_pass.txt", result.stdout)
    assert "budget PASSED: 5 limits" in result.stderr


def test_failing_budget_exits_1_and_says_by_how_much(planted, tmp_path, golden):
    result = run(check_args(planted, tmp_path), tmp_path, FAILING)
    assert result.exit_code == 1
    golden("check_fail.txt", result.stdout)
    assert "FAIL          all.hdbi" in result.stdout and "under by 0.1757 (35.1 %)" in result.stdout
    assert "no prefill phase in trace" in result.stdout


def test_json_output_is_golden(planted, tmp_path, golden):
    result = run(check_args(planted, tmp_path, "--json"), tmp_path, FAILING)
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["counts"] == {"pass": 1, "fail": 2, "not_measured": 2, "skipped": 0}
    golden("check_fail.json", result.stdout)


def test_allow_unmeasured_flag_turns_unmeasured_into_skipped(planted, tmp_path):
    text = '[decode]\nlibrary_measured_us = "<= 1"\n[all]\nkernels_per_token = "<= 10"\n'
    strict = run(check_args(planted, tmp_path), tmp_path, text)
    assert strict.exit_code == 1 and "NOT MEASURED" in strict.stdout
    relaxed = run(check_args(planted, tmp_path, "--allow-unmeasured"), tmp_path, text)
    assert relaxed.exit_code == 0 and "(allowed)" in relaxed.stdout


def test_tokens_option_fills_per_token_metrics(planted, tmp_path):
    result = run(check_args(planted, tmp_path, "--tokens", "3"), tmp_path, '[all]\nkernels_per_token = "== 1"\n')
    assert result.exit_code == 0, result.stdout


def test_junit_and_markdown_files(planted, tmp_path):
    junit, md = tmp_path / "r.xml", tmp_path / "s.md"
    result = run(check_args(planted, tmp_path, "--junit", str(junit), "--markdown", str(md)), tmp_path, FAILING)
    assert result.exit_code == 1
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite.get("tests") == "5" and suite.get("failures") == "2" and suite.get("errors") == "2"
    failed = [c.get("name") for c in suite.iter("testcase") if c.find("failure") is not None]
    assert failed == ["all.hdbi >= 0.5", "all.orchestration_us <= 30"]
    assert md.read_text().startswith("### taxbreak budget: FAILED")


@pytest.mark.parametrize("text, code, where", [
    ('[all]\nhdbi = ">= 0.2"\norchestration = "<= 3"\n', "budget.unknown_metric", "line 3, key all.orchestration"),
    ('[all]\nhdbi = 0.2\n', "budget.malformed", "line 2, key all.hdbi"),
    ('[all\nhdbi = ">= 0.2"\n', "budget.malformed", "line 1"),
])
def test_bad_budget_exits_2_with_one_line_error(planted, tmp_path, text, code, where):
    result = run(check_args(planted, tmp_path), tmp_path, text)
    assert result.exit_code == 2
    first = result.stderr.splitlines()[0]
    assert first.startswith(f"error[{code}]: {tmp_path / 'budget.toml'}: ") and where in first
    assert "hint:" in result.stderr and "Traceback" not in result.output + result.stderr
    assert result.stdout == ""


def test_missing_budget_file_and_trace(planted, tmp_path):
    missing_budget = run(["check", str(planted), "--budget", str(tmp_path / "none.toml")], tmp_path)
    assert missing_budget.exit_code == 2 and "error[input.not_found]" in missing_budget.stderr
    missing_trace = run(["check", str(tmp_path / "none.json"), "--budget", str(tmp_path / "budget.toml")],
                        tmp_path, PASSING)
    assert missing_trace.exit_code == 1 and "error[input.not_found]" in missing_trace.stderr


def test_regression_against_baseline(tmp_path, golden):
    base = write_planted(tmp_path / "base.json")
    same = write_planted(tmp_path / "same.json")
    slower = write_planted(tmp_path / "slower.json", extra_python_us=3.0)
    budget = "[regression]\nmax_pct = 5\nframework_python_us = 100\n"
    ok = run(check_args(same, tmp_path, "--baseline", str(base)), tmp_path, budget)
    assert ok.exit_code == 0, ok.stdout
    bad = run(check_args(slower, tmp_path, "--baseline", str(base)), tmp_path, budget)
    assert bad.exit_code == 1
    golden("check_regression.txt", bad.stdout.replace(str(tmp_path), "TMP"))
    # T_Orchestrate 37.5 -> 40.5 µs (+8 %); framework Python 5 -> 8 µs (+60 %, limit 100 %)
    rows = {tuple(re.split(r"\s{2,}", line)[:2]): re.split(r"\s{2,}", line)[2:] for line in bad.stdout.splitlines()}
    assert rows[("FAIL", "all.orchestration_us")] == ["higher by <= 5 % vs baseline", "37.50 -> 40.50",
                                                      "higher by 8.0 % (limit 5 %)"]
    assert rows[("ok", "all.framework_python_us")] == ["higher by <= 100 % vs baseline", "5.00 -> 8.00"]
    assert "skipped  6 max_pct limits not measured in either run: framework_us_per_token, kernels_per_token, " \
        "orchestration_us_per_token" in bad.stdout
