"""Planted traces written as Kineto JSON and as Nsight SQLite, read back by the
readers: every planted component is recovered exactly (ns) in both formats."""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from taxbreak.decompose import analyze
from taxbreak.readers import load_trace
from taxbreak.synth.planted import build, random_spec
from taxbreak.synth.write_kineto import write_kineto
from taxbreak.synth.write_nsys import write_nsys

from planted_expect import compare_kernels, compare_partition

H100_FLOOR_NS = 4710


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), steps=st.integers(1, 3), ops=st.integers(1, 5))
def test_kineto_round_trip_recovers_planted(seed, steps, ops):
    planted = build(random_spec(np.random.default_rng(seed), steps=steps, ops=ops))
    with tempfile.TemporaryDirectory() as tmp:
        path = write_kineto(planted.tables, Path(tmp) / "planted.json.gz")
        a = analyze(path)
    compare_kernels(a.kernels, planted.kernels, H100_FLOOR_NS)
    compare_partition(a.host_partition, planted.steps, library_ranges=False)
    assert a.summary["meta"]["step_scheme"] == "taxbreak"


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), steps=st.integers(1, 3), ops=st.integers(1, 5))
def test_nsys_round_trip_recovers_planted(seed, steps, ops):
    spec = random_spec(np.random.default_rng(seed), steps=steps, ops=ops, with_library_ranges=True)
    planted = build(spec)
    with tempfile.TemporaryDirectory() as tmp:
        path = write_nsys(planted.tables, Path(tmp) / "planted.sqlite")
        a = analyze(load_trace(path))
    compare_kernels(a.kernels, planted.kernels, H100_FLOOR_NS)
    compare_partition(a.host_partition, planted.steps, library_ranges=True)
    lib_kernels = planted.kernels["is_library"]
    if lib_kernels.any():
        assert a.summary["all"]["library_measured_us"] > 0


def test_run_directory_reads_manifest_tokens(tmp_path):
    planted = build(random_spec(np.random.default_rng(9), steps=3, ops=2))
    write_kineto(planted.tables, tmp_path / "trace.json.gz")
    (tmp_path / "manifest.json").write_text('{"model": "tiny", "new_tokens": 2, "batch_size": 1}')
    a = analyze(tmp_path)
    s = a.summary["all"]
    assert s["tokens"] == 2  # new_tokens x one taxbreak/run range
    assert s["kernels_per_token"] == round(len(planted.kernels) / 2, 3)
    assert a.summary["meta"]["manifest"]["model"] == "tiny"
