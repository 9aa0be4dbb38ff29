"""CUDA runtime/driver and cuBLAS/cuDNN calls -> the ``api_calls`` table.

Input columns (by name): ``start``, ``end``, ``eventClass``, ``globalTid``,
``correlationId``, ``nameId`` of ``CUPTI_ACTIVITY_KIND_RUNTIME``; ``start``,
``end``, ``globalTid``, ``nameId`` of ``CUBLAS_EVENTS`` / ``CUDNN_EVENTS``.

    RUNTIME row                                       api_calls row
    nameId -> "cudaLaunchKernel_v7000", eventClass 0  name cudaLaunchKernel_v7000, api_name cudaLaunchKernel,
                                                      domain cuda_runtime, kind launch
    nameId -> "cuLaunchKernelEx", eventClass 1        api_name cuLaunchKernelEx, domain cuda_driver, kind launch
    globalTid 281477392629904                         pid 144, tid 144, process 144
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from taxbreak.trace.diagnostics import Diagnostics
from taxbreak.trace.schema import NO_ID

from . import nsys_schema as ns
from .nsys_db import NsysDb, split_global_id, take_strings, unique_inverse


def read_api_calls(db: NsysDb, diags: Diagnostics) -> pa.Table:
    """Runtime/driver calls then library calls, as one ``api_calls`` table."""
    parts = [_runtime_calls(db, diags)]
    for table, domain in ns.LIBRARY_TABLES.items():
        if not db.has(table):
            diags.add("nsys.missing_table", 1, f"{table} absent (trace cuBLAS/cuDNN with --trace=cublas,cudnn)")
            continue
        parts.append(_library_calls(db, table, domain, diags))
    return pa.concat_tables(parts)


def event_class_ids(db: NsysDb) -> dict[str, int]:
    """Runtime/driver/backtrace eventClass ids: from ENUM_NSYS_EVENT_CLASS, else the 2.x defaults."""
    return db.enum_ids(ns.ENUM_EVENT_CLASS, ns.EVENT_CLASS_NAMES)


def _runtime_calls(db: NsysDb, diags: Diagnostics) -> pa.Table:
    if not db.has(ns.RUNTIME):
        diags.add("nsys.missing_table", 1, f"{ns.RUNTIME} absent (no CUDA API trace)")
    c = db.fetch(ns.RUNTIME, ns.RUNTIME_COLS)
    n_read = len(c["start_ns"])
    db.tally.read += n_read
    row_id = db.row_ids(n_read)
    classes = event_class_ids(db)
    keep = _drop_backtrace_duplicates(c, classes["TRACE_PROCESS_EVENT_CUDABACKTRACE"], db, diags)
    c = {k: v[keep] for k, v in c.items()}
    names, inverse = _unique_names(db, c["name_id"])
    api_names = np.array([None if s is None else ns.strip_version(s) for s in names], dtype=object)
    kinds = np.array(["other" if s is None else ns.api_kind(s) for s in api_names], dtype=object)
    name_domains = np.array([ns.api_domain_from_name(s or "") for s in api_names], dtype=object)
    domain = _runtime_domains(c["event_class"], classes, name_domains[inverse])
    return _api_table(db, c, row_id[keep], domain, kinds[inverse], take_strings(names, inverse),
                      take_strings(api_names, inverse), correlation=c["correlation"], diags=diags)


def _library_calls(db: NsysDb, table: str, domain: str, diags: Diagnostics) -> pa.Table:
    c = db.fetch(table, ns.LIBRARY_COLS)
    n = len(c["start_ns"])
    db.tally.read += n
    names, inverse = _unique_names(db, c["name_id"])
    api_names = np.array([None if s is None else ns.strip_version(s) for s in names], dtype=object)
    return _api_table(db, c, db.row_ids(n), np.full(n, domain, dtype=object), np.full(n, "library", dtype=object),
                      take_strings(names, inverse), take_strings(api_names, inverse),
                      correlation=np.full(n, NO_ID, dtype=np.int64), diags=diags)


def _drop_backtrace_duplicates(c: dict, backtrace_class: int, db: NsysDb, diags: Diagnostics) -> np.ndarray:
    """Mask of rows to keep: schema 2.x writes each call twice (eventClass 67
    "CUDA backtrace", unsuffixed name, plus the real runtime row with the same
    correlationId on the same thread). The real row is kept."""
    is_bt = c["event_class"] == backtrace_class
    keep = np.ones(len(is_bt), dtype=bool)
    if not is_bt.any():
        return keep
    key = np.stack([c["global_tid"], c["correlation"]], axis=1)
    _, key_id = unique_inverse(key)
    key_id = key_id.ravel()
    real_keys = key_id[~is_bt]
    dup = is_bt & (c["correlation"] >= 0) & np.isin(key_id, real_keys)
    keep[dup] = False
    names, inverse = _unique_names(db, c["name_id"][dup])
    is_launch = np.array([n is not None and ns.api_kind(ns.strip_version(n)) == "launch" for n in names], dtype=bool)
    n_launch = int(is_launch[inverse].sum()) if len(inverse) else 0
    diags.add("nsys.duplicate_launch", n_launch, "eventClass 67 (CUDA backtrace) copy of a launch call removed")
    diags.add("nsys.duplicate_api", int(dup.sum()) - n_launch,
              "eventClass 67 (CUDA backtrace) copy of a non-launch API call removed")
    db.tally.dropped += int(dup.sum())
    return keep


def _unique_names(db: NsysDb, name_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct names (object array) and the inverse index of each row."""
    uniq, inverse = unique_inverse(name_ids)
    return db.strings.lookup(uniq), inverse.ravel()


def _runtime_domains(event_class: np.ndarray, classes: dict[str, int], name_domains: np.ndarray) -> np.ndarray:
    """Domain from eventClass; unpaired backtrace rows and unknown classes
    take the domain their name prefix implies (``name_domains``, per row)."""
    domain = name_domains.copy()
    domain[event_class == classes["TRACE_PROCESS_EVENT_CUDA_RUNTIME"]] = "cuda_runtime"
    domain[event_class == classes["TRACE_PROCESS_EVENT_CUDA_DRIVER"]] = "cuda_driver"
    return domain


def _api_table(db: NsysDb, c: dict, row_id: np.ndarray, domain: np.ndarray, kind: np.ndarray,
               names: pa.Array, api_names: pa.Array, correlation: np.ndarray,
               diags: Diagnostics) -> pa.Table:
    pid, tid = split_global_id(c["global_tid"])
    dur = c["end_ns"] - c["start_ns"]
    diags.add("event.negative_dur", int((dur < 0).sum()), "API call with end < start; duration clamped to 0")
    diags.add("nsys.unresolved_string", names.null_count, "API call whose nameId is not in StringIds")
    n = len(row_id)
    return pa.table({
        "row_id": row_id, "process": pid, "pid": pid, "tid": tid,
        "domain": pa.array(domain, pa.string()).dictionary_encode(),
        "kind": pa.array(kind, pa.string()).dictionary_encode(),
        "name": names, "api_name": api_names,
        "start_ns": c["start_ns"], "dur_ns": np.maximum(dur, 0),
        "correlation": correlation, "external_id": np.full(n, NO_ID, dtype=np.int64),
        "cbid": np.full(n, NO_ID, dtype=np.int64),
    })
