"""Overlap per step (docs/serving.md §2) on a planted trace, values worked out by hand."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from taxbreak.decompose.analysis import analyze
from taxbreak.synth.planted import PlantedFrame, PlantedLaunch, PlantedOp, PlantedSpec, PlantedStep, build


def _op(py_ns: int, kernel_ns: int, before: tuple = ()) -> PlantedOp:
    launch = PlantedLaunch("triton_poi_fused_add_mul_0", dispatch_ns=1_000, library_ns=0, launch_dur_ns=5_000,
                           latency_ns=1_000, kernel_dur_ns=kernel_ns, is_library=False)
    return PlantedOp("model.py(1): forward", "aten::add", py_ns, [launch], tail_ns=500, py_tail_ns=300, gap_ns=1_000,
                     before=before)


SAMPLER = PlantedFrame("vllm/v1/sample/sampler.py(50): forward", 30_000, "python")


# Step 0 at 1,000,000: gap 1,000 + Python 2,000 + dispatch 1,000 → first launch at 1,004,000; its
# 400 µs kernel runs 1,009,710–1,409,710 (T_sys 4,710 + latency 1,000); the step ends at 1,009,800.
# Step 1 opens with a 400,910 ns cudaStreamSynchronize (until 1,410,710), then 4,000 ns to its launch
# at 1,414,710: preparation 404,910, of which the device was busy 399,910 (step 0's kernel).
# Its 10 µs kernel runs 1,420,420–1,430,420; step 1 ends at 1,420,510.
# Step 2: a 30 µs sampler frame, then Python 600 µs: preparation 632,000, hidden behind step 1's
# kernel 9,910 (1,420,510–1,430,420); the sampler is the longest frame lying whole before the launch.
SPEC = PlantedSpec([PlantedStep("decode", [_op(2_000, 400_000)]),
                    PlantedStep("decode", [_op(2_000, 10_000)], sync_first_ns=400_910),
                    PlantedStep("decode", [_op(600_000, 10_000, before=(SAMPLER,))])])


@pytest.fixture(scope="module")
def overlap():
    return analyze(build(SPEC).tables).summary["overlap"]


def test_preparation_hidden_and_exposed(overlap):
    steps = overlap["steps"]
    assert [s["prep_us"] for s in steps] == [4.0, 404.91, 632.0]
    assert [s["hidden_us"] for s in steps] == [0.0, 399.91, 9.91]
    assert [s["exposed_us"] for s in steps] == [4.0, 5.0, 622.09]
    assert [s["overlap"] for s in steps] == ["exposed", "masked", "exposed"]
    assert (overlap["masked_steps"], overlap["exposed_steps"]) == (1, 2)


def test_blocking_call_before_the_first_launch(overlap):
    steps = overlap["steps"]
    assert [s["blocking_call"] for s in steps] == [None, "cudaStreamSynchronize", None]
    assert [s["blocking_call_us"] for s in steps] == [None, 400.91, None]
    assert overlap["blocking_calls"] == {"cudaStreamSynchronize": 1}


def test_longest_frame_before_the_first_launch(overlap):
    steps = overlap["steps"]
    assert [s["longest_frame"] for s in steps] == [None, None, SAMPLER.name]
    assert [s["longest_frame_us"] for s in steps] == [None, None, 30.0]


def test_what_if_idle_is_host_work_beyond_pending_device_work(overlap):
    steps = overlap["steps"]
    assert [s["pending_device_us"] for s in steps] == [0.0, 399.91, 9.91]
    assert [s["host_work_us"] for s in steps] == [4.0, 4.0, 632.0]
    # step 1 without its synchronize would have been hidden whole; step 2's Python is too long to hide
    assert [s["what_if_idle_us"] for s in steps] == [4.0, 0.0, 622.09]


def test_without_step_markers_overlap_is_not_measured():
    tables = build(SPEC).tables
    host = tables.host_events
    tables.host_events = host.filter(pc.not_equal(host["kind"].cast(pa.string()), "annotation"))
    analysis = analyze(tables)
    assert analysis.summary["meta"]["step_scheme"] == "none"
    overlap = analysis.summary["overlap"]
    assert overlap["reason"].startswith("no step markers") and overlap["steps"] == []


def test_terminal_lines_print_durations_like_the_main_report(overlap):
    import io

    from rich.console import Console

    from taxbreak.report.serving import render_overlap

    out = io.StringIO()
    render_overlap({"overlap": overlap}, Console(file=out, width=140, color_system=None))
    text = out.getvalue()
    # Σ prep 4.0 + 404.91 + 632.0 = 1,040.91 µs: four digits at most (terminal_fit.duration)
    assert "host preparation 1,041 µs = hidden 409.8 µs + exposed 631.1 µs" in text
    assert "blocked 400.9 µs" in text and "(exposed now 631.1 µs)" in text
    assert "cudaStreamSynchronize 400.9 µs; none" in text and "sampler.py(50): forward 30.0 µs" in text
