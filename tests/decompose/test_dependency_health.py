"""Dependency waits beyond the learned launch-latency bound, trace health, and advice that is
withheld or adjusted where the trace says so."""
from __future__ import annotations

from taxbreak.decompose import analyze
from taxbreak.report.advice import advise
from taxbreak.synth.planted import PlantedLaunch, PlantedOp, PlantedSpec, PlantedStep, build

FILL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>"
FLOOR_NS = 4_710


def _op(latency_ns: int, sync_after_ns: int = 0, py_ns: int = 2_000) -> PlantedOp:
    launch = PlantedLaunch(FILL, dispatch_ns=30_000, library_ns=0, launch_dur_ns=3_000, latency_ns=latency_ns,
                           kernel_dur_ns=1_000, is_library=False, sync_after_ns=sync_after_ns)
    return PlantedOp("torch/nn/functional.py(10): fill", "aten::fill_", py_ns, [launch])


def _sglang_decode():
    """25 launches onto an idle device start 20 µs after T_sys; one waits 463 ms while the host
    sits in a cudaStreamSynchronize right after its launch."""
    ops = [_op(20_000) for _ in range(12)] + [_op(463_000_000, sync_after_ns=463_100_000)] + \
          [_op(20_000) for _ in range(13)]
    return analyze(build(PlantedSpec([PlantedStep("decode", ops)])).tables, floor_us=FLOOR_NS / 1e3)


def test_a_wait_beyond_the_learned_bound_is_a_dependency_wait_named_by_its_call():
    a = _sglang_decode()
    meta, s = a.summary["meta"], a.summary["all"]
    assert meta["launch_latency_bound_us"] == {"0": 24.71}  # Q3 + 3·IQR of 25 × 24.71 µs and one outlier
    k = a.kernels.sort_values("start_ns")
    waiting = k[k["dependency_wait_ns"] > 0]
    assert len(waiting) == 1
    # S − max(L + bound, launch end) = (L + 4,710 + 463,000,000) − (L + 24,710)
    assert waiting["dependency_wait_ns"].tolist() == [462_980_000]
    assert waiting["launch_latency_ns"].tolist() == [20_000]
    assert meta["dependency_waits"] == [{"call": "cudaStreamSynchronize", "kernels": 1, "us": 462_980.0}]
    assert s["dependency_wait_us"] == 462_980.0 == s["idle_by_cause_us"]["dependency_wait"]
    assert s["launch_latency_us"] == 26 * 20.0  # ΔKT keeps only the plausible part
    advice = advise(a.summary)
    exposed = next(x for x in advice if "waited longest" in x.finding)
    assert "dependencies of issued kernels" in exposed.finding and "cudaStreamSynchronize" in exposed.finding
    assert "fewer launches do not shorten it" in exposed.action and "CUDA Graphs" not in exposed.action


def test_without_enough_idle_launches_no_bound_is_learned_and_nothing_moves():
    ops = [_op(20_000) for _ in range(5)] + [_op(463_000_000, sync_after_ns=463_100_000)]
    a = analyze(build(PlantedSpec([PlantedStep("decode", ops)])).tables, floor_us=FLOOR_NS / 1e3)
    assert a.summary["meta"]["launch_latency_bound_us"] == {"0": None}
    assert int(a.kernels["dependency_wait_ns"].sum()) == 0 and a.summary["meta"]["dependency_waits"] == []


def _offset_trace():
    """A constant 149 ms between every call and its work on an idle device (the vLLM clock offset):
    each op's Python runs just past the lag, so the device is idle at every launch."""
    ops = [_op(149_000_000 + 1_000 * i, py_ns=149_100_000) for i in range(15)]
    return analyze(build(PlantedSpec([PlantedStep("decode", ops)])).tables, floor_us=FLOOR_NS / 1e3)


def test_a_constant_host_device_offset_is_a_timeline_warning_and_withholds_the_advice():
    a = _offset_trace()
    timeline = next(c for c in a.summary["health"] if c["check"] == "timeline")
    assert timeline["status"] == "warn"
    assert "even the fastest 5% of launches onto an idle device started ≥ 149,005.4 µs" in timeline["detail"]
    assert "launch_latency" in timeline["affected_causes"]
    exposed = next(x for x in advise(a.summary) if "waited longest" in x.finding)
    assert "the kernel launch path" in exposed.finding
    assert exposed.action.startswith("advice withheld: the trace's timeline check warns")


def test_health_passes_on_a_clean_planted_trace_and_opens_every_output():
    a = _sglang_decode()
    status = {c["check"]: c["status"] for c in a.summary["health"]}
    assert status == {"links": "pass", "capture": "pass", "timeline": "pass", "window": "pass", "warmup": "pass",
                      "coverage": "pass", "library": "pass", "floor": "pass"}


def _summary(meta: dict, idle: dict) -> dict:
    total = sum(idle.values())
    s = {"kernels": 10, "framework_us": 10.0, "library_us": 5.0, "launch_floor_us": 45.0, "orchestration_us": 60.0,
         "hdbi": 0.5, "wall_us": 1_000.0, "device_idle_us": total, "idle_by_cause_us": idle,
         "devices": {"0": {"idle_us": total, "busy_us": 1_000.0 - total, "idle_by_cause_us": idle}}}
    return {"all": s, "meta": meta, "health": []}


def test_advice_never_asks_for_what_the_trace_already_does():
    graphs = advise(_summary({"graph_launch_calls": 3}, {"launch_latency": 300.0, "python": 10.0}))
    exposed = next(x for x in graphs if "waited longest" in x.finding)
    assert exposed.action.startswith("the trace already replays CUDA graphs (3 graph launches)")
    pinned = advise(_summary({"copies": 4, "pageable_copies": 0}, {"copy_issued": 300.0, "python": 10.0}))
    exposed = next(x for x in pinned if "waited longest" in x.finding)
    assert "pinned host memory" not in exposed.action.replace("already move pinned host memory", "")
    pageable = advise(_summary({"copies": 4, "pageable_copies": 2}, {"copy_issued": 300.0, "python": 10.0}))
    assert "use pinned host memory" in next(x for x in pageable if "waited longest" in x.finding).action


def test_no_host_layer_is_named_for_a_negligible_share_of_the_idle_time():
    advice = advise(_summary({}, {"nothing_pending": 9_700.0, "python": 300.0}))
    finding = next(x for x in advice if x.cause == "python")
    assert finding.finding == ("no host-side cause holds a material share of the device's idle time (the largest, "
                               "Python between ops, is 3.0%)")
    assert "torch.compile" not in finding.action


def test_hdbi_is_withheld_where_some_launches_lie_outside_any_framework_op():
    # three aten ops and one launch from a plain record_function range (an Nsight export's unlinked kernels)
    ops = [_op(20_000) for _ in range(3)] + [PlantedOp("fwd", "my_scope", 2_000, [PlantedLaunch(
        FILL, 30_000, 0, 3_000, 20_000, 1_000, False)])]
    a = analyze(build(PlantedSpec([PlantedStep("decode", ops)])).tables, floor_us=FLOOR_NS / 1e3)
    s = a.summary["all"]
    assert s["hdbi"] is None and s["hdbi_reason"].startswith("ΔFT not measured for 1 of 4 launch calls")
    assert s["hdbi_coverage"] == 0.75
    k = a.kernels[a.kernels["op_name"].notna()]
    active = int(k["dur_ns"].sum())
    orch = int((k["ft_ns"] + k["ct_ns"] + k["kt_floor_ns"] + k["kt_graph_ns"]).sum())
    assert s["hdbi_covered"] == round(active / (active + orch), 6)
    assert next(c for c in a.summary["health"] if c["check"] == "coverage")["status"] == "warn"


def test_a_stall_inside_t_py_is_not_per_op_python():
    # the ATen op runs inside 215 ms of Hugging Face video preprocessing: T_py is that frame's time
    stalled = PlantedOp("transformers/image_transforms.py(376): normalize", "aten::fill_", 215_000_000,
                        [PlantedLaunch(FILL, 30_000, 0, 3_000, 20_000, 1_000, False)])
    ops = [_op(20_000), stalled, _op(20_000)]
    a = analyze(build(PlantedSpec([PlantedStep("decode", ops)])).tables, floor_us=FLOOR_NS / 1e3)
    k = a.kernels.sort_values("start_ns").reset_index(drop=True)
    assert k["t_py_stall_ns"].tolist() == [0, 215_000_000, 0]
    assert k["t_py_ns"].tolist() == [2_000, 0, 2_000] and k["ft_python_ns"].tolist() == [2_000, 0, 2_000]
    assert a.summary["all"]["framework_python_us"] == 4.0


def test_on_a_device_bound_trace_the_host_layer_comes_with_how_little_there_is_to_win():
    advice = advise(_summary({}, {"python": 100.0, "nothing_pending": 20.0}))  # idle 12% of the elapsed time
    assert advice[0].finding.startswith("device-bound")
    exposed = next(x for x in advice if x.cause == "python")
    assert exposed.action.startswith("only worth it after the kernels (the device is busy; removing all of this "
                                     "idle time saves at most 120.0 µs summed over devices): reduce per-op")


def test_an_initialisation_stall_is_left_out_of_the_window_not_given_more_loader_workers():
    meta = {"host_stall_frames": [{"frame": "(untraced)", "stalls": 6, "us": 986_285.0, "idle_us": 0.0},
                                  {"frame": "MPI_Init", "stalls": 2, "us": 326_858.0, "idle_us": 0.0}]}
    exposed = next(x for x in advise(_summary(meta, {"host_stall": 900.0, "python": 10.0})) if x.cause)
    assert exposed.action.startswith("the largest stall is one-time initialisation (MPI_Init): leave it out")
    loader = {"host_stall_frames": [{"frame": "torch/utils/data/dataloader.py(631): __next__", "stalls": 3,
                                     "us": 6_660_000.0, "idle_us": 0.0}]}
    exposed = next(x for x in advise(_summary(loader, {"host_stall": 900.0, "python": 10.0})) if x.cause)
    assert "more DataLoader workers" in exposed.action


def test_stalls_are_ranked_by_the_gpu_idle_they_caused_and_one_the_device_never_waited_for_is_no_finding():
    frames = [{"frame": "## backward ##", "stalls": 2, "us": 482_695.0, "idle_us": 0.0},
              {"frame": "Optimizer.step#EMAOptimizer.step", "stalls": 3, "us": 21_998.0, "idle_us": 20_265.0}]
    advice = advise(_summary({"host_stall_frames": frames}, {"host_stall": 900.0, "python": 10.0}))
    stall = next(x for x in advice if x.finding.startswith("host stalls"))
    assert stall.finding.startswith("host stalls kept the GPU idle for 20.3 ms (summed over devices; top "
                                    "frames: Optimizer.step#EMAOptimizer.step 22.0 ms of host time, 20.3 ms of GPU idle")
    assert "## backward ##" not in stall.finding
    assert stall.action.startswith("a long host piece inside Optimizer.step#EMAOptimizer.step")
    idle_free = advise(_summary({"host_stall_frames": frames[:1]}, {"python": 900.0}))
    assert not any(x.finding.startswith("host stalls") for x in idle_free)
    untraced = {"host_stall_frames": [{"frame": "(untraced)", "stalls": 4, "us": 9_000.0, "idle_us": 800.0}]}
    exposed = next(x for x in advise(_summary(untraced, {"host_stall": 800.0, "python": 10.0})) if x.cause)
    assert exposed.action.startswith("the stalls are untraced host time: profile with Python frames")
