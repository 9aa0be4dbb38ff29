"""Nesting depth and parent of intervals on one thread, without a Python loop.

Host events on one (pid, tid) nest like a call stack. With events sorted by
(lane, start asc, end desc) — so an enclosing event comes before the events
it encloses even when they start at the same ns — the depth of event i is the
number of earlier events on its lane still open at its start:

    depth_i = #{j < i on lane} − #{j on lane : end_j <= start_i}

and its parent is the last earlier event on the lane with depth_i − 1. Both are
computed with ``np.searchsorted`` over sorted arrays (docs/trace-model.md).
Intervals that overlap without nesting (clock skew, broken traces) still get a
depth (the number of open intervals) and the nearest open predecessor.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_KEY_LIMIT = 2**62  # packed keys stay well inside int64


def nesting(lane: np.ndarray, start_ns: np.ndarray, dur_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Depth and parent index of each interval.

    Args:
        lane: int64 lane key per interval (e.g. a dense thread index).
        start_ns: int64 start per interval.
        dur_ns: int64 non-negative duration per interval.

    Returns:
        ``(depth, parent)``: int32 depth (0 = outermost) and int64 index into
        the input arrays of the innermost enclosing interval (-1 for none).
    """
    n = len(start_ns)
    depth = np.zeros(n, dtype=np.int32)
    parent = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return depth, parent
    start = np.asarray(start_ns, np.int64)
    end = start + np.asarray(dur_ns, np.int64)
    lanes, n_lanes = small_lanes(np.asarray(lane, np.int64))
    clock = lane_clock(n_lanes, [start, end])
    start_key = clock.key(lanes, start)
    order = np.lexsort((-end, start_key))
    start_key = start_key[order]
    s_lane = lanes[order]
    del lanes
    end_key = np.sort(clock.key(s_lane, end[order]))
    # Ends of earlier lanes are exactly the intervals of earlier lanes, so the
    # per-lane offsets of opened and closed counts cancel:
    #   depth_i = (i − first_i) − (#end_key <= start_key_i − first_i)
    closed = np.searchsorted(end_key, start_key, side="right")
    del end_key
    closed -= _zero_length_after(start_key, start[order] == end[order])
    s_depth = np.maximum(np.arange(n) - closed, 0).astype(np.int32)
    del closed, start_key
    s_parent = _last_with_depth(s_lane, s_depth)
    depth[order] = s_depth
    has_parent = s_parent >= 0
    parent[order[has_parent]] = order[s_parent[has_parent]]
    return depth, parent


@dataclass(frozen=True)
class LaneClock:
    """Packs (lane, time) into one int64 key that sorts like the pair.

    ``key = lane × width + offset(time)``: the offset is ``time − base`` when
    every lane's span fits (no sort needed), else the rank of the time among
    ``values`` (the sorted distinct times), so the key cannot overflow
    whatever the clock origin.
    """

    base: int
    width: int
    values: np.ndarray | None = None

    def key(self, lane: np.ndarray, time_ns: np.ndarray) -> np.ndarray:
        """One key per (lane, time)."""
        return self.key_into(np.empty(len(time_ns), np.int64), lane, time_ns)

    def key_into(self, out: np.ndarray, lane: np.ndarray, time_ns: np.ndarray) -> np.ndarray:
        """:meth:`key` written into ``out`` (a slice of a larger key array): one
        temporary (the lane term) instead of three, ~40 MB each at 10 M events.
        The time offset goes in first, so no sum leaves int64 that the packed key
        itself would not."""
        if self.values is None:
            np.subtract(time_ns, np.int64(self.base), out=out)
        else:
            out[:] = np.searchsorted(self.values, time_ns)
        out += np.multiply(lane, np.int64(self.width), dtype=np.int64)  # the lane term: one temporary
        return out

    def split(self, key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(lane, time_ns)`` of each key."""
        lane, offset = np.divmod(key, np.int64(self.width))
        if self.values is not None:
            return lane, self.values[offset]
        offset += np.int64(self.base)  # in place: the offsets become the times
        return lane, offset


def lane_clock(n_lanes: int, times: list[np.ndarray]) -> LaneClock:
    """The cheapest :class:`LaneClock` for ``n_lanes`` lanes and these times."""
    times = [t for t in times if len(t)]
    if not times:
        return LaneClock(0, 1)
    lo = min(int(t.min()) for t in times)
    hi = max(int(t.max()) for t in times)
    if max(n_lanes, 1) * (hi - lo + 2) < _KEY_LIMIT:
        return LaneClock(lo, hi - lo + 2)
    values = sorted_unique(np.concatenate(times))
    return LaneClock(0, len(values) + 1, values)


def small_lanes(lane: np.ndarray) -> tuple[np.ndarray, int]:
    """Lane ids usable as key multipliers, and their count bound.

    Dense thread indices (``0 <= lane <= n``) pass through; arbitrary ids
    (negative or huge) are replaced by their rank, which keeps their order.
    """
    if len(lane) == 0:
        return lane, 0
    lo, hi = int(lane.min()), int(lane.max())
    if lo >= 0 and hi <= len(lane):
        return lane, hi + 1
    values = sorted_unique(lane)
    return np.searchsorted(values, lane).astype(np.int64), len(values)


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """``np.unique`` by sorting: numpy 2.4's hash-based ``np.unique`` takes ~2 s
    on 670 k distinct int64 times where a sort takes ~20 ms."""
    ordered = np.sort(np.asarray(values))
    if len(ordered) < 2:
        return ordered
    keep = np.empty(len(ordered), dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


def _zero_length_after(start_key: np.ndarray, is_zero: np.ndarray) -> np.ndarray:
    """How many zero-length intervals at the same (lane, time) come at or after
    each sorted position. They count as "ended by start_i" in the closed count
    but have not been opened yet, so they must be taken back out.

    Equal keys are contiguous and zero-length intervals sort last among them
    (end descending), so this is the run's zero count minus the zeros before
    position i within the run — one linear pass, no search.
    """
    n = len(start_key)
    if not is_zero.any():
        return np.zeros(n, dtype=np.int64)
    zeros_through = np.cumsum(is_zero, dtype=np.int64)
    run_last = np.flatnonzero(np.append(start_key[1:] != start_key[:-1], True))
    run_of = np.repeat(np.arange(len(run_last)), np.diff(run_last, prepend=-1))
    return zeros_through[run_last[run_of]] - zeros_through + is_zero


def _last_with_depth(s_lane: np.ndarray, s_depth: np.ndarray) -> np.ndarray:
    """For each sorted position i, the last position j < i on the same lane with
    depth_j == depth_i - 1, or -1."""
    n = len(s_lane)
    n_depth = np.int64(int(s_depth.max()) + 2)
    # group = (lane, depth); a stable sort of the small group ids (a radix sort
    # when they fit in 16 bits) orders the packed (group, position) keys
    group = s_lane * n_depth + s_depth
    narrow = group.astype(np.uint16) if int(group.max()) < 2**16 else group
    order = np.argsort(narrow, kind="stable")
    del narrow
    key = group[order] * np.int64(n + 1) + order
    # probe (group − 1, i) for each key: in key order the probes are sorted too,
    # which keeps the binary searches local
    idx = np.searchsorted(key, key - np.int64(n + 1), side="left") - 1
    del key
    found = np.full(n, -1, dtype=np.int64)
    ok = (idx >= 0) & (s_depth[order] > 0)
    cand, at = order[idx[ok]], order[ok]
    match = group[cand] == group[at] - 1
    found[at[match]] = cand[match]
    return found
