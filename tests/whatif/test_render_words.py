"""The what-if and sweep text: one word for a missing value, and no sentence built around it."""
from __future__ import annotations

import re

import pandas as pd

from taxbreak.whatif.projections import project_cpu_speedup, project_cuda_graphs
from taxbreak.whatif.render import render_sweep, render_whatif

BANNED = re.compile(r"\bn/m\b|\bn/a\b|\bNone\b|\bnan\b|not measured (s/token|µs|%|gives|the published)")


def _cpu_run_result() -> dict:
    step = {"step_us": 2000.0, "hdbi": None, "orchestration_us": None, "device_active_us": None}
    metrics = {**step, "host_thread_us": 2000.0, "host_sync_us": 0.0}
    return {"kind": "run", "path": "run", "floor_us": None, "floor_source": "unavailable",
            "phases": {"decode": {"step": step, "cpu_speedup": project_cpu_speedup(metrics, 1.2),
                                  "cuda_graphs": project_cuda_graphs(metrics, None, "unavailable")}},
            "batching": _batching(beta_mb=None, delta=None), "fits": {"beta_mb": {"reason": "too few points"}}}


def _batching(beta_mb, delta, winner=None) -> dict:
    return {"calibration": {"source": "fitted from sweep"}, "workload": {"prompt_tokens": 512, "output_tokens": 256},
            "decode_share_r": 0.33, "theta_star": 0.3, "theta_rhs": 0.07, "beta_eb_w_s_per_token": 0.001,
            "beta_mb_e_s_per_token": beta_mb, "alpha_mb_s": 0.011, "alpha_mb_source": "default α_MB = α_p",
            "crossover_concurrency": None, "warnings": [],
            "per_concurrency": [{"concurrency": 32, "k_hat": 9.7, "delta_s_per_token": delta, "winner": winner}],
            "memory_safe_batch": {"not_computed": "needs --kv-capacity-tokens"}}


def test_cpu_run_projection_says_what_cannot_be_projected():
    text = render_whatif(_cpu_run_result())
    assert not BANNED.search(text), BANNED.search(text)
    assert "  N=    32: k̂=9.7, which policy gives more throughput cannot be said: " \
           "Δ(N) needs the mixed-batch fit β_MB(r)" in text
    assert "β_MB^e(r): no mixed-batch fit" in text
    assert "crossover N (Δ=0): cannot be computed without the mixed-batch fit β_MB(r)" in text
    assert "the cost of one graph launch is not measured (no launch floor in the trace" in text
    # durations as the main report prints them: at most four digits (terminal_fit.duration)
    assert "faster host x1.2: host time (no T_Orch) 2,000 µs -> 1,667 µs (-16.7 %)" in text
    assert "[decode] mean step 2,000 µs, HDBI not measured, orchestration not measured" in text


def test_a_measured_delta_names_the_winner():
    result = {**_cpu_run_result(), "batching": _batching(beta_mb=0.002, delta=-1.5e-4, winner="MB")}
    text = render_whatif(result)
    assert "N=    32: k̂=9.7, Δ(N)=-0.00015 s/token -> MB gives more throughput" in text
    tie = render_whatif({**result, "batching": _batching(beta_mb=0.002, delta=0.0, winner="tie")})
    assert "Δ(N)=0 s/token -> both policies give the same throughput" in tie


def test_unprojectable_host_time_is_a_sentence():
    metrics = {"step_us": None, "orchestration_us": None, "device_active_us": 10.0, "exposed_orchestration_us": None}
    cpu = project_cpu_speedup(metrics, 1.2)
    result = _cpu_run_result()
    result["phases"]["decode"]["cpu_speedup"] = cpu
    del result["phases"]["decode"]["cuda_graphs"]
    text = render_whatif(result)
    assert not BANNED.search(text)
    assert ("faster host x1.2: host time (no T_Orch) cannot be projected: the step's host time is not measured; "
            "the step time cannot be projected") in text
    assert "no comparison: this run's projection has no reduction to compare" in text


def test_cpu_sweep_table_leaves_unmeasured_columns_out_in_one_line():
    table = pd.DataFrame([{"name": "b1-s8", "phase": "decode", "steps": 3, "step_us": 2447.4, "hdbi": None,
                           "framework_us_per_token": None, "library_us_per_token": None,
                           "launch_floor_us_per_token": None, "device_active_us_per_token": None,
                           "kernels_per_token": None, "host_thread_us_per_token": 2447.4}])
    text = render_sweep(table, {"rule": "r", "phases": {}}, [])
    lines = text.splitlines()
    assert lines[0].split() == ["point", "phase", "steps", "step", "host", "µs/tok"]
    assert lines[1].split() == ["b1-s8", "decode", "3", "2,447", "µs", "2,447.4"]
    assert lines[2] == ("not measured in any point, so not shown: HDBI, ΔFT µs/tok, ΔCT µs/tok, ΔKT µs/tok, "
                        "dev µs/tok, kern/tok")
    assert not BANNED.search(text)


def test_a_gpu_sweep_keeps_a_partly_measured_column():
    rows = [{"name": n, "phase": "decode", "steps": 1, "step_us": 10.0, "hdbi": h, "framework_us_per_token": 1.0,
             "library_us_per_token": None, "launch_floor_us_per_token": 1.0, "device_active_us_per_token": 1.0,
             "kernels_per_token": 2.0, "host_thread_us_per_token": 3.0} for n, h in (("a", 0.5), ("b", None))]
    lines = render_sweep(pd.DataFrame(rows), {"rule": "r", "phases": {}}, []).splitlines()
    # the step cell is "10.0 µs": two words before HDBI
    assert "HDBI" in lines[0] and lines[2].split()[5:7] == ["not", "measured"] and lines[1].split()[5] == "0.500"
    assert lines[3] == "not measured in any point, so not shown: ΔCT µs/tok"


def test_long_steps_print_in_ms_and_s_like_the_main_report():
    result = _cpu_run_result()
    step = {"step_us": 2_500_000.0, "hdbi": 0.5, "orchestration_us": 12_345.0, "device_active_us": 999.94}
    result["phases"]["decode"]["step"] = step
    result["phases"]["decode"]["cpu_speedup"] = project_cpu_speedup({**step, "host_thread_us": 12_345.0,
                                                                      "host_sync_us": 0.0}, 1.2)
    text = render_whatif(result)
    assert "[decode] mean step 2.50 s, HDBI 0.500, orchestration 12.3 ms, device active 999.9 µs" in text
    table = pd.DataFrame([{"name": "b8", "phase": "decode", "steps": 3, "step_us": 10_000.0, "hdbi": 0.5}])
    assert render_sweep(table, {"rule": "r", "phases": {}}, []).splitlines()[1].split()[3:5] == ["10.0", "ms"]
