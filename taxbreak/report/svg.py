"""Small dependency-free SVG charts: stacked bars and line charts.

Every value that is ``None`` is drawn as absent and labelled "not measured";
nothing unmeasured is drawn as a zero-length bar or a zero point.
"""
from __future__ import annotations

from dataclasses import dataclass

from .markup import Markup, join, tag, void
from .metrics import fmt_value

COLORS = {
    "framework_python_us": "#4e79a7", "framework_dispatch_us": "#a0cbe8", "library_us": "#f28e2b",
    "launch_floor_us": "#e15759", "launch_latency_us": "#ff9d9a", "device_active_us": "#59a14f",
    "hdbi": "#b07aa1", "orchestration_us": "#e15759", "queue_wait_union_us": "#bab0ac",
}
# GPU idle causes (decompose/idle.py), in stacking order
IDLE_COLORS = {"python": "#4e79a7", "dispatch": "#a0cbe8", "library": "#f28e2b", "launch_api": "#e15759",
               "sync": "#b07aa1", "other_api": "#9c755f", "untraced": "#bab0ac", "unlinked": "#d4a6c8",
               "nothing_pending": "#e8e8e8"}
FONT = "font-family:system-ui,sans-serif;font-size:12px"


@dataclass
class Segment:
    key: str
    label: str
    value: float | None  # µs


@dataclass
class BarGroup:
    """One phase: stacked host components and the device-active bar."""

    label: str
    segments: list[Segment]
    device_us: float | None
    hdbi: float | None
    orchestration_us: float | None = None
    device_note: str = "no CUDA device in trace"
    queue_us: float | None = None  # union of queue waits: device-side, drawn on its own


def _svg(width: int, height: int, *children, label: str) -> Markup:
    return tag("svg", *children, xmlns="http://www.w3.org/2000/svg", width=width, height=height,
               viewBox=f"0 0 {width} {height}", role="img", aria_label=label, style=FONT)


def _text(x: float, y: float, text, anchor: str = "start", **attrs) -> Markup:
    return tag("text", text, x=f"{x:.1f}", y=f"{y:.1f}", text_anchor=anchor, **attrs)


def _rect(x: float, y: float, w: float, h: float, fill: str, title: str | None = None, **attrs) -> Markup:
    if title is None:
        return void("rect", x=f"{x:.2f}", y=f"{y:.2f}", width=f"{max(w, 0):.2f}", height=f"{h:.2f}",
                    fill=fill, **attrs)
    return tag("rect", tag("title", title), x=f"{x:.2f}", y=f"{y:.2f}", width=f"{max(w, 0):.2f}",
               height=f"{h:.2f}", fill=fill, **attrs)


def stacked_bars(groups: list[BarGroup], width: int = 860) -> Markup:
    """Per group: a stacked bar of host components over a device-active bar, one scale."""
    left, right, bar_h, gap = 150, 290, 20, 18
    totals = [sum(s.value or 0 for s in g.segments) for g in groups]
    peak = max([*totals, *[g.device_us or 0 for g in groups], 1e-9])
    scale = (width - left - right) / peak
    rows, y = [], 10
    for group, total in zip(groups, totals):
        rows.append(_text(4, y + 14, group.label, font_weight="bold"))
        rows.append(_text(4, y + 30, f"HDBI {fmt_value(group.hdbi, 'hdbi')}"))
        x = left
        for seg in group.segments:
            if seg.value:
                w = seg.value * scale
                rows.append(_rect(x, y, w, bar_h, COLORS.get(seg.key, "#bab0ac"),
                                  f"{seg.label}: {fmt_value(seg.value)} µs"))
                x += w
        rows.append(_text(x + 4, y + 14, _host_label(group, total)))
        y += bar_h + 4
        if group.device_us is None:
            rows.append(_text(left, y + 14, group.device_note, fill="#666", font_style="italic"))
        else:
            w = group.device_us * scale
            rows.append(_rect(left, y, w, bar_h, COLORS["device_active_us"],
                              f"T_DeviceActive: {fmt_value(group.device_us)} µs"))
            rows.append(_text(left + w + 4, y + 14, f"device {fmt_value(group.device_us)} µs"))
        if group.queue_us:
            y += bar_h + 4
            w = group.queue_us * scale
            rows.append(_rect(left, y, w, bar_h, COLORS["queue_wait_union_us"],
                              f"queue wait (union, device side): {fmt_value(group.queue_us)} µs"))
            rows.append(_text(left + w + 4, y + 14, f"queue wait {fmt_value(group.queue_us)} µs (not host time)"))
        y += bar_h + gap
    return _svg(width, y, *rows, label="orchestration components and device-active time per phase")


def idle_bars(groups: list[tuple[str, dict]], width: int = 860) -> Markup:
    """Per group: one stacked bar of GPU idle time by cause (µs, summed over devices)."""
    left, right, bar_h, gap = 150, 200, 20, 12
    totals = [sum(v or 0 for v in causes.values()) for _, causes in groups]
    scale = (width - left - right) / max([*totals, 1e-9])
    rows, y = [], 10
    for (label, causes), total in zip(groups, totals):
        rows.append(_text(4, y + 14, label, font_weight="bold"))
        x = left
        for cause, color in IDLE_COLORS.items():
            value = causes.get(cause) or 0.0
            if value:
                rows.append(_rect(x, y, value * scale, bar_h, color, f"{cause}: {fmt_value(value)} µs"))
                x += value * scale
        rows.append(_text(x + 4, y + 14, f"idle {fmt_value(total)} µs"))
        y += bar_h + gap
    return _svg(width, y, *rows, label="GPU idle time by cause per phase")


def _host_label(group: BarGroup, total: float) -> str:
    """T_Orchestrate (which excludes the launch residual, as in the method) and the residual."""
    residual = next((s.value for s in group.segments if s.key == "launch_latency_us"), None)
    if all(s.value is None for s in group.segments):
        return "host components not measured"
    if group.orchestration_us is None:
        return f"host {fmt_value(total)} µs"
    extra = f" + exposed launch latency {fmt_value(residual)} µs" if residual else ""
    return f"T_Orchestrate {fmt_value(group.orchestration_us)} µs{extra}"


def legend(items: list[tuple[str, str, str]]) -> Markup:
    """HTML legend: (color, label, value text) per item."""
    cells = [tag("span", tag("i", class_="swatch", style=f"background:{color}"), f" {label}",
                 tag("b", f" {value}") if value else None, class_="legend-item")
             for color, label, value in items]
    return tag("div", *cells, class_="legend")


def line_chart(xs: list, series: list[tuple[str, list[float | None], str]], y_label: str,
               y_max: float | None = None, width: int = 860, height: int = 170) -> Markup:
    """Lines over step index; a None value breaks the line (not measured)."""
    left, right, top, bottom = 60, 20, 14, 34
    values = [v for _, vs, _ in series for v in vs if v is not None]
    if not xs or not values:
        return _svg(width, 40, _text(8, 24, f"{y_label}: not measured", font_style="italic"), label=y_label)
    hi = y_max if y_max is not None else max(values) * 1.05 or 1.0
    n = max(len(xs) - 1, 1)
    def px(i: int) -> float:
        return left + (width - left - right) * (i / n if len(xs) > 1 else 0.5)
    def py(v: float) -> float:
        return top + (height - top - bottom) * (1 - min(v, hi) / hi)
    parts = [void("line", x1=left, y1=py(0), x2=width - right, y2=py(0), stroke="#999"),
             void("line", x1=left, y1=top, x2=left, y2=py(0), stroke="#999"),
             _text(left - 6, py(hi) + 4, fmt_value(hi), "end"), _text(left - 6, py(0) + 4, "0", "end"),
             _text(left, height - 6, f"step ({len(xs)} steps)"),
             _text(width - right, height - 6, y_label, "end")]
    for label, vs, color in series:
        parts.extend(_polylines(vs, px, py, color))
        key = "hdbi" if "hdbi" in label.lower() else ""
        parts.extend(tag("circle", tag("title", f"{label} step {xs[i]}: {fmt_value(v, key)}"),
                         cx=f"{px(i):.1f}", cy=f"{py(v):.1f}", r=2.5, fill=color)
                     for i, v in enumerate(vs) if v is not None)
    return _svg(width, height, *parts, label=y_label)


def _polylines(values, px, py, color) -> list[Markup]:
    """One polyline per run of measured values (None splits the line)."""
    runs, current = [], []
    for i, v in enumerate(values):
        if v is None:
            if current:
                runs.append(current)
            current = []
        else:
            current.append(f"{px(i):.1f},{py(v):.1f}")
    if current:
        runs.append(current)
    return [void("polyline", points=" ".join(r), fill="none", stroke=color, stroke_width=1.5) for r in runs]


def join_svgs(*parts) -> Markup:
    return join(parts)
