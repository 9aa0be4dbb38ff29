"""Floor and replay through small planted Kineto JSON traces and the real reader.

The device parts (the null-kernel launches, the replay loop on a GPU) are
replaced by writing the trace CUPTI would have written; everything after —
reader, join, matching, comparison, CLI rendering — runs for real.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from taxbreak.capture import floor as floor_mod
from taxbreak.capture import replay as replay_mod
from taxbreak.cli.main import main
from taxbreak.readers import load_trace

DEVICE = {"id": 0, "name": "NVIDIA H200"}
MM_ARGS = {"Input Dims": [[4, 8], [8, 16]], "Input type": ["float", "float"],
           "Input Strides": [[8, 1], [1, 8]], "Concrete Inputs": ["", ""]}
ADD_ARGS = {"Input Dims": [[4, 16], [4, 16], []], "Input type": ["float", "float", "Scalar"],
            "Input Strides": [[16, 1], [16, 1], []], "Concrete Inputs": ["", "", "1"]}


def _write(path: Path, events: list) -> Path:
    doc = {"schemaVersion": 1, "deviceProperties": [DEVICE], "cuda_driver_version": 12090, "traceEvents": events}
    data = json.dumps(doc).encode()
    path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)
    return path


class Events:
    """Appends Kineto events with increasing correlation ids (times in µs)."""

    def __init__(self):
        self.events, self.corr = [], 0

    def op(self, name, ts, dur, cat="cpu_op", args=None):
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
                            "args": args or {}})

    def launch(self, ts, kernel, delay, dur=1.0, grid=(1, 1, 1), block=(128, 1, 1), driver=False, regs=32):
        self.corr += 1
        cat, name = ("cuda_driver", "cuLaunchKernel") if driver else ("cuda_runtime", "cudaLaunchKernel")
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": 2.0,
                            "args": {"correlation": self.corr}})
        self.events.append({"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7, "ts": ts + delay,
                            "dur": dur, "args": {"correlation": self.corr, "device": 0, "stream": 7,
                                                 "grid": list(grid), "block": list(block),
                                                 "registers per thread": regs, "shared memory": 0}})


def test_floor_from_a_kineto_trace(tmp_path, monkeypatch):
    delays = [4.25, 4.5, 4.75, 4.5] * 40  # 160 launches; the last 150 are kept
    ev = Events()
    for i, delay in enumerate(delays):
        ev.launch(1000.0 + 20.0 * i, "null_kernel", delay, block=(1, 1, 1), driver=True)
    monkeypatch.setattr(floor_mod, "require_cuda", lambda: 1)
    monkeypatch.setattr(floor_mod, "profile_null_launches",
                        lambda i, w, r, p: (_write(p, ev.events), ("NVIDIA H200", "12090"))[1])
    result = floor_mod.measure_floor(warmup=0, runs=150)[0]
    assert result.samples == 150
    assert result.floor_us == pytest.approx(sum(delays[-150:]) / 150, abs=1e-3)
    assert result.min_us == pytest.approx(4.25, abs=1e-3) and result.max_us == pytest.approx(4.75, abs=1e-3)
    cached = json.loads(floor_mod.floor_cache_path("NVIDIA H200", "12090").read_text())
    assert cached["floor_us"] == pytest.approx(result.floor_us)


def full_run(run_dir: Path) -> Path:
    """A run directory: two passes of mm (cuBLAS kernel) + add, record_shapes on."""
    ev = Events()
    for step, t0 in enumerate((0.0, 1000.0)):
        ev.op(f"taxbreak/decode/{step}", t0, 900.0, cat="user_annotation")
        ev.op("aten::mm", t0 + 10.0, 60.0, args=MM_ARGS)
        ev.launch(t0 + 20.0, "cublasLt_gemm_kernel", 7.0, dur=30.0, grid=(4, 1, 1))
        ev.op("aten::add", t0 + 100.0, 20.0, args=ADD_ARGS)
        ev.launch(t0 + 104.0, "vectorized_elementwise_add", 5.0, dur=2.0)
    run_dir.mkdir()
    (run_dir / "manifest.json").write_text(json.dumps({"runs": 2, "new_tokens": 1}))
    return _write(run_dir / "trace.json.gz", ev.events)


def fake_device_replay(plan, trace_path, device="cuda", warmup=20, runs=50):
    """What a GPU replay would record: per op and iteration, a range and its kernels."""
    ev = Events()
    t = 0.0
    kernels = {"aten::mm": ("cublasLt_gemm_kernel", (4, 1, 1), 9.0, 6.0),
               "aten::add": ("vectorized_elementwise_add", (1, 1, 1), 3.0, 5.0)}
    for op_index, record in enumerate(plan.records):
        name, grid, dispatch, delay = kernels[record.name]
        for i in range(runs):
            ev.op(f"taxbreak/replay/{op_index}/{i}", t, 50.0, cat="user_annotation")
            ev.op(record.name, t + 1.0, 40.0)
            ev.launch(t + dispatch, name, delay, grid=grid)
            t += 100.0
    _write(trace_path, ev.events)
    return {}


@pytest.fixture
def simulated_gpu(monkeypatch):
    monkeypatch.setattr("taxbreak.capture.floor.require_cuda", lambda: 1)
    monkeypatch.setattr(replay_mod, "run_replay", fake_device_replay)


def test_replay_end_to_end(tmp_path, simulated_gpu):
    full_run(tmp_path / "run")
    result = replay_mod.replay(tmp_path / "run", warmup=0, runs=5, floor_us=4.5)
    k = result.kernels.set_index("kernel_name")
    assert k.loc["cublasLt_gemm_kernel", "frequency"] == 2
    assert k.loc["cublasLt_gemm_kernel", "dispatch_trace_us"] == pytest.approx(10.0)
    assert k.loc["cublasLt_gemm_kernel", "dispatch_replay_us"] == pytest.approx(9.0)
    assert k.loc["cublasLt_gemm_kernel", "launch_replay_us"] == pytest.approx(6.0)
    assert k.loc["vectorized_elementwise_add", "match_tier"] == 1
    s = result.summary
    assert s["kernels_replayed"] == 2 and s["launches_replayed"] == 4 and s["floor_source"] == "given"
    # isolated: base = add's 3.0 µs; mm (cuBLAS) ΔCT = 9 - 3 = 6 per launch, twice
    assert s["isolated"]["dispatch_base_us"] == pytest.approx(3.0)
    assert s["isolated"]["ct_us"] == pytest.approx(12.0)
    assert s["in_trace"]["ct_us"] == pytest.approx(2 * (10.0 - 4.0))
    assert s["isolated"]["kt_framework_us"] == pytest.approx(2 * 1.5 + 2 * 0.5)
    # no Python frames in this trace: T_Py unmeasured, so the full HDBI is None, not a guess
    assert s["t_py_us"] is None and s["includes_t_py"] is False
    assert s["isolated"]["hdbi"] is None and s["isolated"]["hdbi_dispatch"] is not None


def test_cli_replay_renders_and_prints_json(tmp_path, simulated_gpu):
    full_run(tmp_path / "run")
    text = CliRunner().invoke(main, ["replay", str(tmp_path / "run"), "--runs", "3", "--floor-us", "4.5"])
    assert text.exit_code == 0, text.output
    assert "In-trace vs isolated" in text.output and "replayed 2/2 unique kernels (4/4 launches)" in text.output
    out = CliRunner().invoke(main, ["replay", str(tmp_path / "run"), "--runs", "3", "--json"])
    assert out.exit_code == 0, out.output
    payload = json.loads(out.output)
    assert payload["summary"]["floor_source"] == "published:H200"
    kernels = {k["kernel_name"]: k for k in payload["kernels"]}
    assert set(kernels) == {"cublasLt_gemm_kernel", "vectorized_elementwise_add"}
    gemm = kernels["cublasLt_gemm_kernel"]
    assert gemm["frequency"] == 2 and gemm["replayed"] is True and gemm["is_library"] is True
    assert gemm["dispatch_replay_us"] == pytest.approx(9.0) and gemm["match_tier"] == 1
    assert payload["skipped"] == []


def test_cli_replay_bad_run_dir(tmp_path, simulated_gpu):
    result = CliRunner().invoke(main, ["replay", str(tmp_path)])
    assert result.exit_code == 1 and result.output.startswith("error[run.not_a_run]")


def test_replay_records_survive_the_reader(tmp_path):
    tables = load_trace(full_run(tmp_path / "run"), use_cache=False)
    plan = replay_mod.plan_replay(tables)
    assert [r.name for r in plan.records] == ["aten::mm", "aten::add"]
    assert plan.records[0].strides == [[8, 1], [1, 8]] and plan.records[1].concrete == ["", "", "1"]
