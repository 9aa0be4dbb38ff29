"""`taxbreak sweep` and `taxbreak whatif` on CPU: real tiny captures, and option errors."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from taxbreak.cli.main import main

GRID = ["--model", "llama-3.2-1b", "--tiny", "--device", "cpu", "--batch-sizes", "1,2", "--seq-lens", "8,16",
        "--new-tokens", "2", "--warmup", "0", "--runs", "1", "--mixed-shares", "0.25,0.75", "--decode-context", "4"]


def _run(args):
    result = CliRunner().invoke(main, args)
    assert "Traceback" not in result.output, result.output
    return result


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep")
    first = _run(["sweep", *GRID, "-o", str(out)])
    return out, first


@pytest.mark.slow
def test_sweep_profiles_every_point(swept):
    out, first = swept
    assert first.exit_code == 0, first.output
    index = json.loads((out / "sweep.json").read_text())
    names = [p["name"] for p in index["points"]]
    assert names == ["b1-s8", "b2-s8", "b1-s16", "b2-s16", "m0.25-s8", "m0.75-s8", "m0.25-s16", "m0.75-s16"]
    assert all(p["status"] == "profiled" for p in index["points"])
    for name in names:
        assert (out / name / "summary.json").is_file() and (out / name / "manifest.json").is_file()
    # CPU: no device time, so no transition point is claimed.
    assert index["transition"]["phases"]["decode"]["status"] == "undetermined"
    assert "cannot be determined without a GPU" in first.output
    manifest = json.loads((out / "m0.75-s8" / "manifest.json").read_text())
    mixed = manifest["mixed"]
    assert (mixed["prefill_tokens"], mixed["decode_requests"]) == (2, 6)
    # mixed points run with the plain points' single CPU thread and measure their capture overhead
    assert manifest["host"]["torch_threads"] == manifest["config"]["threads"] == 1
    overhead = manifest["capture_overhead"]
    assert overhead["reps_without_profiler"] == 5 and overhead["overhead_pct"] is not None
    assert len(manifest["timings_ms"]["baseline_runs"]) == 5
    summary = json.loads((out / "m0.75-s8" / "summary.json").read_text())
    assert "mixed" in summary["phases"]


@pytest.mark.slow
def test_second_sweep_reprofiles_nothing(swept):
    out, _ = swept
    before = {p: (out / p / "summary.json").stat().st_mtime_ns for p in ("b1-s8", "m0.25-s16")}
    again = _run(["sweep", *GRID, "-o", str(out)])
    assert again.exit_code == 0
    assert "0 profiled, 8 reused" in again.output
    assert before == {p: (out / p / "summary.json").stat().st_mtime_ns for p in before}


@pytest.mark.slow
def test_whatif_on_sweep_and_run(swept):
    out, _ = swept
    result = _run(["whatif", str(out), "--json", "--cpu-speedup", "1.25"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["kind"] == "sweep" and set(data["fits"]) == {"prefill", "decode", "beta_mb"}
    assert data["fits"]["prefill"]["points"] == 4 and data["fits"]["decode"]["points"] == 4
    # two decode shares cannot fix three coefficients: no β_MB fit, and Δ(N) says why
    assert data["fits"]["beta_mb"] == {"reason": "fewer distinct points than coefficients"}
    decode = data["points"][0]["phases"]["decode"]
    assert decode["cuda_graphs"]["projected_step_us"] is None
    assert decode["cpu_speedup"]["step_reduction_pct"] == pytest.approx(20.0)
    run = _run(["whatif", str(out / "b1-s8"), "--calibration", "h200-qwen3-8b"])
    assert run.exit_code == 0, run.output
    assert "measured: not measured: no CUDA device" in run.output
    assert "N=    32" in run.output and "MB gives more throughput" in run.output


def test_whatif_errors(tmp_path):
    empty = _run(["whatif", str(tmp_path)])
    assert empty.exit_code == 1 and "error[run.not_a_run]" in empty.output
    (tmp_path / "summary.json").write_text(json.dumps({"steps": []}))
    bad = tmp_path / "calib.json"
    bad.write_text("{")
    result = _run(["whatif", str(tmp_path), "--calibration", str(bad)])
    assert result.exit_code == 1 and "error[calibration.malformed]" in result.output
    assert _run(["whatif", str(tmp_path), "--cpu-speedup", "0"]).exit_code == 2
    assert _run(["whatif", str(tmp_path), "--concurrency", "a,b"]).exit_code == 2


def test_sweep_option_errors(tmp_path):
    for bad in (["--batch-sizes", "0,2"], ["--seq-lens", "x"], ["--mixed-shares", "1.5"]):
        result = _run(["sweep", "--model", "gpt2", *bad, "-o", str(tmp_path / "s")])
        assert result.exit_code == 2 and "error[usage.invalid]" in result.output


def test_whatif_text_on_hand_built_gpu_run(tmp_path):
    # One decode step of 1000 µs with 300 µs device work and a 4.5 µs floor (docs/whatif.md example).
    step = {"step": 1, "phase": "decode", "start_ns": 0, "end_ns": 1_000_000, "span_us": 900.0,
            "device_active_us": 300.0, "orchestration_us": 600.0, "launch_latency_us": 50.0, "hdbi": 0.333333,
            "host_thread_us": 950.0, "host_sync_us": 50.0, "exposed_orchestration_us": 400.0}
    (tmp_path / "summary.json").write_text(json.dumps({"steps": [step], "all": {"floor_us": 4.5,
                                                                                "floor_source": "published:H200"}}))
    result = _run(["whatif", str(tmp_path), "--cpu-speedup", "1.25"])
    assert result.exit_code == 0, result.output
    assert "projected step 300.0 µs vs eager 1,000 µs (x3.33)" in result.output
    assert "step 1,000 µs -> 920.0 µs (-8.0 %)" in result.output


def test_sweep_unknown_model_fails_once_before_any_point(tmp_path):
    result = _run(["sweep", "--model", "no-such-model", "--batch-sizes", "1", "--seq-lens", "8", "-o", str(tmp_path / "s")])
    assert result.exit_code == 1 and result.output.count("error[model.unknown]") == 1
    assert not (tmp_path / "s").exists()
