"""The timeline of one representative step: host lanes over device streams.

Host lanes (one per thread) have a row each for annotations, Python frames and
ATen ops plus a row of CUDA API calls; device lanes (one per stream) show
kernels, copies and sets. Spans where no stream of a device is busy are shaded
as idle. Times come from the canonical tables (int64 ns from the trace origin).

The window is the step's host span widened to the device work its launch calls
issued (joined on ``(process, correlation)``): a kernel runs after its launch,
often after the step's host span has ended (a vLLM step returns while its
CUDA-graph replay still runs), so the host span alone can hold none of it.

The chart is hand-written SVG, one ``<rect>`` per event with its name and
duration as ``<title>``; the page script zooms it (wheel) and pans it (drag)
by rewriting the rects' ``x``/``width`` and the µs ticks (:mod:`taxbreak.report.page`).
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
from .markup import Markup, join, tag, void
from .sanitize import html_text
from .svg import IDLE_COLORS, chart, legend, nice_ticks, text, tick_text

MAX_EVENTS = 10000
ROW_H = 14  # px per row
LABEL_W, PLOT_W = 280, 840  # label column and plot width, px
LABEL_CHARS = 48  # a 10 px label this long fits the label column
LAUNCH_KINDS = ("launch", "graph_launch", "memcpy", "memset")
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


def _window_rows(table: pa.Table, w: Window) -> pa.Table:
    """The rows of ``table`` that overlap the window, taken in Arrow (the rest never become pandas)."""
    start = table.column("start_ns").to_numpy()
    end = start + table.column("dur_ns").to_numpy()
    return table.take(pa.array(np.flatnonzero((start < w.end_ns) & (end > w.start_ns))))


def _in_window(frame: pd.DataFrame, w: Window) -> pd.DataFrame:
    end = frame["start_ns"] + frame["dur_ns"]
    return frame[(frame["start_ns"] < w.end_ns) & (end > w.start_ns)]


def choose_window(tables: TraceTables, steps: pd.DataFrame | None) -> Window | None:
    """The representative step's span widened to the device work it launched, or the whole
    trace when there are no steps."""
    row = representative_step(steps)
    if row is not None:
        w = Window(int(row["start_ns"]), int(row["end_ns"]),
                   f"step {row.get('step', '?')} ({row.get('phase', 'unknown')}) {row.get('name', '')}")
        return widened_to_launched_work(tables, w)
    starts, ends = [], []
    for t in (tables.host_events, tables.api_calls, tables.device_activities):
        if t.num_rows:
            s = t.column("start_ns").to_numpy()
            starts.append(s.min())
            ends.append((s + t.column("dur_ns").to_numpy()).max())
    if not starts:
        return None
    return Window(int(min(starts)), int(max(ends)), "whole trace (no step markers)")


def launched_device_span(tables: TraceTables, start_ns: int, end_ns: int) -> tuple[int, int] | None:
    """(first start, last end) of the device work whose launch, copy or set call starts in
    [start_ns, end_ns), joined on (process, correlation); None when it launched none."""
    api, dev = tables.api_calls, tables.device_activities
    if api.num_rows == 0 or dev.num_rows == 0:
        return None
    call_start, correlation = api.column("start_ns").to_numpy(), api.column("correlation").to_numpy()
    rows = np.flatnonzero((call_start >= start_ns) & (call_start < end_ns) & (correlation >= 0))
    kinds = api.column("kind").take(pa.array(rows)).cast(pa.string()).to_numpy(zero_copy_only=False)
    rows = rows[np.isin(kinds, LAUNCH_KINDS)]
    if len(rows) == 0:
        return None
    launched = pd.DataFrame({"process": api.column("process").to_numpy()[rows],
                             "correlation": correlation[rows]}).drop_duplicates()
    work = pd.DataFrame({c: dev.column(c).to_numpy() for c in ("process", "correlation", "start_ns", "dur_ns")})
    work = work.merge(launched, on=["process", "correlation"])
    if len(work) == 0:
        return None
    return int(work["start_ns"].min()), int((work["start_ns"] + work["dur_ns"]).max())


def widened_to_launched_work(tables: TraceTables, w: Window) -> Window:
    """``w`` extended to hold the device work launched inside it, with a note saying by how much."""
    span = launched_device_span(tables, w.start_ns, w.end_ns)
    if span is None or (span[0] >= w.start_ns and span[1] <= w.end_ns):
        return w
    start, end = min(w.start_ns, span[0]), max(w.end_ns, span[1])
    note = (f"The step's host span is {(w.end_ns - w.start_ns) / 1e3:,.1f} µs; the window runs "
            f"{(end - w.end_ns) / 1e3:,.1f} µs past it to hold the device work the step launched "
            "(linked by correlation). ")
    return Window(start, end, w.label, note)


def fit(host: pd.DataFrame, api: pd.DataFrame, dev: pd.DataFrame,
        w: Window) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, Window]:
    """At most MAX_EVENTS events (keeps the page light) without losing the device work: the
    deepest host events go first (a traced Python stack can hold tens of thousands of frames
    per step, and cutting the window in time would keep only them); only when the outermost
    level alone does not fit is the window cut in time."""
    total = len(host) + len(api) + len(dev)
    if total <= MAX_EVENTS:
        return host, api, dev, w
    room = MAX_EVENTS - len(api) - len(dev)
    depth = host["depth"].to_numpy(np.int64).clip(0) if "depth" in host.columns and len(host) else None
    if depth is not None and room > 0:
        within = np.flatnonzero(np.cumsum(np.bincount(depth)) <= room)
        if len(within):
            keep = host[depth <= within[-1]]
            note = (f"Host events down to nesting depth {within[-1]} ({len(keep) + len(api) + len(dev):,} of "
                    f"{total:,} events; deeper frames left out). ")
            return keep, api, dev, Window(w.start_ns, w.end_ns, w.label, w.note + note)
    w = _cut(host, api, dev, w=w)
    return _in_window(host, w), _in_window(api, w), _in_window(dev, w), w


def _cut(*frames: pd.DataFrame, w: Window) -> Window:
    """Shrink the window so it holds at most MAX_EVENTS events."""
    starts = np.sort(np.concatenate([f["start_ns"].to_numpy() for f in frames] or [np.zeros(0)]))
    cut = int(starts[MAX_EVENTS])
    shown_us, span_us = (cut - w.start_ns) / 1e3, (w.end_ns - w.start_ns) / 1e3
    note = f"Showing the first {shown_us:,.1f} of {span_us:,.1f} µs ({MAX_EVENTS:,} of {len(starts):,} events)"
    return Window(w.start_ns, max(cut, w.start_ns + 1), w.label, w.note + note)


@dataclass
class Row:
    """One row of the chart: a label and its intervals (ns) with a colour and a name each."""

    label: str
    start_ns: np.ndarray
    end_ns: np.ndarray
    colors: list[str]
    names: list[str] | None = None


def _row(label: str, frame: pd.DataFrame, palette: dict[str, str], default: str) -> Row:
    start = frame["start_ns"].to_numpy(dtype=np.int64)
    names = frame["name"].astype(str).tolist() if "name" in frame.columns else None
    return Row(label, start, start + frame["dur_ns"].to_numpy(dtype=np.int64),
               frame["kind"].map(palette).fillna(default).tolist(), names)


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
    host = _frame(_window_rows(tables.host_events, w), ["pid", "tid", "kind", "name", "start_ns", "dur_ns", "depth"])
    api = _frame(_window_rows(tables.api_calls, w), ["pid", "tid", "kind", "name", "start_ns", "dur_ns"])
    dev = _frame(_window_rows(tables.device_activities, w), ["kind", "name", "device", "stream", "start_ns", "dur_ns"])
    host, api, dev, w = fit(host, api, dev, w)
    hrows = host_rows(host, api, tables.meta.thread_names)
    drows, idle = device_rows(dev, w)
    return draw(hrows, drows, idle, w, tables.device_activities.num_rows), w


LEGEND = (("#76b7b2", "Python"), ("#4e79a7", "ATen op"), ("#bab0ac", "annotation"), ("#e15759", "launch API"),
          ("#edc948", "library API"), ("#9c755f", "sync"), ("#f28e2b", "other API"), ("#59a14f", "kernel"),
          ("#af7aa1", "memcpy"), ("#ff9da7", "memset"), (IDLE_COLORS["blocked"], "blocking wait"))
TOP, HOST_DEVICE_GAP = 8, 10
CLIP = "timeline-clip"


def draw(hrows: list[Row], drows: list[Row], idle: list[tuple[int, int, Row]], w: Window,
         device_events: int = 0) -> Markup:
    """Host rows over device rows on one µs axis; device idle shaded across its streams.
    ``device_events``: device activities in the whole trace (to say why none is drawn)."""
    rows = hrows + drows
    ys = [TOP + i * ROW_H + (HOST_DEVICE_GAP if i >= len(hrows) else 0) for i in range(len(rows))]
    bottom = (ys[-1] + ROW_H if ys else TOP) + 4
    to_px = _scale(w)
    labels = [text(4, y + 10, _short(row.label, LABEL_CHARS), class_="lbl") for row, y in zip(rows, ys)]
    shades = [_rects(gaps, ys[len(hrows) + first], count * ROW_H, to_px, "idle", f"{gaps.label} ")
              for first, count, gaps in idle]
    marks = [_rects(row, y + 2, ROW_H - 3, to_px, "ev") for row, y in zip(rows, ys)]
    plot = tag("g", *shades, *marks, class_="tl-plot", clip_path=f"url(#{CLIP})")
    defs = tag("defs", tag("clipPath", void("rect", x=LABEL_W, y=0, width=PLOT_W, height=bottom), id=CLIP))
    parts = [defs, *labels, plot, _axis(w, bottom)]
    if hrows and drows:
        parts.append(void("line", x1=0, y1=ys[len(hrows)] - HOST_DEVICE_GAP / 2, x2=LABEL_W + PLOT_W,
                          y2=ys[len(hrows)] - HOST_DEVICE_GAP / 2, stroke="#999"))
    if not drows:
        parts.append(text(LABEL_W, bottom + 48, _no_device_note(device_events), class_="missing"))
    shown = {c for row in rows for c in row.colors}  # a legend of what is drawn, not of every kind
    items = [(c, n) for c, n in LEGEND if c in shown] + ([(IDLE_FILL, "device idle (shaded)")] if drows else [])
    keys, height = legend(items, bottom + (60 if not drows else 40), LABEL_W + PLOT_W)
    return chart(LABEL_W + PLOT_W + 10, bottom + (60 if not drows else 40) + height, *parts, *keys,
                 label="step timeline", name="timeline", cls="chart timeline",
                 data_left=LABEL_W, data_width=PLOT_W, data_span_us=f"{(w.end_ns - w.start_ns) / 1e3:.3f}")


def _no_device_note(device_events: int) -> str:
    if device_events:
        return (f"no device work in this window, nor launched from it (the trace holds {device_events:,} "
                "device activities elsewhere)")
    return "no device activity in this window: the trace holds none (no CUDA device in trace)"


def _scale(w: Window):
    """ns → px inside the plot area (the label column on its left)."""
    per_ns = PLOT_W / max(w.end_ns - w.start_ns, 1)
    return lambda ns: LABEL_W + (np.asarray(ns, dtype=np.int64) - w.start_ns) * per_ns


def _rects(row: Row, y: float, h: float, to_px, cls: str, prefix: str = "") -> Markup:
    """The row's intervals as ``<rect>``s, each titled with its name and duration. A rect
    narrower than half a pixel is drawn half a pixel wide, its true width kept in ``data-w``
    for the zoom. Names repeat (the same kernel, the same API call): each is escaped once."""
    x0 = to_px(row.start_ns)
    width = to_px(row.end_ns) - x0
    dur_us = (row.end_ns - row.start_ns) / 1e3
    names = row.names or [""] * len(x0)
    escaped = {n: html_text(f"{prefix}{n}{' · ' if n else ''}") for n in set(names)}
    head = f'<rect class="{cls}" y="{y:.1f}" height="{h:.1f}" '
    out = [f'{head}x="{x:.3f}" width="{max(wd, 0.5):.3f}" fill="{color}"{_true_width(wd)}>'
           f'<title>{escaped[name]}{dur:,.2f} µs</title></rect>'
           for x, wd, color, name, dur in zip(x0.tolist(), width.tolist(), row.colors, names, dur_us.tolist())]
    return Markup("".join(out))


def _true_width(width_px: float) -> str:
    return f' data-w="{width_px:.4f}"' if width_px < 0.5 else ""


def _axis(w: Window, y: float) -> Markup:
    """µs ticks from the window's start (the page script redraws them when zoomed)."""
    span_us = (w.end_ns - w.start_ns) / 1e3
    ticks = [t for t in nice_ticks(span_us, 8) if t <= span_us * 1.0001]
    parts = [void("line", x1=LABEL_W, y1=f"{y:.1f}", x2=LABEL_W + PLOT_W, y2=f"{y:.1f}", stroke="#999")]
    for t in ticks:
        x = LABEL_W + PLOT_W * t / max(span_us, 1e-9)
        parts += [void("line", x1=f"{x:.1f}", y1=0, x2=f"{x:.1f}", y2=f"{y:.1f}", stroke="#eee"),
                  text(x, y + 14, tick_text(t), "middle")]
    label = text(LABEL_W + PLOT_W / 2, y + 32, f"µs from the window's start ({span_us:,.1f} µs shown; "
                 "wheel: zoom, drag: pan, double-click: reset)", "middle", class_="tl-xlabel")
    return join([tag("g", *parts, class_="tl-axis", data_y=f"{y:.1f}"), label])
