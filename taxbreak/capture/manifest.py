"""The run directory: its layout, ``manifest.json`` and the derived outputs.

```
RUN_DIR/manifest.json   what ran, where, how (keys in docs/capture.md)
RUN_DIR/trace.json.gz   Kineto trace (trace.sqlite with --backend nsys)
RUN_DIR/tables/         TraceTables as Parquet (readers.load_trace)
RUN_DIR/analysis/       Analysis DataFrames as Parquet (decompose.analyze)
RUN_DIR/summary.json    Analysis.summary
```
The trace and manifest are always written; tables, analysis and summary need
the readers and the decomposer, and when one of them fails the reason is
written to ``manifest.json`` under ``outputs`` instead of silently missing.
"""
from __future__ import annotations

import importlib.util
import json
import logging
import statistics
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..decompose.floor import DEFAULT_FLOOR_US, PUBLISHED_FLOOR_US
from ..trace.errors import TaxbreakError
from ..trace.fileio import write_output
from ..trace.paths import floor_cache_path, require_run_manifest, slug

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
SUMMARY = "summary.json"
TABLES_DIR = "tables"
ANALYSIS_DIR = "analysis"
DEFAULT_ROOT = Path("taxbreak-runs")
MANIFEST_VERSION = 1

# The published floors are the decomposer's (one table, docs/method.md); the
# manifest records what a GPU run would use before the analysis confirms it.


def utc_stamp(now: datetime | None = None) -> str:
    """``20261202T101500Z``: sortable, file-name safe."""
    return (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%SZ")


def default_run_dir(model_name: str, root: Path = DEFAULT_ROOT, now: datetime | None = None) -> Path:
    """``./taxbreak-runs/<UTC time>-<model>/``, suffixed ``-2``, ``-3`` if taken."""
    base = Path(root) / f"{utc_stamp(now)}-{slug(model_name)}"
    candidate, n = base, 1
    while candidate.exists():
        n += 1
        candidate = base.with_name(f"{base.name}-{n}")
    return candidate


def floor_info(gpu_name: str | None, driver_version: str | None) -> dict:
    """The launch floor a GPU run will use and its source; null without a GPU."""
    if not gpu_name:
        return {"floor_us": None, "source": "unavailable", "reason": "no CUDA device"}
    cached = floor_cache_path(gpu_name, driver_version or "unknown")
    if cached.is_file():
        try:
            return {"floor_us": float(json.loads(cached.read_text())["floor_us"]), "source": "measured",
                    "path": str(cached)}
        except (OSError, ValueError, KeyError, TypeError):
            log.warning("unreadable floor cache %s; using the published value", cached)
    for key, value in PUBLISHED_FLOOR_US.items():
        if key in gpu_name.upper():
            return {"floor_us": value, "source": f"published:{key}"}
    return {"floor_us": DEFAULT_FLOOR_US, "source": "published:default"}


def write_json(path: Path, data: dict) -> None:
    write_output(path, json.dumps(data, indent=2, sort_keys=False, default=_jsonable) + "\n")


def read_manifest(run_dir: str | Path) -> dict:
    """The run directory's ``manifest.json``, read within the bounds every manifest read keeps
    (size, nesting, a FIFO refused unread: :func:`taxbreak.trace.paths.read_run_manifest`).

    Raises:
        TraceNotFoundError: ``run.not_a_run`` without a manifest, ``input.unreadable``, ``input.too_large``.
        TraceFormatError: ``json.too_deep``, ``run.not_a_run`` for one that is not a JSON object.
    """
    return require_run_manifest(Path(run_dir))


def _jsonable(value):
    if hasattr(value, "item"):  # numpy / torch scalars
        return value.item()
    return str(value)


@dataclass
class DerivedOutputs:
    """What :func:`write_derived` produced: the analysis (or None) and a status per output."""

    analysis: object | None
    status: dict


def write_derived(run_dir: Path, trace_path: Path) -> DerivedOutputs:
    """Write ``tables/``, ``analysis/`` and ``summary.json`` next to the trace.

    ``analyze(run_dir)`` reads the manifest (for per-token figures) and the
    trace; its ``tables`` are what goes to ``tables/``. Without a decomposer
    the tables come from ``load_trace`` alone.
    """
    status: dict = {}
    analysis, status["analysis"] = _guarded(lambda: _analyze(run_dir))
    if analysis is not None:
        _, status["summary"] = _guarded(lambda: write_json(run_dir / SUMMARY, analysis.summary))
        tables, load_status = getattr(analysis, "tables", None), "the analysis holds no tables"
    else:
        status["summary"] = f"not written: {status['analysis']}"
        tables, load_status = _guarded(lambda: _load(trace_path))
    if tables is not None:
        _, status["tables"] = _guarded(lambda: tables.to_parquet(run_dir / TABLES_DIR))
    else:
        status["tables"] = f"not written: {load_status}"
    return DerivedOutputs(analysis, status)


def _analyze(run_dir: Path):
    from ..decompose import analyze  # written by another layer; may be absent

    analysis = analyze(run_dir)
    analysis.to_parquet(run_dir / ANALYSIS_DIR)
    return analysis


def _load(trace_path: Path):
    from ..readers import load_trace

    return load_trace(trace_path)


def _guarded(fn) -> tuple[object | None, str]:
    """Run one optional output step: ``(result, "ok")`` or ``(None, reason)``.

    A missing layer or a failure in it must not lose the capture that
    already sits on disk; the reason goes to the manifest and the caller.
    """
    try:
        return fn(), "ok"
    except ImportError as err:
        return None, f"unavailable: {err}"
    except TaxbreakError as err:
        return None, f"failed: {err.one_line()}"
    except Exception as err:  # noqa: BLE001 - recorded, never swallowed silently
        log.debug("derived output failed", exc_info=True)
        return None, f"failed: {type(err).__name__}: {err}"


def build_manifest(cfg, model_name: str, spec, parameters: int, trace_path: Path, profiler_info: dict,
                   capture_overhead: dict) -> dict:
    """Every key of ``manifest.json`` (documented in docs/capture.md).

    ``cfg`` is the resolved ``ProfileConfig``; ``spec`` the ``ModelSpec`` (None for hf:PATH).
    """
    from dataclasses import asdict

    from .. import __version__
    from .hostinfo import host_info

    host = host_info()
    return {
        "manifest_version": MANIFEST_VERSION,
        "taxbreak_version": __version__,
        "created_utc": utc_stamp(),
        "backend": cfg.backend,
        "trace": trace_path.name,
        "model": model_name,
        "model_config": spec.as_dict() if spec else {"hf_path": cfg.model[3:]},
        "is_moe": spec.is_moe if spec else None,
        "parameters": parameters,
        "published_parameters": spec.published_params if spec else None,
        "batch_size": cfg.batch_size,
        "seq_len": cfg.seq_len,
        "new_tokens": cfg.new_tokens,
        "output_tokens_per_run": cfg.new_tokens,
        "generated_tokens_total": cfg.batch_size * cfg.new_tokens * cfg.runs,
        "steps_per_run": {"prefill": 1, "decode": cfg.new_tokens - 1},
        "warmup": cfg.warmup,
        "runs": cfg.runs,
        "dtype": cfg.dtype,
        "device": cfg.device,
        "seed": cfg.seed,
        **host_fields(host),
        "profiler": profiler_info,
        "command_line": list(cfg.command_line),
        "config": asdict(cfg),
        "capture_overhead": capture_overhead,
        "capture_overhead_pct": capture_overhead["overhead_pct"],
    }


def capture_libraries() -> dict:
    """The optional libraries this capture ran with, or what stood in for them.

    ``nvtx``: the ``nvtx`` package, ``torch.cuda.nvtx`` or ``none`` (markers.py);
    ``inflate``: ``isal`` or ``zlib`` for reading gzip traces back (readers).
    Both fallbacks give the same ranges and bytes, only at another speed, so a
    figure that looks slow can be traced to them.
    """
    from ..readers import kineto_stream
    from .markers import NVTX_BACKEND

    inflate = getattr(kineto_stream, "inflate_lib", None)
    if inflate is not None:
        uses_isal = inflate.__name__.startswith("isal")
    else:
        uses_isal = importlib.util.find_spec("isal") is not None
    return {"nvtx": NVTX_BACKEND, "inflate": "isal" if uses_isal else "zlib"}


def host_fields(host: dict) -> dict:
    """The manifest keys that describe the machine (versions, GPU, CPU and its clock, floor,
    the optional libraries in use); shared by ``profile`` and ``trace_handler`` manifests."""
    return {
        "torch_version": host["torch"],
        "cuda_version": host["cuda"],
        "gpu_name": host["gpu_name"],
        "cpu_model": host["cpu_model"],
        "cpu_max_mhz": host["cpu_max_mhz"],
        "cpu_max_mhz_source": host["cpu_max_mhz_source"],
        "host": host,
        "floor": floor_info(host["gpu_name"], host.get("driver_version")),
        "libraries": capture_libraries(),
    }


def finish_manifest(run_dir: Path, manifest: dict, derived: DerivedOutputs) -> None:
    """Record the output status, take the floor the analysis used, add the overhead to the summary."""
    manifest["outputs"] = derived.status
    summary = getattr(derived.analysis, "summary", None)
    if isinstance(summary, dict):
        meta = summary.setdefault("meta", {})
        if meta.get("floor_source"):  # the floor the decomposition actually used
            used = {"floor_us": meta.get("floor_us"), "source": meta["floor_source"]}
            if used["floor_us"] is None and manifest["floor"].get("reason"):
                used["reason"] = manifest["floor"]["reason"]
            manifest["floor"] = used
        meta["capture_overhead_pct"] = manifest["capture_overhead_pct"]
        meta["capture_overhead"] = manifest["capture_overhead"]
        write_json(run_dir / SUMMARY, summary)
    write_json(run_dir / MANIFEST, manifest)


def capture_overhead(without_ms: list[float], with_ms: list[float], new_tokens: int) -> dict:
    """Capture overhead: medians of the same run with and without the profiler."""
    base = statistics.median(without_ms) if without_ms else None
    traced = statistics.median(with_ms) if with_ms else None
    pct = None if not base or traced is None else 100.0 * (traced - base) / base
    return {
        "run_ms_without_profiler": base,
        "run_ms_with_profiler": traced,
        "step_ms_without_profiler": None if base is None else base / new_tokens,
        "step_ms_with_profiler": None if traced is None else traced / new_tokens,
        "overhead_pct": pct,
        "reps_without_profiler": len(without_ms),
        "reps_with_profiler": len(with_ms),
        "method": "median wall time of one run (prefill + decode steps, device-synced) "
                  "without and with the profiler; overhead_pct = 100 * (with - without) / without",
        **({} if base else {"reason": "no unprofiled reps (overhead_reps = 0)"}),
    }
