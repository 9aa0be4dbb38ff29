"""``taxbreak analyze --format csv``: the kernel/step/phase tables as CSV, exact on the planted trace."""
from __future__ import annotations

import io

import pandas as pd
import pytest
from click.testing import CliRunner

from taxbreak.cli.main import main
from taxbreak.decompose import analyze
from taxbreak.report.tables_csv import CSV_TABLES, table_csv, write_analysis_outputs, write_csv_tables


def _analyze(*args):
    return CliRunner().invoke(main, ["analyze", *map(str, args)], catch_exceptions=False)


@pytest.fixture
def analysis(planted):
    return analyze(planted, floor_us=4.5)


def test_kernel_rows_hold_the_planted_components(planted):
    result = _analyze(planted, "--floor-us", "4.5", "--format", "csv", "--table", "kernels")
    assert result.exit_code == 0 and result.stderr == ""
    rows = pd.read_csv(io.StringIO(result.stdout))
    assert rows["correlation"].tolist() == [101, 102, 103]
    assert rows["t_dispatch_ns"].tolist() == [4000, 6000, 9000]          # planted T_dispatch
    assert rows["ct_ns"].tolist() == [0, 0, 4000]                        # K3: 9 - 5 µs baseline
    assert rows["launch_latency_ns"].tolist() == [8500, 5000, 14500]
    assert rows["queue_wait_ns"].tolist() == [0, 4500, 0]


def test_unmeasured_values_are_empty_cells_not_zeros(planted, analysis):
    text = table_csv(analysis, "phases")
    header, whole, row = text.splitlines()[:3]
    for line, phase in ((whole, "all"), (row, "decode")):  # the whole trace first, as phase_names lists it
        cells = dict(zip(header.split(","), line.split(",")))
        assert cells["tokens"] == "" and cells["kernels_per_token"] == "" and cells["hdbi_reason"] == ""
        assert cells["phase"] == phase and cells["kernels"] == "3" and cells["hdbi"] == "0.324324"
    kernels = pd.read_csv(io.StringIO(table_csv(analysis, "kernels")), dtype=str, keep_default_na=False)
    assert kernels["queue_start_ns"].tolist()[0] == ""  # K1 did not queue: no queue start, not 0


def test_csv_round_trips_every_table(analysis):
    for table in CSV_TABLES:
        frame = getattr(analysis, table)
        back = pd.read_csv(io.StringIO(table_csv(analysis, table)))
        assert back.columns.tolist() == frame.columns.tolist() and len(back) == len(frame), table


def test_output_dir_gets_a_csv_file_per_table_beside_the_parquet(planted, tmp_path, analysis):
    out = tmp_path / "out"
    result = _analyze(planted, "--floor-us", "4.5", "--format", "csv", "-o", out)
    assert result.exit_code == 0
    assert result.stdout == table_csv(analysis, "phases")
    for table in CSV_TABLES:
        assert (out / f"{table}.csv").read_text() == table_csv(analysis, table)
        assert (out / f"{table}.parquet").is_file()
    names = ["kernels.csv", "steps.csv", "phases.csv", "idle_by_cause.csv", "devices.csv"]
    assert [p.name for p in write_csv_tables(analysis, tmp_path / "lib")] == names
    written = [p.name for p in write_analysis_outputs(analysis, tmp_path / "all", csv=True)]
    assert written[-6:] == ["summary.json", *names]
    assert sorted(written) == sorted(p.name for p in out.iterdir())  # what `analyze -o DIR --format csv` wrote


@pytest.mark.parametrize("args", [["--json", "--format", "csv"], ["--format", "xml"], ["--table", "ops"]])
def test_format_usage_errors_exit_2(planted, args):
    result = CliRunner().invoke(main, ["analyze", str(planted), *args])
    assert result.exit_code == 2 and "Traceback" not in result.output


def test_csv_of_two_traces_is_refused(planted):
    result = CliRunner().invoke(main, ["analyze", str(planted), str(planted), "--format", "csv"])
    assert result.exit_code == 2 and result.stderr.startswith("error[usage.invalid]: --format csv prints")


def test_format_json_is_the_json_flag(planted):
    assert _analyze(planted, "--floor-us", "4.5", "--format", "json").stdout == \
        _analyze(planted, "--floor-us", "4.5", "--json").stdout
