"""The original Kineto trace plus tracks that show the decomposition.

Every added track sits in the process it describes, on a thread id of its own
(named by a ``thread_name`` metadata event), so a trace viewer shows it beside
the host thread or device stream it is about:

* host thread ``T`` (its process): ``taxbreak ΔFT python``, ``ΔFT dispatch``,
  ``ΔCT library`` slices laid out backwards from each launch call and a
  ``ΔKT floor`` slice from it forwards (consecutive dispatch slices of one op
  tile the host time: T_dispatch of a later launch runs from the previous
  launch's end, docs/method.md), and ``GPU idle caused`` slices: the stretches
  during which this thread's work kept a GPU idle, by cause;
* device ``D`` (pid = device, as Kineto writes it): per stream a ``queue
  wait`` track (``[queue_start, queue_start + queue_wait]`` per kernel) and a
  ``ΔKT launch latency`` track (the exposed part, ending at the kernel), and
  one ``GPU idle by cause`` track (``Analysis.idle``);
* flow arrows from each launch call to its kernel and from each device idle
  slice to the host slice of its cause (for the ``max_flows`` largest of each
  kind, which bounds the output on big traces).

A chrome-trace thread must nest properly, so slices that would overlap
partially go to the next lane of their track (vectorized rounds over
:func:`taxbreak.trace.nesting.nesting`); beyond ``MAX_LANES`` lanes they are
written as async events. Every added event has category ``taxbreak``, which
the reader skips silently, and the original events are copied through as text
(:mod:`taxbreak.report.annotate_io`), so re-analysing an annotated trace gives
the same frames and summary.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..decompose.idle import ISSUED_CAUSES
from ..trace.errors import UnsupportedFormatError
from ..trace.fileio import output_target
from . import annotate_io as io
from .annotate_layout import (CATEGORY, FLOW_ID_BASE, IDLE_TRACK, MAX_LANES, TID_BASE, assign_lanes,  # noqa: F401
                              idle_flows, lay_out, launch_flows, nested_subset, slice_events, thread_names)

MAX_FLOWS = 2000
HOST_PARTS = (("ft_python_ns", "ΔFT python"), ("ft_dispatch_ns", "ΔFT dispatch"), ("ct_ns", "ΔCT library"))
FLOOR_NAME = "ΔKT floor"
QUEUE_NAME = "queue wait"
LATENCY_NAME = "ΔKT launch latency (exposed)"
IDLE_PREFIX = "GPU idle: "
CAUSED_PREFIX = "GPU idle caused: "


@dataclass
class AnnotateStats:
    kernels: int = 0
    slices: dict[str, int] = field(default_factory=dict)
    tracks: int = 0
    overflow: int = 0  # slices written as async events (more than MAX_LANES lanes needed)
    flows: dict[str, int] = field(default_factory=dict)

    def summary_line(self) -> str:
        if not self.kernels:
            # a CPU-only trace: the copy is written, but it has no ΔFT/ΔCT/ΔKT tracks to add
            return "no kernels in the trace: nothing to annotate (the copy holds the original events only)"
        parts = ", ".join(f"{v:,} {k}" for k, v in self.slices.items())
        flows = ", ".join(f"{v:,} {k}" for k, v in self.flows.items()) or "none"
        extra = (f"; {self.overflow:,} slices beyond {MAX_LANES} lanes written as async events"
                 if self.overflow else "")
        return (f"{self.kernels:,} kernels annotated ({parts}) on {self.tracks} tracks beside their threads "
                f"and streams; flow arrows: {flows}{extra}")


def require_kineto(path: str | Path) -> None:
    """Raise ``format.unknown`` unless ``path`` holds a Kineto JSON trace (checked
    from its first bytes, before any analysis)."""
    from ..readers.detect import KINETO, detect_format

    found = detect_format(path)
    if found.kind != KINETO:
        raise UnsupportedFormatError("format.unknown", f"annotate needs a Kineto trace, not {found.kind}",
                                     path=str(path),
                                     hint="Nsight exports cannot be annotated; profile with the torch backend")


def _int(frame: pd.DataFrame, col: str) -> tuple[np.ndarray, np.ndarray]:
    """A nullable integer column as (int64 values with 0 for NA, measured mask): exact, no float."""
    if col not in frame.columns:
        return np.zeros(len(frame), np.int64), np.zeros(len(frame), bool)
    values = pd.to_numeric(frame[col], errors="coerce")
    return values.fillna(0).to_numpy(dtype=np.int64), values.notna().to_numpy()


def launched(kernels: pd.DataFrame) -> pd.DataFrame:
    """Kernels with a launch call on a known host thread."""
    need = ("launch_start_ns", "launch_pid", "launch_tid")
    if any(c not in kernels.columns for c in need):
        return kernels.iloc[0:0]
    mask = kernels["launch_start_ns"].notna() & kernels["launch_pid"].notna() & kernels["launch_tid"].notna()
    if "kind" in kernels.columns:
        mask &= kernels["kind"] == "kernel"
    return kernels[mask].reset_index(drop=True)


def _slices(pid, track, name, start, dur, args, link=None) -> pd.DataFrame:
    n = len(start)
    return pd.DataFrame({"pid": np.asarray(pid, np.int64), "track": track, "name": name,
                         "start_ns": np.asarray(start, np.int64), "dur_ns": np.asarray(dur, np.int64),
                         "args": pd.Series(args, dtype=object) if n else pd.Series([], dtype=object),
                         "link": np.full(n, -1, np.int64) if link is None else np.asarray(link, np.int64)})


def host_slices(k: pd.DataFrame, full: list[dict], brief: list[dict]) -> list[pd.DataFrame]:
    """ΔFT/ΔCT slices backwards from each launch call (ΔCT ends at it), ΔKT floor after it."""
    launch, _ = _int(k, "launch_start_ns")
    pid, tid = _int(k, "launch_pid")[0], _int(k, "launch_tid")[0]
    out, end = [], launch.copy()
    for col, name in reversed(HOST_PARTS):
        dur, measured = _int(k, col)
        keep = np.flatnonzero(measured & (dur > 0))
        out.append(_slices(pid[keep], [f"taxbreak {name} (thread {t})" for t in tid[keep]], name,
                           end[keep] - dur[keep], dur[keep], [brief[i] for i in keep]))
        end = end - dur
    floor, measured = _int(k, "kt_floor_ns")
    keep = np.flatnonzero(measured & (floor > 0))
    out.append(_slices(pid[keep], [f"taxbreak {FLOOR_NAME} (thread {t})" for t in tid[keep]], FLOOR_NAME,
                       launch[keep], floor[keep], [full[i] for i in keep]))
    return out


def device_slices(k: pd.DataFrame, brief: list[dict]) -> list[pd.DataFrame]:
    """Per stream: the queue wait of each kernel and its exposed launch latency (ending at it)."""
    device, stream = _int(k, "device")[0], _int(k, "stream")[0]
    start, _ = _int(k, "start_ns")
    q_start, q_ok = _int(k, "queue_start_ns")
    q_dur, q_dur_ok = _int(k, "queue_wait_ns")
    keep = np.flatnonzero(q_ok & q_dur_ok & (q_dur > 0))
    queue = _slices(device[keep], [f"taxbreak {QUEUE_NAME} (stream {_stream(s)})" for s in stream[keep]],
                    QUEUE_NAME, q_start[keep], q_dur[keep], [brief[i] for i in keep])
    latency, ok = _int(k, "launch_latency_ns")
    keep = np.flatnonzero(ok & (latency > 0))
    exposed = _slices(device[keep], [f"taxbreak ΔKT launch latency (stream {_stream(s)})" for s in stream[keep]],
                      LATENCY_NAME, start[keep] - latency[keep], latency[keep], [brief[i] for i in keep])
    return [queue, exposed]


def _stream(stream: int) -> str:
    return "none" if stream in (-1, 4294967295) else str(stream)  # 2^32-1: CUPTI's "no stream"


def idle_slices(idle: pd.DataFrame | None, k: pd.DataFrame) -> list[pd.DataFrame]:
    """Device idle pieces by cause, and their mirror on the host thread that caused them
    (the flow arrows join the two by ``link``)."""
    if idle is None or len(idle) == 0:
        return []
    idle = launching_thread(idle[idle["end_ns"] > idle["start_ns"]].reset_index(drop=True), k)
    start, end = idle["start_ns"].to_numpy(np.int64), idle["end_ns"].to_numpy(np.int64)
    cause = idle["cause"].astype(str).to_numpy()
    args = _idle_args(idle)
    link = np.arange(len(idle))
    device = _slices(idle["device"].to_numpy(np.int64), IDLE_TRACK,
                     [IDLE_PREFIX + c for c in cause], start, end - start, args, link)
    pid, has_pid = _int(idle, "pid")
    tid, has_tid = _int(idle, "tid")
    on = np.flatnonzero(has_pid & has_tid)
    host = _slices(pid[on], [f"taxbreak GPU idle caused (thread {t})" for t in tid[on]],
                   [CAUSED_PREFIX + c for c in cause[on]], start[on], (end - start)[on], [args[i] for i in on],
                   link[on])
    return [device, host]


def launching_thread(idle: pd.DataFrame, k: pd.DataFrame) -> pd.DataFrame:
    """Idle pieces after the next work was issued (``ISSUED_CAUSES``: its launch call had begun)
    carry no thread in ``Analysis.idle``: it is the thread of that launch call."""
    issued = idle["cause"].astype(str).isin(ISSUED_CAUSES)
    missing = issued & idle["pid"].isna() & idle["next_correlation"].notna()
    if not missing.any() or "correlation" not in k.columns:
        return idle
    by_corr = k.drop_duplicates("correlation").set_index("correlation")
    idle = idle.copy()
    corr = idle.loc[missing, "next_correlation"]
    idle.loc[missing, "pid"] = corr.map(by_corr["launch_pid"]).to_numpy()
    idle.loc[missing, "tid"] = corr.map(by_corr["launch_tid"]).to_numpy()
    return idle


def _idle_args(idle: pd.DataFrame) -> list[dict]:
    """Step and the correlation id of the activity that ended the gap (cause and length are
    the slice's name and duration already)."""
    corr, has = _int(idle, "next_correlation")
    step = idle["step"].to_numpy(np.int64) if "step" in idle.columns else np.full(len(idle), -1)
    return [{"step": s, "next_correlation": n if h else None}
            for s, n, h in zip(step.tolist(), corr.tolist(), has.tolist())]


ARG_COLUMNS = ("correlation", "op_name", "t_py_ns", "t_dispatch_ns", "t_launch_ns", "ft_python_ns",
               "ft_dispatch_ns", "ct_ns", "kt_floor_ns", "t_floor_ns", "queue_wait_ns", "launch_latency_ns",
               "is_library", "kernel_class")


def kernel_args(k: pd.DataFrame) -> tuple[list[dict], list[dict]]:
    """Per kernel: its name and every component value (µs, ``None`` where not measured)
    for the ΔKT floor slice, and the kernel's correlation id for the others."""
    names = k["name"].astype(str).tolist()
    cols = {"kernel": names}
    for c in ARG_COLUMNS:
        if c not in k.columns:
            continue
        if c.endswith("_ns"):
            ns, measured = _int(k, c)
            cols[c[:-3] + "_us"] = [round(v / 1e3, 3) if m else None for v, m in zip(ns.tolist(), measured)]
        else:
            cols[c] = [None if pd.isna(x) else (x.item() if hasattr(x, "item") else x) for x in k[c]]
    # not "correlation": tools that join launches to kernels by args.correlation (HTA) would
    # take every added slice for one more launch
    if "correlation" in cols:
        cols["kernel_correlation"] = cols.pop("correlation")
    full = [dict(zip(cols, vals)) for vals in zip(*cols.values())]
    # the name is on the kernel's own event and in the floor slice: repeating it on every slice
    # would double the size of a trace with long template names
    return full, [{"kernel_correlation": c} for c in cols.get("kernel_correlation", [None] * len(k))]


def all_slices(k: pd.DataFrame, idle: pd.DataFrame | None) -> pd.DataFrame:
    full, brief = kernel_args(k)
    parts = host_slices(k, full, brief) + device_slices(k, brief) + idle_slices(idle, k)
    return pd.concat(parts, ignore_index=True) if parts else _slices([], [], [], [], [], [])


def build_events(kernels: pd.DataFrame, shift_ns: int, idle: pd.DataFrame | None = None,
                 max_flows: int = MAX_FLOWS) -> tuple[list[dict], AnnotateStats]:
    """The added trace events (trace clock, exact µs text) and what was added."""
    k = launched(kernels)
    stats = AnnotateStats(kernels=len(k))
    if len(k) == 0:
        return [], stats
    slices = all_slices(k, idle)
    tid, lane = lay_out(slices)
    events = slice_events(slices, tid, lane, shift_ns)
    events += thread_names(slices, tid, lane, int(slices["start_ns"].min()) + shift_ns)
    kernel_arrows = launch_flows(k, shift_ns, max_flows, FLOW_ID_BASE)
    idle_arrows = idle_flows(slices, tid, lane, shift_ns, max_flows, FLOW_ID_BASE + len(kernel_arrows) // 2)
    stats.slices = {str(n): int(c) for n, c in _slice_counts(slices).items()}
    stats.tracks, stats.overflow = len(np.unique(tid)), int((lane < 0).sum())
    stats.flows = {"launch → kernel": len(kernel_arrows) // 2, "GPU idle → cause": len(idle_arrows) // 2}
    return events + kernel_arrows + idle_arrows, stats


def _slice_counts(slices: pd.DataFrame) -> pd.Series:
    """Slices per name, idle ones counted once per kind (device and host mirror)."""
    kind = slices["name"].str.replace(r":.*$", "", regex=True)
    return kind.value_counts(sort=False)


def time_shift_ns(meta) -> int:
    """ns to add to a table time to get back the trace's own clock (×1e-3 → ``ts`` µs).

    The Kineto reader keeps ``ts`` relative to ``baseTimeNanoseconds`` for new
    traces (origin = that base, so the shift is 0) and subtracts the first
    epoch timestamp (``origin_ns``) for old absolute-epoch traces.
    """
    if meta.time_base == "kineto_relative":
        return 0
    return int(meta.origin_ns or 0)


def _require_kineto_analysis(meta, path) -> None:
    if meta.source_format and meta.source_format != "kineto":
        raise UnsupportedFormatError("format.unknown", f"annotate needs a Kineto trace, not {meta.source_format}",
                                     path=str(path), hint="profile with the Kineto backend (the default)")


def annotated_bytes(raw: bytes, analysis, max_flows: int = MAX_FLOWS, path: str | Path = "") -> tuple[bytes, AnnotateStats]:
    """The annotated document's JSON text from the original's: original bytes kept, events appended."""
    meta = analysis.tables.meta
    _require_kineto_analysis(meta, path or meta.path)
    top, array = io.split_document(raw, path)
    events, stats = build_events(analysis.kernels, time_shift_ns(meta), getattr(analysis, "idle", None), max_flows)
    return io.join_document(top, io.splice_events(array, io.encode_events(events))), stats


def write_annotated(trace_path: str | Path, analysis, output: str | Path,
                    max_flows: int = MAX_FLOWS, inputs=()) -> AnnotateStats:
    """Read the trace, add the tracks, write ``output`` (gzip when it ends in .gz).

    ``output`` is written atomically and never onto the trace or ``inputs``
    (``output.is_input``) nor through a link (``output.is_link``): docs/reliability.md."""
    _require_kineto_analysis(analysis.tables.meta, trace_path)
    inputs = (trace_path, *inputs)
    output_target(output, inputs=inputs)  # refused before the analysis's copy is built
    data, stats = annotated_bytes(io.read_trace_bytes(trace_path), analysis, max_flows, trace_path)
    io.write_document(data, output, inputs=inputs)
    return stats
