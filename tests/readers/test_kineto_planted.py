"""The Kineto reader on small hand-written traces: exact values for every pitfall
of trace-formats.md."""
from __future__ import annotations

import gzip
import json

import msgspec
import pytest

from taxbreak.readers import read_kineto
from taxbreak.readers.kineto_events import iter_chunks
from taxbreak.readers.kineto_vocab import api_kind, normalize_api_name

PID, TID = 100, 101


def _x(cat, name, ts, dur, pid=PID, tid=TID, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _write(tmp_path, events, name="t.json", raw_events=None, **top):
    doc = {"schemaVersion": 1, **top, "traceEvents": events}
    text = json.dumps(doc)
    if raw_events is not None:  # exact number text that json.dumps would round
        text = text.replace('"traceEvents": []', f'"traceEvents": [{raw_events}]')
    path = tmp_path / name
    data = text.encode()
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    return path


def test_epoch_microseconds_with_ns_fraction_are_exact(tmp_path):
    raw = ('{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":1695835573023613.123,"dur":4.928},'
           '{"ph":"X","cat":"cpu_op","name":"b","pid":1,"tid":1,"ts":1695835573023614,"dur":1}')
    tables = read_kineto(_write(tmp_path, [], raw_events=raw, displayTimeUnit="ns"))
    assert tables.meta.time_base == "kineto_epoch_us"
    assert tables.meta.origin_ns == 1695835573023613123
    assert tables.host_events.column("start_ns").to_pylist() == [0, 877]
    assert tables.host_events.column("dur_ns").to_pylist() == [4928, 1000]  # "ns" display unit: still µs


def test_relative_time_base(tmp_path):
    events = [_x("cpu_op", "aten::mm", 12.5, 3.25)]
    tables = read_kineto(_write(tmp_path, events, baseTimeNanoseconds=1_700_000_000_000_000_000))
    assert tables.meta.origin_ns == 1_700_000_000_000_000_000
    assert tables.meta.time_base == "kineto_relative"
    assert tables.host_events.column("start_ns").to_pylist() == [12500]
    assert tables.host_events.column("dur_ns").to_pylist() == [3250]


def test_launch_kinds_graph_launch_and_flows(tmp_path):
    events = [
        _x("cpu_op", "aten::mm", 0, 100, **{"External id": 7}),
        _x("cuda_runtime", "cudaLaunchKernelExC_v11060", 10, 5, correlation=1, cbid=430, **{"External id": 7}),
        _x("cuda_driver", "cuLaunchKernelEx", 20, 5, correlation=2),
        _x("cuda_runtime", "cudaGraphLaunch", 30, 5, correlation=3),
        _x("cuda_runtime", "cudaEventQuery", 40, 1, correlation=4),
        _x("cuda_runtime", "cudaStreamSynchronize", 50, 20, correlation=5),
        _x("cuda_runtime", "hipLaunchKernel", 60, 5, correlation=6),
        _x("kernel", "k1", 16, 2, pid=0, tid=7, correlation=1, grid=[4, 2, 1], block=[128, 1, 1],
           **{"registers per thread": 32, "shared memory": 1024, "External id": 7}),
        _x("kernel", "g1", 40, 2, pid=0, tid=7, correlation=3, **{"graph id": 9, "graph node id": 11}),
        _x("kernel", "g2", 42, 2, pid=0, tid=7, correlation=3, **{"graph id": 9, "graph node id": 12}),
        _x("gpu_memcpy", "Memcpy HtoD", 70, 3, pid=0, tid=7, correlation=8, bytes=4096),
        {"ph": "s", "id": 1, "pid": PID, "tid": TID, "ts": 10, "cat": "ac2g", "name": "ac2g"},
        {"ph": "f", "id": 1, "pid": 0, "tid": 7, "ts": 16, "cat": "ac2g", "name": "ac2g", "bp": "e"},
        {"ph": "s", "id": 2, "pid": PID, "tid": TID, "ts": 20, "cat": "async_cpu_to_gpu", "name": "async_gpu"},
    ]
    tables = read_kineto(_write(tmp_path, events))
    api = tables.api_calls.to_pandas()
    assert api.api_name.tolist()[0] == "cudaLaunchKernelExC"
    assert api.kind.tolist() == ["launch", "launch", "graph_launch", "other", "sync", "launch"]
    assert api.domain.tolist() == ["cuda_runtime", "cuda_driver", "cuda_runtime", "cuda_runtime", "cuda_runtime",
                                   "hip_runtime"]
    assert api.external_id.tolist() == [7, -1, -1, -1, -1, -1]
    assert api.cbid.tolist()[0] == 430 and (api.process == 0).all()
    dev = tables.device_activities.to_pandas()
    assert dev.kind.tolist() == ["kernel", "kernel", "kernel", "memcpy"]
    k1 = dev.iloc[0]
    assert (k1.grid_x, k1.grid_y, k1.block_x, k1.registers, k1.shared_mem_bytes) == (4, 2, 128, 32, 1024)
    assert (k1.device, k1.stream, k1.start_ns, k1.dur_ns) == (0, 7, 16000, 2000)
    assert dev.correlation.tolist() == [1, 3, 3, 8]
    assert dev.graph_node_id.tolist() == [-1, 11, 12, -1]
    assert dev.bytes.tolist() == [-1, -1, -1, 4096]
    flows = tables.flows.to_pandas()
    assert flows.category.tolist() == ["ac2g", "ac2g", "async_cpu_to_gpu"]
    assert flows.phase.tolist() == ["s", "f", "s"] and flows.flow_id.tolist() == [1, 1, 2]


def test_host_events_nesting_ids_and_shapes(tmp_path):
    events = [
        _x("python_function", "model.py(1): forward", 0, 100, **{"Python id": 5, "Python parent id": 1}),
        _x("user_annotation", "taxbreak/decode/0", 5, 90),
        _x("cpu_op", "aten::linear", 10, 50, **{"External id": 3, "Sequence number": 44,
                                                 "Input Dims": [[2, 4], [4, 4]], "Input type": ["float", "float"]}),
        _x("cpu_op", "aten::mm", 20, 10, **{"External id": 4}),
        _x("cpu_op", "aten::other_thread", 20, 10, tid=999),
    ]
    tables = read_kineto(_write(tmp_path, events))
    host = tables.host_events.to_pandas()
    assert host.kind.tolist() == ["python", "annotation", "op", "op", "op"]
    assert host.depth.tolist() == [0, 1, 2, 3, 0]
    assert host.parent.tolist() == [-1, 0, 1, 2, -1]
    assert host.python_id.tolist()[0] == 5 and host.python_parent_id.tolist()[0] == 1
    assert host.sequence_nr.tolist()[2] == 44
    assert json.loads(host.input_dims[2]) == [[2, 4], [4, 4]]
    assert host.input_types[2] == '["float", "float"]'
    assert host.input_dims.isna().tolist() == [True, True, False, True, True]


def test_gpu_annotation_goes_to_ranges_and_metadata_to_meta(tmp_path):
    events = [
        {"name": "process_name", "ph": "M", "pid": PID, "tid": 0, "args": {"name": "python3"}},
        {"name": "thread_name", "ph": "M", "pid": PID, "tid": TID, "args": {"name": "main"}},
        {"name": "process_labels", "ph": "M", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}},
        _x("gpu_user_annotation", "taxbreak/prefill/0", 10, 50, pid=0, tid=7, **{"External id": 2}),
        _x("gpu_user_annotation", "inner", 20, 5, pid=0, tid=7),
    ]
    tables = read_kineto(_write(tmp_path, events, distributedInfo={"rank": 3}, deviceProperties=[{"id": 0, "name": "NVIDIA H100"}]))
    ranges = tables.ranges.to_pandas()
    assert ranges.source.tolist() == ["gpu_annotation"] * 2
    assert ranges.depth.tolist() == [0, 1] and ranges.external_id.tolist() == [2, -1]
    assert tables.meta.process_names == {str(PID): "python3"}
    assert tables.meta.thread_names == {f"{PID}:{TID}": "main"}
    assert tables.meta.extra["process_labels"] == {"0": "GPU 0"}
    assert tables.meta.rank == 3 and tables.meta.device_names == ["NVIDIA H100"]
    assert tables.meta.event_counts["metadata"] == 3


def test_string_and_negative_ids(tmp_path):
    events = [
        _x("cpu_op", "a", 1, 1, pid="Spans", tid="PyTorch Profiler"),
        _x("cpu_op", "b", 1, 1, pid=-1, tid="12"),
        _x("kernel", "k", 2, 1, pid=0, tid=7, stream="0x3"),
    ]
    tables = read_kineto(_write(tmp_path, events))
    assert tables.host_events.column("pid").to_pylist() == [-1, -1]
    assert tables.host_events.column("tid").to_pylist() == [-1, 12]
    assert tables.device_activities.column("stream").to_pylist() == [3]


def test_chrome_array_format_and_no_metadata(tmp_path):
    path = tmp_path / "array.json"
    path.write_text(json.dumps([_x("cpu_op", "a", 1, 1), _x("kernel", "k", 2, 1, pid=0, tid=7)]))
    tables = read_kineto(path)
    assert tables.counts()["host_events"] == 1 and tables.counts()["device_activities"] == 1
    assert tables.meta.event_counts["metadata"] == 0


def test_chunk_cuts_inside_strings_and_nested_values_give_the_same_events():
    # "},{" inside a name and inside a nested args list must not split an event
    events = [{"ph": "X", "name": 'x},{"y', "args": {"l": [{"a": 1}, {"b": 2}]}, "ts": i, "dur": 1} for i in range(50)]
    data = memoryview(json.dumps(events).encode())
    whole = [(f, len(e), b) for f, e, b in iter_chunks(data, chunk_bytes=1 << 20)]
    tiny = list(iter_chunks(data, chunk_bytes=7))
    assert whole == [(0, 50, [])]
    assert sum(len(e) for _, e, _ in tiny) == 50 and len(tiny) > 5
    names = [ev.name for _, chunk, _ in tiny for ev in chunk]
    assert names == ['x},{"y'] * 50
    assert msgspec.json.decode(bytes(data))[0]["name"] == names[0]


def test_gzip_and_plain_give_identical_tables(tmp_path):
    events = [_x("cpu_op", "a", 1.5, 1), _x("cuda_runtime", "cudaLaunchKernel", 2, 1, correlation=1)]
    plain = read_kineto(_write(tmp_path, events, name="t.json"))
    packed = read_kineto(_write(tmp_path, events, name="t.json.gz"))
    for name in ("host_events", "api_calls"):
        assert plain.table(name).equals(packed.table(name))


@pytest.mark.parametrize("name, kind", [
    ("cudaLaunchKernel", "launch"), ("cuLaunchKernel", "launch"), ("cudaLaunchCooperativeKernel", "launch"),
    ("hipExtModuleLaunchKernel", "launch"), ("cudaGraphLaunch", "graph_launch"), ("hipGraphLaunch", "graph_launch"),
    ("cudaMemcpyAsync", "memcpy"), ("cuMemcpyHtoDAsync", "memcpy"), ("cudaMemsetAsync", "memset"),
    ("cudaDeviceSynchronize", "sync"), ("cudaEventSynchronize", "sync"), ("cuCtxSynchronize", "sync"),
    ("cudaEventQuery", "other"), ("cudaStreamWaitEvent", "other"), ("cudaFuncSetAttribute", "other"),
])
def test_api_kind_vocabulary(name, kind):
    assert api_kind(normalize_api_name(name + "_v7000")) == kind
