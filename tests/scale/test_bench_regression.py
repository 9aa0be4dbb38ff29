"""Regression guard: parse, cached load and analyze of a 100 k-event synthetic trace.

These are pytest-benchmark tests, not timed assertions. With the project's
default ``--benchmark-disable`` each body runs once and its result is checked
against values counted independently from the trace JSON. To record timings
and compare with the kept baseline (docs/scale.md, "Regression guard")::

    python -m pytest tests/scale/test_bench_regression.py --benchmark-enable \
        --benchmark-storage=file://tests/scale/benchmarks --benchmark-autosave --benchmark-compare
"""
from __future__ import annotations

import gzip
import json

import pytest

from taxbreak.decompose import analyze
from taxbreak.readers import load_trace
from taxbreak.synth.bigtrace import write_big_kineto

N_EVENTS = 100_000


@pytest.fixture(scope="module")
def big_trace(tmp_path_factory):
    """The trace and what its JSON says: kernel count, Σ kernel dur (µs), step count."""
    path = tmp_path_factory.mktemp("bench") / "kineto_100k.json.gz"
    stats = write_big_kineto(path, N_EVENTS, seed=0)
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    steps = [e for e in events if e.get("cat") == "user_annotation"
             and e["name"].startswith(("taxbreak/prefill/", "taxbreak/decode/"))]
    return {"path": path, "events": stats.events, "kernels": len(kernels),
            "kernel_us": sum(e["dur"] for e in kernels), "steps": len(steps),
            "device_rows": sum(e.get("cat") in ("kernel", "gpu_memcpy") for e in events)}


def test_parse_100k(benchmark, big_trace):
    tables = benchmark.pedantic(load_trace, args=(big_trace["path"],), kwargs={"use_cache": False},
                                rounds=3, iterations=1)
    assert tables.device_activities.num_rows == big_trace["device_rows"]
    assert tables.meta.input_events == big_trace["events"]


def test_cached_load_100k(benchmark, big_trace):
    fresh = load_trace(big_trace["path"])  # fills the (per-test) cache
    tables = benchmark.pedantic(load_trace, args=(big_trace["path"],), rounds=5, iterations=1)
    for name in ("host_events", "api_calls", "device_activities", "ranges", "flows"):
        assert _plain(tables.table(name)).equals(_plain(fresh.table(name))), name


def _plain(table):
    """One chunk, one dictionary per column: the reader's chunks differ from Parquet's, not the values."""
    return table.unify_dictionaries().combine_chunks()


def test_analyze_100k(benchmark, big_trace):
    tables = load_trace(big_trace["path"])
    result = benchmark.pedantic(analyze, args=(tables,), rounds=3, iterations=1)
    summary = result.summary["all"]
    assert summary["kernels"] == big_trace["kernels"]
    assert summary["device_active_us"] == pytest.approx(big_trace["kernel_us"], abs=1e-3)
    assert summary["steps"] == big_trace["steps"]
    assert 0.0 < summary["hdbi"] < 1.0
