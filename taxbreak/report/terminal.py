"""Terminal rendering of an ``Analysis`` with rich (pure functions: analysis + console in, nothing out).

The report opens with the verdict and the headline figures (HDBI, T_Orchestrate, device-active,
GPU idle, its top cause), which fit 80 columns; durations read in µs, ms or s, and tables wider
than the console are split into column groups (terminal_fit.py), so no cell is ever cut.
"""
from __future__ import annotations

from rich.console import Console
from rich.table import Table

from ..trace.words import plural
from .console_text import markup_text as _name
from .na_reasons import library_reason, na_reason, notes_for
from .serving import render_graph_cost, render_overlap
from .terminal_fit import NA, Column, duration, print_fitted, print_notes

DUR = "duration"  # the pattern of a column of µs values: shown by terminal_fit.duration

PHASE_COLUMNS = [
    ("kernels", "kernels", "{:,}"),
    ("device_active_us", "device\nactive", DUR),
    ("framework_us", "ΔFT", DUR),
    ("library_us", "ΔCT", DUR),
    ("launch_floor_us", "N·T_sys", DUR),
    ("orchestration_us", "T_orch", DUR),
    ("hdbi", "HDBI", "{:.3f}"),
    ("kernels_per_token", "kernels\n/token", "{:,.1f}"),
    ("queue_wait_union_us", "queue\nwait", DUR),
    ("device_idle_us", "GPU idle\nΣ devices", DUR),
    ("wall_us", "elapsed", DUR),
]

# Without device activity the GPU columns would all read n/a: show what the
# host measured instead (steps, ATen ops per token, the host partition).
HOST_PHASE_COLUMNS = [
    ("steps", "steps", "{:,}"),
    ("aten_ops", "ATen ops", "{:,}"),
    ("aten_ops_per_token", "ATen ops\n/token", "{:,.1f}"),
    ("wall_us", "elapsed", DUR),
    ("host_thread_us", "thread\ntime", DUR),
    ("host_python_us", "Python", DUR),
    ("host_dispatch_us", "ATen", DUR),
]

# docs/report.md: what the ``between`` phase holds
BETWEEN_NOTE = ("between = time outside every prefill/decode step range: before the first step, between "
                "steps and after the last (e.g. sampling, tokenisation, cache and profiler set-up)")

SHARE_ROWS = [
    ("framework_python_us", "ΔFT Python (T_py)"),
    ("framework_dispatch_us", "ΔFT ATen dispatch"),
    ("library_us", "ΔCT CUDA library"),
    ("launch_floor_us", "ΔKT floor (N·T_sys)"),
    ("launch_graph_us", "ΔKT graph-launch calls beyond T_sys"),
]

HOST_ROWS = [
    ("host_python_us", "Python"), ("host_dispatch_us", "ATen dispatch"), ("host_library_us", "CUDA library"),
    ("host_launch_api_us", "launch API"), ("host_sync_us", "sync waits"), ("host_other_api_us", "other runtime API"),
    ("host_untraced_us", "untraced"), ("host_blocked_us", "blocked waits"), ("host_stall_us", "host stalls"),
]


def fmt(value, pattern: str = DUR) -> str:
    """Format a metric (µs values by default, in µs, ms or s); ``None`` becomes ``n/a``."""
    if value is None or value != value:
        return NA
    return duration(value) if pattern == DUR else pattern.format(value)


def render_analysis(analysis, console: Console, top: int = 10) -> None:
    """Print the whole report: phases, shares, floor, host partition, top ops, diagnostics."""
    summary = analysis.summary
    render_header(summary, console)
    render_headline(summary, console)
    render_health(summary, console)
    render_phases(summary, console)
    render_shares(summary, console)
    render_host_partition(summary, console)
    render_stalls(summary, console)
    render_idle(summary, console)
    render_overlap(summary, console)
    render_graph_cost(summary, console)
    render_top_ops(analysis.ops, console, top)
    render_diagnostics(summary, console)
    render_advice(summary, console)


def render_header(summary: dict, console: Console) -> None:
    meta, s = summary["meta"], summary["all"]
    console.print(f"[bold]{_name(meta.get('path') or 'trace')}[/bold]  ({_name(meta.get('source_format') or '?')}, "
                  f"GPU {_name(meta.get('gpu') or 'unknown')}, {meta['device']})")
    console.print(f"T_sys floor: {_us_text(s['floor_us'])} (source: {_name(s['floor_source'])})  ·  "
                  f"T_dispatch_base: {_us_text(s['t_dispatch_base_us'])}  ·  "
                  f"steps: {s['steps']} ({_name(meta['step_scheme'])})  ·  tokens: {fmt(s['tokens'], '{:,}')}")
    if s.get("kernels", 0) == 0 and s.get("device_active_us") is None:
        console.print(f"[yellow]no CUDA device in trace:[/yellow] device time, ΔCT, ΔKT and HDBI are {NA}, "
                      "not zero. The host partition is measured; on a CPU run the ATen part also "
                      "holds the ops' own compute, since there is no device to hand it to.")


def headline_figures(summary: dict) -> list[tuple[str, str]]:
    """The figures a reader needs first, as (label, text): HDBI, T_Orchestrate, device-active,
    GPU idle, its top cause, elapsed; each n/a with its reason where the trace cannot give it."""
    s = summary["all"]
    return [("HDBI", _hdbi_text(summary)),
            ("T_Orchestrate", _or_reason(summary, "orchestration_us")),
            ("device active", _or_reason(summary, "device_active_us")),
            ("GPU idle", _idle_text(summary)),
            ("top idle cause", _top_cause_text(summary)),
            ("elapsed", fmt(s.get("wall_us")))]


def render_headline(summary: dict, console: Console) -> None:
    """The verdict (first finding of advice.py) and the headline figures, before any table."""
    from .advice import advise

    console.print(f"[bold]Verdict:[/bold] {_name(advise(summary)[0].finding)}")
    grid = Table.grid(padding=(0, 2))
    grid.add_column(no_wrap=True, style="bold")
    grid.add_column(overflow="fold")
    for label, text in headline_figures(summary):
        grid.add_row(label, _name(text))
    console.print(grid)


def _or_reason(summary: dict, key: str) -> str:
    value = summary["all"].get(key)
    return fmt(value) if value is not None else f"{NA} ({na_reason(summary, key)})"


def _hdbi_text(summary: dict) -> str:
    s = summary["all"]
    if s.get("hdbi") is not None:
        return f"{s['hdbi']:.3f} (device-active / (device-active + T_Orchestrate))"
    covered = ("" if s.get("hdbi_covered") is None else
               f"; {s['hdbi_covered']:.3f} over the {100.0 * s['hdbi_coverage']:.1f}% of launch calls it covers")
    return f"{NA} ({na_reason(summary, 'hdbi')}){covered}"


def _idle_text(summary: dict) -> str:
    s = summary["all"]
    idle, wall, devices = s.get("device_idle_us"), s.get("wall_us"), s.get("devices") or {}
    if idle is None:
        return f"{NA} ({na_reason(summary, 'device_idle_us')})"
    share = f" ({100.0 * idle / (wall * len(devices)):.1f}%)" if wall and devices else ""
    across = f" summed over {len(devices)} devices" if len(devices) > 1 else ""
    return f"{duration(idle)} of {duration(wall)} elapsed{share}{across}"


def _top_cause_text(summary: dict) -> str:
    s = summary["all"]
    causes = {k: v for k, v in (s.get("idle_by_cause_us") or {}).items() if v}
    if not causes or not s.get("device_idle_us"):
        reason = NO_IDLE if s.get("device_idle_us") == 0 else na_reason(summary, "device_idle_us")
        return f"{NA} ({reason})"
    cause = max(causes, key=causes.get)
    return f"{IDLE_LABELS.get(cause, cause)}: {duration(causes[cause])} ({100.0 * causes[cause] / s['device_idle_us']:.1f}%)"


NO_IDLE = "the device was never idle"


def render_health(summary: dict, console: Console) -> None:
    """Trace health first (decompose/health.py): each check pass or warn, with its numbers and what it affects."""
    checks = summary.get("health") or []
    if not checks:
        return
    table = Table(title="Trace health", title_justify="left")
    for col in ("check", "status", "numbers", "affects"):
        table.add_column(col, overflow="fold")
    for c in checks:
        status = {"warn": "[yellow]warn[/yellow]", "pass": "pass"}.get(c["status"], c["status"])
        table.add_row(c["check"], status, _name(c["detail"]), _name(c.get("affects") or ""))
    console.print(table)


def _us_text(value) -> str:
    return NA if value is None else f"{value:.2f} µs"


def has_device(summary: dict) -> bool:
    return summary["all"].get("device_active_us") is not None


def render_phases(summary: dict, console: Console) -> None:
    """Per phase: split into column groups where the console is narrower than the table."""
    columns = PHASE_COLUMNS if has_device(summary) else HOST_PHASE_COLUMNS
    title = "Per phase" if has_device(summary) else "Per phase, host side"
    rows = [("all", summary["all"])] + list(summary["phases"].items())
    key = Column("phase", [_name(name) for name, _ in rows], justify="left")
    print_fitted(console, title, key, [Column(label, [fmt(m.get(k), pattern) for _, m in rows])
                                       for k, label, pattern in columns])
    cells = {k: [(None if name == "all" else name, m) for name, m in rows] for k, _, _ in columns}
    print_notes(console, notes_for(summary, cells, {k: label for k, label, _ in columns}))
    if "between" in summary["phases"]:
        console.print(f"  {BETWEEN_NOTE}", highlight=False)


def render_shares(summary: dict, console: Console) -> None:
    s = summary["all"]
    if s.get("device_active_us") is None and s.get("orchestration_us") is None:
        console.print(f"Orchestration components ΔFT/ΔCT/ΔKT: {NA} (they are per kernel; the trace has none)")
        return
    table = _numbers_table("Orchestration components (whole trace)", "component", ("time", "share of T_orch"))
    total = s["orchestration_us"]
    for key, label in SHARE_ROWS:
        value = s[key]
        share = None if value is None or not total else 100.0 * value / total
        table.add_row(label, fmt(value), fmt(share, "{:.1f}%"))
    table.add_row("ΔKT launch latency, exposed (not in T_orch)", fmt(s["launch_latency_us"]), "")
    table.add_row("CUDA library, measured ranges", fmt(s["library_measured_us"]), "")
    table.add_row("  of ΔCT: estimate (library flag from kernel names alone)", fmt(s.get("library_by_name_us")), "")
    table.add_row("launch waits on a dependency, beyond the learned bound (not in T_orch)",
                  fmt(s.get("dependency_wait_us")), "")
    console.print(table)
    keys = [k for k, _ in SHARE_ROWS] + ["launch_latency_us", "library_measured_us", "library_by_name_us",
                                         "dependency_wait_us"]
    labels = {**dict(SHARE_ROWS), "launch_latency_us": "ΔKT launch latency", "library_measured_us":
              "CUDA library, measured ranges", "library_by_name_us": "ΔCT estimate", "dependency_wait_us":
              "dependency waits"}
    print_notes(console, notes_for(summary, {k: [(None, s)] for k in keys}, labels))
    render_queue(s, console)


def _numbers_table(title: str, label: str, numbers: tuple[str, ...]) -> Table:
    """A table of one text column (folds onto the next line) and number columns (never cut)."""
    table = Table(title=title, title_justify="left")
    table.add_column(label, overflow="fold", ratio=1)
    for header in numbers:
        table.add_column(header, justify="right", no_wrap=True)
    return table


def render_queue(s: dict, console: Console) -> None:
    """Queue wait is device-side waiting: shown on its own, never added to host time."""
    if s.get("queue_wait_union_us") is None:
        return
    # the per-kernel sums (queue_wait_sum_us, tklqt_sum_us) add up overlapping waits: they are in
    # the JSON for the paper's TKLQT, never shown here as if they were elapsed time
    console.print(f"Queue wait (device side, not host time): kernels were waiting "
                  f"{fmt(s['queue_wait_union_us'])} of elapsed time (union of the waits); per kernel "
                  f"median {fmt(s['queue_wait_median_us'])}, p99 {fmt(s['queue_wait_p99_us'])}")


IDLE_ROWS = [("python", "Python"), ("dispatch", "ATen dispatch"), ("library", "CUDA library"),
             ("launch_api", "another launch call"), ("sync", "synchronize"),
             ("other_api", "other runtime API"), ("untraced", "untraced host time"),
             ("launch_floor", "kernel issued: launch floor (T_sys)"),
             ("launch_latency", "kernel issued: launch latency (= ΔKT exposed)"),
             ("dependency_wait", "kernel issued: waiting on a dependency"),
             ("graph_internal", "between a CUDA graph's nodes"),
             ("copy_issued", "memcpy/memset issued, not started"),
             ("unlinked", "next work has no launch call"), ("nothing_pending", "nothing pending"),
             ("blocked", "blocked wait (lock, sleep, queue, select)"),
             ("host_stall", "host stall (data loading, preprocessing, long run)")]


BUSY_ROWS = [("device_kernel_busy_us", "  busy in kernels"), ("device_copy_busy_us", "  busy in copies (memcpy)"),
             ("device_memset_busy_us", "  busy in memsets")]


def _busy_share(d: dict, key: str) -> str:
    busy, value = d.get("busy_us"), d.get(key)
    return fmt(100.0 * value / busy if busy and value is not None else None, "{:.1f}%")


IDLE_LABELS = dict(IDLE_ROWS)


def render_idle(summary: dict, console: Console) -> None:
    """GPU idle time by the host layer that caused it, per device (exact: parts sum to idle).

    Each device is a pair of columns; several devices are split into groups that fit the console."""
    s = summary["all"]
    devices = s.get("devices")
    if not devices:
        return
    labels = [label for _, label in IDLE_ROWS] + ["[bold]idle[/bold]", "busy"] + [label for _, label in BUSY_ROWS] \
        + ["elapsed"]
    columns = []
    for dev, d in devices.items():
        idle = d["idle_us"]
        values = [d["idle_by_cause_us"][key] for key, _ in IDLE_ROWS]
        shares = [fmt(100.0 * v / idle if idle and v is not None else None, "{:.1f}%") for v in values]
        times = [fmt(v) for v in values] + [fmt(idle), fmt(d["busy_us"])] + [fmt(d.get(k)) for k, _ in BUSY_ROWS] \
            + [fmt(s["wall_us"])]
        shares += ["", ""] + [_busy_share(d, k) for k, _ in BUSY_ROWS] + [""]
        columns += [Column(f"device {_name(dev)}", times), Column("share", shares)]
    key = Column("cause", labels, justify="left")
    print_fitted(console, "GPU idle by cause (what the launching thread was doing)", key, columns)
    if any(d["idle_by_cause_us"].get("library") is None for d in devices.values()):
        print_notes(console, {"CUDA library": library_reason(summary)})
    console.print("(kernels, copies and memsets are unions per kind: they can overlap, so their shares of busy "
                  "time need not add up to 100%)")


def render_host_partition(summary: dict, console: Console) -> None:
    """The exact partition of the threads that launch GPU work, the other threads beside it."""
    s = summary["all"]
    apart = s.get("host_nonlaunching_thread_us") is not None
    table = _numbers_table("Host thread time, exact partition (summed over the threads that launch GPU work)",
                           "part", ("time", "share") + (("threads that\nlaunch nothing",) if apart else ()))
    wall = s["host_thread_us"]
    for key, label in HOST_ROWS:
        share = 100.0 * s[key] / wall if wall and s[key] is not None else None
        other = [fmt(s.get(key.replace("host_", "host_nonlaunching_", 1)))] if apart else []
        table.add_row(label, fmt(s[key]), fmt(share, "{:.1f}%"), *other)
    table.add_row("[bold]thread time (Σ threads)[/bold]", fmt(wall), "",
                  *([fmt(s["host_nonlaunching_thread_us"])] if apart else []))
    table.add_row("elapsed wall", fmt(s.get("wall_us")), "")
    if s.get("exposed_orchestration_us") is not None:  # only beside a device
        table.add_row("host work while the device was idle (Σ threads)", fmt(s["exposed_orchestration_us"]), "")
        table.add_row("host work while the device was busy (Σ threads)", fmt(s["hidden_orchestration_us"]), "")
    console.print(table)
    print_notes(console, notes_for(summary, {k: [(None, s)] for k, _ in HOST_ROWS}, dict(HOST_ROWS)))


def render_stalls(summary: dict, console: Console) -> None:
    """The frames that held the longest host stalls (meta ``host_stall_frames``)."""
    frames = (summary.get("meta") or {}).get("host_stall_frames") or []
    if not frames:
        return
    table = _numbers_table("Host stalls by innermost frame (threshold "
                           f"{fmt((summary.get('meta') or {}).get('host_stall_threshold_us'))})", "frame",
                           ("stalls", "host time\n(Σ threads)", "GPU idle"))
    for row in frames:
        table.add_row(_name(row["frame"]), f"{row['stalls']:,}", fmt(row["us"]), fmt(row.get("idle_us")))
    console.print(table)


def render_top_ops(ops, console: Console, top: int) -> None:
    if ops is None or len(ops) == 0 or top <= 0:
        return
    if (ops["kernels"] > 0).any():
        _render_top_ops_orchestration(ops, console, top)
    else:
        _render_top_ops_host(ops, console, top)


def _render_top_ops_orchestration(ops, console: Console, top: int) -> None:
    """Ranked over the ops whose orchestration was measured (they launched kernels); the others are counted."""
    measured = ops[ops["kernels"] > 0]
    measured = measured[[_num(v) is not None for v in measured["orchestration_us"]]]
    table = _numbers_table(f"Top {min(top, len(measured))} ATen ops by orchestration time", "op",
                           ("calls /\nkernels", "T_orch", "ΔFT", "ΔCT", "device"))
    for row in measured.head(top).to_dict("records"):
        table.add_row(_name(row["op_name"]), f"{row['calls']:,} / {row['kernels']:,}",
                      fmt(_num(row["orchestration_us"])), fmt(_num(row["ft_us"])), fmt(_num(row["ct_us"])),
                      fmt(_num(row["device_active_us"])))
    console.print(table)
    unranked = len(ops) - len(measured)
    if unranked:
        console.print(f"  {plural(unranked, 'op')} launched no kernel: orchestration is per kernel, "
                      "so they are not ranked here (their host time is in the partition above)", highlight=False)


def _render_top_ops_host(ops, console: Console, top: int) -> None:
    """Without device activity: the outermost ATen ops by inclusive host time."""
    rows = ops.sort_values("host_us", ascending=False, kind="stable").head(top)
    table = _numbers_table(f"Top {min(top, len(rows))} ATen ops by host time (outermost calls, no device activity)",
                           "op", ("calls", "host time", "per call"))
    for row in rows.to_dict("records"):
        per_call = row["host_us"] / row["root_calls"] if row["root_calls"] else None
        table.add_row(_name(row["op_name"]), f"{row['root_calls']:,}", fmt(_num(row["host_us"])),
                      fmt(_num(per_call)))
    console.print(table)


def _num(value):
    try:
        return None if value is None or value != value else float(value)
    except TypeError:  # pandas NA
        return None


def render_diagnostics(summary: dict, console: Console) -> None:
    s = summary["all"]
    if s.get("device_active_us") is not None or s.get("kernels"):
        render_links(s, console)
    diags = summary["diagnostics"]
    if not diags:
        return
    table = Table(title="Diagnostics", title_justify="left")
    for col in ("code", "severity", "count", "example"):
        table.add_column(col, justify="right" if col == "count" else "left",
                         overflow="fold", no_wrap=col in ("severity", "count"))
    for code, d in diags.items():
        table.add_row(_name(code), d["severity"], f"{d['count']:,}", _name(d.get("example", "")))
    console.print(table)


def render_links(s: dict, console: Console) -> None:
    """Orphans and chain coverage (only beside a device: a CPU run has no kernels to link)."""
    console.print(f"orphan kernels: {s['orphan_kernels']:,} ({fmt(s.get('orphan_device_us'))} of device time, "
                  f"not in HDBI)  ·  orphan memcpy/memset: {s.get('orphan_copies', 0):,}  ·  orphan launches: "
                  f"{s['orphan_launches']:,}  ·  memcpy/memset calls without a device record: "
                  f"{s.get('orphan_copy_calls', 0):,}  ·  full chain linked: "
                  f"{fmt(None if s.get('chain_coverage') is None else 100 * s['chain_coverage'], '{:.1f}%')} of kernels")


def render_advice(summary: dict, console: Console) -> None:
    """The next optimization target (rules in taxbreak/report/advice.py)."""
    from .advice import advise

    console.print("[bold]What to do[/bold]")
    for item in advise(summary):
        console.print(f"  • {_name(item.finding)}\n    → {_name(item.action)}")
