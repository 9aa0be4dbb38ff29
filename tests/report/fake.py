"""Hand-built analyses that follow the Analysis contract (docs/architecture.md),
so the report functions can be tested without parsing a trace."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd

from taxbreak.report.metrics import METRIC_KEYS
import pyarrow as pa

from taxbreak.trace import TraceMeta, TraceTables
from taxbreak.trace.schema import SCHEMAS, conform

XSS_KERNEL = "<script>alert(1)</script>"
XSS_OP = '<img src=x onerror="alert(2)">'


def metrics(**values) -> dict:
    """A full metric dict: every key None unless given."""
    out = {key: None for key in METRIC_KEYS}
    out.update(values)
    return out


def phase_metrics(scale: float = 1.0, **over) -> dict:
    base = dict(kernels=100, launches=100, orphan_kernels=0, orphan_launches=0,
                device_active_us=800.0 * scale, device_busy_us=780.0 * scale, span_us=2000.0 * scale,
                device_span_idle_us=1200.0 * scale, framework_us=600.0 * scale, framework_python_us=400.0 * scale,
                framework_dispatch_us=200.0 * scale, library_us=50.0 * scale, library_measured_us=None,
                launch_floor_us=450.0, launch_latency_us=120.0 * scale, orchestration_us=1100.0 * scale,
                tklqt_sum_us=900.0 * scale, floor_us=4.5, floor_source="published:default",
                t_dispatch_base_us=2.0, kernel_diversity=0.2, tokens=10, kernels_per_token=10.0,
                orchestration_us_per_token=110.0 * scale, framework_us_per_token=60.0 * scale,
                device_active_us_per_token=80.0 * scale, host_thread_us=2000.0 * scale,
                exposed_orchestration_us=700.0 * scale, hidden_orchestration_us=400.0 * scale, steps=1)
    base["hdbi"] = base["device_active_us"] / (base["device_active_us"] + base["orchestration_us"])
    base.update(over)
    return metrics(**base)


def make_kernels(n: int = 6, names=None) -> pd.DataFrame:
    names = names or ["gemm_kernel", XSS_KERNEL, "vectorized_elementwise_kernel"]
    i = np.arange(n)
    launch = 1_000_000 + i * 20_000
    return pd.DataFrame({
        "correlation": i + 1, "name": [names[k % len(names)] for k in i], "device": 0, "stream": 7,
        "start_ns": launch + 8_000, "dur_ns": np.full(n, 5_000), "launch_name": "cudaLaunchKernel",
        "kind": "kernel", "launch_start_ns": launch, "launch_dur_ns": 3_000, "launch_pid": 1, "launch_tid": 1,
        "op_name": [XSS_OP if k % 2 else "aten::mm" for k in i],
        "op_start_ns": launch - 4_000, "t_py_ns": 3_000, "t_dispatch_ns": 4_000, "t_launch_ns": 8_000,
        "is_library": i % 3 == 0, "kernel_class": [("library_gemm", "other", "elementwise")[k % 3] for k in i],
        "ft_python_ns": 3_000.0, "ft_dispatch_ns": 2_000.0, "ct_ns": 2_000.0 * (i % 3 == 0),
        "kt_floor_ns": 4_500.0, "launch_latency_ns": 3_500.0, "step": i // 3,
        "phase": ["prefill" if k < 3 else "decode" for k in i],
    })


def make_analysis(scale: float = 1.0, kernel_names=None, phases=("prefill", "decode"), **all_over):
    kernels = make_kernels(names=kernel_names)
    phase_dicts = {p: phase_metrics(scale * (0.5 if p == "decode" else 1.0)) for p in phases}
    steps = [dict(phase_metrics(scale), step=s, phase=p, name=f"taxbreak/{p}/{s}",
                  start_ns=1_000_000 + s * 60_000, end_ns=1_060_000 + s * 60_000)
             for s, p in enumerate(phases)]
    summary = {"all": phase_metrics(scale, **all_over), "phases": phase_dicts, "steps": steps,
               "meta": {"path": "fake.json", "source_format": "kineto", "devices": ["NVIDIA H100"]},
               "diagnostics": {"link.orphan_kernel": {"count": 2, "severity": "warning", "example": XSS_KERNEL}}}
    ops = pd.DataFrame({"op_name": ["aten::mm", XSS_OP], "calls": [3, 3], "kernels": [3, 3],
                        "orchestration_us": [30.0 * scale, 12.0]})
    host = pd.DataFrame({"pid": [1, 1], "tid": [1, 1], "step": [0, 1], "host_python_ns": [30_000, 20_000],
                         "host_dispatch_ns": [8_000, 9_000], "host_launch_api_ns": [9_000, 9_000],
                         "host_untraced_ns": [13_000, 22_000], "host_thread_ns": [60_000, 60_000]})
    return SimpleNamespace(kernels=kernels, steps=pd.DataFrame(steps), phases=pd.DataFrame(
        [dict(v, phase=k) for k, v in phase_dicts.items()]), ops=ops, host_partition=host,
        summary=summary, tables=make_tables(kernels))


def make_tables(kernels: pd.DataFrame) -> TraceTables:
    """Canonical tables holding the kernels, their launches and their ops (for the timeline)."""
    n = len(kernels)
    def table(table_name: str, **cols) -> pa.Table:
        schema = SCHEMAS[table_name]
        rows = len(next(iter(cols.values())))
        arrays = [pa.array(cols[f.name], type=f.type.value_type if pa.types.is_dictionary(f.type) else f.type)
                  if f.name in cols else pa.array([-1] * rows, type=f.type) if pa.types.is_integer(f.type)
                  else pa.nulls(rows, type=f.type) for f in schema]
        return conform(table_name, pa.Table.from_arrays(arrays, names=schema.names))
    ones, k = [1] * n, kernels
    host = table("host_events", row_id=list(range(n)), pid=ones, tid=ones, kind=["op"] * n,
                 name=k["op_name"].tolist(), start_ns=k["op_start_ns"].tolist(), dur_ns=[12_000] * n,
                 depth=pa.array([0] * n, pa.int32()))
    api = table("api_calls", row_id=list(range(n, 2 * n)), process=[0] * n, pid=ones, tid=ones,
                domain=["cuda_runtime"] * n, kind=["launch"] * n, name=["cudaLaunchKernel"] * n,
                api_name=["cudaLaunchKernel"] * n, start_ns=k["launch_start_ns"].tolist(),
                dur_ns=k["launch_dur_ns"].tolist(), correlation=k["correlation"].tolist())
    dev = table("device_activities", row_id=list(range(2 * n, 3 * n)), process=[0] * n, kind=["kernel"] * n,
                name=k["name"].tolist(), device=[0] * n, stream=[7] * n, start_ns=k["start_ns"].tolist(),
                dur_ns=k["dur_ns"].tolist(), correlation=k["correlation"].tolist())
    meta = TraceMeta(source_format="kineto", path="fake.json", devices=[{"id": 0, "name": "NVIDIA H100"}],
                     process_names={"1": XSS_KERNEL}, thread_names={"1:1": XSS_OP})
    return TraceTables(host_events=host, api_calls=api, device_activities=dev, meta=meta)
