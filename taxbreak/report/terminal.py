"""Terminal rendering of an ``Analysis`` with rich (pure functions: analysis + console in, nothing out)."""
from __future__ import annotations

from rich.console import Console
from rich.table import Table

from .console_text import markup_text as _name
from .serving import render_graph_cost, render_overlap
from .words import NOT_MEASURED

NA = NOT_MEASURED  # never shown as 0

PHASE_COLUMNS = [
    ("kernels", "kernels", "{:,}"),
    ("device_active_us", "device\nµs", "{:,.1f}"),
    ("framework_us", "ΔFT\nµs", "{:,.1f}"),
    ("library_us", "ΔCT\nµs", "{:,.1f}"),
    ("launch_floor_us", "N·T_sys\nµs", "{:,.1f}"),
    ("orchestration_us", "T_orch\nµs", "{:,.1f}"),
    ("hdbi", "HDBI", "{:.3f}"),
    ("kernels_per_token", "kernels\n/token", "{:,.1f}"),
    ("queue_wait_union_us", "queue\nwait µs", "{:,.1f}"),
    ("device_idle_us", "GPU idle\nΣ devices µs", "{:,.1f}"),
    ("wall_us", "elapsed\nµs", "{:,.1f}"),
]

# Without device activity the GPU columns would all read "not measured": show what the
# host measured instead (steps, ATen ops per token, the host partition).
HOST_PHASE_COLUMNS = [
    ("steps", "steps", "{:,}"),
    ("aten_ops", "ATen ops", "{:,}"),
    ("aten_ops_per_token", "ATen ops\n/token", "{:,.1f}"),
    ("wall_us", "elapsed\nµs", "{:,.1f}"),
    ("host_thread_us", "thread\ntime µs", "{:,.1f}"),
    ("host_python_us", "Python\nµs", "{:,.1f}"),
    ("host_dispatch_us", "ATen\nµs", "{:,.1f}"),
]

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


def fmt(value, pattern: str = "{:,.1f}") -> str:
    """Format a metric; ``None`` becomes ``not measured``."""
    return NA if value is None else pattern.format(value)


def render_analysis(analysis, console: Console, top: int = 10) -> None:
    """Print the whole report: phases, shares, floor, host partition, top ops, diagnostics."""
    summary = analysis.summary
    render_header(summary, console)
    render_health(summary, console)
    render_phases(summary, console)
    render_shares(summary["all"], console)
    render_host_partition(summary["all"], console)
    render_stalls(summary, console)
    render_idle(summary["all"], console)
    render_overlap(summary, console)
    render_graph_cost(summary, console)
    render_top_ops(analysis.ops, console, top)
    render_diagnostics(summary, console)
    render_advice(summary, console)


def render_header(summary: dict, console: Console) -> None:
    meta, s = summary["meta"], summary["all"]
    console.print(f"[bold]{_name(meta.get('path') or 'trace')}[/bold]  ({_name(meta.get('source_format') or '?')}, "
                  f"GPU {_name(meta.get('gpu') or 'unknown')}, {meta['device']})")
    console.print(f"T_sys floor: {_us_text(s['floor_us'])} (source: {s['floor_source']})  ·  "
                  f"T_dispatch_base: {_us_text(s['t_dispatch_base_us'])}  ·  "
                  f"steps: {s['steps']} ({_name(meta['step_scheme'])})  ·  tokens: {fmt(s['tokens'], '{:,}')}")
    if s.get("hdbi") is None and s.get("hdbi_reason"):
        covered = ("" if s.get("hdbi_covered") is None else
                   f"; over the {100.0 * s['hdbi_coverage']:.1f}% of launch calls it covers: {s['hdbi_covered']:.3f}")
        console.print(f"HDBI: {NA} ({_name(s['hdbi_reason'])}){covered}")
    if s.get("kernels", 0) == 0 and s.get("device_active_us") is None:
        console.print(f"[yellow]no CUDA device in trace:[/yellow] device time, ΔCT, ΔKT and HDBI are {NA}, "
                      "not zero. The host partition is measured; on a CPU run the ATen part also "
                      "holds the ops' own compute, since there is no device to hand it to.")


def render_health(summary: dict, console: Console) -> None:
    """Trace health first (decompose/health.py): each check pass or warn, with its numbers and what it affects."""
    checks = summary.get("health") or []
    if not checks:
        return
    table = Table(title="Trace health", title_justify="left")
    for col in ("check", "status", "numbers", "affects"):
        table.add_column(col)
    for c in checks:
        status = {"warn": "[yellow]warn[/yellow]", "pass": "pass"}.get(c["status"], c["status"])
        table.add_row(c["check"], status, _name(c["detail"]), _name(c.get("affects") or ""))
    console.print(table)


def _us_text(value) -> str:
    return NA if value is None else f"{value:.2f} µs"


def has_device(summary: dict) -> bool:
    return summary["all"].get("device_active_us") is not None


def render_phases(summary: dict, console: Console) -> None:
    columns = PHASE_COLUMNS if has_device(summary) else HOST_PHASE_COLUMNS
    title = "Per phase (µs)" if has_device(summary) else "Per phase, host side (µs)"
    table = Table(title=title, title_justify="left")
    rows = [("all", summary["all"])] + list(summary["phases"].items())
    cells = [[fmt(metrics.get(key), pattern) for key, _, pattern in columns] for _, metrics in rows]
    table.add_column("phase", no_wrap=True, min_width=max(len(name) for name, _ in rows))
    for i, (_, label, _) in enumerate(columns):
        # numbers are never cut with an ellipsis: headers wrap instead
        width = max(len(row[i]) for row in cells)
        table.add_column(label, justify="right", no_wrap=True, min_width=width)
    for (name, _), row in zip(rows, cells):
        table.add_row(name, *row)
    console.print(table)


def render_shares(s: dict, console: Console) -> None:
    if s.get("device_active_us") is None and s.get("orchestration_us") is None:
        console.print(f"Orchestration components ΔFT/ΔCT/ΔKT: {NA} (they are per kernel; the trace has none)")
        return
    table = Table(title="Orchestration components (whole trace)", title_justify="left")
    table.add_column("component")
    table.add_column("µs", justify="right")
    table.add_column("share of T_orch", justify="right")
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
    render_queue(s, console)


def render_queue(s: dict, console: Console) -> None:
    """Queue wait is device-side waiting: shown on its own, never added to host time."""
    if s.get("queue_wait_union_us") is None:
        return
    # the per-kernel sums (queue_wait_sum_us, tklqt_sum_us) add up overlapping waits: they are in
    # the JSON for the paper's TKLQT, never shown here as if they were elapsed time
    console.print(f"Queue wait (device side, not host time): kernels were waiting "
                  f"{fmt(s['queue_wait_union_us'])} µs of elapsed time (union of the waits); per kernel "
                  f"median {fmt(s['queue_wait_median_us'])} µs, p99 {fmt(s['queue_wait_p99_us'])} µs")


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


def render_idle(s: dict, console: Console) -> None:
    """GPU idle time by the host layer that caused it, per device (exact: parts sum to idle)."""
    devices = s.get("devices")
    if not devices:
        return
    table = Table(title="GPU idle by cause (what the launching thread was doing)", title_justify="left")
    table.add_column("cause")
    for dev in devices:
        table.add_column(f"device {dev} µs", justify="right")
        table.add_column("share", justify="right")
    for key, label in IDLE_ROWS:
        cells = []
        for d in devices.values():
            idle = d["idle_us"]
            value = d["idle_by_cause_us"][key]
            cells += [fmt(value), fmt(100.0 * value / idle if idle and value is not None else None, "{:.1f}%")]
        table.add_row(label, *cells)
    table.add_row("[bold]idle[/bold]", *[c for d in devices.values() for c in (fmt(d["idle_us"]), "")])
    table.add_row("busy", *[c for d in devices.values() for c in (fmt(d["busy_us"]), "")])
    for key, label in BUSY_ROWS:  # unions per kind: they may overlap, so they need not add up to busy
        table.add_row(label, *[c for d in devices.values() for c in (fmt(d.get(key)), _busy_share(d, key))])
    table.add_row("elapsed", *[c for d in devices.values() for c in (fmt(s["wall_us"]), "")])
    console.print(table)
    console.print("(kernels, copies and memsets are unions per kind: they can overlap, so their shares of busy "
                  "time need not add up to 100%)")


def render_host_partition(s: dict, console: Console) -> None:
    """The exact partition of the threads that launch GPU work, the other threads beside it."""
    table = Table(title="Host thread time, exact partition (summed over the threads that launch GPU work)",
                  title_justify="left")
    table.add_column("part")
    table.add_column("µs", justify="right")
    table.add_column("share", justify="right")
    apart = s.get("host_nonlaunching_thread_us") is not None
    if apart:
        table.add_column("threads that launch nothing µs", justify="right")
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


def render_stalls(summary: dict, console: Console) -> None:
    """The frames that held the longest host stalls (meta ``host_stall_frames``)."""
    frames = (summary.get("meta") or {}).get("host_stall_frames") or []
    if not frames:
        return
    table = Table(title="Host stalls by innermost frame (threshold "
                  f"{fmt((summary.get('meta') or {}).get('host_stall_threshold_us'))} µs)", title_justify="left")
    table.add_column("frame")
    table.add_column("stalls", justify="right")
    table.add_column("host µs (Σ threads)", justify="right")
    table.add_column("GPU idle µs", justify="right")
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
    table = Table(title=f"Top {top} ATen ops by orchestration time", title_justify="left")
    for col in ("op", "calls", "kernels", "T_orch µs", "ΔFT µs", "ΔCT µs", "device µs"):
        table.add_column(col, justify="left" if col == "op" else "right")
    for row in ops.head(top).to_dict("records"):
        table.add_row(_name(row["op_name"]), f"{row['calls']:,}", f"{row['kernels']:,}",
                      fmt(_num(row["orchestration_us"])), fmt(_num(row["ft_us"])), fmt(_num(row["ct_us"])),
                      fmt(_num(row["device_active_us"])))
    console.print(table)


def _render_top_ops_host(ops, console: Console, top: int) -> None:
    """Without device activity: the outermost ATen ops by inclusive host time."""
    rows = ops.sort_values("host_us", ascending=False, kind="stable").head(top)
    table = Table(title=f"Top {top} ATen ops by host time (outermost calls, no device activity)",
                  title_justify="left")
    for col in ("op", "calls", "host µs", "µs/call"):
        table.add_column(col, justify="left" if col == "op" else "right")
    for row in rows.to_dict("records"):
        per_call = row["host_us"] / row["root_calls"] if row["root_calls"] else None
        table.add_row(_name(row["op_name"]), f"{row['root_calls']:,}", fmt(_num(row["host_us"])),
                      fmt(_num(per_call), "{:,.2f}"))
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
        table.add_column(col, justify="right" if col == "count" else "left")
    for code, d in diags.items():
        table.add_row(_name(code), d["severity"], f"{d['count']:,}", _name(d.get("example", "")))
    console.print(table)


def render_links(s: dict, console: Console) -> None:
    """Orphans and chain coverage (only beside a device: a CPU run has no kernels to link)."""
    console.print(f"orphan kernels: {s['orphan_kernels']:,} ({fmt(s.get('orphan_device_us'))} µs of device time, "
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
