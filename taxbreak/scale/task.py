"""One task per trace, the same on every engine: analyze it, settle its run and rank, and
(with a dataset) write its partition and manifest row.

Run and rank come from the trace's own metadata, so a task needs nothing from the others:

- rank: ``TraceMeta.rank`` (Kineto ``distributedInfo.rank``), else the rank an Nsight export's
  metadata gives it (:mod:`.nsys_identity`: the captured environment, or its place among the
  exports of one job), else 0 for the only trace of its run (``rank_source = "only_trace"``),
  else the trace's position in file order (``rank_source = "file_order"``);
- run: ``--run-id`` when given; else the run of a group of Nsight exports of one job; else the
  run folder (the trace's folder) when the trace is a rank of a distributed job (world size > 1)
  or the only trace there; else the trace is unrelated to its neighbours and is a run of its
  own, ``<folder>.<name>``.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from typing import Callable

from ..trace.errors import TaxbreakError
from ..trace.paths import slug
from .nsys_identity import RankHint

TRACE_NAME_SUFFIXES = (".pt.trace.json.gz", ".pt.trace.json", ".json.gz", ".json", ".sqlite", ".nsys-rep")


@dataclass(frozen=True)
class ManyOptions:
    """What every task needs; picklable (``analyze_fn`` must be a module-level function)."""

    floor_us: float | None = None
    step_pattern: str | None = None
    use_cache: bool = True
    dataset_url: str | None = None  # where tasks write their partitions (None: no dataset)
    run_id: str | None = None  # an explicit run key for every trace
    analyze_fn: Callable | None = None  # (path, options) -> Analysis; default: load + analyze

    def result_options(self) -> dict:
        """The options that change a trace's result or its place in the dataset."""
        return {"floor_us": self.floor_us, "step_pattern": self.step_pattern, "run_id": self.run_id}


@dataclass(frozen=True)
class TaskSpec:
    """One trace to analyze."""

    url: str
    index: int  # position in file order
    run_folder: str  # the run key of the trace's folder
    siblings: int  # traces in that folder
    input_id: str = ""
    fingerprint: str = ""
    hint: RankHint | None = None  # run and rank from a group of Nsight exports (None: no group)


@dataclass
class FileResult:
    """The outcome of one trace: its summary, or the error that stopped it."""

    path: str
    index: int  # position in file order
    rank: int | None = None
    rank_source: str = ""  # "meta" (TraceMeta.rank) | "nsys_env" | "session_order" | "only_trace" | "file_order"
    summary: dict | None = None
    error: dict | None = None  # {"code", "message", "hint", "location", "type"}
    seconds: float = 0.0
    run: str = ""
    world_size: int | None = None
    source_format: str = ""
    input_id: str = ""
    files: list[str] = field(default_factory=list)  # dataset files written, relative to the dataset root
    resumed: bool = False  # read back from the dataset's manifest, not analyzed again

    @property
    def is_ok(self) -> bool:
        return self.error is None


def default_analyze(path: str, options: ManyOptions):
    """Analyze ``path`` through the analysis and parse caches (the task's default job)."""
    from .analysis_cache import cached_analyze

    return cached_analyze(path, floor_us=options.floor_us, step_pattern=options.step_pattern,
                          use_cache=options.use_cache)


def error_dict(err: BaseException) -> dict:
    """A picklable, JSON-ready form of an error (typed errors keep their code)."""
    if isinstance(err, TaxbreakError):
        return {"code": err.code, "message": err.message, "hint": err.hint,
                "location": err.location, "type": type(err).__name__}
    return {"code": "scale.worker_failed", "message": f"{type(err).__name__}: {err}",
            "hint": "rerun this file alone with --debug", "location": None, "type": "TaxbreakError"}


def trace_stem(name: str) -> str:
    """The name of a trace without its trace suffixes (``rank-0.pt.trace.json.gz`` -> ``rank-0``)."""
    for suffix in TRACE_NAME_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def world_size_of(meta) -> int | None:
    """``distributedInfo.world_size`` of a Kineto trace, when it is a positive integer."""
    info = (getattr(meta, "extra", None) or {}).get("distributedInfo")
    size = info.get("world_size") if isinstance(info, dict) else None
    return size if type(size) is int and size > 0 else None


def settle_run(result: FileResult, meta, spec: TaskSpec, options: ManyOptions) -> None:
    """Rank, run, world size and format of ``result`` from its metadata (module docstring)."""
    hint = spec.hint or RankHint("")
    result.world_size = world_size_of(meta) or hint.world_size
    result.source_format = getattr(meta, "source_format", "") or ""
    result.run, alone = _run_of(result, spec, options, hint)
    result.rank = getattr(meta, "rank", None)
    result.rank_source = "meta"
    if result.rank is None:
        hinted = hint.rank is not None
        # the only trace of its run is its rank 0: its position among unrelated traces is no rank
        result.rank = hint.rank if hinted else 0 if alone else spec.index
        result.rank_source = hint.rank_source if hinted else ONLY_TRACE if alone else "file_order"


ONLY_TRACE = "only_trace"  # rank_source of a trace that is a run of its own


def _run_of(result: FileResult, spec: TaskSpec, options: ManyOptions, hint: RankHint) -> tuple[str, bool]:
    """The run key of ``result`` and whether the trace is a run of its own."""
    if options.run_id:
        return slug(options.run_id), False
    if hint.run_group:
        return slug(hint.run_group), False
    if (result.world_size or 0) > 1:
        return spec.run_folder, False
    if spec.siblings <= 1:
        return spec.run_folder, True
    return slug(f"{spec.run_folder}.{trace_stem(spec.url.rstrip('/').rsplit('/', 1)[-1])}"), True


def run_task(spec: TaskSpec, options: ManyOptions) -> FileResult:
    """Task body: analyze one trace, keep only what the caller needs, write its partition."""
    start = time.perf_counter()
    result = FileResult(path=spec.url, index=spec.index, input_id=spec.input_id)
    try:
        with local_copy(spec.url) as path:
            analysis = (options.analyze_fn or default_analyze)(path, options)
            result.summary = analysis.summary
            settle_run(result, analysis.tables.meta, spec, options)
            if options.dataset_url is not None:
                result.files = _commit(analysis, result, spec, options)
            elif options.use_cache and _one_of_ranks(result, spec, options):
                from ..readers.cache import wait_for_writes

                wait_for_writes()  # the cache entry is whole when the result returns: run_skews reads it back
    except Exception as err:  # noqa: BLE001 - reported per file; on_error decides
        result.error = error_dict(err)
    result.seconds = time.perf_counter() - start
    return result


def _one_of_ranks(result: FileResult, spec: TaskSpec, options: ManyOptions) -> bool:
    """Whether the trace may share its run with other ranks (the cross-rank skew reads it again)."""
    return (result.world_size or 0) > 1 or bool(options.run_id) or spec.hint is not None


def _commit(analysis, result: FileResult, spec: TaskSpec, options: ManyOptions) -> list[str]:
    import json

    from .. import __version__
    from .dataset import DATASET_FORMAT, Dataset, commit_task
    from .fsio import url_to_fs

    fs, root = url_to_fs(options.dataset_url)
    row = {"run": result.run, "rank": result.rank, "input": spec.url, "input_id": spec.input_id,
           "fingerprint": spec.fingerprint, "rank_source": result.rank_source,
           "source_format": result.source_format, "world_size": result.world_size,
           "taxbreak_version": __version__, "dataset_format": DATASET_FORMAT,
           "summary": json.dumps(result.summary, default=json_scalar)}
    return commit_task(Dataset(options.dataset_url, fs, root.rstrip("/")), analysis, row)


def json_scalar(value):
    """NumPy scalars as Python numbers; anything else unserializable (pd.NA) as null."""
    return value.item() if hasattr(value, "item") else None


class local_copy:
    """A local path for ``url``: the path itself on the local file system, else a temporary copy
    (readers open local files; the copy is removed afterwards)."""

    def __init__(self, url: str) -> None:
        self.url, self.tmp = url, None

    def __enter__(self) -> str:
        if "://" not in self.url or self.url.startswith("file://"):
            return self.url[len("file://"):] if self.url.startswith("file://") else self.url
        from .fsio import url_to_fs

        fs, path = url_to_fs(self.url)
        self.tmp = tempfile.mkdtemp(prefix="taxbreak-input-")
        target = os.path.join(self.tmp, path.rstrip("/").rsplit("/", 1)[-1])
        fs.get(path, target, recursive=fs.isdir(path))
        return target

    def __exit__(self, *exc) -> None:
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)
