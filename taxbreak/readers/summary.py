"""What a trace holds, as a plain dict (the library side of ``taxbreak info``)."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..trace.schema import TABLE_NAMES
from ..trace.tables import TraceTables

# the column that holds each table's vocabulary, for per-kind counts
_KIND_COLUMN = {"host_events": "kind", "api_calls": "kind", "device_activities": "kind", "ranges": "source"}


def summarize_tables(tables: TraceTables) -> dict:
    """Devices, time span, rows per table and per kind, accounting and diagnostics.

    The keys are stable (``taxbreak info --json``). Times are ns relative to
    ``origin_ns``; ``span`` is ``None`` when no table has a timed row.
    """
    meta = tables.meta
    return {
        "path": meta.path,
        "format": meta.source_format,
        "format_version": meta.format_version,
        "producer_version": meta.producer_version,
        "time_base": meta.time_base,
        "origin_ns": meta.origin_ns,
        "rank": meta.rank,
        "devices": [{"id": d.get("id"), "name": d.get("name")} for d in meta.devices],
        "span": time_span(tables),
        "tables": tables.counts(),
        "kinds": {name: kind_counts(tables.table(name), col) for name, col in _KIND_COLUMN.items()},
        "input_events": meta.input_events,
        "event_counts": dict(meta.event_counts),
        "processes": len(meta.process_names),
        "threads": len(meta.thread_names),
        "diagnostics": tables.diagnostics.as_dict(),
    }


def kind_counts(table: pa.Table, column: str) -> dict[str, int]:
    """Rows per value of ``column``, sorted by value."""
    if table.num_rows == 0:
        return {}
    values = table.column(column)
    if pa.types.is_dictionary(values.type):
        values = values.cast(pa.string())
    counts = pc.value_counts(values)
    pairs = zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist())
    return {str(k): int(v) for k, v in sorted(pairs, key=lambda kv: str(kv[0]))}


def time_span(tables: TraceTables) -> dict | None:
    """Earliest start and latest end over every timed table, in ns from the origin."""
    starts, ends = [], []
    for name in TABLE_NAMES:
        table = tables.table(name)
        if table.num_rows == 0:
            continue
        if "start_ns" in table.column_names:
            start = table.column("start_ns").to_numpy()
            end = start + table.column("dur_ns").to_numpy()
        else:
            start = end = table.column("ts_ns").to_numpy()
        starts.append(int(start.min()))
        ends.append(int(np.max(end)))
    if not starts:
        return None
    return {"start_ns": min(starts), "end_ns": max(ends), "dur_ns": max(ends) - min(starts)}
