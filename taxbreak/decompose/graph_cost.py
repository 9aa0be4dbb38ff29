"""The host cost of a CUDA-graph launch against the nodes it replays (docs/serving.md §3).

A graph launch is not one launch floor: its host time grows with the graph's node count
(published measurements: ~1 µs per node, 2.83 ms for 2,876 nodes; another fit 15 µs +
0.58 µs per node). Every device activity a replay runs carries the launch call's
correlation id (1 call : N kernels, trace-formats.md), so the nodes of one launch are the
activities linked to it. Per GPU holding launches of at least two sizes, a least-squares
fit ``host = a + b·nodes``; it projects splitting a graph into k pieces whose launches
overlap the earlier pieces' device work.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

GRAPH_LAUNCH = re.compile(r"GraphLaunch", re.I)  # cudaGraphLaunch, cuGraphLaunch, hipGraphLaunch
SPLITS = (1, 2, 4, 8)


def named(names: pd.Series, pattern: re.Pattern) -> np.ndarray:
    """``pattern`` found in each name, decided once per distinct name of a categorical column."""
    if isinstance(names.dtype, pd.CategoricalDtype):
        hits = np.asarray(names.cat.categories.astype(str).str.contains(pattern), bool)
        codes = names.cat.codes.to_numpy()
        return np.where(codes >= 0, hits[np.maximum(codes, 0)], False) if len(hits) else np.zeros(len(codes), bool)
    return names.astype(str).str.contains(pattern).to_numpy(bool)


def graph_launches(kernels: pd.DataFrame) -> pd.DataFrame:
    """One row per graph launch call that ran device work: ``device``, ``launch_start_ns``,
    ``host_ns`` (the call's duration), ``nodes`` (activities it replayed), ``device_ns``
    (their summed duration) and ``span_ns`` (first start to last end)."""
    k = kernels[kernels["launch_start_ns"].notna().to_numpy() & named(kernels["launch_name"], GRAPH_LAUNCH)]
    if k.empty:
        return pd.DataFrame(columns=["device", "launch_start_ns", "host_ns", "nodes", "device_ns", "span_ns"])
    k = k.assign(end_ns=k["start_ns"] + k["dur_ns"])
    keys = [k["launch_pid"].fillna(-1), k["launch_tid"].fillna(-1), k["correlation"], k["launch_start_ns"]]
    g = k.groupby(keys, sort=False)
    out = pd.DataFrame({"device": g["device"].first(), "launch_start_ns": g["launch_start_ns"].first(),
                        "host_ns": g["launch_dur_ns"].first(), "nodes": g.size(), "device_ns": g["dur_ns"].sum(),
                        "span_ns": g["end_ns"].max() - g["start_ns"].min()})
    return out.reset_index(drop=True).astype(np.int64).sort_values("launch_start_ns", kind="stable")


def fit_launch_cost(launches: pd.DataFrame) -> dict:
    """Least squares ``host = a + b·nodes`` over one GPU's launches; ``a``/``b`` null with the
    reason where the launches hold one graph size only (a and b cannot be told apart)."""
    nodes = launches["nodes"].to_numpy(np.float64)
    host = launches["host_ns"].to_numpy(np.float64)
    out = {"launches": int(len(nodes)), "sizes": int(len(np.unique(nodes))),
           "nodes_median": float(np.median(nodes)), "host_us_median": round(float(np.median(host)) / 1e3, 3),
           "host_us_per_node": round(float(host.sum() / nodes.sum()) / 1e3, 4),
           "a_us": None, "b_us_per_node": None, "r2": None, "fit_reason": None}
    if out["sizes"] < 2:
        out["fit_reason"] = "one graph size: the fixed and per-node costs cannot be told apart"
        return out
    b, a = np.polyfit(nodes, host, 1)
    resid = host - (a + b * nodes)
    total = ((host - host.mean()) ** 2).sum()
    out.update(a_us=round(float(a) / 1e3, 4), b_us_per_node=round(float(b) / 1e3, 4),
               r2=round(1.0 - float((resid ** 2).sum() / total), 4) if total > 0 else None)
    return out


def split_projection(a_us: float, b_us: float, nodes: float, device_us: float, ks=SPLITS) -> list[dict]:
    """A graph of ``nodes`` nodes and ``device_us`` of device work split into k equal pieces.

    Piece i's launch (a + b·nodes/k each, one after another on the host) overlaps the device
    work of the pieces before it; the last piece ends at
    ``T_k = max(L + D, k·L + D/k)`` with ``L = a + b·nodes/k`` (the two ends of the pipeline:
    device-bound after the first launch, or host-bound to the last launch). ``k = 1`` is the
    one graph: ``a + b·nodes + D``. A graph is cut into at most as many pieces as it has nodes."""
    out = []
    for k in (k for k in ks if k <= max(nodes, 1)):
        piece_launch = a_us + b_us * nodes / k
        t = max(piece_launch + device_us, k * piece_launch + device_us / k)
        out.append({"pieces": k, "launch_us": round(piece_launch, 3), "step_us": round(t, 3)})
    return out


def graph_cost_summary(kernels: pd.DataFrame) -> dict:
    """The ``graph_launch_cost`` JSON object: per GPU the fit and the split projection."""
    launches = graph_launches(kernels)
    if launches.empty:
        return {"reason": "no graph launch with device work in the trace", "devices": {}}
    devices = {}
    for device, rows in launches.groupby("device", sort=True):
        fit = fit_launch_cost(rows)
        device_us = float(rows["device_ns"].median()) / 1e3
        fit["device_us_median"] = round(device_us, 3)
        fit["split"] = (split_projection(fit["a_us"], fit["b_us_per_node"], fit["nodes_median"], device_us)
                        if fit["a_us"] is not None else [])
        devices[str(int(device))] = fit
    return {"reason": None, "launches": int(len(launches)), "devices": devices}
