"""Summary metrics per scope (whole trace, each phase, each step), computed for
all scopes of one kind at once with group-bys (no per-step pass over the rows).

Every scope gets the same keys (µs unless named). A value that was not
measured is ``None``: no device activity in the trace, no kernel in the scope,
no token count, no library ranges. Equations in docs/method.md.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .floor import Floor
from .partition import COLUMNS

HOST_KEYS = {col: col.replace("_ns", "_us") for col in [*COLUMNS.values(), "host_wall_ns"]}
SUM_COLS = {"ft_ns": "framework_us", "ft_python_ns": "framework_python_us", "ft_dispatch_ns": "framework_dispatch_us",
            "ct_ns": "library_us", "kt_floor_ns": "launch_floor_us", "kt_residual_ns": "launch_residual_us",
            "t_launch_ns": "tklqt_us"}

SUMMARY_KEYS = (
    "kernels", "launches", "orphan_kernels", "orphan_launches", "device_active_us", "device_busy_us", "span_us",
    "gpu_idle_us", "tklqt_us", "framework_us", "framework_python_us", "framework_dispatch_us", "library_us",
    "launch_floor_us", "launch_residual_us", "orchestration_us", "hdbi", "floor_us", "floor_source",
    "t_dispatch_base_us", "library_measured_us", "kernel_diversity", "tokens", "kernels_per_token",
    "orchestration_us_per_token", "framework_us_per_token", "device_active_us_per_token", "aten_ops",
    "aten_ops_per_token",
    *HOST_KEYS.values(), "exposed_orchestration_us", "hidden_orchestration_us", "steps",
)


@dataclass
class Context:
    """Trace-wide facts every scope needs."""

    floor: Floor
    dispatch_base_ns: int | None
    tokens: int | None
    has_device: bool
    t_py_measured: bool
    has_library_ranges: bool


@dataclass
class Grouping:
    """One scope kind: a group label for every row of each input."""

    kernel_g: np.ndarray  # per Analysis.kernels row
    partition_g: np.ndarray  # per host_partition row
    launch_g: np.ndarray  # per launch API call
    orphan_g: np.ndarray  # per launch API call without device activity
    library_g: np.ndarray  # per outermost library range
    library_ns: np.ndarray  # its duration
    steps: dict  # group -> number of steps in it
    tokens: int | float | dict | None  # one count for every group, or {group: count}
    aten_root_g: np.ndarray  # per outermost ATen op invocation (measurable without a GPU)


def _us(ns) -> float | None:
    if ns is None or ns is pd.NA or ns != ns:
        return None
    return round(float(ns) / 1000.0, 3)


def _per(value, tokens) -> float | None:
    return None if value is None or not tokens else round(float(value) / tokens, 3)


def grouped_metrics(kernels: pd.DataFrame, partition: pd.DataFrame, grouping: Grouping, groups: list,
                    ctx: Context) -> dict:
    """``{group: summary dict}`` for every group in ``groups`` (keys: ``SUMMARY_KEYS``)."""
    k = kernels.assign(_g=grouping.kernel_g)
    kern = k[k["kind"] == "kernel"]
    counts = _counts(k, kern, grouping)
    sums = kern.groupby("_g")[list(SUM_COLS)].sum(min_count=1)
    busy = _busy_and_span(k)
    host = partition.assign(_g=grouping.partition_g).groupby("_g")[
        [*HOST_KEYS, "exposed_orchestration_ns", "hidden_orchestration_ns"]].sum()
    lib = pd.Series(grouping.library_ns).groupby(grouping.library_g).sum()
    counts_d, sums_d, busy_d, host_d = (_records(f) for f in (counts, sums, busy, host))
    out = {}
    for g in groups:
        c = counts_d.get(g)
        row = _base(c, g, grouping, ctx)
        row.update(_device(c, busy_d.get(g), ctx))
        row.update(_components(c, sums_d.get(g), ctx))
        row["library_measured_us"] = _us(lib.get(g, 0)) if ctx.has_library_ranges else None
        tokens = grouping.tokens.get(g) if isinstance(grouping.tokens, dict) else grouping.tokens
        row.update(_tokens(row, tokens))
        row.update(_host(host_d.get(g)))
        row["steps"] = int(grouping.steps.get(g, 0))
        out[g] = {key: row[key] for key in SUMMARY_KEYS}
    return out


def _records(frame: pd.DataFrame) -> dict:
    """``{group: {column: python value or None}}`` (plain dict lookups in the per-group loop)."""
    if len(frame) == 0:
        return {}
    cols = {c: frame[c].astype(object).where(frame[c].notna(), None).tolist() for c in frame.columns}
    return {g: {c: cols[c][i] for c in cols} for i, g in enumerate(frame.index.tolist())}


def _counts(k: pd.DataFrame, kern: pd.DataFrame, grouping: Grouping) -> pd.DataFrame:
    frame = pd.DataFrame({
        "kernels": kern.groupby("_g").size(),
        "active": kern.groupby("_g")["dur_ns"].sum(),
        "names": kern.groupby("_g")["name"].nunique(),
        "orphans": k["launch_start_ns"].isna().groupby(k["_g"]).sum(),
        "launches": pd.Series(1, index=grouping.launch_g).groupby(level=0).sum(),
        "orphan_launches": pd.Series(1, index=grouping.orphan_g).groupby(level=0).sum(),
        "aten_ops": pd.Series(1, index=grouping.aten_root_g).groupby(level=0).sum(),
    })
    return frame.fillna(0).astype(np.int64)


def _busy_and_span(k: pd.DataFrame) -> pd.DataFrame:
    """Union of device intervals (all kinds) and first-start→last-end span, per group."""
    if len(k) == 0:
        return pd.DataFrame(columns=["busy", "span"])
    df = pd.DataFrame({"g": k["_g"].to_numpy(), "s": k["start_ns"].to_numpy(np.int64)})
    df["e"] = df["s"] + k["dur_ns"].to_numpy(np.int64)
    df = df.sort_values(["g", "s"], kind="stable")
    run_end = df.groupby("g", sort=False)["e"].cummax()
    prev = run_end.groupby(df["g"], sort=False).shift(1)
    seg = (prev.isna() | (df["s"] > prev)).cumsum()
    merged = df.assign(seg=seg.to_numpy()).groupby(["g", "seg"]).agg(s=("s", "min"), e=("e", "max"))
    busy = (merged["e"] - merged["s"]).groupby(level=0).sum()
    span = df.groupby("g")["e"].max() - df.groupby("g")["s"].min()
    return pd.DataFrame({"busy": busy, "span": span})


def _base(c, g, grouping: Grouping, ctx: Context) -> dict:
    zero = c is None
    return {"kernels": 0 if zero else int(c["kernels"]), "launches": 0 if zero else int(c["launches"]),
            "orphan_kernels": 0 if zero else int(c["orphans"]),
            "orphan_launches": 0 if zero else int(c["orphan_launches"]),
            "aten_ops": 0 if zero else int(c["aten_ops"]),
            "floor_us": ctx.floor.floor_us, "floor_source": ctx.floor.source,
            "t_dispatch_base_us": _us(ctx.dispatch_base_ns),
            "kernel_diversity": round(c["names"] / c["kernels"], 6) if not zero and c["kernels"] else None}


def _device(c, busy, ctx: Context) -> dict:
    if not ctx.has_device or busy is None:
        return dict.fromkeys(("device_active_us", "device_busy_us", "span_us", "gpu_idle_us"))
    active = int(c["active"]) if c is not None and c["kernels"] else None
    return {"device_active_us": _us(active), "device_busy_us": _us(busy["busy"]), "span_us": _us(busy["span"]),
            "gpu_idle_us": _us(busy["span"] - busy["busy"])}


def _components(c, sums, ctx: Context) -> dict:
    keys = [*SUM_COLS.values(), "orchestration_us", "hdbi"]
    if c is None or not c["kernels"] or sums is None:
        return dict.fromkeys(keys)
    out = {key: _us(sums[col]) for col, key in SUM_COLS.items()}
    if not ctx.t_py_measured:
        out["framework_python_us"] = None
    parts = [sums[col] for col in ("ft_ns", "ct_ns", "kt_floor_ns") if sums[col] is not None]
    orch = int(sum(parts)) if parts else None
    active = int(c["active"])
    out["orchestration_us"] = _us(orch)
    out["hdbi"] = None if orch is None or active + orch == 0 else round(active / (active + orch), 6)
    return out


def _tokens(row: dict, tokens: int | None) -> dict:
    return {"tokens": tokens,
            "kernels_per_token": _per(row["kernels"] if row["device_active_us"] is not None else None, tokens),
            "orchestration_us_per_token": _per(row["orchestration_us"], tokens),
            "framework_us_per_token": _per(row["framework_us"], tokens),
            "device_active_us_per_token": _per(row["device_active_us"], tokens),
            "aten_ops_per_token": _per(row["aten_ops"], tokens)}


def _host(h) -> dict:
    if h is None:
        return {**{us: 0.0 for us in HOST_KEYS.values()}, "exposed_orchestration_us": 0.0,
                "hidden_orchestration_us": 0.0}
    out = {us: _us(h[ns]) for ns, us in HOST_KEYS.items()}
    out["exposed_orchestration_us"] = _us(h["exposed_orchestration_ns"])
    out["hidden_orchestration_us"] = _us(h["hidden_orchestration_ns"])
    return out
