"""Summary metric names, their units and which direction is worse.

The summary dict of an ``Analysis`` is flat and the same at trace, phase and
step level (docs/architecture.md), so reports, diffs and budgets only need this
one table of names. A value that was not measured is ``None`` and is shown as
"not measured", never as 0.
"""
from __future__ import annotations

import math

import pandas as pd

from .words import NOT_MEASURED

# Every key of a summary metric dict (docs/architecture.md, docs/method.md).
METRIC_KEYS: tuple[str, ...] = (
    "kernels", "launches", "orphan_kernels", "orphan_launches",
    "device_active_us", "device_busy_us", "span_us", "device_span_idle_us",
    "framework_us", "framework_python_us", "framework_dispatch_us",
    "library_us", "library_by_name_us", "library_measured_us", "launch_floor_us", "launch_latency_us",
    "dependency_wait_us", "orchestration_us", "hdbi", "hdbi_covered", "hdbi_coverage", "tklqt_sum_us", "floor_us", "floor_source",
    "t_dispatch_base_us", "kernel_diversity", "tokens", "kernels_per_token",
    "orchestration_us_per_token", "framework_us_per_token", "device_active_us_per_token",
    "host_python_us", "host_dispatch_us", "host_library_us", "host_launch_api_us",
    "host_sync_us", "host_other_api_us", "host_untraced_us", "host_thread_us",
    "exposed_orchestration_us", "hidden_orchestration_us", "steps", "aten_ops", "aten_ops_per_token",
    "orphan_copies", "orphan_copy_calls", "chain_coverage", "orphan_device_us", "queue_wait_sum_us",
    "queue_wait_median_us", "queue_wait_p99_us", "queue_wait_union_us", "launch_graph_us", "hdbi_reason",
    "wall_us", "device_idle_us", "captured_launches", "device_kernel_busy_us", "device_copy_busy_us",
    "device_memset_busy_us",
    "host_blocked_us", "host_stall_us",
    # the same partition over the threads that launch no GPU work (docs/method.md §7)
    *(f"host_nonlaunching_{part}_us" for part in ("python", "dispatch", "library", "launch_api", "sync", "other_api",
                                                   "untraced", "blocked", "stall", "thread")),
)
# Summary keys renamed because their old names read as elapsed time: old name -> (new name, what
# it holds, the elapsed-time key to use instead). A budget naming an old key is a typed error
# (``budget.renamed_metric``) that says which of the two the limit meant (docs/ci.md).
RENAMED_METRICS: dict[str, tuple[str, str, str]] = {
    "queue_wait_us": ("queue_wait_sum_us", "a per-kernel sum of queue waits that overlap",
                      "queue_wait_union_us (elapsed time during which some kernel waited)"),
    "tklqt_us": ("tklqt_sum_us", "a per-kernel sum of launch + queueing times that overlap",
                 "launch_latency_us (exposed launch latency) or queue_wait_union_us"),
    "gpu_idle_us": ("device_span_idle_us", "idle time between the device's first and last activity only",
                    "device_idle_us (idle over the analysis window, the trace's span, as every report shows it)"),
}
# keys whose value is a dict (per cause, per device): shown by the reports, not limited by budgets
NESTED_KEYS: tuple[str, ...] = ("idle_by_cause_us", "devices")

# The five orchestration components of TaxBreak, in stacking order:
# T_Orchestrate = ΣΔFT (python + dispatch) + ΣΔCT + N·T_sys (+ the launch
# residual above the floor, reported separately by the method).
COMPONENTS: tuple[tuple[str, str], ...] = (
    ("framework_python_us", "framework Python (ΔFT py)"),
    ("framework_dispatch_us", "framework dispatch (ΔFT disp)"),
    ("library_us", "CUDA library (ΔCT)"),
    ("launch_floor_us", "launch floor (ΔKT = N·T_sys)"),
    ("launch_latency_us", "launch latency (exposed, above floor)"),
)

# What the reports call each metric (its unit is added where it is shown).
METRIC_LABELS: dict[str, str] = dict(COMPONENTS) | {
    "framework_us": "framework total (ΔFT)", "orchestration_us": "T_Orchestrate",
    "device_active_us": "T_DeviceActive", "wall_us": "elapsed (analysis window)",
    "device_busy_us": "GPU busy (union of devices)", "device_idle_us": "GPU idle (Σ devices)", "hdbi": "HDBI",
    "kernels": "kernels", "launches": "launches", "kernels_per_token": "kernels / token",
    "orchestration_us_per_token": "orchestration / token",
    "aten_ops": "host: ATen ops", "aten_ops_per_token": "host: ATen ops / token",
    "host_python_us": "host: Python", "host_dispatch_us": "host: ATen dispatch",
    "host_library_us": "host: CUDA library",
    "host_launch_api_us": "host: launch API", "host_sync_us": "host: sync waits",
    "host_other_api_us": "host: other runtime API", "host_untraced_us": "host: untraced", "host_thread_us": "host: wall",
    "exposed_orchestration_us": "host: exposed (device idle)",
}
# ... and the per-phase table of the HTML report besides
TABLE_LABELS: dict[str, str] = METRIC_LABELS | {
    "device_kernel_busy_us": "GPU busy: kernels", "device_copy_busy_us": "GPU busy: copies (memcpy)",
    "device_memset_busy_us": "GPU busy: memsets", "steps": "steps",
}
UNITLESS: tuple[str, ...] = ("hdbi", "kernels", "launches", "kernels_per_token", "aten_ops", "aten_ops_per_token",
                             "steps", "tokens")


def metric_label(key: str) -> str:
    """The metric's name as the reports show it, with its unit (``T_Orchestrate µs``)."""
    label = TABLE_LABELS.get(key, key.removesuffix("_us").replace("_", " "))
    return label if key in UNITLESS or not key.endswith("_us") else label + " µs"


# Host-side cost metrics: an increase is a regression. This is the set that
# the budget file's `[regression] max_pct` applies to (docs/ci.md).
ORCHESTRATION_METRICS: tuple[str, ...] = (
    "orchestration_us", "framework_us", "framework_python_us", "framework_dispatch_us",
    "library_us", "launch_floor_us", "launch_latency_us", "launch_graph_us", "exposed_orchestration_us",
    "orchestration_us_per_token", "framework_us_per_token", "kernels_per_token",
)

# Metrics that may take a per-metric regression limit, with the direction that
# is worse: +1 = an increase is worse, -1 = a decrease is worse.
WORSE_DIRECTION: dict[str, int] = {
    **{key: +1 for key in ORCHESTRATION_METRICS},
    "kernels": +1, "launches": +1, "orphan_kernels": +1, "orphan_launches": +1,
    "device_active_us": +1, "device_busy_us": +1, "span_us": +1, "device_span_idle_us": +1,
    "library_measured_us": +1, "library_by_name_us": +1, "dependency_wait_us": +1, "tklqt_sum_us": +1, "t_dispatch_base_us": +1,
    "kernel_diversity": +1, "device_active_us_per_token": +1,
    "host_python_us": +1, "host_dispatch_us": +1, "host_library_us": +1,
    "host_launch_api_us": +1, "host_sync_us": +1, "host_other_api_us": +1,
    "host_untraced_us": +1, "host_thread_us": +1, "hidden_orchestration_us": +1,
    "aten_ops": +1, "aten_ops_per_token": +1,
    "orphan_copies": +1, "orphan_copy_calls": +1, "orphan_device_us": +1, "queue_wait_sum_us": +1,
    "queue_wait_median_us": +1, "queue_wait_p99_us": +1, "queue_wait_union_us": +1, "wall_us": +1,
    "device_idle_us": +1, "host_blocked_us": +1, "host_stall_us": +1,
    **{key: +1 for key in METRIC_KEYS if key.startswith("host_nonlaunching_")},
    "hdbi": -1, "hdbi_covered": -1, "hdbi_coverage": -1, "chain_coverage": -1,
}

PHASES: tuple[str, ...] = ("prefill", "decode", "mixed", "unknown")


def is_missing(value) -> bool:
    """True for ``None``, ``pd.NA`` and NaN (pandas turns ``None`` into NaN in float columns)."""
    if value is None or value is pd.NA:
        return True
    try:
        return math.isnan(float(value))
    except (TypeError, ValueError):
        return False


def number(value) -> float | None:
    """``value`` as a float, or ``None`` when it is missing or not numeric."""
    if is_missing(value):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def fmt_value(value, key: str = "", missing: str = NOT_MEASURED) -> str:
    """Human form of one metric value; ``missing`` for None/NaN, never "0"."""
    if is_missing(value):
        return missing
    if isinstance(value, str):
        return value
    x = float(value)
    if key == "hdbi":
        return f"{x:.3f}"
    if key in ("kernels", "launches", "orphan_kernels", "orphan_launches", "tokens", "steps", "calls", "aten_ops"):
        return f"{int(round(x)):,}"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if abs(x) >= 1:
        return f"{x:,.2f}"
    return f"{x:.3g}"


def pct_change(base: float | None, new: float | None) -> float | None:
    """Relative change in percent; ``None`` when either side is missing.

    A change from exactly 0 to a positive value is +inf (and -inf to a
    negative one); 0 → 0 is 0 %.
    """
    if base is None or new is None:
        return None
    if base == 0:
        if new == 0:
            return 0.0
        return math.copysign(math.inf, new)
    return (new - base) / abs(base) * 100.0
