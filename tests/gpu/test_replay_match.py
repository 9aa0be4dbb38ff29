"""Kernel chains, replay planning, the four matching tiers and in-trace vs isolated."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from taxbreak.capture.replay import mark_failed, plan_replay, run_replay
from taxbreak.capture.replay_compare import add_python_layer, compare, dispatch_base_us
from taxbreak.capture.replay_match import kernel_chains, match_replay, replay_samples, unique_kernels
from taxbreak.cli.main import main

from .planted import kernel, launch, op, tables

MM = dict(input_dims="[[4, 8], [8, 16]]", input_types='["float", "float"]',
          input_strides="[[8, 1], [1, 8]]", concrete_inputs='["", ""]')
ADD = dict(input_dims="[[4, 16], [4, 16], []]", input_types='["float", "float", "Scalar"]',
           input_strides="[[16, 1], [16, 1], []]", concrete_inputs='["", "", "1"]')
NZ = dict(input_dims="[[4, 16]]", input_types='["bool"]', input_strides="[[16, 1]]", concrete_inputs='[""]')


def full_trace():
    """Two steps of mm (cuBLAS) + add + nonzero, and one launch outside any op."""
    host, api, dev = [], [], []
    corr = 0
    for step, t0 in enumerate((0, 1_000_000)):
        host.append(op("aten::linear", t0, 100_000))
        host.append(op("aten::mm", t0 + 1_000, 50_000, **MM))
        host.append(op("aten::add", t0 + 200_000, 20_000, **ADD))
        host.append(op("aten::nonzero", t0 + 300_000, 20_000, **NZ))
        for start, name, dur, delay in ((t0 + 11_000 + step * 2_000, "cublasGemmKernel", 30_000, 6_000),
                                        (t0 + 203_000, "vectorized_add_kernel", 2_000, 5_000),
                                        (t0 + 304_000, "nonzero_kernel", 1_000, 5_000),
                                        (t0 + 500_000, "stray_kernel", 1_000, 5_000)):
            corr += 1
            api.append(launch(corr, start))
            dev.append(kernel(corr, start + delay, name, dur_ns=dur))
    return tables(host=host, api=api, device=dev)


def test_kernel_chains_exact():
    chain = kernel_chains(full_trace()).sort_values("kernel_start_ns")
    first = chain.iloc[:4]
    assert first["op_name"].tolist() == ["aten::mm", "aten::add", "aten::nonzero", None]
    assert first["t_dispatch_ns"].tolist()[:3] == [10_000, 3_000, 4_000]
    assert np.isnan(first["t_dispatch_ns"].iloc[3])
    assert first["t_launch_ns"].tolist() == [6_000, 5_000, 5_000, 5_000]


def test_unique_kernels_frequency_and_means():
    uk = unique_kernels(kernel_chains(full_trace())).set_index("kernel_name")
    assert uk.loc["cublasGemmKernel", "frequency"] == 2
    assert uk.loc["cublasGemmKernel", "dispatch_trace_us"] == pytest.approx(11.0)  # (10 + 12) / 2
    assert uk.loc["cublasGemmKernel", "dur_us"] == pytest.approx(30.0)
    assert uk.loc["stray_kernel", "op_name"] == ""


def test_plan_lists_skipped_ops_with_reasons():
    plan = plan_replay(full_trace())
    assert [r.name for r in plan.records] == ["aten::mm", "aten::add"]
    skipped = plan.skipped().set_index("op_name")
    assert "data-dependent" in skipped.loc["aten::nonzero", "reason"]
    assert skipped.loc["(no ATen op)", "reason"] == "launch outside any ATen op"
    assert skipped.loc["(no ATen op)", "frequency"] == 2


def replay_trace(ranges):
    """ranges: list of (op_index, iteration, [(kernel name, dispatch_ns, launch_ns, grid)])."""
    host, api, dev = [], [], []
    corr, t = 0, 0
    for op_index, it, kernels in ranges:
        host.append(op(f"taxbreak/replay/{op_index}/{it}", t, 90_000, kind="annotation"))
        for name, dispatch, delay, grid in kernels:
            corr += 1
            api.append(launch(corr, t + dispatch))
            dev.append(kernel(corr, t + dispatch + delay, name, grid=grid))
        t += 100_000
    return tables(host=host, api=api, device=dev)




def _targets(rows):
    import pandas as pd

    base = {"grid_x": 1, "grid_y": 1, "grid_z": 1, "block_x": 128, "block_y": 1, "block_z": 1,
            "registers": 32, "shared_mem_bytes": 0}
    return pd.DataFrame([{**base, **r} for r in rows])


def test_tier_1_signature_then_name_breaks_ties():
    trace = replay_trace([(0, i, [("elementwise_a", 8_000, 5_000, (1, 1, 1)),
                                  ("elementwise_b", 20_000, 6_000, (1, 1, 1))]) for i in range(3)])
    targets = _targets([{"kernel_id": 10, "op_index": 0, "kernel_name": "elementwise_b"}])
    m = match_replay(targets, replay_samples(trace)).iloc[0]
    assert m["match_tier"] == 1 and m["samples"] == 3 and m["ambiguous_ranges"] == 0
    assert m["dispatch_replay_us"] == pytest.approx(20.0) and m["launch_replay_us"] == pytest.approx(6.0)


def test_ambiguous_when_two_kernels_share_the_best_tier():
    trace = replay_trace([(0, i, [("k_a", 8_000, 5_000, (1, 1, 1)), ("k_b", 20_000, 6_000, (1, 1, 1))])
                          for i in range(2)])
    targets = _targets([{"kernel_id": 1, "op_index": 0, "kernel_name": "k_c"}])  # same signature, other name
    m = match_replay(targets, replay_samples(trace)).iloc[0]
    assert m["match_tier"] == 1 and m["ambiguous_ranges"] == 2
    assert m["dispatch_replay_us"] == pytest.approx(8.0)  # first launched is kept


@pytest.mark.parametrize("target_name,replayed_name,grid,tier", [
    ("gemm_v1", "gemm_v1", (2, 1, 1), 2),               # name, other launch config
    ("gemm", "sm90_gemm_bf16_v2", (2, 1, 1), 3),         # substring
    ("autotuned_x", "other_kernel", (2, 1, 1), 4),       # the op's most frequent kernel
])
def test_lower_tiers(target_name, replayed_name, grid, tier):
    trace = replay_trace([(0, i, [(replayed_name, 9_000, 5_500, grid)]) for i in range(4)])
    targets = _targets([{"kernel_id": 3, "op_index": 0, "kernel_name": target_name}])
    m = match_replay(targets, replay_samples(trace)).iloc[0]
    assert m["match_tier"] == tier and m["samples"] == 4
    assert m["launch_replay_us"] == pytest.approx(5.5) and m["launch_std_us"] == pytest.approx(0.0)


def test_kernels_outside_replay_ranges_and_other_ops_are_ignored():
    trace = replay_trace([(0, 0, [("k", 8_000, 5_000, (1, 1, 1))]), (1, 0, [("k", 30_000, 9_000, (1, 1, 1))])])
    samples = replay_samples(trace)
    assert sorted(samples["op_index"].tolist()) == [0, 1]
    targets = _targets([{"kernel_id": 0, "op_index": 1, "kernel_name": "k"}])
    m = match_replay(targets, samples).iloc[0]
    assert m["dispatch_replay_us"] == pytest.approx(30.0) and m["samples"] == 1


def test_compare_in_trace_vs_isolated_exact():
    plan = plan_replay(full_trace())
    kernels = plan.kernels.set_index("kernel_name")
    mm_id, add_id = int(kernels.loc["cublasGemmKernel", "kernel_id"]), int(kernels.loc["vectorized_add_kernel", "kernel_id"])
    import pandas as pd

    matched = pd.DataFrame([
        {"kernel_id": mm_id, "samples": 50, "dispatch_replay_us": 9.0, "launch_replay_us": 6.5, "match_tier": 1,
         "ambiguous_ranges": 0},
        {"kernel_id": add_id, "samples": 50, "dispatch_replay_us": 2.0, "launch_replay_us": 5.0, "match_tier": 2,
         "ambiguous_ranges": 1},
    ])
    table, summary = compare(plan.kernels, matched, floor_us=4.5, floor_source="given")
    t = table.set_index("kernel_name")
    assert bool(t.loc["cublasGemmKernel", "is_library"]) and not bool(t.loc["vectorized_add_kernel", "is_library"])
    # isolated: base = median native dispatch = add 2.0 (nonzero/stray keep their in-trace 4.0 / NaN)
    iso = summary["isolated"]
    assert iso["dispatch_base_us"] == pytest.approx(3.0)  # median(2.0 add, 4.0 nonzero fallback)
    assert t.loc["cublasGemmKernel", "ct_isolated_us"] == pytest.approx(6.0)  # 9 - 3
    assert t.loc["cublasGemmKernel", "kt_framework_isolated_us"] == pytest.approx(2.0)  # 6.5 - 4.5
    assert t.loc["nonzero_kernel", "kt_framework_isolated_us"] == pytest.approx(0.0)  # fallback T_launch = T_sys
    # in-trace: native dispatch 3.0 (add), 4.0 (nonzero) -> base 3.5; mm dispatch mean 11 -> ΔCT 7.5
    assert summary["in_trace"]["dispatch_base_us"] == pytest.approx(3.5)
    assert t.loc["cublasGemmKernel", "ct_trace_us"] == pytest.approx(7.5)
    assert summary["in_trace"]["floor_total_us"] == pytest.approx(8 * 4.5)
    assert summary["device_active_us"] == pytest.approx(2 * 30 + 2 * 2 + 2 * 1 + 2 * 1)
    assert summary["kernels_replayed"] == 2 and summary["kernels_fallback"] == 2
    assert summary["launches_replayed"] == 4 and summary["match_tiers"] == {"1": 1, "2": 1}
    assert summary["ambiguous_ranges"] == 1 and summary["includes_t_py"] is False
    for label in ("in_trace", "isolated"):
        assert 0 < summary[label]["hdbi_dispatch"] < 1


def test_compare_without_floor_reports_none_not_zero():
    plan = plan_replay(full_trace())
    import pandas as pd

    table, summary = compare(plan.kernels, pd.DataFrame(columns=["kernel_id", "samples", "dispatch_replay_us",
                                                                 "launch_replay_us", "match_tier",
                                                                 "ambiguous_ranges"]), None)
    assert summary["in_trace"]["floor_total_us"] is None and summary["in_trace"]["hdbi_dispatch"] is None
    assert summary["isolated"]["kt_framework_us"] is None and summary["kernels_replayed"] == 0


def test_dispatch_base_ignores_library_and_tiny_values():
    assert dispatch_base_us(np.array([0.05, 3.0, 5.0, 100.0]), np.array([False, False, False, True])) == 4.0
    assert dispatch_base_us(np.array([9.0]), np.array([True])) is None


def test_mark_failed_moves_ops_to_skipped():
    plan = plan_replay(full_trace())
    moved = mark_failed(plan, {0: "RuntimeError: device-side failure"})
    assert "aten::mm" in moved.skipped()["op_name"].tolist()
    assert (moved.kernels["op_index"] >= 0).sum() == 1


def test_run_replay_loop_on_cpu_writes_one_range_per_call(tmp_path):
    plan = plan_replay(full_trace())
    failed = run_replay(plan, tmp_path / "replay.json", device="cpu", warmup=2, runs=5)
    assert failed == {}
    events = json.loads((tmp_path / "replay.json").read_text())["traceEvents"]
    names = [e["name"] for e in events if str(e.get("name", "")).startswith("taxbreak/replay/")]
    assert sorted(names) == sorted(f"taxbreak/replay/{o}/{i}" for o in range(2) for i in range(5))
    ops = [e["name"] for e in events if e.get("cat") == "cpu_op"]
    assert ops.count("aten::mm") == 2 + 5 + 1  # rebuild check + warmup + runs


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU path")
def test_cli_replay_without_gpu(tmp_path):
    result = CliRunner().invoke(main, ["replay", str(tmp_path)])
    assert result.exit_code == 1
    assert result.output.startswith("error[device.unavailable]: no CUDA device is available")


kernel_st = st.tuples(st.sampled_from(["k_a", "k_b", "k_c", "gemm_x"]), st.integers(1, 4),
                      st.integers(1_000, 40_000), st.integers(3_000, 9_000))


@settings(max_examples=40, deadline=None)
@given(others=st.lists(kernel_st, max_size=3), dispatch=st.integers(1_000, 40_000),
       delay=st.integers(3_000, 9_000), runs=st.integers(1, 4))
def test_an_exact_target_is_always_found_with_its_own_timings(others, dispatch, delay, runs):
    """Whatever else the op launches, the target's own kernel (same name and
    signature, grid 9 that no other kernel has) is matched in tier 1."""
    per_range = [("target_kernel", dispatch, delay, (9, 1, 1))] + [(n, d, l, (g, 1, 1)) for n, g, d, l in others]
    trace = replay_trace([(0, i, sorted(per_range, key=lambda k: k[1])) for i in range(runs)])
    targets = _targets([{"kernel_id": 5, "op_index": 0, "kernel_name": "target_kernel", "grid_x": 9}])
    m = match_replay(targets, replay_samples(trace)).iloc[0]
    assert m["match_tier"] == 1 and m["samples"] == runs and m["ambiguous_ranges"] == 0
    assert m["dispatch_replay_us"] == pytest.approx(dispatch / 1000) and m["launch_replay_us"] == pytest.approx(delay / 1000)


def test_add_python_layer_exact():
    summary = {"device_active_us": 60.0, "in_trace": {"orchestration_dispatch_us": 30.0},
               "isolated": {"orchestration_dispatch_us": 20.0}}
    add_python_layer(summary, 10.0, analysis_hdbi=0.6)
    assert summary["in_trace"]["orchestration_us"] == 40.0 and summary["in_trace"]["hdbi"] == pytest.approx(0.6)
    assert summary["isolated"]["hdbi"] == pytest.approx(60 / 90) and summary["includes_t_py"] is True
    add_python_layer(summary, None)
    assert summary["isolated"]["hdbi"] is None and summary["includes_t_py"] is False


def test_malformed_recorded_inputs_are_listed_not_fatal():
    trace = tables(host=[op("aten::mm", 0, 50_000, input_dims="[[4, 8]", input_types='["float"]')],
                   api=[launch(1, 1_000)], device=[kernel(1, 6_000, "gemm")])
    plan = plan_replay(trace)
    assert plan.records == []
    assert "not JSON lists" in plan.skipped().iloc[0]["reason"]
