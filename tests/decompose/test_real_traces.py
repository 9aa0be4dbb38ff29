"""Every real trace in ../shared/traces decomposes: no crash, bounded HDBI,
non-negative components, an exactly conserving host partition, counted orphans."""
from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import shared_trace_paths
from taxbreak.decompose import analyze
from taxbreak.decompose.partition import COLUMNS
from taxbreak.decompose.summary import SUMMARY_KEYS
from taxbreak.readers import load_trace

PATHS = shared_trace_paths()
# traces over 1 MB take a few seconds each: run in CI, marked slow
CASES = [pytest.param(p, id=p.name, marks=[pytest.mark.slow] if p.stat().st_size > 1_000_000 else [])
         for p in PATHS]
COMPONENT_COLS = ["t_py_ns", "t_dispatch_ns", "t_launch_ns", "ft_ns", "ft_python_ns", "ft_dispatch_ns", "ct_ns",
                  "kt_floor_ns", "launch_latency_ns", "dur_ns"]


def test_shared_traces_present(shared_traces):
    assert len(PATHS) >= 15, "expected the real traces of ../shared/traces"


@pytest.mark.parametrize("path", CASES)
def test_real_trace_decomposes(path):
    tables = load_trace(path)
    a = analyze(tables)
    s = a.summary["all"]
    assert set(SUMMARY_KEYS) <= set(s)
    if tables.device_activities.num_rows and s["hdbi"] is not None:
        assert 0.0 <= s["hdbi"] <= 1.0
    for col in COMPONENT_COLS:
        values = a.kernels[col].dropna().to_numpy(np.int64)
        assert (values >= 0).all(), col
    _assert_partition_conserves(a, tables)
    _assert_orphans_counted(a)
    json.loads(a.to_json())  # the summary is plain JSON


def _assert_partition_conserves(a, tables):
    part = a.host_partition
    parts = part[list(COLUMNS.values())].sum(axis=1).to_numpy(np.int64)
    assert (parts == part["host_thread_ns"].to_numpy(np.int64)).all()
    # per thread, the walls over all steps add up to the thread's span (first start → last end)
    he, ac, rg = (t.to_pandas() for t in (tables.host_events, tables.api_calls, tables.ranges))
    frames = [he, ac]
    if not (he["kind"].astype(str) == "annotation").any():  # Nsight: host NVTX ranges act as annotations
        frames.append(rg[rg["source"].astype(str) == "nvtx"])
    events = [df[["pid", "tid", "start_ns", "dur_ns"]] for df in frames if len(df)]
    if not events:
        assert len(part) == 0
        return
    import pandas as pd

    ev = pd.concat(events)
    ev["end_ns"] = ev["start_ns"] + ev["dur_ns"]
    span = ev.groupby(["pid", "tid"]).agg(lo=("start_ns", "min"), hi=("end_ns", "max"))
    wall = part.groupby(["pid", "tid"])["host_thread_ns"].sum()
    expected = (span["hi"] - span["lo"]).reindex(wall.index)
    assert (wall == expected).all()
    # the summary's partition is the launching threads' (every thread when none launches);
    # the threads that launch nothing are summed apart, and the two make up every thread
    s = a.summary["all"]
    launching = part["launches_work"].to_numpy(bool)
    selected = launching if launching.any() else np.ones(len(part), bool)
    assert int(part["host_thread_ns"][selected].sum()) == round(s["host_thread_us"] * 1000)
    assert int(part["host_thread_ns"][~selected].sum()) == round((s["host_nonlaunching_thread_us"] or 0.0) * 1000)
    assert (s["host_nonlaunching_thread_us"] is None) == (not launching.any())


def _assert_orphans_counted(a):
    s, diags = a.summary["all"], a.summary["diagnostics"]
    assert s["orphan_kernels"] == diags.get("link.orphan_kernel", {}).get("count", 0)
    assert s["orphan_launches"] == diags.get("link.orphan_launch", {}).get("count", 0)
    unlinked = a.kernels["launch_start_ns"].isna()
    is_kernel = a.kernels["kind"] == "kernel"
    assert s["orphan_kernels"] == int((unlinked & is_kernel).sum())
    assert s["orphan_copies"] == int((unlinked & ~is_kernel).sum())
    assert s["orphan_copies"] == diags.get("link.orphan_copy", {}).get("count", 0)
    assert s["orphan_copy_calls"] == diags.get("link.orphan_copy_call", {}).get("count", 0)


def test_cpu_only_trace_reports_no_device(shared_traces):
    path = next(p for p in PATHS if "cpu_only" in str(p))
    a = analyze(path)
    s = a.summary["all"]
    assert a.summary["meta"]["device"] == "no CUDA device in trace"
    assert s["floor_source"] == "unavailable" and s["floor_us"] is None
    for key in ("device_active_us", "hdbi", "launch_floor_us", "framework_us", "tklqt_sum_us"):
        assert s[key] is None, key
    assert s["host_thread_us"] > 0  # the host partition is still measured
