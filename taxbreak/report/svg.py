"""The HTML report's charts, written as SVG by hand: per-phase bars and per-step series.

Every mark carries an SVG ``<title>`` naming what it draws and its value (the
browser's own tooltip; the page script shows it at once as a styled tooltip,
:mod:`taxbreak.report.page`). Every value that is ``None`` is absent from a
chart and named as not measured in its labels; nothing unmeasured is drawn as
a zero-length bar or a zero point. A chart with nothing to show is not drawn:
its function returns ``None`` and the caller says why in one line.

Writing the elements directly costs a few ms per chart; matplotlib's SVG
backend took ~0.1-0.2 s each (docs/report.md, the cost table under "HTML report").
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .markup import Markup, tag, void
from .metrics import COMPONENTS, fmt_value
from .words import NOT_MEASURED

COLORS = {
    "framework_python_us": "#4e79a7", "framework_dispatch_us": "#a0cbe8", "library_us": "#f28e2b",
    "launch_floor_us": "#e15759", "launch_latency_us": "#ff9d9a", "device_active_us": "#59a14f",
    "hdbi": "#b07aa1", "orchestration_us": "#e15759", "queue_wait_union_us": "#bab0ac",
}
# GPU idle causes (decompose/idle.py), in stacking order
IDLE_COLORS = {"python": "#4e79a7", "dispatch": "#a0cbe8", "library": "#f28e2b", "launch_api": "#d37295",
               "sync": "#b07aa1", "other_api": "#9c755f", "untraced": "#bab0ac", "launch_floor": "#e15759",
               "launch_latency": "#ff9d9a", "dependency_wait": "#9d7660", "graph_internal": "#8cd17d", "copy_issued": "#f1ce63",
               "unlinked": "#d4a6c8", "nothing_pending": "#e8e8e8", "blocked": "#79706e", "host_stall": "#b6992d"}
PHASE_COLORS = {"prefill": "#4e79a7", "decode": "#e15759", "mixed": "#f28e2b", "unknown": "#76b7b2"}
WIDTH = 1000
LABEL_W = 320  # left column of the bar charts: the phase and its numbers
BAR_H = 16
CHAR_W = 6.6  # average width of one 11 px character, for legend layout


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


def _us(value: float | None) -> str:
    return NOT_MEASURED if value is None else f"{fmt_value(value)} µs"


def tick_text(value: float) -> str:
    """A tick in plain digits with thousands separators (no ``1e7`` offset)."""
    if value == 0:
        return "0"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.3g}"


def nice_ticks(hi: float, count: int = 5) -> list[float]:
    """0 and round steps (1, 2, 5 × 10^k) up to the first at or above ``hi``."""
    if not hi or hi <= 0 or not math.isfinite(hi):
        return [0.0, 1.0]
    raw = hi / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    return [i * step for i in range(int(math.ceil(hi / step - 1e-9)) + 1)]


def chart(width: float, height: float, *children, label: str, name: str, cls: str = "chart", **attrs) -> Markup:
    """The ``<svg>`` root: one id per chart (``name``), its label for screen readers."""
    return tag("svg", *children, xmlns="http://www.w3.org/2000/svg", width=f"{width:.0f}", height=f"{height:.0f}",
               viewBox=f"0 0 {width:.0f} {height:.0f}", role="img", aria_label=label, id=name, class_=cls, **attrs)


def text(x: float, y: float, content, anchor: str | None = None, **attrs) -> Markup:
    return tag("text", content, x=f"{x:.1f}", y=f"{y:.1f}", text_anchor=anchor, **attrs)


def rect(x: float, y: float, w: float, h: float, fill: str, tip: str | None = None, **attrs) -> Markup:
    """A bar; ``tip`` is its ``<title>`` (hover text)."""
    size = dict(x=f"{x:.3f}", y=f"{y:.1f}", width=f"{max(w, 0):.3f}", height=f"{h:.1f}", fill=fill, **attrs)
    return void("rect", **size) if tip is None else tag("rect", tag("title", tip), **size)


def x_axis(left: float, width: float, y: float, hi: float, label: str) -> tuple[list[Markup], float]:
    """A value axis from 0 to the last tick at or above ``hi``: grid lines up to ``y``, ticks
    under it, the label below; returns the parts and the scale (px per unit)."""
    ticks = nice_ticks(hi)
    scale = width / ticks[-1]
    parts = [void("line", x1=f"{left + t * scale:.1f}", y1=0, x2=f"{left + t * scale:.1f}", y2=f"{y:.1f}",
                  stroke="#e5e5e5") for t in ticks]
    parts.append(void("line", x1=f"{left:.1f}", y1=f"{y:.1f}", x2=f"{left + width:.1f}", y2=f"{y:.1f}", stroke="#999"))
    parts += [text(left + t * scale, y + 14, tick_text(t), "middle") for t in ticks]
    parts.append(text(left + width / 2, y + 30, label, "middle"))
    return parts, scale


def legend(items: list[tuple[str, str]], top: float, width: float = WIDTH, left: float = 8) -> tuple[list[Markup], float]:
    """Swatches with their names, wrapped to ``width``; returns the parts and the height used."""
    parts, x, y = [], left, top
    for color, name in items:
        room = 18 + len(name) * CHAR_W + 16
        if x + room > width and x > left:
            x, y = left, y + 18
        parts += [rect(x, y, 12, 12, color), text(x + 16, y + 10, name, class_="legend")]
        x += room
    return parts, (y - top + 18) if items else 0.0


def _group_lines(group: BarGroup) -> tuple[str, str, str]:
    """Phase, HDBI, T_Orchestrate (which excludes the launch latency, as in the method) and
    device-active time: the numbers stay readable whatever the bar lengths."""
    device = group.device_note if group.device_us is None else f"device {_us(group.device_us)}"
    latency = next((s.value for s in group.segments if s.key == "launch_latency_us"), None)
    extra = f" + latency {fmt_value(latency)}" if latency else ""
    return (f"{group.label} · HDBI {fmt_value(group.hdbi, 'hdbi')}",
            f"T_Orchestrate {_us(group.orchestration_us)}{extra}", device)


def component_chart(groups: list[BarGroup]) -> Markup | None:
    """Per phase, on one µs axis: a bar of the stacked host components and a device-active
    bar under it. ``None`` when no phase has either."""
    rows = [g for g in groups if g.device_us is not None or any(s.value for s in g.segments)]
    if not rows:
        return None
    hi = max(max(sum(s.value or 0.0 for s in g.segments), g.device_us or 0.0) for g in rows)
    row_h, plot_w = 2 * BAR_H + 22, WIDTH - LABEL_W - 50
    axis, scale = x_axis(LABEL_W, plot_w, row_h * len(rows), hi, "µs (host bar: components stacked; "
                                                                      "device bar: T_DeviceActive)")
    parts, drawn = list(axis), set()
    for i, g in enumerate(rows):
        y = i * row_h + 6
        parts += [text(4, y + 11 + 13 * n, line, font_weight="bold" if n == 0 else None)
                  for n, line in enumerate(_group_lines(g))]
        x = LABEL_W
        for s in g.segments:
            if s.value:
                parts.append(rect(x, y, s.value * scale, BAR_H, COLORS[s.key], f"{g.label} · {s.label}: {_us(s.value)}",
                                  data_key=s.key))
                x += s.value * scale
                drawn.add(s.key)
        if g.device_us:
            parts.append(rect(LABEL_W, y + BAR_H + 2, g.device_us * scale, BAR_H, COLORS["device_active_us"],
                              f"{g.label} · T_DeviceActive: {_us(g.device_us)}", data_key="device_active_us"))
            drawn.add("device_active_us")
    items = [(COLORS[k], label) for k, label in COMPONENTS if k in drawn]
    items += [(COLORS["device_active_us"], "device active")] if "device_active_us" in drawn else []
    keys, height = legend(items, row_h * len(rows) + 40)
    return chart(WIDTH, row_h * len(rows) + 44 + height, *parts, *keys,
                 label="orchestration components and device-active time per phase", name="components")


def queue_chart(groups: list[BarGroup]) -> Markup | None:
    """Queue wait (union over kernels, device side: not host time) per phase; ``None`` when none."""
    rows = [g for g in groups if g.queue_us]
    if not rows:
        return None
    row_h = BAR_H + 8
    axis, scale = x_axis(LABEL_W, WIDTH - LABEL_W - 50, row_h * len(rows) + 4, max(g.queue_us for g in rows),
                         "µs during which at least one launched kernel waited (union)")
    parts = list(axis)
    for i, g in enumerate(rows):
        y = i * row_h + 6
        parts += [text(4, y + 12, f"{g.label}: {_us(g.queue_us)}"),
                  rect(LABEL_W, y, g.queue_us * scale, BAR_H, COLORS["queue_wait_union_us"],
                       f"{g.label} · queue wait (union, device side): {_us(g.queue_us)}")]
    return chart(WIDTH, row_h * len(rows) + 42, *parts, label="queue wait (union) per phase", name="queue")


def idle_chart(groups: list[tuple[str, dict | None]]) -> Markup | None:
    """Per phase: one stacked bar of GPU idle time by cause (µs, summed over devices)."""
    rows = [(label, causes) for label, causes in groups if causes and any(v for v in causes.values())]
    if not rows:
        return None
    totals = [sum(v or 0.0 for v in causes.values()) for _, causes in rows]
    row_h = BAR_H + 8
    axis, scale = x_axis(LABEL_W, WIDTH - LABEL_W - 50, row_h * len(rows) + 4, max(totals),
                         "µs of GPU idle time (Σ devices), by the host layer that caused it")
    parts, drawn = list(axis), set()
    for i, ((label, causes), total) in enumerate(zip(rows, totals)):
        y, x = i * row_h + 6, LABEL_W
        parts.append(text(4, y + 12, f"{label}: idle {fmt_value(total)} µs"))
        for cause, color in IDLE_COLORS.items():
            value = causes.get(cause) or 0.0
            if value:
                share = f" ({100 * value / total:.0f}%)" if total else ""
                parts.append(rect(x, y, value * scale, BAR_H, color, f"{label} · {cause.replace('_', ' ')}: "
                                  f"{_us(value)}{share}", data_key=cause,
                                  stroke="#999" if cause == "nothing_pending" else None))
                x += value * scale
                drawn.add(cause)
    keys, height = legend([(c, k.replace("_", " ")) for k, c in IDLE_COLORS.items() if k in drawn],
                          row_h * len(rows) + 44)
    return chart(WIDTH, row_h * len(rows) + 48 + height, *parts, *keys, label="GPU idle time by cause per phase",
                 name="idle")


STEP_LEFT, STEP_PLOT_H = 96, 150


def step_chart(steps: list[int], series: list[tuple[str, list[float | None]]], y_label: str,
               name: str, y_max: float | None = None) -> Markup | None:
    """One value per step and phase: a line per phase (a missing value breaks it), or bars
    when there is a single step (one dot says nothing). ``None`` when nothing is measured."""
    values = [v for _, vs in series for v in vs if v is not None]
    if not values:
        return None
    ticks = nice_ticks(y_max if y_max is not None else max(values))
    top, plot_w = 10, WIDTH - STEP_LEFT - 130
    py = lambda v: top + STEP_PLOT_H * (1 - min(v, ticks[-1]) / ticks[-1])  # noqa: E731
    px = _step_x(steps, STEP_LEFT, plot_w)
    parts = _y_axis(ticks, py, plot_w, y_label) + _step_ticks(steps, px, top + STEP_PLOT_H)
    key = "hdbi" if "HDBI" in y_label else ""
    for n, (phase, vs) in enumerate(series):
        color = PHASE_COLORS.get(phase, "#bab0ac")
        marks = [(steps[i], v) for i, v in enumerate(vs) if v is not None]
        if len(steps) == 1:
            parts += [rect(px(s) - 20, py(v), 40, py(0) - py(v), color, f"{phase} step {s}: {fmt_value(v, key)}")
                      for s, v in marks]
        else:
            parts += _polylines(steps, vs, px, py, color)
            parts += [tag("circle", tag("title", f"{phase} step {s}: {fmt_value(v, key)}"), cx=f"{px(s):.1f}",
                          cy=f"{py(v):.1f}", r=3, fill=color) for s, v in marks]
        if len(series) > 1:
            parts += [rect(WIDTH - 118, top + 18 * n, 12, 12, color), text(WIDTH - 102, top + 10 + 18 * n, phase)]
    return chart(WIDTH, top + STEP_PLOT_H + 40, *parts, label=f"{y_label} per step", name=name)


def _step_x(steps: list[int], left: float, width: float):
    lo, hi = (min(steps), max(steps)) if steps else (0, 0)
    if hi == lo:
        return lambda s: left + width / 2
    return lambda s: left + width * (s - lo) / (hi - lo)


def _y_axis(ticks: list[float], py, plot_w: float, y_label: str) -> list[Markup]:
    parts = [void("line", x1=STEP_LEFT, y1=f"{py(t):.1f}", x2=STEP_LEFT + plot_w, y2=f"{py(t):.1f}",
                  stroke="#e5e5e5" if t else "#999") for t in ticks]
    parts += [text(STEP_LEFT - 6, py(t) + 4, tick_text(t), "end") for t in ticks]
    parts.append(text(14, py(ticks[-1] / 2), y_label, "middle",
                      transform=f"rotate(-90 14 {py(ticks[-1] / 2):.1f})"))
    return parts


def _step_ticks(steps: list[int], px, y: float) -> list[Markup]:
    """At most ~10 integer step ticks, and the axis title with the step count."""
    shown = sorted(set(steps))
    stride = max(1, math.ceil(len(shown) / 10))
    parts = [text(px(s), y + 14, str(s), "middle") for s in shown[::stride]]
    count = f"{len(steps)} steps" if len(steps) != 1 else "1 step"
    parts.append(text(STEP_LEFT + (WIDTH - STEP_LEFT - 130) / 2, y + 32, f"step ({count})", "middle"))
    return parts


def _polylines(steps, values, px, py, color) -> list[Markup]:
    """One polyline per run of measured values (None splits the line)."""
    runs, current = [], []
    for s, v in zip(steps, values):
        if v is None:
            runs, current = (runs + [current]) if current else runs, []
        else:
            current.append(f"{px(s):.1f},{py(v):.1f}")
    runs += [current] if current else []
    return [void("polyline", points=" ".join(r), fill="none", stroke=color, stroke_width=1.5) for r in runs]

