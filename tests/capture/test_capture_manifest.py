"""Run-directory naming and the launch floor recorded in the manifest."""
from __future__ import annotations

import json
from datetime import datetime, timezone

from taxbreak.capture import manifest as mf
from taxbreak.trace.paths import floor_cache_path

NOW = datetime(2026, 12, 2, 10, 15, 0, tzinfo=timezone.utc)


def test_run_dir_name_is_utc_time_and_model_with_a_suffix_when_taken(tmp_path):
    first = mf.default_run_dir("olmoe-1b-7b-tiny", root=tmp_path, now=NOW)
    assert first == tmp_path / "20261202T101500Z-olmoe-1b-7b-tiny"
    first.mkdir()
    assert mf.default_run_dir("olmoe-1b-7b-tiny", root=tmp_path, now=NOW).name.endswith("-tiny-2")
    assert mf.default_run_dir("hf:/models/my llama", root=tmp_path, now=NOW).name == "20261202T101500Z-hf_models_my_llama"


def test_floor_without_gpu_is_null_with_a_reason():
    assert mf.floor_info(None, None) == {"floor_us": None, "source": "unavailable", "reason": "no CUDA device"}


def test_floor_published_by_gpu_then_default():
    assert mf.floor_info("NVIDIA H100 80GB HBM3", "550.54") == {"floor_us": 4.71, "source": "published:H100"}
    assert mf.floor_info("NVIDIA H200", "550.54") == {"floor_us": 4.50, "source": "published:H200"}
    assert mf.floor_info("NVIDIA A100-SXM4-40GB", "550.54") == {"floor_us": 4.50, "source": "published:default"}


def test_floor_measured_cache_wins():
    path = floor_cache_path("NVIDIA H100 80GB HBM3", "550.54")  # under the per-test cache dir
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"floor_us": 4.93, "p50_us": 4.9}))
    found = mf.floor_info("NVIDIA H100 80GB HBM3", "550.54")
    assert (found["floor_us"], found["source"]) == (4.93, "measured")


def test_unreadable_floor_cache_falls_back_to_published():
    path = floor_cache_path("NVIDIA H200", "1")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{not json")
    assert mf.floor_info("NVIDIA H200", "1")["source"] == "published:H200"


def test_capture_overhead_from_medians():
    over = mf.capture_overhead([10.0, 12.0, 11.0], [30.0, 20.0, 22.0], new_tokens=2)
    assert (over["run_ms_without_profiler"], over["run_ms_with_profiler"]) == (11.0, 22.0)
    assert over["overhead_pct"] == 100.0 and over["step_ms_with_profiler"] == 11.0


def test_capture_overhead_unmeasured_is_null_with_reason():
    over = mf.capture_overhead([], [5.0], new_tokens=1)
    assert over["overhead_pct"] is None and over["run_ms_without_profiler"] is None
    assert "overhead_reps = 0" in over["reason"]
