"""Write canonical tables as an Nsight Systems SQLite export (schema 3.x layout).

The inverse of the Nsight reader for the fields the decomposer uses
(docs/trace-model-nsys.md):

* API calls → ``CUPTI_ACTIVITY_KIND_RUNTIME`` (runtime class 0, driver class 1,
  names with the ``_v<version>`` suffix nsys adds); library ranges →
  ``CUBLAS_EVENTS`` / ``CUDNN_EVENTS``;
* kernels → ``CUPTI_ACTIVITY_KIND_KERNEL`` (memcpy/memset rows are left out);
* ATen ops → ``NVTX_EVENTS`` push/pop ranges named as ``emit_nvtx`` does
  (``aten::mm, seq = 3, op_id = 17``); Python frames and annotations →
  plain NVTX ranges (Nsight has no Python frames; they stand for
  ``record_function`` ranges).

``globalTid = pid << 24 | tid`` and ``globalPid = pid << 24`` (serialized GlobalIds).
"""
from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd

from ..trace.tables import TraceTables

SCHEMA = {
    "StringIds": "id INTEGER PRIMARY KEY, value TEXT NOT NULL",
    "META_DATA_EXPORT": "name TEXT, value TEXT",
    "TARGET_INFO_GPU": "id INTEGER, name TEXT, computeMajor INTEGER, computeMinor INTEGER, totalMemory INTEGER",
    "TARGET_INFO_SYSTEM_ENV": "name TEXT, value TEXT",
    "CUPTI_ACTIVITY_KIND_RUNTIME": ("start INTEGER, end INTEGER, eventClass INTEGER, globalTid INTEGER, "
                                    "correlationId INTEGER, nameId INTEGER, returnValue INTEGER"),
    "CUPTI_ACTIVITY_KIND_KERNEL": ("start INTEGER, end INTEGER, deviceId INTEGER, contextId INTEGER, "
                                   "streamId INTEGER, correlationId INTEGER, globalPid INTEGER, "
                                   "demangledName INTEGER, shortName INTEGER, gridX INTEGER, gridY INTEGER, "
                                   "gridZ INTEGER, blockX INTEGER, blockY INTEGER, blockZ INTEGER, "
                                   "registersPerThread INTEGER, staticSharedMemory INTEGER, "
                                   "dynamicSharedMemory INTEGER"),
    "NVTX_EVENTS": ("start INTEGER, end INTEGER, eventType INTEGER, rangeId INTEGER, category INTEGER, "
                    "color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER, "
                    "domainId INTEGER"),
    "CUBLAS_EVENTS": "start INTEGER, end INTEGER, eventClass INTEGER, globalTid INTEGER, nameId INTEGER",
    "CUDNN_EVENTS": "start INTEGER, end INTEGER, eventClass INTEGER, globalTid INTEGER, nameId INTEGER",
}
NVTX_PUSH_POP = 59


class _Strings:
    """StringIds: one id per distinct text."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def ids_of(self, values) -> list[int]:
        out = []
        for v in values:  # distinct names are few; ids are assigned once each
            out.append(self.ids.setdefault(str(v), len(self.ids) + 1))
        return out

    def rows(self) -> list[tuple[int, str]]:
        return [(i, v) for v, i in self.ids.items()]


def _gtid(pid: pd.Series, tid: pd.Series) -> np.ndarray:
    return (pid.to_numpy(np.int64) << 24) | tid.to_numpy(np.int64)


def _runtime_rows(ac: pd.DataFrame, strings: _Strings) -> list[tuple]:
    api = ac[ac["domain"].astype(str).isin(["cuda_runtime", "cuda_driver"])]
    names = [f"{n}_v7000" if d == "cuda_runtime" else n
             for n, d in zip(api["name"], api["domain"].astype(str))]
    cls = np.where(api["domain"].astype(str) == "cuda_driver", 1, 0)
    return list(zip(api["start_ns"].tolist(), (api["start_ns"] + api["dur_ns"]).tolist(), cls.tolist(),
                    _gtid(api["pid"], api["tid"]).tolist(), api["correlation"].tolist(), strings.ids_of(names),
                    [0] * len(api)))


def _library_rows(ac: pd.DataFrame, domain: str, strings: _Strings) -> list[tuple]:
    lib = ac[(ac["kind"].astype(str) == "library") & (ac["domain"].astype(str) == domain)]
    return list(zip(lib["start_ns"].tolist(), (lib["start_ns"] + lib["dur_ns"]).tolist(), [0] * len(lib),
                    _gtid(lib["pid"], lib["tid"]).tolist(), strings.ids_of(lib["name"])))


def _kernel_rows(da: pd.DataFrame, strings: _Strings) -> list[tuple]:
    k = da[da["kind"].astype(str) == "kernel"]
    ids = strings.ids_of(k["name"])
    smem = k["shared_mem_bytes"].clip(lower=0)
    return list(zip(k["start_ns"].tolist(), (k["start_ns"] + k["dur_ns"]).tolist(), k["device"].tolist(),
                    k["context"].tolist(), k["stream"].tolist(), k["correlation"].tolist(),
                    (k["process"].to_numpy(np.int64) << 24).tolist(), ids, ids, k["grid_x"].tolist(),
                    k["grid_y"].tolist(), k["grid_z"].tolist(), k["block_x"].tolist(), k["block_y"].tolist(),
                    k["block_z"].tolist(), k["registers"].tolist(), smem.tolist(), [0] * len(k)))


def _nvtx_rows(he: pd.DataFrame) -> list[tuple]:
    name = he["name"].astype(str)  # canonical text is dictionary-encoded: a categorical here
    is_op = (he["kind"].astype(str) == "op") & name.str.startswith("aten::")
    seq = np.arange(len(he))
    text = np.where(is_op, name + ", seq = " + pd.Series(seq, index=he.index).astype(str)
                    + ", op_id = " + he["row_id"].astype(str), name)
    g = _gtid(he["pid"], he["tid"]).tolist()
    n = len(he)
    return list(zip(he["start_ns"].tolist(), (he["start_ns"] + he["dur_ns"]).tolist(), [NVTX_PUSH_POP] * n,
                    [0] * n, [0] * n, [0] * n, text.tolist(), g, g, [None] * n, [0] * n))


def write_nsys(tables: TraceTables, path: str | Path, product_version: str = "2026.2.1.210") -> Path:
    """Write ``tables`` as an Nsight Systems SQLite export.

    Args:
        tables: canonical tables; every API call's ``process`` must equal its ``pid``
            and every device row's ``process`` the launching pid (as Nsight defines them).
        path: the ``.sqlite`` file to create (replaced if present).
        product_version: the ``EXPORT_PRODUCT_VERSION`` to record.

    Returns:
        The path written.
    """
    out = Path(path)
    out.unlink(missing_ok=True)
    strings = _Strings()
    ac, da, he = (t.to_pandas() for t in (tables.api_calls, tables.device_activities, tables.host_events))
    ac = ac.assign(process=ac["pid"])
    data = {
        "CUPTI_ACTIVITY_KIND_RUNTIME": _runtime_rows(ac, strings),
        "CUBLAS_EVENTS": _library_rows(ac, "cublas", strings),
        "CUDNN_EVENTS": _library_rows(ac, "cudnn", strings),
        "CUPTI_ACTIVITY_KIND_KERNEL": _kernel_rows(da, strings),
        "NVTX_EVENTS": _nvtx_rows(he),
        "META_DATA_EXPORT": [("EXPORT_SCHEMA_VERSION", "3.25.0"), ("EXPORT_PRODUCT_VERSION", product_version)],
        "TARGET_INFO_GPU": [(int(d.get("id", 0)), d.get("name", ""), 9, 0, 85899345920)
                            for d in tables.meta.devices],
        "TARGET_INFO_SYSTEM_ENV": [("CudaDriverVersion", "12090")],
    }
    data["StringIds"] = strings.rows()
    with sqlite3.connect(out) as con:
        for table, columns in SCHEMA.items():
            con.execute(f'CREATE TABLE "{table}" ({columns})')
            rows = data.get(table, [])
            if rows:
                marks = ",".join("?" * len(rows[0]))
                con.executemany(f'INSERT INTO "{table}" VALUES ({marks})', rows)
    con.close()
    return out
