"""``what_if(path)``: every projection for one run directory or one sweep directory.

The library function behind ``taxbreak whatif``. Returns a JSON-ready dict;
values that cannot be projected are ``None`` with the reason beside them.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ..trace.errors import TraceNotFoundError
from .advisor import advise, fit_calibration
from .batching import Workload
from .calibration import Calibration
from .cudagraph import NO_CUDA, measure_decode_graph
from .metrics import floor_of, phases_in, read_summary, step_means
from .projections import project_cpu_speedup, project_cuda_graphs
from .sweep import INDEX
from .sweep_table import as_records, build_table

STEP_FIELDS = ("steps", "step_us", "wall_us", "span_us", "hdbi", "orchestration_us", "device_active_us", "exposed_orchestration_us",
               "hidden_orchestration_us", "kernels")


@dataclass
class WhatIfOptions:
    """Inputs of the projections (CLI flags of ``taxbreak whatif``)."""

    cpu_speedup: float = 1.2
    workload: Workload = field(default_factory=lambda: Workload(512, 256))
    concurrencies: list[int] = field(default_factory=lambda: [32, 512, 2048])
    calibration: Calibration | None = None
    graph_launch_us: float | None = None
    measure_graphs: bool = False
    kv_capacity_tokens: float | None = None
    oom_prob: float = 0.01
    alpha_mb_s: float | None = None


def what_if(path: str | Path, options: WhatIfOptions | None = None, progress=None) -> dict:
    """Projections for a run directory (``summary.json``), a sweep directory (``sweep.json``) or a trace.

    A trace file (or a run directory without its ``summary.json``) is analysed first, with the
    same defaults as ``taxbreak analyze``; ``progress`` receives that analysis's stages.

    Raises:
        TraceNotFoundError: ``run.not_a_run`` for a directory that holds none of these, ``input.not_found``
            for a path that does not exist; a trace's reader errors as for ``analyze``.
    """
    opts = options or WhatIfOptions()
    root = Path(path)
    if (root / INDEX).is_file():
        return _sweep(root, opts)
    if (root / "summary.json").is_file():
        return _run(root, read_summary(root), _manifest(root), opts)
    return _trace(root, opts, progress)


def _trace(path: Path, opts: WhatIfOptions, progress) -> dict:
    from ..report.run import TRACE_SUFFIXES, load_run

    if path.is_dir() and not any(f.name.endswith(TRACE_SUFFIXES) for f in path.iterdir()):
        raise TraceNotFoundError("run.not_a_run", "neither a run directory (summary.json or a trace), a sweep "
                                 "directory (sweep.json) nor a trace", path=str(path),
                                 hint="give a trace, or a directory written by `taxbreak profile` or `taxbreak sweep`")
    run = load_run(path, progress=progress)
    # the summary as summary.json holds it (JSON types), so a trace projects exactly as its run directory
    return _run(path, json.loads(run.analysis.to_json()), run.manifest or {}, opts)


def run_projections(summary: dict, opts: WhatIfOptions) -> dict:
    """Per phase: the mean step, the faster-host projection; for decode also CUDA graphs."""
    floor_us, floor_source = floor_of(summary)
    phases = {}
    for phase in phases_in(summary):
        means = step_means(summary, phase)
        phases[phase] = {"step": {k: means.get(k) for k in STEP_FIELDS},
                         "cpu_speedup": project_cpu_speedup(means, opts.cpu_speedup)}
        if phase == "decode":
            phases[phase]["cuda_graphs"] = project_cuda_graphs(means, floor_us, floor_source, opts.graph_launch_us,
                                                               _launch_fit(summary))
    return {"floor_us": floor_us, "floor_source": floor_source, "phases": phases}


def _launch_fit(summary: dict) -> dict | None:
    """The graph launch cost fitted on the trace (docs/serving.md §3): the GPU with most launches."""
    devices = [d for d in (summary.get("graph_launch_cost") or {}).get("devices", {}).values()
               if d.get("a_us") is not None]
    return max(devices, key=lambda d: d["launches"], default=None)


def _run(root: Path, summary: dict, manifest: dict, opts: WhatIfOptions) -> dict:
    out = {"kind": "run", "path": str(root), "model": manifest.get("model"),
           "shape": {k: manifest.get(k) for k in ("batch_size", "seq_len", "new_tokens", "device", "dtype")},
           **run_projections(summary, opts)}
    decode = out["phases"].get("decode")
    if decode is not None:
        decode["cuda_graphs"]["measurement"] = _measurement(manifest, opts)
    if opts.calibration is not None:
        out["batching"] = advise(opts.calibration, opts.workload, opts.concurrencies, alpha_mb_s=opts.alpha_mb_s,
                                 kv_capacity_tokens=opts.kv_capacity_tokens, oom_prob=opts.oom_prob)
    else:
        out["batching"] = {"not_computed": "one run has no prefill/decode cost curve: give a sweep directory "
                                           "or --calibration (e.g. h200-qwen3-8b)"}
    return out


def _sweep(root: Path, opts: WhatIfOptions) -> dict:
    table, notes = build_table(root)
    points = []
    for point in json.loads((root / INDEX).read_text()).get("points", []):
        run_dir = root / point["run_dir"]
        if point.get("status") == "failed" or not (run_dir / "summary.json").is_file():
            continue
        proj = run_projections(read_summary(run_dir), opts)
        points.append({"name": point["name"], **proj})
    fitted, fits = fit_calibration(table) if not table.empty else (None, {})
    calib = opts.calibration or fitted
    out = {"kind": "sweep", "path": str(root), "notes": notes, "points": points, "fits": fits,
           "fitted_calibration": None if fitted is None else fitted.as_dict()}
    if calib is None:
        out["batching"] = {"not_computed": "the sweep has too few points to fit T_p and T_d; give --calibration"}
    else:
        out["batching"] = advise(calib, opts.workload, opts.concurrencies, alpha_mb_s=opts.alpha_mb_s,
                                 kv_capacity_tokens=opts.kv_capacity_tokens, oom_prob=opts.oom_prob)
    out["table"] = as_records(table) if not table.empty else []
    return out


def _manifest(root: Path) -> dict:
    try:
        return json.loads((root / "manifest.json").read_text())
    except (OSError, ValueError):
        return {}


def _measurement(manifest: dict, opts: WhatIfOptions) -> dict:
    import torch

    if not torch.cuda.is_available():
        return {"measured": False, "reason": NO_CUDA}
    if not opts.measure_graphs:
        return {"measured": False, "reason": "not measured: pass --measure-graphs to time the graph replay"}
    config = manifest.get("config") or {}
    return measure_decode_graph(manifest.get("model") or config.get("model"), manifest.get("batch_size", 1),
                                manifest.get("seq_len", 128), tiny=config.get("tiny"), dtype=manifest.get("dtype"))
