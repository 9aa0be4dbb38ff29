"""Whether the traces of one run agree that they are one run, and what to say about several runs.

:mod:`.task` groups traces into runs from their own metadata (``distributedInfo``, the identity of
Nsight exports, run folders). A run's combination adds its ranks up (``HDBI = ΣT_DeviceActive /
(ΣT_DeviceActive + ΣT_Orchestrate)``), which is only a measurement of one job. The traces of a run
can still contradict that: they report different world sizes, one rank twice, different GPUs, or
run manifests of different models (five models profiled into one folder of ``distributedInfo``
traces). Such a run, like several runs, is not added up unless the caller asks for it.
"""
from __future__ import annotations

import pandas as pd

from .task import FileResult

# What the traces of one run must agree on, read from each trace's summary: label -> (where, key).
IDENTITY = {"GPUs": ("meta", "gpu"), "models": ("manifest", "model")}


def _identity(summary: dict | None, where: str, key: str) -> str | None:
    meta = (summary or {}).get("meta") or {}
    source = meta.get("manifest") if where == "manifest" else meta
    value = source.get(key) if isinstance(source, dict) else None
    return None if value in (None, "") else str(value)


def _frame(ok: list[FileResult]) -> pd.DataFrame:
    rows = [{"run": r.run, "rank": r.rank, "world_size": r.world_size,
             **{label: _identity(r.summary, *where) for label, where in IDENTITY.items()}} for r in ok]
    frame = pd.DataFrame(rows, columns=["run", "rank", "world_size", *IDENTITY])
    return frame.astype({"world_size": "Int64"})  # a missing world size is NA, not a float NaN


def mixed_runs(ok: list[FileResult]) -> dict[str, str]:
    """``{run: what its traces disagree on}`` for the runs whose traces cannot all be one job."""
    frame = _frame(ok)
    reasons: dict[str, list[str]] = {}
    for label, column in (("world sizes", "world_size"), *((label, label) for label in IDENTITY)):
        values = frame.dropna(subset=[column]).groupby("run")[column].unique()
        for run, distinct in values[values.map(len) > 1].items():
            reasons.setdefault(run, []).append(f"{label} {' and '.join(map(str, sorted(distinct, key=str)))}")
    twice = frame[frame.duplicated(["run", "rank"])].drop_duplicates(["run", "rank"])
    for run, rank in zip(twice["run"], twice["rank"]):
        reasons.setdefault(run, []).append(f"rank {rank} more than once")
    return {run: "; ".join(why) for run, why in sorted(reasons.items())}


def runs_apart_message(ok: list[FileResult], runs: list[str], mixed: dict[str, str]) -> str:
    """Why the traces were not added up, and how to add them up (or compare two of them)."""
    parts = [f"{len(runs)} runs reported apart, not added up" if len(runs) > 1 else
             f"run {runs[0]} not added up: its traces disagree ({mixed[runs[0]]})"]
    parts.append("--combine-runs adds every trace into one summary")
    paths = [r.path for r in ok]
    if len(runs) == 2 and len(paths) == 2:
        parts.append(f"to compare an A/B pair: taxbreak diff {paths[0]} {paths[1]}")
    return "; ".join(parts)
