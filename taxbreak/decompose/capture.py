"""CUDA-graph capture windows, and the launch calls recorded into a graph instead of run.

A launch call made while its stream is being captured (between
``cudaStreamBeginCapture`` and ``cudaStreamEndCapture``) is recorded into a
graph: the device does not run it, so the trace has the call and no kernel.
Counted as an orphan launch it would read as a broken trace; counted apart
(``captured_launches``) it says the trace records capture, not execution
(docs/method.md §3). API kinds do not name capture calls (they are ``other``):
they are recognised here by name.

Capture windows, per host thread:

* stream capture: from a ``(cuda|cu|hip)StreamBeginCapture[ToGraph]`` call to the
  next ``(cuda|cu|hip)StreamEndCapture`` call on the same thread (to the
  thread's last API call when the end is missing: a truncated capture);
* ``capture_…`` user annotations and NVTX ranges (serving engines name their
  per-batch-size capture so).

A launch call is *captured* when it launched no device activity and starts
inside a capture window of its process (its own thread's, or another
thread's: without device work it ran nowhere). A launch call whose kernel is
in the trace ran, so it is never counted as captured.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from .busy import merged_by_group
from .intervals import innermost_enclosing
from .views import LAUNCH_API_KINDS, Views

BEGIN = re.compile(r"^(?:cuda|cu|hip)StreamBeginCapture")  # …ToGraph and version suffixes included
END = re.compile(r"^(?:cuda|cu|hip)StreamEndCapture")
INSTANTIATE = re.compile(r"^(?:cuda|cu|hip)GraphInstantiate")
ANNOTATION = re.compile(r"^capture_", re.IGNORECASE)
# capture dominates a trace when at least this share of its launch calls was captured
# and fewer kernels ran than launches were captured
DOMINANT_SHARE = 0.5


@dataclass
class Capture:
    """Capture windows and captured launch calls of one trace."""

    captured: np.ndarray  # per API call: a launch recorded into a graph (no device activity, in a window)
    windows: int  # begin/end capture pairs plus capture_… annotations
    instantiations: int  # graph instantiate calls


def find_capture(views: Views, api_has_device: np.ndarray) -> Capture:
    """The :class:`Capture` of a trace (module docstring)."""
    api, host = views.api, views.host
    is_begin, is_end, is_inst = (views.api.named(rx) for rx in (BEGIN, END, INSTANTIATE))
    w_lane, w_start, w_end = _stream_windows(views, is_begin, is_end)
    ann = np.flatnonzero(host.kind_is("annotation") & host.named(ANNOTATION)) \
        if len(host.name_codes) else np.zeros(0, np.int64)
    lane = np.concatenate([w_lane, host.lane[ann]])
    start = np.concatenate([w_start, host.start_ns[ann]])
    end = np.concatenate([w_end, host.end_ns[ann]])
    pid = views.lane_pid[lane] if len(lane) else np.zeros(0, np.int64)
    candidate = api.kind_is(*LAUNCH_API_KINDS) & ~api_has_device
    captured = np.zeros(len(api.start_ns), dtype=bool)
    if len(start) and candidate.any():
        captured[candidate] = _inside(pid, start, end, api.pid[candidate], api.start_ns[candidate])
    return Capture(captured, int(len(start)), int(is_inst.sum()))


def _stream_windows(views: Views, is_begin: np.ndarray, is_end: np.ndarray) -> tuple[np.ndarray, ...]:
    """(lane, start, end) per begin-capture call: to the end of the next end-capture call on its thread,
    or to the thread's last API call end when none follows."""
    api = views.api
    begin, end = np.flatnonzero(is_begin), np.flatnonzero(is_end)
    if len(begin) == 0:
        return (np.zeros(0, np.int64),) * 3
    # one key per (lane, time): lanes apart by more than any time span
    width = np.int64(int(api.end_ns.max()) - int(api.start_ns.min()) + 2)
    key = lambda rows, t: api.lane[rows] * width + (t - api.start_ns.min())  # noqa: E731
    end = end[np.argsort(key(end, api.start_ns[end]), kind="stable")]
    end_key = key(end, api.start_ns[end])
    pos = np.searchsorted(end_key, key(begin, api.start_ns[begin]), side="left")
    found = pos < len(end)
    nxt = end[np.minimum(pos, max(len(end) - 1, 0))] if len(end) else np.zeros(len(begin), np.int64)
    found &= (api.lane[nxt] == api.lane[begin]) if len(end) else False
    lane_last = np.full(views.n_lanes, np.iinfo(np.int64).min, np.int64)
    np.maximum.at(lane_last, api.lane, api.end_ns)
    stop = np.where(found, api.end_ns[nxt] if len(end) else 0, lane_last[api.lane[begin]])
    return api.lane[begin], api.start_ns[begin], stop


def _inside(pid: np.ndarray, start: np.ndarray, end: np.ndarray, q_pid: np.ndarray, q_t: np.ndarray) -> np.ndarray:
    """Per query: does ``q_t`` lie in a window of process ``q_pid`` (windows merged per process first)."""
    _, codes = np.unique(np.concatenate([pid, q_pid]).astype(np.int64), return_inverse=True)
    codes = codes.reshape(-1).astype(np.int64)  # dense process codes (merged_by_group ignores negative groups)
    m_pid, m_start, m_end = merged_by_group(codes[:len(pid)], start, np.maximum(end, start))
    hit = innermost_enclosing(m_pid, m_start, m_end + 1, codes[len(pid):], q_t)  # the window end is inclusive
    return hit >= 0


def capture_summary(capture: Capture, launch_calls: int, executed_kernels: int) -> dict:
    """``meta.graph_capture``: whether the trace records graph capture rather than execution.

    ``dominant`` when at least DOMINANT_SHARE of the launch calls were captured and fewer
    kernels ran (linked kernels) than launches were captured: the steady-state numbers then
    describe a handful of warm-up kernels, not the workload (report/advice.py says so).
    """
    captured = int(capture.captured.sum())
    share = round(captured / launch_calls, 6) if launch_calls else None
    dominant = bool(share is not None and share >= DOMINANT_SHARE and executed_kernels < captured)
    return {"captured_launches": captured, "launch_calls": int(launch_calls), "captured_share": share,
            "capture_windows": capture.windows, "graph_instantiations": capture.instantiations,
            "executed_kernels": int(executed_kernels), "dominant": dominant}
