"""The label of every host-partition segment (docs/method.md §7), without a Python loop.

Segments are the gaps between consecutive boundary keys (``pos`` = a boundary's rank).
API calls win by priority (the innermost for nested calls); outside them the
innermost host event decides: a Python frame nested inside an ATen or custom op is
``python``, the op's own time ``dispatch``. Blocking waits and data-loading frames
then relabel the Python time under them (``blocked``, ``host_stall``), and on the
threads that launch work, runs of Python/untraced time far above the trace's
per-op scale become ``host_stall`` (:func:`length_stalls`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..trace.nesting import nesting

LABELS = ("untraced", "python", "dispatch", "library", "other_api", "sync", "launch_api", "blocked", "host_stall")
UNTRACED, PYTHON, DISPATCH = 0, 1, 2
BLOCKED, HOST_STALL = LABELS.index("blocked"), LABELS.index("host_stall")
API_LABELS = ("library", "other_api", "sync", "launch_api")  # priority, low → high
STALL_MIN_NS = 1_000_000  # a stall is never shorter than 1 ms
STALL_FACTOR = 50  # … nor than 50 median Python runs


@dataclass
class HostIntervals:
    """Host events of the partition (markers and zero-length events left out)."""

    lane: np.ndarray
    start: np.ndarray
    end: np.ndarray
    cat: np.ndarray  # PYTHON or DISPATCH
    blocking: np.ndarray  # a blocking-wait frame (host_frames.BLOCKING_FRAME)
    stall: np.ndarray  # a data-loading / preprocessing frame (host_frames.STALL_FRAME)
    name_codes: np.ndarray


def priority_labels(n: int, s_pos: np.ndarray, e_pos: np.ndarray, cat: np.ndarray) -> np.ndarray:
    """Highest category open on each of the ``n`` segments (0 = none): a +1/−1 sweep per category."""
    label = np.zeros(n, dtype=np.int8)
    for c in sorted_unique_small(cat):
        mine = cat == c
        label[open_count(n, s_pos[mine], e_pos[mine]) > 0] = c
    return label


def sorted_unique_small(values: np.ndarray) -> list[int]:
    """The distinct small non-negative ints of ``values``, ascending."""
    return [int(c) for c in np.flatnonzero(np.bincount(values.astype(np.int64))) if c > 0] if len(values) else []


def open_count(n: int, s_pos: np.ndarray, e_pos: np.ndarray) -> np.ndarray:
    """How many of the intervals are open on each segment."""
    count = np.bincount(s_pos, minlength=n)
    count -= np.bincount(e_pos, minlength=n)
    np.cumsum(count, out=count)
    return count


def innermost_owner(n: int, s_pos: np.ndarray, e_pos: np.ndarray, host: HostIntervals,
                    lane_first: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per segment, the innermost host event open over it (-1: none), and the events' parents.

    The owner changes only at a host boundary: where events start, to the deepest of them;
    where events only end, to the parent of the outermost one ending; a lane's first
    boundary starts with none. Every other boundary keeps the owner (a forward fill).
    """
    depth, parent = nesting(host.lane, host.start, host.end - host.start)
    owner_at = np.full(n, -2, np.int64)
    owner_at[lane_first] = -1
    pos, ended = _last_of_group(e_pos, -depth.astype(np.int64))  # outermost of the events ending there
    owner_at[pos] = parent[ended]
    pos, started = _last_of_group(s_pos, depth.astype(np.int64))  # deepest of the events starting there
    owner_at[pos] = started
    at = np.where(owner_at != -2, np.arange(n), 0)
    np.maximum.accumulate(at, out=at)
    return owner_at[at], parent


def _last_of_group(pos: np.ndarray, rank: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each distinct position, the interval of highest ``rank`` there (later index on ties)."""
    order = np.lexsort((np.arange(len(pos)), rank, pos))
    p = pos[order]
    last = np.append(p[1:] != p[:-1], True) if len(p) else np.zeros(0, bool)
    return p[last], order[last]


def host_labels(n: int, s_pos: np.ndarray, e_pos: np.ndarray, host: HostIntervals,
                lane_first: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(label, owner, parent)`` of the host events alone: the innermost event's category,
    then ``blocked`` (Python time under a blocking wait) and ``host_stall`` (any host time
    under a data-loading frame). Where events overlap without nesting and the innermost
    rule finds no open event, the old priority (dispatch over python) decides."""
    owner, parent = innermost_owner(n, s_pos, e_pos, host, lane_first)
    has = owner >= 0
    safe = np.where(has, owner, 0)
    seg = np.arange(n)
    label = np.where(has, host.cat[safe] if len(host.cat) else 0, UNTRACED).astype(np.int8)
    broken = has & ((s_pos[safe] > seg) | (e_pos[safe] <= seg)) if len(host.cat) else has
    if broken.any():  # overlapping, unnested events: no innermost one
        fallback = priority_labels(n, s_pos, e_pos, host.cat)
        label[broken] = fallback[broken]
        owner = np.where(broken, -1, owner)
    blocked = open_count(n, s_pos[host.blocking], e_pos[host.blocking]) > 0
    label[blocked & (label == PYTHON)] = BLOCKED
    stalled = open_count(n, s_pos[host.stall], e_pos[host.stall]) > 0
    label[stalled & (label != UNTRACED)] = HOST_STALL
    return label, owner, parent


def runs(flag: np.ndarray, same_lane: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """First and last segment of each maximal run of flagged segments inside one lane
    (``same_lane[i]``: segment i lies inside a lane)."""
    on = flag & same_lane
    if not on.any():
        empty = np.zeros(0, np.int64)
        return empty, empty
    prev = np.concatenate([[False], on[:-1]])
    nxt = np.concatenate([on[1:], [False]])
    return np.flatnonzero(on & ~prev), np.flatnonzero(on & ~nxt)


def stall_threshold(label: np.ndarray, same_lane: np.ndarray, t: np.ndarray) -> int | None:
    """max(1 ms, 50 × the median Python run) of the launching threads, ``None`` without a
    Python run (no per-op scale to learn from). ``label``/``same_lane`` cover launching lanes only."""
    first, last = runs(label == PYTHON, same_lane)
    if not len(first):
        return None
    median = float(np.median(t[last + 1] - t[first]))
    return max(STALL_MIN_NS, int(round(STALL_FACTOR * median)))


def length_stalls(label: np.ndarray, same_lane: np.ndarray, t: np.ndarray, threshold: int | None) -> np.ndarray:
    """Segments of Python/untraced runs longer than ``threshold`` (bool per segment)."""
    out = np.zeros(len(label), bool)
    if threshold is None:
        return out
    first, last = runs((label == PYTHON) | (label == UNTRACED), same_lane)
    long = (t[last + 1] - t[first]) > threshold
    if long.any():
        mark = np.zeros(len(label) + 1, np.int64)
        np.add.at(mark, first[long], 1)
        np.add.at(mark, last[long] + 1, -1)
        out = np.cumsum(mark[:-1]) > 0
    return out
