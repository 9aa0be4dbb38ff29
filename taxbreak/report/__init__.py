"""Reports over an ``Analysis``: terminal tables, HTML, annotated traces, diffs and budgets.

Library entry points (each wrapped by a CLI command):

* ``render_html(analysis, manifest=None, title=None) -> str``        (``taxbreak report``)
* ``write_annotated(trace_path, analysis, output) -> AnnotateStats``  (``taxbreak annotate``)
* ``diff_analyses(base, new) -> dict`` / ``render_diff_text(diff)``    (``taxbreak diff``)
* ``load_budget(path)`` / ``evaluate_budget(budget, summary, baseline=None)``  (``taxbreak check``)
* ``evaluate_repeated(budget, summaries, baselines=None)`` / ``median_summary(summaries)``  (``check`` of several runs)
* ``load_run(path, floor_us=None, step_pattern=None, tokens=None) -> Run``  (RUN_DIR|TRACE arguments)
"""
from __future__ import annotations

from ..trace.lazy import lazy_exports

# names are imported on first use: ``taxbreak analyze`` needs only report.terminal, not
# the HTML, annotate, diff and budget modules (~40 ms of its start-up)
_EXPORTS = {
    "AnnotateStats": "annotate", "annotated_bytes": "annotate", "write_annotated": "annotate",
    "Budget": "budget", "load_budget": "budget", "parse_budget": "budget",
    "CheckResult": "check", "Outcome": "check", "evaluate_budget": "check",
    "Spread": "repeat", "evaluate_repeated": "repeat", "median_summary": "repeat",
    "render_check_text": "check_render", "render_junit": "check_render", "render_markdown": "check_render",
    "diff_analyses": "diff", "render_diff_text": "diff_render", "render_html": "html",
    "Run": "run", "load_run": "run",
}

__all__ = sorted(_EXPORTS)


__getattr__ = lazy_exports(__name__, _EXPORTS)
