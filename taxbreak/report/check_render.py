"""Text, JUnit XML and Markdown forms of a budget :class:`CheckResult`."""
from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

from .check import CheckResult, Outcome
from .metrics import fmt_value

_LABEL = {"pass": "ok", "fail": "FAIL", "not_measured": "NOT MEASURED", "skipped": "skipped"}
_ORDER = {"fail": 0, "not_measured": 1, "skipped": 2, "pass": 3}


def _sorted(result: CheckResult) -> list[Outcome]:
    return sorted(result.outcomes, key=lambda o: _ORDER[o.status])


def _actual(o: Outcome) -> str:
    if o.kind == "regression" and (o.baseline is not None or o.actual is not None):
        return f"{fmt_value(o.baseline, o.metric)} -> {fmt_value(o.actual, o.metric)}"
    return fmt_value(o.actual, o.metric)


def headline(result: CheckResult) -> str:
    """One line: PASSED/FAILED with the counts per status."""
    verdict = "PASSED" if result.passed else "FAILED"
    counts = ", ".join(f"{result.count(s)} {s.replace('_', ' ')}"
                       for s in ("pass", "fail", "not_measured", "skipped"))
    return f"budget {verdict}: {len(result.outcomes)} limits ({counts})"


QUIET_DETAIL = "not measured in either run"


def render_check_text(result: CheckResult) -> str:
    """Aligned plain-text table, failures first, then the headline. ``max_pct``
    defaults skipped because neither run measured them are folded into one line."""
    quiet = [o for o in result.outcomes if o.status == "skipped" and o.detail == QUIET_DETAIL]
    rows = [(_LABEL[o.status], f"{o.scope}.{o.metric}", o.expected, _actual(o), o.detail)
            for o in _sorted(result) if not (o.status == "skipped" and o.detail == QUIET_DETAIL)]
    header = ("status", "limit", "expected", "actual", "detail")
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(4)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r[:4], widths)) + "  " + r[4]
             for r in [header] + rows]
    lines = [line.rstrip() for line in lines]
    if quiet:
        names = sorted({o.metric for o in quiet})
        lines.append(f"skipped  {len(quiet)} max_pct limits {QUIET_DETAIL}: {', '.join(names)}")
    return "\n".join(lines + [""] + warning_lines(result) + [headline(result)]) + "\n"


def warning_lines(result: CheckResult) -> list[str]:
    """``warning: ...`` per warning of the check (empty budget, baseline of another model)."""
    return [f"warning: {w}" for w in result.warnings]


def render_junit(result: CheckResult, suite_name: str = "taxbreak.budget") -> str:
    """JUnit XML: one testcase per limit; failures and unmeasured limits fail,
    skipped limits are ``<skipped>``."""
    failures = sum(o.status == "fail" for o in result.outcomes)
    errors = sum(o.status == "not_measured" for o in result.outcomes)
    skipped = sum(o.status == "skipped" for o in result.outcomes)
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           f'<testsuites name={quoteattr(suite_name)} tests="{len(result.outcomes)}" '
           f'failures="{failures}" errors="{errors}" skipped="{skipped}">',
           f'  <testsuite name={quoteattr(suite_name)} tests="{len(result.outcomes)}" '
           f'failures="{failures}" errors="{errors}" skipped="{skipped}">']
    for o in result.outcomes:
        out.extend(_junit_case(o))
    out += ["  </testsuite>", "</testsuites>"]
    return "\n".join(out) + "\n"


def _junit_case(o: Outcome) -> list[str]:
    name = quoteattr(f"{o.scope}.{o.metric} {o.expected}")
    classname = quoteattr(f"taxbreak.{o.kind}.{o.scope}")
    message = quoteattr(f"actual {_actual(o)}: {o.detail}".strip(": "))
    if o.status == "pass":
        return [f"    <testcase classname={classname} name={name}/>"]
    tag = {"fail": "failure", "not_measured": "error", "skipped": "skipped"}[o.status]
    body = escape(f"{o.scope}.{o.metric}: expected {o.expected}, actual {_actual(o)}; {o.detail}")
    return [f"    <testcase classname={classname} name={name}>",
            f"      <{tag} message={message} type={quoteattr(o.status)}>{body}</{tag}>",
            "    </testcase>"]


def render_markdown(result: CheckResult, title: str = "taxbreak budget") -> str:
    """A Markdown summary for a CI step summary (``$GITHUB_STEP_SUMMARY``)."""
    icon = {"pass": "✅", "fail": "❌", "not_measured": "⚠️ not measured", "skipped": "➖ skipped"}
    lines = [f"### {title}: {'passed' if result.passed else 'FAILED'}", "", headline(result), "",
             *[f"> {line}" for line in warning_lines(result)], *([""] if result.warnings else []),
             "| status | limit | expected | actual | detail |", "|---|---|---|---|---|"]
    for o in _sorted(result):
        cells = [icon[o.status], f"`{o.scope}.{o.metric}`", o.expected, _actual(o), o.detail]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"
