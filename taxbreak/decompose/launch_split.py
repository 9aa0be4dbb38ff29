"""Split each kernel's T_launch into floor, launch latency and queue wait (int ns).

For a kernel k launched at ``L`` (launch call start) that starts at ``S``::

    T_launch   = S − L = t_floor + queue_wait + launch_latency
    t_floor    = min(T_sys, T_launch)                     the launch path itself, first
    queue_wait = clip(E_prev, L + t_floor, S) − (L + t_floor)
    launch_latency = S − clip(E_prev, L + t_floor, S)

``E_prev`` is the time the earlier work of the kernel's stream finished: the
running maximum of the end times of every activity (kernel, memcpy, memset)
on the same (device, stream) that starts before k. Earlier work that is still
running *or still pending* keeps k waiting, which makes the latency pieces of
one stream disjoint (each lies between the previous end and the kernel's
start). A CUDA-graph launch's first kernel waits on its whole device (a
graph's nodes run on streams of its own), so ``E_prev`` is taken over the
work of the device issued before it (by launch-call start; an activity
without a launch call by its own start); the graph's later kernels wait behind the graph's earlier nodes, which
is device-side work: their whole T_launch is queue wait. docs/method.md §2.1.

ΔKT = T_sys + launch_latency (+ the graph call's own host time beyond T_sys,
``kt_graph_ns``). Queue wait is device-side waiting, never host time.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .intervals import dense_pairs

NONE = -1


@dataclass
class LaunchSplit:
    """Per device activity (int64 ns, -1 where there is nothing to split)."""

    t_floor_ns: np.ndarray
    queue_wait_ns: np.ndarray
    launch_latency_ns: np.ndarray
    queue_start_ns: np.ndarray  # where the queue wait begins (L + t_floor), -1 without one


def previous_end(group: np.ndarray, order_ns: np.ndarray, end_ns: np.ndarray,
                 start_ns: np.ndarray | None = None) -> np.ndarray:
    """Per row: the latest end among the rows of its group that come before it in
    (``order_ns``, ``start_ns``, row) order (``int64 min`` for the first row of a group).
    The start breaks ties, so a graph's first node comes before its later ones."""
    n = len(order_ns)
    out = np.full(n, np.iinfo(np.int64).min, np.int64)
    if n == 0:
        return out
    order = np.lexsort((np.arange(n), order_ns if start_ns is None else start_ns, order_ns, group))
    g, e = group[order], end_ns[order]
    bounds = np.flatnonzero(np.concatenate([[True], g[1:] != g[:-1]]))
    # running maximum per group: reset at each group's first row
    run = _grouped_running_max(e, bounds)
    prev = np.empty(n, np.int64)
    prev[0] = np.iinfo(np.int64).min
    prev[1:] = run[:-1]
    prev[bounds] = np.iinfo(np.int64).min
    out[order] = prev
    return out


def _grouped_running_max(values: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Running maximum that restarts at every index in ``bounds`` (sorted, starting at 0)."""
    if len(bounds) == 1:
        return np.maximum.accumulate(values)
    # shift each group above every earlier one so one accumulate never carries across groups
    lo, hi = int(values.min()), int(values.max())
    width = hi - lo + 1
    if len(bounds) * width < 2**62:
        group_of = np.repeat(np.arange(len(bounds), dtype=np.int64), np.diff(np.append(bounds, len(values))))
        shift = group_of * np.int64(width) - lo
        return np.maximum.accumulate(values + shift) - shift
    edges = np.append(bounds, len(values))
    return np.concatenate([np.maximum.accumulate(values[a:b]) for a, b in zip(edges[:-1], edges[1:])])


def pack_group(device: np.ndarray, stream: np.ndarray) -> np.ndarray:
    """One dense int64 id per (device, stream)."""
    return dense_pairs(device, stream)[0]


def split_launch(start_ns: np.ndarray, launch_start_ns: np.ndarray, linked: np.ndarray, carrier: np.ndarray,
                 is_graph: np.ndarray, stream_prev_end: np.ndarray, device_prev_end: np.ndarray,
                 floor_ns: int | None) -> LaunchSplit:
    """The split of every kernel's T_launch (module docstring).

    ``linked``: kernels with a launch call; ``carrier``: the first kernel of
    its launch call; ``is_graph``: its launch is a graph launch.
    """
    n = len(start_ns)
    t_launch = np.where(linked, np.maximum(start_ns - launch_start_ns, 0), 0)  # skew (< 0) is counted elsewhere
    floor = 0 if floor_ns is None else int(floor_ns)
    t_floor = np.where(carrier, np.minimum(floor, t_launch), 0)
    queue_from = launch_start_ns + t_floor
    e_prev = np.where(is_graph, device_prev_end, stream_prev_end)
    waited_until = np.clip(e_prev, queue_from, launch_start_ns + t_launch)
    queue = np.where(carrier, waited_until - queue_from, t_launch)  # graph's later kernels: all queue
    latency = np.where(carrier, launch_start_ns + t_launch - waited_until, 0)
    valid = linked if floor_ns is not None else np.zeros(n, bool)
    return LaunchSplit(np.where(valid, t_floor, NONE), np.where(valid, queue, NONE),
                       np.where(valid, latency, NONE), np.where(valid & (queue > 0), queue_from, NONE))
