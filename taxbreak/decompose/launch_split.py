"""Split each kernel's T_launch into floor, queue wait and launch latency (int ns).

For a kernel k launched at ``L`` (launch call start) that starts at ``S``::

    T_launch       = S − L = t_floor + queue_wait + launch_latency
    t_floor        = min(T_sys, T_launch)                         the launch path itself, first
    launch_latency = S − max(L + t_floor, G)   if k ends an idle gap [G, S) of its device, else 0
    queue_wait     = T_launch − t_floor − launch_latency

``G`` is the end of the device's previous work (any stream): the latest end
among the activities of the device that start before k. Launch latency is
thus the part of the kernel's wait during which its whole device was idle
and k was the next work to start: the launch path exposed to the device.
Everything else the kernel waited was spent behind device work — its own
stream's earlier kernels (running or still pending), other streams' kernels
it depended on through events or whose SMs it needed (cross-stream waits), a
graph's earlier nodes — or behind an earlier-starting launch that owned the
same idle gap. Each idle gap is owned by the one activity that ends it, so a
device's launch-latency pieces are disjoint and never exceed its idle time.

A CUDA graph's later nodes (not the first activity of their launch call)
have no launch path of their own: their whole T_launch is queue wait.
ΔKT = T_sys + launch_latency (+ the graph call's own host time beyond T_sys,
``kt_graph_ns``). Queue wait is device-side waiting, never host time.
docs/method.md §2.1.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .intervals import running_end

NONE = -1
NO_END = np.iinfo(np.int64).min


@dataclass
class LaunchSplit:
    """Per device activity (int64 ns, -1 where there is nothing to split)."""

    t_floor_ns: np.ndarray
    queue_wait_ns: np.ndarray
    launch_latency_ns: np.ndarray
    queue_start_ns: np.ndarray  # L + t_floor: the wait spans [queue_start, queue_start + queue_wait]
                                # when the kernel ends no idle gap; else it ends where the latency begins


def previous_end(group: np.ndarray, start_ns: np.ndarray, end_ns: np.ndarray) -> np.ndarray:
    """Per row: the latest end among the rows of its group that come before it in
    (start, row) order (``NO_END`` for the first row of a group)."""
    n = len(start_ns)
    out = np.full(n, NO_END, np.int64)
    if n == 0:
        return out
    order = np.lexsort((np.arange(n), start_ns, group))
    g, e = group[order], end_ns[order]
    bounds = np.flatnonzero(np.concatenate([[True], g[1:] != g[:-1]]))
    run = running_end(g, start_ns[order], e)
    prev = np.empty(n, np.int64)
    prev[1:] = run[:-1]
    prev[bounds] = NO_END
    out[order] = prev
    return out


def split_launch(start_ns: np.ndarray, launch_start_ns: np.ndarray, linked: np.ndarray, carrier: np.ndarray,
                 device_prev_end: np.ndarray, floor_ns: int | None) -> LaunchSplit:
    """The split of every kernel's T_launch (module docstring).

    ``linked``: kernels with a launch call; ``carrier``: the first kernel of its
    launch call; ``device_prev_end``: :func:`previous_end` over the kernel's device.
    """
    n = len(start_ns)
    t_launch = np.where(linked, np.maximum(start_ns - launch_start_ns, 0), 0)  # skew (< 0) is counted elsewhere
    floor = 0 if floor_ns is None else int(floor_ns)
    t_floor = np.where(carrier, np.minimum(floor, t_launch), 0)
    queue_from = launch_start_ns + t_floor
    ends_gap = carrier & (device_prev_end < start_ns)
    exposed_from = np.maximum(queue_from, device_prev_end)
    latency = np.where(ends_gap, np.clip(start_ns - exposed_from, 0, None), 0)
    latency = np.minimum(latency, t_launch - t_floor)
    queue = t_launch - t_floor - latency  # a graph's later nodes: all of T_launch
    valid = linked if floor_ns is not None else np.zeros(n, bool)
    return LaunchSplit(np.where(valid, t_floor, NONE), np.where(valid, queue, NONE),
                       np.where(valid, latency, NONE), np.where(valid & (queue > 0), queue_from, NONE))
