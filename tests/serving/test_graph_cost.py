"""CUDA-graph launch cost per node (docs/serving.md §3): planted graph sizes and launch times."""
from __future__ import annotations

import io

import pytest
from rich.console import Console

from taxbreak.decompose.analysis import analyze
from taxbreak.report.serving import render_graph_cost
from taxbreak.synth.planted import PlantedLaunch, PlantedOp, PlantedSpec, PlantedStep, build
from taxbreak.whatif.projections import project_cuda_graphs


def _graph(nodes: int, host_ns: int) -> PlantedOp:
    launch = PlantedLaunch("triton_poi_fused_add_mul_0", dispatch_ns=1_000, library_ns=0, launch_dur_ns=host_ns,
                           latency_ns=1_000, kernel_dur_ns=20_000, is_library=False, graph_kernels=nodes)
    return PlantedOp("model.py(1): forward", "aten::add", 2_000, [launch])


def _cost(sizes) -> dict:
    # planted host time of a launch: 15 µs + 0.58 µs per node (the published fit's shape)
    ops = [_graph(n, 15_000 + 580 * n) for n in sizes]
    spec = PlantedSpec([PlantedStep("decode", ops[: len(ops) // 2]), PlantedStep("decode", ops[len(ops) // 2:])])
    return analyze(build(spec).tables).summary["graph_launch_cost"]


@pytest.fixture(scope="module")
def cost():
    return _cost([4, 10, 30, 10])


def test_fit_recovers_the_planted_fixed_and_per_node_cost(cost):
    gpu = cost["devices"]["0"]
    assert cost["launches"] == 4 and (gpu["launches"], gpu["sizes"]) == (4, 3)
    assert (gpu["a_us"], gpu["b_us_per_node"], gpu["r2"]) == (15.0, 0.58, 1.0)
    assert gpu["nodes_median"] == 10.0 and gpu["host_us_median"] == 20.8
    assert gpu["host_us_per_node"] == round((4 * 15.0 + 0.58 * 54) / 54, 4)


def test_split_projection_of_the_median_graph(cost):
    # 10 nodes, 200 µs of device work: T_k = max(L + 200, k·L + 200/k), L = 15 + 5.8/k
    split = cost["devices"]["0"]["split"]
    assert [(s["pieces"], s["launch_us"], s["step_us"]) for s in split] == [
        (1, 20.8, 220.8), (2, 17.9, 217.9), (4, 16.45, 216.45), (8, 15.725, 215.725)]


def test_one_graph_size_is_not_fitted():
    gpu = _cost([10, 10])["devices"]["0"]
    assert gpu["a_us"] is None and gpu["fit_reason"].startswith("one graph size") and gpu["split"] == []
    assert gpu["host_us_per_node"] == 2.08


def test_no_graph_launch_says_why():
    spec = PlantedSpec([PlantedStep("decode", [_graph(0, 5_000)])])
    cost = analyze(build(spec).tables).summary["graph_launch_cost"]
    assert cost["reason"].startswith("no graph launch") and cost["devices"] == {}


def test_what_if_charges_the_fitted_cost_per_node(cost):
    step = {"step_us": 1000.0, "device_active_us": 100.0, "orchestration_us": 600.0, "launch_latency_us": 50.0,
            "host_thread_us": 950.0, "host_sync_us": 50.0, "kernels": 100.0}
    out = project_cuda_graphs(step, 4.5, "measured", launch_fit=cost["devices"]["0"])
    assert out["graph_launch_us"] == pytest.approx(15.0 + 0.58 * 100)  # not one floor of 4.5 µs
    assert out["projected_step_us"] == pytest.approx(250.0 + 73.0)
    assert "fitted" in " ".join(out["assumptions"]) and out["split"][0]["pieces"] == 1


def test_terminal_section(cost):
    out = io.StringIO()
    render_graph_cost({"graph_launch_cost": cost}, Console(file=out, width=100, color_system=None))
    text = out.getvalue()
    assert "CUDA-graph launch cost" in text and "0.580" in text and "15.00" in text
    assert "215.7 µs instead of 220.8 µs" in text and "200.0 µs of device work" in text  # terminal_fit.duration
