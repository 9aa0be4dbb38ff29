"""Benchmark-sized synthetic Nsight Systems SQLite exports, written in chunks.

``write_big_nsys(path, n_rows)`` writes an export of ``n_rows`` kernel + CUDA API rows (half
``cudaLaunchKernel_v7000`` calls in ``CUPTI_ACTIVITY_KIND_RUNTIME``, half kernels in
``CUPTI_ACTIVITY_KIND_KERNEL``, joined on ``correlationId``), shaped like an ``emit_nvtx``
profile of LLM decode on one H100: each launch inside an NVTX push/pop range named as
``emit_nvtx`` names ATen ops (``aten::linear, seq = 7, op_id = 7``), and every
``LAUNCHES_PER_STEP`` launches an NVTX range ``taxbreak/decode/<i>`` (``taxbreak/prefill/0``
first). Kernels run on stream 7 in launch order, each starting after its launch returns and
after the previous kernel ends. Tables and columns are those of ``write_nsys.SCHEMA``.

Times, ids and names of one chunk are computed with numpy and inserted with one
``executemany`` per table, so memory stays flat at any size (10 M rows for the benchmark).
"""
from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np

from .bigtrace import H100, LAYER_OPS
from .write_nsys import NVTX_PUSH_POP, SCHEMA

PID = 4242
GLOBAL_TID = (PID << 24) | PID
GLOBAL_PID = PID << 24
STREAM = 7
LAUNCHES_PER_STEP = 200
CHUNK_LAUNCHES = 250_000
LAUNCH_NAME = "cudaLaunchKernel_v7000"
T0_NS = 1_000_000_000


def write_big_nsys(path: str | Path, n_rows: int, seed: int = 0, nvtx_ops: bool = True) -> dict:
    """Write an export of ``n_rows`` kernel + API rows to ``path`` (replaced if present).

    Returns counts: ``launches``, ``kernels``, ``nvtx`` rows and ``steps``.
    """
    out = Path(path)
    out.unlink(missing_ok=True)
    n_launches = max(1, n_rows // 2)
    rng = np.random.default_rng(seed)
    counts = {"launches": 0, "kernels": 0, "nvtx": 0, "steps": 0}
    con = sqlite3.connect(out)
    try:
        _create(con)
        state = {"host_ns": T0_NS, "gpu_free_ns": 0}
        for first in range(0, n_launches, CHUNK_LAUNCHES):
            n = min(CHUNK_LAUNCHES, n_launches - first)
            _write_chunk(con, rng, first, n, state, nvtx_ops, counts)
        con.commit()
    finally:
        con.close()
    return counts


def _create(con: sqlite3.Connection) -> None:
    con.execute("PRAGMA journal_mode=OFF")
    con.execute("PRAGMA synchronous=OFF")
    for table, columns in SCHEMA.items():
        con.execute(f'CREATE TABLE "{table}" ({columns})')
    strings = [(1, LAUNCH_NAME)] + [(2 + i, op[2]) for i, op in enumerate(LAYER_OPS)]
    con.executemany('INSERT INTO "StringIds" VALUES (?, ?)', strings)
    con.executemany('INSERT INTO "META_DATA_EXPORT" VALUES (?, ?)',
                    [("EXPORT_SCHEMA_VERSION", "3.25.0"), ("EXPORT_PRODUCT_VERSION", "2026.2.1.210")])
    con.execute('INSERT INTO "TARGET_INFO_GPU" VALUES (?, ?, ?, ?, ?)',
                (0, H100["name"], H100["computeMajor"], H100["computeMinor"], H100["totalGlobalMem"]))
    con.execute('INSERT INTO "TARGET_INFO_SYSTEM_ENV" VALUES (?, ?)', ("CudaDriverVersion", "12090"))


def _host_times(rng: np.random.Generator, n: int, host_ns: int) -> dict[str, np.ndarray]:
    """Op range, launch call inside it, and the gap to the next op (ns), for ``n`` launches."""
    op_dur = rng.integers(9_000, 16_000, n)
    launch_off = rng.integers(2_000, 4_000, n)
    launch_dur = rng.integers(3_000, 5_500, n)
    gap = rng.integers(500, 2_000, n)
    period = op_dur + gap
    op_start = host_ns + np.concatenate(([0], np.cumsum(period)[:-1]))
    launch_start = op_start + launch_off
    return {"op_start": op_start, "op_end": op_start + op_dur, "launch_start": launch_start,
            "launch_end": launch_start + launch_dur, "next_host_ns": int(op_start[-1] + period[-1])}


def _kernel_times(rng: np.random.Generator, launch_end: np.ndarray, gpu_free_ns: int):
    """Kernel start/end on one stream: after its launch returns and after the previous kernel.

    ``start_i = max(ready_i, start_{i-1} + dur_{i-1})`` in closed form: with ``C`` the
    exclusive running sum of durations, ``start - C`` is the running maximum of ``ready - C``.
    """
    dur = rng.integers(2_000, 20_000, launch_end.size)  # mean below the host period: host-bound, as decode is
    ready = launch_end + rng.integers(1_000, 3_000, launch_end.size)
    ready[0] = max(int(ready[0]), gpu_free_ns)
    before = np.concatenate(([0], np.cumsum(dur)[:-1]))
    start = before + np.maximum.accumulate(ready - before)
    return start, start + dur


def _write_chunk(con, rng, first: int, n: int, state: dict, nvtx_ops: bool, counts: dict) -> None:
    host = _host_times(rng, n, state["host_ns"])
    k_start, k_end = _kernel_times(rng, host["launch_end"], state["gpu_free_ns"])
    state["host_ns"], state["gpu_free_ns"] = host["next_host_ns"], int(k_end[-1])
    index = np.arange(first, first + n)
    op = index % len(LAYER_OPS)
    correlation = index + 1
    _insert(con, "CUPTI_ACTIVITY_KIND_RUNTIME", host["launch_start"], host["launch_end"], np.zeros(n, np.int64),
            np.full(n, GLOBAL_TID), correlation, np.ones(n, np.int64), np.zeros(n, np.int64))
    _insert(con, "CUPTI_ACTIVITY_KIND_KERNEL", *_kernel_columns(k_start, k_end, correlation, op))
    counts["launches"] += n
    counts["kernels"] += n
    if nvtx_ops:
        _insert_nvtx(con, host["op_start"], host["op_end"], _op_texts(op, index))
        counts["nvtx"] += n
    _write_steps(con, first, n, host, k_end, counts)


def _kernel_columns(start, end, correlation, op) -> list[np.ndarray]:
    n = start.size
    table = np.array([(2 + i, *g, *b, r, s) for i, (_, _, _, g, b, r, s) in enumerate(LAYER_OPS)], np.int64)
    per = table[op]
    zeros = np.zeros(n, np.int64)
    return [start, end, zeros, np.ones(n, np.int64), np.full(n, STREAM), correlation, np.full(n, GLOBAL_PID),
            per[:, 0], per[:, 0], *(per[:, j] for j in range(1, 9)), zeros]


def _op_texts(op: np.ndarray, index: np.ndarray) -> list[str]:
    """``emit_nvtx`` names: ``aten::linear, seq = 7, op_id = 7`` (one template per op kind)."""
    names = np.array([layer[1] for layer in LAYER_OPS], dtype=object)[op]
    return [f"{name}, seq = {i}, op_id = {i}" for name, i in zip(names.tolist(), index.tolist())]


def _write_steps(con, first: int, n: int, host: dict, k_end: np.ndarray, counts: dict) -> None:
    """A step range from its first op's start to its last op's end, for every step that starts here."""
    index = np.arange(first, first + n)
    starts = np.flatnonzero(index % LAUNCHES_PER_STEP == 0)
    if starts.size == 0:
        return
    ends = np.minimum(starts + LAUNCHES_PER_STEP, n) - 1  # a step cut by the chunk ends at its last op here
    step = index[starts] // LAUNCHES_PER_STEP
    texts = ["taxbreak/prefill/0" if s == 0 else f"taxbreak/decode/{s}" for s in step.tolist()]
    _insert_nvtx(con, host["op_start"][starts], np.maximum(host["op_end"][ends], k_end[ends]), texts)
    counts["nvtx"] += starts.size
    counts["steps"] += starts.size


def _insert_nvtx(con, start: np.ndarray, end: np.ndarray, texts: list[str]) -> None:
    n = start.size
    zeros = np.zeros(n, np.int64)
    gtid = np.full(n, GLOBAL_TID)
    con.executemany('INSERT INTO "NVTX_EVENTS" VALUES (?,?,?,?,?,?,?,?,?,?,?)',
                    zip(start.tolist(), end.tolist(), [NVTX_PUSH_POP] * n, zeros.tolist(), zeros.tolist(),
                        zeros.tolist(), texts, gtid.tolist(), gtid.tolist(), [None] * n, zeros.tolist()))


def _insert(con, table: str, *columns: np.ndarray) -> None:
    marks = ",".join("?" * len(columns))
    con.executemany(f'INSERT INTO "{table}" VALUES ({marks})', zip(*(c.tolist() for c in columns)))
