"""The host-bound → device-bound transition point over a sweep grid.

Rule (stated in every output and in docs/sweep.md):

1. HDBI crossing. Along each curve (batch size at fixed sequence length, and
   sequence length at fixed batch size) the transition is the first grid point
   with ``HDBI ≥ threshold`` (default 0.5, where T_DeviceActive = T_Orchestrate),
   placed between that point and the one before it by linear interpolation of
   HDBI. The paper defines no HDBI classes (taxbreak-method.md §1.3); 0.5 is
   the point of equal device and orchestration time, not a published class.
2. Exposure crossing. The first grid point where device-active time exceeds the
   exposed orchestration (the host time the device actually waits on).
3. The smallest device-bound shape of a phase: the grid point with the fewest
   tokens (batch × sequence length) whose HDBI ≥ threshold.

Without device time (a CPU run) HDBI is unmeasured and no transition point is
given: it cannot be determined without a GPU.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

RULE = (
    "transition = first grid point with HDBI >= {thr} (T_DeviceActive = T_Orchestrate at 0.5), "
    "linearly interpolated in HDBI between it and the previous point; also reported: the first point "
    "where device-active time exceeds exposed orchestration, and the smallest shape (fewest tokens) "
    "with HDBI >= {thr}"
)
NO_DEVICE = "cannot be determined without a GPU: the sweep has no device time, so HDBI is not measured"


def crossing(x: np.ndarray, y: np.ndarray, threshold: float) -> dict:
    """Where a curve ``y(x)`` (sorted by x) first reaches ``threshold``.

    Returns:
        ``{"status": ..., "x": ...}`` with status ``interpolated`` (x between
        grid points), ``at_or_below_grid`` (already reached at the smallest x),
        ``not_reached`` (never within the grid) or ``unmeasured`` (no y values).
    """
    keep = np.isfinite(y)
    x, y = x[keep], y[keep]
    if len(x) == 0:
        return {"status": "unmeasured", "x": None}
    above = np.flatnonzero(y >= threshold)
    if len(above) == 0:
        return {"status": "not_reached", "x": None}
    i = int(above[0])
    if i == 0:
        return {"status": "at_or_below_grid", "x": float(x[0])}
    x0, x1, y0, y1 = x[i - 1], x[i], y[i - 1], y[i]
    return {"status": "interpolated", "x": float(x0 + (threshold - y0) * (x1 - x0) / (y1 - y0))}


def _curves(table: pd.DataFrame, along: str, fixed: str, threshold: float) -> list[dict]:
    out = []
    for fixed_value, group in table.groupby(fixed, sort=True):
        group = group.sort_values(along)
        x = group[along].to_numpy(dtype=np.float64)
        hdbi = group["hdbi"].to_numpy(dtype=np.float64)
        margin = (group["device_active_us"] - group["exposed_orchestration_us"]).to_numpy(dtype=np.float64)
        out.append({
            fixed: int(fixed_value),
            "along": along,
            "hdbi": crossing(x, hdbi, threshold),
            "device_exceeds_exposed": crossing(x, margin, 0.0 + np.finfo(float).tiny),
        })
    return out


def transition_points(table: pd.DataFrame, threshold: float = 0.5) -> dict:
    """Transition points of every phase of a sweep table.

    Args:
        table: one row per (batch, seq_len, phase) with ``hdbi``,
            ``device_active_us`` and ``exposed_orchestration_us`` (NaN/None = unmeasured).
        threshold: the HDBI level taken as device-bound.

    Returns:
        ``{"rule": str, "threshold": float, "phases": {phase: {...}}}``; a phase
        without device time carries ``"status": "undetermined"`` and the reason.
    """
    result = {"rule": RULE.format(thr=threshold), "threshold": threshold, "phases": {}}
    for phase, rows in table.groupby("phase", sort=True):
        rows = rows.astype({c: "float64" for c in ("hdbi", "device_active_us", "exposed_orchestration_us")})
        if not np.isfinite(rows["hdbi"].to_numpy()).any():
            result["phases"][phase] = {"status": "undetermined", "reason": NO_DEVICE}
            continue
        result["phases"][phase] = {
            "status": "determined",
            "by_batch": _curves(rows, "batch", "seq_len", threshold),
            "by_seq_len": _curves(rows, "seq_len", "batch", threshold),
            "smallest_device_bound": _smallest(rows, threshold),
        }
    return result


def _smallest(rows: pd.DataFrame, threshold: float) -> dict | None:
    bound = rows[rows["hdbi"] >= threshold]
    if bound.empty:
        return None
    bound = bound.assign(tokens=bound["batch"] * bound["seq_len"]).sort_values(["tokens", "batch"])
    first = bound.iloc[0]
    return {"batch": int(first["batch"]), "seq_len": int(first["seq_len"]), "hdbi": float(first["hdbi"])}
