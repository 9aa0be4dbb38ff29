"""Text, JUnit XML and Markdown forms of a budget :class:`CheckResult`."""
from __future__ import annotations

import xml.etree.ElementTree as ET

from ..trace.text import safe_text
from .check import CheckResult, Outcome
from .metrics import fmt_value
from .sanitize import markdown_text, xml_text

_LABEL = {"pass": "ok", "fail": "FAIL", "not_measured": "NOT MEASURED", "skipped": "skipped"}
_ORDER = {"fail": 0, "not_measured": 1, "skipped": 2, "pass": 3}


def _sorted(result: CheckResult) -> list[Outcome]:
    return sorted(result.outcomes, key=lambda o: _ORDER[o.status])


def _actual(o: Outcome) -> str:
    if o.kind == "regression" and (o.baseline is not None or o.actual is not None):
        return f"{fmt_value(o.baseline, o.metric)} -> {fmt_value(o.actual, o.metric)}"
    return fmt_value(o.actual, o.metric)


def headline(result: CheckResult) -> str:
    """One line: PASSED/FAILED with the counts per status (and, over repeated runs, how many)."""
    verdict = "PASSED" if result.passed else "FAILED"
    counts = ", ".join(f"{result.count(s)} {s.replace('_', ' ')}"
                       for s in ("pass", "fail", "not_measured", "skipped"))
    return f"budget {verdict}{_repeat_words(result)}: {len(result.outcomes)} limits ({counts})"


def _repeat_words(result: CheckResult) -> str:
    if not result.repeated:
        return ""
    base = f", baseline the median of {result.baseline_runs}" if result.baseline_runs > 1 else ""
    return f" on the median of {result.runs} run{'s' if result.runs != 1 else ''}{base}"


def _spread_text(o: Outcome) -> str:
    """``runs 52.2..53.1`` (and the baseline's) for a check over repeated runs."""
    parts = [f"{label} {fmt_value(s['min'], o.metric)}..{fmt_value(s['max'], o.metric)}"
             for label, s in (("runs", o.spread), ("baseline runs", o.baseline_spread)) if s and s["runs"] > 1]
    return "; ".join(parts)


def _detail(o: Outcome) -> str:
    spread = _spread_text(o)
    return f"{o.detail} [{spread}]".strip() if spread else o.detail


QUIET_DETAIL = "not measured in either run"


def render_check_text(result: CheckResult) -> str:
    """Aligned plain-text table, failures first, then the headline. ``max_pct``
    defaults skipped because neither run measured them are folded into one line."""
    quiet = [o for o in result.outcomes if o.status == "skipped" and o.detail == QUIET_DETAIL]
    rows = [tuple(map(safe_text, (_LABEL[o.status], f"{o.scope}.{o.metric}", o.expected, _actual(o), _detail(o))))
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
    """``warning: ...`` per warning of the check (empty budget, baseline of another model),
    one terminal line each: a GPU or model name's controls and newlines are shown as escapes."""
    return [f"warning: {safe_text(w)}" for w in result.warnings]


def render_junit(result: CheckResult, suite_name: str = "taxbreak.budget", time_s: float | None = None) -> str:
    """JUnit XML: one testcase per limit; failures and unmeasured limits fail,
    skipped limits are ``<skipped>``.

    Built with ``xml.etree.ElementTree``, so any limit name, detail or suite name
    (quotes, ``]]>``, control characters) gives a well-formed file. ``time`` is in
    seconds: the suite's is ``time_s`` (what reading the run and evaluating the
    budget took, measured by the caller; 0 when not given), each case's is 0, since
    a limit is a comparison against an already computed summary.
    """
    counts = {"tests": str(len(result.outcomes)),
              "failures": str(sum(o.status == "fail" for o in result.outcomes)),
              "errors": str(sum(o.status == "not_measured" for o in result.outcomes)),
              "skipped": str(sum(o.status == "skipped" for o in result.outcomes)),
              "time": f"{time_s or 0.0:.3f}"}
    root = ET.Element("testsuites", name=xml_text(suite_name), **counts)
    suite = ET.SubElement(root, "testsuite", name=xml_text(suite_name), **counts)
    for o in result.outcomes:
        _junit_case(suite, o)
    ET.indent(root, space="  ")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _junit_case(suite: ET.Element, o: Outcome) -> None:
    case = ET.SubElement(suite, "testcase", classname=xml_text(f"taxbreak.{o.kind}.{o.scope}"),
                         name=xml_text(f"{o.scope}.{o.metric} {o.expected}"), time="0.000")
    if o.status == "pass":
        return
    tag = {"fail": "failure", "not_measured": "error", "skipped": "skipped"}[o.status]
    child = ET.SubElement(case, tag, message=xml_text(f"actual {_actual(o)}: {_detail(o)}".strip(": ")),
                          type=o.status)
    child.text = xml_text(f"{o.scope}.{o.metric}: expected {o.expected}, actual {_actual(o)}; {_detail(o)}")


def render_markdown(result: CheckResult, title: str = "taxbreak budget") -> str:
    """A Markdown summary for a CI step summary (``$GITHUB_STEP_SUMMARY``)."""
    icon = {"pass": "✅", "fail": "❌", "not_measured": "⚠️ not measured", "skipped": "➖ skipped"}
    lines = [f"### {markdown_text(title)}: {'passed' if result.passed else 'FAILED'}", "", headline(result), "",
             *[f"> warning: {markdown_text(w)}" for w in result.warnings], *([""] if result.warnings else []),
             "| status | limit | expected | actual | detail |", "|---|---|---|---|---|"]
    for o in _sorted(result):
        cells = [markdown_text(c) for c in (f"{o.scope}.{o.metric}", o.expected, _actual(o), _detail(o))]
        lines.append("| " + " | ".join([icon[o.status], *cells]) + " |")
    return "\n".join(lines) + "\n"
