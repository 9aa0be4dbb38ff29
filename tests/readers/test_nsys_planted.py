"""The Nsight reader on small planted exports: exact values, malformed input, .nsys-rep.

``write_export`` builds a real SQLite file with the tables and columns of an
``nsys export --type sqlite`` (schema 3.x by default, 2.x with ``schema=2``),
holding a known set of rows, so every output value can be asserted exactly.
"""
from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from taxbreak.readers import nsys_db
from taxbreak.readers.nsys import read_nsys

P1, T1 = 100, 101  # process 100, thread 101
P2, T2 = 200, 201  # process 200 reuses correlation ids of process 100
VM = 1 << 48  # nsys sets high bits of a GlobalId; the reader must mask them off


def gtid(pid: int, tid: int) -> int:
    return VM | (pid << 24) | tid


def gpid(pid: int) -> int:
    return VM | (pid << 24)


STRINGS = {
    1: "cudaLaunchKernel_v7000", 2: "cudaLaunchKernel", 3: "cuLaunchKernelEx", 4: "cudaMemcpyAsync_v3020",
    5: "cudaStreamSynchronize_v3020", 6: "cudaStreamGetCaptureInfo_v2_v11030", 7: "cudaGraphLaunch_v10000",
    8: "cudaMemsetAsync_v3020", 9: "cudaEventQuery_v3020", 10: "cudaStreamWaitEvent_v3020",
    11: "void gemm_kernel<float>(float*)", 12: "gemm_kernel", 13: "elementwise", 14: "taxbreak/run/0",
    15: "cublasSgemm_v2", 16: "main thread (nvtx)", 17: "python3",
}

# RUNTIME rows: start, end, eventClass, globalTid, correlationId, nameId
RUNTIME = [
    (1000, 1500, 0, gtid(P1, T1), 7, 1),
    (990, 1510, 67, gtid(P1, T1), 7, 2),  # 2.x backtrace copy of the row above: removed
    (2000, 2300, 1, gtid(P1, T1), 8, 3),
    (3000, 3400, 0, gtid(P1, T1), 9, 4),
    (4000, 5000, 0, gtid(P1, T1), 10, 5),
    (5100, 5200, 0, gtid(P1, T1), 13, 6),
    (1100, 1400, 0, gtid(P2, T2), 7, 1),
    (1600, 1700, 0, gtid(P2, T2), 11, 7),
    (1800, 1900, 0, gtid(P2, T2), 12, 8),
    (1950, 1960, 0, gtid(P2, T2), 14, 9),
    (1970, 1965, 0, gtid(P2, T2), 15, 10),  # end < start: clamped to 0
]
# KERNEL: start, end, deviceId, contextId, streamId, correlationId, globalPid, demangledName, shortName,
#         registersPerThread, gridX..Z, blockX..Z, staticSharedMemory, dynamicSharedMemory, graphNodeId
KERNEL = [
    (1600, 2600, 0, 1, 7, 7, gpid(P1), 11, 12, 32, 4, 2, 1, 128, 1, 1, 256, 1024, None),
    (1500, 2100, 1, 2, 13, 7, gpid(P2), 999, 13, 16, 1, 1, 1, 64, 1, 1, 0, 0, None),  # 999: not in StringIds
    (2400, 2500, 0, 1, 7, 8, gpid(P1), 13, 13, 8, 1, 1, 1, 32, 1, 1, 0, 0, None),
    (1750, 1800, 1, 2, 13, 11, gpid(P2), 13, 13, 8, 1, 1, 1, 32, 1, 1, 0, 0, 5),
]
# MEMCPY: start, end, deviceId, contextId, streamId, correlationId, globalPid, bytes, copyKind, srcKind, dstKind
MEMCPY = [(3500, 3600, 0, 1, 7, 9, gpid(P1), 4096, 1, 1, 2)]
MEMSET = [(1850, 1860, 1, 2, 13, 12, gpid(P2), 0, 512, 2)]
SYNC = [(4100, 4900, 0, 1, 7, 10, gpid(P1), 3, 0)]
# NVTX: start, end, eventType, text, globalTid, textId, domainId, category
NVTX = [
    (0, 10000, 59, None, gtid(P1, T1), 14, 0, 0),
    (500, 6000, 59, "taxbreak/decode/1", gtid(P1, T1), None, 0, 0),
    (900, 2500, 59, "aten::mm, seq = 46174, op_id = 314290", gtid(P1, T1), None, 0, 0),
    (950, 1600, 59, "aten::addmm, op_id = 5, sizes = [[2, 3], [3, 4]]", gtid(P1, T1), None, 0, 0),
    (3000, 3500, 59, "aten::view, seq = 3, op_id = 6, sizes = [[1]], input_op_ids = [(1, 0)]",
     gtid(P1, T1), None, 0, 0),
    (1000, 1300, 59, "aten::zeros, seq = 9, op_id = 7", gtid(P2, T2), None, 0, 0),
    (1200, 1250, 59, "detach_, op_id = 8", gtid(P2, T2), None, 0, 0),  # emit_nvtx, not aten:: -> a range
    (10, 20, 75, "NCCL", gtid(P2, T2), None, 2, 0),  # domain creation
    (1300, 1900, 60, "ncclAllReduce", gtid(P2, T2), None, 2, 0),  # start/end range in domain 2
    (30, None, 34, "a mark", gtid(P1, T1), None, 0, 0),
    (40, None, 59, "never popped", gtid(P1, T1), None, 0, 0),
    (50, None, 33, "my category", gtid(P1, T1), None, 0, 3),
    (60, None, 39, None, gtid(P1, T1), 16, 0, 0),  # names thread 100:101
    (70, 80, 99, "unknown type", gtid(P1, T1), None, 0, 0),
    (2000, 2200, 59, "flash_attn::_flash_attn_forward, op_id = 9", gtid(P2, T2), None, 0, 0),  # custom op
    (2300, 2400, 59, "FSDP::pre_forward (blocks.3), op_id = 10", gtid(P2, T2), None, 0, 0),  # record_function
    (2500, 2600, 59, "my::scope", gtid(P2, T2), None, 0, 0),  # plain NVTX range, not from emit_nvtx
]
CUBLAS = [(1010, 1400, 29, gtid(P1, T1), 15)]


def write_export(path: Path, schema: int = 3, with_enums: bool = True, with_gpu: bool = True) -> Path:
    """A small Nsight Systems SQLite export with the rows above."""
    path.unlink(missing_ok=True)
    con = sqlite3.connect(path)
    meta_table = "META_DATA_EXPORT" if schema == 3 else "EXPORT_META_DATA"
    con.execute(f"CREATE TABLE {meta_table} (name TEXT NOT NULL, value TEXT)")
    con.executemany(f"INSERT INTO {meta_table} VALUES (?, ?)", [
        ("EXPORT_PRODUCT_VERSION", "2026.2.1.210" if schema == 3 else "2022.2.1.31"),
        ("EXPORT_SCHEMA_VERSION", "3.25.0" if schema == 3 else "2.9.1")])
    make_table(con, "StringIds", "id INTEGER PRIMARY KEY, value TEXT NOT NULL", list(STRINGS.items()))
    # 'name' is the extra column users add (the pipit saxpy export has it); placed first on purpose.
    make_table(con, "CUPTI_ACTIVITY_KIND_RUNTIME", "name TEXT, start INTEGER, end INTEGER, eventClass INTEGER, "
           "globalTid INTEGER, correlationId INTEGER, nameId INTEGER, returnValue INTEGER",
           [("x",) + r + (0,) for r in RUNTIME])
    dev = "start INTEGER, end INTEGER, deviceId INTEGER, contextId INTEGER, streamId INTEGER, " \
          "correlationId INTEGER, globalPid INTEGER, "
    make_table(con, "CUPTI_ACTIVITY_KIND_KERNEL", dev + "demangledName INTEGER, shortName INTEGER, "
           "registersPerThread INTEGER, gridX INTEGER, gridY INTEGER, gridZ INTEGER, blockX INTEGER, "
           "blockY INTEGER, blockZ INTEGER, staticSharedMemory INTEGER, dynamicSharedMemory INTEGER, "
           "graphNodeId INTEGER", KERNEL)
    make_table(con, "CUPTI_ACTIVITY_KIND_MEMCPY", dev + "bytes INTEGER, copyKind INTEGER, srcKind INTEGER, "
           "dstKind INTEGER", MEMCPY)
    make_table(con, "CUPTI_ACTIVITY_KIND_MEMSET", dev + "value INTEGER, bytes INTEGER, memKind INTEGER", MEMSET)
    make_table(con, "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", dev + "syncType INTEGER, eventId INTEGER", SYNC)
    make_table(con, "NVTX_EVENTS", "start INTEGER, end INTEGER, eventType INTEGER, text TEXT, globalTid INTEGER, "
           "textId INTEGER, domainId INTEGER, category INTEGER", NVTX)
    make_table(con, "CUBLAS_EVENTS", "start INTEGER, end INTEGER, eventClass INTEGER, globalTid INTEGER, "
           "nameId INTEGER", CUBLAS)
    make_table(con, "ThreadNames", "nameId INTEGER, priority INTEGER, globalTid INTEGER", [(17, 0, gtid(P2, T2))])
    make_table(con, "PROCESSES", "globalPid INTEGER, pid INTEGER, name TEXT", [(gpid(P1), P1, "python3")])
    make_table(con, "TARGET_INFO_SESSION_START_TIME", "utcEpochNs INTEGER, utcTime TEXT",
           [(1_700_000_000_000_000_000, "2023-11-14T22:13:20")])
    if with_gpu:
        make_table(con, "TARGET_INFO_GPU", "vmId INTEGER, id INTEGER, name TEXT, smCount INTEGER",
               [(VM, 1, "NVIDIA H200", 132), (VM, 0, "NVIDIA H100 80GB HBM3", 132)])
    if with_enums:  # shuffled ids: the reader must use the table, not the defaults
        make_table(con, "ENUM_NSYS_EVENT_CLASS", "id INTEGER, name TEXT, label TEXT",
               [(0, "TRACE_PROCESS_EVENT_CUDA_RUNTIME", "CUDA runtime"),
                (1, "TRACE_PROCESS_EVENT_CUDA_DRIVER", "CUDA driver"),
                (67, "TRACE_PROCESS_EVENT_CUDABACKTRACE", "CUDA backtrace")])
    con.commit()
    con.close()
    return path


def make_table(con: sqlite3.Connection, name: str, columns: str, rows: list[tuple]) -> None:
    con.execute(f"CREATE TABLE {name} ({columns})")
    if rows:
        con.executemany(f"INSERT INTO {name} VALUES ({', '.join('?' * len(rows[0]))})", rows)


@pytest.fixture
def planted(tmp_path):
    return read_nsys(write_export(tmp_path / "planted.sqlite"))


def _rows(table, columns):
    """Rows as tuples of Python values (null -> None; dictionary columns decoded)."""
    return [tuple(row[c] for c in columns) for row in table.select(list(columns)).to_pylist()]


# --- api_calls ----------------------------------------------------------------


def test_api_calls_exact(planted):
    got = sorted(_rows(planted.api_calls, ("process", "pid", "tid", "domain", "kind", "api_name",
                                           "start_ns", "dur_ns", "correlation")))
    assert got == sorted([
        (P1, P1, T1, "cuda_runtime", "launch", "cudaLaunchKernel", 1000, 500, 7),
        (P1, P1, T1, "cuda_driver", "launch", "cuLaunchKernelEx", 2000, 300, 8),
        (P1, P1, T1, "cuda_runtime", "memcpy", "cudaMemcpyAsync", 3000, 400, 9),
        (P1, P1, T1, "cuda_runtime", "sync", "cudaStreamSynchronize", 4000, 1000, 10),
        (P1, P1, T1, "cuda_runtime", "other", "cudaStreamGetCaptureInfo", 5100, 100, 13),
        (P2, P2, T2, "cuda_runtime", "launch", "cudaLaunchKernel", 1100, 300, 7),
        (P2, P2, T2, "cuda_runtime", "graph_launch", "cudaGraphLaunch", 1600, 100, 11),
        (P2, P2, T2, "cuda_runtime", "memset", "cudaMemsetAsync", 1800, 100, 12),
        (P2, P2, T2, "cuda_runtime", "other", "cudaEventQuery", 1950, 10, 14),
        (P2, P2, T2, "cuda_runtime", "other", "cudaStreamWaitEvent", 1970, 0, 15),
        (P1, P1, T1, "cublas", "library", "cublasSgemm", 1010, 390, -1),
    ])
    names = planted.api_calls.column("name").to_pylist()
    assert "cudaLaunchKernel_v7000" in names and "cudaLaunchKernel" not in names  # the real row was kept
    assert set(planted.api_calls.column("cbid").to_pylist()) == {-1}


def test_duplicates_and_clamps_are_counted(planted):
    d = planted.diagnostics
    assert d.count("nsys.duplicate_launch") == 1
    assert d.count("nsys.duplicate_api") == 0
    assert d.count("event.negative_dur") == 1
    assert d.count("nsys.missing_table") == 1  # CUDNN_EVENTS
    assert "CUDNN_EVENTS" in d.items["nsys.missing_table"].example


def test_schema2_defaults_without_enum_tables(tmp_path):
    tables = read_nsys(write_export(tmp_path / "old.sqlite", schema=2, with_enums=False))
    assert tables.meta.format_version == "2.9.1"
    assert tables.meta.producer_version == "2022.2.1.31"
    assert tables.diagnostics.count("nsys.duplicate_launch") == 1
    domains = dict(zip(tables.api_calls.column("api_name").to_pylist(), tables.api_calls.column("domain").to_pylist()))
    assert domains["cuLaunchKernelEx"] == "cuda_driver"
    assert domains["cudaMemcpyAsync"] == "cuda_runtime"


def test_unpaired_backtrace_row_is_kept_with_its_name_domain(tmp_path):
    path = write_export(tmp_path / "bt.sqlite")
    con = sqlite3.connect(path)
    con.execute("INSERT INTO StringIds VALUES (40, 'cuMemAlloc_v2')")
    con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid, correlationId, nameId) "
                f"VALUES (7000, 7100, 67, {gtid(P1, T1)}, 99, 40)")
    con.commit()
    con.close()
    tables = read_nsys(path)
    row = [r for r in tables.api_calls.to_pylist() if r["correlation"] == 99]
    assert [(r["api_name"], r["domain"], r["kind"]) for r in row] == [("cuMemAlloc", "cuda_driver", "other")]
    assert tables.diagnostics.count("nsys.duplicate_launch") == 1


# --- device_activities ------------------------------------------------------------


def test_device_activities_exact(planted):
    got = sorted(_rows(planted.device_activities, (
        "process", "kind", "name", "device", "stream", "context", "start_ns", "dur_ns", "correlation",
        "grid_x", "grid_y", "block_x", "registers", "shared_mem_bytes", "bytes", "graph_node_id")))
    assert got == sorted([
        (P1, "kernel", "void gemm_kernel<float>(float*)", 0, 7, 1, 1600, 1000, 7, 4, 2, 128, 32, 1280, -1, -1),
        (P2, "kernel", "elementwise", 1, 13, 2, 1500, 600, 7, 1, 1, 64, 16, 0, -1, -1),  # shortName fallback
        (P1, "kernel", "elementwise", 0, 7, 1, 2400, 100, 8, 1, 1, 32, 8, 0, -1, -1),
        (P2, "kernel", "elementwise", 1, 13, 2, 1750, 50, 11, 1, 1, 32, 8, 0, -1, 5),
        (P1, "memcpy", "Memcpy HtoD (Pinned -> Device)", 0, 7, 1, 3500, 100, 9, -1, -1, -1, -1, -1, 4096, -1),
        (P2, "memset", "Memset (Device)", 1, 13, 2, 1850, 10, 12, -1, -1, -1, -1, -1, 512, -1),
        (P1, "sync", "Stream Sync", 0, 7, 1, 4100, 800, 10, -1, -1, -1, -1, -1, -1, -1),
    ])


def test_kernels_join_launches_per_process(planted):
    """Correlation 7 occurs in both processes: the (process, correlation) join pairs each kernel with its own launch."""
    api = planted.api_calls.to_pandas()
    kernels = planted.device_activities.to_pandas().query("kind == 'kernel'")
    joined = kernels.merge(api, on=["process", "correlation"], suffixes=("_k", "_a"))
    assert len(joined) == 4
    assert sorted(zip(joined.process, joined.start_ns_a)) == [(P1, 1000), (P1, 2000), (P2, 1100), (P2, 1600)]
    naive = kernels.merge(api, on="correlation")
    assert len(naive) == 6  # the two correlation-7 kernels each match two launches


# --- NVTX: ops, ranges, metadata ------------------------------------------------


def test_dispatcher_op_ranges_become_ops(planted):
    got = sorted(_rows(planted.host_events, ("name", "pid", "tid", "kind", "start_ns", "dur_ns", "depth",
                                             "sequence_nr", "input_dims")))
    assert got == sorted([
        ("aten::mm", P1, T1, "op", 900, 1600, 0, 46174, None),
        ("aten::addmm", P1, T1, "op", 950, 650, 1, -1, "[[2, 3], [3, 4]]"),
        ("aten::view", P1, T1, "op", 3000, 500, 0, 3, "[[1]]"),
        ("aten::zeros", P2, T2, "op", 1000, 300, 0, 9, None),
        ("flash_attn::_flash_attn_forward", P2, T2, "op", 2000, 200, 0, -1, None),
    ])
    ops = planted.host_events.to_pandas().set_index("name")
    assert ops.loc["aten::addmm", "parent"] == ops.loc["aten::mm", "row_id"]
    assert ops.loc["aten::mm", "parent"] == -1


def test_other_ranges_keep_their_names_and_domains(planted):
    got = sorted(_rows(planted.ranges, ("name", "source", "pid", "tid", "start_ns", "dur_ns", "depth", "domain")),
                 key=lambda r: r[4])
    assert got == [
        ("taxbreak/run/0", "nvtx", P1, T1, 0, 10000, 0, None),  # name from StringIds via textId
        ("taxbreak/decode/1", "nvtx", P1, T1, 500, 5500, 1, None),
        ("detach_, op_id = 8", "nvtx", P2, T2, 1200, 50, 0, None),
        ("ncclAllReduce", "nvtx", P2, T2, 1300, 600, 0, "NCCL"),
        ("FSDP::pre_forward (blocks.3), op_id = 10", "nvtx", P2, T2, 2300, 100, 0, None),
        ("my::scope", "nvtx", P2, T2, 2500, 100, 0, None),
    ]


def test_nvtx_records_without_rows_are_counted(planted):
    d = planted.diagnostics
    assert d.count("nsys.empty_range") == 2  # the mark and the range never popped
    assert d.count("event.metadata") == 3  # domain creation, category, thread name
    assert d.count("event.unknown_category") == 1
    assert planted.meta.extra["nvtx_domains"] == {"2": "NCCL"}
    assert planted.meta.extra["nvtx_categories"] == {"3": "my category"}


# --- meta and accounting ------------------------------------------------------------


def test_meta(planted):
    m = planted.meta
    assert (m.source_format, m.format_version, m.time_base) == ("nsys", "3.25.0", "nsys_session")
    assert m.origin_ns == 1_700_000_000_000_000_000
    assert [d["id"] for d in m.devices] == [0, 1]
    assert m.device_names == ["NVIDIA H100 80GB HBM3", "NVIDIA H200"]
    assert m.devices[0]["numSms"] == 132
    assert m.process_names == {str(P1): "python3"}
    assert m.thread_names == {f"{P2}:{T2}": "python3", f"{P1}:{T1}": "main thread (nvtx)"}


def test_accounting_covers_every_input_row(planted):
    m = planted.meta
    n_input = len(RUNTIME) + len(KERNEL) + len(MEMCPY) + len(MEMSET) + len(SYNC) + len(NVTX) + len(CUBLAS)
    assert m.input_events == n_input
    assert m.event_counts == {"host_events": 5, "api_calls": 11, "device_activities": 7, "ranges": 6,
                              "flows": 0, "metadata": 3, "dropped": 4}
    assert sum(m.event_counts.values()) == n_input
    ids = np.concatenate([planted.table(t).column("row_id").to_numpy()
                          for t in ("api_calls", "device_activities", "host_events", "ranges")])
    assert len(np.unique(ids)) == len(ids)


def test_missing_gpu_table_falls_back_to_device_ids(tmp_path):
    tables = read_nsys(write_export(tmp_path / "nogpu.sqlite", with_gpu=False))
    assert tables.meta.devices == [{"id": 0, "source": "activity tables"}, {"id": 1, "source": "activity tables"}]
    assert tables.diagnostics.count("trace.no_device_info") == 1


def test_minimal_export_with_only_strings_and_kernels(tmp_path):
    path = tmp_path / "min.sqlite"
    con = sqlite3.connect(path)
    make_table(con, "StringIds", "id INTEGER PRIMARY KEY, value TEXT", [(1, "k")])
    make_table(con, "CUPTI_ACTIVITY_KIND_KERNEL", "start INTEGER, end INTEGER, correlationId INTEGER, "
           "globalPid INTEGER, deviceId INTEGER, shortName INTEGER", [(5, 9, 1, gpid(P1), 0, 1)])
    con.commit()
    con.close()
    tables = read_nsys(path)
    assert _rows(tables.device_activities, ("name", "start_ns", "dur_ns", "process", "stream", "registers")) == [
        ("k", 5, 4, P1, -1, -1)]
    assert tables.meta.format_version == ""
    assert tables.meta.origin_ns is None
    # RUNTIME, MEMCPY, MEMSET, SYNCHRONIZATION, NVTX_EVENTS, CUBLAS_EVENTS, CUDNN_EVENTS
    assert tables.diagnostics.count("nsys.missing_table") == 7
    assert tables.meta.event_counts["device_activities"] == tables.meta.input_events == 1


def test_chunked_fetch_gives_the_same_tables(tmp_path, monkeypatch):
    path = write_export(tmp_path / "chunks.sqlite")
    whole = read_nsys(path)
    monkeypatch.setattr(nsys_db, "FETCH_ROWS", 3)  # NVTX_EVENTS (14 rows) is read in 5 chunks
    chunked = read_nsys(path)
    for name in ("api_calls", "device_activities", "host_events", "ranges"):
        assert chunked.table(name).equals(whole.table(name)), name
    assert chunked.meta.event_counts == whole.meta.event_counts


def test_path_with_uri_special_characters(tmp_path):
    folder = tmp_path / "a b#c"
    folder.mkdir()
    tables = read_nsys(write_export(folder / "run?x%20.sqlite"))
    assert tables.api_calls.num_rows == 11


def test_any_table_may_be_absent(tmp_path):
    path = write_export(tmp_path / "sparse.sqlite")
    con = sqlite3.connect(path)
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "NVTX_EVENTS", "CUPTI_ACTIVITY_KIND_RUNTIME", "StringIds"):
        con.execute(f"DROP TABLE {table}")
    con.commit()
    con.close()
    tables = read_nsys(path)
    assert tables.counts() == {"host_events": 0, "api_calls": 1, "device_activities": 3, "ranges": 0, "flows": 0}
    assert tables.api_calls.column("name").to_pylist() == [None]  # the cuBLAS nameId cannot be resolved
    assert tables.diagnostics.count("nsys.unresolved_string") == 1
    assert tables.diagnostics.count("nsys.missing_table") == 4  # KERNEL, NVTX_EVENTS, RUNTIME, CUDNN_EVENTS


# --- the synthetic writer's exports ---------------------------------------------------


def test_reads_exports_of_the_synthetic_writer(tmp_path):
    """taxbreak.synth.write_nsys writes planted tables as an export; API calls, kernels and
    ops come back unchanged (Python frames and annotations come back as NVTX ranges)."""
    from taxbreak.synth.planted import build, random_spec
    from taxbreak.synth.write_nsys import write_nsys

    src = build(random_spec(np.random.default_rng(0))).tables
    got = read_nsys(write_nsys(src, tmp_path / "synth.sqlite"))
    api_cols = ("pid", "tid", "domain", "kind", "api_name", "start_ns", "dur_ns", "correlation")
    assert sorted(_rows(got.api_calls, api_cols)) == sorted(_rows(src.api_calls, api_cols))
    dev_cols = ("process", "kind", "name", "device", "stream", "start_ns", "dur_ns", "correlation",
                "grid_x", "block_x", "registers", "shared_mem_bytes")
    assert sorted(_rows(got.device_activities, dev_cols)) == sorted(_rows(src.device_activities, dev_cols))
    # depth differs by design: in the source, ops nest in Python frames and annotations,
    # which an export carries as NVTX ranges (ranges and ops nest separately)
    op_cols = ("pid", "tid", "name", "start_ns", "dur_ns")
    src_ops = src.host_events.filter(pc.equal(src.host_events.column("kind").cast(pa.string()), "op"))
    assert sorted(_rows(got.host_events, op_cols)) == sorted(_rows(src_ops, op_cols))
    assert got.ranges.num_rows == src.host_events.num_rows - src_ops.num_rows
    assert sum(got.meta.event_counts.values()) == got.meta.input_events
