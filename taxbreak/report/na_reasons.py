"""Why a metric is n/a: the reason printed beside every value the trace cannot give.

A missing value is never 0 (docs/report.md); it is "n/a" with one of these reasons, chosen
from what the summary's meta says the source recorded (device activity, CUDA library ranges,
Python-level ops, a token count).
"""
from __future__ import annotations

from .metrics import is_missing

NO_DEVICE = "no CUDA device activity in the trace"
NO_TOKENS = "the output-token count is unknown: pass --tokens, or profile with `taxbreak profile`"
BETWEEN_TOKENS = "no tokens are produced outside the prefill/decode steps"
NO_MANIFEST = "not recorded by this trace"

_DEVICE_KEYS = ("kernels", "device_active_us", "framework_us", "library_us", "launch_floor_us", "orchestration_us",
                "queue_wait_union_us", "device_idle_us", "kernels_per_token", "hdbi", "launch_latency_us",
                "launch_graph_us", "library_by_name_us", "dependency_wait_us", "framework_dispatch_us",
                "exposed_orchestration_us", "hidden_orchestration_us")
_PER_TOKEN = ("kernels_per_token", "aten_ops_per_token", "orchestration_us_per_token", "framework_us_per_token",
              "device_active_us_per_token")


def library_reason(summary: dict) -> str:
    """Why CUDA library time is n/a: the source records no cuBLAS/cuDNN call ranges."""
    source = (summary.get("meta") or {}).get("source_format") or "this"
    if source == "kineto":
        return "Kineto traces do not record CUDA library (cuBLAS/cuDNN) calls"
    return f"the {source} trace holds no CUDA library (cuBLAS/cuDNN) call ranges"


def na_reason(summary: dict, key: str, scope: dict | None = None, phase: str | None = None) -> str:
    """The reason ``key`` is missing in ``scope`` (default the whole trace) of ``summary``."""
    scope = summary["all"] if scope is None else scope
    if key in _PER_TOKEN:
        return BETWEEN_TOKENS if phase == "between" else NO_TOKENS
    if key in ("hdbi", "orchestration_us") and scope.get("hdbi_reason"):
        return str(scope["hdbi_reason"])  # HDBI is n/a because a component of T_Orchestrate is
    if summary["all"].get("device_active_us") is None and (key in _DEVICE_KEYS or key.startswith("device")):
        return NO_DEVICE
    if "library" in key:
        return library_reason(summary)
    if key == "framework_python_us" and not (summary.get("meta") or {}).get("t_py_measured"):
        return "no Python-level ops above the ATen ops (record with with_stack=True)"
    if key.startswith("host_nonlaunching_"):
        return "every traced thread launches GPU work"
    if scope.get("kernels") == 0 and key in _DEVICE_KEYS:
        return "no kernels ran in this phase"
    return NO_MANIFEST


def notes_for(summary: dict, cells: dict[str, list[tuple[str | None, dict]]], labels: dict[str, str]) -> dict[str, str]:
    """``{label: reason}`` for every column of ``cells`` ({key: [(phase, scope), ...]}) with a missing value.

    Cells of one column missing for different reasons give one note per reason, the phases named.
    """
    notes: dict[str, str] = {}
    for key, scopes in cells.items():
        reasons: dict[str, list[str]] = {}
        for phase, scope in scopes:
            if is_missing(scope.get(key)):
                reasons.setdefault(na_reason(summary, key, scope, phase), []).append(phase or "all")
        for reason, phases in reasons.items():
            where = "" if len(reasons) == 1 and len(phases) == len(scopes) else f" ({', '.join(phases)})"
            notes[labels[key].replace("\n", " ") + where] = reason
    return notes
