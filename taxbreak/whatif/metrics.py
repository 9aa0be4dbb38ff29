"""Per-step means of the summary metrics, the input of every projection.

The decomposer's summary (docs/architecture.md) holds one metric dict per step
under ``summary["steps"]`` with a ``phase`` key. Projections and sweep tables
work on the *mean step* of a phase: each metric averaged over the phase's
steps. A metric that is ``None`` in any step (not measured) stays ``None`` in
the mean: averaging only the measured steps would present a partial figure as
the whole.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from ..trace.errors import TraceFormatError, TraceNotFoundError

# Keys that identify a step rather than measure it; "steps" is the step count
# (1 in every step dict), replaced by the number of steps averaged.
_ID_KEYS = {"step", "phase", "name", "start_ns", "end_ns", "steps"}


def phase_steps(summary: dict, phase: str) -> list[dict]:
    """The step dicts of one phase, in trace order."""
    return [s for s in summary.get("steps") or [] if s.get("phase") == phase]


def step_means(summary: dict, phase: str) -> dict | None:
    """Mean of every numeric metric over the steps of ``phase``.

    Returns:
        ``{metric: mean or None, ..., "steps": n}`` including ``wall_us`` and
        ``step_us`` (:func:`with_latency`), or ``None`` when the phase has no step.
    """
    steps = phase_steps(summary, phase)
    if not steps:
        return None
    steps = [with_latency(s) for s in steps]
    keys = sorted({k for s in steps for k in s if k not in _ID_KEYS})
    means: dict = {"steps": len(steps)}
    for key in keys:
        values = [s.get(key) for s in steps]
        means[key] = _mean(values)
    return means


def with_latency(step: dict) -> dict:
    """The step plus ``wall_us`` (its marker range) and ``step_us`` (its latency).

    ``span_us`` is the device span of the step's kernels and the marker range
    is host time; a step without a sync inside can end on the host before its
    kernels finish, so the step's latency is taken as the larger of the two
    (the steady-state period of a pipelined step loop). On a CPU run it is the
    marker range.
    """
    out = dict(step)
    start, end = step.get("start_ns"), step.get("end_ns")
    wall = None if start is None or end is None else (float(end) - float(start)) / 1e3
    span = step.get("span_us")
    out["wall_us"] = wall
    out["step_us"] = None if wall is None and span is None else max(wall or 0.0, span or 0.0)
    return out


def _mean(values: list) -> float | None:
    if any(v is None or isinstance(v, (bool, str, dict, list)) for v in values):
        return None
    arr = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        return None
    return float(arr.mean())


def phases_in(summary: dict) -> list[str]:
    """Phases with at least one step, in a fixed order (prefill, decode, mixed, others)."""
    # "between" collects the time outside every step marker (decompose/steps.py):
    # not a step of the workload, so no mean step is taken over it.
    found = {s.get("phase") for s in summary.get("steps") or []} - {"between", None}
    order = ["prefill", "decode", "mixed"]
    return [p for p in order if p in found] + sorted(found - set(order))


def floor_of(summary: dict) -> tuple[float | None, str]:
    """The launch floor T_sys (µs) the analysis used and its source (``measured``, ``published:H200``, …)."""
    # Metric dicts carry floor_us/floor_source (docs/method.md); older
    # summaries kept them in meta only.
    holder = summary.get("all") or {}
    if holder.get("floor_us") is None:
        holder = summary.get("meta") or {}
    floor = holder.get("floor_us")
    source = holder.get("floor_source") or "unknown"
    if isinstance(floor, dict):  # tolerate {"floor_us": {"value": .., "source": ..}}
        source = floor.get("source", source)
        floor = floor.get("value")
    if floor is None or not isinstance(floor, (int, float)) or not math.isfinite(floor):
        return None, source
    return float(floor), source


def read_summary(run_dir: str | Path) -> dict:
    """``RUN_DIR/summary.json`` as a dict.

    Raises:
        TraceNotFoundError: ``run.not_a_run`` when the file is absent.
        TraceFormatError: ``json.invalid`` when it is not valid JSON.
    """
    path = Path(run_dir) / "summary.json"
    if not path.is_file():
        raise TraceNotFoundError(
            "run.not_a_run", "no summary.json in the directory", path=str(run_dir),
            hint="give a run directory written by `taxbreak profile` or a sweep directory",
        )
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise TraceFormatError("json.invalid", f"summary.json is not valid JSON: {err}", path=str(path)) from err
