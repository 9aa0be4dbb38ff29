"""Budget parsing and evaluation on hand-built summaries (the Analysis contract)."""
from __future__ import annotations

import math

import pytest

from taxbreak.report.budget import key_line, parse_budget
from taxbreak.report.check import evaluate_budget
from taxbreak.report.check_render import render_check_text, render_junit, render_markdown
from taxbreak.report.metrics import ORCHESTRATION_METRICS
from taxbreak.trace.errors import ERROR_CODES, BudgetError

from .fake import metrics, phase_metrics


def summary(all_over=None, **phases) -> dict:
    return {"all": phase_metrics(**(all_over or {})), "phases": phases, "steps": [], "meta": {}, "diagnostics": {}}


def outcome(result, scope, metric, kind="limit"):
    found = [o for o in result.outcomes if (o.scope, o.metric, o.kind) == (scope, metric, kind)]
    assert len(found) == 1, found
    return found[0]


def test_limits_pass_and_fail_with_excess():
    budget = parse_budget('[all]\nhdbi = ">= 0.5"\norchestration_us = "<= 1200"\nkernels = "== 100"\n'
                          'library_us = "< 50"\n')
    result = evaluate_budget(budget, summary())
    assert not result.passed
    hdbi = outcome(result, "all", "hdbi")
    assert hdbi.status == "fail" and hdbi.actual == pytest.approx(800 / 1900)
    assert hdbi.detail == "under by 0.07895 (15.8 %)"
    assert outcome(result, "all", "orchestration_us").status == "pass"
    assert outcome(result, "all", "kernels").status == "pass"
    assert outcome(result, "all", "library_us").detail == "equal to the limit"
    assert [result.count(s) for s in ("pass", "fail", "not_measured", "skipped")] == [2, 2, 0, 0]


def test_over_limit_reports_amount_and_percent():
    result = evaluate_budget(parse_budget('[all]\norchestration_us = "<= 1000"'), summary())
    assert outcome(result, "all", "orchestration_us").detail == "over by 100 (10.0 %)"


def test_unmeasured_metric_fails_unless_allowed():
    text = '[all]\nlibrary_measured_us = "<= 5"\n[mixed]\nhdbi = ">= 0.1"\n'
    strict = evaluate_budget(parse_budget(text), summary(prefill=phase_metrics()))
    assert not strict.passed
    assert outcome(strict, "all", "library_measured_us").status == "not_measured"
    assert outcome(strict, "mixed", "hdbi").detail == "no mixed phase in trace"
    relaxed = evaluate_budget(parse_budget("allow_unmeasured = true\n" + text), summary())
    assert relaxed.passed and relaxed.count("skipped") == 2
    flag = evaluate_budget(parse_budget(text), summary(), allow_unmeasured=True)
    assert flag.passed


def test_phase_tables_read_phase_metrics():
    s = summary(decode=phase_metrics(0.5))
    result = evaluate_budget(parse_budget('[decode]\norchestration_us = "<= 600"\n'), s)
    assert outcome(result, "decode", "orchestration_us").actual == 550.0
    assert result.passed


def test_regression_max_pct_covers_orchestration_metrics_only():
    base = summary(prefill=phase_metrics())
    new = summary({"orchestration_us": 1100 * 1.06, "device_active_us": 2000.0}, prefill=phase_metrics())
    result = evaluate_budget(parse_budget("[regression]\nmax_pct = 5\n"), new, base)
    orch = outcome(result, "all", "orchestration_us", "regression")
    assert orch.status == "fail" and orch.change_pct == pytest.approx(6.0)
    assert orch.detail == "higher by 6.0 % (limit 5 %)"
    assert {o.metric for o in result.outcomes} == set(ORCHESTRATION_METRICS)
    assert {o.scope for o in result.outcomes} == {"all", "prefill"}


def test_regression_improvement_passes_and_hdbi_drop_fails():
    base = summary()
    new = summary({"orchestration_us": 500.0, "hdbi": 0.3})
    result = evaluate_budget(parse_budget("[regression]\nmax_pct = 5\nhdbi = 10\n"), new, base)
    assert outcome(result, "all", "orchestration_us", "regression").status == "pass"
    hdbi = outcome(result, "all", "hdbi", "regression")
    assert hdbi.status == "fail" and hdbi.expected == "lower by <= 10 % vs baseline"


def test_regression_overrides_per_metric_and_per_phase():
    base = summary(decode=phase_metrics())
    new = summary({"orchestration_us_per_token": 110 * 1.04}, decode=phase_metrics(1.04))
    text = "[regression]\nmax_pct = 5\norchestration_us_per_token = 3\n[regression.decode]\nmax_pct = 10\n"
    result = evaluate_budget(parse_budget(text), new, base)
    assert outcome(result, "all", "orchestration_us_per_token", "regression").status == "fail"
    assert outcome(result, "decode", "orchestration_us_per_token", "regression").status == "pass"
    assert outcome(result, "decode", "orchestration_us", "regression").expected.startswith("higher by <= 10 %")


def test_regression_from_zero_is_infinite():
    base, new = summary({"library_us": 0.0}), summary({"library_us": 1.0})
    result = evaluate_budget(parse_budget("[regression]\nlibrary_us = 50\n"), new, base)
    lib = outcome(result, "all", "library_us", "regression")
    assert lib.status == "fail" and math.isinf(lib.change_pct)
    assert result.as_dict()["outcomes"][0]["change_pct"] == "inf"


def test_regression_defaults_skip_metrics_unmeasured_in_both_runs():
    s = summary({"kernels_per_token": None, "orchestration_us_per_token": None, "framework_us_per_token": None})
    result = evaluate_budget(parse_budget("[regression]\nmax_pct = 5\n"), s, s)
    assert outcome(result, "all", "kernels_per_token", "regression").status == "skipped"
    assert result.passed
    explicit = evaluate_budget(parse_budget("[regression]\nkernels_per_token = 5\n"), s, s)
    assert outcome(explicit, "all", "kernels_per_token", "regression").status == "not_measured"


def test_regression_without_baseline_is_skipped():
    result = evaluate_budget(parse_budget("[regression]\nmax_pct = 5\n"), summary())
    assert result.passed and result.count("skipped") == 1
    assert result.outcomes[0].detail == "no --baseline given"


@pytest.mark.parametrize("text, code, location", [
    ('[all]\nhdbi = ">= 0.2"\nhdbii = "<= 3"\n', "budget.unknown_metric", "line 3, key all.hdbii"),
    ('[decode]\nhdbi = 0.2\n', "budget.malformed", "line 2, key decode.hdbi"),
    ('[decode]\nhdbi = "at least 0.2"\n', "budget.malformed", "line 2, key decode.hdbi"),
    ('[decode]\nhdbi = "=> 0.2"\n', "budget.malformed", "line 2, key decode.hdbi"),
    ('[all]\nhdbi = ">= 0.2\n', "budget.malformed", "line 2, column 15"),
    ('[warmup]\nhdbi = ">= 0.2"\n', "budget.malformed", "line 1, key warmup"),
    ('decode = ">= 0.2"\n', "budget.malformed", "line 1, key decode"),
    ('[all]\nfloor_source = "== 1"\n', "budget.malformed", "line 2, key all.floor_source"),
    ('[regression]\nmax_pct = "5"\n', "budget.malformed", "line 2, key regression.max_pct"),
    ('[regression]\nmax_pct = -1\n', "budget.malformed", "line 2, key regression.max_pct"),
    ('[regression]\nfloor_us = 5\n', "budget.malformed", "line 2, key regression.floor_us"),
    ('[regression]\norchestration = 5\n', "budget.unknown_metric", "line 2, key regression.orchestration"),
    ('[regression.decode]\nhdbi_x = 5\n', "budget.unknown_metric", "line 2, key regression.decode.hdbi_x"),
    ("allow_unmeasured = 1\n", "budget.malformed", "line 1, key allow_unmeasured"),
])
def test_malformed_budgets_raise_budget_error_naming_line_and_key(text, code, location):
    with pytest.raises(BudgetError) as info:
        parse_budget(text, path="b.toml")
    err = info.value
    assert (err.code, err.location, err.path, err.exit_code) == (code, location, "b.toml", 2)
    assert err.code in ERROR_CODES


def test_key_line_finds_keys_in_dotted_tables():
    text = "[all]\nhdbi = 1\n\n[regression.decode]  # comment\nmax_pct = 2\n"
    assert key_line(text, "regression.decode", "max_pct") == 5
    assert key_line(text, "all", "hdbi") == 2
    assert key_line(text, "regression.decode", None) == 4


def test_renderers_show_failures_first():
    budget = parse_budget('[all]\nhdbi = ">= 0.5"\nkernels = "<= 1000"\nlibrary_measured_us = "<= 1"\n')
    result = evaluate_budget(budget, summary())
    text = render_check_text(result)
    lines = text.splitlines()
    assert lines[1].startswith("FAIL") and lines[2].startswith("NOT MEASURED") and lines[3].startswith("ok")
    assert lines[-1] == "budget FAILED: 3 limits (1 pass, 1 fail, 1 not measured, 0 skipped)"
    junit = render_junit(result)
    assert 'tests="3" failures="1" errors="1" skipped="0"' in junit
    assert "&gt;= 0.5" in junit
    md = render_markdown(result)
    assert md.startswith("### taxbreak budget: FAILED") and "| ❌ | all.hdbi | >= 0.5 | 0.421 |" in md


def test_every_summary_key_is_a_known_metric():
    assert set(metrics()) >= set(ORCHESTRATION_METRICS)


def test_every_numeric_key_of_a_real_summary_can_take_a_limit(tmp_path):
    # the budget's metric names must follow what `analyze` actually writes, not a copy of it
    import numpy as np

    from taxbreak.decompose import analyze
    from taxbreak.report.metrics import METRIC_KEYS
    from taxbreak.synth.planted import build, random_spec

    planted = build(random_spec(np.random.default_rng(3), steps=2, ops=2))
    real = analyze(planted.tables, tokens=4).summary["all"]
    numeric = {k for k, v in real.items() if not isinstance(v, (str, dict)) and k != "hdbi_reason"}
    assert numeric - set(METRIC_KEYS) == set()
    limits = "".join(f'{k} = ">= 0"\n' for k in sorted(numeric))
    result = evaluate_budget(parse_budget("[all]\n" + limits), {**summary(), "all": real})
    assert outcome(result, "all", "aten_ops_per_token").actual == real["aten_ops_per_token"]
