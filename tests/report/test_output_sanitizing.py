"""One sanitizing rule per output kind (taxbreak/report/sanitize.py): a name from a trace reaches the
terminal, Markdown, CSV, HTML and JUnit XML as text, never as a command, a line, a link or a formula."""
from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from taxbreak.cli.main import main
from taxbreak.report.sanitize import csv_cell, html_text, markdown_text

from .traces import BASE_NS, FLOOR_US, LIBRARY, NATIVE_1, planted_events, write_planted

FORGED = "H100\x1b]52;c;ZXZpbA==\x07\x1b[2J\n### taxbreak budget: passed\n[docs](https://evil.example) <img src=x>"


def _planted(path: Path, gpu: str = "NVIDIA H100 80GB HBM3", names=(NATIVE_1, "k2", LIBRARY)) -> Path:
    doc = {"schemaVersion": 1, "baseTimeNanoseconds": BASE_NS,
           "deviceProperties": [{"id": 0, "name": gpu, "totalGlobalMem": 85000000000}],
           "traceEvents": planted_events(0.0, names)}
    path.write_bytes(gzip.compress(json.dumps(doc).encode(), mtime=0))
    return path


@pytest.fixture
def forged_gpu_check(tmp_path):
    run = _planted(tmp_path / "run.json.gz", gpu=FORGED)
    base = write_planted(tmp_path / "base.json.gz")
    budget = tmp_path / "b.toml"
    budget.write_text('[all]\nkernels = "== 3"\n')
    md = tmp_path / "summary.md"
    result = CliRunner().invoke(main, ["check", str(run), "--budget", str(budget), "--baseline", str(base),
                                       "--markdown", str(md), "--floor-us", str(FLOOR_US)])
    assert result.exit_code == 0, result.output
    return result, md.read_text()


def test_the_other_gpu_warning_is_one_terminal_line_without_escape_sequences(forged_gpu_check):
    result, _ = forged_gpu_check
    assert "\x1b" not in result.output and "\x07" not in result.output
    warnings = [line for line in result.stdout.splitlines() if line.startswith("warning: the baseline is another GPU")]
    assert len(warnings) == 1 and "\\x1b]52;c;" in warnings[0] and "\\x0a### taxbreak budget" in warnings[0]
    assert not any(line.startswith("### ") for line in result.stdout.splitlines())


def test_the_other_gpu_warning_forges_no_markdown(forged_gpu_check):
    _, md = forged_gpu_check
    lines = md.splitlines()
    assert [line for line in lines if line.startswith("#")] == ["### taxbreak budget: passed"]  # the real one
    assert not re.search(r"(?<!\\)\]\(", md) and not re.search(r"(?<!\\)<img", md) and "\x1b" not in md
    warning = next(line for line in lines if line.startswith("> warning:"))
    assert "\\[docs\\](https\\://evil.example) \\<img src=x>" in warning


def test_markdown_rule_escapes_every_construct_and_keeps_one_line():
    text = markdown_text("a|b `c` *d* _e_ ![i](u) <b>x</b> &amp; ~~s~~ www.x.org user@x.org\n# h")
    assert "\n" not in text and not re.search(r"(?<!\\)[|`*_!<&~@#\[\]]", text.replace("\\\\", ""))
    assert "www\\.x" in text


@pytest.mark.parametrize("name", ["=HYPERLINK(\"http://evil\",\"x\")", "+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)",
                                  "\tstart", "\rstart"])
def test_csv_cells_that_a_spreadsheet_would_run_get_a_quote(name, tmp_path):
    trace = _planted(tmp_path / "t.json.gz", names=(NATIVE_1, name, LIBRARY))
    result = CliRunner().invoke(main, ["analyze", str(trace), "--format", "csv", "--table", "kernels",
                                       "--floor-us", str(FLOOR_US), "--no-cache"])
    assert result.exit_code == 0, result.output
    assert ("'" + name).replace('"', '""') in result.stdout
    assert csv_cell(name) == "'" + name and csv_cell("aten::mm") == "aten::mm" and csv_cell(-2.0) == -2.0


def test_a_right_to_left_override_is_shown_not_applied_in_html(tmp_path):
    trace = _planted(tmp_path / "t.json.gz", names=(NATIVE_1, "innocent\u202egnp.exe", LIBRARY))
    out = tmp_path / "r.html"
    result = CliRunner().invoke(main, ["report", str(trace), "-o", str(out), "--floor-us", str(FLOOR_US)])
    assert result.exit_code == 0, result.output
    page = out.read_text(encoding="utf-8")
    assert "\u202e" not in page and "innocent\\u202egnp.exe" in page
    assert html_text("a\u2066b<\n") == "a\\u2066b&lt;\n"
