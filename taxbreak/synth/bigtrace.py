"""Benchmark-sized synthetic Kineto traces, written as a stream.

``write_big_kineto(path, n_events)`` writes a trace shaped like a PyTorch
profile of LLM inference on one H100: runs ``taxbreak/run/<r>`` of one prefill
and several decode steps (``user_annotation`` ``taxbreak/<phase>/<i>`` plus
their ``gpu_user_annotation`` mirror), and per step a sequence of ops, each
a ``python_function`` frame enclosing a ``cpu_op`` enclosing one
``cudaLaunchKernel`` (or ``cudaMemcpyAsync``) call, the kernel (or memcpy) on
stream 7 after its launch, and the ``ac2g`` flow pair. Times are relative to
``baseTimeNanoseconds`` (the current Kineto time base).

Times and ids of a whole step are computed with numpy; the text of each op (6
events) comes from one ``%`` template, and the file is written step by step,
so memory stays flat however many events are asked for (10 M for the scale
benchmark).
"""
from __future__ import annotations

import gzip as gzip_module
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

BASE_TIME_NS = 1_735_632_360_000_000_000
HOST_PID = 4242
HOST_TID = 4242
GPU_STREAM = 7
EVENTS_PER_OP = 6  # python_function, cpu_op, runtime call, flow start, kernel/memcpy, flow end

H100 = {
    "id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85045460992, "computeMajor": 9,
    "computeMinor": 0, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
    "regsPerBlock": 65536, "warpSize": 32, "sharedMemPerBlock": 49152, "numSms": 132,
    "regsPerMultiprocessor": 65536, "sharedMemPerBlockOptin": 232448, "sharedMemPerMultiprocessor": 233472,
}

# (python frame, ATen op, kernel, grid, block, registers, shared memory) of one decoder layer
LAYER_OPS = (
    ("torch/nn/modules/normalization.py(217): forward", "aten::rms_norm",
     "void at::native::(anonymous namespace)::rms_norm_kernel<c10::BFloat16>", (128, 1, 1), (256, 1, 1), 32, 1024),
    ("torch/nn/modules/linear.py(125): forward", "aten::linear",
     "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
     (132, 1, 1), (384, 1, 1), 168, 213504),
    ("torch/nn/functional.py(5462): scaled_dot_product_attention", "aten::scaled_dot_product_attention",
     "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>>",
     (8, 32, 1), (128, 1, 1), 255, 49152),
    ("torch/nn/modules/linear.py(125): forward", "aten::linear",
     "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x64x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
     (66, 1, 1), (384, 1, 1), 168, 180224),
    ("torch/nn/activation.py(432): forward", "aten::silu",
     "void at::native::vectorized_elementwise_kernel<4, at::native::silu_kernel(at::TensorIteratorBase&)::{lambda()#1}>",
     (1024, 1, 1), (128, 1, 1), 28, 0),
)

_OP = (
    ',\n{"ph":"X","cat":"python_function","name":"%s","pid":%d,"tid":%d,"ts":%s,"dur":%s,'
    '"args":{"Python parent id":1,"Python id":%d,"Ev Idx":%d}}'
    ',\n{"ph":"X","cat":"cpu_op","name":"%s","pid":%d,"tid":%d,"ts":%s,"dur":%s,'
    '"args":{"External id":%d,"Record function id":0,"Sequence number":%d,"Ev Idx":%d,'
    '"Input Dims":[[%d,4096],[4096,4096]],"Input type":["c10::BFloat16","c10::BFloat16"],'
    '"Input Strides":[[4096,1],[4096,1]],"Concrete Inputs":["",""]}}'
    ',\n{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":%d,"tid":%d,"ts":%s,"dur":%s,'
    '"args":{"External id":%d,"cbid":211,"correlation":%d}}'
    ',\n{"ph":"s","id":%d,"pid":%d,"tid":%d,"ts":%s,"cat":"ac2g","name":"ac2g"}'
    ',\n{"ph":"X","cat":"kernel","name":"%s","pid":0,"tid":7,"ts":%s,"dur":%s,'
    '"args":{"External id":%d,"queued":0,"device":0,"context":1,"stream":7,"correlation":%d,'
    '"registers per thread":%d,"shared memory":%d,"blocks per SM":1.0,"warps per SM":4.0,'
    '"grid":[%d,%d,%d],"block":[%d,%d,%d],"est. achieved occupancy %%":25}}'
    ',\n{"ph":"f","id":%d,"pid":0,"tid":7,"ts":%s,"cat":"ac2g","name":"ac2g","bp":"e"}'
)
_COPY = (
    ',\n{"ph":"X","cat":"python_function","name":"%s","pid":%d,"tid":%d,"ts":%s,"dur":%s,'
    '"args":{"Python parent id":1,"Python id":%d,"Ev Idx":%d}}'
    ',\n{"ph":"X","cat":"cpu_op","name":"%s","pid":%d,"tid":%d,"ts":%s,"dur":%s,'
    '"args":{"External id":%d,"Record function id":0,"Sequence number":%d,"Ev Idx":%d,'
    '"Input Dims":[[%d,4096],[4096,4096]],"Input type":["long int","long int"],'
    '"Input Strides":[[4096,1],[4096,1]],"Concrete Inputs":["",""]}}'
    ',\n{"ph":"X","cat":"cuda_runtime","name":"cudaMemcpyAsync","pid":%d,"tid":%d,"ts":%s,"dur":%s,'
    '"args":{"External id":%d,"cbid":41,"correlation":%d}}'
    ',\n{"ph":"s","id":%d,"pid":%d,"tid":%d,"ts":%s,"cat":"ac2g","name":"ac2g"}'
    ',\n{"ph":"X","cat":"gpu_memcpy","name":"%s","pid":0,"tid":7,"ts":%s,"dur":%s,'
    '"args":{"External id":%d,"device":0,"context":1,"stream":7,"correlation":%d,'
    '"bytes":%d,"memory bandwidth (GB/s)":%d.0,"grid":[%d,%d,%d],"block":[%d,%d,%d]}}'
    ',\n{"ph":"f","id":%d,"pid":0,"tid":7,"ts":%s,"cat":"ac2g","name":"ac2g","bp":"e"}'
)
_RANGE = (
    ',\n{"ph":"X","cat":"user_annotation","name":"%s","pid":%d,"tid":%d,"ts":%s,"dur":%s,'
    '"args":{"External id":%d,"Record function id":0,"Ev Idx":%d}}'
)
_GPU_RANGE = (
    ',\n{"ph":"X","cat":"gpu_user_annotation","name":"%s","pid":0,"tid":7,"ts":%s,"dur":%s,'
    '"args":{"External id":%d}}'
)


@dataclass
class BigTraceStats:
    """What :func:`write_big_kineto` wrote."""

    path: Path
    events: int
    steps: int
    runs: int
    json_bytes: int


@dataclass
class _Clock:
    host_ns: int = 1_000_000
    gpu_ns: int = 0
    corr: int = 1
    ext: int = 1
    py_id: int = 2
    step: int = 0


def write_big_kineto(path: str | Path, n_events: int, seed: int = 0, gzip: bool = True,
                     layers: int = 8, decode_steps: int = 15, rank: int = 0,
                     world_size: int | None = None) -> BigTraceStats:
    """Write a synthetic Kineto trace of about ``n_events`` events.

    Args:
        path: output file (``.json.gz`` when ``gzip``).
        n_events: events to write; the trace stops after the step that reaches it,
            so the count is exact to within one step (see ``BigTraceStats.events``).
        seed: seed of the duration jitter.
        gzip: gzip the output (level 1, for speed).
        layers: decoder layers per step (5 ops each, plus one input copy).
        decode_steps: decode steps per run after its one prefill step.
        rank: ``distributedInfo.rank`` written in the header.
        world_size: ``distributedInfo.world_size`` (default ``rank + 1``).

    Returns:
        :class:`BigTraceStats` with the exact event count and uncompressed size.
    """
    path = Path(path)
    rng = np.random.default_rng(seed)
    clock = _Clock()
    opener = (lambda p: gzip_module.open(p, "wb", compresslevel=1)) if gzip else (lambda p: open(p, "wb"))
    written, steps, runs, size = 0, 0, 0, 0
    with opener(path) as out:
        size += _write(out, _header(rank, world_size))
        written += 3
        while written < n_events:
            run_start = clock.host_ns
            for k in range(1 + decode_steps):
                if written >= n_events:
                    break
                phase = "prefill" if k == 0 else "decode"
                text, count = _step_text(clock, rng, phase, layers)
                size += _write(out, text)
                written += count
                steps += 1
            size += _write(out, _range_text(f"taxbreak/run/{runs}", run_start - 500, clock.host_ns - 1_000, clock))
            written += 1
            runs += 1
        size += _write(out, '\n],\n"traceName":"synthetic-bigtrace"}\n')
    return BigTraceStats(path, written, steps, runs, size)


def _write(out, text: str) -> int:
    data = text.encode()
    out.write(data)
    return len(data)


def _header(rank: int, world_size: int | None = None) -> str:
    head = {
        "schemaVersion": 1, "deviceProperties": [H100], "cupti_version": 22, "cuda_runtime_version": 12040,
        "cuda_driver_version": 12090, "record_shapes": 1,
        "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world_size or max(rank + 1, 1)},
        "displayTimeUnit": "ms", "baseTimeNanoseconds": BASE_TIME_NS,
    }
    text = json.dumps(head, separators=(",", ":"))[:-1] + ',\n"traceEvents":[\n'
    meta = [
        {"name": "process_name", "ph": "M", "ts": 0, "pid": HOST_PID, "tid": 0, "args": {"name": "python3"}},
        {"name": "thread_name", "ph": "M", "ts": 0, "pid": HOST_PID, "tid": HOST_TID, "args": {"name": "thread 4242 (python3)"}},
        {"name": "process_name", "ph": "M", "ts": 0, "pid": 0, "tid": 0, "args": {"name": "python3"}},
    ]
    return text + ",\n".join(json.dumps(m, separators=(",", ":")) for m in meta)


def _us(ns: np.ndarray) -> list[str]:
    """ns -> Kineto µs text with a 3-digit fraction (``ns/1000 "." ns%1000``)."""
    return [f"{q}.{r:03d}" for q, r in zip((ns // 1000).tolist(), (ns % 1000).tolist())]


def _step_text(clock: _Clock, rng: np.random.Generator, phase: str, layers: int) -> tuple[str, int]:
    """One step: its ops (6 events each) and its two annotation ranges."""
    n_ops = 1 + layers * len(LAYER_OPS)
    tokens = 512 if phase == "prefill" else 1
    scale = 8.0 if phase == "prefill" else 1.0
    py_dur = rng.integers(18_000, 40_000, n_ops)
    op_off = rng.integers(2_000, 5_000, n_ops)
    launch_off = rng.integers(3_000, 8_000, n_ops)
    launch_dur = rng.integers(3_500, 7_000, n_ops)
    gap = rng.integers(1_000, 3_000, n_ops)
    py_start = clock.host_ns + np.concatenate([[0], np.cumsum(py_dur + gap)[:-1]])
    op_start = py_start + op_off
    op_dur = py_dur - op_off - rng.integers(1_000, 2_000, n_ops)
    launch_start = op_start + launch_off
    launch_dur = np.minimum(launch_dur, op_dur - launch_off - 500)
    kern_dur = (rng.integers(4_000, 30_000, n_ops) * scale).astype(np.int64)
    ready = launch_start + launch_dur + 2_500
    # a stream runs one kernel at a time: start_k = max(ready_k, end_{k-1})
    prev = np.concatenate([[0], np.cumsum(kern_dur)[:-1]])
    kern_start = np.maximum.accumulate(np.maximum(ready, clock.gpu_ns) - prev) + prev
    corr = clock.corr + np.arange(n_ops)
    ext = clock.ext + np.arange(n_ops)
    py_id = clock.py_id + np.arange(n_ops)
    parts = [_ops_text(n_ops, py_start, py_dur, op_start, op_dur, launch_start, launch_dur,
                       kern_start, kern_dur, corr, ext, py_id, tokens)]
    step_start, step_end = int(py_start[0]) - 200, int(py_start[-1] + py_dur[-1]) + 200
    name = f"taxbreak/{phase}/{clock.step}"
    parts.append(_range_text(name, step_start, step_end, clock))
    gpu_start, gpu_end = int(kern_start[0]) - 1, int(kern_start[-1] + kern_dur[-1]) + 1
    parts.append(_GPU_RANGE % (name, *_us(np.array([gpu_start, gpu_end - gpu_start])), clock.ext - 1))
    clock.host_ns = step_end + 5_000
    clock.gpu_ns = gpu_end
    clock.corr += n_ops
    clock.ext += n_ops
    clock.py_id += n_ops
    clock.step += 1
    return "".join(parts), n_ops * EVENTS_PER_OP + 2


def _ops_text(n_ops, py_start, py_dur, op_start, op_dur, launch_start, launch_dur,
              kern_start, kern_dur, corr, ext, py_id, tokens) -> str:
    cols = [_us(a) for a in (py_start, py_dur, op_start, op_dur, launch_start, launch_dur, kern_start, kern_dur)]
    ps, pd_, os_, od, ls, ld, ks, kd = cols
    corr, ext, py_id = corr.tolist(), ext.tolist(), py_id.tolist()
    out = []
    for i in range(n_ops):
        if i == 0:  # the input ids copied to the device
            out.append(_COPY % (
                "torch/_tensor.py(1100): to", HOST_PID, HOST_TID, ps[i], pd_[i], py_id[i], 3 * i,
                "aten::copy_", HOST_PID, HOST_TID, os_[i], od[i], ext[i], ext[i], 3 * i + 1, tokens,
                HOST_PID, HOST_TID, ls[i], ld[i], ext[i], corr[i],
                corr[i], HOST_PID, HOST_TID, ls[i],
                "Memcpy HtoD (Pinned -> Device)", ks[i], kd[i], ext[i], corr[i], 8 * tokens, 20,
                0, 0, 0, 0, 0, 0, corr[i], ks[i]))
            continue
        py, op, kern, grid, block, regs, smem = LAYER_OPS[(i - 1) % len(LAYER_OPS)]
        out.append(_OP % (
            py, HOST_PID, HOST_TID, ps[i], pd_[i], py_id[i], 3 * i,
            op, HOST_PID, HOST_TID, os_[i], od[i], ext[i], ext[i], 3 * i + 1, tokens,
            HOST_PID, HOST_TID, ls[i], ld[i], ext[i], corr[i],
            corr[i], HOST_PID, HOST_TID, ls[i],
            kern, ks[i], kd[i], ext[i], corr[i], regs, smem, *grid, *block,
            corr[i], ks[i]))
    return "".join(out)


def _range_text(name: str, start_ns: int, end_ns: int, clock: _Clock) -> str:
    ts, dur = _us(np.array([start_ns, end_ns - start_ns]))
    clock.ext += 1
    return _RANGE % (name, HOST_PID, HOST_TID, ts, dur, clock.ext - 1, 0)
