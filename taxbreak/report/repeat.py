"""Budgets over repeated runs: the median of N runs, its spread, and a baseline's noise band.

Host times of two identical CPU profiles a minute apart differ by tens of percent on a shared
runner (docs/ci.md, "Repeated runs"), so one run against one baseline passes in one order and
fails in the other. With several runs the check takes, per scope and metric, the **median** over
the runs and reports the **spread** (min and max) beside it; with several baseline runs the
baseline is their median too, and the baseline's own spread is a **noise band**: a regression
limit that the run's median exceeds while staying inside the range the baseline runs themselves
covered (no worse than the worst baseline run) passes, with the reason in its detail.

A metric not measured in one of the runs is not measured in the median (a median of the runs
that measured it would look like a measurement of all of them).
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

from .budget import Budget
from .check import CheckResult, evaluate_budget, scope_metrics
from .metrics import METRIC_KEYS, WORSE_DIRECTION, number

__all__ = ["Spread", "median_summary", "evaluate_repeated"]
# text values: kept when every run agrees, else None
TEXT_ONLY_KEYS = ("floor_source", "hdbi_reason")


@dataclass(frozen=True)
class Spread:
    """How far the runs of one metric spread: lowest, median and highest value over ``runs`` runs."""

    low: float
    median: float
    high: float
    runs: int

    def as_dict(self) -> dict:
        return {"min": self.low, "median": self.median, "max": self.high, "runs": self.runs}


def _scopes(summaries: list[dict]) -> list[str]:
    """``all`` and every phase some run has, in first-seen order."""
    names = dict.fromkeys(["all"])
    for s in summaries:
        names.update(dict.fromkeys(s.get("phases") or {}))
    return list(names)


def _median_scope(scopes: list[dict | None]) -> tuple[dict | None, dict[str, Spread]]:
    """The median metric dict of one scope over runs, and the spread of each numeric metric."""
    present = [s for s in scopes if isinstance(s, dict)]
    if len(present) < len(scopes):  # a phase missing from one run: not measured in the median
        return None, {}
    out: dict = {}
    spreads: dict[str, Spread] = {}
    for key in METRIC_KEYS:
        values = [s.get(key) for s in present]
        if key in TEXT_ONLY_KEYS:
            distinct = {v for v in values if v is not None}
            out[key] = distinct.pop() if len(distinct) == 1 and None not in values else None
            continue
        numbers = [number(v) for v in values]
        if any(v is None for v in numbers) or not numbers:
            out[key] = None
            continue
        out[key] = statistics.median(numbers)
        spreads[key] = Spread(min(numbers), out[key], max(numbers), len(numbers))
    return out, spreads


def median_summary(summaries: list[dict]) -> tuple[dict, dict[str, dict[str, Spread]]]:
    """One summary from several runs of the same workload: every numeric metric of ``all`` and of each
    phase is the median over the runs; ``meta`` is the first run's.

    Returns:
        ``(summary, spreads)``: ``spreads[scope][metric]`` is the :class:`Spread` of a metric measured
        in every run.
    """
    if not summaries:
        raise ValueError("median_summary needs at least one summary")
    summary: dict = {"meta": summaries[0].get("meta") or {}, "phases": {}}
    spreads: dict[str, dict[str, Spread]] = {}
    for scope in _scopes(summaries):
        metrics, spreads[scope] = _median_scope([scope_metrics(s, scope) for s in summaries])
        if scope == "all":
            summary["all"] = metrics or {}
        elif metrics is not None:
            summary["phases"][scope] = metrics
    return summary, spreads


def evaluate_repeated(budget: Budget, summaries: list[dict], baselines: list[dict] | None = None,
                      allow_unmeasured: bool = False) -> CheckResult:
    """:func:`~taxbreak.report.check.evaluate_budget` on the median of ``summaries`` (and of ``baselines``).

    Every outcome carries the spread of its metric over the runs (``spread``) and over the baseline runs
    (``baseline_spread``). A regression that fails only because of run-to-run noise, the run's median no
    worse than the worst of two or more baseline runs, passes with that reason (module docstring).
    """
    run, run_spreads = median_summary(summaries)
    base, base_spreads = median_summary(baselines) if baselines else (None, {})
    # one run is checked as it is: its median is itself, and nothing of its summary is left out
    run = summaries[0] if len(summaries) == 1 else run
    base = baselines[0] if baselines and len(baselines) == 1 else base
    result = evaluate_budget(budget, run, base, allow_unmeasured=allow_unmeasured)
    result.runs, result.baseline_runs = len(summaries), len(baselines or [])
    for o in result.outcomes:
        o.spread = _spread_dict(run_spreads, o.scope, o.metric)
        o.baseline_spread = _spread_dict(base_spreads, o.scope, o.metric)
        if o.kind == "regression" and o.status == "fail" and len(baselines or []) >= 2:
            _within_noise(o, base_spreads.get(o.scope, {}).get(o.metric))
    return result


def _spread_dict(spreads: dict, scope: str, metric: str) -> dict | None:
    spread = spreads.get(scope, {}).get(metric)
    return None if spread is None else spread.as_dict()


def _within_noise(outcome, band: Spread | None) -> None:
    """Pass a failed regression whose run median lies inside the baseline runs' own range."""
    if band is None or outcome.actual is None:
        return
    worst = band.high if WORSE_DIRECTION[outcome.metric] > 0 else band.low
    inside = outcome.actual <= worst if WORSE_DIRECTION[outcome.metric] > 0 else outcome.actual >= worst
    if inside:
        outcome.status = "pass"
        outcome.detail = (f"{outcome.detail}, but within the baseline runs' noise band "
                          f"{band.low:.4g}..{band.high:.4g} ({band.runs} runs)")
