"""Waits beyond a plausible launch latency: what the kernel waited for, not the launch path.

Launch latency (launch_split.py) is the part of a kernel's launch-to-start time
during which its whole device was idle. A kernel launched just after a
``hipStreamWaitEvent`` can start 463 ms later while the host sits in a blocking
copy and no device work runs anywhere: the device was idle, but what held the
kernel back was a dependency, not the launch path. The plausible launch latency
is learned from the trace itself:

    sample(d) = T_launch of the kernels that carry their launch call and were launched
                onto an idle device d (nothing of d running or queued at the call's start)
    bound(d)  = max(T_sys, Q3 + 3 · IQR of sample(d))          Tukey's far-out fence

with at least ``MIN_SAMPLE`` kernels per device (else the devices' pooled sample;
else no bound and nothing is moved). The part of a carrier kernel's launch
latency after ``max(L + bound, end of its launch call)`` is ``dependency_wait``:
never part of ΔKT, and its idle time is the cause ``dependency_wait``. The wait
is named by the call on the launching thread that held it: a synchronize or
blocking copy in progress during the wait, else the last stream-wait /
synchronize call issued before the launch, else "none visible in the trace".
docs/method.md §2.1.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .intervals import innermost_enclosing
from .partition import blocking_calls
from .views import Views

MIN_SAMPLE = 20
TUKEY_K = 3.0
NONE_VISIBLE = "none visible in the trace"
WAIT_CALL = re.compile(r"(?i)streamwaitevent|eventsynchronize|streamsynchronize|devicesynchronize|ctxsynchronize"
                       r"|streamquery|eventquery")


def learned_bounds(device: np.ndarray, t_launch: np.ndarray, sample: np.ndarray, floor_ns: int | None) -> dict:
    """``{device: bound_ns or None}`` from the T_launch of the ``sample`` kernels (module docstring)."""
    pooled = _fence(t_launch[sample])
    own_values = values_by_device(device, t_launch, sample)
    out = {}
    for d in np.unique(device).tolist():  # one value per device, each from its own slice
        own = _fence(own_values.get(d, t_launch[:0]))
        bound = own if own is not None else pooled
        out[int(d)] = None if bound is None else max(bound, floor_ns or 0)
    return out


def values_by_device(device: np.ndarray, values: np.ndarray, sample: np.ndarray) -> dict[int, np.ndarray]:
    """``{device: values[sample] of that device}`` from one sort (a mask per device was
    devices × rows: 4,096 devices took seconds)."""
    rows = np.flatnonzero(sample)
    order = rows[np.argsort(device[rows], kind="stable")]
    devices, first = np.unique(device[order], return_index=True)
    return dict(zip(devices.tolist(), np.split(values[order], first[1:])))


def _fence(values: np.ndarray) -> int | None:
    if len(values) < MIN_SAMPLE:
        return None
    q1, q3 = np.percentile(values, [25, 75])
    return int(round(q3 + TUKEY_K * (q3 - q1)))


def split_dependency(latency_ns: np.ndarray, start_ns: np.ndarray, launch_start_ns: np.ndarray,
                     launch_end_ns: np.ndarray, bound_ns: np.ndarray) -> np.ndarray:
    """The dependency-wait part of each kernel's launch latency (int64 ns, 0 where none):
    the latency after ``max(L + bound, launch call end)``; ``bound_ns`` < 0: no bound."""
    plausible_end = np.maximum(launch_start_ns + bound_ns, launch_end_ns)
    wait = np.where((bound_ns >= 0) & (latency_ns > 0), start_ns - plausible_end, 0)
    return np.clip(wait, 0, np.maximum(latency_ns, 0))


def waited_on(views: Views, lane: np.ndarray, launch_start_ns: np.ndarray, wait_mid_ns: np.ndarray) -> np.ndarray:
    """The API name each dependency wait is attributed to (one per query, see module docstring)."""
    api = views.api
    names = np.full(len(lane), NONE_VISIBLE, dtype=object)
    if len(lane) == 0 or len(api.start_ns) == 0:
        return names
    cand = np.flatnonzero(blocking_calls(api))
    hit = innermost_enclosing(api.lane[cand], api.start_ns[cand], api.end_ns[cand], lane, wait_mid_ns)
    names[hit >= 0] = api.names(cand[hit[hit >= 0]])
    todo = np.flatnonzero(hit < 0)
    waits = np.flatnonzero(api.named(WAIT_CALL))
    if len(todo) and len(waits):
        last = _last_before(api.lane[waits], api.start_ns[waits], lane[todo], launch_start_ns[todo])
        found = last >= 0
        names[todo[found]] = api.names(waits[last[found]])
    return names


def _last_before(c_lane: np.ndarray, c_start: np.ndarray, q_lane: np.ndarray, q_time: np.ndarray) -> np.ndarray:
    """Per query: index of the last candidate on the same lane starting at or before its time (-1: none)."""
    left = pd.DataFrame({"t": q_time, "lane": q_lane, "q": np.arange(len(q_time))}).sort_values("t")
    right = pd.DataFrame({"t": c_start, "lane": c_lane, "c": np.arange(len(c_start))}).sort_values("t")
    merged = pd.merge_asof(left, right, on="t", by="lane", direction="backward")
    out = np.full(len(q_time), -1, np.int64)
    out[merged["q"].to_numpy()] = merged["c"].fillna(-1).to_numpy(np.int64)
    return out


def wait_summary(names: np.ndarray, wait_ns: np.ndarray) -> list[dict]:
    """``[{call, kernels, us}]`` per named call, largest first."""
    if len(names) == 0:
        return []
    frame = pd.DataFrame({"call": names.astype(str), "ns": wait_ns})
    grouped = frame.groupby("call")["ns"].agg(["size", "sum"]).sort_values("sum", ascending=False)
    return [{"call": call, "kernels": int(row["size"]), "us": round(float(row["sum"]) / 1e3, 3)}
            for call, row in grouped.iterrows()]
