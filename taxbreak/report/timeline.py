"""The timeline of one representative step: host lanes over device streams.

Host lanes (one per thread) show Python frames, ops and annotations by nesting
depth plus a row of CUDA API calls; device lanes (one per stream) show kernels,
copies and sets. Spans where no stream of a device is busy are shaded as idle.
Times come from the canonical tables (int64 ns from the trace origin).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from ..trace.tables import TraceTables
from .markup import Markup, tag, void
from .svg import FONT

MAX_EVENTS = 4000
ROW_H, LABEL_W, WIDTH = 14, 170, 1100
HOST_COLORS = {"python": "#76b7b2", "op": "#4e79a7", "annotation": "#bab0ac"}
API_COLORS = {"launch": "#e15759", "graph_launch": "#e15759", "sync": "#9c755f", "library": "#edc948"}
DEVICE_COLORS = {"kernel": "#59a14f", "memcpy": "#af7aa1", "memset": "#ff9da7", "sync": "#9c755f"}
IDLE_FILL = "#d62728"


@dataclass
class Window:
    start_ns: int
    end_ns: int
    label: str
    note: str = ""


def representative_step(steps: pd.DataFrame | None) -> pd.Series | None:
    """The step of the main phase (decode if present) whose orchestration is the median."""
    if steps is None or len(steps) == 0 or not {"start_ns", "end_ns"} <= set(steps.columns):
        return None
    # the "between" row (time outside every step) has no span of its own
    steps = steps[steps["start_ns"].notna() & steps["end_ns"].notna() & (steps["end_ns"] > steps["start_ns"])]
    if "step" in steps.columns:
        steps = steps[steps["step"] >= 0]
    if len(steps) == 0:
        return None
    phase = "decode" if "phase" in steps and (steps["phase"] == "decode").any() else \
        (steps["phase"].mode().iloc[0] if "phase" in steps else None)
    pool = steps[steps["phase"] == phase] if phase is not None else steps
    orch = pd.to_numeric(pool.get("orchestration_us"), errors="coerce") if "orchestration_us" in pool else None
    if orch is None or orch.isna().all():
        return pool.iloc[len(pool) // 2]
    return pool.loc[(orch - orch.median()).abs().sort_values(kind="stable").index[0]]


def _frame(table: pa.Table, cols: list[str]) -> pd.DataFrame:
    have = [c for c in cols if c in table.column_names]
    frame = table.select(have).to_pandas()
    for c in have:
        if isinstance(frame[c].dtype, pd.CategoricalDtype):
            frame[c] = frame[c].astype(str)
    return frame


def _in_window(frame: pd.DataFrame, w: Window) -> pd.DataFrame:
    end = frame["start_ns"] + frame["dur_ns"]
    return frame[(frame["start_ns"] < w.end_ns) & (end > w.start_ns)]


def choose_window(tables: TraceTables, steps: pd.DataFrame | None) -> Window | None:
    """The representative step's span, or the whole trace when there are no steps."""
    row = representative_step(steps)
    if row is not None:
        return Window(int(row["start_ns"]), int(row["end_ns"]),
                      f"step {row.get('step', '?')} ({row.get('phase', 'unknown')}) {row.get('name', '')}")
    starts, ends = [], []
    for t in (tables.host_events, tables.api_calls, tables.device_activities):
        if t.num_rows:
            s = t.column("start_ns").to_numpy()
            starts.append(s.min())
            ends.append((s + t.column("dur_ns").to_numpy()).max())
    if not starts:
        return None
    return Window(int(min(starts)), int(max(ends)), "whole trace (no step markers)")


def _cap(frames: list[pd.DataFrame], w: Window) -> Window:
    """Shrink the window so it holds at most MAX_EVENTS events (keeps the page light)."""
    starts = np.sort(np.concatenate([f["start_ns"].to_numpy() for f in frames] or [np.zeros(0)]))
    if len(starts) <= MAX_EVENTS:
        return w
    cut = int(starts[MAX_EVENTS])
    shown_us, span_us = (cut - w.start_ns) / 1e3, (w.end_ns - w.start_ns) / 1e3
    note = f"showing the first {shown_us:,.1f} of {span_us:,.1f} µs ({MAX_EVENTS:,} of {len(starts):,} events)"
    return Window(w.start_ns, max(cut, w.start_ns + 1), w.label, note)


@dataclass
class Lane:
    label: str
    rows: int
    rects: list[Markup]


def _scale(w: Window):
    span = max(w.end_ns - w.start_ns, 1)
    return lambda t: LABEL_W + (np.clip(t, w.start_ns, w.end_ns) - w.start_ns) * (WIDTH - LABEL_W - 10) / span


def _rects(x0: np.ndarray, x1: np.ndarray, y: np.ndarray, fill, titles) -> list[Markup]:
    fills = fill if isinstance(fill, (list, np.ndarray)) else [fill] * len(x0)
    return [tag("rect", tag("title", t), x=f"{a:.2f}", y=f"{b:.1f}", width=f"{max(c - a, 0.5):.2f}",
                height=ROW_H - 2, fill=f) for a, c, b, f, t in zip(x0, x1, y, fills, titles)]


def _titles(names, dur_ns) -> list[str]:
    return [f"{n} ({d / 1e3:,.2f} µs)" for n, d in zip(names, dur_ns)]


HOST_ROWS = ("annotation", "python", "op")


def host_lanes(host: pd.DataFrame, api: pd.DataFrame, w: Window, names: dict[str, str], x) -> list[Lane]:
    """One lane per host thread: a row per host event kind (annotations, Python
    frames, ATen ops), then a row of CUDA API calls. Within a row nested events
    are drawn outermost first, so the innermost one stays visible."""
    keys = sorted(set(zip(host["pid"], host["tid"])) | set(zip(api["pid"], api["tid"])))
    lanes = []
    for pid, tid in keys:  # one iteration per thread, not per event
        h = host[(host["pid"] == pid) & (host["tid"] == tid)]
        if "depth" in h.columns:
            h = h.sort_values("depth", kind="stable")
        a = api[(api["pid"] == pid) & (api["tid"] == tid)]
        kinds = [k for k in HOST_ROWS if (h["kind"] == k).any()]
        row_of = {k: i for i, k in enumerate(kinds)}
        row = h["kind"].map(row_of).fillna(len(kinds)).to_numpy(dtype=float)
        rows = len(kinds) + (1 if len(a) else 0) or 1
        rects = _rects(x(h["start_ns"].to_numpy()), x((h["start_ns"] + h["dur_ns"]).to_numpy()), row * ROW_H,
                       [HOST_COLORS.get(k, "#bab0ac") for k in h["kind"]], _titles(h["name"], h["dur_ns"]))
        rects += _rects(x(a["start_ns"].to_numpy()), x((a["start_ns"] + a["dur_ns"]).to_numpy()),
                        np.full(len(a), len(kinds) * ROW_H), [API_COLORS.get(k, "#f28e2b") for k in a["kind"]],
                        _titles(a["name"], a["dur_ns"]))
        label = names.get(f"{pid}:{tid}") or f"thread {tid}"
        lanes.append(Lane(f"{pid}:{tid} {label}"[:24], rows, rects))
    return lanes


def idle_gaps(start_ns: np.ndarray, end_ns: np.ndarray, w: Window) -> tuple[np.ndarray, np.ndarray]:
    """Gaps in the union of busy intervals within the window (sorted sweep)."""
    if len(start_ns) == 0:
        return np.array([w.start_ns]), np.array([w.end_ns])
    order = np.argsort(start_ns, kind="stable")
    s, e = np.maximum(start_ns[order], w.start_ns), np.minimum(end_ns[order], w.end_ns)
    reach = np.maximum.accumulate(e)
    gap_start = np.concatenate([[w.start_ns], reach])
    gap_end = np.concatenate([s, [w.end_ns]])
    keep = gap_end > gap_start
    return gap_start[keep], gap_end[keep]


def device_lanes(dev: pd.DataFrame, w: Window, x, y0: int) -> tuple[list[Lane], list[Markup]]:
    """One lane per (device, stream) plus the shaded idle gaps of each device."""
    lanes, shades, y = [], [], y0
    for device in sorted(dev["device"].unique()):
        d = dev[dev["device"] == device]
        top = y
        for stream in sorted(d["stream"].unique()):
            s = d[d["stream"] == stream]
            rects = _rects(x(s["start_ns"].to_numpy()), x((s["start_ns"] + s["dur_ns"]).to_numpy()),
                           np.zeros(len(s)), [DEVICE_COLORS.get(k, "#59a14f") for k in s["kind"]],
                           _titles(s["name"], s["dur_ns"]))
            lanes.append(Lane(f"GPU {device} stream {stream}", 1, rects))
            y += ROW_H + 4
        work = d[d["kind"] != "sync"]
        gs, ge = idle_gaps(work["start_ns"].to_numpy(), (work["start_ns"] + work["dur_ns"]).to_numpy(), w)
        shades += [tag("rect", tag("title", f"GPU {device} idle {(b - a) / 1e3:,.2f} µs"), x=f"{x(a):.2f}",
                       y=top, width=f"{max(x(b) - x(a), 0.5):.2f}", height=y - top - 4, fill=IDLE_FILL,
                       fill_opacity="0.12", class_="idle") for a, b in zip(gs, ge)]
    return lanes, shades


def render_timeline(tables: TraceTables, steps: pd.DataFrame | None) -> tuple[Markup, Window | None]:
    """SVG of the representative step (or the whole trace), and the window shown."""
    w = choose_window(tables, steps)
    if w is None:
        return tag("p", "the trace holds no events to draw", class_="missing"), None
    host = _in_window(_frame(tables.host_events, ["pid", "tid", "kind", "name", "start_ns", "dur_ns", "depth"]), w)
    api = _in_window(_frame(tables.api_calls, ["pid", "tid", "kind", "name", "start_ns", "dur_ns"]), w)
    dev = _in_window(_frame(tables.device_activities, ["kind", "name", "device", "stream", "start_ns", "dur_ns"]), w)
    w = _cap([host, api, dev], w)
    host, api, dev = _in_window(host, w), _in_window(api, w), _in_window(dev, w)
    x = _scale(w)
    lanes = host_lanes(host, api, w, tables.meta.thread_names, x)
    y_dev = sum(lane.rows * ROW_H + 4 for lane in lanes) + HOST_DEVICE_GAP
    dlanes, shades = device_lanes(dev, w, x, y_dev)
    return _draw(lanes, dlanes, shades, w), w


HOST_DEVICE_GAP = 20


def _draw(hlanes: list[Lane], dlanes: list[Lane], shades: list[Markup], w: Window) -> Markup:
    parts, y = [], 0
    for i, lane in enumerate(hlanes + dlanes):
        if i == len(hlanes):
            y += HOST_DEVICE_GAP
        parts.append(tag("text", lane.label, x=4, y=y + 11))
        parts.append(tag("g", *lane.rects, transform=f"translate(0,{y})"))
        y += lane.rows * ROW_H + 4
    if not dlanes:
        y += HOST_DEVICE_GAP
    if not dlanes:
        parts.append(tag("text", "no device activity in this window (no CUDA device in trace?)",
                         x=LABEL_W, y=y + 12, font_style="italic"))
        y += 20
    span_us = (w.end_ns - w.start_ns) / 1e3
    parts.append(tag("text", "0 µs", x=LABEL_W, y=y + 14))
    parts.append(tag("text", f"{span_us:,.1f} µs", x=WIDTH - 10, y=y + 14, text_anchor="end"))
    parts.append(void("line", x1=LABEL_W, y1=y + 2, x2=WIDTH - 10, y2=y + 2, stroke="#999"))
    return tag("svg", *shades, *parts, xmlns="http://www.w3.org/2000/svg", width=WIDTH, height=y + 20,
               viewBox=f"0 0 {WIDTH} {y + 20}", role="img", aria_label="step timeline", style=FONT)
