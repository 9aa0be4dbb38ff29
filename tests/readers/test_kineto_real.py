"""The Kineto reader on every real trace in ../shared/traces: each input event lands
in exactly one table, in metadata or in a counted diagnostic, and the row counts
equal counts computed here independently with plain ``json`` and simple rules."""
from __future__ import annotations

import gzip
import json
from collections import Counter
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from conftest import SHARED_TRACES, shared_trace_paths
from taxbreak.readers import read_kineto

HOST = {"python_function", "cpu_op", "user_annotation"}
API = {"cuda_runtime", "cuda_driver"}
DEVICE = {"kernel", "gpu_memcpy", "gpu_memset", "cuda_sync"}
LAUNCH_NAMES = {"cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx", "hipLaunchKernel",
                "hipExtModuleLaunchKernel", "hipModuleLaunchKernel", "hipExtLaunchKernel"}

KINETO_TRACES = shared_trace_paths((".json", ".json.gz"))


def _param(path: Path):
    return pytest.param(path, id=str(path.relative_to(SHARED_TRACES)))


def _load_json(path: Path, **kwargs) -> dict:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rb") as fh:
        return json.load(fh, **kwargs)


def _expected_counts(events: list[dict]) -> Counter:
    counts = Counter()
    for e in events:
        ph, cat = e.get("ph"), e.get("cat")
        if ph == "X" and cat in HOST:
            counts["host_events"] += 1
        elif ph == "X" and cat in API:
            counts["api_calls"] += 1
        elif ph == "X" and cat in DEVICE:
            counts["device_activities"] += 1
        elif ph == "X" and cat == "gpu_user_annotation":
            counts["ranges"] += 1
        elif ph in ("s", "f", "t"):
            counts["flows"] += 1
        elif ph == "M":
            counts["metadata"] += 1
        else:
            counts["dropped"] += 1
    return counts


def test_every_real_kineto_trace_is_listed(shared_traces):
    assert len(KINETO_TRACES) >= 17


@pytest.mark.parametrize("path", [_param(p) for p in KINETO_TRACES])
def test_accounting_matches_independent_counts(path):
    events = _load_json(path)["traceEvents"]
    tables = read_kineto(path)
    expected = _expected_counts(events)
    assert tables.meta.input_events == len(events)
    for name in ("host_events", "api_calls", "device_activities", "ranges", "flows", "metadata", "dropped"):
        assert tables.meta.event_counts[name] == expected[name], name
    assert tables.counts() == {k: expected[k] for k in tables.counts()}
    assert sum(tables.meta.event_counts.values()) == len(events)
    dropped_codes = ["event.instant", "event.profiler_span", "event.unknown_category", "event.unsupported_phase",
                     "event.missing_field",
                     "event.wrong_type", "event.begin_end", "event.number_out_of_range", "event.id_out_of_range"]
    assert sum(tables.diagnostics.count(c) for c in dropped_codes) == expected["dropped"]
    launches = sum(1 for e in events if e.get("cat") in API and e.get("name") in LAUNCH_NAMES)
    kinds = tables.api_calls.column("kind").to_pylist()
    assert kinds.count("launch") == launches


@pytest.mark.parametrize("path", [_param(p) for p in KINETO_TRACES])
def test_host_parents_enclose_their_children(path):
    host = read_kineto(path).host_events.to_pandas()
    child = host[host.parent >= 0]
    parent = host.set_index("row_id").loc[child.parent]
    assert (parent.start_ns.to_numpy() <= child.start_ns.to_numpy()).all()
    assert (parent.pid.to_numpy() == child.pid.to_numpy()).all()
    assert (child.depth.to_numpy() == parent.depth.to_numpy() + 1).all() or len(child) == 0


def test_old_epoch_trace_keeps_exact_nanoseconds(shared_traces):
    # absolute epoch µs with a ns fraction (1712195495406752.8): float64 cannot hold it
    path = shared_traces / "HolisticTraceAnalysis/tests/data/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
    events = _load_json(path, parse_float=Decimal)["traceEvents"]
    tables = read_kineto(path)
    assert tables.meta.time_base == "kineto_epoch_us"
    kernels = [e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"]
    want = np.array([int(Decimal(e["ts"]) * 1000) for e in kernels], dtype=np.int64)
    dev = tables.device_activities.to_pandas()
    got = dev[dev.kind == "kernel"].start_ns.to_numpy() + tables.meta.origin_ns
    assert (got == want).all()
    assert (want % 1000 != 0).any()  # the fraction is really there
    want_dur = np.array([int(Decimal(e["dur"]) * 1000) for e in kernels])
    assert (dev[dev.kind == "kernel"].dur_ns.to_numpy() == want_dur).all()


def test_relative_time_base_uses_base_time_nanoseconds(shared_traces):
    path = shared_traces / "HolisticTraceAnalysis/tests/data/triton_example/triton_example.json.gz"
    tables = read_kineto(path)
    assert tables.meta.time_base == "kineto_relative"
    assert tables.meta.origin_ns == 1727743122000000000
    api = tables.api_calls.to_pandas().set_index("name")
    assert api.loc["cuLaunchKernel"].start_ns == 2413669097399166  # ts 2413669097399.166 µs
    assert api.loc["cuLaunchKernel"].domain == "cuda_driver"
    assert api.loc["cuLaunchKernel"].kind == "launch"
    assert api.loc["cudaDeviceSynchronize"].kind == "sync"
    kernel = tables.device_activities.to_pylist()[0]
    assert (kernel["grid_x"], kernel["block_x"], kernel["registers"], kernel["correlation"]) == (1, 128, 16, 35)
    assert tables.meta.extra["cuda_runtime_version"] == 12000
    assert tables.meta.producer_version == "cupti 18"


def test_rocm_trace_uses_hip_domain_and_string_streams(shared_traces):
    tables = read_kineto(shared_traces / "HolisticTraceAnalysis/tests/data/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz")
    api = tables.api_calls.to_pandas()
    assert set(api.domain) == {"hip_runtime"}
    assert (api[api.name == "hipLaunchKernel"].kind == "launch").all()
    assert tables.ranges.num_rows == 2
    assert tables.meta.device_names[0] == "AMD Radeon Graphics"


def test_cpu_only_and_range_profiler_traces_have_empty_device_tables(shared_traces):
    cpu = read_kineto(shared_traces / "HolisticTraceAnalysis/tests/data/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz")
    assert cpu.device_activities.num_rows == 0 and cpu.api_calls.num_rows == 0
    assert cpu.host_events.num_rows == 15
    assert cpu.meta.rank == 34
    rng = read_kineto(shared_traces / "HolisticTraceAnalysis/tests/data/cupti_profiler/benchmark_result_924719_1679055439_trace.json.gz")
    assert rng.device_activities.num_rows == 0
    assert rng.diagnostics.count("event.unknown_category") == 77  # cuda_profiler_range
    assert rng.diagnostics.count("event.profiler_span") == 2  # the two "Trace" spans


def test_legacy_flows_and_names_from_metadata(shared_traces):
    tables = read_kineto(shared_traces / "HolisticTraceAnalysis/tests/data/trace_diff/control/control.json.gz")
    assert set(tables.flows.column("category").to_pylist()) == {"async_cpu_to_gpu"}
    assert tables.meta.process_names and tables.meta.thread_names
