"""scripts/validation_table.py on a fake OUT_DIR (collect, table, trim)."""
from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "validation_table.py"


@pytest.fixture(scope="module")
def vt():
    spec = importlib.util.spec_from_file_location("validation_table", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(root: Path, model: str, kernels: int, hdbi_prefill, hdbi_decode, runs=2):
    run = root / "runs" / model
    run.mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps({"runs": runs, "new_tokens": 10, "batch_size": 4, "seq_len": 2048,
                                                   "dtype": "bfloat16", "gpu_name": "NVIDIA H200"}))
    (run / "summary.json").write_text(json.dumps({
        "all": {"kernels": kernels, "hdbi": 0.3, "floor_us": 4.4, "floor_source": "measured"},
        "phases": {"prefill": {"hdbi": hdbi_prefill}, "decode": {"hdbi": hdbi_decode}}}))


def fake_out_dir(root: Path) -> Path:
    (root / "floor.json").write_text(json.dumps([{"gpu_name": "NVIDIA H200", "driver_version": "12090",
                                                  "floor_us": 4.41, "p50_us": 4.38, "p95_us": 4.9, "min_us": 4.1,
                                                  "max_us": 7.0, "std_us": 0.3, "samples": 150,
                                                  "measured_at": "2026-12-02T10:00:00+00:00"}]))
    _run(root, "llama-3.2-1b", 2 * 8400, 0.39, 0.25)
    _run(root, "olmoe-1b-7b", 2 * 92000, 0.12, None)  # decode HDBI not measured
    (root / "replay.json").write_text(json.dumps({"summary": {"kernels_replayed": 40}}))
    (root / "stages.jsonl").write_text(
        '{"stage": "floor", "status": "ok", "rc": 0, "seconds": 12, "log": "logs/floor.log"}\n'
        '{"stage": "qwen", "status": "skipped", "rc": -1, "seconds": 0, "log": "time budget"}\n')
    return root


def test_collect_derives_per_pass_and_per_token(vt, tmp_path):
    data = vt.collect(fake_out_dir(tmp_path))
    llama = data["models"]["llama-3.2-1b"]
    assert llama["kernels_per_pass"] == 8400 and llama["kernels_per_token"] == 840
    assert llama["hdbi"] == {"prefill": 0.39, "decode": 0.25}
    assert data["moe_kernel_ratio"]["olmoe-1b-7b"] == pytest.approx(92000 / 8400)
    assert data["moe_kernel_ratio"]["qwen1.5-moe-a2.7b"] is None
    assert data["stages"]["qwen"]["status"] == "skipped" and data["replay_summary"] == {"kernels_replayed": 40}
    assert json.loads((tmp_path / "validation.json").read_text())["floor"]["floor_us"] == 4.41


def test_table_golden_rows(vt, tmp_path):
    text = vt.table(vt.collect(fake_out_dir(tmp_path)))
    rows = text.splitlines()
    assert rows[0] == "| quantity | published | measured | note |"
    assert rows[2] == ("| T_sys null-kernel floor, µs (NVIDIA H200) | 4.50 (H200), 4.71 (H100) | 4.410 | "
                       "p50 4.380, p95 4.900, n=150, -2.0% vs published |")
    assert "| kernels per decode pass, llama-3.2-1b | ≈ 8,475 | 8,400.0 | BS 4, SL 2048, 10 tokens |" in rows
    assert "| kernels per output token, llama-3.2-1b | ≈ 847.5 | 840.0 | |" in rows
    assert "| HDBI prefill, llama-3.2-1b | ≈ 0.37–0.41 | 0.390 | within |" in rows
    assert "| HDBI decode, llama-3.2-1b | ≈ 0.23 | 0.250 | outside |" in rows
    assert "| HDBI prefill, olmoe-1b-7b | ≈ 0.15 | 0.120 | outside |" in rows
    assert "| HDBI decode, olmoe-1b-7b | < 0.15 | — | not measured |" in rows  # never shown as 0
    assert "| kernels per decode pass, qwen1.5-moe-a2.7b | ≈ 66,951 | — | BS —, SL —, — tokens |" in rows
    assert "| MoE/dense kernels per pass, olmoe-1b-7b | 8–11x | 11.0 | within |" in rows
    assert "- `qwen`: skipped in 0 s (rc -1)" in rows


def test_main_without_validation_json_fails(vt, tmp_path, capsys):
    assert vt.main([str(tmp_path)]) == 1
    assert "validation.json" in capsys.readouterr().err


def _trace(path: Path, runs: int = 3, steps: int = 4, filler: int = 200) -> Path:
    events = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}}]
    t = 0.0
    for r in range(runs):
        events.append({"ph": "X", "cat": "user_annotation", "name": f"taxbreak/run/{r}", "ts": t,
                       "dur": steps * 1000.0, "pid": 1, "tid": 1})
        for s in range(steps):
            phase = "prefill" if s == 0 else "decode"
            events.append({"ph": "X", "cat": "user_annotation", "name": f"taxbreak/{phase}/{r * steps + s}",
                           "ts": t + s * 1000.0, "dur": 900.0, "pid": 1, "tid": 1})
            events += [{"ph": "X", "cat": "cpu_op", "name": f"aten::op{i}", "ts": t + s * 1000.0 + i,
                        "dur": 0.5, "pid": 1, "tid": 1, "args": {"pad": "x" * 40}} for i in range(filler)]
        t += steps * 1000.0 + 100_000.0
    path.write_bytes(gzip.compress(json.dumps({"traceEvents": events, "schemaVersion": 1}).encode()))
    return path


def test_trim_keeps_the_last_run(vt, tmp_path):
    note = vt.trim(_trace(tmp_path / "trace.json.gz"), max_mb=5)
    assert note["kept"] == "run taxbreak/run/2"
    kept = json.loads(gzip.decompress((tmp_path / "trace.json.gz").read_bytes()))["traceEvents"]
    names = {e["name"] for e in kept}
    assert "taxbreak/run/2" in names and "taxbreak/run/0" not in names and "process_name" in names
    assert note["events"] == len(kept) == 1 + 1 + 4 * 201


def test_trim_drops_steps_until_it_fits(vt, tmp_path):
    path = _trace(tmp_path / "trace.json.gz", runs=1, steps=4, filler=400)
    full = len(path.read_bytes())
    note = vt.trim(path, max_mb=full * 0.6 / 1e6)  # the whole run does not fit
    kept = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    steps = [e["name"] for e in kept if e["name"].startswith(("taxbreak/prefill/", "taxbreak/decode/"))]
    assert note["kept"].startswith("first ") and note["bytes"] <= full * 0.6
    assert steps[0] == "taxbreak/prefill/0" and 1 <= len(steps) < 4
    assert note["kept"] == f"first {len(steps)} steps of taxbreak/run/0"


def test_trim_keeps_kernels_of_kept_launches_only(vt, tmp_path):
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "taxbreak/run/0", "ts": 0.0, "dur": 100.0},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 10.0, "dur": 5.0,
         "args": {"correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": "late_kernel", "ts": 500.0, "dur": 5.0, "args": {"correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": "stray", "ts": 50.0, "dur": 5.0, "args": {"correlation": 9}},
    ]
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(json.dumps({"traceEvents": events}).encode()))
    vt.trim(path)
    names = [e["name"] for e in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]]
    assert names == ["taxbreak/run/0", "cudaLaunchKernel", "late_kernel"]
