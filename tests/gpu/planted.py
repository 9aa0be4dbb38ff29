"""Small planted TraceTables for the GPU-stage tests (no GPU, no reader needed).

Rows are given as dicts with only the interesting columns; every other column
of the canonical schema gets its "missing" value (-1 or null).
"""
from __future__ import annotations

import pyarrow as pa

from taxbreak.trace.schema import SCHEMAS
from taxbreak.trace.tables import TraceMeta, TraceTables

_DEFAULTS = {pa.int64(): -1, pa.int32(): 0}


def table(name: str, rows: list[dict]) -> pa.Table:
    """A canonical table from partial rows (row_id numbered from 1000 per table)."""
    schema = SCHEMAS[name]
    columns = {}
    for field in schema:
        values = []
        for i, row in enumerate(rows):
            if field.name == "row_id" and "row_id" not in row:
                values.append(1000 * (list(SCHEMAS).index(name) + 1) + i)
            else:
                values.append(row.get(field.name, _DEFAULTS.get(field.type)))
        columns[field.name] = pa.array(values, type=field.type.value_type if pa.types.is_dictionary(field.type) else field.type)
    built = pa.table(columns)
    return pa.Table.from_arrays(
        [built[f.name].cast(f.type) for f in schema], schema=schema)


def tables(host=(), api=(), device=(), devices=None) -> TraceTables:
    meta = TraceMeta(source_format="kineto", devices=devices or [{"id": 0, "name": "NVIDIA H200"}])
    return TraceTables(host_events=table("host_events", list(host)), api_calls=table("api_calls", list(api)),
                       device_activities=table("device_activities", list(device)), meta=meta)


def launch(corr: int, start_ns: int, tid: int = 1, domain: str = "cuda_runtime", name: str = "cudaLaunchKernel") -> dict:
    return {"process": 0, "pid": 1, "tid": tid, "domain": domain, "kind": "launch", "name": name,
            "api_name": name, "start_ns": start_ns, "dur_ns": 2000, "correlation": corr}


def kernel(corr: int, start_ns: int, name: str, dur_ns: int = 1000, grid=(1, 1, 1), block=(128, 1, 1),
           registers: int = 32, smem: int = 0) -> dict:
    return {"process": 0, "kind": "kernel", "name": name, "device": 0, "stream": 7, "start_ns": start_ns,
            "dur_ns": dur_ns, "correlation": corr, "grid_x": grid[0], "grid_y": grid[1], "grid_z": grid[2],
            "block_x": block[0], "block_y": block[1], "block_z": block[2], "registers": registers,
            "shared_mem_bytes": smem}


def op(name: str, start_ns: int, dur_ns: int, tid: int = 1, kind: str = "op", **record) -> dict:
    return {"pid": 1, "tid": tid, "kind": kind, "name": name, "start_ns": start_ns, "dur_ns": dur_ns, **record}
