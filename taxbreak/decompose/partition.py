"""The exact host partition: every ns of every host thread gets one label.

For each host thread (pid, tid) the wall time runs from its first event start
to its last event end. All event boundaries (plus step boundaries) cut it into
elementary segments; each segment takes the label of the highest-priority
category covering it, which for properly nested events is the innermost one:

    launch_api  > sync > other_api > library > dispatch > python > untraced

* ``launch_api``: inside a kernel/graph launch call;
* ``sync``: inside a synchronize call (stream/device/event) or a blocking
  ``cudaMemcpy`` (a memcpy call whose name has no ``Async``);
* ``other_api``: any other runtime/driver call (async memcpy/memset, attributes, …);
* ``library``: inside a cuBLAS/cuDNN API range but in no runtime call;
* ``dispatch``: inside an ``aten::`` op but in no API call or library range;
* ``python``: inside a Python frame, torch-level op or user annotation (step
  markers excluded) but in no ATen op;
* ``untraced``: no event at all.

Sums per (thread, step) are integer ns and add up exactly to the wall time.
Host work (all labels but ``sync`` and ``untraced``) is split into exposed
(device idle) and hidden (device busy) orchestration against the union of all
device activity.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..trace.nesting import lane_clock, sorted_unique
from .intervals import covered_before, union_intervals, unique_inverse
from .steps import BETWEEN, Steps
from .views import LAUNCH_API_KINDS, Views

LABELS = ("untraced", "python", "dispatch", "library", "other_api", "sync", "launch_api")
HOST_WORK = np.array([False, True, True, True, True, False, True])
COLUMNS = {"python": "host_python_ns", "dispatch": "host_dispatch_ns", "library": "host_library_ns",
           "launch_api": "host_launch_api_ns", "sync": "host_sync_ns", "other_api": "host_other_api_ns",
           "untraced": "host_untraced_ns"}


def _categories(views: Views, marker: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(lane, start, end, label index) of every covering interval."""
    host, api = views.host, views.api
    keep = ~marker
    host_cat = np.where(host.is_aten, LABELS.index("dispatch"), LABELS.index("python"))[keep]
    # a memcpy call without "Async" blocks the host (classified once per distinct name)
    async_name = np.array(["Async" in n for n in api.name_cats], dtype=bool)
    is_async = async_name[api.name_codes] if len(api.name_codes) else np.zeros(0, dtype=bool)
    blocking_copy = api.kind_is("memcpy") & ~is_async
    api_cat = np.select(
        [api.kind_is(*LAUNCH_API_KINDS), api.kind_is("sync") | blocking_copy, api.kind_is("library")],
        [LABELS.index("launch_api"), LABELS.index("sync"), LABELS.index("library")],
        LABELS.index("other_api"))
    lane = np.concatenate([host.lane[keep], api.lane])
    start = np.concatenate([host.start_ns[keep], api.start_ns])
    end = np.concatenate([host.end_ns[keep], api.end_ns])
    return lane, start, end, np.concatenate([host_cat, api_cat]).astype(np.int8)


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
class LaneLabels:
    """The labelled segments of the host partition, kept for the idle attribution.

    Lane ``k``'s boundaries are ``t_ns[lane_start[k]:lane_start[k + 1]]`` (its
    first event start to its last event end, sorted); ``label[i]`` is the label of
    ``[t_ns[i], t_ns[i + 1])`` inside a lane (the entry at a lane's last boundary
    is meaningless). Outside a lane's span the thread is ``untraced``.
    """

    t_ns: np.ndarray
    label: np.ndarray
    lane_start: np.ndarray

    def pieces(self, lane: np.ndarray, q0: np.ndarray, q1: np.ndarray) -> tuple[np.ndarray, ...]:
        """``[q0, q1)`` on ``lane`` (q1 > q0) cut at the segment boundaries:
        ``(query, start_ns, end_ns, label)``, in query order, start order within one.
        One vectorized search per lane that has queries (a trace has few lanes)."""
        parts = [self._lane_pieces(int(k), idx, q0[idx], q1[idx]) for k, idx in _by_lane(lane)]
        if not parts:
            empty = np.zeros(0, np.int64)
            return empty, empty, empty, np.zeros(0, np.int8)
        query, start, end, label = (np.concatenate(col) for col in zip(*parts))
        order = np.lexsort((start, query))
        return query[order], start[order], end[order], label[order]

    def _lane_pieces(self, k: int, idx, q0, q1) -> tuple[np.ndarray, ...]:
        t = self.t_ns[self.lane_start[k]:self.lane_start[k + 1]]
        lab = self.label[self.lane_start[k]:max(self.lane_start[k + 1] - 1, self.lane_start[k])]
        p0 = np.searchsorted(t, q0, side="right")  # boundaries strictly inside the query
        p1 = np.searchsorted(t, q1, side="left")  # are t[p0] .. t[p1 - 1]
        count = p1 - p0 + 1
        qid = np.repeat(np.arange(len(q0)), count)
        j = np.arange(len(qid)) - np.repeat(np.cumsum(count) - count, count)
        at = p0[qid] + j  # the boundary that ends piece j (the query's end for the last)
        last = j == count[qid] - 1
        top = max(len(t) - 1, 0)
        start = np.where(j == 0, q0[qid], t[np.clip(at - 1, 0, top)] if len(t) else 0)
        end = np.where(last, q1[qid], t[np.clip(at, 0, top)] if len(t) else 0)
        seg = at - 1  # the segment each piece lies in; none before the first or after the last boundary
        inside = (seg >= 0) & (seg < len(lab))
        label = np.zeros(len(qid), np.int8)
        label[inside] = lab[seg[inside]]
        return idx[qid], start, end, label


def _by_lane(lane: np.ndarray):
    """``(lane, positions)`` of each distinct lane."""
    order = np.argsort(lane, kind="stable")
    lanes, first = np.unique(lane[order], return_index=True)
    return zip(lanes, np.split(order, first[1:]))


def host_partition(views: Views, marker: np.ndarray, steps: Steps,
                   busy: tuple[np.ndarray, np.ndarray]) -> tuple[pd.DataFrame, LaneLabels]:
    """One row per (pid, tid, step): the host partition in ns (see module docstring),
    and its labelled segments (:class:`LaneLabels`) for the idle attribution."""
    if views.n_lanes == 0:
        empty = np.zeros(0, np.int64)
        return _empty(), LaneLabels(empty, np.zeros(0, np.int8), np.zeros(1, np.int64))
    lane, start, end, cat = _categories(views, marker)
    lo, hi = _lane_spans(views)
    step_b = sorted_unique(np.concatenate([steps.table["start_ns"], steps.table["end_ns"]]).astype(np.int64))
    # step boundaries cut every lane whose span they fall in
    sl = np.repeat(np.arange(views.n_lanes), len(step_b))
    st = np.tile(step_b, views.n_lanes)
    inside = (st > lo[sl]) & (st < hi[sl])
    clock = lane_clock(views.n_lanes, [start, end, lo, hi])
    n_iv = len(start)
    p_key = _boundary_keys(clock, (lane, start), (lane, end), (np.arange(views.n_lanes), lo),
                           (np.arange(views.n_lanes), hi), (sl[inside], st[inside]))
    del lane, start, end, sl, st
    keys, pos = unique_inverse(p_key)
    del p_key
    label = _labels(len(keys), pos[:n_iv], pos[n_iv:2 * n_iv], cat)[:-1]
    del pos, cat
    seg_lane, t = clock.split(keys)
    del keys
    # device-busy time before each boundary, once per boundary (segments share them)
    covered = covered_before(busy[0], busy[1], t)
    busy_ns = covered[1:] - covered[:-1]
    del covered
    lanes = LaneLabels(t, label, np.searchsorted(seg_lane, np.arange(views.n_lanes + 1)))
    ok = seg_lane[:-1] == seg_lane[1:]  # segments between two lanes are not segments
    if ok.all():  # views, not copies: at 10 M events each copy is ~80 MB
        return _aggregate(views, seg_lane[:-1], steps, t[:-1], t[1:], label, busy_ns), lanes
    return _aggregate(views, seg_lane[:-1][ok], steps, t[:-1][ok], t[1:][ok], label[ok], busy_ns[ok]), lanes


def _boundary_keys(clock, *parts: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """The packed keys of every ``(lane, time)`` part, written straight into one array
    (no per-part key arrays to concatenate: ~40 MB each at 10 M events)."""
    out = np.empty(sum(len(t) for _, t in parts), np.int64)
    at = 0
    for lane, time_ns in parts:
        clock.key_into(out[at:at + len(time_ns)], lane, time_ns)
        at += len(time_ns)
    return out


def _labels(n: int, s_pos: np.ndarray, e_pos: np.ndarray, cat: np.ndarray) -> np.ndarray:
    """Highest-priority category open on each of the ``n`` segments (0 = untraced);
    ``s_pos``/``e_pos`` are the boundary positions of each interval's start and end.

    A +1/−1 sweep per category: open counts are the running sums of starts
    minus ends at or before each boundary key.
    """
    label = np.zeros(n, dtype=np.int8)
    # group the intervals by category once (a radix sort of small ints), then slice
    by_cat = np.argsort(cat.astype(np.uint8), kind="stable")
    bounds = np.concatenate([[0], np.cumsum(np.bincount(cat, minlength=len(LABELS)))])
    s_pos, e_pos = s_pos[by_cat], e_pos[by_cat]
    for c in range(1, len(LABELS)):
        lo, hi = bounds[c], bounds[c + 1]
        if lo == hi:
            continue
        open_count = np.bincount(s_pos[lo:hi], minlength=n)
        open_count -= np.bincount(e_pos[lo:hi], minlength=n)
        np.cumsum(open_count, out=open_count)
        label[open_count > 0] = c
    return label


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
    out = pd.DataFrame({"pid": views.lane_pid[g_lane], "tid": views.lane_tid[g_lane], "step": step_ids[g_rank]})
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
    return pd.DataFrame({c: pd.Series([], dtype=np.int64) for c in cols})


def device_busy(start_ns: np.ndarray, end_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of device activity intervals over all devices."""
    return union_intervals(start_ns, end_ns)
