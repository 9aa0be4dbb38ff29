"""Cross-rank skew: the ranks of one run aligned on their collectives (docs/serving.md §1).

A collective kernel (NCCL/RCCL, a custom all-reduce) ends on every rank at about the
same moment: when the last rank has arrived and the data has moved. So the rank whose
collective kernel is the shortest arrived last, and every other rank's kernel time splits
into *skew* (spinning while it waited for the late rank) and *transfer* (the late rank's
kernel time). Only durations measured on one rank's own clock are compared: host (and
device) clocks of different machines never are.

Why the late rank was late: between the end of the previous collective (the last moment
all ranks shared) and its arrival, each rank's device was busy or idle for a cause
(``Analysis.idle``). The late rank's time per layer minus the earliest rank's adds up to
the lateness, and the layers that grew name the cause.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .intervals import covered_before, union_intervals

# NCCL/RCCL device kernels (ncclKernel_…, ncclDevKernel_…) and the custom all-reduce kernels
# of serving engines (vLLM cross_device_reduce_1stage/2stage, custom_all_reduce, one-/two-shot)
COLLECTIVE_PATTERN = re.compile(r"nccl|rccl|cross_device_reduce|all_?reduce|allgather|all_gather|"
                                r"reduce_?scatter|one_?shot|two_?shot", re.I)
_FAMILY = re.compile(r"(?:nccl|rccl)(?:Dev)?Kernel_([A-Za-z]+)", re.I)
COMPUTE = "compute"  # the device busy with any work of the rank, collectives included
ALIGNMENT = "collective kernel ends (per-rank durations only; host clocks of different ranks are never compared)"
# idle causes that are host time the device waited for (docs/method.md §3.1): the exposed host time
HOST_CAUSES = ("python", "dispatch", "library", "launch_api", "launch_floor", "sync", "other_api", "untraced",
               "blocked", "host_stall")
COMPONENTS = ("t_py_ns", "t_dispatch_ns", "t_launch_ns", "dependency_wait_ns")


@dataclass
class Rank:
    """One rank: the device ``device`` of the trace analysed in ``analysis``."""

    label: str
    analysis: object  # an Analysis (kernels, idle, steps)
    device: int


@dataclass
class RankSkew:
    """Collectives of several ranks aligned (attributes in docs/serving.md §1)."""

    ranks: list[str]
    arrivals: pd.DataFrame  # one row per (collective, rank)
    collectives: pd.DataFrame  # one row per matched collective
    steps: pd.DataFrame  # one row per (step, rank)
    summary: dict = field(default_factory=dict)


def ranks_of(analyses, labels=None) -> list[Rank]:
    """One rank per device with device work in each analysis (a several-process Nsight export
    gives several), labelled ``rank<N>`` where the trace records its rank (Kineto
    ``distributedInfo``), else ``label`` (``label:device`` where an analysis holds several);
    ordered by recorded rank where every trace records one, else as given."""
    labels = list(labels) if labels is not None else [f"trace{i}" for i in range(len(analyses))]
    recorded = [_recorded_rank(a) for a in analyses]
    order = range(len(analyses))
    if all(r is not None for r in recorded) and len(set(recorded)) == len(recorded):
        labels = [f"rank{r}" for r in recorded]
        order = sorted(order, key=recorded.__getitem__)
    out = []
    for i in order:
        label, analysis = labels[i], analyses[i]
        devices = sorted(int(d) for d in pd.unique(analysis.kernels["device"]))
        out.extend(Rank(label if len(devices) == 1 else f"{label}:{d}", analysis, d) for d in devices)
    return out


def _recorded_rank(analysis) -> int | None:
    meta = getattr(getattr(analysis, "tables", None), "meta", None)
    rank = getattr(meta, "rank", None)
    return rank if isinstance(rank, int) else None


def collective_family(names: pd.Series) -> pd.Series:
    """The collective a kernel name performs (``AllReduce``, ``SendRecv``…); the whole name for
    custom all-reduce kernels. Ranks are matched per family, in order."""
    text = names.astype(str)
    fam = text.str.extract(_FAMILY, expand=False)
    return fam.fillna(text.str.split("<|\\(", n=1, regex=True).str[0])


def _rank_collectives(rank: Rank, index: int) -> pd.DataFrame:
    k = rank.analysis.kernels
    sel = k[(k["device"] == rank.device) & k["name"].astype(str).str.contains(COLLECTIVE_PATTERN)]
    sel = sel.sort_values("start_ns", kind="stable")
    out = pd.DataFrame({"rank": index, "family": collective_family(sel["name"]).to_numpy(),
                        "start_ns": sel["start_ns"].to_numpy(np.int64),
                        "dur_ns": sel["dur_ns"].to_numpy(np.int64), "step": sel["step"].to_numpy(np.int64)})
    for col in COMPONENTS:
        out[col] = sel[col].to_numpy() if col in sel else pd.NA
    # a communicator issues its collectives on its own stream: streams are numbered per rank in
    # the order of their first collective, so the k-th stream of every rank is one communicator
    stream = sel["stream"].to_numpy(np.int64)
    first_use = pd.Series(np.arange(len(stream))).groupby(stream).transform("min").to_numpy()
    out["channel"] = pd.Series(first_use).rank(method="dense").to_numpy(np.int64) - 1
    out["ordinal"] = out.groupby(["family", "channel"]).cumcount()
    return out


def match_collectives(ranks: list[Rank]) -> tuple[pd.DataFrame, dict]:
    """The collectives every rank ran, matched by (family, stream, order within both), numbered
    in the first rank's order; and per rank the count left unmatched."""
    per_rank = [_rank_collectives(r, i) for i, r in enumerate(ranks)]
    on = ["family", "channel", "ordinal"]
    keys = per_rank[0][[*on, "start_ns"]].rename(columns={"start_ns": "order"})
    for other in per_rank[1:]:
        keys = keys.merge(other[on], on=on)
    keys = keys.sort_values("order", kind="stable").reset_index(drop=True)
    keys["collective"] = np.arange(len(keys), dtype=np.int64)
    long = pd.concat(per_rank, ignore_index=True).merge(keys[[*on, "collective"]], on=on)
    long = long.sort_values(["collective", "rank"], kind="stable").reset_index(drop=True)
    unmatched = {ranks[i].label: int(len(df) - len(keys)) for i, df in enumerate(per_rank)}
    return long, unmatched


def _matrix(long: pd.DataFrame, col: str, n_ranks: int) -> np.ndarray:
    return long[col].to_numpy(np.int64).reshape(-1, n_ranks)


def split_skew(long: pd.DataFrame, n_ranks: int) -> pd.DataFrame:
    """Per (collective, rank): ``transfer_ns`` = the shortest (the late rank's) kernel time,
    ``skew_ns`` = the rest of this rank's kernel time, spent waiting for the late rank."""
    dur = _matrix(long, "dur_ns", n_ranks)
    transfer = dur.min(axis=1, keepdims=True)
    long = long.copy()
    long["transfer_ns"] = np.broadcast_to(transfer, dur.shape).ravel()
    long["skew_ns"] = (dur - transfer).ravel()
    late = np.argmin(dur, axis=1)
    long["is_late"] = (np.arange(n_ranks)[None, :] == late[:, None]).ravel() & (dur.max(1) > dur.min(1)).repeat(n_ranks)
    return long


def _covered(start_ns: np.ndarray, end_ns: np.ndarray, a_ns: np.ndarray, b_ns: np.ndarray) -> np.ndarray:
    """Time of the union of ``[start, end)`` inside each window ``[a, b)``."""
    u_start, u_end = union_intervals(np.asarray(start_ns, np.int64), np.asarray(end_ns, np.int64))
    return covered_before(u_start, u_end, b_ns) - covered_before(u_start, u_end, a_ns)


def _device_work(rank: Rank, collectives_only: bool = False) -> tuple[np.ndarray, np.ndarray]:
    k = rank.analysis.kernels
    keep = (k["device"] == rank.device).to_numpy().copy()
    if collectives_only:
        keep &= k["name"].astype(str).str.contains(COLLECTIVE_PATTERN).to_numpy()
    start = k["start_ns"].to_numpy(np.int64)[keep]
    return start, start + k["dur_ns"].to_numpy(np.int64)[keep]


def layer_times(rank: Rank, a_ns: np.ndarray, b_ns: np.ndarray) -> dict[str, np.ndarray]:
    """Per window ``[a, b)`` of the rank's own clock: its device busy time (``compute``) and its
    idle time per cause (``Analysis.idle``); they add up to ``b − a`` where idle was attributed."""
    a_ns, b_ns = np.asarray(a_ns, np.int64), np.asarray(b_ns, np.int64)
    out = {COMPUTE: _covered(*_device_work(rank), a_ns, b_ns)}
    idle = rank.analysis.idle
    idle = idle[idle["device"] == rank.device]
    for cause, pieces in idle.groupby("cause", observed=True, sort=True):
        out[str(cause)] = _covered(pieces["start_ns"].to_numpy(np.int64), pieces["end_ns"].to_numpy(np.int64),
                                   a_ns, b_ns)
    return out


def _windows(long: pd.DataFrame, n_ranks: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per (collective, rank): from the previous collective's end (a moment all ranks shared) to
    this arrival; ``valid`` where there is a previous collective and no window runs backwards."""
    start = _matrix(long, "start_ns", n_ranks)
    end = start + _matrix(long, "dur_ns", n_ranks)
    prev_end = np.vstack([start[:1], end[:-1]])
    valid = (prev_end <= start).all(axis=1)
    valid[:1] = False
    return np.where(valid[:, None], prev_end, start), start, valid


def late_causes(ranks: list[Rank], long: pd.DataFrame) -> pd.DataFrame:
    """Per collective: the late rank, by how much, and the layers that made it late — the late
    rank's time per layer since the previous collective minus the earliest rank's."""
    n = len(ranks)
    dur = _matrix(long, "dur_ns", n)
    a, b, valid = _windows(long, n)
    per_rank = [layer_times(r, a[:, i], b[:, i]) for i, r in enumerate(ranks)]
    layers = sorted(set().union(*per_rank), key=lambda name: (name != COMPUTE, name))
    stacked = {name: np.column_stack([p.get(name, np.zeros(len(dur), np.int64)) for p in per_rank])
               for name in layers}
    late, early = np.argmin(dur, axis=1), np.argmax(dur, axis=1)
    rows = np.arange(len(dur))
    table = pd.DataFrame({"collective": np.arange(len(dur), dtype=np.int64),
                          "family": long["family"].to_numpy()[::n],
                          "step": _matrix(long, "step", n)[:, 0],
                          "lateness_ns": dur.max(axis=1) - dur.min(axis=1),
                          "transfer_ns": dur.min(axis=1)})
    skewed = table["lateness_ns"].to_numpy() > 0
    labels = np.array([r.label for r in ranks], dtype=object)
    table["late_rank"] = np.where(skewed, labels[late], None)
    table["waiting_rank"] = np.where(skewed, labels[early], None)
    explained = valid & skewed
    delta_sum = np.zeros(len(dur), np.int64)
    for name in layers:
        delta = stacked[name][rows, late] - stacked[name][rows, early]
        delta_sum += delta
        table[f"cause_{name}_ns"] = pd.array(np.where(explained, delta, 0), dtype="Int64")
        table.loc[~explained, f"cause_{name}_ns"] = pd.NA
    table["cause_residual_ns"] = pd.array(table["lateness_ns"].to_numpy() - delta_sum, dtype="Int64")
    table.loc[~explained, "cause_residual_ns"] = pd.NA
    table["cause"] = _top_cause(table, layers, explained)
    table["end_spread_ns"] = _end_spread(ranks, long)
    table["cause_reason"] = np.where(~skewed, "no skew: the ranks arrived together",
                                     np.where(~valid, "no earlier collective the ranks shared to compare from", None))
    return _with_late_components(table, long, late)


def _end_spread(ranks: list[Rank], long: pd.DataFrame) -> pd.Array:
    """Last minus first end of each collective where all ranks share one clock (one trace): the
    check of the alignment (NA across traces, whose clocks are never compared)."""
    n = len(ranks)
    if len({id(r.analysis) for r in ranks}) > 1:
        return pd.array([pd.NA] * (len(long) // n), dtype="Int64")
    end = _matrix(long, "start_ns", n) + _matrix(long, "dur_ns", n)
    return pd.array(end.max(axis=1) - end.min(axis=1), dtype="Int64")


def _top_cause(table: pd.DataFrame, layers: list[str], explained: np.ndarray) -> np.ndarray:
    if not layers:
        return np.full(len(table), None, dtype=object)
    deltas = np.column_stack([table[f"cause_{n}_ns"].fillna(0).to_numpy(np.int64) for n in layers])
    top = np.array(layers, dtype=object)[np.argmax(deltas, axis=1)]
    return np.where(explained & (deltas.max(axis=1) > 0), top, None)


def _with_late_components(table: pd.DataFrame, long: pd.DataFrame, late: np.ndarray) -> pd.DataFrame:
    """The per-kernel components (docs/method.md §2) of the late rank's collective kernel: how its
    own launch path went (n/a where the trace did not measure them)."""
    n = int(long["rank"].max()) + 1
    pick = np.arange(len(table)) * n + late
    for col in COMPONENTS:
        table[f"late_{col}"] = pd.array(long[col].to_numpy()[pick], dtype="Int64")
    return table


ORCHESTRATE_COLS = ("ft_ns", "ct_ns", "kt_floor_ns", "kt_graph_ns")


def _hdbi_by_step(rank: Rank) -> pd.Series:
    """HDBI of the rank's launched kernels per step; n/a (NA) where a component is unmeasured."""
    k = rank.analysis.kernels
    k = k[(k["device"] == rank.device) & (k["kind"] == "kernel") & k["launch_start_ns"].notna()]
    orch = k[list(ORCHESTRATE_COLS)].astype("Float64").sum(axis=1, skipna=False)
    frame = pd.DataFrame({"step": k["step"].to_numpy(), "active": k["dur_ns"].to_numpy(np.float64),
                          "orch": orch.to_numpy(dtype=np.float64, na_value=np.nan)})
    sums = frame.groupby("step").agg(active=("active", "sum"), orch=("orch", lambda s: s.sum(min_count=len(s))))
    hdbi = sums["active"] / (sums["active"] + sums["orch"])
    return hdbi.where(sums["orch"].notna() & (sums["active"] + sums["orch"] > 0))


def _step_windows(steps: pd.DataFrame) -> pd.DataFrame:
    """The steps with a window (not the ``between`` row of what falls outside every step)."""
    keep = steps["start_ns"].notna() & steps["end_ns"].notna() & (steps["step"] >= 0)
    return steps.loc[keep, ["step", "start_ns", "end_ns"]].astype(np.int64).sort_values("start_ns", kind="stable")


def rank_steps(ranks: list[Rank], long: pd.DataFrame) -> pd.DataFrame:
    """Per (step, rank), on the rank's own clock: wall = skew + transfer + compute + idle, with
    the residual (collectives overlapping each other or compute, unmatched collectives) shown."""
    frames = []
    for i, rank in enumerate(ranks):
        steps = _step_windows(rank.analysis.steps)
        a, b = steps["start_ns"].to_numpy(np.int64), steps["end_ns"].to_numpy(np.int64)
        mine = long[long["rank"] == i].groupby("step")[["skew_ns", "transfer_ns"]].sum()
        busy = _covered(*_device_work(rank), a, b)
        coll = _covered(*_device_work(rank, collectives_only=True), a, b)
        layers = layer_times(rank, a, b)
        frame = pd.DataFrame({"step": steps["step"].to_numpy(np.int64), "rank": rank.label, "wall_ns": b - a})
        frame["skew_ns"] = mine["skew_ns"].reindex(frame["step"]).fillna(0).to_numpy(np.int64)
        frame["transfer_ns"] = mine["transfer_ns"].reindex(frame["step"]).fillna(0).to_numpy(np.int64)
        frame["compute_ns"] = busy - coll
        frame["idle_ns"] = frame["wall_ns"] - busy
        frame["exposed_host_ns"] = sum((layers[c] for c in HOST_CAUSES if c in layers), np.zeros(len(a), np.int64))
        frame["hdbi"] = pd.array(_hdbi_by_step(rank).reindex(frame["step"]).to_numpy(), dtype="Float64")
        frames.append(frame)
    out = pd.concat(frames, ignore_index=True)
    parts = out[["skew_ns", "transfer_ns", "compute_ns", "idle_ns"]].sum(axis=1)
    out["residual_ns"] = out["wall_ns"] - parts
    out["adds_up"] = out["residual_ns"].abs() <= 0.01 * out["wall_ns"]
    return out.sort_values(["step", "rank"], kind="stable").reset_index(drop=True)


def rank_skew(analyses, labels=None) -> RankSkew:
    """Align the ranks of one run (one ``Analysis`` per rank trace, or one export holding several
    devices) on their collectives: skew, transfer and the late rank's causes (docs/serving.md §1)."""
    ranks = ranks_of(analyses, labels)
    labels_ = [r.label for r in ranks]
    if not ranks:
        return _empty(labels_, "no device work in the traces: no rank to align")
    if len(ranks) < 2:
        return _empty(labels_, "one rank: skew needs the traces of at least two ranks of the run")
    long, unmatched = match_collectives(ranks)
    if long.empty:
        return _empty(labels_, "no collective kernel (NCCL/RCCL or custom all-reduce) common to every rank",
                      unmatched)
    long = split_skew(long, len(ranks))
    long["rank_label"] = np.array(labels_, dtype=object)[long["rank"].to_numpy()]
    collectives = late_causes(ranks, long)
    steps = rank_steps(ranks, long)
    return RankSkew(labels_, long, collectives, steps, skew_summary(collectives, steps, labels_, unmatched))


def _us(ns) -> float | None:
    return None if ns is None or pd.isna(ns) else round(float(ns) / 1000.0, 3)


def _spread(values_ns: np.ndarray) -> dict:
    if len(values_ns) == 0:
        return {"median": None, "p90": None, "max": None, "sum": None}
    return {"median": _us(np.median(values_ns)), "p90": _us(np.percentile(values_ns, 90)),
            "max": _us(values_ns.max()), "sum": _us(values_ns.sum())}


def skew_summary(collectives: pd.DataFrame, steps: pd.DataFrame, labels: list[str], unmatched: dict) -> dict:
    """The ``ranks`` JSON object: lateness over collectives, the late ranks, the causes summed over
    the collectives whose cause was measured, and per (step, rank) the wall-time split."""
    cause_cols = [c for c in collectives if c.startswith("cause_") and c.endswith("_ns") and c != "cause_residual_ns"]
    explained = collectives["cause_residual_ns"].notna()
    residual = steps["residual_ns"].abs() / steps["wall_ns"].where(steps["wall_ns"] > 0)
    return {
        "reason": None, "alignment": ALIGNMENT, "ranks": labels, "collectives": int(len(collectives)),
        "unmatched_collectives": unmatched,
        "lateness_us": _spread(collectives["lateness_ns"].to_numpy(np.int64)),
        "late_rank_counts": {str(k): int(v) for k, v in collectives["late_rank"].value_counts().items()},
        "explained_collectives": int(explained.sum()),
        "cause_us": {c[len("cause_"):-len("_ns")]: _us(collectives.loc[explained, c].sum()) for c in cause_cols},
        "cause_residual_us": _us(collectives.loc[explained, "cause_residual_ns"].sum()) if explained.any() else None,
        "top_cause_counts": {str(k): int(v) for k, v in collectives["cause"].dropna().value_counts().items()},
        "end_spread_us": None if collectives["end_spread_ns"].isna().all()
        else _spread(collectives["end_spread_ns"].to_numpy(np.int64)),
        "steps_add_up": bool(steps["adds_up"].all()),
        "max_step_residual_pct": None if residual.dropna().empty else round(float(residual.max()) * 100, 3),
        "steps": [_step_dict(row) for row in steps.itertuples(index=False)],
        "per_collective": _collective_dicts(collectives, cause_cols),
    }


def _us_list(values: pd.Series) -> list:
    """µs (3 decimals) of an ns column, ``None`` where not measured, without per-value Python work."""
    arr = values.astype("Float64").to_numpy(np.float64, na_value=np.nan)
    return [None if np.isnan(v) else v for v in np.round(arr / 1000.0, 3).tolist()]


def _collective_dicts(collectives: pd.DataFrame, cause_cols: list[str]) -> list[dict]:
    """One entry per collective: the late rank, by how much, the layers that made it late and
    the launch components of its own collective kernel (µs; ``None`` where not measured)."""
    text = {c: [None if pd.isna(v) else str(v) for v in collectives[c].tolist()]
            for c in ("family", "late_rank", "waiting_rank", "cause", "cause_reason")}
    cols = {"collective": collectives["collective"].astype(int).tolist(), "step": collectives["step"].astype(int).tolist(),
            **text, "lateness_us": _us_list(collectives["lateness_ns"]),
            "transfer_us": _us_list(collectives["transfer_ns"]),
            "end_spread_us": _us_list(collectives["end_spread_ns"]),
            "cause_residual_us": _us_list(collectives["cause_residual_ns"]),
            **{f"late_{c[:-3]}_us": _us_list(collectives[f"late_{c}"]) for c in COMPONENTS}}
    causes = [_us_list(collectives[c]) for c in cause_cols]
    names = [c[len("cause_"):-len("_ns")] for c in cause_cols]
    keys = list(cols)
    return [{**dict(zip(keys, values)), "cause_us": dict(zip(names, per))}
            for values, per in zip(zip(*cols.values()), zip(*causes) if causes else [()] * len(collectives))]


def _step_dict(row) -> dict:
    return {"step": int(row.step), "rank": row.rank, "wall_us": _us(row.wall_ns), "skew_us": _us(row.skew_ns),
            "transfer_us": _us(row.transfer_ns), "compute_us": _us(row.compute_ns), "idle_us": _us(row.idle_ns),
            "exposed_host_us": _us(row.exposed_host_ns), "residual_us": _us(row.residual_ns),
            "hdbi": None if pd.isna(row.hdbi) else round(float(row.hdbi), 4),
            "hdbi_reason": "a T_Orchestrate component of a kernel of the step is unmeasured" if pd.isna(row.hdbi)
            else None}


def _empty(labels: list[str], reason: str, unmatched: dict | None = None) -> RankSkew:
    summary = {"reason": reason, "alignment": ALIGNMENT, "ranks": labels, "collectives": 0,
               "unmatched_collectives": unmatched or {}}
    return RankSkew(labels, pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), summary)
