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
    if type(ns) is int and -2**50 < ns < 2**50:
        # ns / 1000 is already the double nearest to a 3-decimal value, so
        # round(..., 3) returns it unchanged while one ulp is far below 0.001 (|ns| < 2**50)
        return ns / 1000.0
    if ns is None or ns is pd.NA or ns != ns:
        return None
    return round(float(ns) / 1000.0, 3)


def _per(value, tokens) -> float | None:
    return None if value is None or not tokens else round(float(value) / tokens, 3)


def grouped_metrics(kernels: pd.DataFrame, partition: pd.DataFrame, grouping: Grouping, groups: list,
                    ctx: Context) -> dict:
    """``{group: summary dict}`` for every group in ``groups`` (keys: ``SUMMARY_KEYS``).

    Every quantity is a numpy sum over dense group codes (labels outside
    ``groups`` are ignored); a group absent from an input gets ``None`` there,
    as a group-by would leave it out.
    """
    index = pd.Index(groups)
    codes = _Codes(index, len(groups))
    k_g = codes(grouping.kernel_g)
    is_kernel = (kernels["kind"] == "kernel").to_numpy(bool)
    counts = _counts(kernels, k_g, is_kernel, grouping, codes)
    sums = _sums(kernels, k_g, is_kernel, len(groups))
    busy = _busy_and_span(kernels, k_g, len(groups))
    host = _host_sums(partition, codes(grouping.partition_g), len(groups))
    lib = _group_sum(codes(grouping.library_g), grouping.library_ns, len(groups)).tolist()
    out = {}
    for i, g in enumerate(groups):
        c = counts[i]
        row = _base(c, g, grouping, ctx)
        row.update(_device(c, busy[i], ctx))
        row.update(_components(c, sums[i], ctx))
        row["library_measured_us"] = _us(lib[i]) if ctx.has_library_ranges else None
        tokens = grouping.tokens.get(g) if isinstance(grouping.tokens, dict) else grouping.tokens
        row.update(_tokens(row, tokens))
        row.update(_host(host[i]))
        row["steps"] = int(grouping.steps.get(g, 0))
        out[g] = {key: row[key] for key in SUMMARY_KEYS}
    return out


class _Codes:
    """Dense code (position in ``groups``) of each label, ``-1`` outside them."""

    def __init__(self, index: pd.Index, n: int):
        self.index, self.n = index, n
        self.is_int = index.dtype.kind in "iu"
        self.is_range = self.is_int and index.equals(pd.RangeIndex(n))
        if self.is_int:
            self.order = np.argsort(index.to_numpy(np.int64), kind="stable")
            self.sorted = index.to_numpy(np.int64)[self.order]

    def __call__(self, labels) -> np.ndarray:
        labels = np.asarray(labels)
        if len(labels) == 0 or self.n == 0:
            return np.full(len(labels), -1, np.int64)
        if not self.is_int or labels.dtype.kind not in "iu" or not self.index.is_unique:
            return self.index.get_indexer(labels).astype(np.int64)
        labels = labels.astype(np.int64, copy=False)
        if self.is_range:
            return np.where((labels >= 0) & (labels < self.n), labels, -1)
        # integer groups (step ids): a search in the few sorted ids beats hashing millions of labels
        pos = np.minimum(np.searchsorted(self.sorted, labels), self.n - 1)
        return np.where(self.sorted[pos] == labels, self.order[pos], -1)


def _group_sum(codes: np.ndarray, values, n: int) -> np.ndarray:
    """Exact int64 sum per code (codes ``< 0`` ignored)."""
    out = np.zeros(n, np.int64)
    keep = codes >= 0
    np.add.at(out, codes[keep], np.asarray(values, np.int64)[keep])
    return out


def _group_count(codes: np.ndarray, n: int) -> np.ndarray:
    return np.bincount(codes[codes >= 0], minlength=n)[:n].astype(np.int64)


def _records(columns: dict, present: np.ndarray) -> list:
    """One ``{column: python value}`` dict per group, ``None`` for an absent group."""
    lists = {c: v.tolist() for c, v in columns.items()}
    return [{c: lists[c][i] for c in lists} if ok else None for i, ok in enumerate(present.tolist())]


def _counts(k: pd.DataFrame, k_g: np.ndarray, is_kernel: np.ndarray, grouping: Grouping, codes) -> list:
    """Kernel, launch, orphan and ATen-op counts per group (``None`` where the group has none of them)."""
    n = codes.n
    kern_g = np.where(is_kernel, k_g, -1)
    cols = {"kernels": _group_count(kern_g, n),
            "active": _group_sum(kern_g, k["dur_ns"].to_numpy(np.int64), n),
            "names": _distinct_names(k["name"], kern_g, n),
            "orphans": _group_count(np.where(k["launch_start_ns"].isna().to_numpy(bool), k_g, -1), n),
            "launches": _group_count(codes(grouping.launch_g), n),
            "orphan_launches": _group_count(codes(grouping.orphan_g), n),
            "aten_ops": _group_count(codes(grouping.aten_root_g), n)}
    present = _group_count(k_g, n) > 0
    for key in ("launches", "orphan_launches", "aten_ops"):
        present |= cols[key] > 0
    return _records(cols, present)


def _distinct_names(names: pd.Series, g: np.ndarray, n: int) -> np.ndarray:
    """Distinct non-null kernel names per group, from the categorical codes."""
    name_codes = names.cat.codes.to_numpy(np.int64)
    keep = (g >= 0) & (name_codes >= 0)
    pairs = np.sort(g[keep] * np.int64(len(names.cat.categories) + 1) + name_codes[keep])
    if len(pairs) == 0:
        return np.zeros(n, np.int64)
    new = np.concatenate([[True], pairs[1:] != pairs[:-1]])
    return np.bincount(pairs[new] // np.int64(len(names.cat.categories) + 1), minlength=n)[:n].astype(np.int64)


def _sums(k: pd.DataFrame, k_g: np.ndarray, is_kernel: np.ndarray, n: int) -> list:
    """Component sums per group over kernels; ``None`` where every value is NA (``sum(min_count=1)``)."""
    kern_g = np.where(is_kernel, k_g, -1)
    cols, measured = {}, {}
    for col in SUM_COLS:
        na = k[col].isna().to_numpy(bool)
        cols[col] = _group_sum(np.where(na, -1, kern_g), k[col].to_numpy(np.int64, na_value=0), n)
        measured[col] = _group_count(np.where(na, -1, kern_g), n) > 0
    records = _records(cols, _group_count(kern_g, n) > 0)
    for i, rec in enumerate(records):
        if rec is not None:
            for col in SUM_COLS:
                rec[col] = rec[col] if measured[col][i] else None
    return records


def _busy_and_span(k: pd.DataFrame, k_g: np.ndarray, n: int) -> list:
    """Union of device intervals (all kinds) and first-start→last-end span, per group.

    Rows sorted by (group, start); each group's times are shifted past every
    earlier group's, so one running maximum over all rows is the per-group
    running end and a group's first row always opens a new merged interval.
    """
    keep = np.flatnonzero(k_g >= 0)
    s = k["start_ns"].to_numpy(np.int64)[keep]
    e = s + k["dur_ns"].to_numpy(np.int64)[keep]
    g = k_g[keep]
    if len(s) == 0:
        return [None] * n
    order = np.lexsort((s, g))
    g, s, e = g[order], s[order], e[order]
    run_end = _running_end(g, s, e)
    new = np.ones(len(s), dtype=bool)
    new[1:] = (g[1:] != g[:-1]) | (s[1:] > run_end[:-1])
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(s) - 1)
    busy = _group_sum(g[first], run_end[last] - s[first], n)
    g_first = np.flatnonzero(np.concatenate([[True], g[1:] != g[:-1]]))
    span = np.zeros(n, np.int64)
    span[g[g_first]] = np.maximum.reduceat(e, g_first) - s[g_first]
    return _records({"busy": busy, "span": span}, _group_count(g, n) > 0)


def _running_end(g: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Running maximum of ``e`` within each group of rows sorted by (group, start)."""
    width = int(e.max()) - int(s.min()) + 1
    if (int(g.max()) + 1) * width < 2**62:
        shift = g * np.int64(width) - s.min()
        return np.maximum.accumulate(e + shift) - shift
    # shifted times would overflow int64 (a span of days times thousands of groups): one pass per group
    bounds = np.flatnonzero(np.concatenate([[True], g[1:] != g[:-1], [True]]))
    return np.concatenate([np.maximum.accumulate(e[a:b]) for a, b in zip(bounds[:-1], bounds[1:])])


def _host_sums(partition: pd.DataFrame, p_g: np.ndarray, n: int) -> list:
    cols = {c: _group_sum(p_g, partition[c].to_numpy(np.int64), n)
            for c in [*HOST_KEYS, "exposed_orchestration_ns", "hidden_orchestration_ns"]}
    return _records(cols, _group_count(p_g, n) > 0)


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
