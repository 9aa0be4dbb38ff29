"""profile(): run directory, manifest, step ranges, Python frames, overhead, nsys path."""
from __future__ import annotations

import json
import math
import os
import re

import pytest
import torch

from taxbreak.capture import ProfileConfig, profile
from taxbreak.capture import runner
from taxbreak.trace.errors import CaptureError, UsageError

from .trace_util import annotations, by_cat, load_events, top_level_ops_without_python_frame

RUNS, NEW_TOKENS = 2, 3


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    events = []
    config = ProfileConfig(model="olmoe-1b-7b-tiny", batch_size=2, seq_len=16, new_tokens=NEW_TOKENS,
                           warmup=1, runs=RUNS, overhead_reps=2, command_line=["taxbreak", "profile"])
    result = profile(config, out_dir=tmp_path_factory.mktemp("run") / "r", progress=events.append)
    return result, events, load_events(result.run_dir / "trace.json.gz")


def test_run_directory_has_trace_and_manifest(captured):
    result, _, _ = captured
    assert (result.run_dir / "trace.json.gz").is_file()
    on_disk = json.loads((result.run_dir / "manifest.json").read_text())
    assert on_disk["model"] == "olmoe-1b-7b-tiny"
    for key in ("parameters", "batch_size", "seq_len", "new_tokens", "warmup", "runs", "dtype", "device",
                "torch_version", "cuda_version", "gpu_name", "cpu_model", "cpu_max_mhz", "floor",
                "command_line", "capture_overhead", "capture_overhead_pct", "model_config", "outputs"):
        assert key in on_disk, key
    assert (on_disk["batch_size"], on_disk["seq_len"], on_disk["new_tokens"], on_disk["runs"]) == (2, 16, 3, 2)
    assert on_disk["model_config"]["experts"] == 16 and on_disk["model_config"]["top_k"] == 8
    assert on_disk["command_line"] == ["taxbreak", "profile"]


def test_outputs_are_written_or_their_absence_explained(captured):
    result, _, _ = captured
    for name, status in result.manifest["outputs"].items():
        assert status == "ok" or status.startswith(("unavailable:", "failed:", "not written:")), (name, status)
        folder = {"tables": "tables", "analysis": "analysis", "summary": "summary.json"}[name]
        assert (result.run_dir / folder).exists() == (status == "ok")


def test_cpu_run_reports_floor_unavailable_not_zero(captured):
    floor = captured[0].manifest["floor"]
    assert floor == {"floor_us": None, "source": "unavailable", "reason": "no CUDA device"}
    assert captured[0].manifest["gpu_name"] is None


def test_one_range_per_step_with_the_documented_names(captured):
    _, _, events = captured
    ranges = annotations(events)
    runs = [e for e in ranges if e["name"].startswith("taxbreak/run/")]
    steps = [e for e in ranges if not e["name"].startswith("taxbreak/run/")]
    assert [e["name"] for e in runs] == ["taxbreak/run/0", "taxbreak/run/1"]
    expected = [f"taxbreak/{'prefill' if i % NEW_TOKENS == 0 else 'decode'}/{i}" for i in range(RUNS * NEW_TOKENS)]
    assert [e["name"] for e in sorted(steps, key=lambda e: e["ts"])] == expected
    for r, run in enumerate(runs):  # each run encloses its own steps
        inside = [s for s in steps if run["ts"] <= s["ts"] and s["ts"] + s["dur"] <= run["ts"] + run["dur"]]
        assert [int(s["name"].rsplit("/", 1)[1]) for s in inside] == list(range(r * NEW_TOKENS, (r + 1) * NEW_TOKENS))


def test_every_top_level_aten_op_has_an_enclosing_python_frame(captured):
    _, _, events = captured
    assert len(by_cat(events, "cpu_op")) > 100
    assert top_level_ops_without_python_frame(events) == []
    assert any(e["name"].startswith("nn.Module: ") for e in by_cat(events, "python_function"))


def test_shapes_are_recorded(captured):
    _, _, events = captured
    mm = [e for e in by_cat(events, "cpu_op") if e["name"] == "aten::mm"]
    assert mm and all("Input Dims" in e["args"] for e in mm)


def test_capture_overhead_is_measured(captured):
    over = captured[0].manifest["capture_overhead"]
    assert over["reps_without_profiler"] == 2 and over["reps_with_profiler"] == RUNS
    assert over["run_ms_without_profiler"] > 0 and over["run_ms_with_profiler"] > 0
    expected = 100 * (over["run_ms_with_profiler"] - over["run_ms_without_profiler"]) / over["run_ms_without_profiler"]
    assert math.isclose(over["overhead_pct"], expected)
    assert math.isclose(over["step_ms_with_profiler"], over["run_ms_with_profiler"] / NEW_TOKENS)


def test_progress_reports_each_stage(captured):
    _, events, _ = captured
    stages = [e.stage for e in events]
    assert [s for i, s in enumerate(stages) if s not in stages[:i]] == [
        "build", "warmup", "baseline", "record", "export", "analyze"]
    records = [e for e in events if e.stage == "record"]
    assert (records[-1].done, records[-1].total) == (RUNS, RUNS)


def test_run_dir_default_name_and_threads_restored(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    threads_before = torch.get_num_threads()
    result = profile(ProfileConfig(model="gpt2-tiny", seq_len=4, new_tokens=2, warmup=0, runs=1,
                                   overhead_reps=0, with_stack=False))
    assert re.fullmatch(r"\d{8}T\d{6}Z-gpt2-tiny", result.run_dir.name)
    assert result.run_dir.parent.resolve() == (tmp_path / "taxbreak-runs").resolve()
    assert result.manifest["capture_overhead"]["overhead_pct"] is None  # not measured, not 0
    assert result.manifest["host"]["torch_threads"] == 1 and torch.get_num_threads() == threads_before


def test_default_config_on_cpu_is_the_tiny_llama():
    cfg = ProfileConfig().resolved()
    assert (cfg.model, cfg.tiny, cfg.device, cfg.dtype, cfg.threads) == ("llama-3.2-1b", True, "cpu", "float32", 1)


def test_positions_beyond_the_model_are_invalid(tmp_path):
    with pytest.raises(CaptureError) as err:
        profile(ProfileConfig(model="gpt2", tiny=True, seq_len=1024, new_tokens=2), out_dir=tmp_path)
    assert err.value.code == "model.invalid"


@pytest.mark.parametrize("field, value", [("runs", 0), ("new_tokens", 0), ("backend", "perf"), ("threads", -1),
                                          ("device", "tpu")])
def test_invalid_config_is_a_usage_error(field, value):
    with pytest.raises(UsageError):
        ProfileConfig(**{field: value}).resolved()


def test_cuda_device_without_gpu_is_unavailable():
    with pytest.raises(CaptureError) as err:
        ProfileConfig(device="cuda").resolved()
    assert err.value.code == "device.unavailable"


def test_nsys_backend_without_nsys_fails_before_any_work(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(CaptureError) as err:
        profile(ProfileConfig(backend="nsys"), out_dir=tmp_path / "run")
    assert err.value.code == "capture.nsys_missing"
    assert "--backend torch" in err.value.hint
    assert not (tmp_path / "run").exists()


def test_nsys_command_lines(tmp_path):
    cfg = ProfileConfig(backend="nsys", device="cpu").resolved()
    prof, export = runner.nsys_commands("/opt/nsys", cfg, tmp_path)
    assert prof[:3] == ["/opt/nsys", "profile", "--trace=cuda,nvtx,cublas,cudnn,osrt"]
    assert prof[-3:] == ["-m", "taxbreak.capture.runner", str(tmp_path / "nsys_worker.json")]
    assert "--capture-range=cudaProfilerApi" not in prof  # CPU: no CUDA profiler API to gate on
    assert export[:4] == ["/opt/nsys", "export", "--type", "sqlite"]
    assert export[-1] == str(tmp_path / "trace.nsys-rep")


FAKE_NSYS = """#!/bin/sh
# Stands in for Nsight Systems: `profile` runs the workload, `export` writes an empty file.
cmd="$1"; shift
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    -o) out="$2"; shift 2 ;;
    --type|--force-overwrite) shift 2 ;;
    --*) shift ;;
    *) break ;;
  esac
done
if [ "$cmd" = "profile" ]; then "$@" || exit $?; touch "$out.nsys-rep"; fi
if [ "$cmd" = "export" ]; then touch "$out"; fi
"""


def test_nsys_backend_runs_the_workload_in_a_child_under_nsys(tmp_path, monkeypatch):
    fake = tmp_path / "bin" / "nsys"
    fake.parent.mkdir()
    fake.write_text(FAKE_NSYS)
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:{__import__('os').environ['PATH']}")
    config = ProfileConfig(model="gpt2-tiny", backend="nsys", seq_len=4, new_tokens=2, warmup=0, runs=2,
                           overhead_reps=1)
    result = profile(config, out_dir=tmp_path / "run")
    manifest = result.manifest
    assert manifest["trace"] == "trace.sqlite" and manifest["profiler"]["tool"] == "nsys"
    assert len(manifest["timings_ms"]["recorded_runs"]) == 2  # written by the child process
    assert (tmp_path / "run" / "trace.nsys-rep").is_file()
    # the fake export is an empty file: the analysis fails, and says so
    assert manifest["outputs"]["analysis"].startswith("failed: error[")


def test_nsys_failure_is_a_capture_error(tmp_path, monkeypatch):
    fake = tmp_path / "bin" / "nsys"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'nsys: no permission to collect' >&2\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(fake.parent))
    with pytest.raises(CaptureError) as err:
        profile(ProfileConfig(model="gpt2-tiny", backend="nsys", seq_len=4, new_tokens=1, warmup=0, runs=1,
                              overhead_reps=0), out_dir=tmp_path / "run")
    assert err.value.code == "capture.failed" and "no permission" in err.value.message


def test_a_failing_analysis_keeps_the_capture(tmp_path, monkeypatch):
    from taxbreak.capture import manifest as mf

    def broken(run_dir):
        raise ValueError("decomposer bug")

    monkeypatch.setattr(mf, "_analyze", broken)
    result = profile(ProfileConfig(model="gpt2-tiny", seq_len=4, new_tokens=2, warmup=0, runs=1, overhead_reps=1,
                                   with_stack=False), out_dir=tmp_path / "run")
    assert result.analysis is None
    assert result.manifest["outputs"]["analysis"] == "failed: ValueError: decomposer bug"
    assert json.loads((tmp_path / "run" / "manifest.json").read_text())["outputs"] == result.manifest["outputs"]
    assert (tmp_path / "run" / "trace.json.gz").is_file()


def test_weights_larger_than_free_memory_are_refused():
    from taxbreak.capture.models import PRESETS

    runner.check_memory(PRESETS["gpt2"], "float32", "cpu", available_bytes=10 * 2**30)
    with pytest.raises(CaptureError) as err:
        runner.check_memory(PRESETS["olmoe-1b-7b"], "bfloat16", "cpu", available_bytes=8 * 2**30)
    assert err.value.code == "capture.failed" and "12.9 GiB" in err.value.message
    assert "--tiny" in err.value.hint


def test_kineto_session_markers_stay_off_stderr(tmp_path, monkeypatch, capfd):
    # libkineto writes "USDT: ... profiler_start/stop" to fd 2 from C++ at its default level
    monkeypatch.delenv("KINETO_LOG_LEVEL", raising=False)
    profile(ProfileConfig(model="gpt2-tiny", seq_len=4, new_tokens=1, warmup=0, runs=1, overhead_reps=0,
                          with_stack=False), out_dir=tmp_path / "r")
    assert "USDT" not in capfd.readouterr().err
    assert os.environ["KINETO_LOG_LEVEL"] == "6"


def test_a_users_kineto_log_level_is_kept(monkeypatch):
    from taxbreak.capture.kineto_log import quiet_kineto_markers

    monkeypatch.setenv("KINETO_LOG_LEVEL", "2")
    quiet_kineto_markers()
    assert os.environ["KINETO_LOG_LEVEL"] == "2"
