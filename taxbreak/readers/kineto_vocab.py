"""How Kineto categories and CUDA/HIP API names map onto the canonical vocabularies.

Classification runs once per *distinct* name (a trace has a few hundred), and
the result is spread over the rows through dictionary indices.
"""
from __future__ import annotations

import re
from functools import lru_cache

# Route of one event: which table (or bucket of the accounting) it goes to.
HOST_PY, HOST_OP, HOST_ANN, API, DEV_KERNEL, DEV_MEMCPY, DEV_MEMSET, DEV_SYNC, RANGE = range(9)
FLOW, META, INSTANT, BEGIN_END, UNKNOWN_CAT, UNSUPPORTED_PH, MISSING_FIELD, WRONG_TYPE = range(9, 17)
PROFILER_SPAN = 17  # Kineto's own "Trace" span (cat "Trace", pid "Spans"): the profiling window itself
NUMBER_OUT_OF_RANGE = 18  # ts/dur beyond int64 ns or the number bounds (readers/bounds.py)
ID_OUT_OF_RANGE = 19  # an id (pid, tid, correlation...) no int64 holds
OWN = 20  # cat "taxbreak" (any ph): tracks `taxbreak annotate` added; skipped without a diagnostic
OWN_CATEGORY = "taxbreak"
PROFILER_OVERHEAD = 21  # cat "overhead": CUPTI's own work (buffer flush, resource set-up), not the workload's

HOST_ROUTES = (HOST_PY, HOST_OP, HOST_ANN)
DEVICE_ROUTES = (DEV_KERNEL, DEV_MEMCPY, DEV_MEMSET, DEV_SYNC)
HOST_KIND_OF_ROUTE = {HOST_PY: "python", HOST_OP: "op", HOST_ANN: "annotation"}
DEVICE_KIND_OF_ROUTE = {DEV_KERNEL: "kernel", DEV_MEMCPY: "memcpy", DEV_MEMSET: "memset", DEV_SYNC: "sync"}

# ph == "X" events by category (trace-formats.md 3.a, ActivityType.h).
COMPLETE_ROUTES = {
    "python_function": HOST_PY,
    "cpu_op": HOST_OP,
    "user_annotation": HOST_ANN,
    "cuda_runtime": API,
    "cuda_driver": API,
    "kernel": DEV_KERNEL,
    "gpu_memcpy": DEV_MEMCPY,
    "gpu_memset": DEV_MEMSET,
    "cuda_sync": DEV_SYNC,
    "gpu_user_annotation": RANGE,
    "Trace": PROFILER_SPAN,
    "overhead": PROFILER_OVERHEAD,  # e.g. "CUPTI Overhead", "Activity Buffer Request": ordinary profiler cost
    OWN_CATEGORY: OWN,
}

# every other ph: flows (ac2g, legacy async_cpu_to_gpu, fwdbwd) whatever their cat
PHASE_ROUTES = {"M": META, "i": INSTANT, "I": INSTANT, "s": FLOW, "f": FLOW, "t": FLOW, "B": BEGIN_END, "E": BEGIN_END}

_VERSION_SUFFIX = re.compile(r"_v\d+$")
_SYNC_NAMES = {
    "StreamSynchronize", "DeviceSynchronize", "EventSynchronize", "CtxSynchronize", "ThreadSynchronize",
}


@lru_cache(maxsize=4096)
def normalize_api_name(name: str) -> str:
    """Strip CUPTI/Nsight version suffixes: ``cudaLaunchKernel_v7000`` -> ``cudaLaunchKernel``."""
    return _VERSION_SUFFIX.sub("", name)


@lru_cache(maxsize=4096)
def api_kind(api_name: str) -> str:
    """Kind of a normalized CUDA runtime/driver or HIP API name.

    * ``launch``: kernel launches (``cudaLaunchKernel``, ``cudaLaunchKernelExC``,
      ``cuLaunchKernel``, ``cuLaunchKernelEx``, cooperative launches, ``hip*LaunchKernel``).
    * ``graph_launch``: ``cudaGraphLaunch``/``cuGraphLaunch``/``hipGraphLaunch``
      (one correlation id, many kernels).
    * ``memcpy`` / ``memset``: names containing ``Memcpy`` / ``Memset``.
    * ``sync``: calls that block the host until device work is done
      (stream/device/event/context synchronize).
    * ``other``: everything else, including ``cudaEventQuery``/``cudaStreamQuery``
      (non-blocking polls) and ``cudaStreamWaitEvent`` (a device-side dependency,
      the host does not wait).
    """
    stem = re.sub(r"^(cuda|cu|hip)", "", api_name)
    if "GraphLaunch" in stem:
        return "graph_launch"
    if "LaunchKernel" in stem or "LaunchCooperativeKernel" in stem:
        return "launch"
    if "Memcpy" in stem or "MemcpyAsync" in stem:
        return "memcpy"
    if "Memset" in stem:
        return "memset"
    if stem in _SYNC_NAMES:
        return "sync"
    return "other"


def api_domain(category: str, name: str) -> str:
    """``cuda_runtime`` | ``cuda_driver`` | ``hip_runtime`` (ROCm names under ``cuda_runtime``)."""
    if name.startswith("hip"):
        return "hip_runtime"
    return "cuda_driver" if category == "cuda_driver" else "cuda_runtime"
