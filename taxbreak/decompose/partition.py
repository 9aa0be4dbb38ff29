"""The exact host partition: every ns of every host thread gets one label.

For each host thread (pid, tid) the wall time runs from its first event start
to its last event end. All event boundaries (plus step boundaries) cut it into
elementary segments; each segment takes one label (``host_labels.py``,
docs/method.md §7): inside an API call the call's category by priority

    launch_api > sync > other_api > library

and elsewhere the innermost host event's: ``dispatch`` for an ATen/custom op,
``python`` for a Python frame, torch-level op or user annotation (a frame
nested in an op is ``python``), ``blocked`` for Python time under a blocking
wait, ``host_stall`` for host time under a data-loading/preprocessing frame,
``untraced`` where no event is open.

Sums per (thread, step) are integer ns and add up exactly to the wall time;
each row says whether its thread launches GPU work (``launches_work``). Host
work (all labels but ``sync``, ``untraced``, ``blocked`` and ``host_stall``) is
split into exposed (device idle) and hidden (device busy) orchestration against
the union of all device activity. The stalls (name rule, and the length rule's
long Python/untraced runs on launching threads) are returned apart
(:class:`HostStalls`) and the length-rule runs ride on :class:`LaneLabels` for
the idle attribution.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..trace.nesting import lane_clock, sorted_unique
from .host_frames import frame_flags
from .host_labels import (DISPATCH, HOST_STALL, LABELS, PYTHON, HostIntervals, host_labels, length_stalls,
                          priority_labels, runs, stall_threshold)
from .intervals import covered_before, union_intervals, unique_inverse
from .lane_labels import LaneLabels
from .steps import BETWEEN, Steps
from .views import LAUNCH_API_KINDS, LINKABLE_API_KINDS, Views

HOST_WORK = np.array([False, True, True, True, True, False, True, False, False])
COLUMNS = {"python": "host_python_ns", "dispatch": "host_dispatch_ns", "library": "host_library_ns",
           "launch_api": "host_launch_api_ns", "sync": "host_sync_ns", "other_api": "host_other_api_ns",
           "untraced": "host_untraced_ns", "blocked": "host_blocked_ns", "host_stall": "host_stall_ns"}


ASYNC = re.compile("Async")


def blocking_calls(api) -> np.ndarray:
    """Per API call: a synchronize call or a blocking copy (a memcpy call without "Async" in its name)."""
    return api.kind_is("sync") | (api.kind_is("memcpy") & ~api.named(ASYNC))


def _api_intervals(views: Views) -> tuple[np.ndarray, np.ndarray]:
    """(label index, lane) of every API call."""
    api = views.api
    cat = np.select(
        [api.kind_is(*LAUNCH_API_KINDS), blocking_calls(api), api.kind_is("library")],
        [LABELS.index("launch_api"), LABELS.index("sync"), LABELS.index("library")],
        LABELS.index("other_api"))
    return cat.astype(np.int8), api.lane


def _host_intervals(views: Views, marker: np.ndarray) -> HostIntervals:
    """The host events the partition labels by: no step markers, no zero-length events."""
    host = views.host
    keep = np.flatnonzero(~marker & (host.end_ns > host.start_ns))
    # ops last: where a frame and an op have the same span, the op is the inner one (nesting keeps input order)
    keep = keep[np.argsort(host.is_aten[keep], kind="stable")]
    blocking, stall = frame_flags(host.name_codes, host.name_cats, host.is_aten)
    cat = np.where(host.is_aten[keep], DISPATCH, PYTHON).astype(np.int8)
    return HostIntervals(host.lane[keep], host.start_ns[keep], host.end_ns[keep], cat, blocking[keep],
                         stall[keep], host.name_codes[keep])


def launching_lanes(views: Views) -> np.ndarray:
    """Per lane: the thread issues GPU work (a launch, graph-launch, memcpy or memset call)."""
    api = views.api
    issues = api.kind_is(*LINKABLE_API_KINDS)
    return np.bincount(api.lane[issues], minlength=views.n_lanes)[:views.n_lanes] > 0


def _lane_spans(views: Views) -> tuple[np.ndarray, np.ndarray]:
    """First start and last end of every lane (all host events and API calls, markers included)."""
    lane = np.concatenate([views.host.lane, views.api.lane])
    start = np.concatenate([views.host.start_ns, views.api.start_ns])
    end = np.concatenate([views.host.end_ns, views.api.end_ns])
    lo = np.full(views.n_lanes, np.iinfo(np.int64).max)
    hi = np.full(views.n_lanes, np.iinfo(np.int64).min)
    np.minimum.at(lo, lane, start)
    np.maximum.at(hi, lane, end)
    return lo, hi


@dataclass
class HostStalls:
    """The host stalls of the trace: one row per maximal run of ``host_stall`` time on a thread
    (``pid``, ``tid``, ``start_ns``, ``end_ns``, ``frame``: the innermost event holding the whole
    run), and the length rule's threshold (ns; ``None`` where the trace has no Python run)."""

    table: pd.DataFrame
    threshold_ns: int | None


def host_partition(views: Views, marker: np.ndarray, steps: Steps,
                   busy: tuple[np.ndarray, np.ndarray]) -> tuple[pd.DataFrame, LaneLabels, HostStalls]:
    """One row per (pid, tid, step): the host partition in ns (see module docstring), its
    labelled segments (:class:`LaneLabels`) for the idle attribution, and the stalls."""
    if views.n_lanes == 0:
        empty = np.zeros(0, np.int64)
        return _empty(), LaneLabels(empty, np.zeros(0, np.int8), np.zeros(1, np.int64)), _no_stalls(None)
    host = _host_intervals(views, marker)
    api_cat, api_lane = _api_intervals(views)
    n_host, n_iv = len(host.start), len(host.start) + len(api_cat)
    start = np.concatenate([host.start, views.api.start_ns])
    end = np.concatenate([host.end, views.api.end_ns])
    lane = np.concatenate([host.lane, api_lane])
    lo, hi = _lane_spans(views)
    step_b = sorted_unique(np.concatenate([steps.table["start_ns"], steps.table["end_ns"]]).astype(np.int64))
    # step boundaries cut every lane whose span they fall in
    sl = np.repeat(np.arange(views.n_lanes), len(step_b))
    st = np.tile(step_b, views.n_lanes)
    inside = (st > lo[sl]) & (st < hi[sl])
    clock = lane_clock(views.n_lanes, [start, end, lo, hi])
    p_key = _boundary_keys(clock, (lane, start), (lane, end), (np.arange(views.n_lanes), lo),
                           (np.arange(views.n_lanes), hi), (sl[inside], st[inside]))
    del lane, start, end, sl, st
    keys, pos = unique_inverse(p_key)
    del p_key
    s_pos, e_pos = pos[:n_iv], pos[n_iv:2 * n_iv]
    label, owner, parent = host_labels(len(keys), s_pos[:n_host], e_pos[:n_host], host, pos[2 * n_iv:2 * n_iv + views.n_lanes])
    api_label = priority_labels(len(keys), s_pos[n_host:], e_pos[n_host:], api_cat)
    label = np.where(api_label > 0, api_label, label)[:-1]
    del pos, api_label, s_pos, e_pos
    seg_lane, t = clock.split(keys)
    del keys
    ok = seg_lane[:-1] == seg_lane[1:]  # segments between two lanes are not segments
    launching = launching_lanes(views)
    launching_seg = ok & launching[seg_lane[:-1]]
    threshold = stall_threshold(label, launching_seg, t)
    long = length_stalls(label, launching_seg, t, threshold)
    stall_table = pd.concat([_stall_table(views, host, label == HOST_STALL, ok, seg_lane, t, owner, parent, "name"),
                             _stall_table(views, host, long, ok, seg_lane, t, owner, parent, "length")],
                            ignore_index=True)
    del long
    del owner, parent
    # device-busy time before each boundary, once per boundary (segments share them)
    covered = covered_before(busy[0], busy[1], t)
    busy_ns = covered[1:] - covered[:-1]
    del covered
    length_runs = stall_table[stall_table["rule"] == "length"]
    lanes = LaneLabels(t, label, np.searchsorted(seg_lane, np.arange(views.n_lanes + 1)),
                       tuple(length_runs[c].to_numpy(np.int64) for c in ("lane", "start_ns", "end_ns")))
    if ok.all():  # views, not copies: at 10 M events each copy is ~80 MB
        frame = _aggregate(views, seg_lane[:-1], steps, t[:-1], t[1:], label, busy_ns)
    else:
        frame = _aggregate(views, seg_lane[:-1][ok], steps, t[:-1][ok], t[1:][ok], label[ok], busy_ns[ok])
    frame["launches_work"] = launching[frame["lane"].to_numpy()]
    return frame.drop(columns="lane"), lanes, HostStalls(stall_table, threshold)


def _stall_table(views: Views, host: HostIntervals, flag, ok, seg_lane, t, owner, parent, rule: str) -> pd.DataFrame:
    """One row per maximal run of flagged segments, named by the innermost host event
    holding the whole run, else by the outermost frame inside the run under its longest
    segment (``(untraced)`` where that segment has no event)."""
    first, last = runs(flag, ok)
    run_start, run_end = t[first], t[last + 1]
    holder = _holder(host, owner[first], parent, run_start, run_end)
    inside = _outermost_inside(host, owner[_longest_segment(first, last, t)], parent, run_start, run_end)
    names = host_names(views, host, np.where(holder >= 0, holder, inside))
    return pd.DataFrame({"lane": seg_lane[first], "pid": views.lane_pid[seg_lane[first]],
                         "tid": views.lane_tid[seg_lane[first]], "start_ns": run_start, "end_ns": run_end,
                         "frame": names, "rule": rule})


def _longest_segment(first: np.ndarray, last: np.ndarray, t: np.ndarray) -> np.ndarray:
    """The longest segment of each run ``first[i]..last[i]`` (the earliest on ties)."""
    count = last - first + 1
    run = np.repeat(np.arange(len(first)), count)
    seg = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count) + first[run]
    order = np.lexsort((seg, -(t[seg + 1] - t[seg]), run))
    head = np.concatenate([[True], run[order][1:] != run[order][:-1]]) if len(order) else np.zeros(0, bool)
    return seg[order][head]


def _outermost_inside(host: HostIntervals, cand: np.ndarray, parent: np.ndarray, run_start, run_end) -> np.ndarray:
    """Walk each candidate up its parents while the parent still lies inside its run."""
    cand = cand.copy()
    while True:
        up = np.where(cand >= 0, parent[np.maximum(cand, 0)], -1) if len(parent) else np.full(len(cand), -1)
        safe = np.maximum(up, 0)
        move = (up >= 0) & (host.start[safe] >= run_start) & (host.end[safe] <= run_end) if len(parent) else up >= 0
        if not move.any():
            return cand
        cand[move] = up[move]


def _holder(host: HostIntervals, cand: np.ndarray, parent: np.ndarray, run_start, run_end) -> np.ndarray:
    """Walk each candidate up its parents until it holds ``[run_start, run_end)`` (-1: none).
    One vectorized step per nesting level, over the few stall runs only."""
    cand = cand.copy()
    while True:
        has = cand >= 0
        safe = np.where(has, cand, 0)
        short = has & ((host.start[safe] > run_start) | (host.end[safe] < run_end)) if len(host.start) else has
        if not short.any():
            return cand
        cand[short] = parent[cand[short]]


def host_names(views: Views, host: HostIntervals, rows: np.ndarray) -> np.ndarray:
    """Names of host intervals ``rows`` (``(untraced)`` for -1), as an object array."""
    out = np.full(len(rows), "(untraced)", dtype=object)
    has = rows >= 0
    out[has] = views.host.name_cats[host.name_codes[rows[has]]]
    return out


def stall_meta(stalls: HostStalls, idle: pd.DataFrame, top: int = 10) -> dict:
    """``host_stall_threshold_us`` and ``host_stall_frames``: the ``top`` frames by stall time,
    each ``{frame, stalls, us, idle_us}``: thread time of its runs, and the device idle time
    (Σ devices) attributed to ``host_stall`` inside them (the summary's ``meta``)."""
    table = stalls.table.assign(ns=stalls.table["end_ns"] - stalls.table["start_ns"],
                                idle_ns=_idle_in_runs(stalls.table, idle), frame=stalls.table["frame"].astype(str))
    by = table.groupby("frame").agg(stalls=("ns", "size"), ns=("ns", "sum"), idle_ns=("idle_ns", "sum"))
    by = by.sort_values(["ns", "stalls"], ascending=False).head(top)
    frames = [{"frame": name, "stalls": int(row["stalls"]), "us": int(row["ns"]) / 1000.0,
               "idle_us": int(row["idle_ns"]) / 1000.0} for name, row in by.iterrows()]
    threshold = None if stalls.threshold_ns is None else stalls.threshold_ns / 1000.0
    return {"host_stall_threshold_us": threshold, "host_stall_frames": frames}


def _idle_in_runs(table: pd.DataFrame, idle: pd.DataFrame) -> np.ndarray:
    """Per stall run, the ns of ``host_stall`` idle pieces (Σ devices) that start inside it."""
    out = np.zeros(len(table), np.int64)
    pieces = idle[(idle["cause"].astype(str) == "host_stall") & idle["tid"].notna()]
    if not len(table) or not len(pieces):
        return out
    runs_ = table.reset_index(drop=True).assign(run=np.arange(len(table))).sort_values("start_ns")
    p = pd.DataFrame({"pid": pieces["pid"].astype(np.int64).to_numpy(), "tid": pieces["tid"].astype(np.int64).to_numpy(),
                      "start_ns": pieces["start_ns"].to_numpy(np.int64),
                      "dur": (pieces["end_ns"] - pieces["start_ns"]).to_numpy(np.int64)}).sort_values("start_ns")
    hit = pd.merge_asof(p, runs_[["pid", "tid", "start_ns", "end_ns", "run"]], on="start_ns", by=["pid", "tid"])
    hit = hit[hit["run"].notna() & (hit["start_ns"] < hit["end_ns"])]
    np.add.at(out, hit["run"].to_numpy(np.int64), hit["dur"].to_numpy(np.int64))
    return out


def _no_stalls(threshold: int | None) -> HostStalls:
    ints = {c: pd.Series([], dtype=np.int64) for c in ("lane", "pid", "tid", "start_ns", "end_ns")}
    table = pd.DataFrame({**ints, "frame": pd.Series([], dtype=object), "rule": pd.Series([], dtype=object)})
    return HostStalls(table, threshold)


def _boundary_keys(clock, *parts: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """The packed keys of every ``(lane, time)`` part, written straight into one array
    (no per-part key arrays to concatenate: ~40 MB each at 10 M events)."""
    out = np.empty(sum(len(t) for _, t in parts), np.int64)
    at = 0
    for lane, time_ns in parts:
        clock.key_into(out[at:at + len(time_ns)], lane, time_ns)
        at += len(time_ns)
    return out


def _aggregate(views: Views, seg_lane, steps: Steps, t0, t1, label, busy_ns) -> pd.DataFrame:
    """Sum segment durations per (lane, step) and label, rows sorted by (lane, step).

    One weighted count over (group, label) gives every label column at once;
    the wall time and the exposed/hidden split are row sums of it.
    """
    step_ids = sorted_unique(np.append(steps.table["step"].to_numpy(np.int64), BETWEEN))
    # group = (lane, step rank): its id order is the (lane, step) order of the rows
    group = seg_lane * np.int64(len(step_ids))
    group += _step_rank(steps, step_ids, t0)
    present = np.flatnonzero(np.bincount(group))
    dense = np.zeros(int(present[-1]) + 1 if len(present) else 0, np.int64)
    dense[present] = np.arange(len(present))
    cell = dense[group]
    del dense, group
    cell *= np.int64(len(LABELS))  # in place: each temporary would be as long as the segments
    cell += label
    n = len(present)
    by_label = _sums(cell, t1 - t0, n * len(LABELS)).reshape(n, len(LABELS))
    hidden = _sums(cell, busy_ns, n * len(LABELS)).reshape(n, len(LABELS))[:, HOST_WORK].sum(axis=1)
    g_lane, g_rank = np.divmod(present, np.int64(len(step_ids)))
    out = pd.DataFrame({"pid": views.lane_pid[g_lane], "tid": views.lane_tid[g_lane], "step": step_ids[g_rank],
                        "lane": g_lane})
    for i, name in enumerate(LABELS):
        out[COLUMNS[name]] = by_label[:, i]
    out["host_thread_ns"] = by_label.sum(axis=1)
    out["exposed_orchestration_ns"] = by_label[:, HOST_WORK].sum(axis=1) - hidden
    out["hidden_orchestration_ns"] = hidden
    return out


def _step_rank(steps: Steps, step_ids: np.ndarray, t_ns: np.ndarray) -> np.ndarray:
    """Rank in ``step_ids`` of the step of each time (``Steps.assign`` with one search, not two)."""
    table = steps.table
    starts, ends = table["start_ns"].to_numpy(np.int64), table["end_ns"].to_numpy(np.int64)
    between = np.searchsorted(step_ids, BETWEEN)
    if len(starts) == 0:
        return np.full(len(t_ns), between, np.int64)
    rank = np.searchsorted(step_ids, table["step"].to_numpy(np.int64))
    pos = np.searchsorted(starts, t_ns, side="right")
    outside = pos == 0  # before the first step
    pos -= 1
    np.maximum(pos, 0, out=pos)
    outside |= t_ns >= ends[pos]
    out = rank[pos]
    out[outside] = between
    return out


def _sums(codes: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """Exact int64 sums of non-negative ``values`` per code.

    ``np.bincount`` adds in float64, which is exact while every partial sum
    stays below 2**53 ns (104 days); larger totals are summed in int64.
    """
    if float(values.sum(dtype=np.float64)) < 2**52:  # margin for the rounding of this check
        return np.bincount(codes, weights=values, minlength=n).astype(np.int64)
    out = np.zeros(n, np.int64)
    np.add.at(out, codes, values.astype(np.int64))
    return out


def _empty() -> pd.DataFrame:
    cols = ["pid", "tid", "step", *COLUMNS.values(), "host_thread_ns", "exposed_orchestration_ns",
            "hidden_orchestration_ns"]
    out = pd.DataFrame({c: pd.Series([], dtype=np.int64) for c in cols})
    out["launches_work"] = pd.Series([], dtype=bool)
    return out


def device_busy(start_ns: np.ndarray, end_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of device activity intervals over all devices."""
    return union_intervals(start_ns, end_ns)
