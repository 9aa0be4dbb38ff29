"""Plain-text renderings of what-if and sweep results (the CLI prints them).

Step and host times print as the main report prints them (report.terminal_fit.duration: at
most four digits, then ms, then s); a launch cost (T_sys, one graph launch) keeps two decimals
as the main report's T_sys line does, since it is a few µs and its hundredths matter.
"""
from __future__ import annotations

import pandas as pd

from ..report.terminal_fit import duration
from ..report.words import NOT_MEASURED
from .sweep_report import describe_phase
from .sweep_table import as_records

NA = NOT_MEASURED
DUR = "duration"  # the digits of a column of µs values shown by terminal_fit.duration
# (header, row key, digits) of the sweep table
_SWEEP_COLUMNS = (("steps", "steps", 0), ("step", "step_us", DUR), ("HDBI", "hdbi", 3),
                  ("ΔFT µs/tok", "framework_us_per_token", 2), ("ΔCT µs/tok", "library_us_per_token", 2),
                  ("ΔKT µs/tok", "launch_floor_us_per_token", 2), ("dev µs/tok", "device_active_us_per_token", 2),
                  ("kern/tok", "kernels_per_token", 1), ("host µs/tok", "host_thread_us_per_token", 1))


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
    """The sweep table (one line per point and phase) and the transition point.

    Columns that no row measured (every device column of a CPU sweep) are left out and
    named in one line, instead of a column of "not measured" per point."""
    records = as_records(table) if not table.empty else []
    columns = [c for c in _SWEEP_COLUMNS if any(row.get(c[1]) is not None for row in records)] or []
    missing = [c[0] for c in _SWEEP_COLUMNS if c not in columns]
    header = ["point", "phase", *(c[0] for c in columns)]
    rows = [[str(row["name"]), str(row["phase"]), *(_n(row.get(key), digits) for _, key, digits in columns)]
            for row in records]
    lines = _aligned([header, *rows])
    if records and missing:
        lines.append(f"{NOT_MEASURED} in any point, so not shown: {', '.join(missing)}")
    lines += ["", "transition point (" + transition.get("rule", "") + "):"]
    for phase, info in transition.get("phases", {}).items():
        lines.append(f"  {phase}: {describe_phase(info)}")
    lines += [f"left out: {note}" for note in notes]
    return "\n".join(lines)


def _n(value, digits: int | str = 0) -> str:
    if value is None:
        return NOT_MEASURED
    return duration(value) if digits == DUR else f"{value:,.{digits}f}"


def _dur(value) -> str:
    """A step or host time in µs, ms or s (at most four digits), or "not measured"."""
    return duration(value, na=NA)


def _aligned(rows: list[list[str]]) -> list[str]:
    """Rows of cells as lines: the first two columns left-aligned, numbers right-aligned."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) if i < 2 else cell.rjust(w) for i, (cell, w) in enumerate(zip(r, widths))).rstrip()
            for r in rows]


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
        lines.append(f"[{phase}] mean step {_dur(step['step_us'])}, HDBI {fmt(step['hdbi'], '', 3)}, "
                     f"orchestration {_dur(step['orchestration_us'])}, device active {_dur(step['device_active_us'])}")
        # without kernels T_Orch is not measured: the projection scales the host time of the step instead
        host_label = "orchestration" if step["orchestration_us"] is not None else "host time (no T_Orch)"
        lines.append(f"  faster host x{cpu['speedup']:g}: {_cpu_projection(cpu, host_label)}")
        lines.append(f"    published (TaxBreak): orchestration -10..-29%, e2e up to -14%; {_published(cpu['published'])}")
        lines += [f"    assumes: {a}" for a in cpu["assumptions"]]
        lines.append(f"    {cpu['validation']}")
        if "cuda_graphs" in info:
            lines += _graph_text(info["cuda_graphs"])
    return lines


def _cpu_projection(cpu: dict, host_label: str) -> str:
    """``orchestration 900 µs -> 750 µs (-17%); step …``, or why a part cannot be projected."""
    if cpu["projected_orchestration_us"] is None:
        host = f"{host_label} cannot be projected: the step's host time is {NOT_MEASURED}"
    else:
        host = (f"{host_label} {_dur(cpu['orchestration_us'])} -> {_dur(cpu['projected_orchestration_us'])} "
                f"(-{fmt(cpu['orchestration_reduction_pct'], '%')})")
    if cpu["projected_step_us"] is None:
        return f"{host}; the step time cannot be projected: it needs the step time and its exposed host time"
    return (f"{host}; step {_dur(cpu['step_us'])} -> {_dur(cpu['projected_step_us'])} "
            f"(-{fmt(cpu['step_reduction_pct'], '%')})")


def _published(pub: dict) -> str:
    """Where this projection falls against the published range, only for the parts it projected."""
    parts = [f"{name} {pub[key]} the published range" for name, key in (("orchestration", "orchestration"),
                                                                         ("e2e", "e2e")) if pub[key] is not None]
    if not parts:
        return "no comparison: this run's projection has no reduction to compare"
    return "this model: " + ", ".join(parts)


def _graph_text(graph: dict) -> list[str]:
    lines = [f"  CUDA graphs: {graph['model']}"]
    if graph["projected_step_us"] is None:
        lines.append(f"    projected: not projected ({graph['not_projected']})")
    else:
        lines.append(f"    projected step {_dur(graph['projected_step_us'])} vs eager {_dur(graph['eager_step_us'])}"
                     f" (x{graph['speedup']:.2f}); host rest {_dur(graph['host_rest_us'])}, "
                     f"graph launch {fmt(graph['graph_launch_us'], 'µs', 2)}")
    lines += [f"    assumes: {a}" for a in graph["assumptions"]]
    if graph.get("split"):  # docs/serving.md §3: pieces whose launches overlap earlier pieces' device work
        lines.append("    split into pieces (launch + device pipeline): " + ", ".join(
            f"{s['pieces']}: {_dur(s['step_us'])}" for s in graph["split"]))
    meas = graph.get("measurement")
    if meas is not None:
        if meas.get("measured"):
            lines.append(f"    measured: eager {_dur(meas['eager_step_us'])}, graph {_dur(meas['graph_step_us'])}"
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
              f"  β_EB^w={batching['beta_eb_w_s_per_token']:.4g} s/token, {_beta_mb(batching['beta_mb_e_s_per_token'])}, "
              f"α_MB={batching['alpha_mb_s']:.4g} s ({batching['alpha_mb_source']})",
              "  crossover N (Δ=0): " + _crossover(batching)]
    lines += [f"  warning: {w}" for w in batching.get("warnings", [])]
    lines += [_concurrency_line(row) for row in batching["per_concurrency"]]
    if batching.get("not_computed"):
        lines.append(f"  not computed: {batching['not_computed']}")
    mem = batching.get("memory_safe_batch", {})
    if "paper" in mem:
        lines.append(f"  memory-safe N̂* (C={mem['kv_capacity_tokens']:g} tokens, ε={mem['oom_prob']:g}): paper form {mem['paper']}, "
                     f"CLT form {mem['clt']}")
    else:
        lines.append(f"  memory-safe N̂*: not computed ({mem.get('not_computed')})")
    return lines


def _beta_mb(value) -> str:
    return "β_MB^e(r): no mixed-batch fit" if value is None else f"β_MB^e(r)={value:.4g} s/token"


def _crossover(batching: dict) -> str:
    if batching["crossover_concurrency"] is not None:
        return _sci(batching["crossover_concurrency"])
    if batching["beta_mb_e_s_per_token"] is None:
        return "cannot be computed without the mixed-batch fit β_MB(r)"
    return "none (Δ(N) keeps one sign for every N > 0)"


def _concurrency_line(row: dict) -> str:
    """Which policy gives more throughput at N, or that the comparison cannot be made and why."""
    head = f"  N={row['concurrency']:>6}: k̂={row['k_hat']:.1f}, "
    if row["delta_s_per_token"] is None:
        return head + "which policy gives more throughput cannot be said: Δ(N) needs the mixed-batch fit β_MB(r)"
    if row["winner"] == "tie":
        return head + "Δ(N)=0 s/token -> both policies give the same throughput"
    return head + f"Δ(N)={_sci(row['delta_s_per_token'])} s/token -> {row['winner']} gives more throughput"


def _sci(value) -> str:
    return NA if value is None else f"{value:.4g}"
