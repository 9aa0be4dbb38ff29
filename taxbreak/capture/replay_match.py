"""Kernel chains of a trace and the matching of replayed kernels to their targets.

Two jobs, both vectorized over the canonical tables:

* :func:`kernel_chains` — per kernel of the full-model trace: its launch call
  (joined on ``(process, correlation)``), the innermost ``aten::`` op on the
  launching thread that encloses the launch, and that op's recorded inputs;
  :func:`unique_kernels` groups them by identity (op call, kernel name, grid,
  block, registers, shared memory) with the frequency and in-trace means.
* :func:`match_replay` — in a replay trace, each replayed call sits in a
  ``taxbreak/replay/<op>/<i>`` range. Per target kernel and range it picks one
  kernel in four tiers (TaxBreak's replay matching): 1 launch signature (grid,
  block, registers, shared memory), 2 exact name, 3 substring of the name, 4
  the op's most frequent kernel; a range with several kernels at the best tier
  counts as ambiguous (the first launched is kept).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from ..decompose.intervals import innermost_enclosing
from ..trace.tables import TraceTables

REPLAY_PREFIX = "taxbreak/replay/"
SIGNATURE = ["grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "registers", "shared_mem_bytes"]
RECORD_COLUMNS = ["input_dims", "input_types", "input_strides", "concrete_inputs"]
TIER_NAMES = {1: "signature", 2: "name", 3: "substring", 4: "most_frequent"}


def _frame(table: pa.Table, columns: list[str]) -> pd.DataFrame:
    df = table.select(columns).to_pandas()
    for col in ("kind", "name"):
        if col in df:
            df[col] = df[col].astype(object)
    return df


def _lanes(*pairs: tuple[np.ndarray, np.ndarray]) -> list[np.ndarray]:
    """Dense lane ids for several (pid, tid) array pairs, consistent across them."""
    keys = [np.stack([np.asarray(p, np.int64), np.asarray(t, np.int64)], axis=1) for p, t in pairs]
    _, inverse = np.unique(np.concatenate(keys), axis=0, return_inverse=True)
    inverse = inverse.ravel()
    bounds = np.cumsum([0] + [len(k) for k in keys])
    return [inverse[bounds[i]:bounds[i + 1]] for i in range(len(keys))]


def kernel_launches(tables: TraceTables) -> pd.DataFrame:
    """Kernels joined with their launch call on (process, correlation)."""
    dev = _frame(tables.device_activities, ["process", "kind", "name", "start_ns", "dur_ns", "correlation", *SIGNATURE])
    dev = dev[dev["kind"] == "kernel"].drop(columns="kind").rename(
        columns={"name": "kernel_name", "start_ns": "kernel_start_ns"})
    api = _frame(tables.api_calls, ["process", "kind", "pid", "tid", "start_ns", "correlation"])
    api = api[(api["kind"] == "launch") & (api["correlation"] >= 0)].drop(columns="kind")
    api = api.drop_duplicates(["process", "correlation"]).rename(columns={"start_ns": "launch_start_ns"})
    return dev.merge(api, on=["process", "correlation"], how="inner").reset_index(drop=True)


def enclosing_host(host: pd.DataFrame, calls: pd.DataFrame, time_col: str) -> np.ndarray:
    """Row position in ``host`` of the innermost host interval enclosing each call (-1: none)."""
    if host.empty or calls.empty:
        return np.full(len(calls), -1, dtype=np.int64)
    host_lane, call_lane = _lanes((host["pid"], host["tid"]), (calls["pid"], calls["tid"]))
    start = host["start_ns"].to_numpy(np.int64)
    return innermost_enclosing(host_lane, start, start + host["dur_ns"].to_numpy(np.int64),
                               call_lane, calls[time_col].to_numpy(np.int64))


def kernel_chains(tables: TraceTables) -> pd.DataFrame:
    """One row per launched kernel with its launch, its ATen op and the op's record.

    Columns: ``kernel_name``, the launch signature, ``dur_ns``,
    ``kernel_start_ns``, ``launch_start_ns``, ``op_name`` (None when the launch
    is outside any ATen op), ``op_start_ns``, the four record columns,
    ``t_dispatch_ns`` (launch − op start) and ``t_launch_ns`` (kernel − launch).
    """
    chain = kernel_launches(tables)
    host = _frame(tables.host_events, ["kind", "name", "pid", "tid", "start_ns", "dur_ns", *RECORD_COLUMNS])
    aten = host[(host["kind"] == "op") & host["name"].str.startswith("aten::", na=False)].reset_index(drop=True)
    idx = enclosing_host(aten, chain, "launch_start_ns")
    has_op = idx >= 0
    picked = aten.iloc[np.where(has_op, idx, 0)].reset_index(drop=True) if len(aten) else None
    for col, src in (("op_name", "name"), *((c, c) for c in RECORD_COLUMNS)):
        values = picked[src].to_numpy(object) if picked is not None else np.full(len(chain), None, object)
        chain[col] = pd.Series(np.where(has_op, values, None), index=chain.index, dtype=object)
    chain["op_start_ns"] = np.where(has_op, picked["start_ns"], -1) if picked is not None else -1
    chain["t_dispatch_ns"] = np.where(has_op, chain["launch_start_ns"] - chain["op_start_ns"], np.nan)
    chain["t_launch_ns"] = chain["kernel_start_ns"] - chain["launch_start_ns"]
    return chain


def unique_kernels(chain: pd.DataFrame) -> pd.DataFrame:
    """Group kernel chains by identity; one row per unique kernel.

    Columns: ``kernel_id``, ``op_name``, the record columns, ``kernel_name``,
    the signature, ``frequency``, ``dispatch_trace_us``, ``launch_trace_us``
    and ``dur_us`` (in-trace means).
    """
    keys = ["op_name", *RECORD_COLUMNS, "kernel_name", *SIGNATURE]
    frame = chain.assign(**{c: chain[c].fillna("") for c in ["op_name", *RECORD_COLUMNS]})
    grouped = frame.groupby(keys, sort=False, dropna=False).agg(
        frequency=("kernel_start_ns", "size"),
        dispatch_trace_us=("t_dispatch_ns", "mean"),
        launch_trace_us=("t_launch_ns", "mean"),
        dur_us=("dur_ns", "mean"),
    ).reset_index()
    for col in ("dispatch_trace_us", "launch_trace_us", "dur_us"):
        grouped[col] = grouped[col] / 1000.0
    grouped = grouped.sort_values("frequency", ascending=False, kind="stable").reset_index(drop=True)
    grouped.insert(0, "kernel_id", np.arange(len(grouped), dtype=np.int64))
    return grouped


def replay_samples(tables: TraceTables) -> pd.DataFrame:
    """Kernels of a replay trace with the replay range that encloses their launch.

    Columns: the kernel/launch columns plus ``op_index``, ``iteration`` and
    ``range_start_ns`` (from range names ``taxbreak/replay/<op>/<i>``).
    """
    chain = kernel_launches(tables)
    host = _frame(tables.host_events, ["kind", "name", "pid", "tid", "start_ns", "dur_ns"])
    ranges = host[(host["kind"] == "annotation") & host["name"].str.startswith(REPLAY_PREFIX, na=False)]
    ranges = ranges.reset_index(drop=True)
    idx = enclosing_host(ranges, chain, "launch_start_ns")
    chain = chain[idx >= 0].reset_index(drop=True)
    picked = ranges.iloc[idx[idx >= 0]].reset_index(drop=True)
    parts = picked["name"].str[len(REPLAY_PREFIX):].str.split("/", expand=True)
    chain["op_index"] = pd.to_numeric(parts[0], errors="coerce").fillna(-1).astype(np.int64) if len(chain) else []
    chain["iteration"] = pd.to_numeric(parts[1], errors="coerce").fillna(-1).astype(np.int64) if len(chain) else []
    chain["range_start_ns"] = picked["start_ns"].to_numpy(np.int64) if len(chain) else []
    return chain


def _substring_pairs(a: pd.Series, b: pd.Series) -> np.ndarray:
    """``a in b or b in a`` per row, evaluated once per distinct name pair."""
    pairs = pd.DataFrame({"a": a.astype(str).to_numpy(), "b": b.astype(str).to_numpy()})
    distinct = pairs.drop_duplicates()
    hits = {(x, y): bool(x and y and (x in y or y in x)) for x, y in zip(distinct["a"], distinct["b"])}
    return np.fromiter((hits[(x, y)] for x, y in zip(pairs["a"], pairs["b"])), dtype=bool, count=len(pairs))


def _candidates(targets: pd.DataFrame, samples: pd.DataFrame) -> pd.DataFrame:
    """Every (target, replayed kernel of its op) pair with its matching tier (1–4)."""
    cand = targets[["kernel_id", "op_index", "kernel_name", *SIGNATURE]].merge(
        samples, on="op_index", suffixes=("", "_c"))
    if cand.empty:
        return cand.assign(tier=pd.Series(dtype=np.int64), name_eq=pd.Series(dtype=bool))
    sig_eq = np.logical_and.reduce([cand[c].to_numpy() == cand[f"{c}_c"].to_numpy() for c in SIGNATURE])
    name_eq = (cand["kernel_name"] == cand["kernel_name_c"]).to_numpy()
    substr = _substring_pairs(cand["kernel_name"], cand["kernel_name_c"])
    counts = samples.groupby(["op_index", "kernel_name"]).size().rename("n").reset_index()
    top = counts.sort_values(["op_index", "n"], ascending=[True, False]).drop_duplicates("op_index")
    top_name = cand["op_index"].map(top.set_index("op_index")["kernel_name"])
    is_top = (cand["kernel_name_c"] == top_name).to_numpy()
    cand["tier"] = np.select([sig_eq, name_eq, substr, is_top], [1, 2, 3, 4], 5)
    cand["name_eq"] = name_eq
    return cand[cand["tier"] < 5]


def match_replay(targets: pd.DataFrame, samples: pd.DataFrame) -> pd.DataFrame:
    """Replayed T_dispatch and T_launch per target kernel.

    Args:
        targets: one row per target: ``kernel_id``, ``op_index``,
            ``kernel_name`` and the signature columns.
        samples: :func:`replay_samples` of the replay trace (the kernel
            columns there are renamed with a ``_c`` suffix on collision).

    Returns:
        One row per matched target: ``kernel_id``, ``samples``,
        ``dispatch_replay_us``/``launch_replay_us`` (mean), their ``_std_us``
        and ``_p50_us``, ``match_tier`` (most common), ``ambiguous_ranges``.
    """
    cand = _candidates(targets, samples)
    if cand.empty:
        return pd.DataFrame(columns=_MATCH_COLUMNS)
    cand = cand.assign(not_name=~cand["name_eq"]).sort_values(
        ["kernel_id", "iteration", "tier", "not_name", "launch_start_ns"], kind="stable")
    best = cand.drop_duplicates(["kernel_id", "iteration"]).copy()
    tied = cand.merge(best[["kernel_id", "iteration", "tier", "not_name"]],
                      on=["kernel_id", "iteration", "tier", "not_name"])
    ambiguous = tied.groupby(["kernel_id", "iteration"]).size().gt(1).groupby(level=0).sum()
    best["dispatch_us"] = (best["launch_start_ns"] - best["range_start_ns"]) / 1000.0
    best["launch_us"] = (best["kernel_start_ns"] - best["launch_start_ns"]) / 1000.0
    out = best.groupby("kernel_id").agg(
        samples=("dispatch_us", "size"),
        dispatch_replay_us=("dispatch_us", "mean"), dispatch_std_us=("dispatch_us", "std"),
        dispatch_p50_us=("dispatch_us", "median"),
        launch_replay_us=("launch_us", "mean"), launch_std_us=("launch_us", "std"),
        launch_p50_us=("launch_us", "median"),
        match_tier=("tier", lambda s: int(s.mode().iloc[0])),
    ).reset_index()
    out["ambiguous_ranges"] = out["kernel_id"].map(ambiguous).fillna(0).astype(np.int64)
    return out[_MATCH_COLUMNS]


_MATCH_COLUMNS = ["kernel_id", "samples", "dispatch_replay_us", "dispatch_std_us", "dispatch_p50_us",
                  "launch_replay_us", "launch_std_us", "launch_p50_us", "match_tier", "ambiguous_ranges"]
