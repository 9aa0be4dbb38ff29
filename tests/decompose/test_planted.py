"""The decomposer recovers every planted component exactly, from canonical tables."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from taxbreak.decompose import analyze
from taxbreak.synth.planted import PlantedLaunch, PlantedOp, PlantedSpec, PlantedStep, build, random_spec

from idle_checks import check_library_cause, measured_cause_sum
from planted_expect import compare_kernels, compare_partition, expected_idle, got_idle

H100_FLOOR_NS = 4710


def _one_op_spec() -> PlantedSpec:
    launches = [
        PlantedLaunch("triton_poi_fused_add_0", 2_000, 0, 3_000, 9_000, 40_000, False),
        PlantedLaunch("sm90_xmma_gemm_bf16_cublasLt", 1_000, 5_000, 4_000, 6_000, 80_000, True),
        PlantedLaunch("void at::native::vectorized_elementwise_kernel<4>", 4_000, 0, 2_500, 3_000, 5_000, False),
    ]
    return PlantedSpec([PlantedStep("prefill", [PlantedOp("linear", "aten::addmm", 7_000, launches)])])


def test_small_planted_trace_exact_values():
    planted = build(_one_op_spec())
    a = analyze(planted.tables)
    k = a.kernels.sort_values("correlation").reset_index(drop=True)
    # T_dispatch: 2000 from the op start; 6000 (1000 + 5000 library) after launch 1; 4000 after launch 2
    assert k["t_dispatch_ns"].tolist() == [2_000, 6_000, 4_000]
    # base = median(2000, 4000) = 3000; ΔCT = 6000 - 3000 for the cuBLAS kernel
    assert a.summary["all"]["t_dispatch_base_us"] == 3.0
    assert k["ct_ns"].tolist() == [0, 3_000, 0]
    assert k["ft_python_ns"].tolist() == [7_000, 0, 0]  # T_py once per op invocation
    assert k["ft_dispatch_ns"].tolist() == [2_000, 3_000, 4_000]
    # one stream: kernel 2 waits 40 µs behind kernel 1 (40 µs long), kernel 3 118 µs behind both
    assert k["t_launch_ns"].tolist() == [13_710, 50_710, 125_710]
    assert k["t_floor_ns"].tolist() == [4_710, 4_710, 4_710]
    assert k["queue_wait_ns"].tolist() == [0, 40_000, 118_000]
    assert k["launch_latency_ns"].tolist() == [9_000, 6_000, 3_000]  # the planted latency, queue excluded
    s = a.summary["all"]
    assert s["framework_us"] == 16.0 and s["library_us"] == 3.0 and s["launch_floor_us"] == 14.13
    assert s["orchestration_us"] == 33.13
    assert s["device_active_us"] == 125.0
    assert s["hdbi"] == round(125.0 / (125.0 + s["orchestration_us"]), 6) and s["hdbi_reason"] is None
    assert s["floor_source"] == "published:H100"
    assert s["tklqt_sum_us"] == 190.13
    assert s["queue_wait_sum_us"] == 158.0  # a plain sum of per-kernel waits ...
    assert s["queue_wait_union_us"] == 126.0  # ... and the time anything waited: [13.71, 139.71] µs after launch 1
    assert s["queue_wait_median_us"] == 40.0
    assert s["launch_latency_us"] == 18.0 and s["launch_graph_us"] == 0.0
    assert s["chain_coverage"] == 1.0


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), steps=st.integers(1, 4), ops=st.integers(1, 6))
def test_planted_components_recovered_exactly(seed, steps, ops):
    planted = build(random_spec(np.random.default_rng(seed), steps=steps, ops=ops))
    a = analyze(planted.tables)
    compare_kernels(a.kernels, planted.kernels, H100_FLOOR_NS)
    compare_partition(a.host_partition, planted.steps, library_ranges=False)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_planted_with_library_ranges(seed):
    spec = random_spec(np.random.default_rng(seed), steps=2, ops=5, with_library_ranges=True)
    planted = build(spec)
    a = analyze(planted.tables)
    compare_kernels(a.kernels, planted.kernels, H100_FLOOR_NS)
    compare_partition(a.host_partition, planted.steps, library_ranges=True)
    lib = planted.kernels["is_library"]
    assert a.summary["meta"]["library_ranges"] is True
    # measured library time = the cuBLAS ranges (library time + the launch call inside them)
    assert a.summary["all"]["library_measured_us"] is not None or not lib.any()


def test_floor_override_and_steps():
    planted = build(random_spec(np.random.default_rng(3), steps=3, ops=2))
    a = analyze(planted.tables, floor_us=2.0, tokens=3)
    compare_kernels(a.kernels, planted.kernels, 2_000)
    s = a.summary
    assert s["all"]["floor_source"] == "given"
    # the device runs on after the last step's host range: that tail is the "between" pseudo-phase
    assert list(s["phases"]) == ["prefill", "decode", "between"]
    assert s["phases"]["between"]["kernels"] == 0 and s["phases"]["between"]["wall_us"] > 0
    assert [row["phase"] for row in s["steps"]] == ["prefill", "decode", "decode", "between"]
    assert s["all"]["kernels_per_token"] == round(s["all"]["kernels"] / 3, 3)
    assert s["meta"]["step_scheme"] == "taxbreak"
    assert sum(r["kernels"] for r in s["steps"]) == s["all"]["kernels"]


def test_t_py_unmeasured_without_python_frames():
    planted = build(random_spec(np.random.default_rng(5), steps=1, ops=3))
    he = planted.tables.host_events
    kind = he.column("kind").cast(pa.string())
    planted.tables.host_events = he.filter(pc.not_equal(kind, "python"))
    a = analyze(planted.tables)
    s = a.summary
    assert s["all"]["framework_python_us"] is None  # not measured, never 0
    assert s["meta"]["t_py_measured"] is False
    assert s["diagnostics"]["decompose.t_py_unmeasured"]["count"] == 1
    assert a.kernels["t_py_ns"].isna().all()
    disp = a.kernels["ft_dispatch_ns"].astype("int64")
    assert (a.kernels["ft_ns"].astype("int64") == disp).all()


def _window(a) -> tuple[int, int]:
    t = a.tables
    starts = [t.host_events.column("start_ns").to_numpy(), t.device_activities.column("start_ns").to_numpy()]
    ends = [t.host_events.column("start_ns").to_numpy() + t.host_events.column("dur_ns").to_numpy(),
            t.device_activities.column("start_ns").to_numpy() + t.device_activities.column("dur_ns").to_numpy()]
    api = t.api_calls
    starts.append(api.column("start_ns").to_numpy())
    ends.append(api.column("start_ns").to_numpy() + api.column("dur_ns").to_numpy())
    return int(min(x.min() for x in starts if len(x))), int(max(x.max() for x in ends if len(x)))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), steps=st.integers(1, 4), ops=st.integers(1, 6),
       streams=st.integers(1, 3), graphs=st.booleans())
def test_queue_wait_and_graphs_recovered_exactly(seed, steps, ops, streams, graphs):
    planted = build(random_spec(np.random.default_rng(seed), steps=steps, ops=ops, streams=streams, graphs=graphs))
    a = analyze(planted.tables)
    compare_kernels(a.kernels, planted.kernels, H100_FLOOR_NS)
    compare_partition(a.host_partition, planted.steps, library_ranges=False)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), steps=st.integers(1, 4), ops=st.integers(1, 5),
       streams=st.integers(1, 2), graphs=st.booleans())
def test_idle_attributed_exactly(seed, steps, ops, streams, graphs):
    planted = build(random_spec(np.random.default_rng(seed), steps=steps, ops=ops, streams=streams, graphs=graphs))
    a = analyze(planted.tables)
    assert a.summary["all"]["floor_us"] == H100_FLOOR_NS / 1000  # the planted GPU's published floor
    assert got_idle(a) == expected_idle(planted, _window(a), H100_FLOOR_NS)
    # the idle launch-latency pieces are the kernels' exposed launch latency over the trace (per step
    # they can differ: an idle piece belongs to the step its time falls in, a kernel to its launch's)
    s = a.summary["all"]
    assert s["idle_by_cause_us"]["launch_latency"] == s["launch_latency_us"]
    # the causes add up to the device's idle time in every scope, and busy + idle = elapsed
    for scope in [a.summary["all"], *a.summary["phases"].values(), *a.summary["steps"]]:
        check_library_cause(scope["idle_by_cause_us"], a.summary["meta"]["library_ranges"])
        assert round(measured_cause_sum(scope["idle_by_cause_us"]), 3) == scope["device_idle_us"]
        dev = scope["devices"]["0"]
        assert round(dev["busy_us"] + dev["idle_us"], 3) == scope["wall_us"]


def test_graph_launch_host_time_is_launch_path():
    launches = [PlantedLaunch("triton_poi_fused_add_0", 2_000, 0, 3_000, 1_000, 40_000, False),
                PlantedLaunch("void graph_node_kernel", 1_000, 0, 1_572_000, 2_000, 5_000, False, graph_kernels=4)]
    planted = build(PlantedSpec([PlantedStep("decode", [PlantedOp("step", "aten::add", 7_000, launches)])]))
    a = analyze(planted.tables)
    k = a.kernels.sort_values("start_ns").reset_index(drop=True)
    assert k["kt_graph_ns"].tolist() == [0, 1_572_000 - 4_710, 0, 0, 0]
    assert k["kt_floor_ns"].tolist() == [4_710, 4_710, 0, 0, 0]  # one T_sys per launch call
    s = a.summary["all"]
    assert s["launches"] == 2 and s["launch_graph_us"] == 1_567.29
    assert s["orchestration_us"] == round(s["framework_us"] + s["library_us"] + 2 * 4.71 + 1_567.29, 3)
    # the graph's later nodes wait behind its earlier ones: queue, not launch latency
    assert k["launch_latency_ns"].tolist()[2:] == [0, 0, 0]
    assert (k["queue_wait_ns"][2:] == k["t_launch_ns"][2:]).all()
