"""Reports over an ``Analysis``: terminal tables, HTML, annotated traces, diffs and budgets.

Library entry points (each wrapped by a CLI command):

* ``render_html(analysis, manifest=None, title=None) -> str``        (``taxbreak report``)
* ``write_annotated(trace_path, analysis, output) -> AnnotateStats``  (``taxbreak annotate``)
* ``diff_analyses(base, new) -> dict`` / ``render_diff_text(diff)``    (``taxbreak diff``)
* ``load_budget(path)`` / ``evaluate_budget(budget, summary, baseline=None)``  (``taxbreak check``)
* ``load_run(path, floor_us=None, step_pattern=None, tokens=None) -> Run``  (RUN_DIR|TRACE arguments)
"""
from __future__ import annotations

from .annotate import AnnotateStats, annotate_document, write_annotated
from .budget import Budget, load_budget, parse_budget
from .check import CheckResult, Outcome, evaluate_budget
from .check_render import render_check_text, render_junit, render_markdown
from .diff import diff_analyses
from .diff_render import render_diff_text
from .html import render_html
from .run import Run, load_run

__all__ = [
    "AnnotateStats", "Budget", "CheckResult", "Outcome", "Run", "annotate_document", "diff_analyses",
    "evaluate_budget", "load_budget", "load_run", "parse_budget", "render_check_text", "render_diff_text",
    "render_html", "render_junit", "render_markdown", "write_annotated",
]
