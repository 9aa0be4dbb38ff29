"""Traces with planted TaxBreak components, for tests that must recover them exactly.

A :class:`PlantedSpec` lists steps of ops; each op plants its Python time
(torch op start → ATen op start), and per launch the dispatch gap, the
vendor-library time, the launch-call duration, the launch latency (kernel
start − launch start, queueing included) and the kernel duration. ``build``
lays them out on one host thread and one stream and returns the canonical
tables plus the planted truth per kernel and per step.

Layout of one op (times grow to the right)::

    gap | torch op [ py | aten op [ d1 | lib1 | launch1 | d2 | launch2 | tail ] | py_tail ]
                                                   └─ kernel at launch start + latency
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa

from ..trace.nesting import nesting
from ..trace.schema import SCHEMAS
from ..trace.tables import TraceMeta, TraceTables


@dataclass
class PlantedLaunch:
    kernel: str
    dispatch_ns: int  # gap before the call: from the op start (first) or the previous call's end
    library_ns: int  # vendor-library host time just before the call (a cuBLAS range in Nsight)
    launch_dur_ns: int
    latency_ns: int  # T_launch = kernel start − launch start
    kernel_dur_ns: int
    is_library: bool


@dataclass
class PlantedOp:
    torch_name: str
    aten_name: str
    py_ns: int
    launches: list[PlantedLaunch]
    tail_ns: int = 500
    py_tail_ns: int = 300
    gap_ns: int = 1_000  # untraced time before the torch op


@dataclass
class PlantedStep:
    phase: str
    ops: list[PlantedOp]


@dataclass
class PlantedSpec:
    steps: list[PlantedStep]
    pid: int = 4242
    tid: int = 4243
    device: int = 0
    stream: int = 7
    gpu_name: str = "NVIDIA H100 80GB HBM3"
    t0_ns: int = 1_000_000
    with_library_ranges: bool = False  # Nsight-style cuBLAS ranges around library launches


@dataclass
class Planted:
    tables: TraceTables
    kernels: pd.DataFrame  # planted truth per kernel, in trace order
    steps: pd.DataFrame  # planted host partition per step


@dataclass
class _Rows:
    host: list = field(default_factory=list)
    api: list = field(default_factory=list)
    device: list = field(default_factory=list)
    truth: list = field(default_factory=list)
    parts: list = field(default_factory=list)
    next_id: int = 0

    def nid(self) -> int:
        self.next_id += 1
        return self.next_id


LIB_KERNELS = ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cublasLt",
               "cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_128x128_32x3_nn_align8",
               "cudnn_infer_ampere_scudnn_128x64_relu_small_nn_v1")
NATIVE_KERNELS = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>",
                  "nvjet_tst_128x64_64x8_1x1_v_bz_TNT",
                  "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>",
                  "flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64, 64, 4>>")


def build(spec: PlantedSpec) -> Planted:
    """Lay out ``spec`` and return tables plus the planted truth."""
    rows = _Rows()
    t = spec.t0_ns
    run_start = t
    for i, step in enumerate(spec.steps):
        step_start = t
        part = dict.fromkeys(("python", "dispatch", "library", "launch_api", "untraced"), 0)
        for op in step.ops:
            t = _op(rows, spec, op, t, i, step.phase, part)
        _host(rows, spec, "annotation", f"taxbreak/{step.phase}/{i}", step_start, t - step_start)
        rows.parts.append({"step": i, "phase": step.phase, **part, "wall": t - step_start})
    _host(rows, spec, "annotation", "taxbreak/run/0", run_start, t - run_start)
    return Planted(_tables(rows, spec), pd.DataFrame(rows.truth), pd.DataFrame(rows.parts))


def _op(rows: _Rows, spec: PlantedSpec, op: PlantedOp, t: int, step: int, phase: str, part: dict) -> int:
    torch_start = t + op.gap_ns
    aten_start = torch_start + op.py_ns
    ext = rows.nid()
    cursor = aten_start
    for launch in op.launches:
        lib_start = cursor + launch.dispatch_ns
        call_start = lib_start + launch.library_ns
        corr = rows.nid()
        if spec.with_library_ranges and launch.is_library:
            rows.api.append(_api_row(rows, spec, "cublas", "library", "cublasLtMatmul", lib_start,
                                     call_start + launch.launch_dur_ns - lib_start, -1, ext))
            part["library"] += launch.library_ns
        else:
            part["dispatch"] += launch.library_ns
        rows.api.append(_api_row(rows, spec, "cuda_runtime", "launch", "cudaLaunchKernel", call_start,
                                 launch.launch_dur_ns, corr, ext))
        k_start = call_start + launch.latency_ns
        rows.device.append((rows.nid(), spec.pid, "kernel", launch.kernel, spec.device, spec.stream, 1, k_start,
                            launch.kernel_dur_ns, corr, ext, 1, 1, 1, 128, 1, 1, 32, 0, -1, -1, -1))
        first = cursor == aten_start
        rows.truth.append({"step": step, "phase": phase, "kernel": launch.kernel, "correlation": corr,
                           "t_py_ns": op.py_ns,
                           "t_dispatch_ns": launch.dispatch_ns + launch.library_ns,
                           "t_launch_ns": launch.latency_ns, "dur_ns": launch.kernel_dur_ns,
                           "is_library": launch.is_library, "first_in_op": first})
        part["dispatch"] += launch.dispatch_ns
        part["launch_api"] += launch.launch_dur_ns
        cursor = call_start + launch.launch_dur_ns
    aten_end = cursor + op.tail_ns
    part["dispatch"] += op.tail_ns
    part["python"] += op.py_ns + op.py_tail_ns
    part["untraced"] += op.gap_ns
    _host(rows, spec, "op", op.aten_name, aten_start, aten_end - aten_start, ext)
    _host(rows, spec, "python", op.torch_name, torch_start, aten_end + op.py_tail_ns - torch_start)
    return aten_end + op.py_tail_ns


def _host(rows: _Rows, spec: PlantedSpec, kind: str, name: str, start: int, dur: int, ext: int = -1) -> None:
    rows.host.append((rows.nid(), spec.pid, spec.tid, kind, name, start, dur, ext))


def _api_row(rows, spec, domain, kind, name, start, dur, corr, ext):
    return (rows.nid(), spec.pid, spec.pid, spec.tid, domain, kind, name, name, start, dur, corr, ext, -1)


def _tables(rows: _Rows, spec: PlantedSpec) -> TraceTables:
    host = pd.DataFrame(rows.host, columns=["row_id", "pid", "tid", "kind", "name", "start_ns", "dur_ns",
                                            "external_id"])
    lane = np.zeros(len(host), np.int64)
    depth, parent = nesting(lane, host["start_ns"].to_numpy(np.int64), host["dur_ns"].to_numpy(np.int64))
    host["depth"] = depth
    host["parent"] = np.where(parent >= 0, host["row_id"].to_numpy()[np.maximum(parent, 0)], -1)
    for col in ("python_id", "python_parent_id", "sequence_nr"):
        host[col] = -1
    for col in ("input_dims", "input_types", "input_strides", "concrete_inputs"):
        host[col] = None
    api = pd.DataFrame(rows.api, columns=[f.name for f in SCHEMAS["api_calls"]])
    dev = pd.DataFrame(rows.device, columns=[f.name for f in SCHEMAS["device_activities"]])
    meta = TraceMeta(source_format="planted", path="<planted>", origin_ns=0, time_base="planted",
                     devices=[{"id": spec.device, "name": spec.gpu_name}])
    tables = TraceTables(host_events=arrow_table(host, "host_events"), api_calls=arrow_table(api, "api_calls"),
                         device_activities=arrow_table(dev, "device_activities"), meta=meta)
    tables.validate()
    return tables


def arrow_table(df: pd.DataFrame, name: str) -> pa.Table:
    schema = SCHEMAS[name]
    arrays = []
    for f in schema:
        if pa.types.is_dictionary(f.type):  # text: missing values stay null
            text = df[f.name].astype(object).where(df[f.name].notna(), None).tolist()
            arrays.append(pa.array(text, pa.string()).dictionary_encode())
        else:
            arrays.append(pa.array(df[f.name].tolist() if len(df) else [], f.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def random_spec(rng: np.random.Generator, steps: int = 3, ops: int = 4, **kw) -> PlantedSpec:
    """A random spec: mixed library / native kernels, 1–3 launches per op."""
    out = []
    for i in range(steps):
        phase = "prefill" if i == 0 else "decode"
        out.append(PlantedStep(phase, [_random_op(rng) for _ in range(ops)]))
    return PlantedSpec(out, **kw)


def _random_op(rng: np.random.Generator) -> PlantedOp:
    launches = []
    for _ in range(int(rng.integers(1, 4))):
        lib = bool(rng.random() < 0.4)
        names = LIB_KERNELS if lib else NATIVE_KERNELS
        launches.append(PlantedLaunch(
            kernel=names[int(rng.integers(len(names)))], dispatch_ns=int(rng.integers(200, 20_000)),
            library_ns=int(rng.integers(500, 8_000)) if lib else 0, launch_dur_ns=int(rng.integers(2_000, 9_000)),
            latency_ns=int(rng.integers(4_000, 60_000)), kernel_dur_ns=int(rng.integers(1_000, 200_000)),
            is_library=lib))
    return PlantedOp("torch/nn/modules/linear.py(125): forward", "aten::addmm", int(rng.integers(100, 30_000)),
                     launches, int(rng.integers(100, 3_000)), int(rng.integers(100, 3_000)),
                     int(rng.integers(0, 5_000)))
