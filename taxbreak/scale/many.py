"""Analyze a folder of traces (one per rank or per run) in parallel processes.

Map per file → reduce: each worker process loads one trace (through the
parse cache), runs ``taxbreak.decompose.analyze`` and sends back only its
summary (and, with ``export_dir``, stages its partitioned tables on disk), so
no event-scale data crosses process boundaries. The parent settles ranks,
publishes partitions and combines the summaries (:mod:`.combine`).
"""
from __future__ import annotations

import logging
import os
import shutil
import time
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Callable

import pandas as pd

from ..readers.kineto_parallel import ENV_WORKERS
from ..trace import errors as trace_errors
from ..trace.diagnostics import Diagnostics
from ..trace.errors import TaxbreakError, UsageError
from ..trace.paths import slug
from .combine import combine_summaries
from .partition import clear_run, publish_partitions, stage_partitions
from .workers import plan_workers

log = logging.getLogger(__name__)

ON_ERROR = ("fail", "skip")
# Columns of ManyResult.per_rank(), in this order, when the summaries have them.
PER_RANK_KEYS = ("kernels", "launches", "device_active_us", "orchestration_us", "hdbi",
                 "framework_us", "library_us", "launch_floor_us", "span_us", "steps")


@dataclass(frozen=True)
class ManyOptions:
    """What every worker needs; picklable (``analyze_fn`` must be a module-level function)."""

    floor_us: float | None = None
    step_pattern: str | None = None
    use_cache: bool = True
    stage_root: str | None = None  # where workers stage partitions (export_dir/.stage-<run>)
    analyze_fn: Callable | None = None  # (path, options) -> Analysis; default: load + analyze


@dataclass
class FileResult:
    """The outcome of one trace: its summary, or the error that stopped it."""

    path: str
    index: int  # position in file order
    rank: int | None = None
    rank_source: str = ""  # "meta" (TraceMeta.rank) | "file_order"
    summary: dict | None = None
    error: dict | None = None  # {"code", "message", "hint", "location", "type"}
    seconds: float = 0.0
    stage_dir: str | None = None

    @property
    def is_ok(self) -> bool:
        return self.error is None


@dataclass
class ManyResult:
    """Per-file results (file order) and their combination."""

    files: list[FileResult]
    combined: dict
    diagnostics: Diagnostics = field(default_factory=Diagnostics)
    workers: int = 1
    seconds: float = 0.0
    exported: list[Path] = field(default_factory=list)

    @property
    def failed(self) -> list[FileResult]:
        return [f for f in self.files if not f.is_ok]

    def to_dict(self) -> dict:
        """JSON-ready form: per-file summaries (``all`` and phases), errors, combination, diagnostics."""
        files = [{"path": f.path, "rank": f.rank, "rank_source": f.rank_source, "seconds": round(f.seconds, 3),
                  "error": f.error,
                  "all": f.summary.get("all") if f.summary else None,
                  "phases": f.summary.get("phases") if f.summary else None} for f in self.files]
        return {"files": files, "combined": self.combined, "workers": self.workers,
                "seconds": round(self.seconds, 3), "diagnostics": self.diagnostics.as_dict(),
                "exported": [str(p) for p in self.exported]}

    def per_rank(self) -> pd.DataFrame:
        """One row per analyzed trace, sorted by rank: path, rank, rank source and key metrics."""
        rows = []
        for f in self.files:
            if not f.is_ok:
                continue
            metrics = f.summary.get("all", {})
            row = {"rank": f.rank, "rank_source": f.rank_source, "path": f.path}
            row.update({k: metrics.get(k) for k in PER_RANK_KEYS if k in metrics})
            rows.append(row)
        if not rows:
            return pd.DataFrame(columns=["rank", "rank_source", "path"])
        return pd.DataFrame(rows).sort_values(["rank", "path"], kind="stable").reset_index(drop=True)


def default_analyze(path: str, options: ManyOptions):
    """Analyze ``path`` through the analysis and parse caches (the worker's default job)."""
    from .analysis_cache import cached_analyze

    return cached_analyze(path, floor_us=options.floor_us, step_pattern=options.step_pattern,
                          use_cache=options.use_cache)


def _error_dict(err: BaseException) -> dict:
    if isinstance(err, TaxbreakError):
        return {"code": err.code, "message": err.message, "hint": err.hint,
                "location": err.location, "type": type(err).__name__}
    return {"code": "scale.worker_failed", "message": f"{type(err).__name__}: {err}",
            "hint": "rerun this file alone with --debug", "location": None, "type": "TaxbreakError"}


def analyze_one(path: str, index: int, options: ManyOptions) -> FileResult:
    """Worker body: analyze one trace and keep only what the parent needs."""
    start = time.perf_counter()
    result = FileResult(path=path, index=index)
    try:
        analysis = (options.analyze_fn or default_analyze)(path, options)
        result.summary = analysis.summary
        result.rank = analysis.tables.meta.rank
        if options.stage_root is not None:
            result.stage_dir = str(stage_partitions(analysis, Path(options.stage_root) / str(index)))
    except Exception as err:  # noqa: BLE001 - reported per file; on_error decides
        result.error = _error_dict(err)
    result.seconds = time.perf_counter() - start
    return result


def analyze_many(
    paths: list[str | Path],
    workers: int | None = None,
    on_error: str = "fail",
    *,
    floor_us: float | None = None,
    step_pattern: str | None = None,
    use_cache: bool = True,
    export_dir: str | Path | None = None,
    run_id: str | None = None,
    analyze_fn: Callable | None = None,
) -> ManyResult:
    """Analyze many traces in parallel and combine them.

    Args:
        paths: the traces, in file order (ranks fall back to this order).
        workers: process count; None sizes it by CPUs and available memory.
        on_error: ``"fail"`` raises the first file's error (naming the file);
            ``"skip"`` reports it in ``ManyResult.failed`` and goes on.
        floor_us, step_pattern: passed to ``analyze``.
        use_cache: read/write the parse cache.
        export_dir: when set, also write the hive-partitioned kernels/steps
            dataset there under ``run=<run_id>``.
        run_id: the ``run=`` key; default: the name of the traces' folder.
        analyze_fn: replaces load + analyze (tests, custom pipelines).

    Returns:
        A :class:`ManyResult`.

    Raises:
        UsageError: bad ``on_error`` or no paths.
        TaxbreakError: with ``on_error="fail"``, the failing file's error.
    """
    if on_error not in ON_ERROR:
        raise UsageError("usage.invalid", f"--on-error must be one of {', '.join(ON_ERROR)}, not {on_error!r}")
    if not paths:
        raise UsageError("run.no_traces", "no trace to analyze")
    start = time.perf_counter()
    files = [str(p) for p in paths]
    run = slug(run_id or Path(files[0]).absolute().parent.name)  # not resolve(): keep a symlinked file's folder
    stage_root = str(Path(export_dir) / f".stage-{run}") if export_dir is not None else None
    options = ManyOptions(floor_us, step_pattern, use_cache, stage_root, analyze_fn)
    n_workers = plan_workers([Path(p) for p in files], workers)
    results = _run(files, options, n_workers, on_error)
    diagnostics = _settle_ranks(results, on_error)
    exported = _publish(results, export_dir, run) if export_dir is not None else []
    combined = combine_summaries([r.summary for r in results if r.is_ok])
    return ManyResult(results, combined, diagnostics, n_workers, time.perf_counter() - start, exported)


def _run(files: list[str], options: ManyOptions, n_workers: int, on_error: str) -> list[FileResult]:
    """Results in file order; with on_error="fail" the first failure cancels the rest and raises."""
    if n_workers == 1:  # no pool: no process start-up, and tracebacks stay simple
        results = []
        for i, path in enumerate(files):
            results.append(analyze_one(path, i, options))
            if not results[-1].is_ok and on_error == "fail" and options.stage_root:
                shutil.rmtree(options.stage_root, ignore_errors=True)
            _check(results[-1], on_error)
        return results
    results: dict[int, FileResult] = {}
    # spawn, not fork: a forked child of a process that already ran Arrow's thread pool can deadlock.
    pool = ProcessPoolExecutor(max_workers=n_workers, mp_context=get_context("spawn"),
                               initializer=_one_process_parse)
    pending: dict[Future, int] = {pool.submit(analyze_one, p, i, options): i for i, p in enumerate(files)}
    try:
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                i = pending.pop(fut)
                results[i] = _collect(fut, files[i], i)
                _check(results[i], on_error)
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        if options.stage_root:
            shutil.rmtree(options.stage_root, ignore_errors=True)
        raise
    pool.shutdown(wait=True)
    return [results[i] for i in range(len(files))]


def _one_process_parse() -> None:
    """Pool workers already use the cores: none forks a parse helper of its own (kineto_parallel)."""
    os.environ[ENV_WORKERS] = "0"


def _collect(fut: Future, path: str, index: int) -> FileResult:
    try:
        return fut.result()
    except BrokenProcessPool as err:  # a worker was killed (out of memory, signal)
        failed = FileResult(path=path, index=index)
        failed.error = {"code": "scale.worker_failed", "message": f"worker process died ({err})",
                        "hint": "lower --workers or free memory", "location": None, "type": "TaxbreakError"}
        return failed


def _check(result: FileResult, on_error: str) -> None:
    if result.is_ok or on_error == "skip":
        return
    raise rebuild_error(result)


def rebuild_error(result: FileResult) -> TaxbreakError:
    """The typed error of a failed file, rebuilt in the parent process with the file as path."""
    e = result.error
    cls = getattr(trace_errors, e.get("type") or "", None)
    if not (isinstance(cls, type) and issubclass(cls, TaxbreakError)):
        cls = TaxbreakError
    return cls(e["code"], e["message"], path=result.path, location=e.get("location"), hint=e.get("hint"))


def _settle_ranks(results: list[FileResult], on_error: str) -> Diagnostics:
    """Rank from TraceMeta.rank, else file order (info diagnostic); duplicates and skips counted."""
    diags = Diagnostics()
    for r in results:
        if not r.is_ok:
            diags.add("scale.file_skipped", 1, f"{r.path}: error[{r.error['code']}] {r.error['message']}")
            continue
        r.rank_source = "meta" if r.rank is not None else "file_order"
        if r.rank is None:
            r.rank = r.index
            diags.add("scale.rank_from_order", 1, f"{r.path} has no rank metadata; rank {r.index} from file order")
    ranks = pd.Series([r.rank for r in results if r.is_ok], dtype="int64")
    dup = ranks[ranks.duplicated()]
    diags.add("scale.duplicate_rank", len(dup), f"rank {dup.iloc[0]} appears more than once" if len(dup) else "")
    return diags


def _publish(results: list[FileResult], export_dir: str | Path, run: str) -> list[Path]:
    clear_run(export_dir, run)
    published: list[Path] = []
    for r in results:
        if r.is_ok and r.stage_dir:
            published += publish_partitions(r.stage_dir, export_dir, run, r.rank)
    shutil.rmtree(Path(export_dir) / f".stage-{run}", ignore_errors=True)
    return published
