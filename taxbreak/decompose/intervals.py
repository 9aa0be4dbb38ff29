"""Vectorized interval queries shared by the decomposer.

All functions take plain int64 numpy arrays (times in ns) and never loop over
events in Python: they sort once and answer with ``np.searchsorted``.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace.nesting import lane_clock, nesting, small_lanes


def innermost_enclosing(
    iv_lane: np.ndarray,
    iv_start_ns: np.ndarray,
    iv_end_ns: np.ndarray,
    q_lane: np.ndarray,
    q_time_ns: np.ndarray,
) -> np.ndarray:
    """Index of the innermost interval on the same lane that contains each query time.

    The queries are added as zero-length intervals to one nesting sweep
    (:func:`taxbreak.trace.nesting.nesting`); a query's parent is then its
    innermost enclosing interval. An interval that starts exactly at the query
    time encloses it (a zero-length interval sorts after it); one that ends
    exactly there does not.

    Args:
        iv_lane, iv_start_ns, iv_end_ns: the candidate intervals.
        q_lane, q_time_ns: the query points.

    Returns:
        int64 array, one per query: index into the interval arrays, or -1.
    """
    n_iv, n_q = len(iv_start_ns), len(q_time_ns)
    found = np.full(n_q, -1, dtype=np.int64)
    if n_iv == 0 or n_q == 0:
        return found
    fast = _enclosing_disjoint(iv_lane, iv_start_ns, iv_end_ns, q_lane, q_time_ns)
    if fast is not None:
        return fast
    lane = np.concatenate([np.asarray(iv_lane, np.int64), np.asarray(q_lane, np.int64)])
    start = np.concatenate([np.asarray(iv_start_ns, np.int64), np.asarray(q_time_ns, np.int64)])
    dur = np.concatenate([np.maximum(np.asarray(iv_end_ns) - np.asarray(iv_start_ns), 0), np.zeros(n_q, np.int64)])
    _, parent = nesting(lane, start, dur)
    q_parent = parent[n_iv:]
    ok = (q_parent >= 0) & (q_parent < n_iv)
    cand = q_parent[ok]
    t = np.asarray(q_time_ns)[ok]
    # nesting() returns the nearest open predecessor for broken (overlapping)
    # intervals: keep it only if it really contains the query time.
    inside = (iv_start_ns[cand] <= t) & (t < iv_end_ns[cand]) | (iv_start_ns[cand] == t)
    found[np.flatnonzero(ok)[inside]] = cand[inside]
    return found


def _enclosing_disjoint(iv_lane, iv_start_ns, iv_end_ns, q_lane, q_time_ns) -> np.ndarray | None:
    """:func:`innermost_enclosing` when no two intervals of a lane overlap (e.g. the outermost
    ATen ops), else ``None``.

    Then the only candidate is the last interval starting at or before the query
    time: one sort of the intervals and one binary search per query instead of
    a nesting sweep over both. A zero-length interval encloses nothing (in the
    sweep it is closed before the query opens), hence the strict ``t < end``.
    """
    iv_lane, q_lane = np.asarray(iv_lane, np.int64), np.asarray(q_lane, np.int64)
    start, end, t = (np.asarray(a, np.int64) for a in (iv_start_ns, iv_end_ns, q_time_ns))
    lanes, n_lanes = small_lanes(np.concatenate([iv_lane, q_lane]))
    clock = lane_clock(n_lanes, [start, end, t])
    start_key = clock.key(lanes[:len(start)], start)
    order = np.lexsort((-end, start_key))
    s_key, s_lane, s_end = start_key[order], lanes[:len(start)][order], end[order]
    if (end[order] < start[order]).any() or ((s_lane[1:] == s_lane[:-1]) & (start[order][1:] < s_end[:-1])).any():
        return None
    pos = np.searchsorted(s_key, clock.key(lanes[len(start):], t), side="right") - 1
    cand = order[np.maximum(pos, 0)]
    inside = (pos >= 0) & (lanes[:len(start)][cand] == lanes[len(start):]) & (t < end[cand])
    return np.where(inside, cand, -1)


def union_intervals(start_ns: np.ndarray, end_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge intervals into disjoint sorted ``(start, end)`` arrays (overlaps counted once)."""
    if len(start_ns) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    order = np.argsort(start_ns, kind="stable")
    s = np.asarray(start_ns, np.int64)[order]
    e = np.asarray(end_ns, np.int64)[order]
    run_end = np.maximum.accumulate(e)
    # a new merged interval begins where the start lies past every earlier end
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > run_end[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(s) - 1)
    return s[first], run_end[last]


def covered_before(u_start_ns: np.ndarray, u_end_ns: np.ndarray, t_ns: np.ndarray) -> np.ndarray:
    """Covered time in ``(-inf, t]`` of a disjoint sorted union, for each ``t``.

    ``covered_before(b) - covered_before(a)`` is the overlap of ``[a, b)`` with the union.
    """
    t = np.asarray(t_ns, np.int64)
    if len(u_start_ns) == 0:
        return np.zeros(len(t), np.int64)
    # a sentinel at or before every t: index 0 = "no interval started yet", length 0
    u_start = np.concatenate([[min(int(u_start_ns[0]), int(t.min()) if len(t) else 0)], u_start_ns])
    u_len = np.concatenate([[0], u_end_ns - u_start_ns])
    cum = np.cumsum(u_len) - u_len  # covered time before each interval starts
    prev = np.searchsorted(u_start, t, side="right") - 1  # last interval starting at or before t (0 = none)
    # in place on one array: partial coverage of the interval ``prev``, then the full ones before it
    out = t - u_start[prev]
    np.clip(out, 0, u_len[prev], out=out)
    out += cum[prev]
    return out


def take_or(values: np.ndarray, idx: np.ndarray, fill: int = -1) -> np.ndarray:
    """``values[idx]`` where ``idx >= 0``, else ``fill`` (safe when ``values`` is empty)."""
    idx = np.asarray(idx, np.int64)
    if len(values) == 0:
        return np.full(len(idx), fill, dtype=np.int64)
    return np.where(idx >= 0, values[np.maximum(idx, 0)], fill)


def unique_inverse(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct values and the position of each value among them.

    One stable argsort (timsort: the concatenated, already time-ordered
    boundary arrays sort in near-linear time) instead of a sort plus a
    binary search per value.
    """
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    new = np.empty(len(ordered), dtype=bool)
    if len(ordered):
        new[0] = True
        np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
    distinct = ordered[new]
    del ordered
    # positions fit int32 below 2**31 values: half the memory of the two largest arrays here
    index_type = np.int32 if len(values) < 2**31 else np.int64
    rank = np.cumsum(new, dtype=index_type)
    del new
    rank -= 1
    inverse = np.empty(len(values), dtype=index_type)
    inverse[order] = rank
    return distinct, inverse


def dense_pairs(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Dense id of each ``(a, b)`` pair (in sorted pair order), and the distinct ``a``, ``b``.

    Pairs are packed into one order-preserving int64 and hashed
    (``pd.factorize``): a trace has few distinct (pid, tid) pairs, so ranking
    the distinct keys is cheap, where sorting ten million pairs is not.
    """
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    if len(a) == 0:
        return np.zeros(0, np.int64), a[:0], b[:0]
    a_lo, b_lo = int(a.min()), int(b.min())
    width = int(b.max()) - b_lo + 1
    if (int(a.max()) - a_lo + 1) * width >= 2**62:
        return _dense_pairs_lexsort(a, b)
    # the key is built in place: one array of len(a), not four (~120 MB at 5 M rows)
    key = a - a_lo
    key *= np.int64(width)
    key += b
    key -= b_lo
    codes, uniques = pd.factorize(key, sort=True)
    del key
    return codes.astype(np.int64, copy=False), uniques // width + a_lo, uniques % width + b_lo


def _dense_pairs_lexsort(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`dense_pairs` for ids too far apart to pack into one int64."""
    order = np.lexsort((b, a))
    sa, sb = a[order], b[order]
    new = np.ones(len(a), dtype=bool)
    new[1:] = (sa[1:] != sa[:-1]) | (sb[1:] != sb[:-1])
    ids = np.empty(len(a), dtype=np.int64)
    ids[order] = np.cumsum(new) - 1
    return ids, sa[new], sb[new]


def running_end(g: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Running maximum of ``e`` within each group of rows sorted by (group, start) (the end of
    the merged busy interval each row belongs to so far)."""
    width = int(e.max()) - int(s.min()) + 1
    if (int(g.max()) + 1) * width < 2**62:
        shift = g * np.int64(width) - s.min()
        return np.maximum.accumulate(e + shift) - shift
    # shifted times would overflow int64 (a span of days times thousands of groups): one pass per group
    bounds = np.flatnonzero(np.concatenate([[True], g[1:] != g[:-1], [True]]))
    return np.concatenate([np.maximum.accumulate(e[a:b]) for a, b in zip(bounds[:-1], bounds[1:])])


def merged_by_group(group: np.ndarray, start_ns: np.ndarray, end_ns: np.ndarray) -> tuple[np.ndarray, ...]:
    """Disjoint merged ``(group, start, end)`` intervals per group (``group < 0`` ignored)."""
    keep = np.flatnonzero(group >= 0)
    g, s, e = group[keep], np.asarray(start_ns, np.int64)[keep], np.asarray(end_ns, np.int64)[keep]
    if len(s) == 0:
        return (np.zeros(0, np.int64),) * 3
    order = np.lexsort((s, g))
    g, s, e = g[order], s[order], e[order]
    run_end = running_end(g, s, e)
    new = np.ones(len(s), dtype=bool)
    new[1:] = (g[1:] != g[:-1]) | (s[1:] > run_end[:-1])  # a group's first row opens a new interval
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(s) - 1)
    return g[first], s[first], run_end[last]
