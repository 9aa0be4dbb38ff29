"""Hive-partitioned Parquet of the per-kernel and per-step tables, for fleets.

Layout (one dataset per table, ``run``/``rank``/``phase`` as hive keys)::

    OUT/kernels/run=<id>/rank=<r>/phase=<p>/part-0.parquet
    OUT/steps/run=<id>/rank=<r>/phase=<p>/part-0.parquet

DuckDB reads it with ``read_parquet('OUT/kernels/**/*.parquet', hive_partitioning=true)``,
pyarrow with ``pyarrow.dataset.dataset('OUT/kernels', partitioning='hive')``, Spark and Dask
with their Parquet readers (docs/scale.md). Writing happens in two moves so that
parallel workers never race on a rank folder: each worker *stages* its tables
partitioned by phase in a private folder, and the parent *publishes* them under
the rank it settled on (renames). Re-exporting a run id replaces that run.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

PARTITIONED_TABLES = ("kernels", "steps")
UNKNOWN_PHASE = "unknown"
_PART_NAME = "part-{i}.parquet"
# Columns that pandas leaves all-None (an unmeasured metric) get Arrow's null
# type, which would make the files of one dataset disagree. Summary metrics are
# numbers; only these names hold text.
_TEXT_COLUMNS = frozenset({"name", "kind", "phase", "floor_source", "kernel_class"})
_TEXT_SUFFIXES = ("_name", "_source", "_kind")
_PHASE_SCHEMA = pa.schema([("phase", pa.string())])


def _to_arrow(frame: pd.DataFrame) -> pa.Table:
    """The frame as Arrow with a ``phase`` column and no null-typed columns."""
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


def stage_partitions(analysis, stage_dir: str | Path) -> Path:
    """Write ``analysis.kernels`` and ``analysis.steps`` partitioned by phase under ``stage_dir``.

    Returns:
        ``stage_dir``, holding ``<table>/phase=<p>/part-0.parquet``.
    """
    stage = Path(stage_dir)
    for name in PARTITIONED_TABLES:
        table = _to_arrow(getattr(analysis, name))
        ds.write_dataset(
            table, stage / name, format="parquet", basename_template=_PART_NAME,
            partitioning=ds.partitioning(_PHASE_SCHEMA, flavor="hive"),
            existing_data_behavior="delete_matching",
        )
        if table.num_rows == 0:  # write_dataset writes no file: keep the schema in an empty one
            empty_dir = stage / name / f"phase={UNKNOWN_PHASE}"
            empty_dir.mkdir(parents=True, exist_ok=True)
            pq.write_table(table.drop_columns(["phase"]), empty_dir / _PART_NAME.format(i=0))
    return stage


def publish_partitions(stage_dir: str | Path, out_dir: str | Path, run_id: str, rank: int) -> list[Path]:
    """Move staged files to ``OUT/<table>/run=<run_id>/rank=<rank>/phase=<p>/``.

    When two traces of one run report the same rank, the second one's files
    are numbered on (``part-1.parquet``) rather than overwriting the first.

    Returns:
        The published files.
    """
    published = []
    for name in PARTITIONED_TABLES:
        for part in sorted((Path(stage_dir) / name).glob("phase=*/*.parquet")):
            dest_dir = Path(out_dir) / name / f"run={run_id}" / f"rank={rank}" / part.parent.name
            dest_dir.mkdir(parents=True, exist_ok=True)
            n = len(list(dest_dir.glob("part-*.parquet")))
            dest = dest_dir / _PART_NAME.format(i=n)
            shutil.move(str(part), dest)
            published.append(dest)
    shutil.rmtree(stage_dir, ignore_errors=True)
    return published


def clear_run(out_dir: str | Path, run_id: str) -> None:
    """Remove a run's partitions from every table of ``out_dir`` (before re-exporting it)."""
    for name in PARTITIONED_TABLES:
        shutil.rmtree(Path(out_dir) / name / f"run={run_id}", ignore_errors=True)


def write_partitions(analysis, out_dir: str | Path, run_id: str, rank: int = 0) -> list[Path]:
    """Export one ``Analysis`` into the partitioned dataset at ``out_dir`` (replacing that run/rank).

    Args:
        analysis: an ``Analysis`` (``kernels`` and ``steps`` DataFrames are used).
        out_dir: the dataset root.
        run_id: the ``run=`` key (letters, digits, ``._-``).
        rank: the ``rank=`` key.

    Returns:
        The files written.
    """
    for name in PARTITIONED_TABLES:
        shutil.rmtree(Path(out_dir) / name / f"run={run_id}" / f"rank={rank}", ignore_errors=True)
    stage = Path(out_dir) / f".stage-{run_id}-{rank}"
    stage_partitions(analysis, stage)
    return publish_partitions(stage, out_dir, run_id, rank)


def read_partitioned(out_dir: str | Path, table: str = "kernels") -> pa.Table:
    """The whole ``table`` dataset under ``out_dir`` with ``run``, ``rank`` and ``phase`` columns."""
    schema = pa.schema([("run", pa.string()), ("rank", pa.int64()), ("phase", pa.string())])
    dataset = ds.dataset(Path(out_dir) / table, format="parquet",
                         partitioning=ds.partitioning(schema, flavor="hive"))
    return dataset.to_table()
