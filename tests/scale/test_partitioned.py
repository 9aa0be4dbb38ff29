"""Hive-partitioned export of several runs, queried with DuckDB and pyarrow."""
from __future__ import annotations

import re

import duckdb
import pytest
from scale_fakes import fake_analyze, write_fake_trace

from taxbreak.scale import analyze_many, find_traces, read_partitioned, write_partitions


def _k(step, phase, dur_us, name):
    return {"name": name, "phase": phase, "step": step, "dur_us": dur_us}


def _make_run(root, run, scale):
    """Two ranks; rank r has 2 prefill gemms and 3 decode kernels, durations × scale."""
    folder = root / run
    folder.mkdir()
    for rank in (0, 1):
        kernels = [_k(0, "prefill", 10.0 * scale, "gemm"), _k(0, "prefill", 10.0 * scale, "gemm")]
        kernels += [_k(1 + i, "decode", (1.0 + rank) * scale, "attn") for i in range(3)]
        write_fake_trace(folder / f"rank{rank}.json", rank, kernels, orchestration_us=5.0)
    return folder


@pytest.fixture
def dataset(tmp_path):
    out = tmp_path / "fleet"
    for run, scale in (("runA", 1.0), ("runB", 2.0), ("runC", 3.0)):
        folder = _make_run(tmp_path, run, scale)
        analyze_many(find_traces(folder), workers=1, analyze_fn=fake_analyze, export_dir=out)
    return out


def test_layout_is_hive_partitioned(dataset):
    files = sorted(re.sub(r"part-[0-9a-f]+", "part-ID", p.relative_to(dataset).as_posix())
                   for p in dataset.rglob("*.parquet"))
    assert "kernels/run=runA/rank=0/phase=decode/part-ID.parquet" in files
    assert "steps/run=runC/rank=1/phase=prefill/part-ID.parquet" in files
    assert "manifest/run=runB/rank=1/part-ID.parquet" in files
    # kernels and steps: tables × runs × ranks × phases; phases and idle: fakes have none (one empty
    # file each); manifest
    assert "idle/run=runA/rank=0/phase=unknown/part-ID.parquet" in files
    assert len(files) == 2 * 3 * 2 * 2 + 2 * 3 * 2 + 3 * 2
    assert not [p for p in dataset.rglob("*") if p.name.endswith(".partial")]


def test_duckdb_query_over_runs_returns_exact_aggregates(dataset):
    sql = f"""
        SELECT run, phase, count(*) AS kernels, sum(dur_us) AS device_us
        FROM read_parquet('{dataset}/kernels/**/*.parquet', hive_partitioning = true)
        GROUP BY run, phase ORDER BY run, phase
    """
    rows = duckdb.sql(sql).fetchall()
    # decode per run: 3 kernels × (1 + 2) × scale over the two ranks; prefill: 4 × 10 × scale
    assert rows == [
        ("runA", "decode", 6, 9.0), ("runA", "prefill", 4, 40.0),
        ("runB", "decode", 6, 18.0), ("runB", "prefill", 4, 80.0),
        ("runC", "decode", 6, 27.0), ("runC", "prefill", 4, 120.0),
    ]
    by_rank = duckdb.sql(f"""
        SELECT rank, sum(device_active_us) FROM read_parquet('{dataset}/steps/**/*.parquet', hive_partitioning = true)
        WHERE run = 'runB' AND phase = 'decode' GROUP BY rank ORDER BY rank
    """).fetchall()
    assert by_rank == [(0, 6.0), (1, 12.0)]


def test_pyarrow_reads_partition_keys(dataset):
    table = read_partitioned(dataset, "kernels")
    assert table.num_rows == 30
    assert set(table.column("run").to_pylist()) == {"runA", "runB", "runC"}
    assert set(table.column("rank").to_pylist()) == {0, 1}


def test_rerun_skips_done_inputs_and_replaces_a_changed_one(dataset, tmp_path):
    folder = tmp_path / "runA"
    again = analyze_many(find_traces(folder), workers=1, analyze_fn=fake_analyze, export_dir=dataset)
    assert all(f.resumed for f in again.files) and again.diagnostics.count("scale.resumed") == 2
    write_fake_trace(folder / "rank1.json", 1, [_k(0, "decode", 100.0, "attn")], orchestration_us=5.0)
    changed = analyze_many(find_traces(folder), workers=1, analyze_fn=fake_analyze, export_dir=dataset)
    assert [f.resumed for f in changed.files] == [True, False]
    rows = duckdb.sql(f"""
        SELECT rank, count(*), sum(dur_us) FROM read_parquet('{dataset}/kernels/**/*.parquet', hive_partitioning = true)
        WHERE run = 'runA' GROUP BY rank ORDER BY rank""").fetchall()
    assert rows == [(0, 5, 23.0), (1, 1, 100.0)]
    assert changed.combined["all"]["device_active_us"] == 123.0


def test_write_partitions_of_one_analysis_and_empty_tables(tmp_path):
    trace = write_fake_trace(tmp_path / "t.json", 0, [], orchestration_us=1.0)
    written = write_partitions(fake_analyze(trace, None), tmp_path / "out", run_id="solo", rank=2)
    assert sorted(written) == [
        "idle/run=solo/rank=2/phase=unknown/part-0.parquet",
        "kernels/run=solo/rank=2/phase=unknown/part-0.parquet",
        "phases/run=solo/rank=2/phase=unknown/part-0.parquet",
        "steps/run=solo/rank=2/phase=unknown/part-0.parquet",
    ]
    assert read_partitioned(tmp_path / "out", "kernels").num_rows == 0


def test_duplicate_ranks_do_not_overwrite_each_other(tmp_path):
    folder = tmp_path / "dup"
    folder.mkdir()
    for name in ("a.json", "b.json"):
        write_fake_trace(folder / name, 0, [_k(0, "decode", 1.0, "k")], 1.0)
    out = tmp_path / "out"
    analyze_many(find_traces(folder), workers=1, analyze_fn=fake_analyze, export_dir=out)
    parts = sorted(p.name for p in (out / "kernels/run=dup/rank=0/phase=decode").iterdir())
    assert len(parts) == 2 and all(re.fullmatch(r"part-[0-9a-f]+\.parquet", p) for p in parts)


def test_idle_table_holds_every_gap_with_the_phase_of_its_step(shared_traces, tmp_path):
    from taxbreak.scale.analysis_cache import cached_analyze

    analysis = cached_analyze(shared_traces / "HolisticTraceAnalysis/tests/data/nccl_parser_config/nccl_data.json.gz",
                              use_cache=False)
    write_partitions(analysis, tmp_path / "out", run_id="nccl", rank=0)
    idle = read_partitioned(tmp_path / "out", "idle").to_pandas()
    assert len(idle) == len(analysis.idle) > 0
    phase_of_step = dict(zip(analysis.steps["step"], analysis.steps["phase"].astype(str)))
    assert (idle["phase"] == idle["step"].map(phase_of_step)).all()
    assert {"between", "unknown"} <= set(idle["phase"])  # step -1 is the between pseudo-step
    by_cause_us = (idle["end_ns"] - idle["start_ns"]).groupby(idle["cause"]).sum() / 1e3
    for cause, us in analysis.summary["all"]["idle_by_cause_us"].items():
        # a cause not measured (library, without library ranges) has no idle rows at all
        assert by_cause_us.get(cause, 0.0) == pytest.approx(0.0 if us is None else us, abs=1e-3)
