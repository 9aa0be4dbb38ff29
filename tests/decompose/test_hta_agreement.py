"""Launch-call duration and launch delay agree with Holistic Trace Analysis.

HTA's ``get_cuda_kernel_launch_stats`` reports, per correlation id, the CPU
launch-call duration and the launch delay (GPU start − launch end), in µs.
Install: ``pip install holistictraceanalysis==0.5.0 psutil`` (HTA imports
psutil without declaring it; it does not touch torch and runs on pandas 3).
"""
from __future__ import annotations

import numpy as np
import pytest

from conftest import shared_trace_paths
from taxbreak.decompose import analyze

hta = pytest.importorskip("hta.trace_analysis", reason="pip install holistictraceanalysis==0.5.0 psutil")

TRACES = [p for p in shared_trace_paths((".json.gz",))
          if any(k in str(p) for k in ("critical_path/alexnet", "critical_path/simple_add", "ns_resolution_trace",
                                       "nccl_parser_config"))]


def _tolerance_us(meta) -> float:
    """1 ns, or the float64 spacing of the µs timestamps HTA computes with when they are epoch values
    (at 1.7e15 µs a float64 resolves 0.25 µs, so HTA's own arithmetic is only that exact)."""
    if meta.time_base != "kineto_epoch_us":
        return 1e-3
    return max(1e-3, 4 * float(np.spacing((meta.origin_ns or 0) / 1000.0 + 1e7)))


def _hta_stats(path, tmp_path):
    (tmp_path / "rank0.json.gz").symlink_to(path)  # HTA reads a directory of rank traces
    analysis = hta.TraceAnalysis(trace_dir=str(tmp_path))
    return next(iter(analysis.get_cuda_kernel_launch_stats(ranks=[0], visualize=False).values()))


@pytest.mark.slow
@pytest.mark.parametrize("path", TRACES, ids=[p.parent.name for p in TRACES])
def test_launch_duration_and_delay_match_hta(path, tmp_path, monkeypatch):
    # HTA rounds ns-resolution timestamps to whole µs unless told not to
    monkeypatch.setenv("HTA_DISABLE_NS_ROUNDING", "1")
    theirs = _hta_stats(path, tmp_path).set_index("correlation")
    a = analyze(path)
    atol = _tolerance_us(a.tables.meta)
    k = a.kernels
    k = k[k["launch_start_ns"].notna()]
    ours = k.groupby("correlation").first()  # a graph replay shares one correlation
    common = theirs.index.intersection(ours.index)
    assert len(common) == len(theirs) > 0  # every kernel HTA links, we link too
    mine = ours.loc[common]
    cpu_us = mine["launch_dur_ns"].astype("int64").to_numpy() / 1000.0
    delay_us = (mine["start_ns"] - mine["launch_start_ns"] - mine["launch_dur_ns"]).astype("int64").to_numpy() / 1000
    # HTA clips the delay at 0 (cuda_kernel_analysis.py: .clip(lower=0)); a blocking
    # cudaMemcpy ends after its copy started, so its raw delay is negative
    delay_us = np.maximum(delay_us, 0.0)
    np.testing.assert_allclose(cpu_us, theirs.loc[common, "cpu_duration"].to_numpy(float), rtol=0, atol=atol)
    np.testing.assert_allclose(delay_us, theirs.loc[common, "launch_delay"].to_numpy(float), rtol=0, atol=atol)
