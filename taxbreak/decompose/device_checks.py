"""Device rows no GPU can have produced, found before any time is counted.

* Exact duplicates: a merged or double-flushed trace repeats whole activity
  records (same process, device, stream, start, end, correlation, kind and
  name). Counted twice they double device time and, sharing one correlation,
  look like the nodes of a CUDA graph replay. All but the first copy leave the
  device view (``device.duplicate_activity``).
* Overlaps on one stream: a CUDA stream runs its work in order, so an activity
  that starts before the previous ones on its stream have ended, and belongs to
  another launch (another correlation), cannot be. Summed as recorded, 7,200 µs
  of kernels fitted into a 930 µs span. Its start is moved to the end of the
  work before it on the stream (the earliest it can have started), so the
  overlapped part is counted once (``device.stream_overlap``, with the ns taken
  out). Only single-activity launches are checked: the nodes of one graph replay
  share a correlation and may run side by side.
"""
from __future__ import annotations

from dataclasses import fields

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..trace.diagnostics import Diagnostics
from .intervals import running_end
from .views import Device, Views

OUTLIER_FLOOR_NS = 3600 * 10**9  # never closer than an hour to the bulk of the trace
OUTLIER_IQR_FACTOR = 100
QUARTILE_SAMPLE = 1 << 20


def checked_device(dev: Device, diags: Diagnostics) -> Device:
    """``dev`` without exact duplicates and with stream overlaps taken out (module doc)."""
    n = len(dev.start_ns)
    if n < 2:
        return dev
    names = pc.fill_null(dev.names.combine_chunks().indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)
    keys = (names, dev.kind_codes, dev.correlation, dev.end_ns, dev.start_ns, dev.stream, dev.device, dev.process)
    order = np.lexsort(keys)
    same = np.ones(n - 1, bool)
    for key in keys:
        sorted_key = np.asarray(key)[order]
        same &= sorted_key[1:] == sorted_key[:-1]
    duplicate = order[1:][same]
    if len(duplicate):
        diags.add("device.duplicate_activity", len(duplicate),
                  f"{len(duplicate)} device rows repeat another exactly (a merged or double-flushed trace); "
                  "counted once")
        keep = np.ones(n, bool)
        keep[duplicate] = False
        dev = _take(dev, np.flatnonzero(keep))
    return _without_stream_overlaps(dev, diags)


def _without_stream_overlaps(dev: Device, diags: Diagnostics) -> Device:
    single = np.flatnonzero(_single_launch(dev.process, dev.correlation))
    order = single[np.lexsort((dev.start_ns[single], dev.stream[single], dev.device[single], dev.process[single]))]
    if len(order) < 2:
        return dev
    proc, device, stream = dev.process[order], dev.device[order], dev.stream[order]
    start, end = dev.start_ns[order], dev.end_ns[order]
    new_stream = np.concatenate([[True], (proc[1:] != proc[:-1]) | (device[1:] != device[:-1])
                                 | (stream[1:] != stream[:-1])])
    prev_end = np.empty_like(end)
    prev_end[0] = start[0]
    prev_end[1:] = running_end(np.cumsum(new_stream) - 1, start, end)[:-1]
    overlap = ~new_stream & (start < prev_end)
    if not overlap.any():
        return dev
    rows = order[overlap]
    moved_to = prev_end[overlap]
    taken_ns = int((np.minimum(moved_to, dev.end_ns[rows]) - dev.start_ns[rows]).sum())
    diags.add("device.stream_overlap", len(rows),
              f"{len(rows)} device rows start before the work ahead of them on their stream ended "
              f"({taken_ns / 1000:,.3f} µs overlapped); moved to its end, counted once")
    start_ns, end_ns = dev.start_ns.copy(), dev.end_ns.copy()
    start_ns[rows] = moved_to
    end_ns[rows] = np.maximum(end_ns[rows], moved_to)
    dev.start_ns, dev.end_ns = start_ns, end_ns
    return dev


def _single_launch(process: np.ndarray, correlation: np.ndarray) -> np.ndarray:
    """Rows whose (process, correlation) no other row shares, or without a correlation: the
    one activity of one launch. A graph replay's nodes share theirs and may run side by side."""
    order = np.lexsort((correlation, process))
    p, c = process[order], correlation[order]
    same = (p[1:] == p[:-1]) & (c[1:] == c[:-1])
    shared = np.zeros(len(order), bool)
    shared[1:] |= same
    shared[:-1] |= same
    out = np.empty(len(order), bool)
    out[order] = ~shared
    return out | (correlation < 0)


def _take(dev: Device, rows: np.ndarray) -> Device:
    names = dev.names.take(pa.array(rows))
    return Device(dev.row[rows], dev.process[rows], dev.kind[rows], pa.chunked_array([names.combine_chunks()]),
                  dev.device[rows], dev.stream[rows], dev.start_ns[rows], dev.end_ns[rows], dev.correlation[rows],
                  dev.kind_codes[rows], dev.kind_cats)


def trace_window(views: Views, diags: Diagnostics) -> tuple[Views, tuple[int, int]]:
    """The views without outlier events, and the analysis window: first start to last end of the rest.

    One stray event (``ts: 0`` in an epoch-µs trace, a wrapped clock) made the
    window 1.7e12 µs long, and the untraced time of its thread with it. An event
    is an outlier when it ends more than ``max(100 × IQR, 1 h)`` before the
    first quartile of the starts, or starts that far after the third (the
    quartiles of all host, API and device starts): no profiled run has an event
    that far from the bulk of its own events. Outliers are counted
    (``decompose.outlier_timestamp``) and leave the views: they set no bound of
    the window and no thread's span.
    """
    parts = [v for v in (views.host, views.api, views.device) if len(v.start_ns)]
    if not parts:
        return views, (0, 0)
    # the quartiles of a strided sample (<= ~1 M starts): no copy of ten million starts
    step = max(1, sum(len(v.start_ns) for v in parts) // QUARTILE_SAMPLE)
    q1, q3 = (int(q) for q in np.quantile(np.concatenate([v.start_ns[::step] for v in parts]), [0.25, 0.75],
                                          method="inverted_cdf"))
    gap = max(OUTLIER_IQR_FACTOR * (q3 - q1), OUTLIER_FLOOR_NS)
    outliers = [(v.end_ns < q1 - gap) | (v.start_ns > q3 + gap) for v in (views.host, views.api, views.device)]
    n_out = sum(int(o.sum()) for o in outliers)
    if n_out:
        example = next(int(v.start_ns[np.argmax(o)]) for v, o in zip((views.host, views.api, views.device), outliers)
                       if o.any())
        diags.add("decompose.outlier_timestamp", n_out,
                  f"{n_out} events lie more than {gap / 1e9:,.0f} s from the rest of the trace (e.g. one at "
                  f"{example / 1000:,.3f} µs, the bulk between {q1 / 1000:,.3f} and {q3 / 1000:,.3f} µs); "
                  "left out of the analysis")
        views = _without(views, *(np.flatnonzero(~o) for o in outliers))
    starts = [v.start_ns.min() for v in (views.host, views.api, views.device) if len(v.start_ns)]
    ends = [v.end_ns.max() for v in (views.host, views.api, views.device) if len(v.end_ns)]
    return views, (int(min(starts)), int(max(ends)))


_CATEGORY_FIELDS = ("name_cats", "kind_cats")  # per distinct value, not per row


def _without(views: Views, host_rows: np.ndarray, api_rows: np.ndarray, device_rows: np.ndarray) -> Views:
    """``views`` restricted to the given rows, the lanes renumbered over the threads still present."""
    host, api = (_rows(v, rows) for v, rows in ((views.host, host_rows), (views.api, api_rows)))
    used = np.unique(np.concatenate([host.lane, api.lane]))
    renumber = np.full(views.n_lanes, -1, np.int64)
    renumber[used] = np.arange(len(used))
    host.lane, api.lane = renumber[host.lane], renumber[api.lane]
    return Views(host, api, _take(views.device, device_rows), len(used), views.lane_pid[used], views.lane_tid[used])


def _rows(view, rows: np.ndarray):
    return type(view)(**{f.name: getattr(view, f.name) if f.name in _CATEGORY_FIELDS else getattr(view, f.name)[rows]
                         for f in fields(view)})
