"""The TaxBreak equations applied to planted truth (independent of any trace linking).

Everything here works from what the planted builder laid out (its truth
frames), with plain Python where a loop is the clearest reference: the traces
are small, and the decomposer's vectorized code must agree with it exactly.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

CAUSES = ("python", "dispatch", "library", "launch_api", "sync", "other_api", "untraced",
          "launch_floor", "launch_latency", "dependency_wait", "graph_internal", "copy_issued", "unlinked",
          "nothing_pending", "blocked", "host_stall")


def expected_components(truth: pd.DataFrame, floor_ns: int) -> pd.DataFrame:
    """ΔFT/ΔCT/ΔKT and the T_launch split per planted kernel, by the equations of docs/method.md."""
    t = truth.copy()
    carrier = t["graph_node"] <= 0  # a plain launch's kernel, or a graph's first node
    sample = t.loc[carrier & ~t["is_library"] & (t["t_dispatch_ns"] > 100), "t_dispatch_ns"]
    base = int(round(float(np.median(sample)))) if len(sample) else None
    t["ft_python_ns"] = np.where(t["first_in_op"], t["t_py_ns"], 0)
    if base is None:
        t["ft_dispatch_ns"] = t["t_dispatch_ns"]
    else:
        # never more than measured: a library kernel's dispatch part is min(T_dispatch, base)
        t["ft_dispatch_ns"] = np.where(t["is_library"], np.minimum(base, t["t_dispatch_ns"]), t["t_dispatch_ns"])
        t["ct_ns"] = np.where(t["is_library"], np.maximum(t["t_dispatch_ns"] - base, 0), 0)
    t["ft_ns"] = t["ft_python_ns"] + t["ft_dispatch_ns"]
    t["kt_floor_ns"] = floor_ns
    # T_launch = t_floor + queue_wait + launch_latency; latency only where the kernel ends an idle gap
    t_launch = t["t_launch_ns"]
    t["t_floor_ns"] = np.minimum(floor_ns, t_launch)
    busy = _merge(list(zip(t["start_ns"], t["start_ns"] + t["dur_ns"])))
    gap_start = {s: (busy[i - 1][1] if i else None) for i, (s, _) in enumerate(busy)}
    latency = []
    for start, launch, tf, seen in zip(t["start_ns"], t["launch_start_ns"], t["t_floor_ns"],
                                       t["start_ns"].duplicated()):
        if start not in gap_start or seen:  # started while the device was busy, or not first at that instant
            latency.append(0)
            continue
        g0 = gap_start[start]
        latency.append(max(0, start - max(launch + tf, g0 if g0 is not None else launch + tf)))
    t["launch_latency_ns"] = latency
    t["queue_wait_ns"] = t_launch - t["t_floor_ns"] - t["launch_latency_ns"]
    graph = t["graph_node"] >= 0
    t["kt_graph_ns"] = np.where(graph, np.maximum(t["launch_dur_ns"] - floor_ns, 0), 0)
    rest = ~carrier  # a graph's later nodes: no host cost of their own, all of T_launch queued
    for col in ("ft_python_ns", "ft_dispatch_ns", "ft_ns", "kt_floor_ns", "t_floor_ns", "launch_latency_ns",
                "kt_graph_ns") + (("ct_ns",) if base is not None else ()):
        t.loc[rest, col] = 0
    t.loc[rest, "queue_wait_ns"] = t_launch[rest]
    t.attrs["base"] = base
    return t


COMPONENTS = ["t_py_ns", "t_dispatch_ns", "t_launch_ns", "dur_ns", "is_library", "ft_python_ns",
              "ft_dispatch_ns", "ft_ns", "kt_floor_ns", "launch_latency_ns", "t_floor_ns", "queue_wait_ns",
              "kt_graph_ns"]


def compare_kernels(kernels: pd.DataFrame, truth: pd.DataFrame, floor_ns: int) -> None:
    """Assert every planted component is recovered exactly (ns)."""
    exp = expected_components(truth, floor_ns).sort_values(["correlation", "start_ns"]).reset_index(drop=True)
    got = kernels.sort_values(["correlation", "start_ns"]).reset_index(drop=True)
    assert got["correlation"].tolist() == exp["correlation"].tolist()
    cols = COMPONENTS + (["ct_ns"] if exp.attrs["base"] is not None else [])
    for col in cols:
        g = got[col].astype("int64").to_numpy()
        e = exp[col].astype("int64").to_numpy()
        assert (g == e).all(), f"{col}: got {g[g != e][:5]}, planted {e[g != e][:5]}"
    split = got["t_floor_ns"] + got["queue_wait_ns"] + got["launch_latency_ns"]
    assert (split == got["t_launch_ns"]).all()
    assert (got["step"].to_numpy() == exp["step"].to_numpy()).all()
    assert (got["phase"].to_numpy() == exp["phase"].to_numpy()).all()


def compare_partition(partition: pd.DataFrame, planted_steps: pd.DataFrame, library_ranges: bool) -> None:
    """Per step, the host partition equals the planted host time of each kind."""
    got = partition.set_index("step").sort_index()
    exp = planted_steps.set_index("step").sort_index()
    assert list(got.index) == list(exp.index)
    for part in ("python", "dispatch", "library", "launch_api", "untraced"):
        assert (got[f"host_{part}_ns"] == exp[part]).all(), part
    assert (got["host_sync_ns"] == 0).all() and (got["host_other_api_ns"] == 0).all()
    assert (got["host_thread_ns"] == exp["wall"]).all()


def expected_idle(planted, window: tuple[int, int], floor_ns: int) -> dict:
    """``{(step, cause): ns}`` of device idle time, by a plain loop over the planted layout."""
    truth = planted.kernels.sort_values("start_ns", kind="stable")
    busy = _merge(list(zip(truth["start_ns"], truth["start_ns"] + truth["dur_ns"])))
    first_at: dict = {}
    for row in truth.itertuples(index=False):
        first_at.setdefault(row.start_ns, row)  # the first of equal starts, as the decomposer takes it
    timeline = list(planted.host_timeline.itertuples(index=False))
    pieces = []
    edges = [window[0]] + [v for iv in busy for v in iv] + [window[1]]
    for g0, g1 in zip(edges[0::2], edges[1::2]):
        if g1 <= g0:
            continue
        if g1 == window[1] and (not busy or g0 == busy[-1][1]):
            pieces.append((g0, g1, "nothing_pending"))
            continue
        nxt = first_at[g1]
        issued = min(max(nxt.launch_start_ns, g0), g1)
        pieces += _host_labels(timeline, g0, issued) + _issued_labels(nxt, issued, g1, floor_ns)
    return _by_step(pieces, planted.steps)


def _issued_labels(kernel, issued: int, end: int, floor_ns: int) -> list:
    """[issued, end) of a gap ended by ``kernel``: floor then latency, or a graph's inner gap."""
    if kernel.graph_node > 0:
        return [(issued, end, "graph_internal")]
    t_floor = min(floor_ns, max(kernel.start_ns - kernel.launch_start_ns, 0))
    floor_end = min(max(kernel.launch_start_ns + t_floor, issued), end)
    return [(issued, floor_end, "launch_floor"), (floor_end, end, "launch_latency")]


def _overlap(merged: list, start: int, end: int) -> int:
    return sum(max(0, min(e, end) - max(s, start)) for s, e in merged)


def _merge(intervals: list) -> list:
    out = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def _host_labels(timeline, start: int, end: int) -> list:
    """Pieces of [start, end) labelled by the planted host timeline (untraced where no segment)."""
    out, t = [], start
    for seg in timeline:
        lo, hi = max(seg.start_ns, start), min(seg.end_ns, end)
        if hi <= lo:
            continue
        if lo > t:
            out.append((t, lo, "untraced"))
        out.append((lo, hi, seg.label))
        t = hi
    if t < end:
        out.append((t, end, "untraced"))
    return out


def _by_step(pieces: list, steps: pd.DataFrame) -> dict:
    bounds = sorted(set(steps["start_ns"]) | set(steps["end_ns"]))
    out: dict = {}
    for s, e, cause in pieces:
        cuts = [s] + [b for b in bounds if s < b < e] + [e]
        for a, b in zip(cuts[:-1], cuts[1:]):
            step = next((int(r.step) for r in steps.itertuples() if r.start_ns <= a < r.end_ns), -1)
            out[(step, cause)] = out.get((step, cause), 0) + (b - a)
    return {k: v for k, v in out.items() if v}


def got_idle(analysis) -> dict:
    """``{(step, cause): ns}`` of ``Analysis.idle``."""
    idle = analysis.idle
    dur = (idle["end_ns"] - idle["start_ns"]).to_numpy()
    out: dict = {}
    for step, cause, d in zip(idle["step"].tolist(), idle["cause"].astype(str).tolist(), dur.tolist()):
        out[(step, cause)] = out.get((step, cause), 0) + d
    return {k: v for k, v in out.items() if v}
