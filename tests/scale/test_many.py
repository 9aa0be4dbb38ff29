"""analyze_many over folders of (fake) traces: ranks, errors, workers, combined summary."""
from __future__ import annotations

import pytest
from scale_fakes import crash_analyze, fake_analyze, write_fake_trace

from taxbreak.scale import analyze_many, find_traces, is_trace_folder
from taxbreak.trace.errors import TaxbreakError, TraceFormatError


def _k(step, phase, dur_us, name="gemm"):
    return {"name": name, "phase": phase, "step": step, "dur_us": dur_us}


@pytest.fixture
def folder(tmp_path):
    d = tmp_path / "job7"
    d.mkdir()
    write_fake_trace(d / "a.json", 1, [_k(0, "prefill", 30.0), _k(1, "decode", 10.0)], orchestration_us=20.0)
    write_fake_trace(d / "b.json", 0, [_k(0, "prefill", 10.0), _k(1, "decode", 10.0)], orchestration_us=40.0)
    return d


def test_per_rank_and_combined_results(folder):
    result = analyze_many(find_traces(folder), workers=1, analyze_fn=fake_analyze)
    per_rank = result.per_rank()
    assert per_rank["rank"].tolist() == [0, 1]
    assert per_rank["path"].str.endswith(("b.json", "a.json")).tolist() == [True, True]
    assert per_rank["rank_source"].tolist() == ["meta", "meta"]
    assert result.combined["all"]["device_active_us"] == 60.0
    assert result.combined["all"]["orchestration_us"] == 60.0
    assert result.combined["all"]["hdbi"] == pytest.approx(60.0 / 120.0)
    assert result.combined["phases"]["prefill"]["device_active_us"] == 40.0
    assert len(result.diagnostics) == 0


def test_combined_hdbi_differs_from_the_mean_of_ranks(tmp_path):
    write_fake_trace(tmp_path / "r0.json", 0, [_k(0, "decode", 300.0)], orchestration_us=100.0)
    write_fake_trace(tmp_path / "r1.json", 1, [_k(0, "decode", 100.0)], orchestration_us=100.0)
    result = analyze_many(find_traces(tmp_path), workers=1, analyze_fn=fake_analyze)
    assert result.combined["all"]["hdbi"] == pytest.approx(400.0 / 600.0)


def test_rank_falls_back_to_file_order_with_info_diagnostic(tmp_path):
    write_fake_trace(tmp_path / "x.json", None, [_k(0, "decode", 1.0)], 1.0)
    write_fake_trace(tmp_path / "y.json", None, [_k(0, "decode", 1.0)], 1.0)
    result = analyze_many(find_traces(tmp_path), workers=1, analyze_fn=fake_analyze, run_id="one-job")
    assert [f.rank for f in result.files] == [0, 1]
    assert [f.rank_source for f in result.files] == ["file_order", "file_order"]
    assert result.diagnostics.count("scale.rank_from_order") == 2
    assert result.diagnostics.items["scale.rank_from_order"].severity == "info"


def test_unrelated_traces_are_each_rank_0_of_their_own_run_and_not_added_up(tmp_path):
    write_fake_trace(tmp_path / "x.json", None, [_k(0, "decode", 1.0)], 1.0)
    write_fake_trace(tmp_path / "y.json", None, [_k(0, "decode", 3.0)], 1.0)
    result = analyze_many(find_traces(tmp_path), workers=1, analyze_fn=fake_analyze)
    assert [(f.run.rsplit(".", 1)[-1], f.rank, f.rank_source) for f in result.files] == [
        ("x", 0, "only_trace"), ("y", 0, "only_trace")]
    assert result.diagnostics.count("scale.rank_from_order") == 0
    assert result.combined is None and result.diagnostics.count("scale.runs_apart") == 2
    assert [r["all"]["device_active_us"] for r in result.runs.values()] == [1.0, 3.0]
    assert "taxbreak diff" in result.not_combined["all"]
    combined = analyze_many(find_traces(tmp_path), workers=1, analyze_fn=fake_analyze, combine_runs=True)
    assert combined.combined["all"]["device_active_us"] == 4.0 and combined.not_combined == {}


def test_a_run_whose_traces_disagree_is_not_added_up(tmp_path):
    for name in ("p.json", "q.json"):  # rank 4 of a world of 8, twice: not one job
        write_fake_trace(tmp_path / name, 4, [_k(0, "decode", 1.0)], 1.0)
    result = analyze_many(find_traces(tmp_path), workers=1, analyze_fn=fake_analyze)
    (run,) = result.runs
    assert result.runs[run] is None and result.combined is None
    assert result.not_combined[run] == "its traces disagree: rank 4 more than once"
    assert "not added up: its traces disagree (rank 4 more than once)" in result.not_combined["all"]


def test_duplicate_ranks_are_counted(tmp_path):
    for name in ("p.json", "q.json"):
        write_fake_trace(tmp_path / name, 4, [_k(0, "decode", 1.0)], 1.0)
    result = analyze_many(find_traces(tmp_path), workers=1, analyze_fn=fake_analyze)
    assert result.diagnostics.count("scale.duplicate_rank") == 1


def test_skip_reports_the_bad_file_and_its_code(folder):
    (folder / "c.json").write_text("{broken")
    result = analyze_many(find_traces(folder), workers=1, on_error="skip", analyze_fn=fake_analyze)
    assert [f.path.endswith("c.json") for f in result.failed] == [True]
    assert result.failed[0].error["code"] == "json.invalid"
    assert result.diagnostics.count("scale.file_skipped") == 1
    assert result.combined["traces"] == 2
    assert result.combined["all"]["device_active_us"] == 60.0


def test_fail_raises_the_files_typed_error_naming_it(folder):
    (folder / "c.json").write_text("{broken")
    with pytest.raises(TraceFormatError) as info:
        analyze_many(find_traces(folder), workers=1, on_error="fail", analyze_fn=fake_analyze)
    assert info.value.code == "json.invalid"
    assert info.value.path.endswith("c.json")


def test_unexpected_worker_exception_becomes_a_typed_error(folder):
    with pytest.raises(TaxbreakError) as info:
        analyze_many(find_traces(folder), workers=1, analyze_fn=crash_analyze)
    assert info.value.code == "scale.worker_failed"
    assert "RuntimeError: boom" in info.value.message


def test_bad_on_error_value_is_a_usage_error(folder):
    with pytest.raises(TaxbreakError) as info:
        analyze_many(find_traces(folder), on_error="ignore", analyze_fn=fake_analyze)
    assert info.value.code == "usage.invalid" and info.value.exit_code == 2


def test_process_pool_gives_the_same_result_as_one_worker(folder):
    (folder / "c.json").write_text("{broken")
    serial = analyze_many(find_traces(folder), workers=1, on_error="skip", analyze_fn=fake_analyze)
    pooled = analyze_many(find_traces(folder), workers=2, on_error="skip", analyze_fn=fake_analyze)
    assert pooled.workers == 2
    assert pooled.combined == serial.combined
    assert [(f.path, f.rank, f.error) for f in pooled.files] == [(f.path, f.rank, f.error) for f in serial.files]
    with pytest.raises(TraceFormatError):
        analyze_many(find_traces(folder), workers=2, on_error="fail", analyze_fn=fake_analyze)


def test_folder_detection(folder, tmp_path):
    assert is_trace_folder(folder)
    (folder / "manifest.json").write_text("{}")
    assert not is_trace_folder(folder)  # a run directory is analyzed as one run
    assert find_traces(folder)[-1].name == "b.json"  # the manifest is not a trace
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(TaxbreakError) as info:
        find_traces(empty)
    assert info.value.code == "run.no_traces"
    with pytest.raises(TaxbreakError) as info:
        find_traces(tmp_path / "absent")
    assert info.value.code == "input.not_found"


def test_a_killed_worker_is_reported_per_file_not_a_crash(folder):
    from scale_fakes import die_analyze

    result = analyze_many(find_traces(folder), workers=2, on_error="skip", analyze_fn=die_analyze)
    assert [f.error["code"] for f in result.files] == ["scale.worker_failed", "scale.worker_failed"]
    assert "worker process died" in result.files[0].error["message"]
    with pytest.raises(TaxbreakError) as info:
        analyze_many(find_traces(folder), workers=2, on_error="fail", analyze_fn=die_analyze)
    assert info.value.code == "scale.worker_failed" and info.value.path.endswith(".json")


def test_ranks_of_two_models_or_gpus_in_one_run_are_told_apart():
    from taxbreak.scale.runs import mixed_runs
    from taxbreak.scale.task import FileResult

    def result(run, rank, model, gpu):
        meta = {"gpu": gpu, "manifest": {"model": model} if model else None}
        return FileResult(path=f"{run}/{rank}", index=rank, rank=rank, run=run, world_size=2,
                          summary={"all": {}, "meta": meta})

    ok = [result("job", 0, "gpt2", "H100"), result("job", 1, "llama", "H100"),
          result("pair", 0, None, "A100"), result("pair", 1, None, "H100"),
          result("same", 0, "gpt2", "H100"), result("same", 1, "gpt2", None)]
    assert mixed_runs(ok) == {"job": "models gpt2 and llama", "pair": "GPUs A100 and H100"}
