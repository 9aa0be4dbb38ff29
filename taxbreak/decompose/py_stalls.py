"""Host stalls and blocked waits taken out of T_py (docs/method.md §2, §7).

T_py runs from the later of the torch op's start and the previous root op's end
to the root op's start. When a stall lies in that span — 215 ms of video
preprocessing, a 120 ms ``scipy.ndimage.zoom``, a ``queue.get`` wait — the plain
difference charges it to the next op's ΔFT Python part, as per-op framework
overhead. The host partition already labels that time (``host_stall`` by name,
``blocked``, or a length-rule stall run); this module subtracts it from T_py and
keeps it in ``t_py_stall_ns``, so ΔFT_py is Python work and the stall stays its
own category.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .link import NONE, Links
from .lane_labels import LaneLabels
from .partition import LABELS
from .views import Views

STALL_LABELS = np.array([label in ("host_stall", "blocked") for label in LABELS], bool)
RUN_LABELS = np.array([label in ("python", "untraced") for label in LABELS], bool)


def stall_ns(lanes: LaneLabels, lane: np.ndarray, start_ns: np.ndarray, end_ns: np.ndarray) -> np.ndarray:
    """Per query: the ns of ``[start, end)`` on ``lane`` labelled a stall or a blocked wait, or in a
    length-rule stall run."""
    out = np.zeros(len(lane), np.int64)
    ask = np.flatnonzero(end_ns > start_ns)
    if len(ask) == 0:
        return out
    got = lanes.pieces(lane[ask], start_ns[ask], end_ns[ask])
    query, p0, p1, label = got.query, got.start_ns, got.end_ns, got.label
    stalled = STALL_LABELS[label] | (RUN_LABELS[label] & lanes.in_stall(lane[ask][query], p0))
    out[ask] = np.bincount(query, weights=np.where(stalled, p1 - p0, 0), minlength=len(ask)).astype(np.int64)
    return out


def take_stalls_out_of_t_py(kernels: pd.DataFrame, views: Views, links: Links, lanes: LaneLabels) -> None:
    """Subtract the stalls inside each root op's T_py span from ``t_py_ns`` and ``ft_python_ns``
    (and ``ft_ns``); the stall time goes to ``t_py_stall_ns``. One query per root, not per kernel."""
    a = links.dev_api
    root = np.full(len(a), NONE, np.int64)
    linked = a >= 0
    op = np.where(linked, links.api_op[np.maximum(a, 0)], NONE)
    root[op >= 0] = links.op_root[op[op >= 0]]
    has_py = kernels["t_py_ns"].notna().to_numpy(bool) & (root >= 0)
    roots, inverse = np.unique(root[has_py], return_inverse=True)
    origin = links.py_origin_ns[roots]
    removed = stall_ns(lanes, views.host.lane[roots], origin, views.host.start_ns[roots])
    per_row = np.zeros(len(a), np.int64)
    per_row[has_py] = removed[inverse]
    _apply(kernels, per_row, has_py)


def _apply(kernels: pd.DataFrame, stall: np.ndarray, has_py: np.ndarray) -> None:
    t_py = kernels["t_py_ns"]
    carries = kernels["ft_python_ns"].notna() & (kernels["ft_python_ns"] == t_py) & (t_py > 0)
    delta = pd.Series(np.where(carries.fillna(False).to_numpy(bool), stall, 0), index=kernels.index)
    kernels["t_py_ns"] = t_py - pd.Series(stall, index=kernels.index).where(t_py.notna(), 0)
    kernels["ft_python_ns"] = kernels["ft_python_ns"] - delta
    kernels["ft_ns"] = kernels["ft_ns"] - delta.where(kernels["ft_ns"].notna(), 0)
    kernels["t_py_stall_ns"] = pd.Series(pd.arrays.IntegerArray(stall, ~has_py), index=kernels.index)
