"""TraceMeta of an Nsight Systems export: versions, clock origin, devices, names.

Input: ``META_DATA_EXPORT`` (3.x) or ``EXPORT_META_DATA`` (2.x),
``TARGET_INFO_SESSION_START_TIME``, ``TARGET_INFO_GPU`` (absent in the nsys
2026.x fixtures), ``TARGET_INFO_SYSTEM_ENV``, ``PROCESSES``, ``ThreadNames``.
"""
from __future__ import annotations


from taxbreak.trace.diagnostics import Diagnostics
from taxbreak.trace.tables import TraceMeta

from . import nsys_schema as ns
from .nsys_db import NsysDb, split_global_id

# TARGET_INFO_GPU column -> the Kineto deviceProperties key it matches.
GPU_COLUMNS = {
    "id": "id", "name": "name", "totalMemory": "totalGlobalMem", "computeMajor": "computeMajor",
    "computeMinor": "computeMinor", "smCount": "numSms", "threadsPerWarp": "warpSize",
    "maxThreadsPerBlock": "maxThreadsPerBlock", "maxRegistersPerBlock": "regsPerBlock",
    "maxShmemPerBlock": "sharedMemPerBlock", "maxShmemPerBlockOptin": "sharedMemPerBlockOptin",
    "maxShmemPerSm": "sharedMemPerMultiprocessor", "maxRegistersPerSm": "regsPerMultiprocessor",
    "chipName": "chipName", "busLocation": "busLocation", "uuid": "uuid", "clockRate": "clockRateHz",
    "memoryBandwidth": "memoryBandwidthBytesPerS",
}
EXPORT_KEYS = ("EXPORT_PRODUCT_NAME", "EXPORT_PRODUCT_VERSION", "EXPORT_SCHEMA_VERSION", "EXPORT_TIME_UTC",
               "DERIVED_WINDOW_NS")
SYSTEM_KEYS = {"NvDriverVersion": "nv_driver_version", "CudaDriverVersion": "cuda_driver_version",
               "CpuArchitecture": "cpu_architecture", "OsDescription": "os"}


def read_meta(db: NsysDb, device_ids: list[int], diags: Diagnostics) -> TraceMeta:
    """Everything the export says about itself (tables and counts are filled in later)."""
    export = _export_meta(db)
    system = db.key_values(ns.SYSTEM_ENV)
    meta = TraceMeta(
        source_format="nsys",
        format_version=export.get("EXPORT_SCHEMA_VERSION", ""),
        producer_version=export.get("EXPORT_PRODUCT_VERSION", ""),
        path=str(db.path),
        origin_ns=_session_start_ns(db),
        time_base="nsys_session",
        devices=_devices(db, device_ids, diags),
        process_names=_process_names(db),
        thread_names=_thread_names(db),
    )
    meta.extra["export"] = {k: export[k] for k in EXPORT_KEYS if k in export}
    meta.extra.update({out: system[key] for key, out in SYSTEM_KEYS.items() if system.get(key)})
    return meta


def _export_meta(db: NsysDb) -> dict[str, str]:
    for table in ns.EXPORT_META_TABLES:
        if db.has(table):
            return db.key_values(table)
    return {}


def _session_start_ns(db: NsysDb) -> int | None:
    """UTC epoch ns of the capture start: exported times count from it."""
    if "utcEpochNs" not in db.columns(ns.SESSION_START):
        return None
    rows = db.query(f'SELECT CAST(utcEpochNs AS INTEGER) FROM "{ns.SESSION_START}" '
                    "WHERE utcEpochNs IS NOT NULL LIMIT 1", ns.SESSION_START)
    return rows[0][0] if rows else None


def _devices(db: NsysDb, device_ids: list[int], diags: Diagnostics) -> list[dict]:
    """TARGET_INFO_GPU rows; without it, the device ids seen in the activity tables."""
    present = [c for c in GPU_COLUMNS if c in db.columns(ns.TARGET_GPU)]
    if "id" in present:
        exprs = [_gpu_expr(c) for c in present]
        sql = f'SELECT {", ".join(exprs)} FROM "{ns.TARGET_GPU}"'
        devices = [{GPU_COLUMNS[c]: v for c, v in zip(present, row) if v is not None}
                   for row in db.query(sql, ns.TARGET_GPU)]
        if devices:
            return sorted(devices, key=lambda d: d.get("id", -1))
    diags.add("trace.no_device_info", 1,
              f"{ns.TARGET_GPU} absent or empty; device ids {device_ids} taken from the activity tables")
    return [{"id": d, "source": "activity tables"} for d in device_ids]


GPU_TEXT_COLUMNS = {"name", "chipName", "busLocation", "uuid"}


def _gpu_expr(column: str) -> str:
    """SQL for one TARGET_INFO_GPU column: names as text, numbers as numbers,
    any other storage class (a blob where a number belongs) as NULL."""
    if column == "id":
        return "CAST(id AS INTEGER)"
    if column in GPU_TEXT_COLUMNS:
        return f'CAST("{column}" AS TEXT)'
    return f'CASE WHEN typeof("{column}") IN (\'integer\', \'real\') THEN "{column}" END'


def _process_names(db: NsysDb) -> dict[str, str]:
    if not {"pid", "name"} <= set(db.columns(ns.PROCESSES)):
        return {}
    rows = db.query(f'SELECT CAST(pid AS INTEGER), CAST(name AS TEXT) FROM "{ns.PROCESSES}" '
                    "WHERE pid IS NOT NULL", ns.PROCESSES)
    return {str(pid): str(name) for pid, name in rows if name is not None}


def _thread_names(db: NsysDb) -> dict[str, str]:
    c = db.fetch(ns.THREAD_NAMES, ns.cols(("global_tid", "globalTid"), ("name_id", "nameId")))
    pid, tid = split_global_id(c["global_tid"])
    names = db.strings.lookup(c["name_id"])
    return {f"{p}:{t}": str(n) for p, t, n in zip(pid.tolist(), tid.tolist(), names) if n is not None and p >= 0}
