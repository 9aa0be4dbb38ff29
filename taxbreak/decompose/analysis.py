"""``analyze()``: a trace in, the TaxBreak decomposition out (``Analysis``)."""
from __future__ import annotations

import logging
import math
import numbers
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd

from ..trace.diagnostics import Diagnostics
from ..trace.errors import UsageError
from ..trace.memory import release_freed_heap
from ..trace.nesting import sorted_unique
from ..trace.progress import ANALYZE_STAGES, ProgressHook, Stages, reporting
from ..trace.tables import TraceTables
from .capture import capture_summary
from .components import build_kernels
from .floor import resolve_floor
from .device_checks import checked_device, trace_window
from .idle import attribute_idle, issued_path, window_pieces
from .inputs import resolve_input
from .health import copy_facts, trace_health
from .link import link
from .op_chain import op_chain
from .graph_cost import graph_cost_summary
from .overlap import BlockingCalls, HostFrames, overlap_summary, step_overlap
from .partition import device_busy, host_partition, stall_meta
from .py_stalls import take_stalls_out_of_t_py
from .result import FRAMES, Analysis  # noqa: F401 - FRAMES re-exported for callers of this module
from .scopes import build_ops, phase_table, scope_inputs, step_table
from .warmup import add_shares, find_warmup, warmup_summary
from .steps import BETWEEN, BETWEEN_NAME, compile_pattern, find_steps, is_marker, marker_candidates
from .summary import Context
from .views import LAUNCH_API_KINDS, build_views, _ints, _strs

log = logging.getLogger(__name__)


def analyze(path_or_tables, floor_us: float | None = None, step_pattern: str | None = None,
            tokens: int | None = None, progress: ProgressHook = None) -> Analysis:
    """Decompose a trace into ΔFT / ΔCT / ΔKT, HDBI, steps/phases and the host partition.

    Args:
        path_or_tables: a trace file, a run directory (``manifest.json`` + trace) or a ``TraceTables``.
        floor_us: T_sys in µs; overrides the cached or published floor (source ``given``).
        step_pattern: regex naming step ranges (named group ``phase`` optional).
        tokens: output tokens of the whole trace (default: the run manifest's ``new_tokens`` × runs).
        progress: called with a ``ProgressEvent`` as each of ``ANALYZE_STAGES`` begins (nothing printed).

    Returns:
        An :class:`Analysis`.

    Raises:
        UsageError: ``usage.step_pattern`` when ``step_pattern`` does not compile;
            ``usage.invalid`` for a floor that is not a positive finite number or a token
            count that is not a positive integer.
        TaxbreakError: whatever the reader raises for a bad trace.
    """
    _check_arguments(floor_us, tokens)
    pattern = compile_pattern(step_pattern)
    stages = Stages(progress, ANALYZE_STAGES)
    stages.enter("reading trace")
    with reporting(progress):  # the reader's bytes, to the same hook
        source = resolve_input(path_or_tables)
    tables = source.tables
    diags = Diagnostics()
    diags.merge(tables.diagnostics)
    views = build_views(tables)
    views.device = checked_device(views.device, diags)
    nvtx = _nvtx(tables)
    floor = resolve_floor(tables, floor_us, _manifest_gpu(source.manifest))
    # from here on only the views are read: the other columns go (read again if asked for)
    tables = source.release_tables()
    release_freed_heap()
    stages.enter("finding steps")
    views, window = trace_window(views, diags)  # the whole trace: the no-marker step and the idle attribution's window
    marker = is_marker(views, pattern)
    steps = find_steps(*marker_candidates(views, *nvtx), pattern, window, diags)
    busy = device_busy(views.device.start_ns, views.device.end_ns)
    # the host partition needs neither the links nor the kernels: it runs beside them (numpy
    # releases the GIL in its sorts and searches, so both cores work; 10 M events: ~3 s and ~4 s)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="taxbreak-partition") as pool:
        partition_job = pool.submit(host_partition, views, marker, steps, busy)
        stages.enter("linking launches to kernels")
        links = link(views, marker, diags)
        chain = op_chain(views, links, diags)
        kernels = build_kernels(views, links, floor, diags, chain)
        # the per-device facts leave the frame's attrs: pandas deep-copies attrs on every
        # operation, and with 4,096 devices those copies took 8 s
        facts = {key: kernels.attrs.pop(key, None) for key in PER_DEVICE_ATTRS}
        _assign_steps(kernels, steps)
        path = issued_path(kernels)
        # the idle pieces before a launch and the stalls inside T_py read the partition's labelled segments
        partition, lanes, stalls = partition_job.result()
        del partition_job  # the future would keep the segments alive to the end
        take_stalls_out_of_t_py(kernels, views, links, lanes)
        # the op table is the last reader of the host views: it runs beside the idle attribution
        ops_job = pool.submit(build_ops, views, kernels, links.roots)
        stages.enter("attributing GPU idle")
        idle = attribute_idle(views, links.dev_api, lanes, steps, window, path, diags)
        del lanes
        ops = ops_job.result()
        del ops_job
    # the links, the idle attribution and the partition freed large temporaries on the heap
    release_freed_heap()
    # runs recorded in the trace itself first, then the manifest's count
    passes = steps.runs or source.runs or 1
    trace_tokens = tokens if tokens is not None else (source.new_tokens * passes if source.new_tokens else None)
    # T_py counts as measured only if some kernel's ATen op actually has an enclosing torch-level op
    t_py_measured = bool(links.has_torch_level and kernels["t_py_ns"].notna().any())
    ctx = Context(floor, kernels.attrs.get("t_dispatch_base_ns"), trace_tokens, views.device.row.size > 0,
                  t_py_measured, links.has_library_ranges,
                  tuple(int(d) for d in sorted_unique(np.asarray(views.device.device, np.int64))))
    # shared by both tables below, computed before they run side by side
    stages.enter("summarising phases and steps")
    inputs = scope_inputs(views, links, kernels, partition, steps, ctx, idle, window_pieces(window, steps))
    graph_capture = _graph_capture(views, links, kernels)
    warmup = warmup_summary(find_warmup(views, links), views, kernels)
    # nothing reads the views or the links from here on: ~0.5 GB at 10 M events, let go
    # before the two tables' temporaries (the peak of a cold analyze)
    graph_launch_calls = int(views.api.kind_is("graph_launch").sum())
    overlap = overlap_summary(step_overlap(kernels, steps.table, BlockingCalls.of(views.api), HostFrames.of(views)),
                              steps.scheme)
    del views, links, marker, busy, path
    release_freed_heap()  # their arrays below the mmap threshold stay resident until trimmed
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="taxbreak-scopes") as pool:
        phases_job = pool.submit(phase_table, inputs)
        steps_df, step_dicts = step_table(inputs)
        phases_df, phase_dicts, all_dict = phases_job.result()
    meta = _meta(tables, source, steps, floor, ctx, passes)
    meta["graph_capture"] = graph_capture
    meta["launch_latency_bound_us"] = facts["launch_latency_bound_us"]
    meta["dependency_waits"] = facts["dependency_waits"] or []
    meta.update(stall_meta(stalls, idle))
    summary = {"all": all_dict, "phases": phase_dicts, "steps": step_dicts, "meta": meta,
               "warmup": add_shares(warmup, all_dict), "overlap": overlap,
               "graph_launch_cost": graph_cost_summary(kernels),
               "diagnostics": diags.as_dict()}
    meta.update(copy_facts(kernels))
    meta["graph_launch_calls"] = graph_launch_calls
    # trace health opens every output, the JSON included
    summary = {"health": trace_health(summary, kernels, facts["idle_launch_lag_ns"] or {}), **summary}
    stages.finish()
    return Analysis(kernels, steps_df, phases_df, ops, partition, summary, tables, idle, chain.accounts)


PER_DEVICE_ATTRS = ("launch_latency_bound_us", "dependency_waits", "idle_launch_lag_ns")


def _check_arguments(floor_us, tokens) -> None:
    """The notebook API gets the same argument checks as the CLI's option types."""
    if floor_us is not None and not (isinstance(floor_us, numbers.Real) and math.isfinite(floor_us) and floor_us > 0):
        raise UsageError("usage.invalid", f"floor_us must be a positive number of µs, got {floor_us!r}",
                         hint="give the null-kernel floor in µs, e.g. floor_us=4.5, or None for the default")
    if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, numbers.Integral) or tokens <= 0):
        raise UsageError("usage.invalid", f"tokens must be a positive integer, got {tokens!r}",
                         hint="the number of output tokens of the whole trace, or None to read the manifest")


def _manifest_gpu(manifest: dict | None) -> str | None:
    name = (manifest or {}).get("gpu_name")
    return name if isinstance(name, str) and name else None


def _nvtx(tables: TraceTables):
    r = tables.ranges
    src = _strs(r, "source")
    keep = src == "nvtx"
    start = _ints(r, "start_ns")[keep]
    return _strs(r, "name")[keep], start, start + _ints(r, "dur_ns")[keep]


def _graph_capture(views, links, kernels: pd.DataFrame) -> dict:
    """``meta.graph_capture`` (decompose/capture.py): launch calls captured against those made, and the
    kernels that ran with a launch call in the trace."""
    executed = int(((kernels["kind"] == "kernel") & kernels["launch_start_ns"].notna()).sum())
    return capture_summary(links.capture, int(views.api.kind_is(*LAUNCH_API_KINDS).sum()), executed)


def _assign_steps(kernels: pd.DataFrame, steps) -> None:
    """A kernel belongs to the step enclosing its launch call (its own start when orphaned)."""
    host_t = kernels["launch_start_ns"].fillna(kernels["start_ns"]).to_numpy(np.int64)
    kernels["step"] = steps.assign(host_t)
    phase_of = dict(zip(steps.table["step"], steps.table["phase"]))
    phase_of[BETWEEN] = BETWEEN_NAME
    kernels["phase"] = kernels["step"].map(phase_of)


def _meta(tables: TraceTables, source, steps, floor, ctx: Context, passes: int) -> dict:
    meta = tables.meta
    return {
        "path": meta.path or source.path,
        "source_format": meta.source_format,
        "gpu": floor.gpu_name or None,
        "device": "CUDA device activity present" if ctx.has_device else "no CUDA device in trace",
        "floor_us": floor.floor_us,
        "floor_source": floor.source,
        "t_dispatch_base_us": None if ctx.dispatch_base_ns is None else ctx.dispatch_base_ns / 1000.0,
        "t_py_measured": ctx.t_py_measured,
        "library_ranges": ctx.has_library_ranges,
        "step_scheme": steps.scheme,
        "runs": passes,
        "tokens": ctx.tokens,
        "manifest": source.manifest,
        # a run directory's capture overhead, so `analyze RUN_DIR --json` shows what `profile` showed
        "capture_overhead_pct": (source.manifest or {}).get("capture_overhead_pct"),
        "capture_overhead": (source.manifest or {}).get("capture_overhead"),
        "event_counts": dict(meta.event_counts),
    }
