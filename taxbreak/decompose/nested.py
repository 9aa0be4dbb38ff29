"""The nested summary values as long-form frames: ``Analysis.idle_by_cause`` and ``Analysis.devices``.

A summary metric dict holds two values that are dicts themselves: ``idle_by_cause_us`` (device
idle µs per cause, summed over devices) and ``devices`` (per device: busy, idle and its own idle
by cause). The ``steps`` and ``phases`` frames keep one column per flat metric; these two frames
hold the nested values one row per (scope, device, cause), so a notebook filters, groups and plots
them like any other frame, and the Parquet files of many traces share one schema whatever their
devices. Both have the same key columns:

* ``scope``: ``"all"`` (the whole trace), ``"phase"`` or ``"step"``;
* ``phase``: the phase name (``"all"`` for the whole trace, the step's phase for a step);
* ``step``: the step number for a step row, ``<NA>`` otherwise.

``idle_by_cause`` adds ``device`` (``<NA>``: summed over devices, the scope's own
``idle_by_cause_us``), ``cause`` and ``idle_us``; ``devices`` adds ``device`` and one column per
device value. A value not measured is ``<NA>`` (a cause the trace cannot observe, such as
``library`` without library ranges), never 0; a scope without device activity has no rows.
"""
from __future__ import annotations

import pandas as pd

KEYS = ("scope", "phase", "step")
IDLE_COLUMNS = (*KEYS, "device", "cause", "idle_us")
DEVICE_VALUES = ("busy_us", "device_kernel_busy_us", "device_copy_busy_us", "device_memset_busy_us", "idle_us")
DEVICE_COLUMNS = (*KEYS, "device", *DEVICE_VALUES)


def _scopes(summary: dict) -> list[tuple[str, str, int | None, dict]]:
    """``(scope, phase, step, metric dict)`` of the whole trace, each phase and each step."""
    out = [("all", "all", None, summary.get("all") or {})]
    out += [("phase", str(name), None, metrics) for name, metrics in (summary.get("phases") or {}).items()]
    out += [("step", str(s.get("phase")), s.get("step"), s) for s in summary.get("steps") or []]
    return out


def _typed(frame: pd.DataFrame, values: tuple[str, ...]) -> pd.DataFrame:
    frame = frame.astype({"step": "Int64", "device": "Int64"})
    return frame.astype({c: "Float64" for c in values}).reset_index(drop=True)


def idle_by_cause_frame(summary: dict) -> pd.DataFrame:
    """Device idle µs per cause, one row per (scope, device or the sum over devices, cause)."""
    rows = []
    for scope, phase, step, metrics in _scopes(summary):
        causes = metrics.get("idle_by_cause_us")
        if isinstance(causes, dict):
            rows += [(scope, phase, step, None, c, v) for c, v in causes.items()]
        for device, entry in (metrics.get("devices") or {}).items():
            rows += [(scope, phase, step, int(device), c, v) for c, v in (entry.get("idle_by_cause_us") or {}).items()]
    return _typed(pd.DataFrame(rows, columns=list(IDLE_COLUMNS)), ("idle_us",))


def devices_frame(summary: dict) -> pd.DataFrame:
    """Busy and idle µs per device, one row per (scope, device)."""
    rows = [(scope, phase, step, int(device), *(entry.get(k) for k in DEVICE_VALUES))
            for scope, phase, step, metrics in _scopes(summary)
            for device, entry in (metrics.get("devices") or {}).items()]
    return _typed(pd.DataFrame(rows, columns=list(DEVICE_COLUMNS)), DEVICE_VALUES)
