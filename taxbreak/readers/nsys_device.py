"""Kernels, memcpys, memsets and synchronizations -> ``device_activities``.

Input columns (by name) of ``CUPTI_ACTIVITY_KIND_{KERNEL,MEMCPY,MEMSET,SYNCHRONIZATION}``:
``start``, ``end``, ``deviceId``, ``contextId``, ``streamId``, ``correlationId``,
``globalPid``; kernels add ``demangledName``/``shortName`` (StringIds), grid,
block, ``registersPerThread``, ``static``/``dynamicSharedMemory``, ``graphId``,
``graphNodeId``; memcpy ``bytes``, ``copyKind``, ``srcKind``, ``dstKind``; memset
``bytes``, ``memKind``; sync ``syncType``.

``process`` = (globalPid >> 24) & 0xFFFFFF, the host pid that launched the
activity, so kernels join their launch calls on (process, correlation):
correlation ids repeat across the processes of one export (mfu_2gpu_before:
4,280 naive matches for 4,010 kernels, 3,986 pid-aware).

    KERNEL row                                         device_activities row
    demangledName -> "void at::native::elementwise…"  name (shortName if unresolved), kind kernel
    staticSharedMemory 0, dynamicSharedMemory 1024     shared_mem_bytes 1024
    MEMCPY copyKind 1, srcKind 0, dstKind 2            name "Memcpy HtoD (Pageable -> Device)"
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from taxbreak.trace.diagnostics import Diagnostics
from taxbreak.trace.schema import NO_ID

from . import nsys_schema as ns
from .nsys_db import NsysDb, constant_strings, split_global_id, take_strings, unique_inverse

_INT_FIELDS = ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "registers",
               "shared_mem_bytes", "bytes", "graph_id", "graph_node_id")


def read_device_activities(db: NsysDb, diags: Diagnostics) -> pa.Table:
    """All four activity tables, in the order kernel, memcpy, memset, sync."""
    readers = ((ns.KERNEL, ns.KERNEL_COLS, "kernel", _kernel_fields),
               (ns.MEMCPY, ns.MEMCPY_COLS, "memcpy", _memcpy_fields),
               (ns.MEMSET, ns.MEMSET_COLS, "memset", _memset_fields),
               (ns.SYNC, ns.SYNC_COLS, "sync", _sync_fields))
    parts = []
    for table, specs, kind, fields in readers:
        if not db.has(table):
            diags.add("nsys.missing_table", 1, f"{table} absent (no {kind} activity traced)")
        c = db.fetch(table, specs)
        db.tally.read += len(c["start_ns"])
        parts.append(_activity_table(db, c, kind, fields(db, c, diags), diags))
    return pa.concat_tables(parts)


def device_ids(table: pa.Table) -> list[int]:
    """Distinct device ids that occur in a ``device_activities`` table."""
    ids = np.unique(table.column("device").to_numpy())
    return [int(d) for d in ids if d >= 0]


def _activity_table(db: NsysDb, c: dict, kind: str, fields: dict, diags: Diagnostics) -> pa.Table:
    n = len(c["start_ns"])
    dur = c["end_ns"] - c["start_ns"]
    diags.add("event.negative_dur", int((dur < 0).sum()), f"{kind} with end < start; duration clamped to 0")
    process, _ = split_global_id(c["global_pid"])
    none = np.full(n, NO_ID, dtype=np.int64)
    columns = {
        "row_id": db.row_ids(n), "process": process,
        "kind": constant_strings(n, kind),
        "name": fields.pop("name"), "device": c["device"], "stream": c["stream"], "context": c["context"],
        "start_ns": c["start_ns"], "dur_ns": np.maximum(dur, 0),
        "correlation": c["correlation"], "external_id": none,
    }
    columns.update({f: fields.get(f, none) for f in _INT_FIELDS})
    return pa.table(columns)


def _kernel_fields(db: NsysDb, c: dict, diags: Diagnostics) -> dict:
    name_ids = np.where(c["demangled_id"] >= 0, c["demangled_id"], c["short_id"])
    uniq, inverse = unique_inverse(np.stack([name_ids, c["short_id"]], axis=1))
    inverse = inverse.ravel()
    names = db.strings.lookup(uniq[:, 0]) if len(uniq) else np.empty(0, dtype=object)
    fallback = db.strings.lookup(uniq[:, 1]) if len(uniq) else np.empty(0, dtype=object)
    missing = np.array([s is None for s in names], dtype=bool)
    names[missing] = fallback[missing]  # demangledName unresolved: shortName
    out = take_strings(names, inverse)
    diags.add("nsys.unresolved_string", out.null_count, "kernel whose demangledName and shortName are not in StringIds")
    smem = _sum_known(c["static_smem"], c["dynamic_smem"])
    fields = {k: c[k] for k in ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
                                "registers", "graph_id", "graph_node_id")}
    return {"name": out, "shared_mem_bytes": smem, **fields}


def _memcpy_fields(db: NsysDb, c: dict, diags: Diagnostics) -> dict:
    mem_kinds = _mem_kind_labels(db)
    combo = np.stack([c["copy_kind"], c["src_kind"], c["dst_kind"]], axis=1)
    uniq, inverse = unique_inverse(combo)
    names = np.array([_memcpy_name(int(k), int(s), int(d), mem_kinds) for k, s, d in uniq], dtype=object)
    return {"name": take_strings(names, inverse.ravel()), "bytes": c["bytes"], "graph_node_id": c["graph_node_id"]}


def _memset_fields(db: NsysDb, c: dict, diags: Diagnostics) -> dict:
    mem_kinds = _mem_kind_labels(db)
    uniq, inverse = unique_inverse(c["mem_kind"])
    names = np.array([f"Memset ({mem_kinds.get(int(k), 'Unknown')})" for k in uniq], dtype=object)
    return {"name": take_strings(names, inverse.ravel()), "bytes": c["bytes"], "graph_node_id": c["graph_node_id"]}


def _sync_fields(db: NsysDb, c: dict, diags: Diagnostics) -> dict:
    uniq, inverse = unique_inverse(c["sync_type"])
    names = np.array([ns.SYNC_NAMES.get(int(k), "Unknown Sync") for k in uniq], dtype=object)
    return {"name": take_strings(names, inverse.ravel())}


def _memcpy_name(copy_kind: int, src: int, dst: int, mem_kinds: dict[int, str]) -> str:
    """Kineto's memcpy name, e.g. ``Memcpy DtoD (Device -> Device)``."""
    direction = ns.MEMCPY_DIRECTIONS.get(copy_kind, "Unknown")
    if src < 0 and dst < 0:
        return f"Memcpy {direction}"
    return f"Memcpy {direction} ({mem_kinds.get(src, 'Unknown')} -> {mem_kinds.get(dst, 'Unknown')})"


def _mem_kind_labels(db: NsysDb) -> dict[int, str]:
    labels = dict(ns.MEM_KINDS)
    if {"id", "label"} <= set(db.columns(ns.ENUM_MEM_KIND)):
        sql = f'SELECT CAST(id AS INTEGER), CAST(label AS TEXT) FROM "{ns.ENUM_MEM_KIND}" WHERE id IS NOT NULL'
        for kind_id, label in db.query(sql, ns.ENUM_MEM_KIND):  # any storage class: CAST, never int()
            if label is not None:
                labels[kind_id] = label
    return labels


def _sum_known(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a + b, treating one missing (-1) part as 0 and both missing as -1."""
    both_missing = (a < 0) & (b < 0)
    return np.where(both_missing, NO_ID, np.maximum(a, 0) + np.maximum(b, 0))
