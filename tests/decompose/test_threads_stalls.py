"""Host time where it belongs (docs/method.md §7, §3.1): threads that launch nothing are kept
apart, blocked waits are not Python, the innermost host event decides the layer, and long
host stalls are their own label and idle cause. Planted traces, exact ns."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from taxbreak.decompose import analyze
from taxbreak.decompose.host_frames import BLOCKING_FRAME, STALL_FRAME
from taxbreak.decompose.views import is_dispatcher_op
from taxbreak.readers.nsys_nvtx import _is_op
from taxbreak.report.advice import advise
from taxbreak.synth.planted import PlantedFrame, PlantedLaunch, PlantedOp, PlantedSpec, PlantedStep, PlantedThread, build

from planted_expect import expected_idle, got_idle


def _launch(latency: int = 2_000, kernel: int = 20_000) -> PlantedLaunch:
    return PlantedLaunch("void at::native::vectorized_elementwise_kernel<4>", dispatch_ns=3_000, library_ns=0,
                         launch_dur_ns=5_000, latency_ns=latency, kernel_dur_ns=kernel, is_library=False)


def _op(py: int = 4_000, **kw) -> PlantedOp:
    return PlantedOp("torch/nn/modules/linear.py(125): forward", "aten::addmm", py, [_launch()], **kw)


TQDM = PlantedThread(99, (PlantedFrame("tqdm/_monitor.py(60): run", 400_000, "python",
                                       inner=("threading.py(607): wait", "threading.py(320): wait",
                                              "<built-in method acquire of _thread.lock object at 0x7f00>"),
                                       inner_label="blocked", inset_ns=1_000),))


def _partition_row(a, launches: bool) -> dict:
    part = a.host_partition
    rows = part[part["launches_work"] == launches]
    return {c: int(rows[c].sum()) for c in part.columns if c.endswith("_ns")}


def test_a_thread_that_launches_nothing_is_shown_apart_and_its_wait_is_blocked():
    """A tqdm monitor thread blocked in threading.wait for the whole trace: not in the
    summary's partition, its wait ``blocked`` (398 µs), its own Python 2 µs."""
    spec = PlantedSpec([PlantedStep("decode", [_op(), _op()])], other_threads=(TQDM,))
    planted = build(spec)
    a = analyze(planted.tables)
    s = a.summary["all"]
    main = planted.steps.iloc[0]
    assert round(s["host_thread_us"] * 1000) == main["wall"]
    assert round(s["host_python_us"] * 1000) == main["python"] == 2 * (4_000 + 300)
    assert s["host_blocked_us"] == 0.0
    assert s["host_nonlaunching_thread_us"] == 400.0
    assert s["host_nonlaunching_blocked_us"] == 398.0 and s["host_nonlaunching_python_us"] == 2.0
    other = _partition_row(a, launches=False)
    assert other["host_blocked_ns"] == 398_000 and other["host_python_ns"] == 2_000
    assert set(a.host_partition["launches_work"]) == {True, False}


def test_a_blocked_wait_on_the_launching_thread_is_its_own_label_and_idle_cause():
    """A 2 ms queue.get between two ops: ``blocked`` in the partition and in the idle account,
    never Python work (host work excludes it)."""
    wait = PlantedFrame("queue.py(180): get", 2_000_000, "blocked",
                        inner=("threading.py(320): wait", "<built-in method acquire of _thread.lock object at 0x1>"),
                        inner_label="blocked")
    spec = PlantedSpec([PlantedStep("decode", [_op(), _op(before=(wait,))])])
    planted = build(spec)
    a = analyze(planted.tables)
    s = a.summary["all"]
    assert round(s["host_blocked_us"] * 1000) == planted.steps.iloc[0]["blocked"] == 2_000_000
    assert round(s["host_python_us"] * 1000) == planted.steps.iloc[0]["python"]
    window = (int(a.idle["start_ns"].min()), int(a.idle["end_ns"].max()))
    assert got_idle(a) == expected_idle(planted, window, spec.floor_ns)
    # the previous op's 20 µs kernel still ran for the wait's first 19,910 ns
    assert got_idle(a)[(0, "blocked")] == 2_000_000 - 19_910
    part = a.host_partition.iloc[0]
    work = sum(int(part[c]) for c in ("host_python_ns", "host_dispatch_ns", "host_launch_api_ns"))
    assert part["exposed_orchestration_ns"] + part["hidden_orchestration_ns"] == work


def test_python_inside_a_custom_op_is_python_not_dispatch():
    """vllm::unified_attention_with_output holding a 741 µs Python frame before its first
    launch: the innermost event decides, so the 741 µs are Python, idle included."""
    op = PlantedOp("vllm/model_executor/layers/attention.py(300): forward", "vllm::unified_attention_with_output",
                   4_000, [_launch()], inner_py_ns=741_000)
    spec = PlantedSpec([PlantedStep("decode", [_op(), op])])
    planted = build(spec)
    a = analyze(planted.tables)
    row = a.host_partition.iloc[0]
    assert row["host_python_ns"] == planted.steps.iloc[0]["python"] == 2 * 4_300 + 741_000
    assert row["host_dispatch_ns"] == planted.steps.iloc[0]["dispatch"] == 2 * (3_000 + 500)
    window = (int(a.idle["start_ns"].min()), int(a.idle["end_ns"].max()))
    assert got_idle(a) == expected_idle(planted, window, spec.floor_ns)


def test_record_function_scopes_are_never_dispatcher_ops():
    assert not is_dispatcher_op("FSDP::pre_forward") and not is_dispatcher_op("FSDP::all_gather")
    assert is_dispatcher_op("vllm::unified_attention_with_output") and is_dispatcher_op("aten::mm")
    names = pa.array(["FSDP::all_gather, op_id = 3", "FSDP::pre_forward (blocks.3), op_id = 4",
                      "flash_attn::_flash_attn_forward, op_id = 5", "aten::mm, seq = 1, op_id = 6",
                      "profiler::_record_function_enter, op_id = 7"])
    assert _is_op(names).tolist() == [False, False, True, True, False]


def test_a_preprocessing_frame_is_a_host_stall_named_by_its_frame():
    """215 ms of image_transforms.normalize before an op: host_stall (not Python), in the
    partition, the idle account, the stall list and the advice (no torch.compile)."""
    norm = PlantedFrame("transformers/image_transforms.py(390): normalize", 215_000_000, "host_stall",
                        inner=("<built-in method astype of numpy.ndarray object at 0x2>",), inner_label="host_stall")
    spec = PlantedSpec([PlantedStep("decode", [_op(), _op(before=(norm,)), _op()])])
    planted = build(spec)
    a = analyze(planted.tables)
    s = a.summary["all"]
    assert round(s["host_stall_us"] * 1000) == planted.steps.iloc[0]["host_stall"] == 215_000_000
    assert round(s["host_python_us"] * 1000) == planted.steps.iloc[0]["python"] == 3 * 4_300
    window = (int(a.idle["start_ns"].min()), int(a.idle["end_ns"].max()))
    assert got_idle(a) == expected_idle(planted, window, spec.floor_ns)
    assert s["idle_by_cause_us"]["host_stall"] == 215_000.0 - 19.91  # the previous kernel ran 19.91 µs into it
    frames = a.summary["meta"]["host_stall_frames"]
    assert frames == [{"frame": "transformers/image_transforms.py(390): normalize", "stalls": 1, "us": 215_000.0,
                       "idle_us": 215_000.0 - 19.91}]
    advice = advise(a.summary)
    assert any("host stalls" in x.finding and "DataLoader" in x.action for x in advice)
    exposed = next(x for x in advice if "waited longest" in x.finding)
    assert "host stalls" in exposed.finding and "torch.compile" not in exposed.action.split(";")[0]


def test_a_long_python_piece_is_a_stall_by_the_trace_s_own_scale():
    """Python runs of 300 ns and 4 µs (median 2.15 µs) set the threshold at max(1 ms, 50 × 2.15 µs)
    = 1 ms: the contiguous Python/untraced run around a 3 ms frame (previous op's 300 ns Python
    tail, 1 µs untraced gap, the frame, the next op's 4 µs Python) is one stall; the run
    around a 0.9 ms frame (905.3 µs) is not. The partition keeps its labels (python,
    untraced); the device idle time inside the stall is ``host_stall``, not Python."""
    long = PlantedFrame("app/serve.py(88): postprocess", 3_000_000, "python")
    short = PlantedFrame("app/serve.py(88): postprocess", 900_000, "python")
    ops = [_op(), _op(), _op(before=(long,)), _op(), _op(before=(short,)), _op()]
    planted = build(PlantedSpec([PlantedStep("decode", ops)]))
    a = analyze(planted.tables)
    s, truth = a.summary["all"], planted.steps.iloc[0]
    assert a.summary["meta"]["host_stall_threshold_us"] == 1_000.0
    assert s["host_stall_us"] == 0.0 and round(s["host_python_us"] * 1000) == truth["python"]
    # idle: the previous kernel (20 µs) ends 19,910 ns after its launch call began, i.e. inside
    # the run: the run's idle part is everything after that kernel's end
    run = 300 + 1_000 + 3_000_000 + 4_000
    k = a.kernels.sort_values("start_ns")
    prev_end = int((k["start_ns"] + k["dur_ns"]).iloc[1])
    run_start = int(k["launch_start_ns"].iloc[2]) - 3_000 - 4_000 - 3_000_000 - 1_000 - 300
    expected_idle_ns = run - max(prev_end - run_start, 0)
    assert round(s["idle_by_cause_us"]["host_stall"] * 1000) == expected_idle_ns
    assert a.summary["meta"]["host_stall_frames"] == [
        {"frame": "app/serve.py(88): postprocess", "stalls": 1, "us": run / 1000, "idle_us": expected_idle_ns / 1000}]
    advice = advise(a.summary)
    assert any("app/serve.py(88): postprocess 3,005 µs" in x.finding for x in advice)


def test_without_python_runs_there_is_no_length_rule():
    """No Python time on the launching thread (frames exactly as long as their ops: the op is
    the inner one): no per-op scale, so a 5 ms untraced gap stays untraced."""
    ops = [_op(py=0, py_tail_ns=0), _op(py=0, py_tail_ns=0, gap_ns=5_000_000)]
    a = analyze(build(PlantedSpec([PlantedStep("decode", ops)])).tables)
    s = a.summary["all"]
    assert a.summary["meta"]["host_stall_threshold_us"] is None and a.summary["meta"]["host_stall_frames"] == []
    assert s["host_python_us"] == 0.0 and s["host_stall_us"] == 0.0
    assert s["host_untraced_us"] == 5_001.0


def test_name_rules_on_kineto_names():
    assert all(BLOCKING_FRAME.search(n) for n in (
        "threading.py(320): wait", "/usr/lib/python3.10/threading.py(1116): _wait_for_tstate_lock",
        "queue.py(180): get", "selectors.py(468): select", "<built-in function sleep>",
        "<built-in method acquire of _thread.lock object at 0x7f>", "multiprocessing/connection.py(253): recv",
        "<built-in method poll of select.epoll object at 0x1>"))
    assert not any(BLOCKING_FRAME.search(n) for n in (
        "torch/nn/modules/module.py(1501): _call_impl", "tqdm/_monitor.py(60): run", "aten::wait"))
    assert all(STALL_FRAME.search(n) for n in (
        "torch/utils/data/dataloader.py(631): __next__",
        "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__",
        "transformers/image_processing_utils.py(40): __call__", "scipy/ndimage/_interpolation.py(731): zoom",
        "PIL/Image.py(2100): resize", "transformers/tokenization_utils_base.py(2800): __call__"))
    assert not STALL_FRAME.search("torch/nn/modules/linear.py(125): forward")


def test_timeline_marks_the_thread_that_launches_nothing_and_greys_its_wait():
    from taxbreak.report.svg import IDLE_COLORS
    from taxbreak.report.timeline import host_rows

    tables = build(PlantedSpec([PlantedStep("decode", [_op()])], other_threads=(TQDM,))).tables
    host, api = tables.host_events.to_pandas(), tables.api_calls.to_pandas()
    rows = [r for r in host_rows(host, api, {}) if ":99 " in r.label]
    assert rows and all("(launches nothing)" in r.label for r in rows)
    python = next(r for r in rows if r.label.endswith("Python"))
    assert python.colors.count(IDLE_COLORS["blocked"]) == 3  # wait, wait, acquire; run stays Python
