"""Overlap per step: how much of a step's host preparation the device hid (docs/serving.md §2).

Serving engines with asynchronous scheduling prepare step N+1 on the host while the device
runs step N. A step's *preparation* is its host time from the step's start to its first
launch call; it is *hidden* where the device was busy meanwhile and *exposed* where the
device was idle. A blocking call (a synchronize, a blocking device-to-host copy) in the
preparation waits the device out instead of overlapping it: the call that ended last before
the first launch is named, and the what-if leaves the blocking time out —
idle ≈ max(0, host work − device work still pending when the step began).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .intervals import covered_before, merged_by_group, union_intervals
from .partition import blocking_calls

MASKED_EXPOSED_SHARE = 0.10  # a step whose preparation was ≤ 10 % exposed counts as masked


@dataclass
class BlockingCalls:
    """The blocking API calls of a trace: thread and span, and name."""

    pid: np.ndarray
    tid: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    name: np.ndarray

    @classmethod
    def of(cls, api) -> "BlockingCalls":
        """From the API view (``views.Api``): the rule of ``partition.blocking_calls``."""
        rows = np.flatnonzero(blocking_calls(api))
        return cls(api.pid[rows], api.tid[rows], api.start_ns[rows], api.end_ns[rows], api.names(rows))


@dataclass
class HostFrames:
    """The host events of a trace (``views.Host``, not copied) and the thread of each lane."""

    host: object
    lane_pid: np.ndarray
    lane_tid: np.ndarray

    @classmethod
    def of(cls, views) -> "HostFrames":
        return cls(views.host, views.lane_pid, views.lane_tid)


def longest_frames(frame: pd.DataFrame, frames: HostFrames) -> pd.DataFrame:
    """Per step: the longest host event of the first launch's thread lying whole inside the
    preparation — the sampling, input preparation or payload packing that held the launch back
    (steps do not overlap, so each event falls in at most one step's preparation)."""
    a, b = frame["start_ns"].to_numpy(np.int64), frame["first_launch_ns"].to_numpy(np.int64)
    out = pd.DataFrame({"step": frame["step"].to_numpy(), "longest_frame": np.full(len(a), None, dtype=object),
                        "longest_frame_ns": pd.array([pd.NA] * len(a), dtype="Int64")})
    host = frames.host
    lanes, q_dense = _lanes(frames.lane_pid, frames.lane_tid, frame["pid"].to_numpy(np.int64),
                            frame["tid"].to_numpy(np.int64))
    lane_of = np.full(len(lanes) + len(q_dense) + 1, -1, np.int64)
    lane_of[lanes] = np.arange(len(lanes))
    q_lane = lane_of[q_dense]
    launching = np.zeros(len(frames.lane_pid) + 1, bool)  # a lookup per lane: cheaper than isin on every event
    launching[q_lane[q_lane >= 0]] = True
    rows = np.flatnonzero(launching[host.lane])
    w = np.searchsorted(a, host.start_ns[rows], side="right") - 1
    ok = w >= 0
    rows, w = rows[ok], w[ok]
    ok = (host.end_ns[rows] <= b[w]) & (host.lane[rows] == q_lane[w])
    rows, w = rows[ok], w[ok]
    dur = host.end_ns[rows] - host.start_ns[rows]
    order = np.lexsort((dur, w))
    last = order[np.flatnonzero(np.append(w[order][1:] != w[order][:-1], True))] if len(order) else order
    out.loc[w[last], "longest_frame"] = host.names(rows[last])
    out.loc[w[last], "longest_frame_ns"] = dur[last]
    return out


def _first_launches(kernels: pd.DataFrame) -> pd.DataFrame:
    """Per step: the first launch call's start and its thread."""
    launch = kernels["launch_start_ns"]
    keep = (launch.notna() & (kernels["step"] >= 0)).to_numpy()
    step = kernels["step"].to_numpy(np.int64)[keep]
    start = launch.to_numpy(np.int64, na_value=0)[keep]
    pid = kernels["launch_pid"].to_numpy(np.int64, na_value=-1)[keep]
    tid = kernels["launch_tid"].to_numpy(np.int64, na_value=-1)[keep]
    order = np.lexsort((start, step))
    first = order[np.flatnonzero(np.diff(step[order], prepend=np.int64(-2)) != 0)] if len(order) else order
    return pd.DataFrame({"step": step[first], "first_launch_ns": start[first], "pid": pid[first], "tid": tid[first]})


def pending_device(launch_ns: np.ndarray, start_ns: np.ndarray, end_ns: np.ndarray, at_ns: np.ndarray) -> np.ndarray:
    """Per time ``at`` (sorted): the device time still to run then of the work launched before it
    (the union of its parts after ``at``): what a step's preparation can hide behind."""
    # a kernel counts for every step that begins after its launch and before its end (mostly 0 or 1)
    lo = np.searchsorted(at_ns, launch_ns, side="right")
    count = np.maximum(np.searchsorted(at_ns, end_ns, side="left") - lo, 0)
    rows = np.repeat(np.arange(len(launch_ns)), count)
    first = np.repeat(np.cumsum(count) - count, count)
    step = lo[rows] + (np.arange(len(rows)) - first)
    g, s, e = merged_by_group(step, np.maximum(start_ns[rows], at_ns[step]), end_ns[rows])
    return np.bincount(g, weights=e - s, minlength=len(at_ns)).astype(np.int64)


def _lanes(pid: np.ndarray, tid: np.ndarray, q_pid: np.ndarray, q_tid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dense thread ids of the calls and of the queries, one numbering."""
    pairs = np.column_stack([np.concatenate([pid, q_pid]), np.concatenate([tid, q_tid])])
    _, lane = np.unique(pairs, axis=0, return_inverse=True)
    lane = lane.ravel().astype(np.int64)
    return lane[: len(pid)], lane[len(pid):]


def _last_ended(lane: np.ndarray, end_ns: np.ndarray, q_lane: np.ndarray, q_ns: np.ndarray):
    """Per query: the position (in ``order``) of the call of its thread that ended last at or
    before ``q_ns``, and whether there is one. Times are ranked so (thread, time) fits one int64."""
    _, rank = np.unique(np.concatenate([end_ns, q_ns]), return_inverse=True)
    width = np.int64(len(rank) + 1)
    key = lane * width + rank[: len(end_ns)]
    order = np.argsort(key, kind="stable")
    idx = np.searchsorted(key[order], q_lane * width + rank[len(end_ns):], side="right") - 1
    found = (idx >= 0) & (lane[order][np.maximum(idx, 0)] == q_lane)
    return order, np.maximum(idx, 0), found


def _blocking_in(frame: pd.DataFrame, calls: BlockingCalls) -> pd.DataFrame:
    """Per step: the blocking call on the first launch's thread that ended last before the launch
    (and after the step began), and the blocking time of that thread inside the preparation."""
    a, b = frame["start_ns"].to_numpy(np.int64), frame["first_launch_ns"].to_numpy(np.int64)
    out = pd.DataFrame({"step": frame["step"].to_numpy(), "blocked_ns": np.zeros(len(a), np.int64),
                        "blocking_call": np.full(len(a), None, dtype=object),
                        "blocking_call_ns": pd.array([pd.NA] * len(a), dtype="Int64")})
    if len(calls.end_ns) == 0:
        return out
    lane, q_lane = _lanes(calls.pid, calls.tid, frame["pid"].to_numpy(np.int64), frame["tid"].to_numpy(np.int64))
    order, at_b, found_b = _last_ended(lane, calls.end_ns, q_lane, b)
    _, at_a, found_a = _last_ended(lane, calls.end_ns, q_lane, a)
    # blocking time per thread up to each call, in the calls' (thread, end) order
    dur = (calls.end_ns - calls.start_ns)[order]
    running = np.cumsum(dur)
    lane_sorted = lane[order]
    within = running - (running - dur)[np.searchsorted(lane_sorted, lane_sorted, side="left")]
    pick = order[at_b]
    inside = found_b & (calls.start_ns[pick] >= a)
    out["blocked_ns"] = np.where(found_b, within[at_b], 0) - np.where(found_a, within[at_a], 0)
    out.loc[inside, "blocking_call"] = calls.name[pick][inside]
    out.loc[inside, "blocking_call_ns"] = dur[at_b][inside]
    return out


def step_overlap(kernels: pd.DataFrame, steps: pd.DataFrame, calls: BlockingCalls,
                 frames: HostFrames | None = None) -> pd.DataFrame:
    """One row per step that launches device work: ``prep_ns`` (step start → first launch),
    ``hidden_ns`` / ``exposed_ns`` (the device busy / idle meanwhile, all devices merged),
    ``blocked_ns`` and the blocking call nearest the launch, with ``frames`` the longest host
    event of the launching thread inside the preparation, ``pending_device_ns`` (device
    work launched earlier still to run when the step began), ``what_if_idle_ns`` and ``overlap``."""
    frame = steps[["step", "start_ns"]].dropna().astype(np.int64).merge(_first_launches(kernels), on="step")
    frame = frame[frame["first_launch_ns"] >= frame["start_ns"]].sort_values("start_ns", kind="stable")
    frame = frame.reset_index(drop=True)
    a, b = frame["start_ns"].to_numpy(np.int64), frame["first_launch_ns"].to_numpy(np.int64)
    start = kernels["start_ns"].to_numpy(np.int64)
    end = start + kernels["dur_ns"].to_numpy(np.int64)
    u_start, u_end = union_intervals(start, end)
    frame["prep_ns"] = b - a
    frame["hidden_ns"] = covered_before(u_start, u_end, b) - covered_before(u_start, u_end, a)
    frame["exposed_ns"] = frame["prep_ns"] - frame["hidden_ns"]
    launched = kernels["launch_start_ns"].notna().to_numpy()
    frame["pending_device_ns"] = pending_device(kernels["launch_start_ns"].to_numpy(np.int64, na_value=0)[launched],
                                                start[launched], end[launched], a)
    frame = frame.merge(_blocking_in(frame, calls), on="step", how="left")
    if frames is not None:
        frame = frame.merge(longest_frames(frame, frames), on="step", how="left")
    frame["host_work_ns"] = frame["prep_ns"] - np.minimum(frame["blocked_ns"], frame["prep_ns"])
    frame["what_if_idle_ns"] = np.maximum(0, frame["host_work_ns"] - frame["pending_device_ns"])
    frame["overlap"] = np.where(frame["exposed_ns"] <= MASKED_EXPOSED_SHARE * frame["prep_ns"], "masked", "exposed")
    return frame.drop(columns=["pid", "tid"])


def _us_column(frame: pd.DataFrame, col: str) -> list:
    return np.round(frame[col].to_numpy(np.float64, na_value=np.nan) / 1000.0, 3).tolist()


def overlap_summary(frame: pd.DataFrame, step_scheme: str) -> dict:
    """The ``overlap`` JSON object: totals over the steps and one entry per step."""
    if step_scheme == "none":
        return {"reason": "no step markers: overlap between steps needs the steps", "steps": []}
    if frame.empty:
        return {"reason": "no step launches device work", "steps": []}
    calls = frame["blocking_call"].dropna().value_counts()
    return {
        "reason": None, "steps_measured": int(len(frame)),
        "masked_steps": int((frame["overlap"] == "masked").sum()),
        "exposed_steps": int((frame["overlap"] == "exposed").sum()),
        **{f"{col[:-3]}_us": round(float(frame[col].sum()) / 1000.0, 3) for col in TOTALS},
        "blocking_calls": {str(k): int(v) for k, v in calls.items()},
        "steps": _step_dicts(frame),
    }


TOTALS = ("prep_ns", "hidden_ns", "exposed_ns", "blocked_ns", "host_work_ns", "pending_device_ns", "what_if_idle_ns")


def _frame_columns(frame: pd.DataFrame) -> dict:
    if "longest_frame" not in frame:
        return {}
    names = [None if pd.isna(c) else str(c) for c in frame["longest_frame"].tolist()]
    return {"longest_frame": names,
            "longest_frame_us": [None if np.isnan(v) else v for v in _us_column(frame, "longest_frame_ns")]}


def _step_dicts(frame: pd.DataFrame) -> list[dict]:
    """One dict per step, built column by column (thousands of steps: no per-value Python work)."""
    blocking_us = [None if np.isnan(v) else v for v in _us_column(frame, "blocking_call_ns")]
    calls = [None if pd.isna(c) else str(c) for c in frame["blocking_call"].tolist()]
    cols = {"step": frame["step"].astype(int).tolist(), "overlap": frame["overlap"].tolist(),
            "blocking_call": calls, "blocking_call_us": blocking_us, **_frame_columns(frame),
            **{f"{col[:-3]}_us": _us_column(frame, col) for col in TOTALS}}
    keys = list(cols)
    return [dict(zip(keys, values)) for values in zip(*cols.values())]
