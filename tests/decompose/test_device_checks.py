"""Silently wrong numbers: duplicate and overlapping device rows, outlier timestamps, and the idle
attribution held linear in devices (taxbreak/decompose/device_checks.py, lane_labels.py)."""
from __future__ import annotations

import gzip
import json

import numpy as np
import pandas as pd
import pyarrow as pa

from taxbreak.decompose import analyze
from taxbreak.decompose import lane_labels
from taxbreak.decompose.host_labels import DISPATCH, HOST_STALL, LABELS, PYTHON
from taxbreak.decompose.lane_labels import LaneLabels
from taxbreak.synth.planted import build, random_spec


def _planted(seed=3):
    return build(random_spec(np.random.default_rng(seed), steps=2, ops=3))


def _with_device_rows(tables, frame: pd.DataFrame) -> None:
    tables.device_activities = pa.Table.from_pandas(frame, schema=tables.device_activities.schema,
                                                    preserve_index=False)


def _active(a) -> float:
    return a.summary["all"]["device_active_us"]


def test_exact_duplicate_rows_are_counted_once_not_as_graph_replays():
    clean = analyze(_planted().tables)
    planted = _planted()
    dev = planted.tables.device_activities.to_pandas()
    copies = dev.assign(row_id=dev["row_id"] + 10_000)  # a double flush: every record twice
    _with_device_rows(planted.tables, pd.concat([dev, copies], ignore_index=True))
    a = analyze(planted.tables)
    assert a.summary["diagnostics"]["device.duplicate_activity"]["count"] == len(dev)
    assert "decompose.graph_launch" not in a.summary["diagnostics"]
    assert len(a.kernels) == len(clean.kernels)
    assert _active(a) == _active(clean)
    assert a.summary["all"]["device_busy_us"] == clean.summary["all"]["device_busy_us"]


def test_overlap_on_one_stream_is_moved_to_the_end_of_the_work_ahead():
    planted = _planted()
    dev = planted.tables.device_activities.to_pandas().sort_values("start_ns").reset_index(drop=True)
    first, second = dev.iloc[0], dev.iloc[1]
    assert first["stream"] == second["stream"] and first["correlation"] != second["correlation"]
    first_end = int(first["start_ns"] + first["dur_ns"])
    dev.loc[1, "start_ns"] = int(first["start_ns"]) + 10  # starts while the first still runs
    dev.loc[1, "dur_ns"] = first_end - int(first["start_ns"])  # ends 10 ns after it
    _with_device_rows(planted.tables, dev)
    a = analyze(planted.tables)
    assert a.summary["diagnostics"]["device.stream_overlap"]["count"] == 1
    moved = a.kernels[a.kernels["correlation"] == second["correlation"]]
    assert moved["start_ns"].tolist() == [first_end] and moved["dur_ns"].tolist() == [10]
    k = a.kernels
    # device time is the union of the stream's work: the overlap counted once
    assert _active(a) * 1000 == k["dur_ns"].sum()
    assert a.summary["all"]["device_busy_us"] <= a.summary["all"]["wall_us"]


def test_graph_replay_nodes_sharing_a_correlation_may_overlap():
    planted = _planted()
    dev = planted.tables.device_activities.to_pandas()
    node = dev.iloc[[0]].assign(row_id=99_999, start_ns=dev["start_ns"].iloc[0] + 5)  # same correlation
    _with_device_rows(planted.tables, pd.concat([dev, node], ignore_index=True))
    a = analyze(planted.tables)
    assert "device.stream_overlap" not in a.summary["diagnostics"]
    assert a.summary["diagnostics"]["decompose.graph_launch"]["count"] == 1


def test_a_stray_event_at_time_zero_does_not_set_the_window():
    clean = analyze(_planted().tables)
    planted = _planted()
    host = planted.tables.host_events.to_pandas()
    stray = host.iloc[[0]].assign(row_id=99_999, start_ns=-(10**18), dur_ns=1, parent=-1, depth=0)
    planted.tables.host_events = pa.Table.from_pandas(pd.concat([stray, host], ignore_index=True),
                                                      schema=planted.tables.host_events.schema, preserve_index=False)
    a = analyze(planted.tables)
    assert a.summary["diagnostics"]["decompose.outlier_timestamp"]["count"] == 1
    assert a.summary["all"]["wall_us"] == clean.summary["all"]["wall_us"]
    assert a.summary["all"]["device_idle_us"] == clean.summary["all"]["device_idle_us"]
    # nor its thread's span: no 1e12 µs of untraced host time
    assert a.summary["all"]["host_thread_us"] == clean.summary["all"]["host_thread_us"]
    assert a.summary["all"]["host_untraced_us"] == clean.summary["all"]["host_untraced_us"]


def _many_devices(path, devices: int):
    events = []
    for d in range(devices):
        t, ids = 4.0 * d, {"External id": d + 1}
        events += [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": t, "dur": 3.0, "args": ids},
                   {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t + 1,
                    "dur": 1.0, "args": {"correlation": d + 1, **ids}},
                   {"ph": "X", "cat": "kernel", "name": "k", "pid": d, "tid": 7, "ts": t + 2.5, "dur": 2.0,
                    "args": {"device": d, "stream": 7, "correlation": d + 1, **ids}}]
    with gzip.open(path, "wt") as out:
        json.dump({"traceEvents": events}, out)
    return path


def _sums(idle: pd.DataFrame) -> pd.Series:
    return (idle.assign(ns=idle["end_ns"] - idle["start_ns"])
            .groupby(["device", "cause", "step"], observed=True)["ns"].sum().sort_index())


def test_idle_pieces_stay_linear_in_devices_with_exact_sums(tmp_path, monkeypatch):
    devices = 96
    trace = _many_devices(tmp_path / "many.json.gz", devices)
    budgeted = analyze(trace)
    monkeypatch.setattr(lane_labels, "PIECE_BUDGET_FACTOR", 10**9)  # every piece exact
    exact = analyze(trace)
    assert "decompose.idle_summarised" not in exact.summary["diagnostics"]
    summarised = budgeted.summary["diagnostics"]["decompose.idle_summarised"]["count"]
    assert summarised > 0
    # exact pieces grow as devices²; held ones within 4 × segments + 9 × gaps (3 events a device)
    assert len(exact.idle) > devices * devices
    segments, gaps = 2 * 3 * devices, 2 * devices
    assert len(budgeted.idle) <= 4 * segments + 9 * gaps
    pd.testing.assert_series_equal(_sums(budgeted.idle), _sums(exact.idle))
    assert budgeted.summary["all"]["idle_by_cause_us"] == exact.summary["all"]["idle_by_cause_us"]


def test_a_summarised_query_gives_each_label_its_exact_ns_end_to_end():
    # segments [0,10) python, [10,20) dispatch, [20,30) python; a stall run over [22, 30)
    lanes = LaneLabels(np.array([0, 10, 20, 30], np.int64), np.array([PYTHON, DISPATCH, PYTHON, 0], np.int8),
                       np.array([0, 4], np.int64),
                       (np.array([0], np.int64), np.array([20], np.int64), np.array([30], np.int64)))
    q0, q1 = np.array([5], np.int64), np.array([35], np.int64)
    t = lanes._times(0)
    p0, p1 = np.searchsorted(t, q0, side="right"), np.searchsorted(t, q1, side="left")
    query, start, end, label, summarised = lanes._lane_summary(0, np.array([7]), q0, q1, p0, p1)
    got = {LABELS[lab]: (s, e) for lab, s, e in zip(label, start, end)}
    # python [5,10) = 5; dispatch 10; [20,30) lies in the stall run: host_stall 10; untraced [30,35) = 5
    assert got == {"untraced": (5, 10), "python": (10, 15), "dispatch": (15, 25), "host_stall": (25, 35)}
    assert query.tolist() == [7] * 4 and summarised.all() and HOST_STALL in label
