"""Progress reaches a hook the caller passes (the library never prints), the CLI draws nothing
off a terminal or under -q, whatif takes a trace, info names devices without a name, and
counts agree with their nouns."""
from __future__ import annotations

import io

import pytest

from click.testing import CliRunner
from rich.console import Console

from taxbreak.cli.info import render_info
from taxbreak.cli.main import main
from taxbreak.cli.status import count_text
from taxbreak.decompose import analyze
from taxbreak.decompose.analysis import ANALYZE_STAGES
from taxbreak.report.run import load_run
from taxbreak.trace.progress import TABLES_STAGE, ProgressEvent
from taxbreak.trace.words import plural

from .traces import write_planted


@pytest.mark.parametrize("name", ["t.json.gz", "t.json"])
def test_analyze_reports_every_stage_in_order_then_done(tmp_path, capsys, monkeypatch, name):
    monkeypatch.setenv("TAXBREAK_NO_CACHE", "1")  # the reader runs, so its bytes are reported
    trace = write_planted(tmp_path / name)
    events: list[ProgressEvent] = []
    analyze(trace, floor_us=4.5, progress=events.append)
    stages = [e for e in events if e.unit == "stages"]
    assert [e.stage for e in stages] == [*ANALYZE_STAGES, "done"]
    assert [e.done for e in stages] == list(range(len(ANALYZE_STAGES) + 1))
    assert {e.total for e in stages} == {len(ANALYZE_STAGES)}
    read = [e for e in events if e.unit == "bytes" and e.stage == "reading trace"]
    size = trace.stat().st_size
    assert read and all(e.total == size for e in read)
    assert [e.done for e in read] == sorted(e.done for e in read) and read[-1].done == size
    # the bytes come between "reading trace" and the next stage, then the tables are built (bar full)
    building = [e for e in events if e.stage == TABLES_STAGE]
    assert building == [ProgressEvent(TABLES_STAGE, size, size, unit="bytes")]
    assert events.index(read[0]) > events.index(stages[0])
    assert events.index(read[-1]) < events.index(building[0]) < events.index(stages[1])
    assert capsys.readouterr() == ("", "")  # the library printed nothing


def test_stage_bar_counts_stages_and_megabytes():
    assert count_text(ProgressEvent("linking", 2, 5)) == "2/5"
    assert count_text(ProgressEvent("reading trace", 45_000_000, 120_000_000, unit="bytes")) == "45/120 MB"
    assert count_text(ProgressEvent("writing report.html", 0, None)) == ""


def test_load_run_passes_the_hook_on(tmp_path):
    events: list[ProgressEvent] = []
    load_run(write_planted(tmp_path / "t.json.gz"), floor_us=4.5, progress=events.append)
    assert events[0].stage == ANALYZE_STAGES[0] and events[-1].stage == "done"


def test_cli_draws_no_progress_off_a_terminal(tmp_path):
    trace = str(write_planted(tmp_path / "t.json.gz"))
    runner = CliRunner()
    for args in (["analyze", trace, "--floor-us", "4.5"], ["report", trace, "-o", str(tmp_path / "r.html")],
                 ["info", trace], ["whatif", trace]):
        result = runner.invoke(main, args)
        assert result.exit_code == 0, (args, result.output)
        assert "reading trace" not in result.stderr and "linking launches" not in result.stderr, args


def test_whatif_takes_a_trace_file(tmp_path):
    trace = write_planted(tmp_path / "t.json.gz")
    result = CliRunner().invoke(main, ["whatif", str(trace), "--json", "-q"])
    assert result.exit_code == 0, result.output
    assert '"kind": "run"' in result.output and '"decode"' in result.output


def test_info_names_a_device_without_a_name():
    summary = {"path": "t.json", "format": "kineto", "format_version": "1", "devices": [{"id": 0, "name": None}],
               "span": None, "rank": None, "time_base": "relative", "tables": {}, "kinds": {}, "event_counts": {},
               "input_events": 0, "diagnostics": {}}
    out = io.StringIO()
    render_info(summary, Console(file=out, width=120, color_system=None))
    assert "devices: 0: name not recorded" in out.getvalue() and "None" not in out.getvalue()


def test_plural_agrees_with_the_count():
    assert [plural(n, "trace") for n in (0, 1, 2, 1234)] == ["0 traces", "1 trace", "2 traces", "1,234 traces"]
