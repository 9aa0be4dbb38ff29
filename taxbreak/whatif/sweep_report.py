"""Sweep outputs: ``table.csv``, SVG plots, ``sweep.html`` and the transition point in ``sweep.json``."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..report.sanitize import csv_frame, html_text
from ..report.words import NOT_MEASURED
from ..trace.fileio import write_output
from .svg import Chart, Series, has_values, render_chart
from .sweep import INDEX, _write_json, read_index
from .sweep_table import as_records, build_table, grid_rows
from .transition import transition_points

# (column, chart label) of every plotted metric.
PLOTTED = (
    ("hdbi", "HDBI"),
    ("framework_us_per_token", "framework ΔFT (µs/token)"),
    ("library_us_per_token", "CUDA library ΔCT (µs/token)"),
    ("launch_floor_us_per_token", "launch floor ΔKT (µs/token)"),
    ("device_active_us_per_token", "device active (µs/token)"),
    ("kernels_per_token", "kernels per token"),
    ("host_thread_us_per_token", "host wall time (µs/token)"),
    ("step_us", "step latency (µs)"),
)
AXES = {"batch": "batch size", "seq_len": "sequence length"}


def series_chart(rows: pd.DataFrame, metric: str, label: str, along: str, phase: str,
                 threshold: float | None = None) -> Chart:
    """``metric`` against ``along`` (batch or seq_len), one line per value of the other axis."""
    other = "seq_len" if along == "batch" else "batch"
    chart = Chart(f"{phase}: {label} vs {AXES[along]}", AXES[along], label,
                  reference_y=threshold if metric == "hdbi" else None,
                  reference_label=f"HDBI = {threshold:g}" if threshold is not None else "",
                  y_max=1.0 if metric == "hdbi" else None)
    for value, group in rows.groupby(other, sort=True):
        group = group.sort_values(along)
        ys = [None if pd.isna(v) else float(v) for v in group[metric]]
        chart.series.append(Series(f"{'S' if other == 'seq_len' else 'B'}={int(value)}",
                                   [float(x) for x in group[along]], ys))
    return chart


def mixed_chart(table: pd.DataFrame) -> Chart | None:
    """Step latency per token (the mixed batch's marginal cost proxy) against decode share."""
    rows = table[table["kind"] == "mixed"] if not table.empty else table
    if rows.empty:
        return None
    chart = Chart("mixed: step latency per token vs decode share", "decode-token share r",
                  "µs per token", log_x=False)
    for seq_len, group in rows.groupby("seq_len", sort=True):
        group = group.sort_values("decode_share")
        ys = (group["step_us"] / group["tokens_per_step"]).tolist()
        chart.series.append(Series(f"T={int(seq_len)}", group["decode_share"].tolist(),
                                   [None if pd.isna(y) else float(y) for y in ys]))
    return chart


def build_charts(table: pd.DataFrame, threshold: float, transition: dict | None = None) -> dict[str, Chart]:
    """Every chart of a sweep, keyed by file stem (``decode-hdbi-vs-batch``).

    HDBI charts carry a dotted vertical line at each curve's transition point.
    """
    charts: dict[str, Chart] = {}
    grid = grid_rows(table)
    for phase in ("prefill", "decode"):
        rows = grid[grid["phase"] == phase] if not grid.empty else grid
        if rows.empty:
            continue
        for metric, label in PLOTTED:
            for along in AXES:
                chart = series_chart(rows, metric, label, along, phase, threshold)
                if metric == "hdbi":
                    chart.markers = transition_markers((transition or {}).get("phases", {}).get(phase, {}), along)
                charts[f"{phase}-{metric}-vs-{along}"] = chart
    mixed = mixed_chart(table)
    if mixed is not None:
        charts["mixed-cost-vs-share"] = mixed
    return charts


def transition_markers(info: dict, along: str) -> list[tuple[float, str]]:
    """(x, series label) of each HDBI crossing along ``along`` (labels as :func:`series_chart` names lines)."""
    key, other, prefix = ("by_batch", "seq_len", "S") if along == "batch" else ("by_seq_len", "batch", "B")
    return [(c["hdbi"]["x"], f"{prefix}={c[other]}") for c in info.get(key, []) if c["hdbi"]["x"] is not None]


def write_sweep_outputs(sweep_dir: str | Path, threshold: float = 0.5) -> dict:
    """Write ``table.csv``, ``plots/*.svg``, ``sweep.html``; add the transition to ``sweep.json``.

    Returns:
        ``{"table": DataFrame, "notes": [...], "transition": {...}, "plots": [paths], "html": path}``.
    """
    root = Path(sweep_dir)
    table, notes = build_table(root)
    grid = grid_rows(table)
    transition = transition_points(grid, threshold) if not grid.empty else {"phases": {}, "threshold": threshold}
    write_output(root / "table.csv", csv_frame(table).to_csv(index=False))  # atomic, formulas quoted
    charts = build_charts(table, threshold, transition)
    plot_dir = root / "plots"
    plot_dir.mkdir(exist_ok=True)
    # a chart without any measured point (every device metric of a CPU sweep) is named in one
    # sentence of the page instead of being drawn
    svgs = {stem: render_chart(chart, stem) for stem, chart in charts.items() if has_values(chart)}
    unplotted = unplotted_sentence([c for c in charts.values() if not has_values(c)])
    paths = []
    for stem, svg in svgs.items():
        write_output(plot_dir / f"{stem}.svg", svg)
        paths.append(plot_dir / f"{stem}.svg")
    html_path = root / "sweep.html"
    write_output(html_path, render_html(read_index(root), table, transition, svgs, notes, unplotted))
    index = read_index(root)
    index["transition"] = transition
    index["outputs"] = {"table": "table.csv", "html": "sweep.html", "plots": [f"plots/{p.name}" for p in paths]}
    _write_json(root / INDEX, index)
    return {"table": table, "notes": notes, "transition": transition, "plots": paths, "html": html_path}


_TABLE_COLUMNS = ("name", "phase", "batch", "seq_len", "decode_share", "steps", "step_us", "hdbi",
                  "framework_us_per_token", "library_us_per_token", "launch_floor_us_per_token",
                  "device_active_us_per_token", "kernels_per_token", "host_thread_us_per_token")


def _cell(value, column: str = "") -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        if column == "decode_share":  # a grid point has no decode share: not applicable
            return "<td>–</td>"
        return f'<td class="na">{NOT_MEASURED}</td>'
    if isinstance(value, float):
        return f"<td>{value:,.3g}</td>" if abs(value) < 100 else f"<td>{value:,.0f}</td>"
    return f"<td>{html_text(str(value))}</td>"


def unplotted_sentence(charts: list[Chart]) -> str:
    """One sentence naming the metrics that had nothing to plot, with their phases."""
    if not charts:
        return ""
    metrics: dict[str, set[str]] = {}
    for chart in charts:
        phase = chart.title.split(":", 1)[0]
        metrics.setdefault(chart.y_label, set()).add(phase)
    parts = [f"{label} ({', '.join(sorted(phases))})" for label, phases in metrics.items()]
    return f"Not plotted, no point measured: {'; '.join(parts)}."


def render_html(index: dict, table: pd.DataFrame, transition: dict, svgs: dict[str, str], notes: list[str],
                unplotted: str = "") -> str:
    """One self-contained page: config, transition rule and result, the table, every plot."""
    cfg = index.get("config", {})
    head = ("<!doctype html><html><head><meta charset='utf-8'><title>taxbreak sweep</title><style>"
            "body{font-family:system-ui,sans-serif;margin:24px;color:#222}table{border-collapse:collapse;"
            "font-size:12px}td,th{border:1px solid #ddd;padding:3px 6px;text-align:right}"
            ".na{color:#999;font-style:italic}.plots{display:flex;flex-wrap:wrap;gap:12px}</style></head><body>")
    parts = [head, f"<h1>taxbreak sweep: {html_text(str(cfg.get('model')))}</h1>",
             f"<p>batch sizes {cfg.get('batch_sizes')} × sequence lengths {cfg.get('seq_lens')}, "
             f"{cfg.get('new_tokens')} new tokens, warm-up {cfg.get('warmup')}, runs {cfg.get('runs')}</p>",
             "<h2>Transition point</h2>", f"<p>Rule: {html_text(transition.get('rule', ''))}</p>",
             _transition_html(transition), "<h2>Table</h2>", _table_html(table)]
    if notes:
        parts.append("<h3>Points left out</h3><ul>" + "".join(f"<li>{html_text(n)}</li>" for n in notes) + "</ul>")
    parts.append("<h2>Plots</h2>")
    if unplotted:
        parts.append(f"<p class='na'>{html_text(unplotted)}</p>")
    parts.append("<div class='plots'>" + "".join(svgs.values()) + "</div></body></html>")
    return "".join(parts)


def _table_html(table: pd.DataFrame) -> str:
    if table.empty:
        return "<p>no complete point</p>"
    cols = [c for c in _TABLE_COLUMNS if c in table.columns]
    head = "<tr>" + "".join(f"<th>{html_text(c)}</th>" for c in cols) + "</tr>"
    body = "".join("<tr>" + "".join(_cell(r.get(c), c) for c in cols) + "</tr>" for r in as_records(table))
    return f"<table>{head}{body}</table>"


def _transition_html(transition: dict) -> str:
    items = []
    for phase, info in transition.get("phases", {}).items():
        items.append(f"<li><b>{html_text(phase)}</b>: {html_text(describe_phase(info))}</li>")
    return "<ul>" + "".join(items) + "</ul>" if items else "<p>no grid point</p>"


def describe_phase(info: dict) -> str:
    """One line per phase: the transition found (or why there is none)."""
    if info.get("status") != "determined":
        return info.get("reason", "undetermined")
    smallest = info.get("smallest_device_bound")
    parts = [f"smallest device-bound shape B={smallest['batch']} S={smallest['seq_len']} "
             f"(HDBI {smallest['hdbi']:.2f})" if smallest else "no grid point reaches the threshold"]
    for curve in info.get("by_batch", []):
        parts.append(f"S={curve['seq_len']}: HDBI {_crossing_text(curve['hdbi'])}, device > exposed "
                     f"{_crossing_text(curve['device_exceeds_exposed'])}")
    return "; ".join(parts)


def _crossing_text(hit: dict) -> str:
    status = hit["status"].replace("_", " ")
    return status if hit["x"] is None else f"at B≈{hit['x']:.2f} ({status})"
