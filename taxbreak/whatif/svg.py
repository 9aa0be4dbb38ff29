"""Sweep line charts as static SVG, drawn by matplotlib (:mod:`taxbreak.whatif.plotting`).

One chart = one metric against one axis (batch size or sequence length), one
line per value of the other axis. Missing points (``None``/NaN: not measured)
break the line instead of being drawn as 0; a chart without any measured point
is not drawn at all (:func:`has_values`), and the sweep page names it in one
sentence instead.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")
WIDTH_IN, HEIGHT_IN = 6.2, 3.4


@dataclass
class Series:
    """One line: a label and its (x, y) points; y ``None`` = not measured."""

    label: str
    x: list[float]
    y: list[float | None]


@dataclass
class Chart:
    """A line chart: title, axis labels, series, optional horizontal reference line."""

    title: str
    x_label: str
    y_label: str
    series: list[Series] = field(default_factory=list)
    log_x: bool = True
    reference_y: float | None = None
    reference_label: str = ""
    y_max: float | None = None  # fixed top of the y axis (HDBI: 1)
    markers: list[tuple[float, str]] = field(default_factory=list)  # vertical lines (x, series label)


def _finite(value) -> bool:
    return value is not None and isinstance(value, (int, float)) and math.isfinite(value)


def has_values(chart: Chart) -> bool:
    """True when at least one point of the chart was measured."""
    return any(_finite(y) for s in chart.series for y in s.y)


def _fmt(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 1e4 or abs(value) < 1e-2:
        return f"{value:.2g}"
    return f"{value:g}" if abs(value) >= 1 else f"{value:.2f}"


def render_chart(chart: Chart, name: str = "chart") -> str:
    """The chart as one ``<svg>`` element (string); ``name`` prefixes its ids."""
    from . import plotting

    return str(plotting.to_svg(chart_figure(chart), chart.title, name))


def chart_figure(chart: Chart):
    """The matplotlib figure of ``chart`` (an empty chart says "not measured" in its middle)."""
    from . import plotting

    with plotting.style():
        fig = plotting.figure(HEIGHT_IN, WIDTH_IN)
        ax = fig.add_subplot()
        ax.set_title(chart.title, fontweight="bold")
        ax.set_xlabel(chart.x_label)
        ax.set_ylabel(chart.y_label)
        if not has_values(chart):
            ax.text(0.5, 0.5, "not measured: no values to plot", transform=ax.transAxes, ha="center",
                    color="#666")
            ax.set_xticks([])
            ax.set_yticks([])
            return fig
        _draw_series(ax, chart)
        _x_axis(ax, chart)
        ax.set_ylim(bottom=min(0.0, *(y for s in chart.series for y in s.y if _finite(y))), top=chart.y_max)
        plotting.plain_ticks(ax.yaxis)
        ax.grid(color="#eeeeee", linewidth=0.6)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
        return fig


def _draw_series(ax, chart: Chart) -> None:
    colors = {}
    for i, series in enumerate(chart.series):
        points = sorted(zip(series.x, series.y), key=lambda p: p[0])
        ys = [y if _finite(y) else float("nan") for _, y in points]  # NaN breaks the line
        colors[series.label] = PALETTE[i % len(PALETTE)]
        ax.plot([x for x, _ in points], ys, color=colors[series.label], marker="o", markersize=3.5,
                linewidth=1.6, label=series.label, gid=f"series-{i}")
    if _finite(chart.reference_y):
        ax.axhline(chart.reference_y, color="#888", linestyle=(0, (4, 3)), linewidth=1,
                   label=chart.reference_label or None, gid="reference")
    for n, (x, label) in enumerate(chart.markers):
        if _finite(x) and not (chart.log_x and x <= 0):
            ax.axvline(x, color=colors.get(label, "#888"), linestyle=(0, (2, 3)), linewidth=1,
                       label=f"{label}: transition at {x:.3g}", gid=f"marker-{n}")


def _x_axis(ax, chart: Chart) -> None:
    """log2 x when every x is positive (powers of two evenly spaced), a tick at every x."""
    xs = sorted({x for s in chart.series for x in s.x if _finite(x)})
    if chart.log_x and xs and xs[0] > 0:
        ax.set_xscale("log", base=2)
        ax.minorticks_off()
    if 0 < len(xs) <= 12:
        ax.set_xticks(xs, [_fmt(x) for x in xs])
