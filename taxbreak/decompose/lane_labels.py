"""The host partition's labelled segments, queried by the idle attribution and the T_py stalls.

A query ``[q0, q1)`` on a lane is cut at the lane's segment boundaries into
pieces, each with the label of its segment. One device's idle gaps are
disjoint, so over one device the pieces number at most the segments plus the
gaps. Many devices fed by one thread are not: each device's gap covers what
the thread did for all the others, and exact pieces grew as devices × events
(4,096 devices in a 100 KB trace: 4.9 GB, 80 s). The pieces are therefore
held to a budget linear in the segments and queries
(``PIECE_BUDGET_FACTOR × segments + 9 × queries``, 9 = the labels): the queries that cross the
most boundaries, as few as keep the rest within it, are summarised. A
summarised query gives one piece per label it holds, each exactly that
label's ns inside the query (prefix sums over the segments), laid end to end
from ``q0`` in label order: every sum per label is exact, only the placement
inside that query is not kept (``summarised`` says which pieces).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .host_labels import HOST_STALL, LABELS, UNTRACED

PIECE_BUDGET_FACTOR = 4


@dataclass
class LanePieces:
    """Pieces of queries, in query order and start order within one."""

    query: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    label: np.ndarray
    summarised: np.ndarray  # bool: a piece of a summarised query (module doc)


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
    # (lane, start, end) of the Python/untraced runs beyond the stall threshold (length rule)
    stall_runs: tuple = (np.zeros(0, np.int64),) * 3

    def in_stall(self, lane: np.ndarray, t_ns: np.ndarray) -> np.ndarray:
        """Whether each ``(lane, t_ns)`` lies in a length-rule stall run (one search per lane
        that has runs: few)."""
        out = np.zeros(len(t_ns), bool)
        r_lane, r_start, r_end = self.stall_runs
        for k in np.unique(r_lane):
            mine = r_lane == k
            s, e = r_start[mine], r_end[mine]  # disjoint, in time order
            at = np.flatnonzero(lane == k)
            pos = np.searchsorted(s, t_ns[at], side="right") - 1
            out[at] = (pos >= 0) & (t_ns[at] < e[np.maximum(pos, 0)])
        return out

    def pieces(self, lane: np.ndarray, q0: np.ndarray, q1: np.ndarray, budget: bool = False) -> LanePieces:
        """``[q0, q1)`` on ``lane`` (q1 > q0) cut at the segment boundaries. With ``budget``
        the pieces are held to the module doc's budget (long queries summarised).
        One vectorized search per lane that has queries (a trace has few lanes)."""
        p0, p1 = np.zeros(len(q0), np.int64), np.zeros(len(q0), np.int64)
        groups = list(_by_lane(lane))
        for k, idx in groups:
            t = self._times(int(k))
            p0[idx] = np.searchsorted(t, q0[idx], side="right")  # boundaries strictly inside the query
            p1[idx] = np.searchsorted(t, q1[idx], side="left")  # are t[p0] .. t[p1 - 1]
        limit = PIECE_BUDGET_FACTOR * len(self.t_ns) + len(LABELS) * len(q0)
        long = _over_budget(p1 - p0 + 1, limit) if budget else np.zeros(len(q0), bool)
        parts = []
        for k, idx in groups:
            for summarise in (False, True):
                mine = idx[long[idx] == summarise]
                if len(mine):
                    make = self._lane_summary if summarise else self._lane_pieces
                    parts.append(make(int(k), mine, q0[mine], q1[mine], p0[mine], p1[mine]))
        if not parts:
            empty = np.zeros(0, np.int64)
            return LanePieces(empty, empty, empty, np.zeros(0, np.int8), np.zeros(0, bool))
        query, start, end, label, summarised = (np.concatenate(col) for col in zip(*parts))
        order = np.lexsort((start, query))
        return LanePieces(query[order], start[order], end[order], label[order], summarised[order])

    def _times(self, k: int) -> np.ndarray:
        return self.t_ns[self.lane_start[k]:self.lane_start[k + 1]]

    def _labels(self, k: int) -> np.ndarray:
        return self.label[self.lane_start[k]:max(self.lane_start[k + 1] - 1, self.lane_start[k])]

    def _lane_pieces(self, k: int, idx, q0, q1, p0, p1) -> tuple[np.ndarray, ...]:
        t, lab = self._times(k), self._labels(k)
        count = p1 - p0 + 1
        qid = np.repeat(np.arange(len(q0)), count)
        j = np.arange(len(qid)) - np.repeat(np.cumsum(count) - count, count)
        at = p0[qid] + j  # the boundary that ends piece j (the query's end for the last)
        last = j == count[qid] - 1
        top = max(len(t) - 1, 0)
        start = np.where(j == 0, q0[qid], t[np.clip(at - 1, 0, top)] if len(t) else 0)
        end = np.where(last, q1[qid], t[np.clip(at, 0, top)] if len(t) else 0)
        label = _segment_labels(lab, at - 1)  # none before the first or after the last boundary
        return idx[qid], start, end, label, np.zeros(len(qid), bool)

    def _lane_summary(self, k: int, idx, q0, q1, p0, p1) -> tuple[np.ndarray, ...]:
        """One piece per label held by each query, its exact ns, laid end to end from ``q0``.
        The pieces' stall runs are read here, on the true segment starts."""
        t, lab = self._times(k), self._labels(k)
        ns = np.zeros((len(q0), len(LABELS)), np.int64)
        # the two edge pieces: [q0, t[p0]) and [t[p1 - 1], q1), or [q0, q1) when no boundary is inside
        inner = p1 > p0
        head_end = np.where(inner, t[np.minimum(p0, max(len(t) - 1, 0))] if len(t) else q1, q1)
        tail_start = np.where(inner, t[np.clip(p1 - 1, 0, max(len(t) - 1, 0))] if len(t) else q0, q1)
        rows = np.arange(len(q0))
        for seg, s, e in ((p0 - 1, q0, head_end), (p1 - 1, tail_start, q1)):
            label = self._stalled(k, _segment_labels(lab, seg), s)
            np.add.at(ns, (rows, label), e - s)
        # whole segments p0 .. p1 - 2 in between: one prefix sum per label present
        if len(lab):
            seg_label = self._stalled(k, lab, t[:-1])
            dur = np.diff(t)
            first, stop = np.minimum(p0, len(lab)), np.clip(p1 - 1, 0, len(lab))
            for label in np.unique(seg_label):
                cum = np.concatenate([[0], np.cumsum(np.where(seg_label == label, dur, 0))])
                ns[:, label] += np.where(stop > first, cum[stop] - cum[first], 0)
        q, label = np.nonzero(ns > 0)  # in query order, label order within one
        length = ns[q, label]
        total = ns.sum(axis=1)
        before = np.cumsum(length) - length  # over all queries: less the queries before this one
        start = q0[q] + before - np.repeat(np.cumsum(total) - total, (ns > 0).sum(axis=1))
        return idx[q], start, start + length, label.astype(np.int8), np.ones(len(q), bool)

    def _stalled(self, k: int, label: np.ndarray, start_ns: np.ndarray) -> np.ndarray:
        """``label`` with ``host_stall`` where a piece starts in a length-rule stall run."""
        out = label.copy()
        out[self.in_stall(np.full(len(start_ns), k), start_ns)] = HOST_STALL
        return out


def _segment_labels(lab: np.ndarray, seg: np.ndarray) -> np.ndarray:
    """The label of segment ``seg`` (``untraced`` outside the lane's segments)."""
    inside = (seg >= 0) & (seg < len(lab))
    label = np.full(len(seg), UNTRACED, np.int8)
    label[inside] = lab[seg[inside]]
    return label


def _over_budget(count: np.ndarray, budget: int) -> np.ndarray:
    """The queries to summarise: the fewest, longest first, that bring the pieces within ``budget``
    (a summarised query costs at most one piece per label)."""
    long = np.zeros(len(count), bool)
    if int(count.sum()) <= budget:
        return long
    order = np.argsort(count, kind="stable")
    summary = np.minimum(count[order], len(LABELS))  # at most one piece per label, never more than exact
    # pieces when the i + 1 shortest queries stay exact and the rest are summarised (non-decreasing in i)
    kept = np.cumsum(count[order]) + (int(summary.sum()) - np.cumsum(summary))
    n_exact = int(np.searchsorted(kept, budget, side="right"))
    long[order[n_exact:]] = True
    return long


def _by_lane(lane: np.ndarray):
    """``(lane, positions)`` of each distinct lane."""
    order = np.argsort(lane, kind="stable")
    lanes, first = np.unique(lane[order], return_index=True)
    return zip(lanes, np.split(order, first[1:]))
