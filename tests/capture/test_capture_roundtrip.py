"""A run directory from `taxbreak profile` round-trips through `taxbreak analyze RUN_DIR`."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from taxbreak.cli.main import main

RUNS, NEW_TOKENS = 2, 3


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("rt") / "run"
    args = ["profile", "-m", "llama-3.2-1b-tiny", "-s", "8", "-t", str(NEW_TOKENS), "--warmup", "1",
            "--runs", str(RUNS), "-o", str(out), "-q"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    return out


def test_profile_writes_every_output(run_dir):
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["outputs"] == {"analysis": "ok", "summary": "ok", "tables": "ok"}
    assert {p.name for p in (run_dir / "tables").iterdir()} >= {"host_events.parquet", "ranges.parquet"}
    assert {p.name for p in (run_dir / "analysis").iterdir()} >= {"steps.parquet", "phases.parquet"}


def test_analyze_run_dir_reproduces_the_summary(run_dir):
    result = CliRunner().invoke(main, ["analyze", str(run_dir), "--json"])
    assert result.exit_code == 0, result.output
    again = json.loads(result.stdout)
    saved = json.loads((run_dir / "summary.json").read_text())
    assert again["all"] == saved["all"]
    assert again["phases"] == saved["phases"]
    assert saved["meta"]["capture_overhead_pct"] == json.loads(
        (run_dir / "manifest.json").read_text())["capture_overhead_pct"]


def test_summary_has_the_steps_tokens_and_honest_nulls(run_dir):
    summary = json.loads((run_dir / "summary.json").read_text())
    marked = [s for s in summary["steps"] if s["name"].startswith("taxbreak/")]
    assert [s["step"] for s in marked] == list(range(RUNS * NEW_TOKENS))
    assert {"prefill", "decode"} <= set(summary["phases"])
    assert summary["all"]["tokens"] == RUNS * NEW_TOKENS
    # CPU run: host time measured, device and launch components unavailable (null, never 0)
    assert summary["all"]["host_thread_us"] > 0
    for key in ("device_active_us", "hdbi", "launch_floor_us", "orchestration_us"):
        assert summary["all"][key] is None, key
    assert summary["meta"]["floor_source"] == "unavailable"


def test_steps_table_names_follow_the_scheme(run_dir):
    import pandas as pd

    steps = pd.read_parquet(run_dir / "analysis" / "steps.parquet")
    taxbreak_steps = steps[steps["name"].str.startswith("taxbreak/")]
    expected = [f"taxbreak/{'prefill' if i % NEW_TOKENS == 0 else 'decode'}/{i}" for i in range(RUNS * NEW_TOKENS)]
    assert list(taxbreak_steps.sort_values("start_ns")["name"]) == expected


@pytest.mark.slow
def test_the_default_first_command_produces_a_complete_run(tmp_path):
    """`taxbreak profile` with no options (the README's first command): 3 runs x 10 steps, a
    trace of several MB (more than one reader chunk), every output written."""
    result = CliRunner().invoke(main, ["profile", "-o", str(tmp_path / "run"), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["manifest"]["outputs"] == {"analysis": "ok", "summary": "ok", "tables": "ok"}
    assert data["manifest"]["model"] == "llama-3.2-1b-tiny"
    summary = data["summary"]
    assert summary["all"]["tokens"] == 30
    assert len([s for s in summary["steps"] if s["name"].startswith("taxbreak/")]) == 30
