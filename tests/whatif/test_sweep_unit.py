"""Sweep bookkeeping with a stand-in profiler: resumability, stale points, failures, table, outputs."""
from __future__ import annotations

import json

import pytest

from taxbreak.trace.errors import CaptureError, TaxbreakError
from taxbreak.whatif.sweep import POINT_SPEC, SweepConfig, grid_points, read_index, run_sweep
from taxbreak.whatif.sweep_report import write_sweep_outputs
from taxbreak.whatif.sweep_table import build_table


def _step(phase, i, wall_us, device=None, orch=None, exposed=None):
    return {"step": i, "phase": phase, "name": f"taxbreak/{phase}/{i}", "start_ns": 0, "end_ns": int(wall_us * 1e3),
            "span_us": device, "device_active_us": device, "orchestration_us": orch, "hdbi":
            None if device is None else device / (device + orch), "exposed_orchestration_us": exposed,
            "framework_us": orch, "kernels": 10 if device else 0}


def fake_profile(calls):
    """A profiler that writes a summary whose numbers follow the shape (HDBI grows with B·S)."""
    def profile(config, point, run_dir):
        calls.append(point.name)
        run_dir.mkdir(parents=True, exist_ok=True)
        device = 10.0 * point.batch * point.seq_len
        steps = [_step("prefill", 0, 100 + device, device, 400.0, 300.0),
                 _step("decode", 1, 50.0 + point.batch, device / 10, 200.0, 150.0)]
        (run_dir / "summary.json").write_text(json.dumps({"steps": steps, "all": {"floor_us": 4.5}}))
    return profile


CONFIG = SweepConfig(model="llama-3.2-1b", batch_sizes=[1, 2, 4], seq_lens=[8, 16], new_tokens=2, warmup=0, runs=1)


def test_second_run_profiles_nothing(tmp_path):
    calls, events = [], []
    run_sweep(CONFIG, tmp_path, profile_point=fake_profile(calls))
    assert len(calls) == 6
    result = run_sweep(CONFIG, tmp_path, progress=lambda *e: events.append(e), profile_point=fake_profile(calls))
    assert len(calls) == 6 and result.profiled == 0
    assert [e[3] for e in events] == ["start"] + ["reused"] * 6
    assert events[-1][:2] == (6, 6)


def test_changed_config_reprofiles(tmp_path):
    calls = []
    run_sweep(CONFIG, tmp_path, profile_point=fake_profile(calls))
    changed = SweepConfig(**{**CONFIG.__dict__, "runs": 2})
    run_sweep(changed, tmp_path, profile_point=fake_profile(calls))
    assert len(calls) == 12


def test_interrupted_point_is_redone(tmp_path):
    calls = []
    run_sweep(CONFIG, tmp_path, profile_point=fake_profile(calls))
    (tmp_path / "b2-s8" / "summary.json").unlink()  # as if the analysis never finished
    run_sweep(CONFIG, tmp_path, profile_point=fake_profile(calls))
    assert calls[6:] == ["b2-s8"]


def test_failed_point_is_recorded_and_sweep_goes_on(tmp_path):
    def failing(config, point, run_dir):
        if point.batch == 2:
            raise CaptureError("capture.failed", "boom")
        fake_profile([])(config, point, run_dir)

    result = run_sweep(CONFIG, tmp_path, profile_point=failing)
    assert [p.point.name for p in result.failed] == ["b2-s8", "b2-s16"]
    index = read_index(tmp_path)
    assert {p["name"]: p["status"] for p in index["points"]}["b2-s8"] == "failed"
    assert not (tmp_path / "b2-s8" / POINT_SPEC).exists()
    table, notes = build_table(tmp_path)
    assert len(notes) == 2 and set(table["batch"]) == {1, 4}


def test_mixed_points_named_by_share():
    cfg = SweepConfig(model="m", batch_sizes=[1], seq_lens=[32], mixed_shares=[0.1, 0.8])
    assert [p.name for p in grid_points(cfg)] == ["b1-s32", "m0.1-s32", "m0.8-s32"]


def test_bad_grid_is_a_usage_error(tmp_path):
    with pytest.raises(TaxbreakError) as info:
        run_sweep(SweepConfig(model="m", batch_sizes=[], seq_lens=[8]), tmp_path)
    assert info.value.code == "usage.invalid"


def test_outputs_table_transition_and_plots(tmp_path):
    run_sweep(CONFIG, tmp_path, profile_point=fake_profile([]))
    out = write_sweep_outputs(tmp_path)
    table = out["table"]
    row = table[(table["name"] == "b2-s8") & (table["phase"] == "prefill")].iloc[0]
    # prefill of B=2, S=8: device 160 µs, orchestration 400 µs, 16 tokens per step
    assert row["tokens_per_step"] == 16 and row["device_active_us_per_token"] == pytest.approx(10.0)
    assert row["step_us"] == pytest.approx(260.0)  # max(marker wall 260, device span 160)
    decode = table[(table["name"] == "b4-s16") & (table["phase"] == "decode")].iloc[0]
    assert decode["tokens_per_step"] == 4 and decode["kernels_per_token"] == pytest.approx(2.5)
    # prefill HDBI = 10·B·S/(10·B·S + 400): S=16 → 0.286, 0.444, 0.615 at B=1, 2, 4
    curve = {c["seq_len"]: c for c in out["transition"]["phases"]["prefill"]["by_batch"]}
    assert curve[16]["hdbi"]["status"] == "interpolated"
    assert curve[16]["hdbi"]["x"] == pytest.approx(2 + (0.5 - 4 / 9) * 2 / (8 / 13 - 4 / 9), rel=1e-5)
    assert read_index(tmp_path)["transition"]["threshold"] == 0.5
    hdbi_svg = (tmp_path / "plots" / "prefill-hdbi-vs-batch.svg").read_text()
    assert hdbi_svg.startswith("<svg") and "S=16: transition at 2.65" in hdbi_svg
    assert "Transition point" in (tmp_path / "sweep.html").read_text()


def test_step_means_count_steps_and_keep_unmeasured_none():
    from taxbreak.whatif.metrics import step_means

    steps = [dict(_step("decode", i, 100.0 + 10 * i, None, None, 100.0), steps=1) for i in range(3)]
    steps[1]["exposed_orchestration_us"] = None
    means = step_means({"steps": steps}, "decode")
    assert means["steps"] == 3
    assert means["step_us"] == pytest.approx(110.0) and means["wall_us"] == pytest.approx(110.0)
    assert means["exposed_orchestration_us"] is None  # one step unmeasured: no mean over the others
    assert means["device_active_us"] is None
