"""``check`` over repeated runs: medians, spreads, the baseline's noise band, and the docs' CPU budget
held against repeated real profiles (docs/ci.md)."""
from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from taxbreak.cli.main import main
from taxbreak.report.budget import parse_budget
from taxbreak.report.repeat import evaluate_repeated, median_summary

DOCS = Path(__file__).resolve().parents[2] / "docs" / "ci.md"


def summary(python_us, ops_per_token, decode_ops=None, gpu="cpu"):
    phases = {} if decode_ops is None else {"decode": {"aten_ops": decode_ops, "host_python_us": python_us / 2}}
    return {"all": {"host_python_us": python_us, "aten_ops_per_token": ops_per_token, "hdbi": None,
                    "floor_source": "published"},
            "phases": phases, "meta": {"gpu": gpu}}


def test_median_and_spread_of_three_runs():
    runs = [summary(100.0, 52.25, 10), summary(300.0, 52.25, 12), summary(160.0, 52.25, 11)]
    median, spreads = median_summary(runs)
    assert median["all"]["host_python_us"] == 160.0
    assert median["all"]["aten_ops_per_token"] == 52.25
    assert median["phases"]["decode"] == {**median["phases"]["decode"], "aten_ops": 11, "host_python_us": 80.0}
    assert spreads["all"]["host_python_us"].as_dict() == {"min": 100.0, "median": 160.0, "max": 300.0, "runs": 3}
    assert median["all"]["hdbi"] is None and "hdbi" not in spreads["all"]  # unmeasured stays unmeasured
    assert median["all"]["floor_source"] == "published"


def test_a_metric_unmeasured_in_one_run_is_unmeasured_in_the_median():
    runs = [summary(100.0, 52.25), summary(120.0, None)]
    median, spreads = median_summary(runs)
    assert median["all"]["aten_ops_per_token"] is None and "aten_ops_per_token" not in spreads["all"]
    assert median["all"]["host_python_us"] == 110.0


def test_a_phase_missing_from_one_run_is_not_in_the_median():
    median, _ = median_summary([summary(100.0, 1.0, 10), summary(100.0, 1.0)])
    assert "decode" not in median["phases"]


BUDGET = parse_budget("[regression]\nhost_python_us = 10\n")


def test_noise_band_passes_a_change_inside_the_baselines_own_range():
    baselines = [summary(100.0, 1.0), summary(120.0, 1.0), summary(140.0, 1.0)]
    result = evaluate_repeated(BUDGET, [summary(125.0, 1.0), summary(130.0, 1.0), summary(135.0, 1.0)], baselines)
    (outcome,) = [o for o in result.outcomes if o.scope == "all"]
    assert (outcome.baseline, outcome.actual) == (120.0, 130.0)
    assert outcome.status == "pass" and "noise band" not in outcome.detail  # +8.3 %: inside the 10 % limit
    result = evaluate_repeated(BUDGET, [summary(135.0, 1.0), summary(138.0, 1.0), summary(150.0, 1.0)], baselines)
    (outcome,) = [o for o in result.outcomes if o.scope == "all"]
    assert outcome.actual == 138.0 and outcome.status == "pass"  # +15 %, but no worse than the worst baseline
    assert "within the baseline runs' noise band 100..140 (3 runs)" in outcome.detail
    assert outcome.baseline_spread == {"min": 100.0, "median": 120.0, "max": 140.0, "runs": 3}


def test_noise_band_fails_a_change_past_every_baseline_run():
    baselines = [summary(100.0, 1.0), summary(120.0, 1.0), summary(140.0, 1.0)]
    result = evaluate_repeated(BUDGET, [summary(141.0, 1.0), summary(150.0, 1.0), summary(160.0, 1.0)], baselines)
    (outcome,) = [o for o in result.outcomes if o.scope == "all"]
    assert outcome.status == "fail" and outcome.actual == 150.0 and "noise band" not in outcome.detail
    assert outcome.spread == {"min": 141.0, "median": 150.0, "max": 160.0, "runs": 3}
    data = result.as_dict()
    assert (data["runs"], data["baseline_runs"]) == (3, 3) and data["outcomes"][0]["spread"]["runs"] == 3


def test_one_baseline_has_no_noise_band_and_one_run_no_spread_in_json():
    result = evaluate_repeated(BUDGET, [summary(138.0, 1.0)], [summary(120.0, 1.0)])
    assert result.outcomes[0].status == "fail"
    data = result.as_dict()
    assert "runs" not in data and "spread" not in data["outcomes"][0]


def docs_cpu_budget() -> str:
    """The budget of docs/ci.md's CPU job, as the docs print it."""
    text = DOCS.read_text(encoding="utf-8")
    after = text.split("`ci/taxbreak-budget.toml` for that CPU job", 1)[1]
    return re.search(r"```toml\n(.*?)```", after, re.S).group(1)


def docs_profile_config():
    """The ``taxbreak profile`` line of docs/ci.md's workflow, as a ProfileConfig."""
    from taxbreak.capture import ProfileConfig

    line = re.search(r"run: taxbreak profile (.*) -q -o runs/pr", DOCS.read_text(encoding="utf-8")).group(1)
    args = dict(re.findall(r"--([a-z-]+) (\S+)", line))
    return ProfileConfig(model=args["model"], new_tokens=int(args["new-tokens"]), runs=int(args["runs"]),
                         warmup=int(args["warmup"]), overhead_reps=0, command_line=["taxbreak", "profile"])


@pytest.fixture(scope="module")
def profiled_runs(tmp_path_factory):
    from taxbreak.capture import profile

    root = tmp_path_factory.mktemp("repeat")
    config = docs_profile_config()
    return [profile(config, out_dir=root / f"run-{i}").run_dir for i in range(3)]


def check(runs, baselines, budget: Path) -> tuple[int, dict]:
    args = ["check", *map(str, runs), "--budget", str(budget), "--json", "-q"]
    args += [a for b in baselines for a in ("--baseline", str(b))]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    return result.exit_code, json.loads(result.stdout)


@pytest.mark.slow
def test_docs_cpu_budget_gives_one_verdict_on_repeated_real_profiles(profiled_runs, tmp_path):
    budget = tmp_path / "budget.toml"
    budget.write_text(docs_cpu_budget())
    verdicts = set()
    for run, base in itertools.permutations(profiled_runs, 2):  # every run against every other, both orders
        code, data = check([run], [base], budget)
        verdicts.add((code, tuple((o["scope"], o["metric"], o["status"]) for o in data["outcomes"])))
    assert len(verdicts) == 1
    ((code, statuses),) = verdicts
    assert code == 0 and ("all", "aten_ops_per_token", "pass") in statuses
    code, data = check(profiled_runs[:2], profiled_runs[2:], budget)  # the median form gives it too
    assert code == 0 and data["runs"] == 2
    spread = next(o["spread"] for o in data["outcomes"] if o["metric"] == "aten_ops_per_token")
    assert spread["min"] == spread["max"]  # a count: no spread at all between runs


def test_cli_checks_the_median_of_several_traces_and_a_folder_of_baselines(tmp_path):
    from .traces import FLOOR_US, write_planted

    runs = [write_planted(tmp_path / f"run{i}.json.gz", extra_python_us=extra) for i, extra in enumerate((0, 3, 9))]
    base = tmp_path / "base"
    base.mkdir()
    for i in range(2):
        write_planted(base / f"b{i}.json.gz")
    (tmp_path / "budget.toml").write_text("[regression]\nframework_python_us = 10\n")
    args = ["check", *map(str, runs), "--budget", str(tmp_path / "budget.toml"), "--baseline", str(base),
            "--floor-us", str(FLOOR_US)]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert "budget FAILED on the median of 3 runs, baseline the median of 2:" in result.stderr
    row = next(line for line in result.stdout.splitlines() if line.startswith("FAIL") and "all.framework_python_us" in line)
    assert "5.00 -> 8.00" in row and "[runs 5.00..14.00; baseline runs 5.00..5.00]" in row
    assert result.exit_code == 1
