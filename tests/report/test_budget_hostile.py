"""Budgets on hostile or odd input: deep nesting, non-finite limits, an empty
budget, a baseline of another model, a limit on a metric that was not measured."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from click.testing import CliRunner

from taxbreak.cli.main import main
from taxbreak.report.budget import parse_budget
from taxbreak.report.check import evaluate_budget
from taxbreak.report.check_render import render_check_text, render_junit, render_markdown
from taxbreak.trace.errors import BudgetError

from .traces import FLOOR_US, write_planted


def _check(tmp_path, trace, budget_text, *extra):
    (tmp_path / "budget.toml").write_text(budget_text)
    args = ["check", str(trace), "--budget", str(tmp_path / "budget.toml"), "--floor-us", str(FLOOR_US), *extra]
    return CliRunner().invoke(main, args, catch_exceptions=False)


@pytest.mark.parametrize("text", [
    "x = " + "[" * 3000 + "]" * 3000,
    "x = " + "{a = " * 3000 + "1" + "}" * 3000,
    "[all]\nhdbi = " + "[" * 100_000,
])
def test_deep_nesting_is_malformed_not_a_recursion_error(text):
    with pytest.raises(BudgetError) as info:
        parse_budget(text)
    assert info.value.code == "budget.malformed"


def test_deep_nesting_through_the_cli_exits_2(tmp_path):
    result = _check(tmp_path, tmp_path / "unused.json", "x = " + "[" * 3000 + "]" * 3000)
    assert result.exit_code == 2
    assert result.stderr.startswith("error[budget.malformed]: ") and "Traceback" not in result.output


def test_a_huge_budget_is_malformed():
    with pytest.raises(BudgetError) as info:
        parse_budget("# " + "x" * (2 * 1024 * 1024))
    assert info.value.code == "budget.malformed"


@pytest.mark.parametrize("text", [
    "[regression]\nmax_pct = nan", "[regression]\nmax_pct = inf", "[regression]\nmax_pct = -nan",
    "[regression]\nmax_pct = 1e999", "[regression]\norchestration_us = +inf",
    "[regression.decode]\nmax_pct = nan",
    '[all]\nhdbi = ">= 1e999"', '[all]\norchestration_us = "<= -1e400"', '[all]\nhdbi = ">= nan"',
    '[all]\nhdbi = "<= inf"',
])
def test_non_finite_limits_are_malformed(text):
    with pytest.raises(BudgetError) as info:
        parse_budget(text)
    assert info.value.code == "budget.malformed"
    assert info.value.location and "line" in info.value.location


def test_nan_regression_limit_through_the_cli_exits_2(tmp_path):
    trace = write_planted(tmp_path / "t.json")
    result = _check(tmp_path, trace, "[regression]\nmax_pct = nan\n", "--baseline", str(trace))
    assert result.exit_code == 2 and "error[budget.malformed]" in result.stderr


SUMMARY = {"all": {"hdbi": None, "orchestration_us": 10.0}, "phases": {},
           "meta": {"gpu": "NVIDIA H100", "source_format": "kineto", "manifest": {"model": "llama-tiny"}}}


def test_an_empty_budget_says_it_checks_nothing():
    result = evaluate_budget(parse_budget(""), SUMMARY)
    assert result.passed and result.checked == 0
    assert result.warnings == ["the budget has no limits: it checks nothing"]
    assert "warning: the budget has no limits: it checks nothing" in render_check_text(result)
    assert result.as_dict()["warnings"] == result.warnings and result.as_dict()["checked"] == 0


def test_an_empty_budget_through_the_cli_warns_and_exits_0(tmp_path):
    result = _check(tmp_path, write_planted(tmp_path / "t.json"), "# nothing yet\n")
    assert result.exit_code == 0
    assert "warning: the budget has no limits: it checks nothing" in result.stdout
    as_json = _check(tmp_path, write_planted(tmp_path / "t.json"), "", "--json")
    assert json.loads(as_json.stdout)["warnings"] == ["the budget has no limits: it checks nothing"]
    assert "warning: the budget has no limits" in as_json.stderr


def test_regressions_without_a_baseline_check_nothing_and_say_so():
    result = evaluate_budget(parse_budget("[regression]\nmax_pct = 5\n"), SUMMARY)
    assert result.checked == 0
    assert result.warnings == ["every limit was skipped: the budget checked nothing"]


def test_a_baseline_of_another_model_is_compared_with_a_warning():
    other = {**SUMMARY, "meta": {"gpu": "NVIDIA H200", "source_format": "kineto", "manifest": {"model": "gpt2-tiny"}}}
    result = evaluate_budget(parse_budget("[regression]\nmax_pct = 5\n"), SUMMARY, other)
    assert result.warnings == [
        "the baseline is another model: gpt2-tiny vs llama-tiny (compared anyway)",
        "the baseline is another GPU: NVIDIA H200 vs NVIDIA H100 (compared anyway)",
    ]
    assert any(o.status == "pass" for o in result.outcomes)  # still compared


def test_a_baseline_of_the_same_model_gives_no_warning():
    result = evaluate_budget(parse_budget("[regression]\nmax_pct = 5\n"), SUMMARY, json.loads(json.dumps(SUMMARY)))
    assert result.warnings == []


def _run_dir(tmp_path, name, model):
    run = tmp_path / name
    run.mkdir()
    write_planted(run / "trace.json")
    (run / "manifest.json").write_text(json.dumps({"model": model}))
    return run


def test_baseline_of_another_model_through_the_cli(tmp_path):
    base, new = _run_dir(tmp_path, "base", "gpt2-tiny"), _run_dir(tmp_path, "new", "llama-tiny")
    result = _check(tmp_path, new, "[regression]\nmax_pct = 5\n", "--baseline", str(base))
    assert result.exit_code == 0
    assert "warning: the baseline is another model: gpt2-tiny vs llama-tiny (compared anyway)" in result.stdout


def test_a_null_metric_is_not_measured_and_fails_everywhere():
    result = evaluate_budget(parse_budget('[all]\nhdbi = ">= 0.2"\norchestration_us = "<= 20"\n'), SUMMARY)
    assert not result.passed
    hdbi = next(o for o in result.outcomes if o.metric == "hdbi")
    assert hdbi.status == "not_measured" and hdbi.actual is None
    text = render_check_text(result)
    assert "NOT MEASURED  all.hdbi" in text and "not measured" in text.split("all.hdbi")[1].splitlines()[0]
    assert "1 pass, 0 fail, 1 not measured" in text
    as_dict = result.as_dict()
    assert as_dict["passed"] is False and as_dict["counts"]["not_measured"] == 1
    assert next(o for o in as_dict["outcomes"] if o["metric"] == "hdbi")["actual"] is None
    case = next(c for c in ET.fromstring(render_junit(result)).iter("testcase") if "hdbi" in c.get("name"))
    assert case.find("failure") is not None or case.find("error") is not None
    assert "not measured" in render_markdown(result)


def test_allow_unmeasured_skips_the_null_metric():
    result = evaluate_budget(parse_budget('allow_unmeasured = true\n[all]\nhdbi = ">= 0.2"\n'), SUMMARY)
    assert result.passed and result.outcomes[0].status == "skipped"


def test_null_hdbi_of_a_real_trace_through_the_cli(shared_traces, tmp_path):
    trace = shared_traces / "nsys-ai/tests/fixtures/mock.sqlite"
    text = _check(tmp_path, trace, '[all]\nhdbi = ">= 0.2"\n')
    assert text.exit_code == 1
    row = next(line for line in text.stdout.splitlines() if "all.hdbi" in line)
    assert row.startswith("NOT MEASURED") and "not measured" in row.split("all.hdbi", 1)[1]
    as_json = _check(tmp_path, trace, '[all]\nhdbi = ">= 0.2"\n', "--json", "--junit", str(tmp_path / "j.xml"))
    assert as_json.exit_code == 1
    outcome = json.loads(as_json.stdout)["outcomes"][0]
    assert (outcome["status"], outcome["actual"]) == ("not_measured", None)
    junit = ET.parse(tmp_path / "j.xml").getroot()
    assert junit.get("tests") == "1" and junit.get("failures", "0") + junit.get("errors", "0") != "00"
