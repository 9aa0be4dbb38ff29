"""A tiny Kineto trace with planted component times, written deterministically.

All times in µs from the trace base. Two ATen ops under two Python frames:

    torch_a [10, 60]  aten::add [13, 55]   L1 [17, 20] -> K1 native  [30, 35]
                                           L2 [26, 29] -> K2 native  [40, 45]
    torch_b [70, 120] aten::addmm [72, 110] L3 [81, 84] -> K3 cutlass [100, 108]

T_dispatch: K1 4 (op start -> L1), K2 6 (L1 end -> L2), K3 9; the dispatch
baseline is the median over native kernels, 5 µs, so K3 has ΔFT dispatch 5 and
ΔCT 4. With --floor-us 4.5 the exposed launch latency is 8.5 (K1), 5.0 (K2: its
device was busy with K1 until 35, so 4.5 µs of its wait is queue wait) and 14.5 (K3).
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

from .fake import XSS_KERNEL, XSS_OP

BASE_NS = 1_700_000_000_000_000_000
EPOCH_US = 1_700_000_000_000_000
FLOOR_US = 4.5
NATIVE_1 = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>"
NATIVE_2 = "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>"
LIBRARY = "cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_128x128_32x3_nn_align8"

# Expected annotation slices: (name, start µs, dur µs) in the trace's own time base.
EXPECTED_HOST = sorted([
    ("ΔFT python", 10.0, 3.0), ("ΔFT dispatch", 13.0, 4.0), ("ΔKT floor", 17.0, 4.5),
    ("ΔFT dispatch", 20.0, 6.0), ("ΔKT floor", 26.0, 4.5),
    ("ΔFT python", 70.0, 2.0), ("ΔFT dispatch", 72.0, 5.0), ("ΔCT library", 77.0, 4.0), ("ΔKT floor", 81.0, 4.5),
])
LATENCY = "ΔKT launch latency (exposed)"
EXPECTED_QUEUE = sorted([(LATENCY, 21.5, 8.5), (LATENCY, 35.0, 5.0), (LATENCY, 85.5, 14.5)])


def _x(cat, name, ts, dur, pid=100, tid=200, **args) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _kernel(name, ts, dur, corr, ext) -> dict:
    return _x("kernel", name, ts, dur, pid=0, tid=7, correlation=corr, stream=7, device=0, context=1,
              grid=[1, 1, 1], block=[128, 1, 1], **{"External id": ext, "registers per thread": 32,
                                                   "shared memory": 0})


def planted_events(shift: float = 0.0, names=(NATIVE_1, NATIVE_2, LIBRARY), ops=("aten::add", "aten::addmm"),
                   phase: str = "decode", extra_python_us: float = 0.0) -> list[dict]:
    """The events of the planted trace, every ts shifted by ``shift`` µs;
    ``extra_python_us`` starts torch_b earlier, adding that much T_py to K3."""
    ev = [
        _x("user_annotation", f"taxbreak/{phase}/0", 5, 120, **{"External id": 9}),
        _x("python_function", "torch_a", 10, 50, **{"Python id": 1, "Python parent id": -1}),
        _x("cpu_op", ops[0], 13, 42, **{"External id": 1}),
        _x("cuda_runtime", "cudaLaunchKernel", 17, 3, correlation=101, **{"External id": 1, "cbid": 211}),
        _x("cuda_runtime", "cudaLaunchKernel", 26, 3, correlation=102, **{"External id": 1, "cbid": 211}),
        _kernel(names[0], 30, 5, 101, 1), _kernel(names[1], 40, 5, 102, 1),
        _x("python_function", "torch_b", 70 - extra_python_us, 50 + extra_python_us, **{"Python id": 2, "Python parent id": -1}),
        _x("cpu_op", ops[1], 72, 38, **{"External id": 2}),
        _x("cuda_runtime", "cudaLaunchKernel", 81, 3, correlation=103, **{"External id": 2, "cbid": 211}),
        _kernel(names[2], 100, 8, 103, 2),
        {"ph": "M", "name": "process_name", "pid": 100, "tid": 0, "args": {"name": "python3"}},
        {"ph": "M", "name": "thread_name", "pid": 100, "tid": 200, "args": {"name": "main"}},
    ]
    for e in ev:
        if "ts" in e:
            e["ts"] = e["ts"] + shift
    return ev


def write_planted(path: Path, epoch: bool = False, xss: bool = False, phase: str = "decode",
                  extra_python_us: float = 0.0) -> Path:
    """Write the planted trace (new relative format, or old absolute-epoch µs)."""
    names = (NATIVE_1, XSS_KERNEL, LIBRARY) if xss else (NATIVE_1, NATIVE_2, LIBRARY)
    ops = ("aten::" + XSS_OP, "aten::addmm") if xss else ("aten::add", "aten::addmm")
    doc = {"schemaVersion": 1,
           "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85000000000}],
           "traceEvents": planted_events(EPOCH_US if epoch else 0.0, names, ops, phase, extra_python_us)}
    if not epoch:
        doc["baseTimeNanoseconds"] = BASE_NS
    data = json.dumps(doc).encode()
    path.write_bytes(gzip.compress(data, mtime=0) if path.name.endswith(".gz") else data)
    return path
