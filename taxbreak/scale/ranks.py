"""Cross-rank skew of one run of a fleet dataset, and of each run of a folder (docs/serving.md §1,
docs/scale.md).

The dataset holds per run and rank the kernels, steps and idle tables the skew reads, so the
ranks of a run are aligned without analysing their traces again. Folder mode without a dataset
reads each rank's frames back from the analysis cache its task just wrote (:func:`run_skews`).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..decompose.ranks import RankSkew, rank_skew
from ..trace.errors import TaxbreakError, UsageError
from .dataset import VERSION_FILE
from .partition import read_partitioned
from .task import FileResult, ManyOptions

TABLES = ("kernels", "steps", "idle")


@dataclass
class RankFrames:
    """The tables of one rank as read from the dataset (what ``rank_skew`` reads of an Analysis)."""

    kernels: pd.DataFrame
    steps: pd.DataFrame
    idle: pd.DataFrame


def is_dataset(path: str | Path) -> bool:
    """True when ``path`` is the root of a fleet dataset (it holds the version stamp)."""
    return (Path(path) / VERSION_FILE).is_file()


def rank_skew_of_dataset(url: str | Path, run: str | None = None) -> RankSkew:
    """Align the ranks of ``run`` (the dataset's only run when None) on their collectives.

    Raises:
        UsageError: ``usage.invalid`` when ``run`` is None and the dataset holds several runs, or
            when it names a run the dataset does not hold.
    """
    frames = {name: read_partitioned(url, name, run).to_pandas() for name in TABLES}  # run None: every run
    runs = sorted(frames["kernels"]["run"].astype(str).unique())
    if run is not None and not runs:  # no such run: name the runs it holds
        runs = sorted(read_partitioned(url, "kernels", columns=["run"]).column("run").to_pandas().astype(str).unique())
    run = _chosen_run(runs, run, str(url))
    ranks = sorted(int(r) for r in frames["kernels"].loc[frames["kernels"]["run"] == run, "rank"].unique())
    per_rank = [RankFrames(*(_of(frames[name], run, r) for name in TABLES)) for r in ranks]
    return rank_skew(per_rank, [f"rank{r}" for r in ranks])


def _of(frame: pd.DataFrame, run: str, rank: int) -> pd.DataFrame:
    return frame[(frame["run"] == run) & (frame["rank"] == rank)].reset_index(drop=True)


def _chosen_run(runs: list[str], run: str | None, url: str) -> str:
    if run is None and len(runs) == 1:
        return runs[0]
    if run is not None and run in runs:
        return run
    what = "holds several runs" if run is None else f"holds no run {run!r}"
    raise UsageError("usage.invalid", f"the dataset {what}", path=url,
                     hint=f"name one with --run: {', '.join(runs[:10])}{' …' if len(runs) > 10 else ''}")


def run_skews(files: list[FileResult], options: ManyOptions, engine: str = "local") -> dict[str, dict]:
    """The ``ranks`` object (docs/serving.md §1) of each run of a folder's results, by run: its
    ranks aligned, or ``reason`` saying why not. ``per_collective`` is left out (one entry per
    collective; ``taxbreak ranks`` gives it). No trace is analysed again: the frames come from
    the dataset (``options.dataset_url``), else from the analysis cache each task wrote."""
    from .runs import mixed_runs

    ok = [f for f in files if f.is_ok]
    mixed = mixed_runs(ok)
    out = {}
    for run in sorted({f.run for f in ok}):
        ranks = sorted((f for f in ok if f.run == run), key=lambda f: f.rank)
        why = _why_not(ranks, mixed.get(run), options, engine)
        try:
            summary = not_aligned(why, ranks) if why else _aligned(run, ranks, options).summary
        except (TaxbreakError, OSError) as err:  # a trace gone or changed since its task: n/a, not a crash
            summary = not_aligned(f"its frames could not be read back: {getattr(err, 'message', err)}", ranks)
        except KeyError as err:  # frames of a custom analyze_fn or an older dataset without a column
            summary = not_aligned(f"its frames lack the column {err} the skew reads", ranks)
        out[run] = {k: v for k, v in summary.items() if k != "per_collective"}
    return out


def not_aligned(reason: str, ranks: list[FileResult]) -> dict:
    """The ``ranks`` object of a run whose skew is n/a: the reason and the ranks it holds."""
    return {"reason": reason, "ranks": [f"rank{f.rank}" for f in ranks], "collectives": 0}


def _why_not(ranks: list[FileResult], mixed: str | None, options: ManyOptions, engine: str) -> str | None:
    """Why the ranks of a run cannot be aligned without analysing them again (None: they can)."""
    if len(ranks) < 2:
        return "one trace: skew needs the traces of two ranks or more (taxbreak ranks TRACE aligns the GPUs of " \
               "a several-process export)"
    if mixed:
        return f"its traces disagree: {mixed}"
    if options.dataset_url is not None:
        return None
    if options.analyze_fn is not None:
        return "a custom analyze_fn: the ranks' frames are kept nowhere"
    if not options.use_cache or engine != "local" or any("://" in f.path and not f.path.startswith("file://")
                                                          for f in ranks):
        return ("the ranks' frames are in neither a dataset nor the analysis cache here (--no-cache, "
                "a remote trace or --engine dask): add -o OUT --partitioned")
    return None


def _aligned(run: str, ranks: list[FileResult], options: ManyOptions) -> RankSkew:
    if options.dataset_url is not None:
        return rank_skew_of_dataset(options.dataset_url, run)
    from .analysis_cache import cached_analyze

    # the key of each task's own entry: the same path and options (a hit reads the Arrow frames back)
    analyses = [cached_analyze(f.path[len("file://"):] if f.path.startswith("file://") else f.path,
                               floor_us=options.floor_us, step_pattern=options.step_pattern, use_cache=True)
                for f in ranks]
    return rank_skew(analyses, [f"rank{f.rank}" for f in ranks])
