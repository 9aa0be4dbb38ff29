"""The original Kineto trace plus tracks that show the decomposition.

For every kernel with a launch call, host-side slices go to a new process
``taxbreak: host components``, one lane family per original host thread and
component, laid out backwards and forwards from the launch call::

    [ΔFT python][ΔFT dispatch][ΔCT library] | launch start | [ΔKT floor]

Since T_dispatch of a later launch of the same op runs from the previous
launch's end (docs/method.md), consecutive dispatch slices of one op tile the
host time instead of overlapping. On the device side (process ``taxbreak:
device queue``, lanes per stream) a slice ``ΔKT launch latency (exposed)`` ends
at the kernel's start and lasts ``launch_latency_ns`` (the part of the wait during
which the device was idle and the kernel was next: docs/method.md §2.1).
The ΔKT floor and queue slices carry every per-kernel value in their args (µs,
``null`` where not measured); a component that is not measured or is 0 gets
no slice.

A chrome-trace thread must nest properly, so slices that would overlap
partially go to the next lane of their family (vectorized rounds over
:func:`taxbreak.trace.nesting.nesting`). The new events have category
``taxbreak``, which analyses skip as an unmodelled category (counted as
``event.unknown_category``), so re-analysing an annotated trace gives the same
numbers.
"""
from __future__ import annotations

import gzip
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import numpy as np
import pandas as pd

from ..trace.errors import TraceFormatError, UnsupportedFormatError
from ..trace.nesting import nesting

HOST_PID = 2_000_000_001  # above any OS pid (Linux pid_max <= 2^22) and any device id
DEVICE_PID = 2_000_000_002
CATEGORY = "taxbreak"
MAX_LANES = 16
HOST_PARTS = (("ft_python_ns", "ΔFT python"), ("ft_dispatch_ns", "ΔFT dispatch"), ("ct_ns", "ΔCT library"))
QUEUE_NAME = "ΔKT launch latency (exposed)"
FLOOR_NAME = "ΔKT floor"


@dataclass
class AnnotateStats:
    kernels: int = 0
    slices: dict[str, int] = field(default_factory=dict)
    host_lanes: int = 0
    device_lanes: int = 0
    overflow: int = 0  # slices written as async events (more than MAX_LANES lanes needed)

    def summary_line(self) -> str:
        if not self.kernels:
            # a CPU-only trace: the copy is written, but it has no ΔFT/ΔCT/ΔKT tracks to add
            return "no kernels in the trace: nothing to annotate (the copy holds the original events only)"
        parts = ", ".join(f"{v:,} {k}" for k, v in self.slices.items())
        extra = (f"; {self.overflow:,} slices beyond {MAX_LANES} lanes written as async events"
                 if self.overflow else "")
        return (f"{self.kernels:,} kernels annotated ({parts}) on {self.host_lanes} host and "
                f"{self.device_lanes} device lanes{extra}")


def require_kineto(path: str | Path) -> None:
    """Raise ``format.unknown`` unless ``path`` holds a Kineto JSON trace (checked
    from its first bytes, before any analysis)."""
    from ..readers.detect import KINETO, detect_format

    found = detect_format(path)
    if found.kind != KINETO:
        raise UnsupportedFormatError("format.unknown", f"annotate needs a Kineto trace, not {found.kind}",
                                     path=str(path),
                                     hint="Nsight exports cannot be annotated; profile with the torch backend")


def read_kineto_document(path: str | Path) -> dict:
    """The trace as a JSON object (gzip or plain); a list becomes ``{"traceEvents": [...]}``."""
    from ..readers.kineto_document import read_document  # the reader's bounds and duplicate-key check

    try:
        doc = read_document(path)
    except msgspec.DecodeError as err:
        raise UnsupportedFormatError("format.unknown", "annotate needs a Kineto JSON trace", path=str(path),
                                     hint="Nsight exports cannot be annotated; give the .json/.json.gz trace") from err
    if isinstance(doc, list):
        doc = {"traceEvents": doc}
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise TraceFormatError("kineto.no_events", "JSON without a traceEvents list", path=str(path))
    return doc


def assign_lanes(group: np.ndarray, start: np.ndarray, end: np.ndarray, max_lanes: int = MAX_LANES) -> np.ndarray:
    """A lane per interval so that the intervals of one group on one lane nest properly.

    Each pass keeps a properly nested subset of the remaining intervals (see
    :func:`nested_subset`) on the current lane and moves the rest to the next.
    Intervals still left after ``max_lanes`` passes get lane -1.
    """
    lane = np.full(len(start), -1, dtype=np.int64)
    todo = np.arange(len(start))
    for current in range(max_lanes):
        if len(todo) == 0:
            break
        ok = nested_subset(group[todo], start[todo], end[todo])
        lane[todo[ok]] = current
        todo = todo[~ok]
    return lane


def nested_subset(group: np.ndarray, start: np.ndarray, end: np.ndarray, max_rounds: int = 32) -> np.ndarray:
    """A mask of intervals that nest properly per group (disjoint or contained).

    Rounds of :func:`taxbreak.trace.nesting.nesting` drop every interval that
    ends after its computed parent until none does; a set where every interval
    lies inside its innermost open predecessor is a proper stack. If that has
    not settled after ``max_rounds`` rounds, the strict rule (each interval
    starts after all earlier ones ended) gives a valid subset instead.
    """
    keep = np.ones(len(start), dtype=bool)
    for _ in range(max_rounds):
        idx = np.flatnonzero(keep)
        depth, parent = nesting(group[idx], start[idx], end[idx] - start[idx])
        bad = (depth > 0) & (parent < 0)
        has = parent >= 0
        bad[has] = end[idx][has] > end[idx][parent[has]]
        if not bad.any():
            return keep
        keep[idx[bad]] = False
    return keep & _disjoint_subset(group, start, end)


def _disjoint_subset(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per group in start order, the intervals that start after every earlier one ended."""
    order = np.lexsort((start, group))
    g, s, e = group[order], start[order], end[order]
    reach = pd.Series(e).groupby(g).cummax().groupby(g).shift(1).to_numpy(dtype=float, na_value=-np.inf)
    ok = np.zeros(len(start), dtype=bool)
    ok[order] = s >= reach
    return ok


def _ns(frame: pd.DataFrame, col: str) -> np.ndarray:
    """A nullable ns column as float64 with NaN for NA."""
    if col not in frame.columns:
        return np.full(len(frame), np.nan)
    return pd.to_numeric(frame[col], errors="coerce").to_numpy(dtype=float, na_value=np.nan)


def _launched(kernels: pd.DataFrame) -> pd.DataFrame:
    """Kernels with a launch call on a known host thread."""
    need = ("launch_start_ns", "launch_pid", "launch_tid")
    if any(c not in kernels.columns for c in need):
        return kernels.iloc[0:0]
    mask = kernels["launch_start_ns"].notna() & kernels["launch_pid"].notna() & kernels["launch_tid"].notna()
    if "kind" in kernels.columns:
        mask &= kernels["kind"] == "kernel"
    return kernels[mask]


def host_slices(k: pd.DataFrame) -> pd.DataFrame:
    """Host-side slices (ns, trace-table clock): one row per (kernel, component),
    laid out backwards from the launch call (ΔCT ends at it) and the floor after it."""
    launch = _ns(k, "launch_start_ns")
    rows, end = [], launch.copy()
    for col, name in reversed(HOST_PARTS):
        raw = _ns(k, col)
        dur = np.nan_to_num(raw)
        rows.append(_part(k, name, end - dur, dur, raw))
        end = end - dur
    floor = _ns(k, "kt_floor_ns")
    rows.append(_part(k, FLOOR_NAME, launch, np.nan_to_num(floor), floor))
    return pd.concat(rows, ignore_index=True)


def _part(k: pd.DataFrame, name: str, start: np.ndarray, dur: np.ndarray, raw: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame({"kernel": np.arange(len(k)), "name": name, "start_ns": start, "dur_ns": dur,
                         "measured": ~np.isnan(raw)})


def build_events(kernels: pd.DataFrame, shift_ns: int) -> tuple[list[dict], AnnotateStats]:
    """The added trace events (µs, trace clock) and what was added."""
    k = _launched(kernels).reset_index(drop=True)
    stats = AnnotateStats(kernels=len(k))
    if len(k) == 0:
        return [], stats
    parts = host_slices(k)
    parts = parts[parts["measured"] & (parts["dur_ns"] > 0)].reset_index(drop=True)
    kid = parts["kernel"].to_numpy()
    pid, tid = k["launch_pid"].astype("int64").to_numpy()[kid], k["launch_tid"].astype("int64").to_numpy()[kid]
    family = pd.MultiIndex.from_arrays([pid, tid, parts["name"].to_numpy()])
    labels = [f"host {p}:{t} · {n}" for p, t, n in family]
    full_args = _kernel_args(k)
    events, stats.host_lanes, over_h = _lane_events(HOST_PID, parts, family, labels, k, full_args, shift_ns,
                                                    "taxbreak: host components (ΔFT, ΔCT, ΔKT floor)")
    for name, count in parts["name"].value_counts(sort=False).items():
        stats.slices[name] = int(count)
    q = queue_slices(k)
    dev_family = pd.MultiIndex.from_arrays([k["device"].astype("int64").to_numpy()[q["kernel"]],
                                            k["stream"].astype("int64").to_numpy()[q["kernel"]]])
    dev_labels = [f"GPU {d} stream {s} · queued" for d, s in dev_family]
    dev_events, stats.device_lanes, over_d = _lane_events(DEVICE_PID, q, dev_family, dev_labels, k, full_args,
                                                          shift_ns,
                                                          "taxbreak: device queue (ΔKT above floor)")
    stats.slices[QUEUE_NAME] = len(q)
    stats.overflow = over_h + over_d
    return events + dev_events, stats


def queue_slices(k: pd.DataFrame) -> pd.DataFrame:
    """Device-side slices ending at each kernel's start, lasting ``launch_latency_ns``."""
    resid = _ns(k, "launch_latency_ns")
    keep = np.flatnonzero(~np.isnan(resid) & (resid > 0))
    start = _ns(k, "start_ns")[keep]
    return pd.DataFrame({"kernel": keep, "name": QUEUE_NAME, "start_ns": start - resid[keep],
                         "dur_ns": resid[keep], "measured": True})


def _lane_events(pid: int, slices: pd.DataFrame, family: pd.MultiIndex, labels: list[str], k: pd.DataFrame,
                 full_args: list[dict], shift_ns: int, process: str) -> tuple[list[dict], int, int]:
    """X events for ``slices`` on lanes of their family, plus the M naming events."""
    if len(slices) == 0:
        return [], 0, 0
    group = pd.factorize(family)[0]
    start = np.rint(slices["start_ns"].to_numpy(dtype=float)).astype(np.int64)
    end = start + np.rint(slices["dur_ns"].to_numpy(dtype=float)).astype(np.int64)
    lane = assign_lanes(group, start, end)
    on_lane = lane >= 0
    tid = np.zeros(len(lane), dtype=np.int64)
    tid[on_lane] = pd.factorize(pd.MultiIndex.from_arrays([group[on_lane], lane[on_lane]]), sort=True)[0] + 1
    args = _slice_args(k, slices, full_args)
    names = slices["name"].to_numpy()
    events = [{"ph": "X", "cat": CATEGORY, "name": names[i], "pid": pid, "tid": int(tid[i]),
               "ts": _us(start[i] + shift_ns), "dur": _us(end[i] - start[i]), "args": args[i]}
              for i in np.flatnonzero(on_lane)]
    events += _async_events(pid, names, start, end, args, np.flatnonzero(~on_lane), shift_ns)
    lane_labels = [f"{label} · lane {ln}" for label, ln in zip(labels, lane)]
    names_meta = _thread_names(pid, tid[on_lane], [lane_labels[i] for i in np.flatnonzero(on_lane)], process)
    return events + names_meta, int(tid.max()), int((~on_lane).sum())


def _async_events(pid: int, names, start, end, args, idx: np.ndarray, shift_ns: int) -> list[dict]:
    """Slices beyond MAX_LANES (deep device queues) as async b/e pairs, which
    trace viewers stack on their own rows, so they never overlap improperly."""
    out = []
    for n, i in enumerate(idx):
        ident = f"0x{pid:x}{n:08x}"
        out.append({"ph": "b", "cat": CATEGORY, "name": names[i], "id": ident, "pid": pid, "tid": 0,
                    "ts": _us(start[i] + shift_ns), "args": args[i]})
        out.append({"ph": "e", "cat": CATEGORY, "name": names[i], "id": ident, "pid": pid, "tid": 0,
                    "ts": _us(end[i] + shift_ns)})
    return out


def _us(ns) -> float:
    """ns -> µs with one rounding: epoch-based ``ts`` (~1.7e18 ns) would lose
    precision if converted to float before the division."""
    whole, rest = divmod(int(ns), 1000)
    return whole + rest / 1000


ARG_COLUMNS = ("correlation", "op_name", "t_py_ns", "t_dispatch_ns", "t_launch_ns", "ft_python_ns",
               "ft_dispatch_ns", "ct_ns", "kt_floor_ns", "launch_latency_ns", "is_library", "kernel_class")


def _slice_args(k: pd.DataFrame, slices: pd.DataFrame, full: list[dict]) -> list[dict]:
    """Kernel name and correlation on every slice; every component value (µs,
    ``None`` where not measured, from ``full``) on the ΔKT floor and queue slices."""
    kid = slices["kernel"].to_numpy()
    names, corr = k["name"].astype(str).to_numpy(), k["correlation"].to_numpy()
    wide = slices["name"].isin([FLOOR_NAME, QUEUE_NAME]).to_numpy()
    return [dict(kernel=names[i], **(full[i] if w else {"correlation": int(corr[i])}))
            for i, w in zip(kid, wide)]


def _kernel_args(k: pd.DataFrame) -> list[dict]:
    cols = {}
    for c in ARG_COLUMNS:
        if c not in k.columns:
            continue
        if c.endswith("_ns"):
            v = _ns(k, c) / 1e3
            cols[c[:-3] + "_us"] = [None if np.isnan(x) else round(float(x), 3) for x in v]
        else:
            cols[c] = [None if pd.isna(x) else (x.item() if hasattr(x, "item") else x) for x in k[c]]
    return [dict(zip(cols, vals)) for vals in zip(*cols.values())] if cols else [{} for _ in range(len(k))]


def _thread_names(pid: int, tids: np.ndarray, labels: list[str], process: str) -> list[dict]:
    """``M`` events naming the new process and each of its lanes (first label per tid)."""
    first = pd.Series(labels).groupby(tids).first()
    meta = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": process}},
            {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": pid}}]
    return meta + [{"ph": "M", "name": "thread_name", "pid": pid, "tid": int(t), "args": {"name": label}}
                   for t, label in first.items()]


def time_shift_ns(meta) -> int:
    """ns to add to a table time to get back the trace's own clock (×1e-3 → ``ts`` µs).

    The Kineto reader keeps ``ts`` relative to ``baseTimeNanoseconds`` for new
    traces (origin = that base, so the shift is 0) and subtracts the first
    epoch timestamp (``origin_ns``) for old absolute-epoch traces.
    """
    if meta.time_base == "kineto_relative":
        return 0
    return int(meta.origin_ns or 0)


def annotate_document(doc: dict, analysis) -> AnnotateStats:
    """Append the decomposition tracks to a Kineto document in place."""
    meta = analysis.tables.meta
    if meta.source_format and meta.source_format != "kineto":
        raise UnsupportedFormatError("format.unknown", f"annotate needs a Kineto trace, not {meta.source_format}",
                                     path=meta.path, hint="profile with the Kineto backend (the default)")
    events, stats = build_events(analysis.kernels, time_shift_ns(meta))
    doc["traceEvents"].extend(events)
    return stats


def write_annotated(trace_path: str | Path, analysis, output: str | Path) -> AnnotateStats:
    """Read the trace, add the tracks, write ``output`` (gzip when it ends in .gz)."""
    meta = analysis.tables.meta
    if meta.source_format and meta.source_format != "kineto":
        raise UnsupportedFormatError("format.unknown", f"annotate needs a Kineto trace, not {meta.source_format}",
                                     path=str(trace_path), hint="profile with the Kineto backend (the default)")
    doc = read_kineto_document(trace_path)
    stats = annotate_document(doc, analysis)
    data = msgspec.json.encode(doc)
    out = Path(output)
    out.write_bytes(gzip.compress(data, compresslevel=6) if out.name.endswith(".gz") else data)
    return stats
