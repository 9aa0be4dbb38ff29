"""Summaries per step, per phase and for the whole trace, plus the per-op table."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..trace.nesting import nesting
from .link import Links, root_atens
from .steps import BETWEEN, BETWEEN_NAME, Steps
from .summary import SUMMARY_KEYS, Context, Grouping, grouped_metrics
from .views import LAUNCH_API_KINDS, LINKABLE_API_KINDS, Views


@dataclass
class ScopeInputs:
    views: Views
    links: Links
    kernels: pd.DataFrame
    partition: pd.DataFrame
    steps: Steps
    ctx: Context
    _api: "_ApiSteps | None" = field(default=None, repr=False)  # computed once, shared by step/phase tables


@dataclass
class _ApiSteps:
    """Step of each launch call, each orphan launch and each outermost library range."""

    launch: np.ndarray
    orphan: np.ndarray
    library: np.ndarray
    library_ns: np.ndarray
    aten_root: np.ndarray  # step of each outermost ATen op invocation


def _api_steps(inp: ScopeInputs) -> _ApiSteps:
    if inp._api is None:
        inp._api = _compute_api_steps(inp)
    return inp._api


def _compute_api_steps(inp: ScopeInputs) -> _ApiSteps:
    api = inp.views.api
    step = inp.steps.assign(api.start_ns)
    is_launch = np.isin(api.kind, LAUNCH_API_KINDS)
    orphan = np.isin(api.kind, LINKABLE_API_KINDS) & (api.correlation != -1) & ~inp.links.api_has_device
    lib = np.flatnonzero(api.kind == "library")
    depth, _ = nesting(api.lane[lib], api.start_ns[lib], api.end_ns[lib] - api.start_ns[lib])
    outer = lib[depth == 0]  # nested library calls are inside their caller's range already
    roots = inp.links.roots
    return _ApiSteps(step[is_launch], step[orphan], step[outer], api.end_ns[outer] - api.start_ns[outer],
                     inp.steps.assign(inp.views.host.start_ns[roots]))


def _step_rows(inp: ScopeInputs) -> pd.DataFrame:
    """Steps plus the ``between`` pseudo-step when anything falls outside every step."""
    table = inp.steps.table
    has_between = (inp.kernels["step"] == BETWEEN).any() or (inp.partition["step"] == BETWEEN).any()
    if not has_between:
        return table
    between = pd.DataFrame({"step": [BETWEEN], "phase": [BETWEEN_NAME], "name": [BETWEEN_NAME],
                            "start_ns": [pd.NA], "end_ns": [pd.NA]})
    return pd.concat([table.astype({"start_ns": "Int64", "end_ns": "Int64"}), between], ignore_index=True)


def _grouping(inp: ScopeInputs, api: _ApiSteps, relabel, steps_per_group: dict, tokens) -> Grouping:
    """A grouping whose labels are ``relabel(step ids)``."""
    return Grouping(relabel(inp.kernels["step"].to_numpy()), relabel(inp.partition["step"].to_numpy()),
                    relabel(api.launch), relabel(api.orphan), relabel(api.library), api.library_ns,
                    steps_per_group, tokens, relabel(api.aten_root))


def step_table(inp: ScopeInputs) -> tuple[pd.DataFrame, list[dict]]:
    """One row per step (tokens per step are not known: per-token values None)."""
    rows = _step_rows(inp)
    ids = rows["step"].astype(np.int64).tolist()
    counts = {i: (0 if i == BETWEEN else 1) for i in ids}
    metrics = grouped_metrics(inp.kernels, inp.partition,
                              _grouping(inp, _api_steps(inp), lambda s: np.asarray(s, np.int64), counts, None),
                              ids, inp.ctx)
    out = []
    for rec in rows.to_dict("records"):
        out.append({"step": int(rec["step"]), "phase": rec["phase"], "name": rec["name"],
                    "start_ns": None if pd.isna(rec["start_ns"]) else int(rec["start_ns"]),
                    "end_ns": None if pd.isna(rec["end_ns"]) else int(rec["end_ns"]), **metrics[int(rec["step"])]})
    df = pd.DataFrame(out, columns=["step", "phase", "name", "start_ns", "end_ns", *SUMMARY_KEYS])
    return df, out


def phase_table(inp: ScopeInputs) -> tuple[pd.DataFrame, dict, dict]:
    """One row per phase (``between`` included when non-empty) and the whole-trace dict."""
    rows = _step_rows(inp)
    api = _api_steps(inp)
    ids = rows["step"].astype(np.int64).to_numpy()
    phase_names = rows["phase"].astype(str).to_numpy()
    phases = list(pd.unique(phase_names))
    per_phase = {p: int(((phase_names == p) & (ids != BETWEEN)).sum()) for p in phases}

    def to_phase(steps):
        pos = np.searchsorted(np.sort(ids), steps)
        return phase_names[np.argsort(ids)][np.clip(pos, 0, len(ids) - 1)]

    n_steps = int((ids != BETWEEN).sum())
    by_phase = grouped_metrics(inp.kernels, inp.partition,
                               _grouping(inp, api, to_phase, per_phase, _phase_tokens(inp.ctx.tokens, per_phase, n_steps)),
                               phases, inp.ctx)
    everything = grouped_metrics(inp.kernels, inp.partition,
                                 _grouping(inp, api, lambda s: np.zeros(len(s), np.int64), {0: n_steps},
                                           inp.ctx.tokens), [0], inp.ctx)[0]
    df = pd.DataFrame([{"phase": p, **m} for p, m in by_phase.items()], columns=["phase", *SUMMARY_KEYS])
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
    """
    host = views.host
    calls = pd.Series(host.name[host.is_aten]).value_counts()
    k = kernels[kernels["kind"] == "kernel"].copy()
    k["op_name"] = k["op_name"].astype(object).where(k["op_name"].notna(), "(no aten op)")
    cols = ["t_py_ns", "ft_ns", "ft_python_ns", "ft_dispatch_ns", "ct_ns", "kt_floor_ns", "kt_residual_ns", "dur_ns"]
    g = k.groupby("op_name")[cols].sum(min_count=1)
    roots = _root_host_time(views, root_atens(views) if roots is None else roots)
    names = g.index.union(roots.index)
    out = pd.DataFrame({"op_name": names, "calls": calls.reindex(names).fillna(0).astype(np.int64).to_numpy(),
                        "root_calls": roots["root_calls"].reindex(names).fillna(0).astype(np.int64).to_numpy(),
                        "host_us": (roots["host_ns"].reindex(names).fillna(0) / 1000.0).to_numpy(),
                        "kernels": k.groupby("op_name").size().reindex(names).fillna(0).astype(np.int64).to_numpy()})
    g = g.reindex(names)
    for col in cols:
        out[col.replace("_ns", "_us")] = (g[col].astype("Float64") / 1000.0).to_numpy()
    out = out.rename(columns={"dur_us": "device_active_us"})
    out["orchestration_us"] = (out["ft_us"].fillna(0) + out["ct_us"].fillna(0) + out["kt_floor_us"].fillna(0))
    out.loc[out["kernels"] == 0, "orchestration_us"] = pd.NA
    out["orchestration_us"] = out["orchestration_us"].astype("Float64")
    return out.sort_values(["orchestration_us", "host_us"], ascending=False, kind="stable",
                           na_position="last").reset_index(drop=True)


def _root_host_time(views: Views, roots: np.ndarray) -> pd.DataFrame:
    """Calls and inclusive host ns of the outermost invocations of each ATen op name."""
    host = views.host
    frame = pd.DataFrame({"name": host.name[roots], "ns": host.end_ns[roots] - host.start_ns[roots]})
    grouped = frame.groupby("name")["ns"]
    return pd.DataFrame({"root_calls": grouped.size(), "host_ns": grouped.sum()})
