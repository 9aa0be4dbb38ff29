"""`taxbreak analyze DIR` over a folder of traces: per-rank table, errors, partitioned export."""
from __future__ import annotations

import json

import duckdb
import pytest
from click.testing import CliRunner

from taxbreak.cli.main import main
from taxbreak.synth.bigtrace import write_big_kineto


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("ranks") / "job"
    root.mkdir()
    for i in range(2):
        write_big_kineto(root / f"rank{i}.json.gz", 2000, seed=i)
    return root


def _run(*args):
    return CliRunner().invoke(main, ["analyze", *map(str, args)])


def test_folder_prints_per_rank_and_combined(folder):
    # both synthetic traces say rank 0 without a world size: two runs, added up only when asked
    result = _run(folder, "--workers", "1", "--combine-runs")
    assert result.exit_code == 0, result.output
    assert "rank0.json.gz" in result.output and "rank1.json.gz" in result.output
    assert "2 traces" in result.output
    assert "Analyzed 2 of 2 traces" in result.output
    assert "Traceback" not in result.output


def test_folder_json_combines_sums_and_recomputes_hdbi(folder):
    result = _run(folder, "--json", "--workers", "1", "--combine-runs")
    data = json.loads(result.stdout)
    files = [f["all"] for f in data["files"]]
    combined = data["combined"]["all"]
    assert combined["kernels"] == sum(f["kernels"] for f in files)
    assert combined["device_active_us"] == pytest.approx(sum(f["device_active_us"] for f in files))
    dev, orch = combined["device_active_us"], combined["orchestration_us"]
    assert combined["hdbi"] == pytest.approx(dev / (dev + orch))


def test_runs_are_reported_apart_unless_combined(folder):
    result = _run(folder, "--json", "--workers", "1")
    data = json.loads(result.stdout)
    assert data["combined"] is None and sorted(data["runs"]) == ["job.rank0", "job.rank1"]
    assert "2 runs reported apart" in data["not_combined"]["all"]
    assert "taxbreak diff" in data["not_combined"]["all"]  # two traces, two runs: an A/B pair
    table = _run(folder, "--workers", "1")
    assert "2 traces" not in table.stdout and "2 runs reported apart" in table.stderr


def test_skip_reports_the_bad_file_and_fail_exits_1_naming_it(folder, tmp_path):
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    (mixed / "rank0.json.gz").symlink_to(folder / "rank0.json.gz")
    (mixed / "rank9.json").write_text('{"traceEvents": [')
    skipped = _run(mixed, "--on-error", "skip", "--workers", "1")
    assert skipped.exit_code == 0
    assert "skipped" in skipped.output and "rank9.json" in skipped.output and "error[json." in skipped.output
    failed = _run(mixed, "--on-error", "fail", "--workers", "1")
    assert failed.exit_code == 1
    assert "error[json." in failed.output and "rank9.json" in failed.output
    assert "Traceback" not in failed.output


def test_partitioned_export_is_queryable(folder, tmp_path):
    out = tmp_path / "fleet"
    result = _run(folder, "-o", out, "--partitioned", "--run-id", "r1", "--workers", "2")
    assert result.exit_code == 0, result.output
    rows = duckdb.sql(f"""SELECT run, count(DISTINCT rank), count(*) FROM
        read_parquet('{out}/kernels/**/*.parquet', hive_partitioning = true) GROUP BY run""").fetchall()
    summary = json.loads(_run(folder, "--json").stdout)
    device_rows = sum(f["all"]["kernels"] for f in summary["files"])
    assert rows[0][0] == "r1" and rows[0][1] == 1  # both synthetic traces say rank 0 (duplicate, numbered on)
    assert rows[0][2] >= device_rows


def test_usage_errors_exit_2(folder, tmp_path):
    assert _run(folder, "--partitioned").exit_code == 2
    assert _run(folder, "--tokens", "5").exit_code == 2
    empty = tmp_path / "empty"
    empty.mkdir()
    assert _run(empty).exit_code != 0


def test_no_cache_flag_leaves_the_cache_empty(folder, monkeypatch):
    from taxbreak.readers.cache import cache_stats

    monkeypatch.setenv("TAXBREAK_NO_CACHE", "0")  # the flag sets it for the process: restored after the test
    result = _run(folder / "rank0.json.gz", "--no-cache", "--json")
    assert result.exit_code == 0, result.output
    assert cache_stats().entries == 0


@pytest.fixture(scope="module")
def three_ranks(tmp_path_factory):
    root = tmp_path_factory.mktemp("three") / "job"
    root.mkdir()
    for rank in range(3):
        write_big_kineto(root / f"rank{rank}.json.gz", 600, seed=rank, rank=rank, world_size=3)
    return root


@pytest.mark.parametrize("workers", [1, 2])
def test_analyze_many_reports_traces_done_of_total_from_the_parent(three_ranks, capfd, workers):
    from taxbreak.scale.many import analyze_many

    events = []  # a list in this process: events sent from a worker process would never reach it
    result = analyze_many(sorted(three_ranks.iterdir()), workers=workers, use_cache=False, progress=events.append)
    assert len(result.files) == 3 and not result.failed
    assert [(e.stage, e.done, e.total, e.unit) for e in events] == [("traces", n, 3, "traces") for n in range(4)]
    out, err = capfd.readouterr()  # the library printed nothing, the workers neither
    assert out == "" and err == ""


def test_folder_progress_reaches_the_cli_hook_and_stays_off_a_terminal(three_ranks, monkeypatch):
    import contextlib

    import taxbreak.cli.many as cli_many

    # CliRunner's stderr is not a terminal: the folder run draws no progress, only its closing line
    plain = _run(three_ranks, "--workers", "1")
    assert plain.exit_code == 0, plain.output
    assert plain.stderr.splitlines()[-1].startswith("Analyzed 3 of 3 traces") and "━" not in plain.stderr
    assert _run(three_ranks, "--workers", "1", "-q").stderr == ""
    drawn, asked = [], []

    def working(action, target, quiet=False):  # the hook the CLI draws with, recorded instead
        asked.append((action, target, quiet))
        return contextlib.nullcontext(drawn.append)

    monkeypatch.setattr(cli_many, "working", working)
    assert _run(three_ranks, "--workers", "1", "-q").exit_code == 0
    assert asked == [("analyzing", str(three_ranks), True)]
    assert [(e.done, e.total) for e in drawn] == [(n, 3) for n in range(4)]
