"""Warm-up inside the profiled window: first calls far slower than the same op later.

The first invocation of an op pays one-time costs on the host — lazy module
loading, cuBLAS/cuDNN handle creation, cuDNN autotuning (``cudnn.benchmark``),
allocator growth — which the decomposition counts as ΔFT/ΔCT like any other
host time. A trace that starts with the model's first step therefore shows
that one-time cost as if it were steady-state library or framework time.

An op name's first outermost invocation (by start time, over all threads) is
*warm-up* when its inclusive host time is more than ``FACTOR`` times the median
of the later invocations of the same name and above ``FLOOR_NS``; a name called
once cannot be compared and is never flagged. Module-loading and handle
creation API calls (``INIT_CALLS``) are warm-up wherever they lie. The
decomposition is not changed: the summary reports, beside it, how much of
ΔFT, ΔCT and T_Orchestrate the kernels launched inside the flagged invocations
carry (docs/method.md §3).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .intervals import innermost_enclosing, take_or
from .link import Links
from .summary import group_quantile
from .views import Views

FACTOR = 10.0  # first call above this multiple of the later calls' median
FLOOR_NS = 1_000_000  # and above 1 ms: sub-millisecond first calls are noise, not warm-up
INIT_CALLS = re.compile(r"^(?:cuModuleLoad|cuLibraryLoad|cublasCreate|cublasLtCreate|cudnnCreate|hipModuleLoad"
                        r"|rocblas_create_handle|hipblasCreate|hipblasLtCreate|miopenCreate)")
FUNC_ATTRIBUTES = re.compile(r"^(?:cuda|hip)FuncGetAttributes")
ORCH_COLS = ("ft_ns", "ct_ns", "kt_floor_ns", "kt_graph_ns")


@dataclass
class Warmup:
    """Warm-up invocations and calls of one trace."""

    roots: np.ndarray  # host indices of the flagged first invocations
    later_median_ns: np.ndarray  # per flagged root: median inclusive time of the later invocations
    kernel: np.ndarray  # per Analysis.kernels row: launched inside a flagged invocation
    init_calls: np.ndarray  # API indices of module-load / handle-creation calls
    init_outside_ns: int  # their time outside the flagged invocations (not counted twice)
    func_attribute_calls: int  # cudaFuncGetAttributes calls inside the flagged invocations


def find_warmup(views: Views, links: Links) -> Warmup:
    """The :class:`Warmup` of a trace (module docstring)."""
    host, api = views.host, views.api
    roots, median = _slow_first_calls(views, links.roots)
    op = take_or(links.api_op, links.dev_api)
    kernel_root = take_or(links.op_root, op)
    kernel = np.isin(kernel_root, roots) & (kernel_root >= 0)
    in_warmup = innermost_enclosing(host.lane[roots], host.start_ns[roots], host.end_ns[roots],
                                    api.lane, api.start_ns) >= 0
    init = views.api.named(INIT_CALLS)
    outside = init & ~in_warmup
    attributes = int((views.api.named(FUNC_ATTRIBUTES) & in_warmup).sum())
    return Warmup(roots, median, kernel, np.flatnonzero(init),
                  int((api.end_ns[outside] - api.start_ns[outside]).sum()), attributes)


def _slow_first_calls(views: Views, roots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Host indices of the first invocations that are warm-up, and the later calls' median of each."""
    host = views.host
    if len(roots) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.float64)
    _, name = np.unique(host.name_codes[roots], return_inverse=True)
    name = name.reshape(-1)
    order = np.lexsort((host.start_ns[roots], name))
    rows, name = roots[order], name[order]
    dur = host.end_ns[rows] - host.start_ns[rows]
    first = np.concatenate([[True], name[1:] != name[:-1]])
    n = int(name.max()) + 1
    later = np.bincount(name[~first], minlength=n)
    median = group_quantile(np.where(first, -1, name), dur, n, 0.5)
    f_rows, f_name, f_dur = rows[first], name[first], dur[first]
    slow = (later[f_name] > 0) & (f_dur > FACTOR * median[f_name]) & (f_dur > FLOOR_NS)
    return f_rows[slow], median[f_name][slow]


def warmup_summary(w: Warmup, views: Views, kernels: pd.DataFrame) -> dict:
    """``summary['warmup']`` without the shares: the flagged calls, their host time, and the ΔFT/ΔCT/T_Orchestrate
    of the kernels launched inside them (:func:`add_shares` adds the shares once the totals are known)."""
    host = views.host
    is_kernel = (kernels["kind"] == "kernel").to_numpy(bool)
    sums = {col: int(kernels[col].to_numpy(np.int64, na_value=0)[w.kernel & is_kernel].sum()) for col in ORCH_COLS}
    dur = host.end_ns[w.roots] - host.start_ns[w.roots]
    ops = [{"op_name": str(name), "first_call_us": int(d) / 1000.0, "later_median_us": round(float(m) / 1000.0, 3)}
           for name, d, m in zip(host.names(w.roots), dur.tolist(), w.later_median_ns.tolist())]
    return {"calls": len(w.roots), "ops": ops, "host_us": (int(dur.sum()) + w.init_outside_ns) / 1000.0,
            "init_calls": int(len(w.init_calls)), "func_attribute_calls": w.func_attribute_calls,
            "kernels": int((w.kernel & is_kernel).sum()),
            "framework_us": sums["ft_ns"] / 1000.0, "library_us": sums["ct_ns"] / 1000.0,
            "orchestration_us": sum(sums.values()) / 1000.0}


def add_shares(warmup: dict, all_dict: dict) -> dict:
    """``warmup`` with its share of the whole trace's ΔFT, ΔCT and T_Orchestrate. Where the trace's
    component is not measured (``None``: no dispatch baseline for ΔCT, say), so is the warm-up part."""
    for key in ("framework", "library", "orchestration"):
        total = all_dict.get(f"{key}_us")
        if total is None:
            warmup[f"{key}_us"] = None
        warmup[f"{key}_share"] = _share(warmup[f"{key}_us"], total)
    return warmup


def _share(part: float | None, total: float | None) -> float | None:
    """``part / total``; ``None`` where the total is not measured or zero (never a made-up 0)."""
    return round(part / total, 6) if total and part is not None else None
