"""Plain-text renderings of what-if and sweep results (the CLI prints them)."""
from __future__ import annotations

import pandas as pd

from .sweep_report import describe_phase
from .sweep_table import as_records

NA = "not measured"


def fmt(value, unit: str = "", digits: int = 1) -> str:
    """A number with its unit, or "not measured" for None."""
    if value is None:
        return NA
    if isinstance(value, float):
        text = f"{value:,.{digits}f}" if abs(value) >= 0.1 or value == 0 else f"{value:.3g}"
    else:
        text = str(value)
    return f"{text} {unit}".rstrip()


def render_sweep(table: pd.DataFrame, transition: dict, notes: list[str]) -> str:
    """The sweep table (one line per point and phase) and the transition point."""
    lines = [f"{'point':<14}{'phase':<9}{'steps':>6}{'step µs':>12}{'HDBI':>8}{'ΔFT µs/tok':>12}"
             f"{'ΔCT µs/tok':>12}{'ΔKT µs/tok':>12}{'dev µs/tok':>12}{'kern/tok':>10}{'host µs/tok':>13}"]
    for row in as_records(table) if not table.empty else []:
        lines.append(
            f"{row['name']:<14}{row['phase']:<9}{_n(row['steps']):>6}{_n(row['step_us']):>12}{_n(row['hdbi'], 3):>8}"
            f"{_n(row['framework_us_per_token'], 2):>12}{_n(row['library_us_per_token'], 2):>12}"
            f"{_n(row['launch_floor_us_per_token'], 2):>12}{_n(row['device_active_us_per_token'], 2):>12}"
            f"{_n(row['kernels_per_token'], 1):>10}{_n(row['host_thread_us_per_token'], 1):>13}")
    lines += ["", "transition point (" + transition.get("rule", "") + "):"]
    for phase, info in transition.get("phases", {}).items():
        lines.append(f"  {phase}: {describe_phase(info)}")
    lines += [f"left out: {note}" for note in notes]
    return "\n".join(lines)


def _n(value, digits: int = 0) -> str:
    return "n/m" if value is None else f"{value:,.{digits}f}"


def render_whatif(result: dict) -> str:
    """Projections of a run or a sweep, each with its model and assumptions."""
    lines = [f"what-if for {result['kind']} {result['path']}"]
    if result["kind"] == "run":
        lines += _phases_text(result)
    else:
        for point in result["points"]:
            lines.append(f"\n== {point['name']}")
            lines += _phases_text(point)
    lines += ["", *_batching_text(result.get("batching", {}), result.get("fits"))]
    return "\n".join(lines)


def _phases_text(result: dict) -> list[str]:
    lines = [f"launch floor T_sys: {fmt(result.get('floor_us'), 'µs', 2)} ({result.get('floor_source')})"]
    for phase, info in result["phases"].items():
        step, cpu = info["step"], info["cpu_speedup"]
        lines.append(f"[{phase}] mean step {fmt(step['step_us'], 'µs')}, HDBI {fmt(step['hdbi'], '', 3)}, "
                     f"orchestration {fmt(step['orchestration_us'], 'µs')}, device active {fmt(step['device_active_us'], 'µs')}")
        # without kernels T_Orch is not measured: the projection scales the host time of the step instead
        host_label = "orchestration" if step["orchestration_us"] is not None else "host time (no T_Orch)"
        lines.append(f"  faster host x{cpu['speedup']:g}: {host_label} {fmt(cpu['orchestration_us'], 'µs')} -> "
                     f"{fmt(cpu['projected_orchestration_us'], 'µs')} (-{fmt(cpu['orchestration_reduction_pct'], '%')}); "
                     f"step {fmt(cpu['step_us'], 'µs')} -> {fmt(cpu['projected_step_us'], 'µs')} "
                     f"(-{fmt(cpu['step_reduction_pct'], '%')})")
        pub = cpu["published"]
        lines.append(f"    published (TaxBreak): orchestration -10..-29%, e2e up to -14%; this model: "
                     f"orchestration {pub['orchestration'] or NA}, e2e {pub['e2e'] or NA} the published range")
        lines += [f"    assumes: {a}" for a in cpu["assumptions"]]
        lines.append(f"    {cpu['validation']}")
        if "cuda_graphs" in info:
            lines += _graph_text(info["cuda_graphs"])
    return lines


def _graph_text(graph: dict) -> list[str]:
    lines = [f"  CUDA graphs: {graph['model']}"]
    if graph["projected_step_us"] is None:
        lines.append(f"    projected: not projected ({graph['not_projected']})")
    else:
        lines.append(f"    projected step {fmt(graph['projected_step_us'], 'µs')} vs eager {fmt(graph['eager_step_us'], 'µs')}"
                     f" (x{graph['speedup']:.2f}); host rest {fmt(graph['host_rest_us'], 'µs')}, "
                     f"graph launch {fmt(graph['graph_launch_us'], 'µs', 2)}")
    lines += [f"    assumes: {a}" for a in graph["assumptions"]]
    meas = graph.get("measurement")
    if meas is not None:
        if meas.get("measured"):
            lines.append(f"    measured: eager {fmt(meas['eager_step_us'], 'µs')}, graph {fmt(meas['graph_step_us'], 'µs')}"
                         f" (x{meas['speedup']:.2f}) on {meas.get('device')}")
        else:
            lines.append(f"    measured: {meas['reason']}")
    return lines


def _batching_text(batching: dict, fits: dict | None) -> list[str]:
    lines = ["batching policy (arXiv 2606.00516):"]
    for name, fit in (fits or {}).items():
        if "coef" in fit:
            coef = ", ".join(f"{c:.4g}" for c in fit["coef"])
            lines.append(f"  fit {name}: coefficients [{coef}] s, R² {fmt(fit['r2'], '', 4)}, {fit['points']} points")
        else:
            lines.append(f"  fit {name}: {fit['reason']}")
    if "theta_star" not in batching:
        return lines + [f"  not computed: {batching.get('not_computed')}"]
    calib, work = batching["calibration"], batching["workload"]
    lines += [f"  calibration: {calib['source']}",
              f"  workload μ_L={work['prompt_tokens']:g}, μ_O={work['output_tokens']:g}: r={batching['decode_share_r']:.4f}, "
              f"θ*={batching['theta_star']:.5f} (θ/(1-θ)+ln(1-θ) = p·α_p/α_d = {batching['theta_rhs']:.4g})",
              f"  β_EB^w={batching['beta_eb_w_s_per_token']:.4g} s/token, β_MB^e(r)={_sci(batching['beta_mb_e_s_per_token'])} s/token, "
              f"α_MB={batching['alpha_mb_s']:.4g} s ({batching['alpha_mb_source']})",
              "  crossover N (Δ=0): " + (_sci(batching["crossover_concurrency"]) if batching["crossover_concurrency"]
                                          is not None else "none (Δ(N) keeps one sign for every N > 0, or no β_MB)")]
    lines += [f"  warning: {w}" for w in batching.get("warnings", [])]
    for row in batching["per_concurrency"]:
        lines.append(f"  N={row['concurrency']:>6}: k̂={row['k_hat']:.1f}, Δ(N)={_sci(row['delta_s_per_token'])} s/token -> "
                     f"{row['winner'] or NA} gives more throughput")
    if batching.get("not_computed"):
        lines.append(f"  not computed: {batching['not_computed']}")
    mem = batching.get("memory_safe_batch", {})
    if "paper" in mem:
        lines.append(f"  memory-safe N̂* (C={mem['kv_capacity_tokens']:g} tokens, ε={mem['oom_prob']:g}): paper form {mem['paper']}, "
                     f"CLT form {mem['clt']}")
    else:
        lines.append(f"  memory-safe N̂*: not computed ({mem.get('not_computed')})")
    return lines


def _sci(value) -> str:
    return NA if value is None else f"{value:.4g}"
