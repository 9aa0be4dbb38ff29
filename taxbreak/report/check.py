"""Evaluate a :class:`~taxbreak.report.budget.Budget` against analysis summaries.

Each limit becomes one :class:`Outcome` with a status:

* ``pass`` / ``fail`` — the metric was measured and the limit holds / does not;
* ``not_measured`` — the metric (or the whole phase) is absent or ``None``;
  counts as a failure unless unmeasured values are allowed;
* ``skipped`` — not evaluated: an allowed unmeasured value, a regression limit
  without a baseline, or a ``max_pct`` default on a metric unmeasured in both runs.

``warnings`` says what a status cannot: that a budget checked nothing (no
limits, or every one skipped), and that the baseline is a run of another model
or GPU (it is compared all the same).
"""
from __future__ import annotations

import math
import operator
from dataclasses import asdict, dataclass, field

from .budget import Budget, Limit, RegressionLimit
from .metrics import ORCHESTRATION_METRICS, PHASES, WORSE_DIRECTION, number, pct_change

_OPS = {"<=": operator.le, ">=": operator.ge, "<": operator.lt, ">": operator.gt,
        "==": operator.eq, "!=": operator.ne}
FAILING = ("fail", "not_measured")


@dataclass
class Outcome:
    kind: str  # "limit" | "regression"
    scope: str
    metric: str
    expected: str  # "<= 900" or "worse by <= 5 %"
    actual: float | None
    status: str  # pass | fail | not_measured | skipped
    detail: str = ""
    baseline: float | None = None
    change_pct: float | None = None
    line: int | None = None
    # over repeated runs (report/repeat.py): {"min", "median", "max", "runs"} of the run and of the baseline
    spread: dict | None = None
    baseline_spread: dict | None = None

    @property
    def failed(self) -> bool:
        return self.status == "fail"


@dataclass
class CheckResult:
    outcomes: list[Outcome] = field(default_factory=list)
    allow_unmeasured: bool = False
    has_baseline: bool = False
    warnings: list[str] = field(default_factory=list)
    runs: int = 1  # runs whose median was checked (report/repeat.py)
    baseline_runs: int = 0  # baseline runs whose median was compared (0: one baseline, or none)

    @property
    def repeated(self) -> bool:
        """Checked on the median of several runs or baselines (the JSON then says how many, with spreads)."""
        return self.runs > 1 or self.baseline_runs > 1

    @property
    def checked(self) -> int:
        """Limits actually evaluated (every status but ``skipped``)."""
        return sum(o.status != "skipped" for o in self.outcomes)

    @property
    def passed(self) -> bool:
        return not any(o.status in FAILING for o in self.outcomes)

    def count(self, status: str) -> int:
        return sum(o.status == status for o in self.outcomes)

    def as_dict(self) -> dict:
        """JSON-ready form (``--json``, CI artefacts); ``runs``, ``baseline_runs`` and each outcome's
        ``spread``/``baseline_spread`` only for a check over repeated runs."""
        repeated = {"runs": self.runs, "baseline_runs": self.baseline_runs} if self.repeated else {}
        return {
            "passed": self.passed,
            **repeated,
            "allow_unmeasured": self.allow_unmeasured,
            "has_baseline": self.has_baseline,
            "checked": self.checked,
            "warnings": list(self.warnings),
            "counts": {s: self.count(s) for s in ("pass", "fail", "not_measured", "skipped")},
            "outcomes": [_json_safe(_outcome_dict(o, self.repeated)) for o in self.outcomes],
        }


def scope_metrics(summary: dict, scope: str) -> dict | None:
    """The metric dict of ``scope`` ("all" or a phase), or None when the trace lacks it."""
    if scope == "all":
        return summary.get("all")
    return (summary.get("phases") or {}).get(scope)


def evaluate_budget(budget: Budget, summary: dict, baseline: dict | None = None,
                    allow_unmeasured: bool = False) -> CheckResult:
    """Check every limit of ``budget`` against ``summary`` (and ``baseline``).

    Args:
        budget: parsed budget file.
        summary: ``Analysis.summary`` of the run under test.
        baseline: ``Analysis.summary`` of the baseline run, or None.
        allow_unmeasured: treat unmeasured metrics as skipped rather than failed
            (also set by ``allow_unmeasured = true`` in the budget file).
    """
    allow = allow_unmeasured or budget.allow_unmeasured
    result = CheckResult(allow_unmeasured=allow, has_baseline=baseline is not None)
    result.outcomes.extend(_check_limit(limit, summary, allow) for limit in budget.limits)
    if budget.regression:
        result.outcomes.extend(_check_regressions(budget.regression, summary, baseline, allow))
    result.warnings = _warnings(budget, result, summary, baseline)
    return result


# Run identity compared between a run and its baseline: manifest key or meta key -> label.
IDENTITY = (("manifest", "model", "model"), ("meta", "gpu", "GPU"), ("meta", "source_format", "trace format"))


def _warnings(budget: Budget, result: CheckResult, summary: dict, baseline: dict | None) -> list[str]:
    out = []
    if budget.empty:
        out.append("the budget has no limits: it checks nothing")
    elif result.checked == 0:
        out.append("every limit was skipped: the budget checked nothing")
    if baseline is not None:
        out.extend(f"the baseline is another {label}: {theirs} vs {ours} (compared anyway)"
                   for label, ours, theirs in identity_differences(summary, baseline))
    return out


def identity_differences(summary: dict, baseline: dict) -> list[tuple[str, str, str]]:
    """(label, run value, baseline value) for each identity both runs record and that differs."""
    out = []
    for where, key, label in IDENTITY:
        ours, theirs = _identity(summary, where, key), _identity(baseline, where, key)
        if ours is not None and theirs is not None and ours != theirs:
            out.append((label, ours, theirs))
    return out


def _identity(summary: dict, where: str, key: str) -> str | None:
    meta = summary.get("meta") or {}
    source = (meta.get("manifest") or {}) if where == "manifest" else meta
    value = source.get(key) if isinstance(source, dict) else None
    return str(value) if value not in (None, "") else None


def _check_limit(limit: Limit, summary: dict, allow: bool) -> Outcome:
    metrics = scope_metrics(summary, limit.scope)
    out = Outcome("limit", limit.scope, limit.metric, limit.text, None, "pass", line=limit.line)
    if metrics is None:
        return _unmeasured(out, allow, f"no {limit.scope} phase in trace")
    actual = number(metrics.get(limit.metric))
    out.actual = actual
    if actual is None:
        return _unmeasured(out, allow, "metric is null in the summary")
    if not _OPS[limit.op](actual, limit.threshold):
        out.status = "fail"
        out.detail = _excess(limit, actual)
    return out


def _excess(limit: Limit, actual: float) -> str:
    """How far ``actual`` is on the wrong side of the limit, in units and percent."""
    gap = abs(actual - limit.threshold)
    word = {"<=": "over", "<": "over", ">=": "under", ">": "under"}.get(limit.op, "off")
    if limit.op in ("<", ">") and gap == 0:
        return "equal to the limit"
    if limit.op == "!=":
        return "equal to the excluded value"
    rel = f" ({gap / abs(limit.threshold) * 100:.1f} %)" if limit.threshold else ""
    return f"{word} by {gap:.4g}{rel}"


def _unmeasured(out: Outcome, allow: bool, why: str) -> Outcome:
    out.status = "skipped" if allow else "not_measured"
    out.detail = why + (" (allowed)" if allow else "")
    return out


def _check_regressions(limits: list[RegressionLimit], summary: dict, baseline: dict | None,
                       allow: bool) -> list[Outcome]:
    if baseline is None:
        return [Outcome("regression", lim.scope or "*", lim.metric, f"worse by <= {lim.max_pct:g} % vs baseline",
                        None, "skipped", "no --baseline given", line=lim.line) for lim in limits]
    out = []
    for scope in _regression_scopes(limits, summary, baseline):
        for metric, (max_pct, explicit, line) in _resolve_limits(limits, scope).items():
            out.append(_check_regression(scope, metric, max_pct, explicit, line, summary, baseline, allow))
    return out


def _regression_scopes(limits: list[RegressionLimit], summary: dict, baseline: dict) -> list[str]:
    """``all``, every phase present in both runs, and any phase named explicitly
    (the ``between`` pseudo-phase, time outside every step, is only in ``all``)."""
    shared = set((summary.get("phases") or {})) & set((baseline.get("phases") or {})) & set(PHASES)
    named = {lim.scope for lim in limits if lim.scope}
    return ["all"] + sorted((shared | named) - {"all"})


def _resolve_limits(limits: list[RegressionLimit], scope: str) -> dict[str, tuple[float, bool, int | None]]:
    """metric -> (max_pct, explicitly named?, line) for one scope; a phase's own
    table overrides the global table, a named metric overrides ``max_pct``."""
    resolved: dict[str, tuple[float, bool, int | None]] = {}
    for layer in (None, scope):
        for lim in (x for x in limits if x.scope == layer and x.metric == "max_pct"):
            for metric in ORCHESTRATION_METRICS:
                resolved[metric] = (lim.max_pct, False, lim.line)
        for lim in (x for x in limits if x.scope == layer and x.metric != "max_pct"):
            resolved[lim.metric] = (lim.max_pct, True, lim.line)
    return resolved


def _check_regression(scope: str, metric: str, max_pct: float, explicit: bool, line: int | None,
                      summary: dict, baseline: dict, allow: bool) -> Outcome:
    direction = WORSE_DIRECTION[metric]
    word = "higher" if direction > 0 else "lower"
    out = Outcome("regression", scope, metric, f"{word} by <= {max_pct:g} % vs baseline", None, "pass",
                  line=line)
    new_m, base_m = scope_metrics(summary, scope), scope_metrics(baseline, scope)
    out.actual = number(new_m.get(metric)) if new_m else None
    out.baseline = number(base_m.get(metric)) if base_m else None
    if out.actual is None or out.baseline is None:
        if not explicit and out.actual is None and out.baseline is None:
            out.status, out.detail = "skipped", "not measured in either run"
            return out
        side = "run" if out.actual is None else "baseline"
        return _unmeasured(out, allow, f"not measured in the {side}")
    out.change_pct = pct_change(out.baseline, out.actual)
    worse_pct = direction * out.change_pct
    if worse_pct > max_pct:
        out.status = "fail"
        out.detail = f"{word} by {_fmt_pct(abs(out.change_pct))} (limit {max_pct:g} %)"
    return out


def _fmt_pct(value: float) -> str:
    return "∞ %" if math.isinf(value) else f"{value:.1f} %"


def _outcome_dict(o: Outcome, repeated: bool) -> dict:
    d = asdict(o)
    if not repeated:
        del d["spread"], d["baseline_spread"]
    return d


def _json_safe(d: dict) -> dict:
    """inf is not JSON: write it as the string "inf"."""
    return {k: (("inf" if v > 0 else "-inf") if isinstance(v, float) and math.isinf(v) else v)
            for k, v in d.items()}
