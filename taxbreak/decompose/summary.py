"""Summary metrics per scope (whole trace, each phase, each step), computed for
all scopes of one kind at once with group-bys (no per-step pass over the rows).

Every scope gets the same keys (µs unless named). A value that was not
measured is ``None``: no device activity in the trace, no kernel in the scope,
no token count, no library ranges. Equations in docs/method.md; every key with
its unit and meaning in taxbreak/report/summary_schema.json. A per-kernel sum
of waits that overlap says so in its name (``tklqt_sum_us``, ``queue_wait_sum_us``);
idle time over the analysis window is ``device_idle_us``, over the device's own
first-to-last activity ``device_span_idle_us``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .busy import BUSY_KIND_KEYS, BUSY_KINDS, BusyPieces
from .floor import Floor
from .idle import CAUSES as IDLE_CAUSES
from .intervals import merged_by_group
from .partition import COLUMNS

HOST_KEYS = {col: col.replace("_ns", "_us") for col in [*COLUMNS.values(), "host_thread_ns"]}
# the same partition over the threads that launch nothing (docs/method.md §7)
NONLAUNCHING_KEYS = {col: col.replace("host_", "host_nonlaunching_").replace("_ns", "_us") for col in HOST_KEYS}
SUM_COLS = {"ft_ns": "framework_us", "ft_python_ns": "framework_python_us", "ft_dispatch_ns": "framework_dispatch_us",
            "ct_ns": "library_us", "ct_by_name_ns": "library_by_name_us", "kt_floor_ns": "launch_floor_us",
            "launch_latency_ns": "launch_latency_us", "dependency_wait_ns": "dependency_wait_us", "kt_graph_ns": "launch_graph_us", "t_launch_ns": "tklqt_sum_us",
            "queue_wait_ns": "queue_wait_sum_us"}

SUMMARY_KEYS = (
    "kernels", "launches", "orphan_kernels", "orphan_copies", "orphan_launches", "captured_launches",
    "orphan_copy_calls",
    "chain_coverage", "device_active_us", "orphan_device_us", "device_busy_us", "device_kernel_busy_us",
    "device_copy_busy_us", "device_memset_busy_us", "span_us",
    "device_span_idle_us", "tklqt_sum_us", "queue_wait_sum_us", "queue_wait_median_us", "queue_wait_p99_us",
    "queue_wait_union_us",
    "framework_us", "framework_python_us", "framework_dispatch_us", "library_us", "library_by_name_us",
    "launch_floor_us", "launch_latency_us", "dependency_wait_us", "launch_graph_us", "orchestration_us", "hdbi", "hdbi_reason",
    "hdbi_covered", "hdbi_coverage",
    "floor_us", "floor_source",
    "t_dispatch_base_us", "library_measured_us", "kernel_diversity", "tokens", "kernels_per_token",
    "orchestration_us_per_token", "framework_us_per_token", "device_active_us_per_token", "aten_ops",
    "aten_ops_per_token", "wall_us", "device_idle_us", "idle_by_cause_us", "devices",
    *HOST_KEYS.values(), "exposed_orchestration_us", "hidden_orchestration_us", *NONLAUNCHING_KEYS.values(),
    "steps",
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
    devices: tuple = ()  # device ids with activity, in order


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
    orphan_copy_call_g: np.ndarray | None = None  # per memcpy/memset call without device activity
    idle_g: np.ndarray | None = None  # per Analysis.idle row
    window_g: np.ndarray | None = None  # per window piece (decompose.idle.window_pieces)
    window_ns: np.ndarray | None = None
    busy_g: np.ndarray | None = None  # per busy piece (decompose.busy.busy_pieces)
    captured_g: np.ndarray | None = None  # per launch call recorded into a CUDA graph (decompose.capture)


@dataclass
class IdleArrays:
    """The columns of ``Analysis.idle`` every scope sums."""

    device_pos: np.ndarray  # position of the row's device in Context.devices
    cause: np.ndarray  # code into IDLE_CAUSES
    dur_ns: np.ndarray


def idle_arrays(idle: pd.DataFrame, devices: tuple) -> IdleArrays:
    dev = idle["device"].to_numpy(np.int64)
    return IdleArrays(np.searchsorted(np.asarray(devices, np.int64), dev), idle["cause"].cat.codes.to_numpy(np.int64),
                      (idle["end_ns"] - idle["start_ns"]).to_numpy(np.int64))

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


@dataclass
class KernelArrays:
    """The per-kernel columns every scope sums, taken out of ``Analysis.kernels`` once
    (the step, phase and whole-trace summaries all read them)."""

    is_kernel: np.ndarray  # kind == "kernel"
    start_ns: np.ndarray
    dur_ns: np.ndarray
    orphan: np.ndarray  # no launch call linked
    full_chain: np.ndarray  # torch op -> ATen op -> launch -> kernel all linked
    queue_start_ns: np.ndarray  # where the queue wait begins (-1: none)
    name_codes: np.ndarray  # categorical codes of the kernel name, -1 for none
    n_names: int
    carrier: np.ndarray  # a kernel that carries its launch call (the first activity of the call)
    covered: np.ndarray  # a linked kernel whose launch lies inside a framework (dispatcher) op
    components: dict  # SUM_COLS column -> its Series in Analysis.kernels (see ``component``)

    def component(self, col: str) -> tuple[np.ndarray, np.ndarray]:
        """(int64 values with NA as 0, NA mask) of one component column. Taken out per
        use, not held for every column: at 10 M events the nine columns are ~130 MB,
        and the step and phase tables run side by side."""
        values = self.components[col]
        return values.to_numpy(np.int64, na_value=0), values.isna().to_numpy(bool)


def kernel_arrays(kernels: pd.DataFrame) -> KernelArrays:
    """The :class:`KernelArrays` of an ``Analysis.kernels`` frame."""
    names = kernels["name"]
    full = (kernels["launch_start_ns"].notna() & kernels["op_name"].notna() & kernels["torch_op_name"].notna())
    return KernelArrays((kernels["kind"] == "kernel").to_numpy(bool), kernels["start_ns"].to_numpy(np.int64),
                        kernels["dur_ns"].to_numpy(np.int64), kernels["launch_start_ns"].isna().to_numpy(bool),
                        full.to_numpy(bool), kernels["queue_start_ns"].to_numpy(np.int64, na_value=-1),
                        names.cat.codes.to_numpy(np.int64), len(names.cat.categories),
                        (kernels["kind"] == "kernel").to_numpy(bool) & kernels["first_of_launch"].to_numpy(bool)
                        & kernels["launch_start_ns"].notna().to_numpy(bool),
                        (kernels["launch_start_ns"].notna() & kernels["op_start_ns"].notna()).to_numpy(bool),
                        {col: kernels[col] for col in SUM_COLS})


def grouped_metrics(kernels: KernelArrays, partition: pd.DataFrame, grouping: Grouping, groups: list,
                    ctx: Context, idle: IdleArrays | None = None, busy: BusyPieces | None = None) -> dict:
    """``{group: summary dict}`` for every group in ``groups`` (keys: ``SUMMARY_KEYS``)."""
    columns = grouped_columns(kernels, partition, grouping, groups, ctx, idle, busy)
    rows = zip(*(columns[key] for key in SUMMARY_KEYS))
    return {g: dict(zip(SUMMARY_KEYS, values)) for g, values in zip(groups, rows)}


def grouped_columns(kernels: KernelArrays, partition: pd.DataFrame, grouping: Grouping, groups: list,
                    ctx: Context, idle: IdleArrays | None = None, busy: BusyPieces | None = None) -> dict[str, list]:
    """``{key: one value per group}`` for every key of ``SUMMARY_KEYS``, in ``groups`` order.

    Every quantity is a numpy sum over dense group codes (labels outside
    ``groups`` are ignored); a group absent from an input gets ``None`` there,
    as a group-by would leave it out. Built column by column: a trace of 40 k
    steps gets its per-step summaries without a Python pass per step and key.
    """
    n = len(groups)
    codes = _Codes(pd.Index(groups), n)
    k_g = codes(grouping.kernel_g)
    counts = _counts(kernels, k_g, grouping, codes)
    out = _base(counts, ctx, n)
    kind_busy = _busy_by_kind(grouping, codes, busy, ctx, n)
    out.update(_device(counts, _busy_and_span(kernels, k_g, n), ctx))
    out.update(_queue(kernels, k_g, n, ctx))
    out.update(_components(counts, _sums(kernels, k_g, n), ctx, _coverage(kernels, k_g, n)))
    lib = _group_sum(codes(grouping.library_g), grouping.library_ns, n)
    out["library_measured_us"] = _us_list(lib) if ctx.has_library_ranges else [None] * n
    out.update(_tokens(out, _group_tokens(grouping.tokens, groups)))
    out.update(_host(partition, codes(grouping.partition_g), n, ctx))
    out.update(_idle(grouping, codes, idle, ctx, n, kind_busy))
    out.update(_kind_busy_keys(kind_busy, _window_ns(grouping, codes, n), n))
    out["steps"] = [int(grouping.steps.get(g, 0)) for g in groups]
    return {key: out[key] for key in SUMMARY_KEYS}


def _chunks(values: list, size: int) -> list[list]:
    return [values[i:i + size] for i in range(0, len(values), size)]


def _group_tokens(tokens, groups: list) -> list:
    return [tokens.get(g) for g in groups] if isinstance(tokens, dict) else [tokens] * len(groups)


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


def _us_list(ns: np.ndarray, valid: np.ndarray | None = None) -> list:
    """µs values of int64 ns (``_us`` element-wise); ``None`` where ``valid`` is False."""
    ns = np.asarray(ns, np.int64)
    values = (ns / 1000.0).tolist()  # int64 -> float64 is exact below 2**53: the same double as _us
    for i in np.flatnonzero(np.abs(ns) >= 2**50).tolist():
        values[i] = round(float(ns[i]) / 1000.0, 3)
    if valid is None:
        return values
    return [v if ok else None for v, ok in zip(values, valid.tolist())]


def _counts(k: KernelArrays, k_g: np.ndarray, grouping: Grouping, codes) -> dict:
    """Kernel, launch, orphan and ATen-op counts per group (all zero for a group with none of them)."""
    n = codes.n
    kern_g = np.where(k.is_kernel, k_g, -1)
    return {"kernels": _group_count(kern_g, n),
            "active": _group_sum(kern_g, k.dur_ns, n),
            "names": _distinct_names(k, kern_g, n),
            "linked_active": _group_sum(np.where(k.orphan, -1, kern_g), k.dur_ns, n),
            "orphan_active": _group_sum(np.where(k.orphan, kern_g, -1), k.dur_ns, n),
            "orphans": _group_count(np.where(k.orphan, kern_g, -1), n),
            "orphan_copies": _group_count(np.where(k.orphan & ~k.is_kernel, k_g, -1), n),
            "full_chain": _group_count(np.where(k.full_chain, kern_g, -1), n),
            "launches": _group_count(codes(grouping.launch_g), n),
            "orphan_launches": _group_count(codes(grouping.orphan_g), n),
            "captured_launches": _group_count(codes(grouping.captured_g), n)
            if grouping.captured_g is not None else np.zeros(n, np.int64),
            "orphan_copy_calls": _group_count(codes(grouping.orphan_copy_call_g), n)
            if grouping.orphan_copy_call_g is not None else np.zeros(n, np.int64),
            "aten_ops": _group_count(codes(grouping.aten_root_g), n),
            "rows": _group_count(k_g, n)}  # device rows of every kind


def _distinct_names(k: KernelArrays, g: np.ndarray, n: int) -> np.ndarray:
    """Distinct non-null kernel names per group, from the categorical codes."""
    keep = (g >= 0) & (k.name_codes >= 0)
    pairs = np.sort(g[keep] * np.int64(k.n_names + 1) + k.name_codes[keep])
    if len(pairs) == 0:
        return np.zeros(n, np.int64)
    new = np.concatenate([[True], pairs[1:] != pairs[:-1]])
    return np.bincount(pairs[new] // np.int64(k.n_names + 1), minlength=n)[:n].astype(np.int64)


def _sums(k: KernelArrays, k_g: np.ndarray, n: int) -> dict:
    """Component sums per group over kernels, with a mask of the groups where some
    value is not NA (``sum(min_count=1)``)."""
    kern_g = np.where(k.is_kernel, k_g, -1)
    out = {}
    for col in k.components:
        values, na = k.component(col)
        g = np.where(na, -1, kern_g)
        out[col] = (_group_sum(g, values, n), _group_count(g, n) > 0)
    return out


def _busy_by_kind(grouping: Grouping, codes, busy: BusyPieces | None, ctx: Context, n: int) -> list[np.ndarray] | None:
    """Per kind of BUSY_KINDS: busy ns per (group, device), shape (n, devices + 1), the last column the
    union over all devices merged; ``None`` without pieces."""
    if busy is None or grouping.busy_g is None or not ctx.has_device:
        return None
    n_dev, n_kind = len(ctx.devices) + 1, len(BUSY_KINDS)  # the last position: all devices merged
    g = codes(grouping.busy_g)
    cell = np.where(g >= 0, (g * n_dev + busy.device_pos) * n_kind + busy.kind, -1)
    sums = _group_sum(cell, busy.dur_ns, n * n_dev * n_kind).reshape(n, n_dev, n_kind)
    return [sums[:, :, kind] for kind in range(n_kind)]


def _kind_busy_keys(kind_busy: list[np.ndarray] | None, wall: np.ndarray | None, n: int) -> dict:
    """``device_<kind>_busy_us`` per group: the union over all devices merged, as ``device_busy_us``
    (unions per kind: they may overlap each other)."""
    if kind_busy is None:
        return {key: [None] * n for key in BUSY_KIND_KEYS}
    has = wall > 0 if wall is not None else np.ones(n, bool)
    return {key: _us_list(busy[:, -1], has) for key, busy in zip(BUSY_KIND_KEYS, kind_busy)}


def _busy_and_span(k: KernelArrays, k_g: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Union of device intervals (all kinds) and first-start→last-end span, per group."""
    return union_and_span(k_g, k.start_ns, k.start_ns + k.dur_ns, n)


def union_and_span(group: np.ndarray, start_ns: np.ndarray, end_ns: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Measure of the union of the intervals and first-start→last-end span, per group (``group < 0`` ignored).

    From the group's merged intervals (:func:`intervals.merged_by_group`).
    """
    g, s, e = merged_by_group(group, start_ns, end_ns)  # disjoint, in (group, start) order
    span = np.zeros(n, np.int64)
    if len(s) == 0:
        return np.zeros(n, np.int64), span
    busy = _group_sum(g, e - s, n)
    first = np.flatnonzero(np.concatenate([[True], g[1:] != g[:-1]]))
    last = np.append(first[1:] - 1, len(g) - 1)
    span[g[first]] = e[last] - s[first]  # a group's merged intervals are in order: its last ends last
    return busy, span


def _base(c: dict, ctx: Context, n: int) -> dict:
    kernels = c["kernels"].tolist()
    return {"kernels": kernels, "launches": c["launches"].tolist(), "orphan_kernels": c["orphans"].tolist(),
            "orphan_copies": c["orphan_copies"].tolist(), "orphan_launches": c["orphan_launches"].tolist(),
            "captured_launches": c["captured_launches"].tolist(),
            "orphan_copy_calls": c["orphan_copy_calls"].tolist(), "aten_ops": c["aten_ops"].tolist(),
            "chain_coverage": [round(f / k, 6) if k else None for f, k in zip(c["full_chain"].tolist(), kernels)],
            "floor_us": [ctx.floor.floor_us] * n, "floor_source": [ctx.floor.source] * n,
            "t_dispatch_base_us": [_us(ctx.dispatch_base_ns)] * n,
            "kernel_diversity": [round(names / k, 6) if k else None
                                 for names, k in zip(c["names"].tolist(), kernels)]}


def _device(c: dict, busy_span: tuple[np.ndarray, np.ndarray], ctx: Context) -> dict:
    """Device times; all ``None`` without device activity in the trace or in the group."""
    busy, span = busy_span
    has_rows = c["rows"] > 0 if ctx.has_device else np.zeros(len(busy), bool)
    linked = c["kernels"] - c["orphans"]
    return {"device_active_us": _us_list(c["linked_active"], has_rows & (linked > 0)),
            "orphan_device_us": _us_list(c["orphan_active"], has_rows & (c["kernels"] > 0)),
            "device_busy_us": _us_list(busy, has_rows), "span_us": _us_list(span, has_rows),
            "device_span_idle_us": _us_list(span - busy, has_rows)}


ORCHESTRATE_COLS = ("ft_ns", "ct_ns", "kt_floor_ns", "kt_graph_ns")


def _coverage(k: KernelArrays, k_g: np.ndarray, n: int) -> dict:
    """Per group: launch calls with kernels, those inside a framework op, and the device time and
    T_Orchestrate of the kernels inside one (where every component is measured)."""
    cov_g = np.where(k.is_kernel & k.covered, k_g, -1)
    orch = np.zeros(len(k_g), np.int64)
    for col in ORCHESTRATE_COLS:
        orch += k.component(col)[0]
    return {"carriers": _group_count(np.where(k.carrier, k_g, -1), n),
            "covered": _group_count(np.where(k.carrier & k.covered, k_g, -1), n),
            "active": _group_sum(cov_g, k.dur_ns, n), "orch": _group_sum(cov_g, orch, n)}


def _components(c: dict, sums: dict, ctx: Context, cov: dict) -> dict:
    """ΔFT / ΔCT / ΔKT sums, orchestration and HDBI; ``None`` for a group without linked kernels.

    HDBI = T_DeviceActive / (T_DeviceActive + T_Orchestrate) over the kernels with
    a launch call (orphans have device time but no host cost in the trace). It is
    ``None`` — never computed from a missing part — when ΔFT or ΔCT is not
    measured for the scope, or ΔFT is missing for some launched kernels (their launch
    lies in no framework op); then ``hdbi_covered`` is HDBI over the kernels whose every
    component is measured and ``hdbi_coverage`` their share of the launch calls.
    ``orchestration_us`` is ``None`` where a component is not measured (docs/method.md §3).
    """
    linked = (c["kernels"] - c["orphans"]) > 0
    out = {key: _us_list(sums[col][0], sums[col][1] & linked) for col, key in SUM_COLS.items()}
    if not ctx.t_py_measured:
        out["framework_python_us"] = [None] * len(linked)
    if ctx.dispatch_base_ns is None:  # no baseline: ΔCT cannot be told apart from ΔFT dispatch
        out["library_us"] = [None] * len(linked)
        out["library_by_name_us"] = [None] * len(linked)
    parts = [sums[col] for col in ORCHESTRATE_COLS]
    orch = sum(np.where(measured, total, 0) for total, measured in parts)
    missing = [ft is None or py is None or ct is None or fl is None for ft, py, ct, fl in
               zip(out["framework_us"], out["framework_python_us"], out["library_us"], out["launch_floor_us"])]
    out["orchestration_us"] = _us_list(orch, linked & ~np.array(missing, bool))
    out["hdbi"], out["hdbi_reason"] = _hdbi(c["linked_active"].tolist(), orch.tolist(), linked.tolist(),
                                            out, cov, ctx)
    out.update(_covered_hdbi(cov, ctx, missing, out["launch_floor_us"]))
    return out


def _covered_hdbi(cov: dict, ctx: Context, missing: list, floor: list) -> dict:
    """HDBI over the kernels whose every component is measured, and their share of the launch calls."""
    share = [round(int(v) / int(t), 6) if t else None for v, t in zip(cov["covered"], cov["carriers"])]
    measured_trace = ctx.t_py_measured and ctx.dispatch_base_ns is not None
    values = [round(int(a) / int(a + o), 6) if measured_trace and fl is not None and v and a + o else None
              for a, o, v, fl in zip(cov["active"], cov["orch"], cov["covered"], floor)]
    return {"hdbi_covered": values, "hdbi_coverage": share}


def _hdbi(active: list, orch: list, linked: list, out: dict, cov: dict, ctx: Context) -> tuple[list, list]:
    """Eq. HDBI per group, or ``None`` with the reason it cannot be computed."""
    values, reasons = [], []
    rows = zip(active, orch, linked, out["framework_us"], out["framework_python_us"], out["library_us"],
               cov["covered"].tolist(), cov["carriers"].tolist())
    for a, o, ok, ft, py, ct, covered, carriers in rows:
        reason = (NO_DEVICE if not ctx.has_device else "no kernel with a launch call in this scope" if not ok
                  else "ΔFT not measured: no kernel in this scope is linked to a framework op" if ft is None
                  else "ΔFT Python part not measured: the trace has no Python frames or torch-level ops"
                  if py is None
                  else "ΔCT not measured: no dispatch baseline (T_dispatch_base) in this trace" if ct is None
                  else f"ΔFT not measured for {carriers - covered:,} of {carriers:,} launch calls (launched outside "
                       f"any framework op); hdbi_covered holds over the rest" if covered < carriers
                  else "no device or orchestration time" if a + o == 0 else None)
        values.append(None if reason else round(a / (a + o), 6))
        reasons.append(reason)
    return values, reasons


NO_DEVICE = "no device activity in the trace"


def _queue(k: KernelArrays, k_g: np.ndarray, n: int, ctx: Context) -> dict:
    """Queue-wait distribution per group: median, p99 and the union of waiting intervals."""
    values, na = k.component("queue_wait_ns")
    g = np.where(k.is_kernel & ~na, k_g, -1)
    has = _group_count(g, n) > 0
    waiting = np.where(values > 0, g, -1)
    union, _ = union_and_span(waiting, k.queue_start_ns, k.queue_start_ns + values, n)
    median, p99 = group_quantiles(g, values, n, (0.5, 0.99))
    return {"queue_wait_median_us": _us_list(np.rint(median).astype(np.int64), has),
            "queue_wait_p99_us": _us_list(np.rint(p99).astype(np.int64), has),
            "queue_wait_union_us": _us_list(union, has)}


def group_quantile(group: np.ndarray, values: np.ndarray, n: int, q: float) -> np.ndarray:
    """Per-group quantile with linear interpolation (``np.quantile``'s default); 0 for an empty group."""
    return group_quantiles(group, values, n, (q,))[0]


def group_quantiles(group: np.ndarray, values: np.ndarray, n: int, qs: tuple[float, ...]) -> list[np.ndarray]:
    """:func:`group_quantile` for each of ``qs``, from one sort of the values by group."""
    keep = group >= 0
    g, v = _sorted_by_group(group[keep], values[keep])
    out = [np.zeros(n, np.float64) for _ in qs]
    if len(g) == 0:
        return out
    counts = np.bincount(g, minlength=n)[:n]
    starts = np.cumsum(counts) - counts
    present = np.flatnonzero(counts)
    for q, res in zip(qs, out):
        pos = (counts[present] - 1) * q
        lo = np.floor(pos).astype(np.int64)
        hi = np.minimum(lo + 1, counts[present] - 1)
        frac = pos - lo
        a, b = v[starts[present] + lo], v[starts[present] + hi]
        res[present] = a + (b - a) * frac
    return out


def _sorted_by_group(g: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Groups ascending, values ascending within each (as float64). Non-negative integer values
    whose (group, value) pairs fit one int64 are sorted as that one key: a single ``np.sort``
    instead of ``lexsort``'s two passes and gathers (5 M kernels: 0.74 -> ~0.3 s); same order."""
    if len(g) and values.dtype.kind in "iu" and values.min() >= 0:
        width = int(values.max()) + 1
        if int(g.max()) < (2**63 - 1) // width:
            key = np.sort(g.astype(np.int64) * width + values.astype(np.int64))
            return key // width, (key % width).astype(np.float64)
    v = np.asarray(values, np.float64)
    order = np.lexsort((v, g))
    return g[order], v[order]


def _tokens(cols: dict, tokens: list) -> dict:
    kernels = [k if active is not None else None for k, active in zip(cols["kernels"], cols["device_active_us"])]
    return {"tokens": tokens,
            "kernels_per_token": _per_list(kernels, tokens),
            "orchestration_us_per_token": _per_list(cols["orchestration_us"], tokens),
            "framework_us_per_token": _per_list(cols["framework_us"], tokens),
            "device_active_us_per_token": _per_list(cols["device_active_us"], tokens),
            "aten_ops_per_token": _per_list(cols["aten_ops"], tokens)}


def _per_list(values: list, tokens: list) -> list:
    if not any(tokens):
        return [None] * len(values)
    return [_per(v, t) for v, t in zip(values, tokens)]


def _host(partition: pd.DataFrame, p_g: np.ndarray, n: int, ctx: Context) -> dict:
    """Host partition sums over the threads that launch GPU work ("thread time"; every thread
    when none does), the other threads apart; 0.0 (not ``None``) for a group with no host
    time. Exposed/hidden orchestration only exist next to a device."""
    out = {}
    launching = partition["launches_work"].to_numpy(bool)
    selected = launching if launching.any() else np.ones(len(launching), bool)
    for ns_col, us_key in [*HOST_KEYS.items(), ("exposed_orchestration_ns", "exposed_orchestration_us"),
                           ("hidden_orchestration_ns", "hidden_orchestration_us")]:
        out[us_key] = _us_list(_group_sum(np.where(selected, p_g, -1), partition[ns_col].to_numpy(np.int64), n))
    for ns_col, us_key in NONLAUNCHING_KEYS.items():
        # no thread launches anything (a CPU-only trace): the split does not exist
        out[us_key] = (_us_list(_group_sum(np.where(selected, -1, p_g), partition[ns_col].to_numpy(np.int64), n))
                       if launching.any() else [None] * n)
    if not ctx.has_device:
        out["exposed_orchestration_us"] = out["hidden_orchestration_us"] = [None] * n
    if not ctx.has_library_ranges:
        # no cuBLAS/cuDNN ranges in the trace: the "library" part cannot be seen (its host time
        # falls in ATen dispatch), so it is not measured rather than a measured zero
        out["host_library_us"] = [None] * n
        if launching.any():
            out["host_nonlaunching_library_us"] = [None] * n
    return out


def _window_ns(grouping: Grouping, codes, n: int) -> np.ndarray | None:
    """Elapsed ns of each group's window pieces (``None`` without them)."""
    return None if grouping.window_g is None else _group_sum(codes(grouping.window_g), grouping.window_ns, n)


def _idle(grouping: Grouping, codes, idle: IdleArrays | None, ctx: Context, n: int,
          kind_busy: list[np.ndarray] | None = None) -> dict:
    """Elapsed wall time, device idle by cause (summed over devices) and per device, per group."""
    wall = _window_ns(grouping, codes, n)
    wall = wall if wall is not None else np.zeros(n, np.int64)
    out = {"wall_us": _us_list(wall, wall > 0) if grouping.window_g is not None else [None] * n}
    if idle is None or not ctx.has_device or grouping.idle_g is None:
        out.update(device_idle_us=[None] * n, idle_by_cause_us=[None] * n, devices=[None] * n)
        return out
    n_dev, n_cause = len(ctx.devices), len(IDLE_CAUSES)
    g = codes(grouping.idle_g)
    cell = np.where(g >= 0, (g * n_dev + idle.device_pos) * n_cause + idle.cause, -1)
    sums = _group_sum(cell, idle.dur_ns, n * n_dev * n_cause).reshape(n, n_dev, n_cause)
    by_cause = sums.sum(axis=1)
    per_dev = sums.sum(axis=2)
    # µs lists built once over whole arrays, then cut per group (thousands of steps: no per-step conversion)
    cause_us = _chunks(_unmeasured_library(_us_list(by_cause.reshape(-1)), ctx), n_cause)
    dev_cause_us = _chunks(_chunks(_unmeasured_library(_us_list(sums.reshape(-1)), ctx), n_cause), n_dev)
    dev_idle_us = _chunks(_us_list(per_dev.reshape(-1)), n_dev)
    dev_busy_us = _chunks(_us_list((wall[:, None] - per_dev).reshape(-1)), n_dev)
    out["device_idle_us"] = _us_list(by_cause.sum(axis=1))
    out["idle_by_cause_us"] = [dict(zip(IDLE_CAUSES, row)) for row in cause_us]
    names = [str(d) for d in ctx.devices]
    kinds = _per_device_kinds(kind_busy, n, n_dev)
    out["devices"] = [{name: {"busy_us": busy, **split, "idle_us": idle_us,
                              "idle_by_cause_us": dict(zip(IDLE_CAUSES, causes))}
                       for name, busy, split, idle_us, causes in zip(names, busy_row, split_row, idle_row, cause_rows)}
                      for busy_row, split_row, idle_row, cause_rows
                      in zip(dev_busy_us, kinds, dev_idle_us, dev_cause_us)]
    return out


def _per_device_kinds(kind_busy: list[np.ndarray] | None, n: int, n_dev: int) -> list[list[dict]]:
    """``[group][device] -> {device_<kind>_busy_us: …}`` from the per-(group, device) unions."""
    if kind_busy is None:  # not measured: the keys are there, with null
        return [[dict.fromkeys(BUSY_KIND_KEYS) for _ in range(n_dev)] for _ in range(n)]
    flat = [_chunks(_us_list(busy[:, :n_dev].reshape(-1)), n_dev) for busy in kind_busy]
    return [[dict(zip(BUSY_KIND_KEYS, (flat[k][g][d] for k in range(len(BUSY_KIND_KEYS))))) for d in range(n_dev)]
            for g in range(n)]


_LIBRARY_CAUSE = IDLE_CAUSES.index("library")


def _unmeasured_library(cause_us: list, ctx: Context) -> list:
    """The flat per-cause µs list with the library cause ``None`` where the trace has no
    library ranges (that cause is then not observable, not zero)."""
    if not ctx.has_library_ranges:
        cause_us[_LIBRARY_CAUSE::len(IDLE_CAUSES)] = [None] * len(cause_us[_LIBRARY_CAUSE::len(IDLE_CAUSES)])
    return cause_us
