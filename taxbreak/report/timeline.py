"""The timeline of one representative step: host lanes over device streams.

Host lanes (one per thread) have a row each for annotations, Python frames and
ATen ops plus a row of CUDA API calls; device lanes (one per stream) show
kernels, copies and sets. Spans where no stream of a device is busy are shaded
as idle. Times come from the canonical tables (int64 ns from the trace origin);
the chart is drawn by matplotlib (:mod:`taxbreak.report.plotting`), one bar
collection per row, with µs ticks from the window's start.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from ..decompose.host_frames import BLOCKING_FRAME
from ..decompose.views import name_flags
from ..decompose.views import LINKABLE_API_KINDS
from ..trace.tables import TraceTables
from .markup import Markup, tag
from .svg import IDLE_COLORS

MAX_EVENTS = 4000
ROW_IN = 0.2  # figure height per row, inches
NO_STREAM = (-1, 4294967295)  # CUPTI's "no stream" (2^32-1): device-wide events such as syncs
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
class Row:
    """One row of the chart: a label and its intervals (ns) with a colour each."""

    label: str
    start_ns: np.ndarray
    end_ns: np.ndarray
    colors: list[str]


def _row(label: str, frame: pd.DataFrame, palette: dict[str, str], default: str) -> Row:
    start = frame["start_ns"].to_numpy(dtype=np.int64)
    return Row(label, start, start + frame["dur_ns"].to_numpy(dtype=np.int64),
               frame["kind"].map(palette).fillna(default).tolist())


HOST_ROWS = ("annotation", "python", "op")
ROW_NAMES = {"annotation": "annotations", "python": "Python", "op": "ATen ops"}


def host_rows(host: pd.DataFrame, api: pd.DataFrame, names: dict[str, str]) -> list[Row]:
    """Per host thread: a row per host event kind present, then one of CUDA API calls."""
    keys = sorted(set(zip(host["pid"], host["tid"])) | set(zip(api["pid"], api["tid"])))
    rows = []
    for pid, tid in keys:  # one iteration per thread, not per event
        h = host[(host["pid"] == pid) & (host["tid"] == tid)]
        a = api[(api["pid"] == pid) & (api["tid"] == tid)]
        thread = _short(names.get(f"{pid}:{tid}") or f"thread {tid}")
        if not a["kind"].astype(str).isin(LINKABLE_API_KINDS).any():
            thread += " (launches nothing)"  # kept out of the summary's host partition (docs/method.md §7)
        for kind in HOST_ROWS:
            part = h[h["kind"] == kind]
            if len(part):
                if "depth" in part.columns:  # outermost first, so the innermost stays visible
                    part = part.sort_values("depth", kind="stable")
                rows.append(_blocked_grey(_row(f"{pid}:{tid} {thread} · {ROW_NAMES[kind]}", part, HOST_COLORS,
                                               "#bab0ac"), part))
        if len(a):
            rows.append(_row(f"{pid}:{tid} {thread} · CUDA API", a, API_COLORS, "#f28e2b"))
    return rows


def _blocked_grey(row: Row, part: pd.DataFrame) -> Row:
    """Blocking waits (``threading.py(…): wait``, ``queue.py(…): get`` …) drawn in the ``blocked``
    idle colour, not as Python work."""
    names = part["name"].astype(str).to_numpy(dtype=object)
    distinct, codes = np.unique(names, return_inverse=True) if len(names) else (names, np.zeros(0, np.int64))
    blocking = name_flags(distinct, BLOCKING_FRAME)[codes] if len(names) else np.zeros(0, bool)
    row.colors = np.where(blocking, IDLE_COLORS["blocked"], np.array(row.colors, dtype=object)).tolist()
    return row


def _short(text: str, limit: int = 22) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def stream_label(device, stream) -> str:
    """``GPU d stream s``; the sentinel stream is no stream at all."""
    return f"GPU {device} · no stream" if int(stream) in NO_STREAM else f"GPU {device} stream {stream}"


def device_rows(dev: pd.DataFrame, w: Window) -> tuple[list[Row], list[tuple[int, int, Row]]]:
    """A row per (device, stream), and per device its idle gaps over its rows' span
    (first row index, row count, gaps)."""
    rows, idle = [], []
    for device in sorted(dev["device"].unique()):
        d = dev[dev["device"] == device]
        first = len(rows)
        for stream in sorted(d["stream"].unique()):
            rows.append(_row(stream_label(device, stream), d[d["stream"] == stream], DEVICE_COLORS, "#59a14f"))
        work = d[d["kind"] != "sync"]
        gs, ge = idle_gaps(work["start_ns"].to_numpy(), (work["start_ns"] + work["dur_ns"]).to_numpy(), w)
        idle.append((first, len(rows) - first, Row(f"GPU {device} idle", gs, ge, [IDLE_FILL] * len(gs))))
    return rows, idle


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
    hrows = host_rows(host, api, tables.meta.thread_names)
    drows, idle = device_rows(dev, w)
    return draw(hrows, drows, idle, w), w


LEGEND = (("#76b7b2", "Python"), ("#4e79a7", "ATen op"), ("#bab0ac", "annotation"), ("#e15759", "launch API"),
          ("#edc948", "library API"), ("#9c755f", "sync"), ("#f28e2b", "other API"), ("#59a14f", "kernel"),
          ("#af7aa1", "memcpy"), ("#ff9da7", "memset"))


def draw(hrows: list[Row], drows: list[Row], idle: list[tuple[int, int, Row]], w: Window) -> Markup:
    """Host rows over device rows on one µs axis; device idle shaded across its streams."""
    from matplotlib.patches import Patch

    from . import plotting

    rows = hrows + drows
    with plotting.style():
        fig = plotting.figure(ROW_IN * max(len(rows), 2) + 1.4, width_in=11.0)
        ax = fig.add_subplot()
        top = len(rows)  # row i is drawn at y = top - 1 - i: the first row at the top
        to_us = lambda ns: (np.asarray(ns, dtype=np.int64) - w.start_ns) / 1e3  # noqa: E731
        for i, row in enumerate(rows):
            spans = np.column_stack([to_us(row.start_ns), to_us(row.end_ns) - to_us(row.start_ns)])
            ax.broken_barh(spans, (top - 1 - i + 0.12, 0.76), facecolors=row.colors, linewidth=0, gid=f"row{i}")
        for n, (first, count, gaps) in enumerate(idle):
            y0 = top - len(hrows) - first - count
            spans = np.column_stack([to_us(gaps.start_ns), to_us(gaps.end_ns) - to_us(gaps.start_ns)])
            ax.broken_barh(spans, (y0, count), facecolors=IDLE_FILL, alpha=0.12, linewidth=0, gid=f"idle{n}")
        if hrows and drows:
            ax.axhline(top - len(hrows), color="#999", linewidth=0.6)
        ax.set_yticks(top - 1 - np.arange(len(rows)) + 0.5, [r.label for r in rows], fontsize=7.5)
        ax.set_ylim(0, max(top, 1))
        ax.set_xlim(0, (w.end_ns - w.start_ns) / 1e3)
        plotting.plain_ticks(ax.xaxis)
        ax.set_xlabel(f"µs from the window's start ({(w.end_ns - w.start_ns) / 1e3:,.1f} µs shown)")
        ax.tick_params(axis="y", length=0)
        ax.grid(axis="x", color="#eeeeee", linewidth=0.5)
        ax.set_axisbelow(True)
        if not drows:
            ax.set_title("no device activity in this window (no CUDA device in trace?)", fontsize=8,
                         fontstyle="italic", loc="left")
        shown = {c for row in rows for c in row.colors}  # a legend of what is drawn, not of every kind
        handles = [Patch(color=c, label=n) for c, n in LEGEND if c in shown] + \
            ([Patch(color=IDLE_FILL, alpha=0.25, label="device idle (shaded)")] if drows else [])
        plotting.legend_below(ax, handles, ncol=6, fontsize=7.5)
        return plotting.to_svg(fig, "step timeline", "timeline")
