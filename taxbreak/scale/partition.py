"""Hive-partitioned Parquet of the per-kernel, per-step and per-phase tables, for fleets.

Layout (one dataset per table, ``run``/``rank``/``phase`` as hive keys; one file per input trace)::

    OUT/kernels/run=<id>/rank=<r>/phase=<p>/part-<input id>.parquet
    OUT/steps/run=<id>/rank=<r>/phase=<p>/part-<input id>.parquet
    OUT/phases/run=<id>/rank=<r>/phase=<p>/part-<input id>.parquet
    OUT/idle/run=<id>/rank=<r>/phase=<p>/part-<input id>.parquet

``idle`` holds ``Analysis.idle`` (one row per device idle gap and its cause); its phase is that
of the gap's step (``unknown`` outside every step).

DuckDB reads it with ``read_parquet('OUT/kernels/**/*.parquet', hive_partitioning=true)``,
pyarrow with ``pyarrow.dataset.dataset('OUT/kernels', partitioning='hive')``, Spark and Dask
with their Parquet readers (docs/scale.md). Every file is named after the trace it comes from,
so two traces of one run reporting the same rank never overwrite each other, and the task that
analyzes a trace writes its own files: no coordination between tasks. :mod:`.dataset` adds the
manifest of inputs, resumable reruns and the version check on top.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from .fsio import parquet_bytes, url_to_fs, write_bytes_atomic

PARTITIONED_TABLES = ("kernels", "steps", "phases", "idle")
UNKNOWN_PHASE = "unknown"
PART_NAME = "part-{part_id}.parquet"
# Columns that pandas leaves all-None (an unmeasured metric) get Arrow's null
# type, which would make the files of one dataset disagree. Summary metrics are
# numbers; only these names hold text.
_TEXT_COLUMNS = frozenset({"name", "kind", "phase", "floor_source", "kernel_class", "hdbi_reason"})
_TEXT_SUFFIXES = ("_name", "_source", "_kind", "_reason")
PARTITION_SCHEMA = pa.schema([("run", pa.string()), ("rank", pa.int64()), ("phase", pa.string())])


def _to_arrow(frame: pd.DataFrame) -> pa.Table:
    """The frame as Arrow with a ``phase`` column and no null-typed or dictionary columns."""
    frame = frame.reset_index(drop=True)
    if "phase" not in frame.columns:
        frame = frame.assign(phase=UNKNOWN_PHASE)
    frame = frame.assign(phase=frame["phase"].astype("string").fillna(UNKNOWN_PHASE).astype(str))
    table = pa.Table.from_pandas(frame, preserve_index=False)
    for i, field in enumerate(table.schema):
        if pa.types.is_null(field.type):
            is_text = field.name in _TEXT_COLUMNS or field.name.endswith(_TEXT_SUFFIXES)
            table = table.set_column(i, field.name, table.column(i).cast(pa.string() if is_text else pa.float64()))
        elif pa.types.is_dictionary(field.type):  # categoricals: plain strings read the same everywhere
            table = table.set_column(i, field.name, table.column(i).cast(field.type.value_type))
    return table


def split_by_phase(frame: pd.DataFrame) -> dict[str, pa.Table]:
    """``{phase: rows of that phase without the phase column}``; an empty frame keeps its schema
    in one empty table under ``phase=unknown`` (readers then still see the columns)."""
    table = _to_arrow(frame)
    phases = table.column("phase")
    body = table.drop_columns(["phase"])
    if table.num_rows == 0:
        return {UNKNOWN_PHASE: body}
    return {p: body.filter(pc.equal(phases, p)) for p in sorted(pc.unique(phases).to_pylist())}


def _frame(analysis, name: str) -> pd.DataFrame:
    frame = getattr(analysis, name, None)
    frame = frame if isinstance(frame, pd.DataFrame) else pd.DataFrame()
    if name == "phases" and "phase" in frame.columns:
        # the whole trace's row is the sum of the phases: in the dataset it would count every
        # trace twice in a GROUP BY run (its summary is in the manifest)
        frame = frame[frame["phase"] != "all"]
    if name == "idle" and "phase" not in frame.columns and "step" in frame.columns:
        frame = frame.assign(phase=_phase_of_steps(analysis, frame["step"]))
    return frame


def _phase_of_steps(analysis, step: pd.Series) -> pd.Series:
    """The phase of each step number, from ``analysis.steps`` (None where the step is not there)."""
    steps = getattr(analysis, "steps", None)
    if not isinstance(steps, pd.DataFrame) or not {"step", "phase"} <= set(steps.columns):
        return pd.Series([None] * len(step), index=step.index, dtype="object")
    phases = pd.Series(steps["phase"].astype("object").to_numpy(), index=steps["step"].to_numpy())
    phases = phases[~phases.index.duplicated()]
    return pd.Series(phases.reindex(step.to_numpy()).to_numpy(), index=step.index, dtype="object")


def partition_files(analysis, run_id: str, rank: int, part_id: str) -> dict[str, pa.Table]:
    """The dataset files of one analysis: ``{relative path: table}``."""
    files = {}
    for name in PARTITIONED_TABLES:
        frame = _frame(analysis, name)
        for phase, table in split_by_phase(frame).items():
            files[f"{name}/run={run_id}/rank={rank}/phase={phase}/{PART_NAME.format(part_id=part_id)}"] = table
    return files


def write_files(fs, root: str, files: dict[str, pa.Table]) -> list[str]:
    """Write each file atomically under ``root``; returns their relative paths."""
    for rel, table in files.items():
        write_bytes_atomic(fs, f"{root}/{rel}", parquet_bytes(table))
    return list(files)


def write_partitions(analysis, out_dir: str, run_id: str, rank: int = 0, part_id: str = "0") -> list[str]:
    """Export one ``Analysis`` into the partitioned dataset at ``out_dir`` (a path or fsspec URL).

    Args:
        analysis: an ``Analysis`` (its ``kernels``, ``steps``, ``phases`` and ``idle`` DataFrames).
        out_dir: the dataset root.
        run_id: the ``run=`` key (letters, digits, ``._-``).
        rank: the ``rank=`` key.
        part_id: names the files (``part-<part_id>.parquet``); the same id overwrites them.

    Returns:
        The files written, relative to ``out_dir``.
    """
    fs, root = url_to_fs(str(out_dir))
    return write_files(fs, root.rstrip("/"), partition_files(analysis, run_id, rank, part_id))


def read_partitioned(out_dir: str | Path, table: str = "kernels", run: str | None = None,
                     columns: list[str] | None = None) -> pa.Table:
    """The ``table`` dataset under ``out_dir`` with ``run``, ``rank`` and ``phase`` columns: whole,
    or the partitions of one ``run`` only (the others are not read), or some ``columns``."""
    fs, root = url_to_fs(str(out_dir))
    dataset = ds.dataset(f"{root.rstrip('/')}/{table}", filesystem=fs, format="parquet",
                         partitioning=ds.partitioning(PARTITION_SCHEMA, flavor="hive"))
    return dataset.to_table(columns=columns, filter=None if run is None else ds.field("run") == run)
