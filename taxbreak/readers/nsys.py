"""Nsight Systems reader: SQLite export (or .nsys-rep via ``nsys export``) -> TraceTables.

Times stay as exported: int64 ns from the capture start (``time_base``
``nsys_session``); ``meta.origin_ns`` is that start in UTC epoch ns when the
export records it. Every row of the event tables (CUDA API, cuBLAS/cuDNN,
kernel/memcpy/memset/sync activity, NVTX) lands in exactly one canonical
table, in TraceMeta (NVTX naming records) or in a counted diagnostic:
``meta.input_events == sum(meta.event_counts.values())``.
The table layout the reader needs is in docs/trace-model-nsys.md.
"""
from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from taxbreak.trace.diagnostics import Diagnostics
from taxbreak.trace.errors import ToolMissingError, TraceFormatError
from taxbreak.trace.fileio import check_input
from taxbreak.trace.memory import release_freed_heap
from taxbreak.trace.tables import TraceMeta, TraceTables

from . import bounds as B
from . import nsys_schema as ns
from .nsys_api import read_api_calls
from .nsys_db import NsysDb, open_export
from .nsys_device import device_ids, read_device_activities
from .nsys_meta import read_meta
from .nsys_nvtx import NvtxResult, read_nvtx

log = logging.getLogger(__name__)

NSYS_INSTALL_HINT = (
    "install NVIDIA Nsight Systems (the `nsys` CLI, e.g. the nsight-systems-cli package from "
    "developer.nvidia.com/nsight-systems) and put it on PATH, or export on a machine that has it: "
    "`nsys export --type sqlite --output trace.sqlite report.nsys-rep`"
)


def read_nsys(path: str | os.PathLike) -> TraceTables:
    """Read an Nsight Systems SQLite export into the canonical tables.

    Args:
        path: a ``.sqlite`` file written by ``nsys export --type sqlite`` (schema 2.x or 3.x).

    Returns:
        TraceTables with ``api_calls``, ``device_activities``, ``host_events``
        (ATen and custom dispatcher ops from ``emit_nvtx`` ranges), ``ranges`` (other NVTX ranges),
        an empty ``flows``, meta and diagnostics.

    Raises:
        TraceNotFoundError: the file is missing, empty or unreadable.
        UnsupportedFormatError: ``nsys.not_an_export``.
        TraceFormatError: ``nsys.corrupt``.
    """
    started = time.perf_counter()
    db = open_export(Path(path))
    try:
        tables = _read_tables(db)
    finally:
        db.conn.close()
    log.debug("read %s in %.3f s: %s", path, time.perf_counter() - started, tables.meta.event_counts)
    return tables


ENV_EXPORT_TIMEOUT = "TAXBREAK_NSYS_EXPORT_TIMEOUT_S"
DEFAULT_EXPORT_TIMEOUT_S = 1800.0  # a 10 M-event report exports in minutes; a hung nsys must not hold a CI job


def export_timeout_s() -> float:
    """``$TAXBREAK_NSYS_EXPORT_TIMEOUT_S`` when it is a positive number, else 30 minutes."""
    try:
        value = float(os.environ.get(ENV_EXPORT_TIMEOUT, ""))
    except ValueError:
        return DEFAULT_EXPORT_TIMEOUT_S
    return value if value > 0 else DEFAULT_EXPORT_TIMEOUT_S


def read_nsys_rep(path: str | os.PathLike, timeout_s: float | None = None) -> TraceTables:
    """Export an ``.nsys-rep`` with the ``nsys`` CLI to a temporary SQLite file and read it.

    Args:
        path: the report file.
        timeout_s: give up on ``nsys export`` after this many seconds
            (None: ``$TAXBREAK_NSYS_EXPORT_TIMEOUT_S``, default 30 minutes).

    Raises:
        ToolMissingError: ``nsys.not_installed`` when ``nsys`` is not on PATH.
        TraceFormatError: ``nsys.export_failed`` when the export fails or writes nothing.
    """
    rep = Path(path)
    check_input(rep, what="report")  # a FIFO or device is refused before nsys opens it
    nsys = shutil.which("nsys")
    if nsys is None:
        raise ToolMissingError("nsys.not_installed", "reading an .nsys-rep needs the nsys CLI, which is not on PATH",
                               path=str(rep), hint=NSYS_INSTALL_HINT)
    with tempfile.TemporaryDirectory(prefix="taxbreak-nsys-") as tmp:
        out = Path(tmp) / (rep.stem + ".sqlite")
        _run_export(nsys, rep, out, export_timeout_s() if timeout_s is None else timeout_s)
        tables = read_nsys(out)
    tables.meta.extra["exported_from"] = str(rep)
    tables.meta.path = str(rep)
    return tables


def _run_export(nsys: str, rep: Path, out: Path, timeout_s: float) -> None:
    # absolute paths: a report named `--force-overwrite=true.nsys-rep` would otherwise read as an option
    cmd = [nsys, "export", "--type", "sqlite", "--output", os.path.abspath(out), os.path.abspath(rep)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TraceFormatError("nsys.export_failed", f"`nsys export` did not finish: {exc}", path=str(rep),
                               hint="run the export by hand to see why") from exc
    if proc.returncode != 0 or not out.is_file():
        tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-3:]
        raise TraceFormatError(
            "nsys.export_failed", f"`nsys export` exited {proc.returncode}: {' | '.join(tail) or 'no output file'}",
            path=str(rep), hint="check the report opens in nsys; a report from a newer nsys needs that version",
        )


def _read_tables(db: NsysDb) -> TraceTables:
    diags = Diagnostics()
    # Each reader's fetched columns and intermediates are freed when it returns but stay
    # resident until trimmed (1 M rows: read peak 766 -> 633 MiB with the trims).
    api_calls = read_api_calls(db, diags)
    release_freed_heap()
    device = read_device_activities(db, diags)
    release_freed_heap()
    nvtx = read_nvtx(db, diags)
    release_freed_heap()
    bounds = B.current()
    api_calls, device = (_without_endless(db, t, bounds, diags) for t in (api_calls, device))
    _check_span(db.path, bounds, (api_calls, device, nvtx.host_events, nvtx.ranges))
    meta = read_meta(db, device_ids(device), diags)
    _fold_nvtx_names(meta, nvtx)
    diags.add("nsys.invalid_utf8", db.text.invalid, db.text.example)
    diags.add("nsys.untrusted_schema", db.ignored_schema, "views and generated columns are never read")
    diags.add("nsys.wrong_storage", db.wrong_storage, f"{ns.STRINGS}.value held a number or a blob; read as text")
    tables = TraceTables(api_calls=_by_start(api_calls), device_activities=_by_start(device),
                         host_events=_by_start(nvtx.host_events), ranges=_by_start(nvtx.ranges),
                         meta=meta, diagnostics=diags)
    tables.validate()
    meta.input_events = db.tally.read
    meta.event_counts = {**tables.counts(), "metadata": db.tally.metadata, "dropped": db.tally.dropped}
    return tables


def _without_endless(db: NsysDb, table: pa.Table, bounds: B.Bounds, diags: Diagnostics) -> pa.Table:
    """Rows longer than the span bound (a kernel ending at INT64_MAX: 292 years) are dropped and
    counted, as the Kineto reader drops a ``dur`` beyond it (``event.number_out_of_range``)."""
    endless = pc.greater(table.column("dur_ns"), bounds.span_ns)
    n = pc.sum(endless).as_py() or 0
    if not n:
        return table
    diags.add("event.number_out_of_range", n, f"{n} rows last longer than the {bounds.span_ns / 86400e9:,.0f}-day "
              f"span bound (an end at INT64_MAX); skipped")
    db.tally.dropped += n
    return table.filter(pc.invert(endless))


def _check_span(path: Path, bounds: B.Bounds, tables: tuple[pa.Table, ...]) -> None:
    """``nsys.time_range`` when the rows span more than the bound (Kineto: ``kineto.time_range``)."""
    tables = [t for t in tables if t.num_rows]
    if not tables:
        return
    starts = [pc.min(t.column("start_ns")).as_py() for t in tables]
    try:
        ends = [pc.max(pc.add_checked(t.column("start_ns"), t.column("dur_ns"))).as_py() for t in tables]
    except pa.ArrowInvalid:  # an end beyond int64: beyond any bound
        ends = [2**63]
    if max(ends) - min(starts) > bounds.span_ns:
        raise TraceFormatError(
            "nsys.time_range", f"the rows span {(max(ends) - min(starts)) / 86400e9:,.0f} days, beyond the "
            f"{bounds.span_ns / 86400e9:,.0f}-day bound", str(path), location=f"start {min(starts)} to end {max(ends)} ns",
            hint=f"timestamps out of any profiler's range; {B.ENV_SPAN_S} (seconds) raises the bound")


def _fold_nvtx_names(meta: TraceMeta, nvtx: NvtxResult) -> None:
    """Fold NVTX naming records into meta; a thread name given through NVTX
    (nvtxNameOsThread) wins over the OS thread name."""
    meta.thread_names.update(nvtx.thread_names)
    if nvtx.domains:
        meta.extra["nvtx_domains"] = nvtx.domains
    if nvtx.categories:
        meta.extra["nvtx_categories"] = nvtx.categories


def _by_start(table: pa.Table) -> pa.Table:
    """Rows in time order (stable, so ties keep their export order)."""
    if table.num_rows == 0:
        return table
    if _in_start_order(table):
        return _one_chunk(table)  # what the take below gives then, without sorting
    return table.take(pc.sort_indices(table, sort_keys=[("start_ns", "ascending"), ("row_id", "ascending")]))


def _one_chunk(table: pa.Table) -> pa.Table:
    """One chunk per column, as ``combine_chunks`` gives, but without copying a column whose
    rows all lie in one chunk: the device table is the kernel, memcpy and memset reads
    concatenated, and in an export of kernels only the other three are empty (1 M rows: a
    55 MB copy of the kernel names, 0.15-0.4 s)."""
    columns = []
    for column in table.columns:
        filled = [chunk for chunk in column.chunks if len(chunk)]
        columns.append(pa.chunked_array(filled, column.type) if len(filled) == 1 else column.combine_chunks())
    return pa.Table.from_arrays(columns, schema=table.schema)


def _in_start_order(table: pa.Table) -> bool:
    """Already sorted by (start_ns, row_id): kernels and API calls usually are in an export."""
    start = table.column("start_ns").to_numpy()
    row_id = table.column("row_id").to_numpy()
    ties = start[1:] == start[:-1]
    return bool(np.all(start[1:] >= start[:-1]) and np.all(row_id[1:][ties] > row_id[:-1][ties]))
