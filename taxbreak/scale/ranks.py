"""Cross-rank skew of one run of a fleet dataset (docs/serving.md §1, docs/scale.md).

The dataset holds per run and rank the kernels, steps and idle tables the skew reads, so the
ranks of a run are aligned without analysing their traces again.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..decompose.ranks import RankSkew, rank_skew
from ..trace.errors import UsageError
from .dataset import VERSION_FILE
from .partition import read_partitioned

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
    frames = {name: read_partitioned(url, name).to_pandas() for name in TABLES}
    runs = sorted(frames["kernels"]["run"].astype(str).unique())
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
