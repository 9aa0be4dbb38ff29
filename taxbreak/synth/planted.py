"""Traces with planted TaxBreak components, for tests that must recover them exactly.

A :class:`PlantedSpec` lists steps of ops; each op plants its Python time
(torch op start → ATen op start), and per launch the dispatch gap, the
vendor-library time, the launch-call duration, the launch latency and the
kernel duration, on a stream of its choosing (or as a CUDA-graph launch of
several kernels). ``build`` lays them out on one host thread and returns the
canonical tables plus the planted truth per kernel, per step, and the host
thread's labelled timeline (for the idle attribution).

Layout of one op (times grow to the right)::

    gap | torch op [ py | aten op [ d1 | lib1 | launch1 | d2 | launch2 | tail ] | py_tail ]
                                                   └─ kernel at max(launch start + T_sys, stream free) + latency

A kernel starts ``latency_ns`` after both the planted floor T_sys has passed
since its launch call began and its stream has finished all earlier work; so
T_launch = T_sys + queue wait + latency with the queue wait planted by the
earlier kernels of the stream (``stream_free_ns`` in the truth).
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
    latency_ns: int  # kernel start − max(launch start + T_sys, stream free)
    kernel_dur_ns: int
    is_library: bool
    stream: int | None = None  # None: the spec's stream
    graph_kernels: int = 0  # > 0: a cudaGraphLaunch replaying this many kernels (kernel_dur_ns each)
    graph_gap_ns: int = 700  # device gap between the graph's kernels
    no_device: bool = False  # the call has no device activity in the trace (an orphan launch)
    copy_bytes: int = 0  # > 0: a cudaMemcpyAsync of this many bytes (kernel_dur_ns on the device), not a kernel
    # a workspace cudaMemsetAsync inside the dispatch gap (cuBLASLt): it starts memset_at_ns into
    # the gap and lasts memset_dur_ns (0: none); the gap's time on both sides stays T_dispatch
    memset_at_ns: int = 0
    memset_dur_ns: int = 0
    sync_after_ns: int = 0  # > 0: a cudaStreamSynchronize of this length right after the launch call


@dataclass
class PlantedFrame:
    """A host frame laid out on its own (before an op, or on a thread that launches nothing):
    ``name`` over ``dur_ns``, labelled ``label``; the ``inner`` frames (a call chain, outermost
    first) all span ``[start + inset_ns, end − inset_ns)``, labelled ``inner_label``."""

    name: str
    dur_ns: int
    label: str
    inner: tuple[str, ...] = ()
    inner_label: str | None = None
    inset_ns: int = 100
    kind: str = "python"


@dataclass
class PlantedOp:
    torch_name: str
    aten_name: str
    py_ns: int
    launches: list[PlantedLaunch]
    tail_ns: int = 500
    py_tail_ns: int = 300
    gap_ns: int = 1_000  # untraced time before the torch op
    before: tuple[PlantedFrame, ...] = ()  # frames after the gap, before the torch op
    inner_py_ns: int = 0  # a Python frame inside the ATen (custom) op, before its first launch
    inner_py_name: str = "vllm/attention/backends/flash_attn.py(700): forward"


@dataclass
class PlantedThread:
    """A thread that launches nothing: its frames back to back from ``t0_ns + offset_ns``."""

    tid: int
    frames: tuple[PlantedFrame, ...]
    offset_ns: int = 0


@dataclass
class PlantedStep:
    phase: str
    ops: list[PlantedOp]
    # "stream": the step records a CUDA graph between cudaStreamBeginCapture and cudaStreamEndCapture
    # (then cudaGraphInstantiate); "annotation": inside a capture_… user annotation. Either way its
    # launches are captured: calls without device activity.
    capture: str = ""
    # > 0: the step opens with a cudaStreamSynchronize of this length (before its first op): the
    # blocking call an engine makes before it prepares the next step (sampling, a device-to-host copy)
    sync_first_ns: int = 0


CAPTURE_CALLS = (("cudaStreamBeginCapture", 2_000), ("cudaStreamEndCapture", 3_000),
                 ("cudaGraphInstantiateWithFlags", 50_000))
CAPTURE_ANNOTATION = "capture_bs_8"


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
    floor_ns: int = 4_710  # the T_sys kernels are laid out with (H100's published floor)
    other_threads: tuple[PlantedThread, ...] = ()


@dataclass
class Planted:
    tables: TraceTables
    kernels: pd.DataFrame  # planted truth per kernel, in trace order
    steps: pd.DataFrame  # planted host partition per step
    host_timeline: pd.DataFrame  # (start_ns, end_ns, label) of every planted host segment, in time order


@dataclass
class _Rows:
    host: list = field(default_factory=list)
    api: list = field(default_factory=list)
    device: list = field(default_factory=list)
    truth: list = field(default_factory=list)
    parts: list = field(default_factory=list)
    timeline: list = field(default_factory=list)
    stream_free: dict = field(default_factory=dict)  # stream -> end of its last work
    next_id: int = 0

    def segment(self, start: int, dur: int, label: str) -> None:
        if dur > 0:
            self.timeline.append((start, start + dur, label))

    def nid(self) -> int:
        self.next_id += 1
        return self.next_id


# library kernels are launched by a library op (aten::addmm), framework kernels by others: the
# decomposer's library evidence (classify.py) reads the op first, then the kernel's own name
LIB_KERNELS = ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cublasLt",
               "cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_128x128_32x3_nn_align8",
               "cudnn_infer_ampere_scudnn_128x64_relu_small_nn_v1",
               "nvjet_tst_128x64_64x8_1x1_v_bz_TNT")
NATIVE_KERNELS = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>",
                  "triton_poi_fused_add_mul_0",
                  "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>",
                  "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64, 64, 4, cutlass::half_t>>")


def build(spec: PlantedSpec) -> Planted:
    """Lay out ``spec`` and return tables plus the planted truth."""
    rows = _Rows()
    t = spec.t0_ns
    run_start = t
    for i, step in enumerate(spec.steps):
        step_start = t
        part = dict.fromkeys(PARTS, 0)
        if step.sync_first_ns:
            rows.api.append(_api_row(rows, spec, "cuda_runtime", "sync", "cudaStreamSynchronize", t,
                                     step.sync_first_ns, rows.nid(), -1))
            rows.segment(t, step.sync_first_ns, "sync")
            part["sync"] += step.sync_first_ns
            t += step.sync_first_ns
        if step.capture == "stream":
            t = _capture_call(rows, spec, CAPTURE_CALLS[0], t, part)
        for op in step.ops:
            t = _op(rows, spec, op, t, i, step.phase, part, captured=bool(step.capture))
        if step.capture == "stream":
            t = _capture_call(rows, spec, CAPTURE_CALLS[2], _capture_call(rows, spec, CAPTURE_CALLS[1], t, part), part)
        if step.capture == "annotation":
            _host(rows, spec, "annotation", CAPTURE_ANNOTATION, step_start, t - step_start)
        _host(rows, spec, "annotation", f"taxbreak/{step.phase}/{i}", step_start, t - step_start)
        rows.parts.append({"step": i, "phase": step.phase, **part, "wall": t - step_start,
                           "start_ns": step_start, "end_ns": t})
    _host(rows, spec, "annotation", "taxbreak/run/0", run_start, t - run_start)
    for thread in spec.other_threads:
        _thread(rows, spec, thread)
    return Planted(_tables(rows, spec), pd.DataFrame(rows.truth), pd.DataFrame(rows.parts),
                   pd.DataFrame(rows.timeline, columns=["start_ns", "end_ns", "label"]))


def _capture_call(rows: _Rows, spec: PlantedSpec, call: tuple[str, int], t: int, part: dict) -> int:
    """One capture-control runtime call (kind ``other``) at ``t``; returns its end."""
    name, dur = call
    rows.api.append(_api_row(rows, spec, "cuda_runtime", "other", name, t, dur, rows.nid(), -1))
    rows.segment(t, dur, "other_api")
    part["other_api"] += dur
    return t + dur


PARTS = ("python", "dispatch", "library", "launch_api", "other_api", "sync", "untraced", "blocked", "host_stall")


def _frame(rows: _Rows, spec: PlantedSpec, frame: PlantedFrame, t: int, part: dict | None, tid: int) -> int:
    """Lay out ``frame`` at ``t`` (its timeline segments only on the spec's thread); its end."""
    _host(rows, spec, frame.kind, frame.name, t, frame.dur_ns, tid=tid)
    lo, hi = t, t + frame.dur_ns
    labels = [(lo, hi, frame.label)]
    if frame.inner:
        lo, hi = t + frame.inset_ns, t + frame.dur_ns - frame.inset_ns
        for name in frame.inner:
            _host(rows, spec, "python", name, lo, hi - lo, tid=tid)
        labels = [(t, lo, frame.label), (lo, hi, frame.inner_label), (hi, t + frame.dur_ns, frame.label)]
    for a, b, label in labels:
        if part is not None:
            rows.segment(a, b - a, label)
            part[label] += b - a
    return t + frame.dur_ns


def _thread(rows: _Rows, spec: PlantedSpec, thread: PlantedThread) -> None:
    t = spec.t0_ns + thread.offset_ns
    for frame in thread.frames:
        t = _frame(rows, spec, frame, t, None, thread.tid)


def _op(rows: _Rows, spec: PlantedSpec, op: PlantedOp, t: int, step: int, phase: str, part: dict,
        captured: bool = False) -> int:
    rows.segment(t, op.gap_ns, "untraced")
    t += op.gap_ns
    for frame in op.before:
        t = _frame(rows, spec, frame, t, part, spec.tid)
    torch_start = t
    aten_start = torch_start + op.py_ns
    rows.segment(torch_start, op.py_ns, "python")
    ext = rows.nid()
    cursor = aten_start
    if op.inner_py_ns:
        _host(rows, spec, "python", op.inner_py_name, aten_start, op.inner_py_ns)
        rows.segment(aten_start, op.inner_py_ns, "python")
        part["python"] += op.inner_py_ns
        cursor = aten_start + op.inner_py_ns
    first_call = cursor
    for launch in op.launches:
        first_in_op = cursor == first_call
        cursor = _memset(rows, spec, launch, cursor, ext, part)
        gap_ns = launch.dispatch_ns - (launch.memset_at_ns if launch.memset_dur_ns else 0)
        lib_start = cursor + gap_ns
        call_start = lib_start + launch.library_ns
        corr = rows.nid()
        rows.segment(cursor, gap_ns, "dispatch")
        if spec.with_library_ranges and launch.is_library:
            rows.api.append(_api_row(rows, spec, "cublas", "library", "cublasLtMatmul", lib_start,
                                     call_start + launch.launch_dur_ns - lib_start, -1, ext))
            part["library"] += launch.library_ns
            rows.segment(lib_start, launch.library_ns, "library")
        else:
            part["dispatch"] += launch.library_ns
            rows.segment(lib_start, launch.library_ns, "dispatch")
        name, kind = _call_name(launch)
        rows.api.append(_api_row(rows, spec, "cuda_runtime", kind, name, call_start, launch.launch_dur_ns, corr, ext))
        rows.segment(call_start, launch.launch_dur_ns, "other_api" if launch.copy_bytes else "launch_api")
        if not (captured or launch.no_device):
            # Python inside the op (inner_py_ns) is before its first launch: part of that launch's T_dispatch
            _kernels(rows, spec, launch, call_start, corr, ext, {
                "step": step, "phase": phase, "t_py_ns": op.py_ns, "first_in_op": first_in_op,
                "t_dispatch_ns": launch.dispatch_ns + launch.library_ns + (op.inner_py_ns if first_in_op else 0),
                "is_library": launch.is_library, "launch_dur_ns": launch.launch_dur_ns})
        part["dispatch"] += launch.dispatch_ns
        part["other_api" if launch.copy_bytes else "launch_api"] += launch.launch_dur_ns
        cursor = call_start + launch.launch_dur_ns
        if launch.sync_after_ns:  # the host blocks right after the launch (a dependency the kernel may wait on)
            rows.api.append(_api_row(rows, spec, "cuda_runtime", "sync", "cudaStreamSynchronize", cursor,
                                     launch.sync_after_ns, rows.nid(), ext))
            rows.segment(cursor, launch.sync_after_ns, "sync")
            part["sync"] += launch.sync_after_ns
            cursor += launch.sync_after_ns
    aten_end = cursor + op.tail_ns
    rows.segment(cursor, op.tail_ns, "dispatch")
    rows.segment(aten_end, op.py_tail_ns, "python")
    part["dispatch"] += op.tail_ns
    part["python"] += op.py_ns + op.py_tail_ns
    part["untraced"] += op.gap_ns
    _host(rows, spec, "op", op.aten_name, aten_start, aten_end - aten_start, ext)
    _host(rows, spec, "python", op.torch_name, torch_start, aten_end + op.py_tail_ns - torch_start)
    return aten_end + op.py_tail_ns


def _memset(rows: _Rows, spec: PlantedSpec, launch: PlantedLaunch, cursor: int, ext: int, part: dict) -> int:
    """The launch's workspace memset call (and its device memset on the launch's stream), if any;
    returns where the host is once the call returned."""
    if not launch.memset_dur_ns:
        return cursor
    rows.segment(cursor, launch.memset_at_ns, "dispatch")  # counted with the whole gap in part["dispatch"]
    start = cursor + launch.memset_at_ns
    corr = rows.nid()
    rows.api.append(_api_row(rows, spec, "cuda_runtime", "memset", "cudaMemsetAsync", start,
                             launch.memset_dur_ns, corr, ext))
    rows.segment(start, launch.memset_dur_ns, "other_api")
    part["other_api"] = part.get("other_api", 0) + launch.memset_dur_ns
    stream = spec.stream if launch.stream is None else launch.stream
    dev_start = max(start + spec.floor_ns, rows.stream_free.get(stream, start))
    rows.device.append((rows.nid(), spec.pid, "memset", "Memset (Device)", spec.device, stream, 1, dev_start,
                        1_000, corr, ext, 0, 0, 0, 0, 0, 0, 0, 0, -1, -1, -1))
    rows.stream_free[stream] = max(rows.stream_free.get(stream, 0), dev_start + 1_000)
    return start + launch.memset_dur_ns


def _call_name(launch: PlantedLaunch) -> tuple[str, str]:
    """(API name, API kind) of a planted call."""
    if launch.copy_bytes:
        return "cudaMemcpyAsync", "memcpy"
    return ("cudaGraphLaunch", "graph_launch") if launch.graph_kernels else ("cudaLaunchKernel", "launch")


def _kernels(rows: _Rows, spec: PlantedSpec, launch: PlantedLaunch, call_start: int, corr: int, ext: int,
             truth: dict) -> None:
    """The device work of one launch call and its planted truth.

    A plain launch waits for its stream; a graph launch for every stream of the
    device (its first node starts when the device is free), and its later
    nodes follow each other ``graph_gap_ns`` apart on the graph's own stream.
    """
    stream = spec.stream if launch.stream is None else launch.stream
    n = max(launch.graph_kernels, 1)
    graph_stream = stream + 1000 if launch.graph_kernels else stream
    free = (max(rows.stream_free.values(), default=call_start) if launch.graph_kernels
            else rows.stream_free.get(stream, call_start))
    start = max(call_start + spec.floor_ns, free) + launch.latency_ns
    for i in range(n):
        kind, size = ("memcpy", launch.copy_bytes) if launch.copy_bytes else ("kernel", -1)
        rows.device.append((rows.nid(), spec.pid, kind, launch.kernel, spec.device, graph_stream, 1, start,
                            launch.kernel_dur_ns, corr, ext, 1, 1, 1, 128, 1, 1, 32, 0, size, -1, -1))
        rows.truth.append({**truth, "kernel": launch.kernel, "correlation": corr, "start_ns": start,
                           "t_launch_ns": start - call_start, "dur_ns": launch.kernel_dur_ns,
                           "stream_free_ns": free - call_start, "graph_node": i if launch.graph_kernels else -1,
                           "launch_start_ns": call_start})
        end = start + launch.kernel_dur_ns
        rows.stream_free[graph_stream] = max(rows.stream_free.get(graph_stream, end), end)
        start = end + launch.graph_gap_ns


def _host(rows: _Rows, spec: PlantedSpec, kind: str, name: str, start: int, dur: int, ext: int = -1,
          tid: int | None = None) -> None:
    rows.host.append((rows.nid(), spec.pid, spec.tid if tid is None else tid, kind, name, start, dur, ext))


def _api_row(rows, spec, domain, kind, name, start, dur, corr, ext):
    return (rows.nid(), spec.pid, spec.pid, spec.tid, domain, kind, name, name, start, dur, corr, ext, -1)


def _tables(rows: _Rows, spec: PlantedSpec) -> TraceTables:
    host = pd.DataFrame(rows.host, columns=["row_id", "pid", "tid", "kind", "name", "start_ns", "dur_ns",
                                            "external_id"])
    lane = host["tid"].to_numpy(np.int64)
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


def random_spec(rng: np.random.Generator, steps: int = 3, ops: int = 4, streams: int = 1, graphs: bool = False,
                **kw) -> PlantedSpec:
    """A random spec: mixed library / native kernels, 1–3 launches per op, on ``streams``
    streams, with CUDA-graph launches among them when ``graphs``."""
    out = []
    for i in range(steps):
        phase = "prefill" if i == 0 else "decode"
        out.append(PlantedStep(phase, [_random_op(rng, streams, graphs) for _ in range(ops)]))
    return PlantedSpec(out, **kw)


def _random_op(rng: np.random.Generator, streams: int = 1, graphs: bool = False) -> PlantedOp:
    launches = []
    lib = bool(rng.random() < 0.4)  # one library op (all its kernels library) or a framework op
    names = LIB_KERNELS if lib else NATIVE_KERNELS
    for _ in range(int(rng.integers(1, 4))):
        launches.append(PlantedLaunch(
            kernel=names[int(rng.integers(len(names)))], dispatch_ns=int(rng.integers(200, 20_000)),
            library_ns=int(rng.integers(500, 8_000)) if lib else 0, launch_dur_ns=int(rng.integers(2_000, 9_000)),
            latency_ns=int(rng.integers(0, 60_000)), kernel_dur_ns=int(rng.integers(1_000, 200_000)),
            is_library=lib, stream=7 + int(rng.integers(streams)),
            graph_kernels=int(rng.integers(2, 5)) if graphs and rng.random() < 0.3 else 0))
    return PlantedOp("torch/nn/modules/linear.py(125): forward", "aten::addmm" if lib else "aten::add",
                     int(rng.integers(100, 30_000)),
                     launches, int(rng.integers(100, 3_000)), int(rng.integers(100, 3_000)),
                     int(rng.integers(0, 5_000)))
