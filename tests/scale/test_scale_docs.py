"""The DuckDB queries of docs/scale.md, run as they stand against a dataset built here: they
parse, return rows, and the per-run HDBI and idle causes equal the combined summary's."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from taxbreak.scale import analyze_many, find_traces
from taxbreak.synth.bigtrace import write_big_kineto

duckdb = pytest.importorskip("duckdb")

DOC = Path(__file__).resolve().parents[2] / "docs" / "scale.md"
SECTION = "### Querying across runs with DuckDB"


def documented_queries() -> list[str]:
    """The ```sql blocks of the DuckDB section, in order (views first)."""
    text = DOC.read_text()
    section = text[text.index(SECTION):]
    section = section[: section.index("\n### ", 1)]
    return re.findall(r"```sql\n(.*?)```", section, flags=re.S)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("docs")
    for run, steps in (("2026-12-01", 3), ("2026-12-02", 1)):  # a run name DuckDB would read as a date
        (root / "nightly" / run).mkdir(parents=True)
        for rank in (0, 1):
            write_big_kineto(root / "nightly" / run / f"worker{rank}.1733{rank}.pt.trace.json.gz", 1500,
                             seed=rank, rank=rank, world_size=2, decode_steps=steps)
    out = root / "out"
    result = analyze_many(find_traces(root / "nightly"), workers=1, use_cache=False, export_dir=out)
    assert not result.failed and sorted(result.runs) == ["2026-12-01", "2026-12-02"]
    return out, result


def _connect(out: Path):
    con = duckdb.connect()
    views, *queries = documented_queries()
    con.execute(views.replace("'OUT/", f"'{out}/"))
    return con, queries


def test_the_page_documents_views_and_four_queries():
    blocks = documented_queries()
    assert len(blocks) == 5 and blocks[0].count("CREATE VIEW") == 4
    assert blocks[0].count("read_parquet") == blocks[0].count("hive_types = {'run': VARCHAR") == 4


def test_every_documented_query_runs_and_returns_rows(dataset):
    out, result = dataset
    con, queries = _connect(out)
    rows = [con.execute(q).fetchall() for q in queries]
    assert [len(r) > 0 for r in rows] == [True] * 4
    manifest = rows[3]
    assert [(run, rank, source) for run, rank, source, *_ in manifest] == [
        ("2026-12-01", 0, "meta"), ("2026-12-01", 1, "meta"), ("2026-12-02", 0, "meta"), ("2026-12-02", 1, "meta")]
    assert all(trace.endswith(".pt.trace.json.gz") for *_, trace, _ in manifest)


def test_per_run_hdbi_from_sums_equals_the_combined_summary(dataset):
    out, result = dataset
    con, queries = _connect(out)
    for run, ranks, kernels, _, _, hdbi in con.execute(queries[0]).fetchall():
        combined = result.runs[run]["all"]
        assert ranks == 2 and kernels == combined["kernels"]
        assert hdbi == pytest.approx(combined["hdbi"], rel=1e-9)


def test_idle_by_cause_per_run_equals_the_combined_summary(dataset):
    out, result = dataset
    con, queries = _connect(out)
    idle = {(run, cause): us for run, cause, _, us in con.execute(queries[2]).fetchall()}
    for run, combined in result.runs.items():
        for cause, us in combined["all"]["idle_by_cause_us"].items():
            # the query rounds to 0.1 µs; a cause not measured (library, no library ranges) has no rows
            assert idle.get((run, cause), 0.0) == pytest.approx(0.0 if us is None else us, abs=0.1)


def test_top_kernels_cover_every_run(dataset):
    out, _ = dataset
    con, queries = _connect(out)
    top = con.execute(queries[1]).fetchall()
    assert len(top) == 5 and all(runs == 2 for _, _, runs, _, _ in top)
    latencies = [lat for _, _, _, lat, _ in top]
    assert latencies == sorted(latencies, reverse=True)
