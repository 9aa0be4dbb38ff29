"""An annotated trace loads in Holistic Trace Analysis and gives it the same
kernel-launch statistics as the original (the added events carry no
``args.correlation``, by which HTA pairs launches with kernels)."""
from __future__ import annotations

import pandas as pd
import pytest

from taxbreak.decompose import analyze
from taxbreak.report.annotate import CATEGORY, write_annotated

hta = pytest.importorskip("hta.trace_analysis", reason="pip install holistictraceanalysis==0.5.0 psutil")

ALEXNET = "HolisticTraceAnalysis/tests/data/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz"


def _load(folder):
    analysis = hta.TraceAnalysis(trace_dir=str(folder))
    stats = next(iter(analysis.get_cuda_kernel_launch_stats(ranks=[0], visualize=False).values()))
    trace = analysis.t.get_trace(0)
    names = analysis.t.symbol_table.sym_table
    return stats.reset_index(drop=True), trace["cat"].map(lambda i: names[i]).value_counts()


@pytest.mark.slow
def test_hta_reads_the_annotated_trace_and_its_launch_stats_are_unchanged(shared_traces, tmp_path, monkeypatch):
    monkeypatch.setenv("HTA_DISABLE_NS_ROUNDING", "1")
    trace = shared_traces / ALEXNET
    (tmp_path / "original").mkdir()
    (tmp_path / "annotated").mkdir()
    (tmp_path / "original" / "rank0.json.gz").symlink_to(trace)
    stats = write_annotated(trace, analyze(trace), tmp_path / "annotated" / "rank0.json.gz")
    before, cats_before = _load(tmp_path / "original")
    after, cats_after = _load(tmp_path / "annotated")
    pd.testing.assert_frame_equal(after, before)
    assert cats_after.drop(CATEGORY).to_dict() == cats_before.to_dict()
    assert cats_after[CATEGORY] == sum(stats.slices.values()) - stats.overflow
