"""GPU idle time attributed to its cause, per device, exactly (docs/method.md §7.1).

Every device d is idle wherever none of its activities (kernel, memcpy,
memset) runs inside the analysis window (the trace's whole span). Each idle
gap ends when d's next activity starts (or never: the trailing gap). What
kept d idle at instant t of a gap is read from that next activity:

* it has no launch call in the trace → ``unlinked``;
* t ≥ the launch call's start L (the work was issued, not started yet):

  * a kernel that carries its launch (the first activity of the call), before
    L + t_floor → ``launch_floor`` (the T_sys floor of its launch path);
  * the same kernel, from L + t_floor on → ``launch_latency``: exactly the
    kernel's ``launch_latency_ns`` (docs/method.md §2.1), so over the trace these
    pieces sum to the ΔKT launch latency, exposed (per step they can differ: a
    piece belongs to the step its time falls in, a kernel to its launch's);
  * a later node of a CUDA graph replay (issued by the graph's launch call,
    no launch path of its own) → ``graph_internal``;
  * a memcpy/memset → ``copy_issued``;
* t < the launch call's start → whatever the launching host thread was doing
  at t: the host-partition label of that thread at t (``python``, ``dispatch``,
  ``library``, ``launch_api`` (inside another launch call), ``sync``,
  ``other_api``, ``untraced``, ``blocked`` (a blocking wait), ``host_stall``
  (data loading, preprocessing or a run far above the per-op scale));
* no next activity → ``nothing_pending``.

The pieces of one device are disjoint and cover its idle time exactly, so
their sums per cause add up to the device's idle time in every scope. Pieces
are cut at step boundaries; a piece belongs to the step that contains its
start (``Steps.assign``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..trace.diagnostics import Diagnostics
from .intervals import running_end, take_or
from .lane_labels import LaneLabels
from .partition import LABELS
from .steps import Steps
from .views import Views

CAUSES = ("python", "dispatch", "library", "launch_api", "sync", "other_api", "untraced",
          "launch_floor", "launch_latency", "dependency_wait", "graph_internal", "copy_issued", "unlinked",
          "nothing_pending", "blocked", "host_stall")
# causes of the time after the next work was issued (the pieces carry no thread in Analysis.idle)
ISSUED_CAUSES = ("launch_floor", "launch_latency", "dependency_wait", "graph_internal", "copy_issued")
_CAUSE_OF_LABEL = np.array([CAUSES.index(label) for label in LABELS], np.int8)
COLUMNS = ("device", "start_ns", "end_ns", "cause", "step", "pid", "tid", "next_correlation")


@dataclass
class Gaps:
    device: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    next_row: np.ndarray  # device-view row that ends the gap, -1 for a trailing gap


def device_gaps(device: np.ndarray, start_ns: np.ndarray, end_ns: np.ndarray, window: tuple[int, int]) -> Gaps:
    """Idle gaps of every device inside ``window`` and the activity that ends each."""
    n = len(start_ns)
    if n == 0:
        return Gaps(*(np.zeros(0, np.int64) for _ in range(4)))
    order = np.lexsort((start_ns, device))
    d, s, e = device[order], start_ns[order], end_ns[order]
    first_of_dev = np.concatenate([[True], d[1:] != d[:-1]])
    run_end = running_end(d, s, e)
    new = first_of_dev.copy()
    new[1:] |= s[1:] > run_end[:-1]  # a merged busy interval begins
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, n - 1)
    m_dev, m_start, m_end = d[first], s[first], run_end[last]
    dev_first = np.concatenate([[True], m_dev[1:] != m_dev[:-1]])
    dev_last = np.append(m_dev[1:] != m_dev[:-1], True)
    lo, hi = window
    # before each merged interval: from the previous one's end (or the window start) to its start
    gap_start = np.where(dev_first, lo, np.roll(m_end, 1))
    lead = Gaps(m_dev, gap_start, m_start, order[first])
    tail = Gaps(m_dev[dev_last], m_end[dev_last], np.full(int(dev_last.sum()), hi, np.int64),
                np.full(int(dev_last.sum()), -1, np.int64))
    gaps = Gaps(*(np.concatenate([getattr(lead, f), getattr(tail, f)]) for f in Gaps.__dataclass_fields__))
    keep = gaps.end_ns > gaps.start_ns
    return Gaps(*(getattr(gaps, f)[keep] for f in Gaps.__dataclass_fields__))


def cut_by_steps(start_ns: np.ndarray, end_ns: np.ndarray, steps: Steps) -> tuple[np.ndarray, ...]:
    """Pieces of each interval between consecutive step boundaries: (source index, start, end, step)."""
    table = steps.table
    bounds = np.unique(np.concatenate([table["start_ns"].to_numpy(np.int64), table["end_ns"].to_numpy(np.int64)]))
    lo = np.searchsorted(bounds, start_ns, side="right")
    hi = np.searchsorted(bounds, end_ns, side="left")
    inner = np.maximum(hi - lo, 0)
    src = np.repeat(np.arange(len(start_ns)), inner + 1)
    j = np.arange(len(src)) - np.repeat(np.cumsum(inner + 1) - (inner + 1), inner + 1)
    cut_at = bounds[np.minimum(lo[src] + j, len(bounds) - 1)] if len(bounds) else np.zeros(len(src), np.int64)
    piece_start = np.where(j == 0, start_ns[src], bounds[np.maximum(lo[src] + j - 1, 0)] if len(bounds) else 0)
    piece_end = np.where(j == inner[src], end_ns[src], cut_at)
    return src, piece_start, piece_end, steps.assign(piece_start)


@dataclass
class IssuedPath:
    """Per device-view row, what the time between its launch call and its start was."""

    floor_end_ns: np.ndarray  # L + t_floor (read only where ``carrier``)
    wait_start_ns: np.ndarray  # S − dependency_wait: where the launch latency ends (read where ``carrier``)
    carrier: np.ndarray  # a kernel that is the first activity of its launch call
    is_kernel: np.ndarray  # kind kernel (not memcpy/memset)


def attribute_idle(views: Views, dev_api: np.ndarray, lanes: LaneLabels, steps: Steps,
                   window: tuple[int, int], issued_path: IssuedPath, diags: Diagnostics) -> pd.DataFrame:
    """One row per attributed idle piece (columns ``COLUMNS``), see module docstring. Pieces before
    a launch are held to a budget linear in the events (lane_labels.py): the gaps summarised to
    keep it are counted (``decompose.idle_summarised``)."""
    dev, api = views.device, views.api
    gaps = device_gaps(np.asarray(dev.device, np.int64), dev.start_ns, dev.end_ns, window)
    launch = np.where(gaps.next_row >= 0, take_or(dev_api, gaps.next_row), -1)
    issued = np.clip(take_or(api.start_ns, launch), gaps.start_ns, gaps.end_ns)
    has_launch = launch >= 0
    next_corr = np.where(gaps.next_row >= 0, take_or(dev.correlation, gaps.next_row), -1)
    pending = has_launch & (gaps.end_ns > issued)
    parts = [_fixed_pieces(gaps, mask, s, e, CAUSES.index(cause), next_corr, steps)
             for mask, s, e, cause in _issued_pieces(gaps, pending, issued, issued_path)]
    fixed = [  # (mask, start, end, cause)
        ((gaps.next_row >= 0) & ~has_launch, gaps.start_ns, gaps.end_ns, "unlinked"),
        (gaps.next_row < 0, gaps.start_ns, gaps.end_ns, "nothing_pending")]
    parts += [_fixed_pieces(gaps, mask, s, e, CAUSES.index(cause), next_corr, steps) for mask, s, e, cause in fixed]
    host = has_launch & (issued > gaps.start_ns)
    parts.append(_host_pieces(lanes, steps, gaps.device[host], api.lane[launch[host]],
                              gaps.start_ns[host], issued[host], next_corr[host], diags))
    return _frame(views, parts)


def issued_path(kernels: pd.DataFrame) -> IssuedPath:
    """The :class:`IssuedPath` of the device view from ``Analysis.kernels`` (one row per view row)."""
    is_kernel = (kernels["kind"] == "kernel").to_numpy(bool)
    carrier = is_kernel & kernels["first_of_launch"].to_numpy(bool) & kernels["launch_start_ns"].notna().to_numpy()
    t_floor = kernels["t_floor_ns"].to_numpy(np.int64, na_value=0)
    floor_end = kernels["launch_start_ns"].to_numpy(np.int64, na_value=0) + t_floor
    wait_start = kernels["start_ns"].to_numpy(np.int64) - kernels["dependency_wait_ns"].to_numpy(np.int64, na_value=0)
    return IssuedPath(floor_end, wait_start, carrier, is_kernel)


def _issued_pieces(gaps: Gaps, pending: np.ndarray, issued: np.ndarray, path: IssuedPath) -> list[tuple]:
    """The issued part [issued, gap end) of each gap, split by what the next work was.

    For a carrier kernel the floor piece ends at L + t_floor (clipped into the
    gap), so the latency piece is S − max(L + t_floor, G): the kernel's
    ``launch_latency_ns`` plus its ``dependency_wait_ns`` (dependency.py), which
    is the piece's last part: the latency piece equals ``launch_latency_ns`` exactly
    (launch_split.py; G = the gap start).
    """
    row = np.where(pending, gaps.next_row, 0)
    kernel = pending & take_or(path.is_kernel, row, False).astype(bool)
    carrier = kernel & take_or(path.carrier, row, False).astype(bool)
    floor_end = np.clip(take_or(path.floor_end_ns, row), issued, gaps.end_ns)  # used where carrier only
    wait_start = np.clip(take_or(path.wait_start_ns, row), floor_end, gaps.end_ns)
    return [(carrier, issued, floor_end, "launch_floor"),
            (carrier, floor_end, wait_start, "launch_latency"),
            (carrier, wait_start, gaps.end_ns, "dependency_wait"),
            (kernel & ~carrier, issued, gaps.end_ns, "graph_internal"),
            (pending & ~kernel, issued, gaps.end_ns, "copy_issued")]


def _fixed_pieces(gaps: Gaps, mask, start, end, cause: int, next_corr, steps: Steps) -> dict:
    idx = np.flatnonzero(mask)
    src, s, e, step = cut_by_steps(start[idx], end[idx], steps)
    keep = e > s
    src = idx[src[keep]]
    return {"device": gaps.device[src], "start_ns": s[keep], "end_ns": e[keep],
            "cause": np.full(int(keep.sum()), cause, np.int8), "step": step[keep],
            "lane": np.full(int(keep.sum()), -1, np.int64), "next_correlation": next_corr[src]}


def _host_pieces(lanes: LaneLabels, steps: Steps, device, lane, start, end, next_corr, diags: Diagnostics) -> dict:
    """Host-side idle pieces labelled by what their launching thread was doing: the
    host partition's own segments (``LaneLabels``), cut at the query's ends."""
    src, q0, q1, q_step = cut_by_steps(start, end, steps)
    keep = q1 > q0
    src, q0, q1, q_step = src[keep], q0[keep], q1[keep], q_step[keep]
    q_lane = lane[src]
    got = lanes.pieces(q_lane, q0, q1, budget=True)
    qid, p_start, p_end, label = got.query, got.start_ns, got.end_ns, got.label
    n_summarised = len(np.unique(qid[got.summarised]))
    if n_summarised:
        diags.add("decompose.idle_summarised", n_summarised,
                  f"{n_summarised} idle gaps span more host segments than the linear budget (many devices fed "
                  "by one thread): one piece per cause, sums exact, placement inside the gap not kept")
    if len(qid) == 0:
        empty = np.zeros(0, np.int64)
        return {"device": empty, "start_ns": empty, "end_ns": empty, "cause": np.zeros(0, np.int8),
                "step": empty, "lane": empty, "next_correlation": empty}
    cause = _CAUSE_OF_LABEL[label]
    # Python/untraced time inside a run beyond the stall threshold (docs/method.md §7.1); a summarised
    # query's pieces have it already (their starts are not the segments')
    exact = np.flatnonzero(~got.summarised)
    cause[exact[lanes.in_stall(q_lane[qid[exact]], p_start[exact])]] = CAUSES.index("host_stall")
    new = np.ones(len(qid), bool)  # merge consecutive pieces of one query with one cause
    new[1:] = (qid[1:] != qid[:-1]) | (cause[1:] != cause[:-1])
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(qid) - 1)
    q = qid[first]
    return {"device": device[src[q]], "start_ns": p_start[first], "end_ns": p_end[last],
            "cause": cause[first], "step": q_step[q], "lane": q_lane[q], "next_correlation": next_corr[src[q]]}


def _frame(views: Views, parts: list[dict]) -> pd.DataFrame:
    """The pieces as one frame in (device, start) order. Built a column at a time, each
    piece array let go once gathered, and handed to pandas without a copy: at 10 M
    events the frame has ~3 M rows, and whole-frame temporaries cost ~0.5 GB."""
    def gathered(key: str) -> np.ndarray:
        return np.concatenate([p.pop(key) for p in parts])[order]

    order = np.lexsort((np.concatenate([p["start_ns"] for p in parts]),
                        np.concatenate([p["device"] for p in parts])))
    cols = {key: gathered(key).astype(np.int64, copy=False) for key in ("device", "start_ns", "end_ns")}
    cols["cause"] = pd.Categorical.from_codes(gathered("cause"), categories=list(CAUSES))
    cols["step"] = gathered("step").astype(np.int64, copy=False)
    lane = gathered("lane")
    has = lane >= 0
    cols["pid"] = _nullable(take_or(views.lane_pid, lane), has)
    cols["tid"] = _nullable(take_or(views.lane_tid, lane), has)
    del lane
    next_corr = gathered("next_correlation")
    cols["next_correlation"] = _nullable(next_corr, next_corr >= 0)
    return pd.DataFrame(cols, copy=False)


def _nullable(values: np.ndarray, valid: np.ndarray) -> pd.Series:
    return pd.Series(pd.arrays.IntegerArray(np.where(valid, values, 0).astype(np.int64), ~np.asarray(valid, bool)))


def window_pieces(window: tuple[int, int], steps: Steps) -> tuple[np.ndarray, np.ndarray]:
    """Elapsed time of the window per step (step id, ns): each instant counted once."""
    _, s, e, step = cut_by_steps(np.array([window[0]], np.int64), np.array([window[1]], np.int64), steps)
    return step, e - s
