"""``taxbreak annotate``: exact planted slices, reader round trip, lane layout."""
from __future__ import annotations

import gzip
import json
from types import SimpleNamespace

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from taxbreak.cli.main import main
from taxbreak.decompose import analyze
from taxbreak.readers import load_trace
from taxbreak.report.annotate import (CATEGORY, DEVICE_PID, HOST_PID, MAX_LANES, QUEUE_NAME, assign_lanes,
                                      nested_subset, write_annotated)
from taxbreak.trace import TraceMeta, TraceTables
from taxbreak.trace.errors import UnsupportedFormatError

from .traces import EPOCH_US, EXPECTED_HOST, EXPECTED_QUEUE, FLOOR_US, write_planted


def _annotate(tmp_path, epoch=False, name="out.json.gz"):
    trace = write_planted(tmp_path / "planted.json", epoch=epoch)
    analysis = analyze(trace, floor_us=FLOOR_US)
    out = tmp_path / name
    stats = write_annotated(trace, analysis, out)
    raw = out.read_bytes()
    doc = json.loads(gzip.decompress(raw) if name.endswith(".gz") else raw)
    return trace, analysis, out, stats, doc


def _slices(doc, pid, shift=0.0):
    return sorted((e["name"], round(e["ts"] - shift, 3), e["dur"]) for e in doc["traceEvents"]
                  if e.get("cat") == CATEGORY and e["ph"] == "X" and e["pid"] == pid)


@pytest.mark.parametrize("epoch", [False, True])
def test_added_slices_have_the_planted_durations_in_the_trace_time_base(tmp_path, epoch):
    _, _, _, stats, doc = _annotate(tmp_path, epoch=epoch)
    shift = EPOCH_US if epoch else 0.0
    assert _slices(doc, HOST_PID, shift) == EXPECTED_HOST
    assert _slices(doc, DEVICE_PID, shift) == EXPECTED_QUEUE
    assert stats.kernels == 3 and stats.overflow == 0
    assert stats.slices == {"ΔFT python": 2, "ΔFT dispatch": 3, "ΔCT library": 1, "ΔKT floor": 3, QUEUE_NAME: 3}


def test_queue_slice_ends_at_the_kernel_and_floor_starts_at_the_launch(tmp_path):
    _, _, _, _, doc = _annotate(tmp_path)
    events = doc["traceEvents"]
    kernels = {e["args"]["correlation"]: e["ts"] for e in events if e.get("cat") == "kernel"}
    launches = {e["args"]["correlation"]: e["ts"] for e in events if e.get("cat") == "cuda_runtime"}
    queued = [e for e in events if e.get("name") == QUEUE_NAME]
    floors = [e for e in events if e.get("name") == "ΔKT floor"]
    assert sorted(e["ts"] + e["dur"] for e in queued) == sorted(kernels.values())
    assert sorted(e["ts"] for e in floors) == sorted(launches.values())
    full = floors[0]["args"]
    assert {"kernel", "correlation", "ft_python_us", "ct_us", "kt_floor_us", "launch_latency_us"} <= set(full)


def test_new_lanes_are_named_with_metadata_events(tmp_path):
    _, _, _, stats, doc = _annotate(tmp_path)
    meta = [e for e in doc["traceEvents"] if e["ph"] == "M" and e["pid"] in (HOST_PID, DEVICE_PID)]
    procs = {e["pid"]: e["args"]["name"] for e in meta if e["name"] == "process_name"}
    assert procs == {HOST_PID: "taxbreak: host components (ΔFT, ΔCT, ΔKT floor)",
                     DEVICE_PID: "taxbreak: device queue (ΔKT above floor)"}
    threads = sorted(e["args"]["name"] for e in meta if e["name"] == "thread_name")
    assert threads == ["GPU 0 stream 7 · queued · lane 0", "host 100:200 · ΔCT library · lane 0",
                       "host 100:200 · ΔFT dispatch · lane 0", "host 100:200 · ΔFT python · lane 0",
                       "host 100:200 · ΔKT floor · lane 0"]
    assert stats.host_lanes == 4 and stats.device_lanes == 1


def test_annotated_trace_loads_in_the_reader_and_analyses_the_same(tmp_path):
    trace, analysis, out, _, doc = _annotate(tmp_path)
    tables = load_trace(out, use_cache=False)
    added = sum(e.get("cat") == CATEGORY for e in doc["traceEvents"])
    assert tables.diagnostics.count("event.unknown_category") == added
    assert tables.counts() == load_trace(trace, use_cache=False).counts()
    again = analyze(out, floor_us=FLOOR_US)
    assert again.summary["all"] == analysis.summary["all"]


def test_plain_json_output_and_original_events_kept(tmp_path):
    trace, _, out, _, doc = _annotate(tmp_path, name="out.json")
    original = json.loads(trace.read_text())
    assert doc["traceEvents"][: len(original["traceEvents"])] == original["traceEvents"]
    assert doc["baseTimeNanoseconds"] == original["baseTimeNanoseconds"]


def test_cli_annotate_writes_gzip_and_reports(tmp_path):
    trace = write_planted(tmp_path / "planted.json.gz")
    out = tmp_path / "annotated.json.gz"
    result = CliRunner().invoke(main, ["annotate", str(trace), "-o", str(out), "--floor-us", "4.5"])
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith(f"wrote {out}: 3 kernels annotated")
    assert out.read_bytes()[:2] == b"\x1f\x8b"


def test_cpu_only_trace_says_there_is_nothing_to_annotate(shared_traces, tmp_path):
    cpu_only = next((shared_traces / "HolisticTraceAnalysis" / "tests" / "data" / "cpu_only").glob("*.json.gz"))
    out = tmp_path / "annotated.json"
    result = CliRunner().invoke(main, ["annotate", str(cpu_only), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert result.stderr == f"wrote {out}: no kernels in the trace: nothing to annotate " \
                            "(the copy holds the original events only)\n"
    assert load_trace(out).meta.source_format == "kineto"


def test_nsight_input_is_refused_with_a_code(shared_traces, tmp_path):
    mock = shared_traces / "nsys-ai" / "tests" / "fixtures" / "mock.sqlite"
    result = CliRunner().invoke(main, ["annotate", str(mock), "-o", str(tmp_path / "x.json")])
    assert result.exit_code == 1 and result.stderr.startswith("error[format.unknown]")
    assert "not nsys_sqlite" in result.stderr and not (tmp_path / "x.json").exists()
    nsys_analysis = SimpleNamespace(tables=TraceTables(meta=TraceMeta(source_format="nsys", path=str(mock))))
    with pytest.raises(UnsupportedFormatError) as info:
        write_annotated(mock, nsys_analysis, tmp_path / "x.json")
    assert info.value.code == "format.unknown"


def _properly_nested(starts, ends) -> bool:
    for i in range(len(starts)):
        for j in range(len(starts)):
            if i != j and starts[i] < starts[j] < ends[i] < ends[j]:
                return False
    return True


intervals = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 60), st.integers(0, 30)), max_size=40)


@settings(max_examples=150, deadline=None)
@given(intervals)
def test_lanes_hold_only_properly_nested_intervals(rows):
    group = np.array([r[0] for r in rows], dtype=np.int64)
    start = np.array([r[1] for r in rows], dtype=np.int64)
    end = start + np.array([r[2] for r in rows], dtype=np.int64)
    lane = assign_lanes(group, start, end, max_lanes=64)
    assert (lane >= 0).all()  # 40 intervals never need 64 lanes
    for g in np.unique(group):
        for ln in np.unique(lane[group == g]):
            m = (group == g) & (lane == ln)
            assert _properly_nested(start[m], end[m])


def test_nested_subset_keeps_stacks_and_drops_partial_overlaps():
    group = np.zeros(4, dtype=np.int64)
    start = np.array([0, 0, 5, 12])
    end = np.array([20, 10, 8, 25])  # [0,20] ⊃ [0,10] ⊃ [5,8]; [12,25] overlaps [0,20] partially
    assert nested_subset(group, start, end).tolist() == [True, True, True, False]


def test_deep_queues_overflow_into_async_events():
    n = MAX_LANES + 4  # every interval overlaps every other partially: a staircase
    group = np.zeros(n, dtype=np.int64)
    start = np.arange(n, dtype=np.int64)
    lane = assign_lanes(group, start, start + 100)
    assert (lane[:MAX_LANES] == np.arange(MAX_LANES)).all() and (lane[MAX_LANES:] == -1).all()


def test_build_events_writes_deep_queues_as_async_pairs():
    from taxbreak.report.annotate import build_events

    from .fake import make_kernels

    k = make_kernels(n=24)
    k["launch_latency_ns"] = 1_000_000.0  # each kernel queued 1 ms, launches 20 µs apart: 24 deep
    events, stats = build_events(k, shift_ns=0)
    begins = [e for e in events if e["ph"] == "b"]
    ends = {e["id"]: e for e in events if e["ph"] == "e"}
    assert stats.overflow == 24 - MAX_LANES == len(begins) == len(ends)
    assert stats.device_lanes == MAX_LANES
    for b in begins:
        assert b["pid"] == DEVICE_PID and b["name"] == QUEUE_NAME
        assert ends[b["id"]]["ts"] - b["ts"] == pytest.approx(1000.0)
    assert "8 slices beyond 16 lanes written as async events" in stats.summary_line()


def test_real_epoch_trace_slices_line_up_with_its_own_events(shared_traces, tmp_path):
    """HTA AlexNet: an old absolute-epoch-µs trace (no baseTimeNanoseconds)."""
    trace = shared_traces / "HolisticTraceAnalysis/tests/data/critical_path/alexnet" / \
        "benchmark_result_2869224_1695835535_trace.json.gz"
    out = tmp_path / "a.json.gz"
    stats = write_annotated(trace, analyze(trace), out)
    events = json.loads(gzip.decompress(out.read_bytes()))["traceEvents"]
    kernels = {e["args"]["correlation"]: e["ts"] for e in events if e.get("cat") == "kernel"}
    launches = {e["args"]["correlation"]: e["ts"] for e in events
                if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}
    queued = [e for e in events if e.get("name") == QUEUE_NAME and e["ph"] == "X"]
    floors = [e for e in events if e.get("name") == "ΔKT floor"]
    assert stats.kernels == 79 and len(floors) == 79 and queued
    assert all(abs(e["ts"] + e["dur"] - kernels[e["args"]["correlation"]]) < 2e-3 for e in queued)
    assert all(abs(e["ts"] - launches[e["args"]["correlation"]]) < 2e-3 for e in floors)
    assert load_trace(out, use_cache=False).counts() == load_trace(trace, use_cache=False).counts()
