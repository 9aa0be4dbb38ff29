"""CUDA-graph and faster-host projections on hand-built mean steps."""
from __future__ import annotations

import pytest

from taxbreak.whatif.projections import compare_published, host_time, project_cpu_speedup, project_cuda_graphs

# A host-bound GPU decode step (µs): the host works 950 − 50 = 900 µs, of which
# 600 µs is per-kernel orchestration and 50 µs launch residual.
GPU_STEP = {
    "step_us": 1000.0, "device_active_us": 300.0, "orchestration_us": 600.0, "launch_latency_us": 50.0,
    "host_thread_us": 950.0, "host_sync_us": 50.0, "exposed_orchestration_us": 400.0,
}
CPU_STEP = {"step_us": 1000.0, "device_active_us": None, "orchestration_us": 700.0, "exposed_orchestration_us": None}


def test_host_time_prefers_partition():
    assert host_time(GPU_STEP) == (900.0, "host_thread_us - host_sync_us")
    value, source = host_time({"step_us": 10.0})
    assert value == 10.0 and source.startswith("step_us")


def test_cuda_graphs_device_bound_after_capture():
    # rest = 900 − 600 − 50 = 250; + one floor 4.5 = 254.5 < device 300 → projected 300.
    out = project_cuda_graphs(GPU_STEP, 4.5, "published:H200")
    assert out["host_rest_us"] == pytest.approx(250.0)
    assert out["projected_step_us"] == pytest.approx(300.0)
    assert out["speedup"] == pytest.approx(1000.0 / 300.0)
    assert "4.50 µs (published:H200)" in " ".join(out["assumptions"])


def test_cuda_graphs_host_bound_after_capture():
    step = dict(GPU_STEP, device_active_us=100.0)
    out = project_cuda_graphs(step, 4.5, "measured", graph_launch_us=10.0)
    assert out["projected_step_us"] == pytest.approx(260.0)  # 250 + 10 > 100
    assert out["graph_launch_us"] == 10.0


def test_cuda_graphs_not_projected_on_cpu():
    out = project_cuda_graphs(CPU_STEP, None, "unavailable")
    assert out["projected_step_us"] is None and out["speedup"] is None
    assert "CPU run" in out["not_projected"]


def test_cuda_graphs_not_projected_without_floor():
    out = project_cuda_graphs(GPU_STEP, None, "unavailable")
    assert out["projected_step_us"] is None and "launch floor" in out["not_projected"]


def test_cpu_speedup_only_exposed_orchestration_reaches_latency():
    # s = 1.25 → 1 − 1/s = 0.2. Orchestration 600 → 480 (−20%); exposed 400 → saves 80 µs: 1000 → 920 (−8%).
    out = project_cpu_speedup(GPU_STEP, 1.25)
    assert out["projected_orchestration_us"] == pytest.approx(480.0)
    assert out["orchestration_reduction_pct"] == pytest.approx(20.0)
    assert out["projected_step_us"] == pytest.approx(920.0)
    assert out["step_reduction_pct"] == pytest.approx(8.0)
    assert out["published"]["orchestration"] == "within" and out["published"]["e2e"] == "within"


def test_cpu_speedup_on_cpu_only_run_scales_whole_step():
    out = project_cpu_speedup(CPU_STEP, 1.25)
    assert out["projected_step_us"] == pytest.approx(800.0)
    assert out["step_reduction_pct"] == pytest.approx(20.0)
    assert out["published"]["e2e"] == "above"
    assert any("CPU-only" in a for a in out["assumptions"])


def test_cpu_speedup_unmeasured_exposure_stays_none():
    step = dict(GPU_STEP, exposed_orchestration_us=None)
    out = project_cpu_speedup(step, 1.2)
    assert out["projected_step_us"] is None and out["step_reduction_pct"] is None
    with pytest.raises(ValueError):
        project_cpu_speedup(GPU_STEP, 0.0)


def test_compare_published_bands():
    assert compare_published(5.0, 20.0)["orchestration"] == "below"
    assert compare_published(35.0, None)["orchestration"] == "above"
    assert compare_published(None, None)["e2e"] is None


def test_host_time_capped_at_marker_wall():
    # Two host lanes of 600 µs each inside a 700 µs step: the step thread cannot be busier than 700 µs.
    value, source = host_time({"host_thread_us": 1200.0, "host_sync_us": 0.0, "wall_us": 700.0})
    assert value == 700.0 and "capped" in source


def test_cpu_run_orchestration_is_the_step():
    out = project_cpu_speedup(dict(CPU_STEP, orchestration_us=None), 2.0)
    assert out["orchestration_us"] == 1000.0 and out["projected_orchestration_us"] == 500.0
