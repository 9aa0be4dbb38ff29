"""Terminal sections of the serving figures (docs/serving.md): cross-rank skew, overlap per
step and the cost of CUDA-graph launches. Pure functions: summaries + console in, nothing out.

Durations print as the main report prints them (terminal_fit.duration: at most four digits,
then ms, then s); per-launch and per-node costs keep their decimals, as the T_sys line does."""
from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table

from .console_text import markup_text as _name
from .terminal_fit import duration
from .words import NOT_MEASURED

NA = NOT_MEASURED


def _fmt(value, pattern: str = "{:,.1f}") -> str:
    return NA if value is None else pattern.format(value)


def _us(value) -> str:
    """A duration given in µs, in µs, ms or s (at most four digits); "not measured" when missing."""
    return duration(value, na=NA)


def render_ranks(ranks: dict, console: Console, top: int = 10, title: str = "Cross-rank skew") -> None:
    """Cross-rank skew (the ``ranks`` JSON object): lateness, late ranks, its causes, per step."""
    console.print(f"[bold]{title}[/bold]")
    if ranks.get("reason"):
        console.print(f"skew: {NA} ({_name(ranks['reason'])})")
        return
    console.print(f"ranks {', '.join(_name(r) for r in ranks['ranks'])}: {ranks['collectives']:,} collectives "
                  f"matched; aligned on {_name(ranks['alignment'])}")
    late = ranks["lateness_us"]
    console.print(f"late rank ahead of the earliest by median {_us(late['median'])}, p90 {_us(late['p90'])}, "
                  f"max {_us(late['max'])}, Σ {_us(late['sum'])}; late most often: "
                  + ", ".join(f"{_name(k)} ({v})" for k, v in ranks["late_rank_counts"].items()))
    _render_causes(ranks, console)
    console.print("ranks: " + ", ".join(f"#{i} {_name(r)}" for i, r in enumerate(ranks["ranks"])))
    _render_worst_collectives(ranks, console, top)
    _render_rank_steps(ranks["steps"], ranks["ranks"], console, top)
    unmatched = {k: v for k, v in ranks["unmatched_collectives"].items() if v}
    if unmatched:
        console.print("collectives not matched on every rank (left out): "
                      + ", ".join(f"{_name(k)} {v}" for k, v in unmatched.items()))


def render_run_skews(skews: dict[str, dict], console: Console, top: int = 5) -> None:
    """The cross-rank skew of each run of a folder (``ManyResult.skew``): the section of
    :func:`render_ranks` where a run's ranks were aligned, else one line with the reason."""
    for run, ranks in skews.items():
        if ranks.get("reason"):
            console.print(f"Cross-rank skew, run {_name(run)}: {NA} ({_name(ranks['reason'])})", soft_wrap=True)
        else:
            render_ranks(ranks, console, top, title=f"Cross-rank skew, run {_name(run)}")


def _render_causes(ranks: dict, console: Console) -> None:
    table = Table(title=f"Why the late rank was late (late − earliest rank, Σ over "
                        f"{ranks['explained_collectives']} collectives)", title_justify="left")
    table.add_column("layer")
    table.add_column("time", justify="right")
    table.add_column("top cause of", justify="right")
    causes = sorted(ranks["cause_us"].items(), key=lambda kv: -(kv[1] or 0))
    for layer, us in causes:
        if us:
            table.add_row(_name(layer), _us(us), str(ranks["top_cause_counts"].get(layer, 0)))
    table.add_row("residual (ends not simultaneous)", _us(ranks["cause_residual_us"]), "")
    console.print(table)


def _render_worst_collectives(ranks: dict, console: Console, top: int) -> None:
    worst = sorted(ranks.get("per_collective", []), key=lambda c: -(c["lateness_us"] or 0))[:top]
    if not worst:
        return
    labels = ranks["ranks"]
    table = Table(title="Most skewed collectives", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("#", "family", "step", "late", "lateness", "transfer", "cause"):
        table.add_column(col, justify="right" if col in ("lateness", "transfer") else "left", no_wrap=col != "cause")
    for c in worst:
        late = "—" if c["late_rank"] is None else f"#{labels.index(c['late_rank'])}"
        cause = c["cause"] or c["cause_reason"] or NA
        detail = f" {_us(c['cause_us'].get(c['cause']))}" if c["cause"] else ""
        table.add_row(str(c["collective"]), _name(c["family"]), str(c["step"]), late, _us(c["lateness_us"]),
                      _us(c["transfer_us"]), _name(cause) + detail)
    console.print(table)


def _render_rank_steps(steps: list[dict], labels: list[str], console: Console, top: int) -> None:
    table = Table(title="Per step and rank, on each rank's own clock:\nwall = skew + transfer + compute + idle; "
                        "exposed = idle the host caused",
                  title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    hdbi = any(s["hdbi"] is not None for s in steps)
    for col in ("step", "rank", "wall", "skew", "transfer", "compute", "idle", "exposed", *(("HDBI",) if hdbi else ())):
        table.add_column(col, justify="left" if col in ("step", "rank") else "right", no_wrap=True)
    shown = _most_skewed_steps(steps, top)
    if len(shown) < len(steps):
        table.title += f"\n(the {len({s['step'] for s in shown})} steps with the most skew)"
    for s in shown:
        table.add_row(str(s["step"]), f"#{labels.index(s['rank'])}", *[_us(s[k]) for k in STEP_KEYS],
                      *((_fmt(s["hdbi"], "{:.3f}"),) if hdbi else ()))
    console.print(table)
    if not hdbi:
        console.print(f"HDBI per step and rank: {NA} ({_name(steps[0]['hdbi_reason'])})")
    worst = max((abs(s["residual_us"]) / s["wall_us"] for s in steps if s["wall_us"]), default=None)
    console.print(f"largest residual (collectives overlapping each other or compute, unmatched ones): "
                  f"{_fmt(None if worst is None else 100 * worst, '{:.2f}')}% of a step's wall"
                  + (f"; {len(steps) - len(shown)} more rows in --json" if len(steps) > len(shown) else ""))


def _most_skewed_steps(steps: list[dict], top: int) -> list[dict]:
    """Every rank's row of the ``top`` steps whose largest skew is largest, in step order; all rows
    when there are few (a long run's first steps are warm-up, rarely where the skew is)."""
    if len(steps) <= top * 4:
        return steps
    worst: dict = {}
    for row in steps:
        worst[row["step"]] = max(worst.get(row["step"], 0.0), row["skew_us"] or 0.0)
    keep = set(sorted(worst, key=lambda step: -worst[step])[:top])
    return [row for row in steps if row["step"] in keep]


STEP_KEYS = ("wall_us", "skew_us", "transfer_us", "compute_us", "idle_us", "exposed_host_us")


def render_overlap(summary: dict, console: Console, top: int = 5) -> None:
    """Overlap per step (the ``overlap`` JSON object): hidden and exposed host preparation, the
    blocking call before each step's first launch, the what-if idle; the steps most exposed."""
    o = summary.get("overlap")
    if not o:
        return
    if o.get("reason"):
        console.print(f"Overlap per step: {NA} ({_name(o['reason'])})")
        return
    console.print(f"[bold]Overlap per step[/bold]: {o['steps_measured']} steps, {o['masked_steps']} masked, "
                  f"{o['exposed_steps']} exposed; host preparation {_us(o['prep_us'])} = hidden "
                  f"{_us(o['hidden_us'])} + exposed {_us(o['exposed_us'])}")
    calls = ", ".join(f"{_name(k)} ({v})" for k, v in o["blocking_calls"].items()) or "none"
    console.print(f"blocking call last before a step's first launch: {calls}; blocked {_us(o['blocked_us'])}")
    console.print(f"what-if the preparation overlapped the device work pending at each step's start, blocking "
                  f"calls removed: idle ≈ Σ max(0, host work − pending) = {_us(o['what_if_idle_us'])} "
                  f"(exposed now {_us(o['exposed_us'])})")
    worst = sorted(o["steps"], key=lambda s: -s["exposed_us"])[:top]
    if worst and worst[0]["exposed_us"] > 0:
        _render_overlap_steps(worst, console)


def _render_overlap_steps(steps: list[dict], console: Console) -> None:
    table = Table(title="Steps with the most exposed preparation", title_justify="left",
                  box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("step", "prep", "hidden", "exposed", "what-if idle", "blocking call, longest frame before the launch"):
        table.add_column(col, justify="right" if col in ("prep", "hidden", "exposed", "what-if idle") else "left",
                         no_wrap=col != "blocking call, longest frame before the launch")
    for s in steps:
        table.add_row(str(s["step"]), *[_us(s[k]) for k in ("prep_us", "hidden_us", "exposed_us", "what_if_idle_us")],
                      f"{_call(s['blocking_call'], s['blocking_call_us'])}; "
                      f"{_call(s.get('longest_frame'), s.get('longest_frame_us'))}")
    console.print(table)


def render_graph_cost(summary: dict, console: Console) -> None:
    """CUDA-graph launch cost per node (the ``graph_launch_cost`` JSON object), per GPU; nothing
    for a trace without graph launches."""
    cost = summary.get("graph_launch_cost")
    if not cost or cost.get("reason"):
        return
    table = Table(title="CUDA-graph launch cost: host time of a launch against the nodes it replayed\n"
                        "(median nodes and host time per launch; fit µs = a + b·nodes)",
                  title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("GPU", "launches", "sizes", "nodes", "host", "µs/node", "a", "b", "r²"):
        table.add_column(col, justify="left" if col == "GPU" else "right", no_wrap=True)
    for device, d in cost["devices"].items():
        table.add_row(device, str(d["launches"]), str(d["sizes"]), _fmt(d["nodes_median"], "{:,.0f}"),
                      _us(d["host_us_median"]), _fmt(d["host_us_per_node"], "{:.3f}"), _fmt(d["a_us"], "{:.2f}"),
                      _fmt(d["b_us_per_node"], "{:.3f}"), _fmt(d["r2"], "{:.2f}"))
    console.print(table)
    for device, d in cost["devices"].items():
        if d["fit_reason"]:
            console.print(f"GPU {device}: fit {NA} ({_name(d['fit_reason'])})")
        elif d["split"]:
            best = min(d["split"], key=lambda s: s["step_us"])
            console.print(f"GPU {device}: the median graph ({d['nodes_median']:,.0f} nodes, {_us(d['device_us_median'])} "
                          f"of device work) in {best['pieces']} pieces whose launches overlap earlier pieces' work: "
                          f"{_us(best['step_us'])} instead of {_us(d['split'][0]['step_us'])}")


def _call(name, us) -> str:
    return "none" if name is None else f"{_name(name)} {_us(us)}"
