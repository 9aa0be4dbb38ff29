"""Nesting depth/parent against a brute-force call-stack walk."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from taxbreak.trace.nesting import nesting


def _brute(lane, start, dur):
    """Reference: walk each lane in (start asc, end desc) order with a stack."""
    n = len(start)
    end = [s + d for s, d in zip(start, dur)]
    order = sorted(range(n), key=lambda i: (lane[i], start[i], -end[i], i))
    depth, parent = [0] * n, [-1] * n
    stack: list[int] = []
    current_lane = None
    for i in order:
        if lane[i] != current_lane:
            stack, current_lane = [], lane[i]
        while stack and end[stack[-1]] <= start[i] and not (
            end[stack[-1]] == start[i] == start[stack[-1]] and end[i] > start[i]
        ):
            stack.pop()
        depth[i] = len(stack)
        parent[i] = stack[-1] if stack else -1
        stack.append(i)
    return depth, parent


@st.composite
def _nested_intervals(draw):
    """Properly nested intervals, built recursively so the answer is known."""
    out: list[tuple[int, int, int]] = []

    def fill(lane: int, lo: int, hi: int, level: int) -> None:
        cursor = lo
        for _ in range(draw(st.integers(0, 3 if level < 3 else 0))):
            if cursor >= hi:
                break
            s = draw(st.integers(cursor, hi))
            e = draw(st.integers(s, hi))
            out.append((lane, s, e - s))
            if e > s:
                fill(lane, s, e, level + 1)
            cursor = e if e > s else s + 1

    for lane in range(draw(st.integers(1, 3))):
        fill(lane, 0, 1000, 0)
    return out


def test_planted_example():
    lane = np.array([0, 0, 0, 0, 0, 1, 1, 0])
    start = np.array([0, 10, 12, 30, 10, 5, 5, 10])
    dur = np.array([100, 20, 3, 5, 0, 10, 2, 0])
    depth, parent = nesting(lane, start, dur)
    assert depth.tolist() == [0, 1, 2, 1, 2, 0, 1, 2]
    assert parent.tolist() == [-1, 0, 1, 0, 1, -1, 5, 1]


def test_empty():
    depth, parent = nesting(np.array([], dtype=np.int64), np.array([], dtype=np.int64), np.array([], dtype=np.int64))
    assert len(depth) == 0 and len(parent) == 0


@settings(max_examples=200, deadline=None)
@given(_nested_intervals())
def test_depth_matches_stack_walk(intervals):
    lane = np.array([i[0] for i in intervals], dtype=np.int64)
    start = np.array([i[1] for i in intervals], dtype=np.int64)
    dur = np.array([i[2] for i in intervals], dtype=np.int64)
    depth, parent = nesting(lane, start, dur)
    ref_depth, ref_parent = _brute(lane.tolist(), start.tolist(), dur.tolist())
    assert depth.tolist() == ref_depth
    # Parents may differ only between identical intervals (same lane, start, end).
    for i, (got, want) in enumerate(zip(parent.tolist(), ref_parent)):
        if got != want:
            assert (lane[got], start[got], dur[got]) == (lane[want], start[want], dur[want]), i
