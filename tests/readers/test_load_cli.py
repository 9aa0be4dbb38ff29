"""``load_trace``, ``taxbreak info`` (golden JSON and text) and ``taxbreak convert``
(Parquet read back by pandas and DuckDB) on a small real trace.

Regenerate the goldens with ``TAXBREAK_UPDATE_GOLDEN=1 pytest tests/readers/test_load_cli.py``
and review the diff."""
from __future__ import annotations

import json
import os
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from click.testing import CliRunner

from taxbreak.cli.main import main
from taxbreak.readers import load_trace
from taxbreak.trace.tables import TraceTables

GOLDEN = Path(__file__).parent / "golden"
TRACE = "HolisticTraceAnalysis/tests/data/critical_path/cuda_event_sync/event_sync_trace.json.gz"
ENV = {"NO_COLOR": "1", "COLUMNS": "100", "TERM": "dumb"}


def _check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("TAXBREAK_UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text()


@pytest.fixture
def trace(shared_traces) -> Path:
    return shared_traces / TRACE


def test_info_json_golden(trace):
    result = CliRunner().invoke(main, ["info", str(trace), "--json"], env=ENV)
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["path"] == str(trace)
    data["path"] = "<TRACE>"
    _check_golden("info_event_sync.json", json.dumps(data, indent=1, sort_keys=True) + "\n")
    assert data["input_events"] == sum(data["event_counts"].values()) == 92
    assert data["tables"]["api_calls"] == 12 and data["kinds"]["api_calls"]["launch"] == 4


def test_info_text_golden(trace):
    result = CliRunner().invoke(main, ["info", str(trace)], env=ENV)
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    text = result.output.replace(str(trace), "<TRACE>")
    _check_golden("info_event_sync.txt", text)


def test_convert_writes_parquet_that_pandas_and_duckdb_read(trace, tmp_path):
    out = tmp_path / "tables"
    result = CliRunner().invoke(main, ["convert", str(trace), "-o", str(out)], env=ENV)
    assert result.exit_code == 0, result.output
    api = pd.read_parquet(out / "api_calls.parquet")
    assert len(api) == 12 and set(api.columns) >= {"start_ns", "api_name", "correlation"}
    rows = duckdb.sql(f"SELECT kind, count(*) FROM '{out / 'api_calls.parquet'}' GROUP BY kind ORDER BY kind").fetchall()
    assert rows == [("launch", 4), ("memcpy", 1), ("other", 4), ("sync", 3)]
    back = TraceTables.from_parquet(out)
    direct = load_trace(trace, use_cache=False)
    assert back.counts() == direct.counts()
    assert back.meta.event_counts == direct.meta.event_counts


def test_info_on_run_directory(trace, tmp_path):
    (tmp_path / "manifest.json").write_text("{}")
    (tmp_path / "trace.json.gz").write_bytes(trace.read_bytes())
    result = CliRunner().invoke(main, ["info", str(tmp_path), "--json"], env=ENV)
    assert result.exit_code == 0 and json.loads(result.output)["tables"]["flows"] == 21


def test_info_allow_truncated(tmp_path):
    path = tmp_path / "cut.json"
    events = [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": i, "dur": 1} for i in range(5)]
    path.write_text(json.dumps({"traceEvents": events})[:-30])
    failed = CliRunner().invoke(main, ["info", str(path)], env=ENV)
    assert failed.exit_code == 1 and failed.output.startswith("error[json.truncated]")
    kept = CliRunner().invoke(main, ["info", str(path), "--json", "--allow-truncated"], env=ENV)
    data = json.loads(kept.output)
    assert data["tables"]["host_events"] == 4 and data["diagnostics"]["trace.truncated"]["count"] == 1
