"""``taxbreak analyze``: report, --json, -o, error lines and exit codes."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from taxbreak.cli.main import main
from taxbreak.synth.planted import build, random_spec
from taxbreak.synth.write_kineto import write_kineto


@pytest.fixture()
def trace(tmp_path):
    planted = build(random_spec(np.random.default_rng(4), steps=2, ops=3))
    return write_kineto(planted.tables, tmp_path / "t.json.gz"), planted


def _run(*args):
    result = CliRunner().invoke(main, ["analyze", *map(str, args)], env={"NO_COLOR": "1", "COLUMNS": "160"})
    assert "Traceback" not in result.output
    return result


def test_report_shows_phases_floor_and_ops(trace):
    result = _run(trace[0], "--top", "3")
    assert result.exit_code == 0, result.output
    for text in ("prefill", "decode", "HDBI", "published:H100", "aten::addmm", "orphan kernels: 0"):
        assert text in result.output


def test_json_is_the_summary(trace):
    result = _run(trace[0], "--json", "--floor-us", "3.5", "--tokens", "4")
    data = json.loads(result.output)
    assert data["all"]["floor_source"] == "given" and data["all"]["floor_us"] == 3.5
    assert data["all"]["tokens"] == 4 and data["all"]["kernels"] == len(trace[1].kernels)
    assert list(data) == ["health", "all", "phases", "steps", "meta", "warmup", "overlap", "graph_launch_cost",
                          "diagnostics"]  # health first


def test_output_dir_writes_parquet(trace, tmp_path):
    out = tmp_path / "out"
    result = _run(trace[0], "--json", "-o", out)
    assert result.exit_code == 0
    kernels = pd.read_parquet(out / "kernels.parquet")
    assert len(kernels) == len(trace[1].kernels)
    for name in ("steps", "phases", "ops", "host_partition"):
        assert (out / f"{name}.parquet").is_file()
    assert json.loads((out / "summary.json").read_text())["all"]["kernels"] == len(kernels)


def test_missing_trace_is_one_error_line(tmp_path):
    result = _run(tmp_path / "nope.json")
    assert result.exit_code == 1
    assert result.output.startswith("error[input.not_found]")


def test_bad_step_pattern_exits_2(trace):
    result = _run(trace[0], "--step-pattern", "(oops")
    assert result.exit_code == 2
    assert "error[usage.step_pattern]" in result.output


def test_bad_floor_is_usage_error(trace):
    assert _run(trace[0], "--floor-us", "-1").exit_code == 2


def test_malformed_trace_is_one_error_line(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "ts": 1')
    result = _run(bad)
    assert result.exit_code == 1
    assert result.output.startswith("error[json.")


def test_run_dir_without_manifest_is_an_error(tmp_path):
    result = _run(tmp_path)
    assert result.exit_code == 1
    assert "error[run." in result.output
