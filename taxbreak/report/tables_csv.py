"""The per-kernel, per-step and per-phase tables as CSV (``taxbreak analyze --format csv``).

As ``nsys stats --format csv`` does for its reports: one header row, one row per
kernel / step / phase, the frames' own column names and units (``_ns`` integer
nanoseconds, ``_us`` microseconds). A value that was not measured is an empty
cell, never 0. Idle time per cause and busy/idle per device are long-form tables of
their own (``idle_by_cause``, ``devices``: one row per scope, device and cause),
as ``Analysis.idle_by_cause`` and ``Analysis.devices`` hold them (decompose/nested.py).
"""
from __future__ import annotations

from pathlib import Path

from ..trace.fileio import output_target, refuse_shared_outputs, write_output
from .sanitize import csv_frame

CSV_TABLES = ("kernels", "steps", "phases", "idle_by_cause", "devices")
CSV_FILES = tuple(f"{table}.csv" for table in CSV_TABLES)


def table_csv(analysis, table: str) -> str:
    """The CSV text of ``analysis.<table>`` (one of :data:`CSV_TABLES`)."""
    if table not in CSV_TABLES:
        raise ValueError(f"table must be one of {', '.join(CSV_TABLES)}, got {table!r}")
    # lineterminator "\n": the same bytes on every platform, as the goldens compare them
    # text cells that a spreadsheet would run as formulas get a ' in front (report/sanitize.py)
    return csv_frame(getattr(analysis, table)).to_csv(index=False, na_rep="", lineterminator="\n")


def write_csv_tables(analysis, out_dir: str | Path) -> list[Path]:
    """Write one ``<table>.csv`` per :data:`CSV_TABLES` into ``out_dir`` (created)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for table in CSV_TABLES:
        output_target(out / f"{table}.csv")  # a link among them refuses the whole output first
    written = []
    for table in CSV_TABLES:
        path = out / f"{table}.csv"
        write_output(path, table_csv(analysis, table))
        written.append(path)
    return written


def check_analysis_outputs(out_dir: str | Path, *, csv: bool = False) -> None:
    """Refuse every file :func:`write_analysis_outputs` would write (a link, a non-regular file,
    two outputs on one file) before any is written, so a refusal leaves the folder as it was."""
    from ..decompose.result import OUTPUT_FILES  # on use: `analyze --help` imports no decomposer (tests/test_startup.py)

    out = Path(out_dir)
    names = [*OUTPUT_FILES, *(CSV_FILES if csv else ())]
    refuse_shared_outputs({name: out / name for name in names})
    for name in names:
        output_target(out / name)


def write_analysis_outputs(analysis, out_dir: str | Path, *, csv: bool = False) -> list[Path]:
    """The Parquet frames and ``summary.json`` into ``out_dir``, with ``csv`` also the CSV tables
    (``taxbreak analyze -o DIR [--format csv]``); every name is checked before the first write."""
    check_analysis_outputs(out_dir, csv=csv)
    written = analysis.to_parquet(out_dir)
    return written + (write_csv_tables(analysis, out_dir) if csv else [])
