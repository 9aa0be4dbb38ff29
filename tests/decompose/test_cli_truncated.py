"""``taxbreak analyze --allow-truncated``: the option the ``json.truncated`` hint names."""
from __future__ import annotations

import json

import numpy as np
from click.testing import CliRunner

from taxbreak.cli.main import main
from taxbreak.synth.planted import build, random_spec
from taxbreak.synth.write_kineto import write_kineto


def _truncated_trace(tmp_path):
    """A planted plain-JSON trace cut in the middle of its event list."""
    planted = build(random_spec(np.random.default_rng(4), steps=2, ops=3))
    full = write_kineto(planted.tables, tmp_path / "full.json")
    text = full.read_bytes()
    cut = tmp_path / "cut.json"
    cut.write_bytes(text[: len(text) * 2 // 3])
    return cut


def _run(*args):
    result = CliRunner().invoke(main, ["analyze", *map(str, args)], env={"NO_COLOR": "1", "COLUMNS": "160"})
    assert "Traceback" not in result.output
    return result


def test_truncated_trace_fails_and_names_the_option(tmp_path):
    result = _run(_truncated_trace(tmp_path))
    assert result.exit_code == 1
    assert "error[json.truncated]" in result.output and "--allow-truncated" in result.output


def test_allow_truncated_analyzes_the_complete_events_and_counts_the_loss(tmp_path):
    result = _run(_truncated_trace(tmp_path), "--allow-truncated", "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["diagnostics"]["trace.truncated"]["count"] == 1
    assert summary["diagnostics"]["trace.truncated"]["severity"] == "data_loss"
    assert summary["meta"]["event_counts"]["host_events"] > 0
