"""Property tests: escaping holds for any name, limits agree with the operators,
and the budget examples in docs/ci.md parse."""
from __future__ import annotations

import operator
import re
from html.parser import HTMLParser
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from taxbreak.report.budget import parse_budget
from taxbreak.report.check import evaluate_budget
from taxbreak.report.html import SCRIPT, render_html

from .fake import make_analysis, phase_metrics

ALLOWED_TAGS = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "p", "dl", "dt", "dd", "div",
                "span", "i", "b", "table", "tr", "th", "td", "svg", "g", "rect", "text", "line", "polyline",
                "circle", "ul", "li", "br", "defs", "clippath",  # the timeline's clip (HTMLParser lowercases clipPath)
                "script"}  # the page's own script only: see the test


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags = set()

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)


@settings(max_examples=25, deadline=None)
@given(st.text(min_size=1, max_size=40), st.text(min_size=1, max_size=40))
def test_any_trace_name_renders_as_text(kernel, op):
    a = make_analysis(kernel_names=[kernel])
    a.ops["op_name"] = [op, op + "2"]
    html = render_html(a, title=kernel)
    parser = _Tags()
    parser.feed(html)
    assert parser.tags <= ALLOWED_TAGS
    assert html.count("<script") == 1 and f"<script>{SCRIPT}</script>" in html  # no name became a script


OPS = {"<=": operator.le, ">=": operator.ge, "<": operator.lt, ">": operator.gt, "==": operator.eq,
       "!=": operator.ne}


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(sorted(OPS)), st.integers(-1000, 1000), st.integers(-1000, 1000))
def test_limit_status_agrees_with_the_operator(op, threshold, value):
    summary = {"all": phase_metrics(orchestration_us=float(value)), "phases": {}}
    result = evaluate_budget(parse_budget(f'[all]\norchestration_us = "{op} {threshold}"\n'), summary)
    assert (result.outcomes[0].status == "pass") == OPS[op](value, threshold)
    assert result.passed == OPS[op](value, threshold)


def test_budget_examples_in_the_docs_parse():
    text = (Path(__file__).parents[2] / "docs" / "ci.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```toml\n(.*?)```", text, flags=re.S)
    assert len(blocks) >= 2
    for block in blocks:
        budget = parse_budget(block)
        assert budget.limits or budget.regression
