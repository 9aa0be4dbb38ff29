"""The sweep analysis and projections on real `analyze()` output of planted GPU traces.

Each grid point is a planted trace (taxbreak.synth.planted): one prefill and one
decode step of two ops each. Per kernel the host plants Python 2 µs + dispatch
1 µs, and the published H100 floor 4.71 µs is used, so orchestration is
2·(2 + 1 + 4.71) = 15.42 µs per step; kernel time grows with B·S.
"""
from __future__ import annotations

import json

import pytest

from taxbreak.decompose import analyze
from taxbreak.synth.planted import PlantedLaunch, PlantedOp, PlantedSpec, PlantedStep, build
from taxbreak.whatif.api import WhatIfOptions, what_if
from taxbreak.whatif.sweep import SweepConfig, run_sweep
from taxbreak.whatif.sweep_report import write_sweep_outputs

ORCH_US = 2 * (2.0 + 1.0 + 4.71)


def _op(kernel_ns: int) -> PlantedOp:
    return PlantedOp("torch.nn.functional.linear", "aten::linear", 2000,
                     [PlantedLaunch("triton_poi_fused_linear_0", 1000, 0, 3000, 5000, kernel_ns, False)])


def prefill_kernel_us(batch: int, seq_len: int) -> float:
    return 0.25 * batch * seq_len


def planted_profile(config, point, run_dir):
    k_pre = int(prefill_kernel_us(point.batch, point.seq_len) * 1000)
    k_dec = 100 * point.batch
    spec = PlantedSpec([PlantedStep("prefill", [_op(k_pre), _op(k_pre)]),
                        PlantedStep("decode", [_op(k_dec), _op(k_dec)])])
    summary = analyze(build(spec).tables).summary
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "summary.json").write_text(json.dumps(summary, default=float))


@pytest.fixture(scope="module")
def planted_sweep(tmp_path_factory):
    root = tmp_path_factory.mktemp("planted")
    config = SweepConfig(model="planted", batch_sizes=[1, 2, 4], seq_lens=[8, 16], new_tokens=2)
    run_sweep(config, root, profile_point=planted_profile)
    return root, write_sweep_outputs(root)


def hdbi(device_us: float) -> float:
    return device_us / (device_us + ORCH_US)


def test_planted_hdbi_reaches_the_table(planted_sweep):
    _, out = planted_sweep
    table = out["table"]
    row = table[(table["name"] == "b2-s8") & (table["phase"] == "prefill")].iloc[0]
    assert row["orchestration_us"] == pytest.approx(ORCH_US)
    assert row["hdbi"] == pytest.approx(hdbi(2 * prefill_kernel_us(2, 8)), abs=1e-6)


def test_planted_transition_point(planted_sweep):
    _, out = planted_sweep
    prefill = out["transition"]["phases"]["prefill"]
    curves = {c["seq_len"]: c for c in prefill["by_batch"]}
    # S=8: HDBI 0.3416 at B=2 (8 µs device), 0.5092 at B=4 (16 µs): crossing interpolated in between.
    h2, h4 = hdbi(8.0), hdbi(16.0)
    assert curves[8]["hdbi"]["x"] == pytest.approx(2 + (0.5 - h2) * 2 / (h4 - h2), abs=1e-3)
    # S=16: B=2 already has 16 µs of device time, HDBI 0.509; B=1 has 0.3416.
    assert curves[16]["hdbi"]["x"] == pytest.approx(1 + (0.5 - h2) / (h4 - h2), abs=1e-3)
    assert prefill["smallest_device_bound"] == {"batch": 2, "seq_len": 16, "hdbi": pytest.approx(h4, abs=1e-6)}
    # Decode kernels stay tiny (0.1–0.4 µs): decode never turns device-bound in this grid.
    assert out["transition"]["phases"]["decode"]["smallest_device_bound"] is None


def test_planted_cuda_graph_projection(planted_sweep):
    root, _ = planted_sweep
    result = what_if(root / "b1-s8", WhatIfOptions(cpu_speedup=1.25))
    graphs = result["phases"]["decode"]["cuda_graphs"]
    # host 15.6 µs − orchestration 15.42 − launch residual 2·(5 − 4.71) → no host rest;
    # one graph launch = T_sys 4.71 µs > device 0.2 µs → the step becomes 4.71 µs (was 15.6 µs).
    assert graphs["host_rest_us"] == pytest.approx(0.0, abs=1e-6)
    assert graphs["projected_step_us"] == pytest.approx(4.71)
    assert graphs["eager_step_us"] == pytest.approx(15.6)
    assert result["floor_source"] == "published:H100"
    cpu = result["phases"]["decode"]["cpu_speedup"]
    assert cpu["projected_step_us"] == pytest.approx(15.6 - cpu["exposed_us"] * 0.2)
