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


def _rows(df: pd.DataFrame, cols: list[str]) -> list[tuple]:
    """Column-wise values zipped into tuples (plain Python values, no per-row pandas access)."""
    return list(zip(*(df[c].astype(object).tolist() if df[c].dtype == "category" else df[c].tolist()
                      for c in cols)))


def _host_events(tables: TraceTables) -> list[str]:
    he = tables.host_events.to_pandas()
    out = []
    cols = ["row_id", "kind", "name", "pid", "tid", "start_ns", "dur_ns", "external_id"]
    for row_id, kind, name, pid, tid, start, dur, ext in _rows(he, cols):
        args = {"External id": ext} if ext >= 0 else {}
        if kind == "python":
            args = {"Python id": row_id, "Python parent id": -1}
        out.append(_event("X", HOST_CATEGORY[str(kind)], name, pid, tid, start, dur, args))
    return out


def _api_events(tables: TraceTables) -> list[str]:
    ac = tables.api_calls.to_pandas()
    ac = ac[ac["domain"].astype(str).isin(["cuda_runtime", "cuda_driver"])]
    out = []
    cols = ["domain", "kind", "name", "pid", "tid", "start_ns", "dur_ns", "correlation", "external_id"]
    for domain, kind, name, pid, tid, start, dur, corr, ext in _rows(ac, cols):
        args = {"External id": ext, "cbid": 211, "correlation": corr}
        out.append(_event("X", str(domain), name, pid, tid, start, dur, args))
        if corr >= 0 and str(kind) in ("launch", "graph_launch", "memcpy", "memset"):
            out.append(_event("s", "ac2g", "ac2g", pid, tid, start, None, {})
                       .replace('"args":{}', f'"id":{corr},"bp":"e"'))
    return out


def _device_events(tables: TraceTables) -> list[str]:
    da = tables.device_activities.to_pandas()
    da = da[da["kind"].astype(str).isin(list(DEVICE_CATEGORY))]
    out = []
    cols = ["kind", "name", "device", "stream", "context", "start_ns", "dur_ns", "correlation", "external_id",
            "registers", "shared_mem_bytes", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"]
    for (kind, name, device, stream, context, start, dur, corr, ext, regs, smem,
         gx, gy, gz, bx, by, bz) in _rows(da, cols):
        args = {"queued": 0, "device": device, "context": context, "stream": stream, "correlation": corr,
                "External id": ext, "registers per thread": regs, "shared memory": smem,
                "grid": [gx, gy, gz], "block": [bx, by, bz]}
        out.append(_event("X", DEVICE_CATEGORY[str(kind)], name, device, stream, start, dur, args))
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
