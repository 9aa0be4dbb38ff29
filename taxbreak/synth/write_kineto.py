"""Write canonical tables as a Kineto (PyTorch profiler) Chrome-trace JSON.

The inverse of the Kineto reader for the fields the decomposer uses: host
events become ``python_function`` / ``cpu_op`` / ``user_annotation``, API
calls ``cuda_runtime`` / ``cuda_driver`` (library ranges have no Kineto
category and are left out), device rows ``kernel`` / ``gpu_memcpy`` /
``gpu_memset`` on ``pid = device, tid = stream``, each with an ``ac2g`` flow.
Times are written the way Kineto does: µs relative to ``baseTimeNanoseconds``
with three decimals, so every ns survives the round trip.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pandas as pd

from ..trace.tables import TraceTables

HOST_CATEGORY = {"python": "python_function", "op": "cpu_op", "annotation": "user_annotation"}
DEVICE_CATEGORY = {"kernel": "kernel", "memcpy": "gpu_memcpy", "memset": "gpu_memset"}


def _us(ns: int) -> str:
    """``ns`` as Kineto's µs text with exactly three decimals (no float rounding)."""
    sign = "-" if ns < 0 else ""
    ns = abs(int(ns))
    return f"{sign}{ns // 1000}.{ns % 1000:03d}"


def _event(ph: str, cat: str, name: str, pid: int, tid: int, ts: int, dur: int | None, args: dict) -> str:
    fields = [f'"ph":"{ph}"', f'"cat":"{cat}"', f'"name":{json.dumps(name)}', f'"pid":{pid}', f'"tid":{tid}',
              f'"ts":{_us(ts)}']
    if dur is not None:
        fields.append(f'"dur":{_us(dur)}')
    fields.append(f'"args":{json.dumps(args)}')
    return "{" + ",".join(fields) + "}"


def _host_events(tables: TraceTables) -> list[str]:
    he = tables.host_events.to_pandas()
    out = []
    for row in he.itertuples(index=False):  # writer side: small synthetic traces only
        args = {"External id": int(row.external_id)} if row.external_id >= 0 else {}
        if row.kind == "python":
            args = {"Python id": int(row.row_id), "Python parent id": -1}
        out.append(_event("X", HOST_CATEGORY[str(row.kind)], row.name, row.pid, row.tid, row.start_ns,
                          row.dur_ns, args))
    return out


def _api_events(tables: TraceTables) -> list[str]:
    ac = tables.api_calls.to_pandas()
    ac = ac[ac["domain"].astype(str).isin(["cuda_runtime", "cuda_driver"])]
    out = []
    for row in ac.itertuples(index=False):
        args = {"External id": int(row.external_id), "cbid": 211, "correlation": int(row.correlation)}
        out.append(_event("X", str(row.domain), row.name, row.pid, row.tid, row.start_ns, row.dur_ns, args))
        if row.correlation >= 0 and str(row.kind) in ("launch", "graph_launch", "memcpy", "memset"):
            out.append(_event("s", "ac2g", "ac2g", row.pid, row.tid, row.start_ns, None, {})
                       .replace('"args":{}', f'"id":{int(row.correlation)},"bp":"e"'))
    return out


def _device_events(tables: TraceTables) -> list[str]:
    da = tables.device_activities.to_pandas()
    da = da[da["kind"].astype(str).isin(list(DEVICE_CATEGORY))]
    out = []
    for row in da.itertuples(index=False):
        args = {"queued": 0, "device": int(row.device), "context": int(row.context), "stream": int(row.stream),
                "correlation": int(row.correlation), "External id": int(row.external_id),
                "registers per thread": int(row.registers), "shared memory": int(row.shared_mem_bytes),
                "grid": [int(row.grid_x), int(row.grid_y), int(row.grid_z)],
                "block": [int(row.block_x), int(row.block_y), int(row.block_z)]}
        out.append(_event("X", DEVICE_CATEGORY[str(row.kind)], row.name, row.device, row.stream, row.start_ns,
                          row.dur_ns, args))
    return out


def write_kineto(tables: TraceTables, path: str | Path, base_time_ns: int = 1_700_000_000_000_000_000) -> Path:
    """Write ``tables`` as a Kineto JSON trace (``.json`` or ``.json.gz``).

    Args:
        tables: canonical tables (times from the trace origin).
        path: output file; gzip-compressed when it ends in ``.gz``.
        base_time_ns: the ``baseTimeNanoseconds`` to record.

    Returns:
        The path written.
    """
    devices = [{"id": int(d.get("id", 0)), "name": d.get("name", ""), "totalGlobalMem": 85899345920,
                "computeMajor": 9, "computeMinor": 0} for d in tables.meta.devices]
    events = _host_events(tables) + _api_events(tables) + _device_events(tables)
    head = {"schemaVersion": 1, "deviceProperties": devices, "cuda_driver_version": 12090,
            "displayTimeUnit": "ms", "baseTimeNanoseconds": base_time_ns}
    text = json.dumps(head)[:-1] + ',"traceEvents":[' + ",".join(events) + '],"traceName":"planted"}'
    out = Path(path)
    data = text.encode()
    out.write_bytes(gzip.compress(data, mtime=0) if out.name.endswith(".gz") else data)
    return out


def kineto_frame(tables: TraceTables) -> pd.DataFrame:
    """The events :func:`write_kineto` would write, one per row (for inspection)."""
    return pd.DataFrame({"event": _host_events(tables) + _api_events(tables) + _device_events(tables)})
