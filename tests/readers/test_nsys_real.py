"""The Nsight reader on the real exports in ../shared/traces (schemas 2.9.1, 3.24.14, 3.25.0).

Expected counts are computed independently with plain SQL on the same files.
"""
from __future__ import annotations

import re
import sqlite3

import numpy as np
import pandas as pd
import pytest

from taxbreak.readers.nsys import read_nsys
from taxbreak.trace.schema import SCHEMAS

EXPORTS = {
    "saxpy": "pipit/pipit/tests/data/saxpy-mpi-cuda_nsys_perlmutter0.sqlite",
    "mfu_before": "nsys-ai/tests/fixtures/mfu_2gpu_before.sqlite",
    "mfu_after": "nsys-ai/tests/fixtures/mfu_2gpu_after.sqlite",
    "mock": "nsys-ai/tests/fixtures/mock.sqlite",
}
DEVICE_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
                 "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION")
NVTX_NAME = "COALESCE(n.text, (SELECT value FROM StringIds s WHERE s.id = n.textId), '')"
NVTX_RANGE = "n.eventType IN (59, 60) AND n.end IS NOT NULL"
# dispatcher ops written by emit_nvtx: aten::*, or ns::op followed by ", seq = " / ", op_id = "
OP_REGEX = r"aten::|[A-Za-z_]\w*::[A-Za-z_]\w*(\.\w+)?, (seq|op_id) = "
IS_OP = f"{NVTX_NAME} REGEXP '{OP_REGEX}'"
# schema 2.x: an eventClass-67 (CUDA backtrace) row that repeats a real row of the same thread and correlation
BACKTRACE_COPY = ("r.eventClass = 67 AND EXISTS (SELECT 1 FROM CUPTI_ACTIVITY_KIND_RUNTIME o WHERE "
                  "o.eventClass != 67 AND o.correlationId = r.correlationId AND o.globalTid = r.globalTid)")
LAUNCH_NAME = ("(name GLOB 'cudaLaunchKernel*' OR name GLOB 'cuLaunchKernel*' OR "
               "name GLOB 'cudaLaunchCooperativeKernel*')")

_CACHE: dict[str, object] = {}


def _tables(shared_traces, key):
    if key not in _CACHE:
        _CACHE[key] = read_nsys(shared_traces / EXPORTS[key])
    return _CACHE[key]


def _sql(shared_traces, key, sql):
    con = sqlite3.connect(f"file:{shared_traces / EXPORTS[key]}?mode=ro", uri=True)
    con.text_factory = lambda b: b.decode("utf-8", "replace")
    con.create_function("regexp", 2, lambda pattern, text: re.match(pattern, text) is not None, deterministic=True)
    try:
        return con.execute(sql).fetchone()[0]
    finally:
        con.close()


def _has(shared_traces, key, table):
    return _sql(shared_traces, key, f"SELECT count(*) FROM sqlite_master WHERE name = '{table}'") > 0


def _count(shared_traces, key, table, where="1"):
    if not _has(shared_traces, key, table):
        return 0
    return _sql(shared_traces, key, f"SELECT count(*) FROM {table} AS n WHERE {where}")


def _expected_counts(shared_traces, key) -> dict[str, int]:
    api = _count(shared_traces, key, "CUPTI_ACTIVITY_KIND_RUNTIME")
    api -= _sql(shared_traces, key, f"SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r WHERE {BACKTRACE_COPY}")
    api += _count(shared_traces, key, "CUBLAS_EVENTS") + _count(shared_traces, key, "CUDNN_EVENTS")
    device = sum(_count(shared_traces, key, t) for t in DEVICE_TABLES)
    ops = _count(shared_traces, key, "NVTX_EVENTS", f"{NVTX_RANGE} AND {IS_OP}")
    ranges = _count(shared_traces, key, "NVTX_EVENTS", f"{NVTX_RANGE} AND NOT {IS_OP}")
    return {"api_calls": api, "device_activities": device, "host_events": ops, "ranges": ranges, "flows": 0}


@pytest.mark.parametrize("key", list(EXPORTS))
def test_table_counts_match_sql(shared_traces, key):
    tables = _tables(shared_traces, key)
    assert tables.counts() == _expected_counts(shared_traces, key)


@pytest.mark.parametrize("key", list(EXPORTS))
def test_every_input_row_is_accounted_for(shared_traces, key):
    meta = _tables(shared_traces, key).meta
    n_input = sum(_count(shared_traces, key, t) for t in (
        "CUPTI_ACTIVITY_KIND_RUNTIME", "CUBLAS_EVENTS", "CUDNN_EVENTS", *DEVICE_TABLES, "NVTX_EVENTS"))
    assert meta.input_events == n_input
    assert sum(meta.event_counts.values()) == n_input


@pytest.mark.parametrize("key", list(EXPORTS))
def test_tables_are_canonical(shared_traces, key):
    tables = _tables(shared_traces, key)
    ids = []
    for name, schema in SCHEMAS.items():
        table = tables.table(name)
        assert table.schema == schema
        if "dur_ns" in table.column_names:
            assert (table.column("dur_ns").to_numpy() >= 0).all()
        ids.append(table.column("row_id").to_numpy())
    ids = np.concatenate(ids)
    assert len(np.unique(ids)) == len(ids)


@pytest.mark.parametrize("key", list(EXPORTS))
def test_meta_versions_and_origin(shared_traces, key):
    meta = _tables(shared_traces, key).meta
    meta_table = "EXPORT_META_DATA" if key == "saxpy" else "META_DATA_EXPORT"
    assert meta.format_version == _sql(shared_traces, key,
                                       f"SELECT value FROM {meta_table} WHERE name = 'EXPORT_SCHEMA_VERSION'")
    assert meta.producer_version == _sql(shared_traces, key,
                                         f"SELECT value FROM {meta_table} WHERE name = 'EXPORT_PRODUCT_VERSION'")
    assert meta.origin_ns == _sql(shared_traces, key, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")
    assert (meta.source_format, meta.time_base) == ("nsys", "nsys_session")


def test_pid_aware_join_on_mfu_before(shared_traces):
    """Correlation ids repeat across the two torchrun workers: joining on
    (process, correlation) links 3,986 of 4,010 kernels; correlation alone gives 4,280 pairs."""
    tables = _tables(shared_traces, "mfu_before")
    api = tables.api_calls.select(["process", "correlation"]).to_pandas()
    dev = tables.device_activities.select(["kind", "process", "correlation"]).to_pandas()
    kernels = dev[dev.kind == "kernel"]
    assert len(kernels) == 4010
    linked = kernels.merge(api.drop_duplicates(), on=["process", "correlation"], how="inner")
    assert len(linked) == 3986
    assert len(kernels.merge(api, on="correlation")) == 4280
    assert sorted(kernels.process.unique()) == [144, 145]


def test_mfu_before_kinds_and_domains(shared_traces):
    tables = _tables(shared_traces, "mfu_before")
    api = tables.api_calls.to_pandas()
    launches = _sql(shared_traces, "mfu_before", "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN "
                    f"(SELECT id, value AS name FROM StringIds) s ON s.id = r.nameId WHERE {LAUNCH_NAME}")
    assert (api.kind == "launch").sum() == launches == 4006
    assert ((api.kind == "launch") & (api.domain == "cuda_driver")).sum() == 402  # cuLaunchKernelEx
    assert (api.api_name == "cudaStreamGetCaptureInfo").sum() == 66
    assert not api.api_name.str.contains(r"_v\d+$").any()
    assert set(api.kind[api.api_name == "cudaStreamSynchronize"]) == {"sync"}
    assert set(api.kind[api.api_name == "cudaStreamWaitEvent"]) == {"other"}
    diags = tables.diagnostics
    assert diags.count("trace.no_device_info") == 1
    assert tables.meta.devices == [{"id": 0, "source": "activity tables"}, {"id": 1, "source": "activity tables"}]
    assert diags.count("nsys.missing_table") == 2  # CUBLAS_EVENTS, CUDNN_EVENTS


def test_mfu_before_sync_names_follow_sync_type(shared_traces):
    dev = _tables(shared_traces, "mfu_before").device_activities.to_pandas()
    names = dev.name[dev.kind == "sync"].astype(str).value_counts().to_dict()
    assert names == {"Stream Wait Event": 200, "Event Sync": 133, "Stream Sync": 33}


def test_mfu_before_ops_from_emit_nvtx(shared_traces):
    tables = _tables(shared_traces, "mfu_before")
    ops = tables.host_events.to_pandas()
    assert set(ops.kind) == {"op"}
    assert not ops.name.str.contains(",").any()
    assert ops.name[~ops.name.str.startswith("aten::")].astype(str).value_counts().to_dict() == {
        "flash_attn::_flash_attn_forward": 67, "c10d::alltoall_base_": 66}
    seq = _sql(shared_traces, "mfu_before", "SELECT count(*) FROM NVTX_EVENTS WHERE text GLOB 'aten::*, seq = *'")
    assert (ops.sequence_nr >= 0).sum() == seq
    detach = ops[(ops.name == "aten::detach_") & (ops.sequence_nr == 45328)]
    assert len(detach) == 2 and sorted(detach.pid) == [144, 145]
    assert tables.meta.process_names["144"] == "python3"


@pytest.mark.parametrize("key", ["mfu_before", "mfu_after"])
def test_every_launch_lies_inside_an_op(shared_traces, key):
    """With custom dispatcher ops counted as ops, no launch of the mfu exports is outside one
    (with aten:: alone, 133 launches of mfu_before sit in flash_attn/c10d ops only)."""
    tables = _tables(shared_traces, key)
    ops = tables.host_events.to_pandas()
    top = ops[ops.depth == 0]  # top-level ops do not overlap on one thread
    api = tables.api_calls.to_pandas()
    launches = api[api.kind == "launch"]
    outside = 0
    for (pid, tid), calls in launches.groupby(["pid", "tid"]):
        lane = top[(top.pid == pid) & (top.tid == tid)].sort_values("start_ns")
        start, end = lane.start_ns.to_numpy(), (lane.start_ns + lane.dur_ns).to_numpy()
        idx = np.searchsorted(start, calls.start_ns.to_numpy(), side="right") - 1
        inside = (idx >= 0) & (end[np.maximum(idx, 0)] >= calls.start_ns.to_numpy())
        outside += int((~inside).sum())
    assert outside == 0


@pytest.mark.parametrize("key", ["mfu_before", "mfu_after"])
def test_parents_enclose_children(shared_traces, key):
    ops = _tables(shared_traces, key).host_events.to_pandas()
    child = ops[ops.parent >= 0]
    parents = ops.set_index("row_id").loc[child.parent]
    assert (parents.pid.to_numpy() == child.pid.to_numpy()).all()
    assert (parents.tid.to_numpy() == child.tid.to_numpy()).all()
    assert (parents.start_ns.to_numpy() <= child.start_ns.to_numpy()).all()
    assert ((parents.start_ns + parents.dur_ns).to_numpy() >= (child.start_ns + child.dur_ns).to_numpy()).all()
    assert (parents.depth.to_numpy() == child.depth.to_numpy() - 1).all()
    assert ((ops.depth == 0) == (ops.parent == -1)).all()


def test_saxpy_schema2_duplicates_and_domains(shared_traces):
    tables = _tables(shared_traces, "saxpy")
    diags = tables.diagnostics
    assert diags.count("nsys.duplicate_launch") == 5
    assert diags.count("nsys.duplicate_api") == 33
    assert diags.count("nsys.invalid_utf8") == 1  # binary GpuInfo value in TARGET_INFO_SYSTEM_ENV
    assert diags.count("event.metadata") == 2  # NvtxDomainCreate "MPI", NvtxThread "MPI Rank 0"
    api = tables.api_calls.to_pandas()
    assert api.name.str.endswith(("_v3020", "_v4000", "_v7000")).sum() == 56
    assert (api.kind == "launch").sum() == 5 and (api.kind == "memcpy").sum() == 15
    ranges = tables.ranges.to_pandas()
    assert set(ranges.domain[ranges.name.str.startswith("MPI_")]) == {"MPI"}
    assert ranges.domain[ranges.name == "saxpy"].isna().all()
    assert tables.meta.device_names == ["NVIDIA A100-SXM4-40GB"]
    assert tables.meta.thread_names["1230493:1230493"] == "MPI Rank 0"


def test_saxpy_kernels_link_to_launches(shared_traces):
    tables = _tables(shared_traces, "saxpy")
    api = tables.api_calls.to_pandas()
    dev = tables.device_activities.to_pandas()
    joined = dev.merge(api, on=["process", "correlation"], suffixes=("", "_api"))
    assert len(joined) == len(dev) == 20
    kernels = joined[joined.kind == "kernel"]
    assert set(kernels.api_name) == {"cudaLaunchKernel"}
    assert (kernels.start_ns > kernels.start_ns_api).all()


def test_mock_device_and_memcpy_names(shared_traces):
    tables = _tables(shared_traces, "mock")
    assert tables.meta.device_names == ["NVIDIA GeForce RTX 3080"]
    dev = tables.device_activities.to_pandas()
    assert set(dev.kind) == {"kernel", "memcpy", "sync"}
    # syncType 2 (STREAM_WAIT_EVENT in the export's own enum) although the API call with its
    # correlation id is cudaStreamSynchronize: the name follows the exported syncType.
    assert dev.name[dev.kind == "sync"].tolist() == ["Stream Wait Event"]
    assert dev.name[dev.kind == "memcpy"].str.match(r"Memcpy \w+ \(\w+ -> \w+\)").all()


def test_parse_speed_mfu_before(shared_traces, benchmark):
    """Recorded with `pytest --benchmark-enable`; no time limit is asserted."""
    tables = benchmark(read_nsys, shared_traces / EXPORTS["mfu_before"])
    assert isinstance(tables.api_calls.to_pandas(), pd.DataFrame)
