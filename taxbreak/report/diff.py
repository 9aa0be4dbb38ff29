"""Before/after comparison of two analyses (``taxbreak diff BASE NEW``).

Per scope (``all`` and every phase of either run): each orchestration
component, device-active time, the elapsed window with the device's busy and
idle time over it, HDBI, kernels per token, the idle time by cause and the host
partition, as base, new, change in µs and change in %. Only elapsed or spent
times are compared: per-kernel sums of overlapping waits (``queue_wait_sum_us``,
``tklqt_sum_us``) stay in the JSON summary, not in the diff. Then the ATen ops and kernel classes whose
orchestration time moved most, and the kernel names found in only one run.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .metrics import COMPONENTS, number, pct_change

DIFF_METRICS: tuple[str, ...] = tuple(k for k, _ in COMPONENTS) + (
    "framework_us", "orchestration_us", "device_active_us", "wall_us", "device_busy_us", "device_idle_us",
    "hdbi", "kernels", "launches", "kernels_per_token", "orchestration_us_per_token",
)
# One row per idle cause, ``idle_by_cause_us.<cause>`` (device idle over the window, summed over
# devices; docs/method.md §3.1), for every cause either run reports, in the summary's order.
IDLE_CAUSE_PREFIX = "idle_by_cause_us."
# The exact host partition and the ATen op counts (measured with or without a device):
# shown after the components; on a CPU run they are the only measured comparison.
HOST_METRICS: tuple[str, ...] = (
    "aten_ops", "aten_ops_per_token", "host_python_us", "host_dispatch_us", "host_library_us", "host_launch_api_us", "host_sync_us",
    "host_other_api_us", "host_untraced_us", "host_thread_us", "exposed_orchestration_us",
)
# Per-kernel columns whose sum is the kernel's T_Orchestrate share
# (ΔFT python + ΔFT dispatch + ΔCT + T_sys; docs/method.md).
ORCH_COLUMNS = ("ft_python_ns", "ft_dispatch_ns", "ct_ns", "kt_floor_ns")


def metric_change(base, new) -> dict:
    """``{"base", "new", "delta", "delta_pct"}``; None where a side is unmeasured."""
    b, n = number(base), number(new)
    delta = None if b is None or n is None else n - b
    return {"base": b, "new": n, "delta": delta, "delta_pct": pct_change(b, n)}


def diff_summaries(base: dict, new: dict) -> dict[str, dict[str, dict]]:
    """scope -> metric -> change, for ``all`` and every phase of either summary."""
    phases = sorted(set(base.get("phases") or {}) | set(new.get("phases") or {}))
    out = {}
    for scope in ["all"] + phases:
        b = base.get("all") if scope == "all" else (base.get("phases") or {}).get(scope)
        n = new.get("all") if scope == "all" else (new.get("phases") or {}).get(scope)
        out[scope] = {m: metric_change((b or {}).get(m), (n or {}).get(m)) for m in DIFF_METRICS}
        out[scope].update(idle_cause_changes(b or {}, n or {}))
        out[scope].update({m: metric_change((b or {}).get(m), (n or {}).get(m)) for m in HOST_METRICS})
        out[scope]["present"] = {"base": b is not None, "new": n is not None}
    return out


def idle_cause_changes(base: dict, new: dict) -> dict[str, dict]:
    """``{"idle_by_cause_us.<cause>": change}`` for every cause of either scope, base's order first."""
    b, n = base.get("idle_by_cause_us") or {}, new.get("idle_by_cause_us") or {}
    causes = list(b) + [c for c in n if c not in b]
    return {IDLE_CAUSE_PREFIX + c: metric_change(b.get(c), n.get(c)) for c in causes}


def kernel_orchestration_ns(kernels: pd.DataFrame) -> pd.Series:
    """Per-kernel orchestration (ns): the measured parts of ΔFT + ΔCT + T_sys;
    NaN where none is measured (memcpy/memset rows, orphan kernels)."""
    cols = [c for c in ORCH_COLUMNS if c in kernels.columns]
    if not cols:
        return pd.Series(np.full(len(kernels), np.nan), index=kernels.index)
    values = kernels[cols].apply(pd.to_numeric, errors="coerce").astype(float)
    return values.sum(axis=1, min_count=1)


def group_change(base: pd.DataFrame, new: pd.DataFrame, key: str, value: str, top: int) -> list[dict]:
    """The ``top`` groups by |change| of ``value`` between two (key, value) frames
    (a group missing from one side counts as 0 there for the change)."""
    b = base.groupby(key, sort=False)[value].sum(min_count=1) if len(base) else pd.Series(dtype=float)
    n = new.groupby(key, sort=False)[value].sum(min_count=1) if len(new) else pd.Series(dtype=float)
    both = pd.concat([b.rename("base"), n.rename("new")], axis=1).astype(float)
    # a group with nothing measured on either side (memcpy, memset) cannot move
    both = both[both["base"].notna() | both["new"].notna()]
    both["delta"] = both["new"].fillna(0) - both["base"].fillna(0)
    both = both.reindex(both["delta"].abs().sort_values(ascending=False, kind="stable").index).head(top)
    return [{key: str(name), **metric_change(row.base, row.new),
             "delta": float(row.delta)} for name, row in zip(both.index, both.itertuples())]


def _class_frame(kernels: pd.DataFrame) -> pd.DataFrame:
    if "kernel_class" not in kernels.columns:
        return pd.DataFrame({"kernel_class": [], "orchestration_us": []})
    return pd.DataFrame({"kernel_class": kernels["kernel_class"].astype(str).to_numpy(),
                         "orchestration_us": kernel_orchestration_ns(kernels).to_numpy() / 1e3})


def _op_frame(ops: pd.DataFrame | None) -> pd.DataFrame:
    if ops is None or "op_name" not in ops.columns or "orchestration_us" not in ops.columns:
        return pd.DataFrame({"op_name": [], "orchestration_us": []})
    return ops[["op_name", "orchestration_us"]].astype({"orchestration_us": float})


def one_sided_kernels(base: pd.DataFrame, new: pd.DataFrame, top: int) -> dict:
    """Kernel names present in only one run, with their counts (most frequent first)."""
    b = base["name"].astype(str).value_counts() if "name" in base.columns else pd.Series(dtype=int)
    n = new["name"].astype(str).value_counts() if "name" in new.columns else pd.Series(dtype=int)
    only_b, only_n = b[~b.index.isin(n.index)], n[~n.index.isin(b.index)]
    return {
        "only_in_base_count": int(len(only_b)), "only_in_new_count": int(len(only_n)),
        "only_in_base": [{"name": k, "count": int(v)} for k, v in only_b.head(top).items()],
        "only_in_new": [{"name": k, "count": int(v)} for k, v in only_n.head(top).items()],
    }


def diff_analyses(base, new, base_label: str = "base", new_label: str = "new", top: int = 10) -> dict:
    """Compare two ``Analysis`` objects.

    Args:
        base, new: analyses with ``summary``, ``ops`` and ``kernels``.
        base_label, new_label: names shown for the two sides (paths).
        top: how many ops, kernel classes and one-sided kernels to list.

    Returns:
        A JSON-ready dict: ``labels``, ``scopes`` (see :func:`diff_summaries`),
        ``ops``, ``kernel_classes`` (µs of orchestration), ``kernels``.
    """
    return {
        "labels": {"base": base_label, "new": new_label},
        "scopes": diff_summaries(base.summary, new.summary),
        "ops": group_change(_op_frame(base.ops), _op_frame(new.ops), "op_name", "orchestration_us", top),
        "kernel_classes": group_change(_class_frame(base.kernels), _class_frame(new.kernels),
                                       "kernel_class", "orchestration_us", top),
        "kernels": one_sided_kernels(base.kernels, new.kernels, top),
    }
