"""In-trace versus isolated: the decomposition with replayed values in place.

Per unique kernel k with frequency f_k (TaxBreak §III, SODA ``report.py``):

    T_dispatch_base = median{ T_dispatch(k) : I_lib(k) = 0, T_dispatch(k) > 0.1 µs }
    ΔFT_dispatch(k) = T_dispatch_base if I_lib(k) else T_dispatch(k)
    ΔCT(k)          = I_lib(k) · max(0, T_dispatch(k) − T_dispatch_base)
    ΔKT_fw(k)       = max(0, T_launch(k) − T_sys)
    T_DeviceActive  = Σ f_k · dur_k
    T_orch,dispatch = Σ f_k · (ΔFT_dispatch + ΔCT) + N · T_sys
    HDBI_dispatch   = T_DeviceActive / (T_DeviceActive + T_orch,dispatch)

computed twice: once with the in-trace means of T_dispatch and T_launch, once
with the replayed ones. T_Py (the Python layer above the ATen op) is not
replayed: :func:`add_python_layer` adds the in-trace T_Py total of the full
analysis to both columns (``orchestration_us``, ``hdbi``), and both stay None
when the trace has no Python layer (``includes_t_py: false``).
A kernel whose op was not replayed keeps its in-trace T_dispatch and takes
T_launch = T_sys in the isolated column (the published fallback), and is
counted in ``kernels_fallback``.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from ..decompose.classify import name_is_library

MIN_DISPATCH_US = 0.1  # SODA drops sub-0.1 µs dispatch samples from the base median


def dispatch_base_us(dispatch_us: np.ndarray, is_lib: np.ndarray) -> float | None:
    """Median framework-native T_dispatch (µs), None when there is none."""
    values = dispatch_us[(~is_lib) & np.isfinite(dispatch_us) & (dispatch_us > MIN_DISPATCH_US)]
    return float(np.median(values)) if values.size else None


def components(dispatch_us: np.ndarray, launch_us: np.ndarray, is_lib: np.ndarray,
               floor_us: float | None) -> dict[str, np.ndarray | float | None]:
    """Per-kernel ΔFT_dispatch, ΔCT and ΔKT_fw (µs) from T_dispatch and T_launch."""
    base = dispatch_base_us(dispatch_us, is_lib)
    base_v = np.nan if base is None else base
    ft = np.where(is_lib, base_v, dispatch_us)
    ct = np.where(is_lib, np.maximum(0.0, dispatch_us - base_v), 0.0)
    kt = np.maximum(0.0, launch_us - floor_us) if floor_us is not None else np.full(len(launch_us), np.nan)
    return {"base_us": base, "ft": ft, "ct": ct, "kt": kt}


def _wsum(freq: np.ndarray, values: np.ndarray) -> float | None:
    ok = np.isfinite(values)
    return float(np.sum(freq[ok] * values[ok])) if ok.any() else None


def _totals(freq, dur_us, parts, floor_us) -> dict:
    n = float(freq.sum())
    ft, ct = _wsum(freq, parts["ft"]), _wsum(freq, parts["ct"])
    floor_total = n * floor_us if floor_us is not None else None
    device = _wsum(freq, dur_us)
    orch = None if None in (ft, ct, floor_total) else ft + ct + floor_total
    hdbi = None if orch is None or device is None or device + orch <= 0 else device / (device + orch)
    return {"dispatch_base_us": parts["base_us"], "ft_dispatch_us": ft, "ct_us": ct,
            "floor_total_us": floor_total, "kt_framework_us": _wsum(freq, parts["kt"]),
            "orchestration_dispatch_us": orch, "hdbi_dispatch": hdbi}


def compare(kernels: pd.DataFrame, matched: pd.DataFrame, floor_us: float | None,
            floor_source: str = "") -> tuple[pd.DataFrame, dict]:
    """Side-by-side per-kernel table and summary (in-trace vs isolated).

    Args:
        kernels: ``ReplayPlan.kernels`` (unique kernels with in-trace means).
        matched: :func:`.replay_match.match_replay` output.
        floor_us: T_sys; None when unknown (then ΔKT_fw and totals are None).
        floor_source: where T_sys came from (``measured``, ``published:H200``...).

    Returns:
        ``(table, summary)``: one row per unique kernel, and
        ``{"in_trace": {...}, "isolated": {...}, counts...}``.
    """
    table = kernels.merge(matched, on="kernel_id", how="left")
    table["replayed"] = table["samples"].fillna(0).to_numpy() > 0
    table["is_library"] = name_is_library(pa.array(table["kernel_name"].astype(str)))
    floor_fill = np.nan if floor_us is None else floor_us
    iso_dispatch = np.where(table["replayed"], table["dispatch_replay_us"], table["dispatch_trace_us"])
    iso_launch = np.where(table["replayed"], table["launch_replay_us"], floor_fill)
    freq = table["frequency"].to_numpy(np.float64)
    dur = table["dur_us"].to_numpy(np.float64)
    lib = table["is_library"].to_numpy(bool)
    trace_parts = components(table["dispatch_trace_us"].to_numpy(np.float64),
                             table["launch_trace_us"].to_numpy(np.float64), lib, floor_us)
    iso_parts = components(iso_dispatch.astype(np.float64), iso_launch.astype(np.float64), lib, floor_us)
    for label, parts in (("trace", trace_parts), ("isolated", iso_parts)):
        table[f"ft_dispatch_{label}_us"] = parts["ft"]
        table[f"ct_{label}_us"] = parts["ct"]
        table[f"kt_framework_{label}_us"] = parts["kt"]
    summary = {
        "floor_us": floor_us, "floor_source": floor_source, "includes_t_py": False,
        "in_trace": _totals(freq, dur, trace_parts, floor_us),
        "isolated": _totals(freq, dur, iso_parts, floor_us),
        "device_active_us": _wsum(freq, dur),
        **_counts(table),
    }
    return table, summary


def _counts(table: pd.DataFrame) -> dict:
    replayed = table["replayed"].to_numpy(bool)
    tiers = table.loc[replayed, "match_tier"].astype(int).value_counts().sort_index()
    return {
        "kernels_total": int(len(table)),
        "kernels_replayed": int(replayed.sum()),
        "kernels_fallback": int((~replayed).sum()),
        "launches_total": int(table["frequency"].sum()),
        "launches_replayed": int(table.loc[replayed, "frequency"].sum()),
        "match_tiers": {str(k): int(v) for k, v in tiers.items()},
        "ambiguous_ranges": int(table["ambiguous_ranges"].fillna(0).sum()),
    }


def add_python_layer(summary: dict, t_py_us: float | None, analysis_hdbi: float | None = None) -> dict:
    """Add T_Py (from the full analysis; replay does not measure it) to both columns.

    Sets ``orchestration_us`` = ``orchestration_dispatch_us`` + T_Py and the
    full ``hdbi`` per column; both are None when T_Py was not measured.
    ``analysis_hdbi`` is ``taxbreak analyze``'s own HDBI of the trace, for reference.
    """
    device = summary.get("device_active_us")
    for label in ("in_trace", "isolated"):
        part = summary[label]
        orch = part["orchestration_dispatch_us"]
        full = None if t_py_us is None or orch is None else orch + t_py_us
        part["orchestration_us"] = full
        part["hdbi"] = None if full is None or device is None or device + full <= 0 else device / (device + full)
    summary["t_py_us"] = t_py_us
    summary["includes_t_py"] = t_py_us is not None
    summary["analysis_hdbi"] = analysis_hdbi
    return summary
