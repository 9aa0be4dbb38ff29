"""The HTML report's charts: per-phase bars and per-step series (matplotlib SVG).

Every value that is ``None`` is absent from a chart and named as not measured
in its labels; nothing unmeasured is drawn as a zero-length bar or a zero
point. A chart with nothing to show is not drawn: its function returns
``None`` and the caller says why in one line. matplotlib is imported when a
chart is drawn (:mod:`taxbreak.report.plotting`), never at import time.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .markup import Markup
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
BAR_H = 0.36


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


def _group_label(group: BarGroup) -> str:
    """Tick label: phase, HDBI, T_Orchestrate (which excludes the launch latency, as in the
    method) and device-active time: the numbers stay readable whatever the bar lengths."""
    device = group.device_note if group.device_us is None else f"device {_us(group.device_us)}"
    latency = next((s.value for s in group.segments if s.key == "launch_latency_us"), None)
    extra = f" + latency {fmt_value(latency)}" if latency else ""
    return (f"{group.label} · HDBI {fmt_value(group.hdbi, 'hdbi')}\n"
            f"T_Orchestrate {_us(group.orchestration_us)}{extra}\n{device}")


def component_chart(groups: list[BarGroup]) -> Markup | None:
    """Per phase, on one µs axis: a bar of the stacked host components and a
    device-active bar under it. ``None`` when no phase has either."""
    return _svg(component_figure(groups), "orchestration components and device-active time per phase", "components")


def queue_chart(groups: list[BarGroup]) -> Markup | None:
    """Queue wait (union over kernels, device side: not host time) per phase; ``None`` when none."""
    return _svg(queue_figure(groups), "queue wait (union) per phase", "queue")


def idle_chart(groups: list[tuple[str, dict]]) -> Markup | None:
    """Per phase: one stacked bar of GPU idle time by cause (µs, summed over devices)."""
    return _svg(idle_figure(groups), "GPU idle time by cause per phase", "idle")


def _svg(fig, label: str, name: str) -> Markup | None:
    from . import plotting

    return None if fig is None else plotting.to_svg(fig, label, name)


def component_figure(groups: list[BarGroup]):
    from . import plotting

    rows = [g for g in groups if g.device_us is not None or any(s.value for s in g.segments)]
    if not rows:
        return None
    with plotting.style():
        fig = plotting.figure(0.62 * len(rows) + 1.3)
        ax = fig.add_subplot()
        y = np.arange(len(rows))[::-1].astype(float)
        left = np.zeros(len(rows))
        for key, label in COMPONENTS:
            values = np.array([next((s.value or 0.0 for s in g.segments if s.key == key), 0.0) for g in rows])
            if values.any():
                _ids(ax.barh(y + BAR_H / 2, values, BAR_H, left=left, color=COLORS[key], label=label), key)
                left += values
        device = np.array([g.device_us or 0.0 for g in rows])
        if device.any():
            _ids(ax.barh(y - BAR_H / 2, device, BAR_H, color=COLORS["device_active_us"], label="device active"),
                 "device_active_us")
        ax.set_yticks(y, [_group_label(g) for g in rows])
        _finish(ax, "µs (host bar: components stacked; device bar: T_DeviceActive)")
        return fig


def queue_figure(groups: list[BarGroup]):
    from . import plotting

    rows = [g for g in groups if g.queue_us]
    if not rows:
        return None
    with plotting.style():
        fig = plotting.figure(0.3 * len(rows) + 0.9)
        ax = fig.add_subplot()
        y = np.arange(len(rows))[::-1].astype(float)
        ax.barh(y, [g.queue_us for g in rows], 0.6, color=COLORS["queue_wait_union_us"])
        ax.set_yticks(y, [f"{g.label}: {_us(g.queue_us)}" for g in rows])
        _finish(ax, "µs during which at least one launched kernel waited (union)", legend=False)
        return fig


def idle_figure(groups: list[tuple[str, dict]]):
    from . import plotting

    rows = [(label, causes) for label, causes in groups if causes and any(v for v in causes.values())]
    if not rows:
        return None
    with plotting.style():
        fig = plotting.figure(0.32 * len(rows) + 1.3)
        ax = fig.add_subplot()
        y = np.arange(len(rows))[::-1].astype(float)
        left = np.zeros(len(rows))
        for cause, color in IDLE_COLORS.items():
            values = np.array([causes.get(cause) or 0.0 for _, causes in rows])
            if values.any():
                _ids(ax.barh(y, values, 0.6, left=left, color=color, label=cause.replace("_", " "),
                             edgecolor="#999" if cause == "nothing_pending" else None, linewidth=0.4), cause)
                left += values
        ax.set_yticks(y, [f"{label}: idle {fmt_value(total)} µs" for (label, _), total in zip(rows, left)])
        _finish(ax, "µs of GPU idle time (Σ devices), by the host layer that caused it")
        return fig


def _ids(bars, key: str) -> None:
    """An id per bar (``key-row``): the SVG groups say what they draw, and tests can find them."""
    for row, patch in enumerate(bars):
        patch.set_gid(f"{key}-{row}")


def _finish(ax, xlabel: str, legend: bool = True) -> None:
    from .plotting import plain_ticks

    plain_ticks(ax.xaxis)
    ax.set_xlabel(xlabel)
    ax.set_xlim(left=0)
    ax.grid(axis="x", color="#e5e5e5", linewidth=0.6)
    ax.set_axisbelow(True)
    ax.tick_params(axis="y", length=0)
    if legend:
        from .plotting import legend_below

        legend_below(ax)


def step_chart(steps: list[int], series: list[tuple[str, list[float | None]]], y_label: str,
               name: str, y_max: float | None = None) -> Markup | None:
    """One value per step and phase: a line per phase (a missing value breaks it), or bars
    when there is a single step (one dot says nothing). ``None`` when nothing is measured."""
    return _svg(step_figure(steps, series, y_label, y_max), f"{y_label} per step", name)


def step_figure(steps: list[int], series: list[tuple[str, list[float | None]]], y_label: str,
                y_max: float | None = None):
    from . import plotting

    if not any(v is not None for _, values in series for v in values):
        return None
    with plotting.style():
        fig = plotting.figure(2.4)
        ax = fig.add_subplot()
        xs = np.asarray(steps, dtype=float)
        for phase, values in series:
            ys = np.array([np.nan if v is None else v for v in values], dtype=float)
            color = PHASE_COLORS.get(phase, "#bab0ac")
            if len(xs) == 1:
                if not np.isnan(ys[0]):  # an unmeasured step gets no bar, not a zero one
                    ax.bar(xs, ys, 0.5, color=color, label=phase, gid=f"bar-{phase}")
            else:
                ax.plot(xs, ys, color=color, marker="o", markersize=2.5, linewidth=1.2, label=phase,
                        gid=f"line-{phase}")
        if len(xs) == 1:  # one bar in the middle, one tick at its step
            ax.set_xlim(xs[0] - 1.5, xs[0] + 1.5)
            ax.set_xticks(xs, [str(int(xs[0]))])
        else:
            from matplotlib.ticker import MaxNLocator

            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel(f"step ({len(steps)} steps)" if len(steps) != 1 else "step (1 step)")
        ax.set_ylabel(y_label)
        ax.set_ylim(0, y_max)
        plotting.plain_ticks(ax.yaxis)
        ax.grid(axis="y", color="#e5e5e5", linewidth=0.6)
        if len(series) > 1:
            ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
        return fig
