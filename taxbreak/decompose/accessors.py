"""Typed per-phase values: ``analysis.phase("decode")`` -> :class:`PhaseValues`.

``Analysis.summary`` is a plain dict (it is what ``--json`` prints); in a
notebook a typo in a key or a phase name there gives a bare ``KeyError`` and a
value's type is a guess. :class:`PhaseValues` names the values a reader asks
for most, each typed, and ``None`` where the trace did not measure it (never 0).

Phase names are what the trace's step scheme gives (docs/architecture.md, "Step
and phase markers"): ``prefill``/``decode``/``mixed`` for taxbreak's own
markers, ``unknown`` for ``ProfilerStep#N`` steps or a trace without any step
markers (the whole trace is then one step), and ``between`` for what lies
outside every step. ``"all"`` is always there: the whole trace.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Mapping

from ..trace.errors import UsageError

ALL = "all"


class UnknownPhaseError(UsageError, KeyError):
    """``analysis.phase(name)`` for a phase the trace does not have (code ``analysis.unknown_phase``).

    A ``KeyError`` too, so ``except KeyError`` around a dict-style lookup keeps working."""


@dataclass(frozen=True)
class PhaseValues:
    """The main TaxBreak values of one phase (or ``"all"``, the whole trace); µs unless named otherwise.

    ``kt_us`` is ΔKT as T_Orchestrate counts it (N·T_sys plus graph-launch host time);
    ``launch_latency_us`` (the launch path exposed to an idle device) and queue wait are
    reported apart and are not part of T_Orchestrate (docs/method.md §2.1, §3).
    """

    name: str
    steps: int | None
    kernels: int | None
    launches: int | None
    tokens: int | None
    aten_ops: int | None
    hdbi: float | None
    hdbi_reason: str | None
    device_active_us: float | None
    orchestration_us: float | None
    ft_us: float | None
    ft_python_us: float | None
    ft_dispatch_us: float | None
    ct_us: float | None
    kt_us: float | None
    launch_floor_us: float | None
    launch_graph_us: float | None
    launch_latency_us: float | None
    queue_wait_sum_us: float | None
    queue_wait_union_us: float | None
    wall_us: float | None
    device_idle_us: float | None
    idle_by_cause_us: Mapping[str, float] | None
    host_thread_us: float | None
    kernels_per_token: float | None

    def as_dict(self) -> dict:
        """The values as a plain dict (``idle_by_cause_us`` as a dict)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["idle_by_cause_us"] = None if self.idle_by_cause_us is None else dict(self.idle_by_cause_us)
        return out


# PhaseValues field -> summary key, where the two names differ (the summary keeps its published names)
_RENAMED = {"ft_us": "framework_us", "ft_python_us": "framework_python_us",
            "ft_dispatch_us": "framework_dispatch_us", "ct_us": "library_us"}
_INTS = ("steps", "kernels", "launches", "tokens", "aten_ops")
_NOT_PLAIN_NUMBERS = ("name", "hdbi_reason", "idle_by_cause_us", "kt_us")  # built below, not read as one number


def phase_names(summary: dict) -> list[str]:
    """``"all"`` then the trace's phases, in the order the summary holds them."""
    return [ALL, *summary.get("phases", {})]


def phase_values(summary: dict, name: str) -> PhaseValues:
    """The :class:`PhaseValues` of phase ``name`` of an ``Analysis.summary``.

    Raises:
        UnknownPhaseError: ``analysis.unknown_phase``, naming the phases the trace has.
    """
    scope = summary.get(ALL) if name == ALL else summary.get("phases", {}).get(name)
    if not isinstance(scope, dict):
        known = ", ".join(phase_names(summary))
        raise UnknownPhaseError("analysis.unknown_phase", f"no phase {name!r} in this trace (it has: {known})",
                                hint="a trace without taxbreak markers has 'unknown' (and 'between'); "
                                     "'all' is the whole trace")
    values = {f.name: _number(scope.get(_RENAMED.get(f.name, f.name)), f.name in _INTS)
              for f in fields(PhaseValues) if f.name not in _NOT_PLAIN_NUMBERS}
    reason = scope.get("hdbi_reason")
    return PhaseValues(name=name, hdbi_reason=None if reason is None else str(reason),
                       idle_by_cause_us=_causes(scope.get("idle_by_cause_us")),
                       kt_us=_kt_us(scope), **values)


def _number(value, integer: bool) -> int | float | None:
    """A Python int/float from a summary value (numpy scalars included); None stays None."""
    if value is None:
        return None
    return int(value) if integer else float(value)


def _kt_us(scope: dict) -> float | None:
    """N·T_sys + graph-launch host time; None when neither part was measured."""
    parts = [scope.get("launch_floor_us"), scope.get("launch_graph_us")]
    measured = [float(p) for p in parts if p is not None]
    return sum(measured) if measured else None


def _causes(value) -> Mapping[str, float] | None:
    """Device idle µs by cause (summed over devices), read-only; None when not measured (no device)."""
    if not isinstance(value, dict):
        return None
    return MappingProxyType({str(k): float(v) for k, v in value.items() if v is not None})
