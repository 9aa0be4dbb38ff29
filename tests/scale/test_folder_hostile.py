"""Folders with a crashing trace, dangling links, loops and FIFOs; run folders and torch.profiler names."""
from __future__ import annotations

import os

import pytest
from click.testing import CliRunner
from scale_fakes import crash_on_name_analyze, write_fake_trace

from taxbreak.cli.main import main
from taxbreak.synth.bigtrace import write_big_kineto
from taxbreak.scale import analyze_many, find_traces
from taxbreak.scale.discover import discover
from taxbreak.trace.errors import TaxbreakError


def _good(folder, n):
    folder.mkdir(parents=True, exist_ok=True)
    for rank in range(n):
        write_fake_trace(folder / f"r{rank:02d}.json", rank, [{"name": "k", "phase": "decode", "step": 0,
                                                               "dur_us": 1.0}], orchestration_us=1.0)


@pytest.fixture
def crashing(tmp_path):
    folder = tmp_path / "job"
    _good(folder, 6)
    write_fake_trace(folder / "r03-crash.json", 3, [], orchestration_us=1.0)
    return folder


def test_skip_analyzes_every_good_trace_and_blames_only_the_crashing_one(crashing):
    result = analyze_many(find_traces(crashing), workers=2, on_error="skip", analyze_fn=crash_on_name_analyze)
    assert [f.path.rsplit("/", 1)[-1] for f in result.failed] == ["r03-crash.json"]
    assert result.failed[0].error["code"] == "scale.worker_failed"
    assert result.combined["traces"] == 6


def test_fail_names_the_crashing_file_not_a_good_one(crashing):
    with pytest.raises(TaxbreakError) as info:
        analyze_many(find_traces(crashing), workers=2, on_error="fail", analyze_fn=crash_on_name_analyze)
    assert info.value.code == "scale.worker_failed" and info.value.path.endswith("r03-crash.json")


def test_nothing_analyzed_exits_non_zero(tmp_path):
    folder = tmp_path / "bad"
    folder.mkdir()
    for name in ("a.json", "b.json"):
        (folder / name).write_text('{"traceEvents": [')
    result = CliRunner().invoke(main, ["analyze", str(folder), "--on-error", "skip", "--workers", "1"])
    assert result.exit_code == 1 and "error[scale.nothing_analyzed]" in result.output
    assert "Traceback" not in result.output


def test_dangling_links_loops_and_fifos_are_counted_never_opened(tmp_path):
    folder = tmp_path / "odd"
    folder.mkdir()
    for rank in range(2):
        write_big_kineto(folder / f"r{rank:02d}.json", 500, seed=rank, gzip=False, rank=rank, world_size=2)
    (folder / "gone.json").symlink_to(tmp_path / "absent.json")
    (folder / "loop.json").symlink_to(folder / "loop.json")
    os.mkfifo(folder / "pipe.json")  # opening it would block forever
    (folder / "again").symlink_to(folder)  # a folder loop
    found = discover(folder)
    assert [p.name for p in found.traces] == ["r00.json", "r01.json"]
    assert {k: len(v) for k, v in found.skipped.items()} == {
        "dangling_link": 1, "link_loop": 2, "not_a_regular_file": 1}
    result = CliRunner().invoke(main, ["analyze", str(folder), "--json", "--workers", "1"])
    assert result.exit_code == 0, result.output
    assert "scale.entry_skipped" in result.stdout and "×4" in result.stderr


def test_run_folders_are_searched_and_torch_profiler_names_found(tmp_path):
    nightly = tmp_path / "nightly"
    for run in ("run-a", "run-b"):
        _good(nightly / run, 2)
    (nightly / "run-b" / "worker0.1712.pt.trace.json.gz").write_bytes(b"")
    names = [p.relative_to(nightly).as_posix() for p in find_traces(nightly)]
    assert names == ["run-a/r00.json", "run-a/r01.json", "run-b/r00.json", "run-b/r01.json",
                     "run-b/worker0.1712.pt.trace.json.gz"]
    from scale_fakes import fake_analyze

    result = analyze_many(find_traces(nightly)[:4], workers=1, analyze_fn=fake_analyze)
    assert sorted(result.runs) == ["run-a", "run-b"] and result.runs["run-a"]["traces"] == 2


def test_quiet_folder_analysis_keeps_results_and_skipped_lines_but_no_status_line(tmp_path):
    folder = tmp_path / "job"
    folder.mkdir()
    for rank in range(2):
        write_big_kineto(folder / f"r{rank}.json", n_events=2000, seed=rank)
    (folder / "bad.json").write_text('{"traceEvents": [')
    args = ["analyze", str(folder), "--on-error", "skip", "--workers", "1", "--no-cache"]
    loud = CliRunner().invoke(main, args)
    quiet = CliRunner().invoke(main, [*args, "-q"])
    assert loud.exit_code == quiet.exit_code == 0
    assert "Analyzed 2 of 3 traces" in loud.stderr and "Analyzed" not in quiet.stderr
    assert "skipped " in quiet.stderr and "bad.json" in quiet.stderr  # a result, kept under -q
    assert quiet.stdout == loud.stdout
