"""No value that was not measured is printed as 0: terminal, JSON, HTML and diff of the real traces
where HDBI or ΔCT cannot be measured (non-PyTorch Nsight exports, Triton-only, CPU-only)."""
from __future__ import annotations

import io
import json
import re

import pytest
from rich.console import Console

from conftest import shared_trace_paths
from taxbreak.decompose import analyze
from taxbreak.readers import load_trace
from taxbreak.report.diff import diff_summaries
from taxbreak.report.html import render_html
from taxbreak.report.terminal import PHASE_COLUMNS, render_analysis

NAMES = ("saxpy-mpi-cuda_nsys_perlmutter0.sqlite", "triton_example.json.gz", "mock.sqlite",
         "backward_thread.json", "rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz")
CASES = [pytest.param(p, id=p.name) for p in shared_trace_paths() if p.name in NAMES]


@pytest.fixture(scope="module", params=CASES)
def analysed(request):
    return analyze(load_trace(request.param))


def _terminal(a) -> str:
    out = io.StringIO()
    render_analysis(a, Console(file=out, width=400, color_system=None))
    return out.getvalue()


def test_hdbi_is_null_with_a_reason(analysed):
    s = analysed.summary["all"]
    assert s["hdbi"] is None and s["hdbi_reason"]
    assert json.loads(analysed.to_json())["all"]["hdbi"] is None


def test_terminal_prints_na_with_its_reason_for_every_null_phase_cell(analysed):
    text = _terminal(analysed)
    s = analysed.summary["all"]
    assert re.search(r"^HDBI +n/a \(" + re.escape(s["hdbi_reason"]) + r"\)", text, re.M), text[:2000]
    row = next((line for line in text.splitlines() if line.startswith("│ all ")), None)
    if s.get("device_active_us") is not None and row is not None:
        cells = [c.strip() for c in row.strip("│").split("│")][1:]
        for (key, _, _), cell in zip(PHASE_COLUMNS, cells):
            if s.get(key) is None:
                assert cell == "n/a", (key, cell)
    assert "exposed orchestration" not in text and "HDBI 0.000" not in text


def test_html_marks_null_cards_as_not_measured(analysed):
    page = render_html(analysed)
    card = re.search(r"HDBI<b([^>]*)>([^<]*)</b>", page)
    assert card is not None and "missing" in card.group(1) and card.group(2) == "not measured"


def test_diff_of_unmeasured_values_says_so(analysed):
    change = diff_summaries(analysed.summary, analysed.summary)["all"]
    for metric in ("hdbi", "library_us"):
        if analysed.summary["all"].get(metric) is None:
            assert change[metric] == {"base": None, "new": None, "delta": None, "delta_pct": None}
