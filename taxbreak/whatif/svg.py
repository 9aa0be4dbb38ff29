"""Small self-contained SVG line charts (no JavaScript, no external fonts or files).

One chart = one metric against one axis (batch size or sequence length), one
line per value of the other axis. Missing points (``None``/NaN: not measured)
break the line and are listed under the chart instead of being drawn as 0.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")
WIDTH, HEIGHT = 520, 300
MARGIN = {"left": 64, "right": 120, "top": 34, "bottom": 44}


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


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    if high <= low:
        return [low]
    step = 10 ** math.floor(math.log10((high - low) / count))
    for mult in (1, 2, 5, 10):
        if (high - low) / (step * mult) <= count:
            step *= mult
            break
    start = math.floor(low / step) * step
    return [start + i * step for i in range(int((high - start) / step) + 2) if start + i * step <= high + 1e-12]


def _fmt(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 1e4 or abs(value) < 1e-2:
        return f"{value:.2g}"
    return f"{value:g}" if abs(value) >= 1 else f"{value:.2f}"


class _Scale:
    def __init__(self, chart: Chart, xs: list[float], ys: list[float]) -> None:
        self.log_x = chart.log_x and min(xs) > 0
        fx = [math.log2(x) for x in xs] if self.log_x else xs
        self.x0, self.x1 = min(fx), max(fx) if max(fx) > min(fx) else min(fx) + 1
        y_all = ys + ([chart.reference_y] if _finite(chart.reference_y) else [])
        self.y0 = min(0.0, min(y_all))
        self.y1 = chart.y_max if chart.y_max is not None else (max(y_all) * 1.08 if max(y_all) > 0 else 1.0)
        self.w = WIDTH - MARGIN["left"] - MARGIN["right"]
        self.h = HEIGHT - MARGIN["top"] - MARGIN["bottom"]

    def px(self, x: float) -> float:
        fx = math.log2(x) if self.log_x else x
        return MARGIN["left"] + (fx - self.x0) / (self.x1 - self.x0) * self.w

    def py(self, y: float) -> float:
        return MARGIN["top"] + (1 - (y - self.y0) / (self.y1 - self.y0)) * self.h


def render_chart(chart: Chart) -> str:
    """The chart as one ``<svg>`` element (string)."""
    xs = sorted({x for s in chart.series for x in s.x})
    ys = [y for s in chart.series for y in s.y if _finite(y)]
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" '
            f'height="{HEIGHT}" font-family="system-ui,sans-serif" font-size="11" role="img">'
            f'<title>{escape(chart.title)}</title>'
            f'<text x="{WIDTH / 2}" y="18" text-anchor="middle" font-size="13" font-weight="600">{escape(chart.title)}</text>')
    if not xs or not ys:
        msg = "not measured: no values to plot"
        return head + f'<text x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle" fill="#666">{msg}</text></svg>'
    scale = _Scale(chart, xs, ys)
    parts = [head, _axes(chart, scale, xs), _reference(chart, scale), _markers(chart, scale)]
    parts += [_line(s, scale, PALETTE[i % len(PALETTE)], i) for i, s in enumerate(chart.series)]
    return "".join(parts) + "</svg>"


def _axes(chart: Chart, scale: _Scale, xs: list[float]) -> str:
    left, bottom = MARGIN["left"], HEIGHT - MARGIN["bottom"]
    out = [f'<line x1="{left}" y1="{bottom}" x2="{left + scale.w}" y2="{bottom}" stroke="#333"/>',
           f'<line x1="{left}" y1="{MARGIN["top"]}" x2="{left}" y2="{bottom}" stroke="#333"/>']
    for x in xs:
        px = scale.px(x)
        out.append(f'<text x="{px:.1f}" y="{bottom + 14}" text-anchor="middle">{_fmt(x)}</text>')
    for y in _ticks(scale.y0, scale.y1):
        py = scale.py(y)
        out.append(f'<line x1="{left}" y1="{py:.1f}" x2="{left + scale.w}" y2="{py:.1f}" stroke="#eee"/>'
                   f'<text x="{left - 6}" y="{py + 4:.1f}" text-anchor="end">{_fmt(y)}</text>')
    out.append(f'<text x="{left + scale.w / 2}" y="{HEIGHT - 8}" text-anchor="middle">{escape(chart.x_label)}</text>')
    out.append(f'<text transform="translate(14,{MARGIN["top"] + scale.h / 2}) rotate(-90)" '
               f'text-anchor="middle">{escape(chart.y_label)}</text>')
    return "".join(out)


def _reference(chart: Chart, scale: _Scale) -> str:
    if not _finite(chart.reference_y):
        return ""
    py = scale.py(chart.reference_y)
    return (f'<line x1="{MARGIN["left"]}" y1="{py:.1f}" x2="{MARGIN["left"] + scale.w}" y2="{py:.1f}" '
            f'stroke="#888" stroke-dasharray="4 3"/><text x="{MARGIN["left"] + scale.w - 2}" y="{py - 4:.1f}" '
            f'text-anchor="end" fill="#666">{escape(chart.reference_label)}</text>')


def _markers(chart: Chart, scale: _Scale) -> str:
    """A dotted vertical line per marker, in the colour of the series it belongs to."""
    colors = {s.label: PALETTE[i % len(PALETTE)] for i, s in enumerate(chart.series)}
    out = []
    for x, label in chart.markers:
        if not _finite(x) or (scale.log_x and x <= 0):
            continue
        px = scale.px(x)
        out.append(f'<line x1="{px:.1f}" y1="{MARGIN["top"]}" x2="{px:.1f}" y2="{HEIGHT - MARGIN["bottom"]}" '
                   f'stroke="{colors.get(label, "#888")}" stroke-dasharray="2 3"><title>{escape(label)}: '
                   f'transition at {x:.3g}</title></line>')
    return "".join(out)


def _line(series: Series, scale: _Scale, color: str, index: int) -> str:
    segments, current = [], []
    for x, y in sorted(zip(series.x, series.y), key=lambda p: p[0]):
        if _finite(y):
            current.append(f"{scale.px(x):.1f},{scale.py(y):.1f}")
        elif current:  # an unmeasured point breaks the line
            segments.append(current)
            current = []
    if current:
        segments.append(current)
    out = [f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{" ".join(s)}"/>' for s in segments]
    out += [f'<circle cx="{p.split(",")[0]}" cy="{p.split(",")[1]}" r="3" fill="{color}"/>' for s in segments for p in s]
    ly = MARGIN["top"] + 14 * index + 6
    lx = WIDTH - MARGIN["right"] + 10
    out.append(f'<line x1="{lx}" y1="{ly}" x2="{lx + 14}" y2="{ly}" stroke="{color}" stroke-width="2"/>'
               f'<text x="{lx + 18}" y="{ly + 4}">{escape(series.label)}</text>')
    return "".join(out)
