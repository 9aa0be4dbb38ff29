"""On every real trace: the launch split and the idle attribution conserve exactly,
waits stay inside the time they can occupy, and HDBI is null exactly where a
component is not measured."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from conftest import shared_trace_paths
from idle_checks import check_library_cause, measured_cause_sum
from planted_expect import _merge  # touching pieces joined (step boundaries cut an idle piece)
from taxbreak.decompose import analyze
from taxbreak.decompose.device_checks import trace_window
from taxbreak.trace.diagnostics import Diagnostics
from taxbreak.decompose.intervals import union_intervals
from taxbreak.decompose.views import build_views
from taxbreak.readers import load_trace

CASES = [pytest.param(p, id=p.name, marks=[pytest.mark.slow] if p.stat().st_size > 1_000_000 else [])
         for p in shared_trace_paths()]


@pytest.fixture(scope="module", params=CASES)
def analysed(request):
    tables = load_trace(request.param)
    return analyze(tables), build_views(tables)


def _scopes(summary: dict) -> list[dict]:
    return [summary["all"], *summary["phases"].values(), *summary["steps"]]


def test_launch_parts_sum_to_t_launch(analysed):
    a, _ = analysed
    k = a.kernels[a.kernels["queue_wait_ns"].notna()]
    parts = k["t_floor_ns"] + k["queue_wait_ns"] + k["launch_latency_ns"] + k["dependency_wait_ns"]
    assert (parts == k["t_launch_ns"].clip(lower=0)).all()
    assert (k[["t_floor_ns", "queue_wait_ns", "launch_latency_ns", "dependency_wait_ns"]] >= 0).all().all()
    linked = (a.kernels["kind"] == "kernel") & a.kernels["launch_start_ns"].notna()
    assert a.kernels["queue_wait_ns"].notna().sum() == linked.sum()


def test_idle_pieces_cover_device_idle_exactly(analysed):
    a, views = analysed
    _, (lo, hi) = trace_window(views, Diagnostics())
    idle = a.idle
    for device in np.unique(views.device.device):
        on = views.device.device == device
        start, end = union_intervals(views.device.start_ns[on], views.device.end_ns[on])
        pieces = idle[idle["device"] == device].sort_values("start_ns")
        s, e = pieces["start_ns"].to_numpy(np.int64), pieces["end_ns"].to_numpy(np.int64)
        assert (s >= lo).all() and (e <= hi).all() and (e > s).all()
        assert (s[1:] >= e[:-1]).all()  # disjoint
        assert int((e - s).sum()) == (hi - lo) - int((end - start).sum())
    if not len(views.device.start_ns):
        assert len(idle) == 0


def test_idle_launch_latency_is_the_kernels_exposed_launch_latency(analysed):
    """Per device, the idle pieces of cause launch_latency are the kernels' launch-latency pieces
    [start − latency, start), ns for ns, and the floor pieces lie inside [L, L + t_floor)."""
    a, _ = analysed
    idle = a.idle
    # the latency piece ends where the dependency wait (beyond the learned bound) begins
    for cause, lo, hi in (("launch_latency", ["launch_latency_ns", "dependency_wait_ns"], ["dependency_wait_ns"]),
                          ("dependency_wait", ["dependency_wait_ns"], [])):
        k = a.kernels[a.kernels[cause + "_ns"].fillna(0) > 0]
        for device in np.unique(np.concatenate([k["device"].to_numpy(np.int64), idle["device"].to_numpy(np.int64)])):
            dk = k[k["device"] == device]
            start = (dk["start_ns"] - sum(dk[c] for c in lo)).astype("int64")
            end = (dk["start_ns"] - sum((dk[c] for c in hi), 0)).astype("int64")
            got = idle[(idle["device"] == device) & (idle["cause"] == cause)]
            assert _merge(list(zip(got["start_ns"].astype("int64"), got["end_ns"].astype("int64")))) == \
                _merge(sorted(zip(start, end)))
    s = a.summary["all"]
    if s["idle_by_cause_us"] is not None and s["launch_latency_us"] is not None:
        assert s["idle_by_cause_us"]["launch_latency"] == s["launch_latency_us"]
        assert s["idle_by_cause_us"]["dependency_wait"] == s["dependency_wait_us"]


def test_scope_sums_conserve(analysed):
    a, views = analysed
    for scope in _scopes(a.summary):
        if scope["device_idle_us"] is None:
            assert not len(views.device.start_ns)
            continue
        check_library_cause(scope["idle_by_cause_us"], a.summary["meta"]["library_ranges"])
        assert round(measured_cause_sum(scope["idle_by_cause_us"]), 3) == scope["device_idle_us"]
        assert round(sum(d["idle_us"] for d in scope["devices"].values()), 3) == scope["device_idle_us"]
        for dev in scope["devices"].values():
            assert round(dev["busy_us"] + dev["idle_us"], 3) == (scope["wall_us"] or 0.0)
            assert dev["busy_us"] >= 0
    total = sum(s["wall_us"] or 0 for s in a.summary["steps"])
    assert round(total, 3) == a.summary["all"]["wall_us"]


def test_waits_stay_inside_their_time(analysed):
    """Per device, the union of queue waits lies inside [first launch, last kernel end], and the
    launch-latency pieces [start − latency, start) are disjoint and inside the device's idle time."""
    a, views = analysed
    k = a.kernels[a.kernels["queue_wait_ns"].notna()]
    for device, dev in k.groupby("device"):
        extent = int((dev["start_ns"] + dev["dur_ns"]).max() - dev["launch_start_ns"].min())
        q0 = dev["queue_start_ns"].dropna().to_numpy(np.int64)
        waits = dev.loc[dev["queue_start_ns"].notna(), "queue_wait_ns"].to_numpy(np.int64)
        u0, u1 = union_intervals(q0, q0 + waits)
        assert int((u1 - u0).sum()) <= extent
        lat = dev[dev["launch_latency_ns"] > 0].sort_values("start_ns")
        s = lat["start_ns"].to_numpy(np.int64)
        begin = s - lat["launch_latency_ns"].to_numpy(np.int64)
        assert (begin[1:] >= s[:-1]).all()
        idle = a.idle[a.idle["device"] == device]
        assert int(lat["launch_latency_ns"].sum()) <= int((idle["end_ns"] - idle["start_ns"]).sum())


def test_hdbi_null_exactly_where_a_component_is_unmeasured(analysed):
    a, _ = analysed
    for scope in _scopes(a.summary):
        unmeasured = (scope["framework_us"] is None or scope["library_us"] is None
                      or scope["framework_python_us"] is None or scope["kernels"] - scope["orphan_kernels"] == 0
                      or (scope["hdbi_coverage"] or 0) < 1)  # some launch outside any framework op
        assert (scope["hdbi"] is None) == (unmeasured or scope["device_active_us"] == 0 and not scope["orchestration_us"])
        # orchestration_us only where every component is measured
        assert (scope["orchestration_us"] is None) == (scope["kernels"] - scope["orphan_kernels"] == 0 or any(
            scope[k] is None for k in ("framework_us", "framework_python_us", "library_us", "launch_floor_us")))
        if scope["hdbi"] is not None:
            assert scope["hdbi_covered"] == scope["hdbi"] and scope["hdbi_coverage"] == 1.0
        assert (scope["hdbi_reason"] is None) == (scope["hdbi"] is not None)
        if scope["t_dispatch_base_us"] is None:
            assert scope["library_us"] is None
        if scope["hdbi"] is not None:
            active, orch = scope["device_active_us"], scope["orchestration_us"]
            assert scope["hdbi"] == round(active / (active + orch), 6)
