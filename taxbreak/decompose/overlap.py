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


def _first_launches(kernels: pd.DataFrame) -> pd.DataFrame:
    """Per step: the first launch call's start and its thread."""
    k = kernels[kernels["launch_start_ns"].notna() & (kernels["step"] >= 0)]
    first = k.loc[k.groupby("step")["launch_start_ns"].idxmin(), ["step", "launch_start_ns", "launch_pid", "launch_tid"]]
    first = first.rename(columns={"launch_start_ns": "first_launch_ns", "launch_pid": "pid", "launch_tid": "tid"})
    return first.astype({"first_launch_ns": np.int64, "pid": np.int64, "tid": np.int64})


def pending_device(kernels: pd.DataFrame, at_ns: np.ndarray) -> np.ndarray:
    """Per time ``at`` (sorted): the device time still to run then of the work launched before it
    (the union of its parts after ``at``): what a step's preparation can hide behind."""
    k = kernels[kernels["launch_start_ns"].notna()]
    launch = k["launch_start_ns"].to_numpy(np.int64)
    start = k["start_ns"].to_numpy(np.int64)
    end = start + k["dur_ns"].to_numpy(np.int64)
    # a kernel counts for every step that begins after its launch and before its end (mostly 0 or 1)
    lo = np.searchsorted(at_ns, launch, side="right")
    count = np.maximum(np.searchsorted(at_ns, end, side="left") - lo, 0)
    rows = np.repeat(np.arange(len(launch)), count)
    first = np.repeat(np.cumsum(count) - count, count)
    step = lo[rows] + (np.arange(len(rows)) - first)
    g, s, e = merged_by_group(step, np.maximum(start[rows], at_ns[step]), end[rows])
    return np.bincount(g, weights=e - s, minlength=len(at_ns)).astype(np.int64)


def _blocking_in(frame: pd.DataFrame, calls: BlockingCalls) -> pd.DataFrame:
    """Per step: the blocking call on the first launch's thread that ended last before the launch
    (and after the step began), and the blocking time of that thread inside the preparation."""
    c = pd.DataFrame({"pid": calls.pid, "tid": calls.tid, "call_start_ns": calls.start_ns,
                      "end_ns": calls.end_ns, "blocking_call": calls.name}).sort_values("end_ns", kind="stable")
    c["cum_ns"] = (c["end_ns"] - c["call_start_ns"]).groupby([c["pid"], c["tid"]]).cumsum()
    left = frame[["step", "pid", "tid", "start_ns", "first_launch_ns"]]
    at_launch = _asof(left, c, "first_launch_ns")
    at_start = _asof(left, c[["pid", "tid", "end_ns", "cum_ns"]], "start_ns")
    inside = at_launch["call_start_ns"].ge(at_launch["start_ns"]).fillna(False).to_numpy(bool)
    out = pd.DataFrame({"step": at_launch["step"].to_numpy()})
    out["blocking_call"] = np.where(inside, at_launch["blocking_call"].astype(object), None)
    out["blocking_call_ns"] = pd.array(np.where(inside, at_launch["end_ns"] - at_launch["call_start_ns"], 0),
                                       dtype="Int64")
    out.loc[~inside, "blocking_call_ns"] = pd.NA
    out["blocked_ns"] = (at_launch["cum_ns"].fillna(0) - at_start["cum_ns"].fillna(0)).to_numpy(np.int64)
    return out


def _asof(left: pd.DataFrame, calls: pd.DataFrame, on: str) -> pd.DataFrame:
    """``left`` with the last call (per thread) that ended at or before ``left[on]``, rows kept in order."""
    ordered = left.sort_values(on, kind="stable")
    merged = pd.merge_asof(ordered, calls, left_on=on, right_on="end_ns", by=["pid", "tid"], direction="backward")
    merged.index = ordered.index
    return merged.loc[left.index]


def step_overlap(kernels: pd.DataFrame, steps: pd.DataFrame, calls: BlockingCalls) -> pd.DataFrame:
    """One row per step that launches device work: ``prep_ns`` (step start → first launch),
    ``hidden_ns`` / ``exposed_ns`` (the device busy / idle meanwhile, all devices merged),
    ``blocked_ns`` and the blocking call nearest the launch, ``pending_device_ns`` (device
    work launched earlier still to run when the step began), ``what_if_idle_ns`` and ``overlap``."""
    frame = steps[["step", "start_ns"]].dropna().astype(np.int64).merge(_first_launches(kernels), on="step")
    frame = frame[frame["first_launch_ns"] >= frame["start_ns"]].sort_values("start_ns", kind="stable")
    frame = frame.reset_index(drop=True)
    a, b = frame["start_ns"].to_numpy(np.int64), frame["first_launch_ns"].to_numpy(np.int64)
    start = kernels["start_ns"].to_numpy(np.int64)
    u_start, u_end = union_intervals(start, start + kernels["dur_ns"].to_numpy(np.int64))
    frame["prep_ns"] = b - a
    frame["hidden_ns"] = covered_before(u_start, u_end, b) - covered_before(u_start, u_end, a)
    frame["exposed_ns"] = frame["prep_ns"] - frame["hidden_ns"]
    frame["pending_device_ns"] = pending_device(kernels, a)
    frame = frame.merge(_blocking_in(frame, calls), on="step", how="left")
    frame["host_work_ns"] = frame["prep_ns"] - np.minimum(frame["blocked_ns"], frame["prep_ns"])
    frame["what_if_idle_ns"] = np.maximum(0, frame["host_work_ns"] - frame["pending_device_ns"])
    frame["overlap"] = np.where(frame["exposed_ns"] <= MASKED_EXPOSED_SHARE * frame["prep_ns"], "masked", "exposed")
    return frame.drop(columns=["pid", "tid"])


def _us(ns) -> float:
    return round(float(ns) / 1000.0, 3)


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
        **{f"{col[:-3]}_us": _us(frame[col].sum()) for col in TOTALS},
        "blocking_calls": {str(k): int(v) for k, v in calls.items()},
        "steps": [_step(row) for row in frame.itertuples(index=False)],
    }


TOTALS = ("prep_ns", "hidden_ns", "exposed_ns", "blocked_ns", "host_work_ns", "pending_device_ns", "what_if_idle_ns")


def _step(row) -> dict:
    out = {"step": int(row.step), "overlap": row.overlap,
           "blocking_call": None if pd.isna(row.blocking_call) else str(row.blocking_call),
           "blocking_call_us": None if pd.isna(row.blocking_call_ns) else _us(row.blocking_call_ns)}
    out.update({f"{col[:-3]}_us": _us(getattr(row, col)) for col in TOTALS})
    return out
