"""Analyze many traces (ranks of runs, or unrelated runs) on an engine, and combine them.

Map per trace -> reduce: each task (:mod:`.task`) analyzes one trace, settles its run and
rank from its metadata and, with a dataset, writes its own partition (:mod:`.dataset`); only
its summary comes back, so no event-scale data crosses processes or machines. Engines:
``local`` (a process pool here, :mod:`.local_engine`) and ``dask`` (:mod:`.dask_engine`).
Both run the same task, so they give the same dataset and the same combination.
"""
from __future__ import annotations

import json
import posixpath
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pandas as pd

from ..trace import errors as trace_errors
from ..trace.diagnostics import Diagnostics
from ..trace.words import plural
from ..trace.errors import TaxbreakError, UsageError
from ..trace.paths import slug
from ..trace.progress import ProgressEvent, ProgressHook
from .combine import combine_summaries
from .task import FileResult, ManyOptions, TaskSpec
from .workers import plan_workers

ON_ERROR = ("fail", "skip")
ENGINES = ("local", "dask")
# Columns of ManyResult.per_rank(), in this order, when the summaries have them.
PER_RANK_KEYS = ("kernels", "launches", "device_active_us", "orchestration_us", "hdbi",
                 "framework_us", "library_us", "launch_floor_us", "span_us", "steps")
__all__ = ["FileResult", "ManyOptions", "ManyResult", "analyze_many", "rebuild_error"]


@dataclass
class ManyResult:
    """Per-file results (file order), their combination over all traces and per run."""

    files: list[FileResult]
    combined: dict | None  # every trace added up: one run, or combine_runs=True (else None, see not_combined)
    diagnostics: Diagnostics = field(default_factory=Diagnostics)
    workers: int = 1
    seconds: float = 0.0
    exported: list[str] = field(default_factory=list)
    runs: dict[str, dict | None] = field(default_factory=dict)
    engine: str = "local"
    # why ``combined`` (or a run of ``runs``) is None: {"all" or run: reason}; empty when all is combined
    not_combined: dict[str, str] = field(default_factory=dict)
    # per run: its cross-rank skew (the ``ranks`` object of docs/serving.md §1), or ``reason`` why n/a
    skew: dict[str, dict] = field(default_factory=dict)

    @property
    def failed(self) -> list[FileResult]:
        return [f for f in self.files if not f.is_ok]

    def to_dict(self) -> dict:
        """JSON-ready form: per-file summaries (``all`` and phases), errors, combinations, diagnostics."""
        files = [{"path": f.path, "run": f.run, "rank": f.rank, "rank_source": f.rank_source,
                  "world_size": f.world_size, "error": f.error,
                  "all": f.summary.get("all") if f.summary else None,
                  "phases": f.summary.get("phases") if f.summary else None} for f in self.files]
        return {"files": files, "combined": self.combined, "runs": self.runs, "not_combined": self.not_combined,
                "skew": self.skew,
                "engine": self.engine,
                "workers": self.workers, "diagnostics": self.diagnostics.as_dict(),
                "exported": list(self.exported)}

    def per_rank(self) -> pd.DataFrame:
        """One row per analyzed trace, sorted by run and rank: path, rank, rank source and key metrics."""
        rows = []
        for f in self.files:
            if not f.is_ok:
                continue
            metrics = f.summary.get("all", {})
            row = {"run": f.run, "rank": f.rank, "rank_source": f.rank_source, "path": f.path}
            row.update({k: metrics.get(k) for k in PER_RANK_KEYS if k in metrics})
            rows.append(row)
        if not rows:
            return pd.DataFrame(columns=["run", "rank", "rank_source", "path"])
        return pd.DataFrame(rows).sort_values(["run", "rank", "path"], kind="stable").reset_index(drop=True)


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
    engine: str = "local",
    scheduler: str | None = None,
    scheduler_file: str | None = None,
    combine_runs: bool = False,
    progress: ProgressHook = None,
) -> ManyResult:
    """Analyze many traces in parallel and combine them.

    Args:
        paths: the traces (paths or fsspec URLs), in file order (ranks fall back to this order).
        workers: process count; None sizes it by CPUs and available memory.
        on_error: ``"fail"`` raises the first file's error (naming the file);
            ``"skip"`` reports it in ``ManyResult.failed`` and goes on.
        floor_us, step_pattern: passed to ``analyze``.
        use_cache: read/write the parse and analysis caches.
        export_dir: when set (path or URL), the hive-partitioned dataset is written there
            (docs/scale.md); inputs already in it are not analyzed again.
        run_id: the ``run=`` key of every trace; default: from folders and metadata (:mod:`.task`).
        analyze_fn: replaces load + analyze (tests, custom pipelines).
        engine: ``"local"`` or ``"dask"``; scheduler / scheduler_file: the Dask cluster.
        combine_runs: add up traces of different runs (and of runs whose traces disagree on world
            size, rank, GPU or model) into ``combined``; by default each run is reported apart
            and ``combined`` is None when there is more than one run (``not_combined`` says why).
        progress: called with a :class:`ProgressEvent` (stage ``"traces"``, unit ``"traces"``) before
            the first trace and as each trace finishes: ``done`` of ``total`` traces (traces already
            in the dataset count as done). Sent from this process, never from the workers.

    Raises:
        UsageError: bad ``on_error`` or ``engine``, or no paths.
        TaxbreakError: with ``on_error="fail"``, the failing file's error.
    """
    _check_args(on_error, engine, paths)
    start = time.perf_counter()
    urls = [str(p) for p in paths]
    options = ManyOptions(floor_us, step_pattern, use_cache, None if export_dir is None else str(export_dir),
                          run_id, analyze_fn)
    specs = _plan(urls, options)
    diagnostics = Diagnostics()
    dataset, resumed = _open_output(options, specs, diagnostics)
    todo = [s for s in specs if s.input_id not in resumed]
    n_workers = plan_workers([Path(u) for u in urls if "://" not in u], workers) if todo else 1
    counter = _TraceCounter(progress, len(specs) - len(todo), len(specs))
    fresh = _run_engine(engine, todo, options, n_workers, on_error, scheduler, scheduler_file, dataset, counter)
    results = sorted(fresh + list(resumed.values()), key=lambda r: r.index)
    _settle(results, diagnostics)
    ok = [r for r in results if r.is_ok]
    runs, combined, not_combined = _combine(ok, combine_runs, diagnostics)
    exported = [f for r in ok for f in r.files]
    from .ranks import run_skews

    skew = run_skews(results, options, engine)
    return ManyResult(results, combined, diagnostics, n_workers,
                      time.perf_counter() - start, exported, runs, engine, not_combined, skew)


def _combine(ok: list[FileResult], combine_runs: bool, diagnostics: Diagnostics):
    """Each run's combination and all traces' (only for one consistent run, or when asked)."""
    from .runs import mixed_runs, runs_apart_message

    names = sorted({r.run for r in ok})
    mixed = mixed_runs(ok)
    not_combined = {} if combine_runs else {run: f"its traces disagree: {why}" for run, why in mixed.items()}
    runs = {run: None if run in not_combined else
            combine_summaries([r.summary for r in ok if r.run == run], [str(r.rank) for r in ok if r.run == run])
            for run in names}
    if combine_runs or (len(names) <= 1 and not not_combined):
        return runs, combine_summaries([r.summary for r in ok], [f"{r.run}/{r.rank}" for r in ok]), not_combined
    message = runs_apart_message(ok, names, mixed)
    diagnostics.add("scale.runs_apart", len(names), message)
    return runs, None, {**not_combined, "all": message}


def _check_args(on_error: str, engine: str, paths) -> None:
    if on_error not in ON_ERROR:
        raise UsageError("usage.invalid", f"--on-error must be one of {', '.join(ON_ERROR)}, not {on_error!r}")
    if engine not in ENGINES:
        raise UsageError("usage.invalid", f"--engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    if not paths:
        raise UsageError("run.no_traces", "no trace to analyze")


def _parent(url: str) -> str:
    """The folder of a trace, as an absolute path (not resolved: a symlinked file keeps its folder)."""
    if "://" in url:
        return url.rstrip("/").rsplit("/", 1)[0]
    return Path(url).absolute().parent.as_posix()


def run_folders(urls: list[str]) -> list[str]:
    """The run key of each trace's folder: its name when all traces share one folder, else its
    path below the folders' common root with ``/`` as ``.`` (``nightly/run-a/r0.json`` -> ``run-a``)."""
    parents = [_parent(u) for u in urls]
    strip = [p.split("://", 1)[-1] for p in parents]
    common = posixpath.commonpath(strip) if len(set(strip)) > 1 else None
    keys = []
    for p in strip:
        rel = posixpath.relpath(p, common) if common else "."
        keys.append(slug(posixpath.basename(p) if rel == "." else rel.replace("/", ".")))
    return keys


def _plan(urls: list[str], options: ManyOptions) -> list[TaskSpec]:
    from .nsys_identity import group_ranks

    folders = run_folders(urls)
    parents = [_parent(u) for u in urls]
    siblings = pd.Series(parents).value_counts().to_dict()
    hints = group_ranks(urls, folders) if not options.run_id else {}
    specs = []
    for i, url in enumerate(urls):
        fp, ident = _identity(url, options, hints.get(i)) if options.dataset_url is not None else ("", "")
        specs.append(TaskSpec(url, i, folders[i], siblings[parents[i]], ident, fp, hints.get(i)))
    return specs


def _identity(url: str, options: ManyOptions, hint=None) -> tuple[str, str]:
    """Fingerprint and input id of one input (a run directory: of its trace files)."""
    from .dataset import input_id
    from .fsio import fingerprint, url_to_fs

    fs, path = url_to_fs(url)
    try:
        if fs.isdir(path):
            fp = "+".join(fingerprint(fs, f) for f in sorted(fs.find(path)) if f.rsplit("/", 1)[-1].startswith(
                ("trace.", "manifest.json")))
        else:
            fp = fingerprint(fs, path)
    except (OSError, TaxbreakError):
        fp = "unreadable"  # the task reports the file's own error
    # a regrouped export (a rank added to its job's folder) gets a new id: its run or rank changed
    group = {"group": [hint.run_group, hint.rank, hint.rank_source]} if hint else {}
    return fp, input_id(url, fp, options.result_options() | group)


def _open_output(options: ManyOptions, specs: list[TaskSpec], diagnostics: Diagnostics):
    """The dataset (or None) and the results of inputs it already holds, by input id."""
    if options.dataset_url is None:
        return None, {}
    from .dataset import committed, open_dataset, remove_input, sweep_uncommitted

    dataset = open_dataset(options.dataset_url)
    rows = committed(dataset)
    wanted = {s.url: s for s in specs}
    for ident, row in list(rows.items()):  # the same input, changed since: its old result goes
        if row["input"] in wanted and wanted[row["input"]].input_id != ident:
            remove_input(dataset, row)
            del rows[ident]
    removed = sweep_uncommitted(dataset, set(rows))
    diagnostics.add("scale.uncommitted_removed", removed, f"{removed} files without a manifest row" if removed else "")
    resumed = {s.input_id: _from_row(rows[s.input_id], s) for s in specs if s.input_id in rows}
    diagnostics.add("scale.resumed", len(resumed), f"{plural(len(resumed), 'trace')} already in {options.dataset_url}"
                    if resumed else "")
    return dataset, resumed


def _from_row(row: dict, spec: TaskSpec) -> FileResult:
    return FileResult(path=spec.url, index=spec.index, rank=row["rank"], rank_source=row["rank_source"],
                      summary=json.loads(row["summary"]), run=row["run"], world_size=row["world_size"],
                      source_format=row["source_format"], input_id=row["input_id"],
                      files=json.loads(row["files"]), resumed=True)


class _TraceCounter:
    """Traces done of all, for the caller's hook; fed by the engines' ``on_result`` in this process
    (the workers are other processes or machines: a hook there would reach nobody)."""

    def __init__(self, hook: ProgressHook, done: int, total: int) -> None:
        self.hook, self.done, self.total = hook, done, total
        self._send()

    def add(self) -> None:
        self.done += 1
        self._send()

    def _send(self) -> None:
        if self.hook is not None:
            self.hook(ProgressEvent("traces", self.done, self.total, unit="traces"))


def _run_engine(engine, specs, options, n_workers, on_error, scheduler, scheduler_file, dataset,
                counter: _TraceCounter) -> list[FileResult]:
    if not specs:
        return []

    def check(result: FileResult) -> None:
        counter.add()
        if not result.is_ok and on_error == "fail":
            raise rebuild_error(result)

    try:
        if engine == "dask":
            from .dask_engine import dask_client, run_dask

            with dask_client(scheduler, scheduler_file, n_workers) as client:
                return run_dask(client, specs, options, check)
        from .local_engine import run_local

        return run_local(specs, options, n_workers, check)
    finally:
        if dataset is not None:  # what a failed or stopped task left behind, never visible after a run
            from .dataset import committed, sweep_uncommitted

            sweep_uncommitted(dataset, set(committed(dataset)))


def rebuild_error(result: FileResult) -> TaxbreakError:
    """The typed error of a failed file, rebuilt in the parent process with the file as path."""
    e = result.error
    cls = getattr(trace_errors, e.get("type") or "", None)
    if not (isinstance(cls, type) and issubclass(cls, TaxbreakError)):
        cls = TaxbreakError
    return cls(e["code"], e["message"], path=result.path, location=e.get("location"), hint=e.get("hint"))


def _settle(results: list[FileResult], diags: Diagnostics) -> None:
    """Skips, ranks from file order, duplicate ranks and world-size disagreements within a run."""
    for r in results:
        if not r.is_ok:
            diags.add("scale.file_skipped", 1, f"{r.path}: error[{r.error['code']}] {r.error['message']}")
        elif r.rank_source in ("file_order", "session_order"):
            diags.add("scale.rank_from_order", 1, f"{r.path} has no rank metadata; rank {r.rank} from "
                      f"{r.rank_source.replace('_', ' ')}")
    ok = pd.DataFrame([(r.run, r.rank, r.world_size) for r in results if r.is_ok],
                      columns=["run", "rank", "world_size"])
    dup = ok[ok.duplicated(["run", "rank"])]
    diags.add("scale.duplicate_rank", len(dup),
              f"rank {dup.iloc[0]['rank']} of run {dup.iloc[0]['run']} appears more than once" if len(dup) else "")
    sizes = ok.dropna(subset=["world_size"]).groupby("run")["world_size"].nunique()
    mixed = sizes[sizes > 1]
    diags.add("scale.world_size_mismatch", len(mixed),
              f"run {mixed.index[0]} holds traces of {mixed.iloc[0]} world sizes" if len(mixed) else "")
