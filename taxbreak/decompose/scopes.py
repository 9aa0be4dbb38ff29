"""Summaries per step, per phase and for the whole trace, plus the per-op table."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..trace.nesting import nesting, sorted_unique
from .link import Links, root_atens
from .busy import BusyPieces, busy_pieces
from .accessors import ALL as ALL_PHASE
from .dtypes import nullable_numeric
from .steps import BETWEEN, BETWEEN_NAME, Steps
from .summary import (SUMMARY_KEYS, Context, Grouping, IdleArrays, KernelArrays, grouped_columns, grouped_metrics,
                      idle_arrays, kernel_arrays)
from .views import LAUNCH_API_KINDS, Views


@dataclass
class _ApiSteps:
    """Step of each launch call, each orphan launch and each outermost library range."""

    launch: np.ndarray
    orphan: np.ndarray
    library: np.ndarray
    library_ns: np.ndarray
    aten_root: np.ndarray  # step of each outermost ATen op invocation
    orphan_copy_call: np.ndarray  # step of each memcpy/memset call without device activity
    captured: np.ndarray  # step of each launch call recorded into a CUDA graph (capture.py)


@dataclass
class ScopeInputs:
    """What the step and phase tables read, shared by both (they run in two threads).

    It holds no views and no links: what the tables need of them (the step of
    each API call and ATen root) is taken out once, so the caller can let the
    views go before the tables run (~0.5 GB at 10 M events)."""

    kernels: pd.DataFrame
    partition: pd.DataFrame
    steps: Steps
    ctx: Context
    idle: pd.DataFrame | None  # Analysis.idle
    window: tuple[np.ndarray, np.ndarray] | None  # (step, ns) pieces of the analysis window
    api: _ApiSteps
    kernel_arrays: KernelArrays
    idle_arrays: IdleArrays | None
    busy: BusyPieces | None = None  # device busy pieces per kind (decompose/busy.py)


def scope_inputs(views: Views, links: Links, kernels: pd.DataFrame, partition: pd.DataFrame, steps: Steps,
                 ctx: Context, idle: pd.DataFrame | None = None,
                 window: tuple[np.ndarray, np.ndarray] | None = None) -> ScopeInputs:
    """The :class:`ScopeInputs` of one analysis."""
    busy = busy_pieces(views.device, ctx.devices, steps) if ctx.has_device else None
    return ScopeInputs(kernels, partition, steps, ctx, idle, window, _compute_api_steps(views, links, steps),
                       kernel_arrays(kernels), None if idle is None else idle_arrays(idle, ctx.devices), busy)


def _compute_api_steps(views: Views, links: Links, steps: Steps) -> _ApiSteps:
    api = views.api
    step = steps.assign(api.start_ns)
    is_launch = api.kind_is(*LAUNCH_API_KINDS)
    unmatched = (api.correlation != -1) & ~links.api_has_device
    captured = links.capture.captured if links.capture is not None else np.zeros(len(unmatched), dtype=bool)
    # a memset/memcpy call with no device record is no orphan *launch* (counted on its own), nor is
    # a launch recorded into a CUDA graph during capture
    orphan = api.kind_is(*LAUNCH_API_KINDS) & unmatched & ~captured
    orphan_copy = api.kind_is("memcpy", "memset") & unmatched
    lib = np.flatnonzero(api.kind_is("library"))
    depth, _ = nesting(api.lane[lib], api.start_ns[lib], api.end_ns[lib] - api.start_ns[lib])
    outer = lib[depth == 0]  # nested library calls are inside their caller's range already
    roots = links.roots
    return _ApiSteps(step[is_launch], step[orphan], step[outer], api.end_ns[outer] - api.start_ns[outer],
                     steps.assign(views.host.start_ns[roots]), step[orphan_copy], step[captured])


def _step_rows(inp: ScopeInputs) -> pd.DataFrame:
    """Steps plus the ``between`` pseudo-step when anything falls outside every step."""
    table = inp.steps.table
    has_between = ((inp.kernels["step"] == BETWEEN).any() or (inp.partition["step"] == BETWEEN).any()
                   or (inp.idle is not None and (inp.idle["step"] == BETWEEN).any())
                   or (inp.window is not None and ((inp.window[0] == BETWEEN) & (inp.window[1] > 0)).any()))
    if not has_between:
        return table
    between = pd.DataFrame({"step": [BETWEEN], "phase": [BETWEEN_NAME], "name": [BETWEEN_NAME],
                            "start_ns": [pd.NA], "end_ns": [pd.NA]})
    return pd.concat([table.astype({"start_ns": "Int64", "end_ns": "Int64"}), between], ignore_index=True)


def _grouping(inp: ScopeInputs, api: _ApiSteps, relabel, steps_per_group: dict, tokens) -> Grouping:
    """A grouping whose labels are ``relabel(step ids)``."""
    idle_step = None if inp.idle is None else inp.idle["step"].to_numpy(np.int64)
    window_step, window_ns = inp.window if inp.window is not None else (None, None)
    return Grouping(relabel(inp.kernels["step"].to_numpy()), relabel(inp.partition["step"].to_numpy()),
                    relabel(api.launch), relabel(api.orphan), relabel(api.library), api.library_ns,
                    steps_per_group, tokens, relabel(api.aten_root), relabel(api.orphan_copy_call),
                    None if idle_step is None else relabel(idle_step),
                    None if window_step is None else relabel(window_step), window_ns,
                    None if inp.busy is None else relabel(inp.busy.step), relabel(api.captured))


def step_table(inp: ScopeInputs) -> tuple[pd.DataFrame, list[dict]]:
    """One row per step (tokens per step are not known: per-token values None)."""
    rows = _step_rows(inp)
    ids = rows["step"].astype(np.int64).tolist()
    counts = {i: (0 if i == BETWEEN else 1) for i in ids}
    metrics = grouped_columns(inp.kernel_arrays, inp.partition,
                              _grouping(inp, inp.api, lambda s: np.asarray(s, np.int64), counts, None),
                              ids, inp.ctx, inp.idle_arrays, inp.busy)
    columns = {"step": ids, "phase": rows["phase"].tolist(), "name": rows["name"].tolist(),
               "start_ns": _optional_ints(rows["start_ns"]), "end_ns": _optional_ints(rows["end_ns"]), **metrics}
    keys = list(columns)
    records = [dict(zip(keys, values)) for values in zip(*columns.values())]
    return _flat(pd.DataFrame(columns, columns=keys)), records


NESTED_KEYS = ("idle_by_cause_us", "devices")


def _flat(df: pd.DataFrame) -> pd.DataFrame:
    """The flat metrics only: the per-cause and per-device dicts are the long-form frames
    ``Analysis.idle_by_cause`` and ``Analysis.devices`` (decompose/nested.py), one column type for
    every trace whatever its devices (the summary dict keeps them as dicts)."""
    return nullable_numeric(df.drop(columns=[k for k in NESTED_KEYS if k in df.columns]))


def _optional_ints(values: pd.Series) -> list:
    """Python ints, ``None`` for NA (the ``between`` pseudo-step has no bounds)."""
    return [None if pd.isna(v) else int(v) for v in values.tolist()]


def phase_table(inp: ScopeInputs) -> tuple[pd.DataFrame, dict, dict]:
    """One row per phase (``between`` included when non-empty) and the whole-trace dict."""
    rows = _step_rows(inp)
    api = inp.api
    ids = rows["step"].astype(np.int64).to_numpy()
    phase_names = rows["phase"].astype(str).to_numpy()
    phases = list(pd.unique(phase_names))
    per_phase = {p: int(((phase_names == p) & (ids != BETWEEN)).sum()) for p in phases}
    # groups are phase positions (ints), not names: no object arrays per kernel or API call
    phase_pos = pd.Index(phases).get_indexer(phase_names).astype(np.int64)

    def to_phase(steps):
        pos = np.searchsorted(np.sort(ids), steps)
        return phase_pos[np.argsort(ids)][np.clip(pos, 0, len(ids) - 1)]

    n_steps = int((ids != BETWEEN).sum())
    tokens = _phase_tokens(inp.ctx.tokens, per_phase, n_steps)
    by_pos = grouped_metrics(inp.kernel_arrays, inp.partition,
                             _grouping(inp, api, to_phase, {i: per_phase[p] for i, p in enumerate(phases)},
                                       None if tokens is None else {i: tokens[p] for i, p in enumerate(phases)}),
                             list(range(len(phases))), inp.ctx, inp.idle_arrays, inp.busy)
    by_phase = {p: by_pos[i] for i, p in enumerate(phases)}
    everything = grouped_metrics(inp.kernel_arrays, inp.partition,
                                 _grouping(inp, api, lambda s: np.zeros(len(s), np.int64), {0: n_steps},
                                           inp.ctx.tokens), [0], inp.ctx, inp.idle_arrays, inp.busy)[0]
    # the whole trace is the first row, as phase_names lists it first ("all")
    rows = [{"phase": ALL_PHASE, **everything}] + [{"phase": p, **m} for p, m in by_phase.items()]
    df = _flat(pd.DataFrame(rows, columns=["phase", *SUMMARY_KEYS]))
    return df, {str(p): m for p, m in by_phase.items()}, everything


def _phase_tokens(tokens, per_phase: dict, n_steps: int) -> dict | None:
    """Output tokens of each phase: the trace's tokens shared by step count.

    Every step (prefill or decode) yields one token per sequence, so a phase
    with k of the n steps gets k/n of the tokens; ``between`` gets none.
    """
    if not tokens or not n_steps:
        return None
    shares = {p: tokens * count / n_steps for p, count in per_phase.items()}
    return {p: int(v) if float(v).is_integer() else round(v, 6) for p, v in shares.items()}


def build_ops(views: Views, kernels: pd.DataFrame, roots: np.ndarray | None = None) -> pd.DataFrame:
    """One row per ATen op name: calls, kernels and component sums in µs, by orchestration time.

    ``host_us`` is the inclusive host time of the op's outermost invocations
    (``root_calls``): measurable without a GPU (on a CPU run it includes the
    op's own compute). ``roots`` are ``Links.roots`` when already known.
    Everything is summed over name codes (``np.bincount``), never over strings.
    """
    host = views.host
    roots = root_atens(views) if roots is None else roots
    is_kernel = (kernels["kind"] == "kernel").to_numpy(bool)
    cols = ["t_py_ns", "ft_ns", "ft_python_ns", "ft_dispatch_ns", "ct_ns", "kt_floor_ns", "launch_latency_ns", "dur_ns"]
    op_codes, op_names = _op_codes(kernels["op_name"], is_kernel)
    names = pd.Index(sorted(set(op_names[sorted_unique(op_codes)].tolist())
                            | set(host.name_cats[sorted_unique(host.name_codes[roots])].tolist())))
    k_pos = names.get_indexer(op_names)[op_codes]
    h_pos = names.get_indexer(host.name_cats)
    n = len(names)
    aten_pos = h_pos[host.name_codes[host.is_aten]]  # -1: an op name that is neither a root nor linked
    out = pd.DataFrame({"op_name": names,
                        "calls": np.bincount(aten_pos[aten_pos >= 0], minlength=n).astype(np.int64),
                        "root_calls": np.bincount(h_pos[host.name_codes[roots]], minlength=n).astype(np.int64),
                        "host_us": _code_sum(h_pos[host.name_codes[roots]], host.end_ns[roots] - host.start_ns[roots], n)
                        / 1000.0,
                        "kernels": np.bincount(k_pos, minlength=n).astype(np.int64)})
    for col in cols:
        values = kernels[col][is_kernel]
        na = values.isna().to_numpy(bool)
        sums = _code_sum(k_pos[~na], values.to_numpy(np.int64, na_value=0)[~na], n)
        # sum(min_count=1): a name whose values are all NA has no sum
        out[col.replace("_ns", "_us")] = np.where(np.bincount(k_pos[~na], minlength=n) > 0, sums / 1000.0, np.nan)
    out = out.rename(columns={"dur_us": "device_active_us"})
    out["orchestration_us"] = (out["ft_us"].fillna(0) + out["ct_us"].fillna(0) + out["kt_floor_us"].fillna(0))
    out.loc[out["kernels"] == 0, "orchestration_us"] = pd.NA
    out["orchestration_us"] = out["orchestration_us"].astype("Float64")
    return out.sort_values(["orchestration_us", "host_us"], ascending=False, kind="stable",
                           na_position="last").reset_index(drop=True)


NO_OP = "(no aten op)"


def _op_codes(op_name: pd.Series, is_kernel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Codes of each kernel's ATen op name (``NO_OP`` for kernels without one) and their names."""
    codes = op_name.cat.codes.to_numpy(np.int64)[is_kernel]
    names = np.append(np.asarray(op_name.cat.categories, dtype=object), NO_OP)
    return np.where(codes < 0, len(names) - 1, codes), names


def _code_sum(codes: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """Exact int64 sum per code."""
    out = np.zeros(n, np.int64)
    np.add.at(out, codes, np.asarray(values, np.int64))
    return out
