"""Planted traces for three trace-health rules, with exact expected values: CUDA-graph capture
(captured launches are not orphans), device busy time split by kind (copies apart from kernels)
and warm-up inside the profiled window (slow first calls reported apart)."""
from __future__ import annotations

import pytest

from taxbreak.decompose import analyze
from taxbreak.report.advice import advise
from taxbreak.synth.planted import PlantedLaunch, PlantedOp, PlantedSpec, PlantedStep, build

NATIVE = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>"
CUDNN = "cudnn_infer_ampere_scudnn_128x64_relu_small_nn_v1"
STEADY_STATE_WORDS = ("torch.compile", "fusion", "ΔFT", "ΔCT", "CUDA Graphs for decode")


def _launch(**kw) -> PlantedLaunch:
    base = dict(kernel=NATIVE, dispatch_ns=2_000, library_ns=0, launch_dur_ns=4_000, latency_ns=1_000,
                kernel_dur_ns=10_000, is_library=False)
    return PlantedLaunch(**(base | kw))


def _op(n: int = 1, aten: str = "aten::add", py_ns: int = 3_000, **kw) -> PlantedOp:
    return PlantedOp("torch/nn/modules/linear.py(125): forward", aten, py_ns, [_launch(**kw) for _ in range(n)])


# --- CUDA-graph capture -------------------------------------------------------------------------

def _capture_spec() -> PlantedSpec:
    """One executed launch and one orphan launch, then a stream capture of 6 launches (begin/end capture,
    instantiate) and a capture_bs_8 annotation around 2 more: 8 of 10 launch calls captured."""
    return PlantedSpec([PlantedStep("decode", [_op(), _op(no_device=True)]),
                        PlantedStep("decode", [_op(2), _op(2), _op(2)], capture="stream"),
                        PlantedStep("decode", [_op(), _op()], capture="annotation")])


@pytest.fixture(scope="module")
def capture():
    return analyze(build(_capture_spec()).tables)


def test_captured_launches_are_counted_apart_from_orphans(capture):
    s = capture.summary["all"]
    assert (s["launches"], s["captured_launches"], s["orphan_launches"], s["kernels"]) == (10, 8, 1, 1)
    assert [step["captured_launches"] for step in capture.summary["steps"]] == [0, 6, 2]
    assert [step["orphan_launches"] for step in capture.summary["steps"]] == [1, 0, 0]
    diags = capture.summary["diagnostics"]
    assert diags["link.captured_launch"]["count"] == 8 and diags["link.orphan_launch"]["count"] == 1


def test_meta_says_the_trace_records_capture(capture):
    assert capture.summary["meta"]["graph_capture"] == {
        "captured_launches": 8, "launch_calls": 10, "captured_share": 0.8, "capture_windows": 2,
        "graph_instantiations": 1, "executed_kernels": 1, "dominant": True}


def test_capture_advice_gives_no_steady_state_advice(capture):
    advice = advise(capture.summary)
    assert len(advice) == 1
    assert advice[0].finding.startswith("this trace records CUDA-graph capture, not execution: 8 of 10 launch "
                                        "calls (80%)")
    assert "profile replay steps after capture" in advice[0].action
    for word in STEADY_STATE_WORDS:
        assert word not in advice[0].finding + advice[0].action.split(";")[0], word


def test_a_few_captured_launches_do_not_take_over():
    # 2 captured of 7 launch calls, 5 kernels ran: counted, but the trace is a steady-state trace
    spec = PlantedSpec([PlantedStep("decode", [_op(5)]), PlantedStep("decode", [_op(2)], capture="stream")])
    a = analyze(build(spec).tables)
    cap = a.summary["meta"]["graph_capture"]
    assert (cap["captured_launches"], cap["launch_calls"], cap["dominant"]) == (2, 7, False)
    assert a.summary["all"]["orphan_launches"] == 0
    assert not advise(a.summary)[0].finding.startswith("this trace records CUDA-graph capture")


def test_a_launch_with_device_work_is_never_captured():
    # the same launches without capture calls: nothing captured, the orphan stays an orphan
    spec = PlantedSpec([PlantedStep("decode", [_op(), _op(no_device=True)])])
    s = analyze(build(spec).tables).summary
    assert (s["all"]["captured_launches"], s["all"]["orphan_launches"]) == (0, 1)
    assert s["meta"]["graph_capture"]["capture_windows"] == 0


# --- copy-bound devices -------------------------------------------------------------------------

def _copy_spec(copy_stream: int | None = None) -> PlantedSpec:
    """Per op: a 5 ms host-to-device copy of 64 MB, then a 20 µs kernel (one op per step, two steps)."""
    ops = [PlantedOp("torch/nn/modules/linear.py(125): forward", "aten::to", 2_000,
                     [_launch(kernel="Memcpy HtoD (Pageable -> Device)", kernel_dur_ns=5_000_000, copy_bytes=64 << 20,
                              stream=copy_stream),
                      _launch(kernel_dur_ns=20_000)]) for _ in range(2)]
    return PlantedSpec([PlantedStep("decode", [op]) for op in ops])


def test_busy_time_split_by_kind_exactly():
    a = analyze(build(_copy_spec()).tables)
    s = a.summary["all"]
    # one stream: copies and kernels never overlap, busy = kernels + copies
    assert (s["device_copy_busy_us"], s["device_kernel_busy_us"], s["device_memset_busy_us"]) == (10_000.0, 40.0, 0.0)
    assert s["device_busy_us"] == 10_040.0
    dev = s["devices"]["0"]
    assert (dev["device_copy_busy_us"], dev["device_kernel_busy_us"], dev["busy_us"]) == (10_000.0, 40.0, 10_040.0)
    for step in a.summary["steps"]:  # cut by time like busy_us: each step's own parts
        d = step["devices"]["0"]
        assert d["device_kernel_busy_us"] + d["device_copy_busy_us"] == d["busy_us"]


def test_overlapping_kinds_are_unions_not_a_partition():
    # the copy on its own stream runs beside the previous step's kernel: kinds overlap
    planted = build(_copy_spec(copy_stream=8))
    s = analyze(planted.tables).summary["all"]
    copies = planted.kernels[planted.kernels["kernel"].str.startswith("Memcpy")]
    assert s["device_copy_busy_us"] == 10_000.0 and s["device_kernel_busy_us"] == 40.0
    # both kernels run inside the copies: busy is the copies' union alone, less than the sum of the kinds
    assert len(copies) == 2 and s["device_busy_us"] == 10_000.0


def test_copy_bound_verdict_and_advice():
    advice = advise(analyze(build(_copy_spec()).tables).summary)
    assert advice[0].finding.startswith("copy-bound:")
    assert "10.0 ms against 40.0 µs of kernels" in advice[0].finding
    assert "pinned host memory" in advice[0].action and "side stream" in advice[0].action
    assert "look at the kernels themselves" not in advice[0].action


# --- warm-up inside the profiled window ---------------------------------------------------------

WARMUP_LIBRARY_NS = 5_000_000  # the first conv's cuDNN autotuning


def _warmup_spec() -> PlantedSpec:
    """Four steps of conv + add; the first conv spends 5 ms in cuDNN before its launch, later ones 2 µs."""
    def conv(library_ns: int) -> PlantedOp:
        return _op(aten="aten::conv2d", kernel=CUDNN, is_library=True, library_ns=library_ns)
    return PlantedSpec([PlantedStep("decode", [conv(WARMUP_LIBRARY_NS if i == 0 else 2_000), _op()])
                        for i in range(4)])


@pytest.fixture(scope="module")
def warm():
    return analyze(build(_warmup_spec()).tables)


def test_slow_first_call_is_warmup_with_exact_values(warm):
    w = warm.summary["warmup"]
    # conv2d inclusive host time: dispatch 2 µs + library + launch 4 µs + tail 0.5 µs
    assert w["ops"] == [{"op_name": "aten::conv2d", "first_call_us": 5_006.5, "later_median_us": 8.5}]
    assert (w["calls"], w["kernels"], w["host_us"], w["init_calls"]) == (1, 1, 5_006.5, 0)
    # base = 2 µs (native dispatch): ΔCT of the first conv = 5,002 - 2 µs; ΔFT = T_py 3 µs + base 2 µs
    assert (w["library_us"], w["framework_us"]) == (5_000.0, 5.0)
    s = warm.summary["all"]
    assert s["library_us"] == 5_000.0 + 3 * 2.0  # the decomposition itself is unchanged
    assert w["library_share"] == round(5_000.0 / 5_006.0, 6)
    k = warm.kernels
    first = k[k["name"] == CUDNN].sort_values("start_ns").iloc[0]
    orch = sum(int(first[c]) for c in ("ft_ns", "ct_ns", "kt_floor_ns", "kt_graph_ns")) / 1000.0
    assert w["orchestration_us"] == orch and w["orchestration_share"] == round(orch / s["orchestration_us"], 6)


def test_warmup_advice_sets_warmup_aside(warm):
    advice = advise(warm.summary)
    found = [a for a in advice if a.finding.startswith("warm-up inside the profiled window")]
    assert len(found) == 1 and "aten::conv2d" in found[0].finding and "profile after warm-up" in found[0].action
    dominant = advice[-1]
    assert "warm-up calls set aside" in dominant.finding
    assert "CUDA-library translation" not in dominant.finding  # 5 ms of warm-up ΔCT is not the target


def test_even_calls_are_not_warmup():
    spec = PlantedSpec([PlantedStep("decode", [_op(aten="aten::conv2d", kernel=CUDNN, is_library=True,
                                                   library_ns=2_000_000), _op()]) for _ in range(3)])
    a = analyze(build(spec).tables)
    assert a.summary["warmup"]["calls"] == 0 and a.summary["warmup"]["orchestration_share"] == 0.0
    assert not any(x.finding.startswith("warm-up") for x in advise(a.summary))
