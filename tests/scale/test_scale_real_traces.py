"""The caches and analyze_many on real traces from public projects (read in place)."""
from __future__ import annotations

import json

import pytest

from taxbreak.readers import load_trace
from taxbreak.readers.cache import wait_for_writes
from taxbreak.scale import analyze_many, cached_analyze, find_traces

HTA = "HolisticTraceAnalysis/tests/data"
REAL = [
    f"{HTA}/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
    f"{HTA}/nccl_parser_config/nccl_data.json.gz",
    f"{HTA}/triton_example/triton_example.json.gz",
    f"{HTA}/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
    f"{HTA}/call_stack/backward_thread.json",
    "nsys-ai/tests/fixtures/mock.sqlite",
]


def _canonical(metrics: dict) -> str:
    """JSON text with NumPy scalars as Python numbers and pd.NA as null (NaN compares as text)."""
    return json.dumps(metrics, sort_keys=True, default=lambda v: v.item() if hasattr(v, "item") else None)


def _plain(table):
    return table.unify_dictionaries().combine_chunks()


@pytest.mark.parametrize("rel", REAL, ids=lambda r: r.rsplit("/", 1)[-1])
def test_cached_tables_equal_a_fresh_parse(shared_traces, rel):
    path = shared_traces / rel
    fresh = load_trace(path, use_cache=False)
    load_trace(path)
    wait_for_writes()
    cached = load_trace(path)
    for name in fresh.counts():
        assert _plain(cached.table(name)).equals(_plain(fresh.table(name))), name
    assert cached.meta == fresh.meta
    assert cached.diagnostics.as_dict() == fresh.diagnostics.as_dict()


def test_analyze_many_matches_one_by_one(shared_traces, tmp_path):
    folder = tmp_path / "ranks"
    folder.mkdir()
    for i, rel in enumerate(REAL[:3]):
        (folder / f"t{i}.json.gz").symlink_to(shared_traces / rel)
    result = analyze_many(find_traces(folder), workers=2)
    assert not result.failed
    for f in result.files:
        alone = cached_analyze(f.path, use_cache=False).summary["all"]
        assert _canonical(f.summary["all"]) == _canonical(alone), f.path
    kernels = [f.summary["all"]["kernels"] for f in result.files]
    # three unrelated corpus traces: three runs, each reported apart, added up only when asked
    assert result.combined is None and len(result.runs) == 3
    assert [result.runs[f.run]["all"]["kernels"] for f in result.files] == kernels
    combined = analyze_many(find_traces(folder), workers=2, combine_runs=True)
    assert combined.combined["all"]["kernels"] == sum(kernels)
