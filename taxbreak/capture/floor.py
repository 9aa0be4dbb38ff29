"""The null-kernel launch floor T_sys (TaxBreak §IV): measure, summarise, cache.

T_sys = mean(kernel start − launch-call start) over ``runs`` launches of an
empty ``<<<1,1>>>`` kernel, each followed by a context synchronize so that no
queueing enters the figure (the launch is always issued to an idle GPU). The
launches go through the driver API (``cuLaunchKernel`` from embedded PTX, see
:mod:`.ptx_launch`) under the PyTorch profiler; CUPTI records the driver call
(Kineto category ``cuda_driver``) and the kernel with one correlation id, and
the trace is read back with :func:`taxbreak.readers.load_trace` like any other.

With several GPUs each is measured and, as published, the minimum mean is the
floor of that GPU model. The result is cached per GPU name and driver version
at :func:`taxbreak.trace.paths.floor_cache_path`, where
``taxbreak.decompose.floor`` finds it (``floor_source: measured``).
"""
from __future__ import annotations

import glob
import json
import logging
import tempfile
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pyarrow.compute as pc

from ..trace.errors import DeviceUnavailableError, TaxbreakError
from ..trace.fileio import write_output
from ..trace.paths import floor_cache_path
from ..trace.tables import TraceTables
from .kineto_log import profiler_session
from .ptx import NULL_KERNEL_NAME

log = logging.getLogger(__name__)

CACHE_FIELDS = (
    "gpu_name", "driver_version", "floor_us", "p50_us", "p95_us",
    "min_us", "max_us", "std_us", "samples", "measured_at",
)


@dataclass
class FloorResult:
    """One floor measurement; the cache file holds exactly these fields."""

    gpu_name: str
    driver_version: str
    floor_us: float  # mean of the samples: T_sys
    p50_us: float
    p95_us: float
    min_us: float
    max_us: float
    std_us: float  # population standard deviation (ddof=0)
    samples: int
    measured_at: str  # ISO-8601 UTC

    def as_dict(self) -> dict:
        return asdict(self)


def require_cuda() -> int:
    """Number of CUDA devices torch can use, or ``device.unavailable``.

    Called before anything else by every GPU-stage command so that a machine
    without a GPU fails with one clear line, not a traceback from deep inside.
    """
    try:
        import torch
    except ImportError as err:  # pragma: no cover - torch is a dependency
        raise DeviceUnavailableError(
            code="device.unavailable", message="torch is not installed", hint="pip install torch"
        ) from err
    if torch.cuda.is_available() and torch.cuda.device_count() > 0:
        return torch.cuda.device_count()
    has_nodes = bool(glob.glob("/dev/nvidia[0-9]*"))
    cuda_build = getattr(torch.version, "cuda", None)
    if has_nodes and not cuda_build:
        hint = f"a GPU is present but torch {torch.__version__} has no CUDA support: install a CUDA build of torch"
    else:
        hint = "run on a machine with an NVIDIA GPU and driver (check nvidia-smi and CUDA_VISIBLE_DEVICES)"
    raise DeviceUnavailableError(
        code="device.unavailable", message="no CUDA device is available", hint=hint
    )


def launch_delays_ns(tables: TraceTables, kernel_name: str = NULL_KERNEL_NAME) -> np.ndarray:
    """Kernel start − launch-call start (ns) of every ``kernel_name`` kernel.

    Kernels join their launch call on (process, correlation), the CUPTI key
    (correlation ids are unique per process only). Samples are ordered by
    launch time. Kernels without a launch in the trace are left out.
    """
    dev = tables.device_activities
    kernels = dev.filter(pc.and_(pc.equal(dev["kind"].cast("string"), "kernel"),
                                 pc.equal(dev["name"], kernel_name)))
    api = tables.api_calls
    launches = api.filter(pc.equal(api["kind"].cast("string"), "launch"))
    joined = kernels.select(["process", "correlation", "start_ns"]).rename_columns(
        ["process", "correlation", "kernel_start_ns"]
    ).join(
        launches.select(["process", "correlation", "start_ns"]).rename_columns(
            ["process", "correlation", "launch_start_ns"]
        ),
        keys=["process", "correlation"],
        join_type="inner",
    )
    launch_ns = joined["launch_start_ns"].to_numpy()
    delay_ns = joined["kernel_start_ns"].to_numpy() - launch_ns
    return delay_ns[np.argsort(launch_ns, kind="stable")].astype(np.int64)


def floor_stats(delays_ns: np.ndarray, runs: int | None = None) -> dict:
    """Mean, p50, p95, min, max, std (µs) and count of the last ``runs`` samples.

    Raises:
        TaxbreakError: ``device.driver`` when there is no sample at all (the
            profiler did not record the driver launches).
    """
    values = np.asarray(delays_ns, dtype=np.float64)
    if runs is not None and runs > 0:
        values = values[-runs:]
    if values.size == 0:
        raise DeviceUnavailableError(
            code="device.driver",
            message="the profiler recorded no null-kernel launch with its kernel",
            hint="CUPTI must record cuda_driver launches: use torch>=2.1 with a CUDA build",
        )
    us = values / 1000.0
    return {
        "floor_us": float(us.mean()),
        "p50_us": float(np.percentile(us, 50)),
        "p95_us": float(np.percentile(us, 95)),
        "min_us": float(us.min()),
        "max_us": float(us.max()),
        "std_us": float(us.std()),
        "samples": int(us.size),
    }


def make_result(gpu_name: str, driver_version: str, stats: dict) -> FloorResult:
    """A :class:`FloorResult` stamped with the current UTC time."""
    now = datetime.now(timezone.utc).replace(microsecond=0).isoformat()
    return FloorResult(gpu_name=gpu_name, driver_version=str(driver_version), measured_at=now, **stats)


def write_cache(result: FloorResult) -> Path:
    """Write ``result`` to its cache file; returns the path."""
    path = floor_cache_path(result.gpu_name, result.driver_version)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_output(path, json.dumps(result.as_dict(), indent=1, sort_keys=True) + "\n")
    return path


def read_cache(gpu_name: str, driver_version: str) -> FloorResult | None:
    """The cached floor of a GPU model and driver, ``None`` if absent.

    Raises:
        TaxbreakError: ``cache.corrupt`` when the file exists but is not a
            floor record.
    """
    path = floor_cache_path(gpu_name, str(driver_version))
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
        return FloorResult(**{key: data[key] for key in CACHE_FIELDS})
    except (ValueError, KeyError, TypeError) as err:
        raise TaxbreakError(
            code="cache.corrupt",
            message=f"floor cache entry cannot be read ({type(err).__name__}: {err})",
            path=str(path),
            hint="delete the file and rerun `taxbreak floor`",
        ) from err


def profile_null_launches(device_index: int, warmup: int, runs: int, trace_path: Path) -> tuple[str, str]:
    """Launch the null kernel ``warmup`` + ``runs`` times on one GPU under the profiler.

    :func:`floor_stats` keeps the last ``runs`` samples.

    Returns:
        ``(gpu_name, driver_version)`` as the driver reports them.
    """
    import torch

    from .ptx_launch import CudaDriver, load_libcuda

    torch.cuda.set_device(device_index)
    torch.zeros(1, device=f"cuda:{device_index}")  # creates torch's primary context
    drv = CudaDriver(load_libcuda())
    drv.init()
    device = drv.device(device_index)
    drv.use_primary_context(device)
    func = drv.load_null_kernel()
    drv.launch_null(func)  # JIT of the PTX and module load happen before profiling
    drv.synchronize()
    # Warm-up runs under the profiler too (as published, only the last `runs`
    # samples count): the first launches after CUPTI attaches are slower.
    with profiler_session(f"cuda:{device_index}").profile as prof:
        for _ in range(warmup + runs):
            drv.launch_null(func)
            drv.synchronize()  # idle GPU at every launch: no queueing in T_sys
    prof.export_chrome_trace(str(trace_path))
    return drv.device_name(device), str(drv.driver_version())


def measure_floor(warmup: int = 50, runs: int = 150, keep_trace: Path | None = None,
                  write: bool = True) -> list[FloorResult]:
    """Measure T_sys on every visible GPU; one result per GPU model (minimum mean).

    Args:
        warmup: launches whose samples are discarded (first in the trace).
        runs: launches whose samples make the floor, per GPU.
        keep_trace: folder to keep the Kineto traces in (else a temp dir).
        write: write each result to the floor cache.

    Raises:
        TaxbreakError: ``device.unavailable`` without a GPU; ``device.driver``
            when libcuda is missing or a driver call fails.
    """
    count = require_cuda()
    from ..readers import load_trace

    per_device: list[FloorResult] = []
    with tempfile.TemporaryDirectory(prefix="taxbreak-floor-") as tmp:
        folder = Path(keep_trace) if keep_trace else Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for index in range(count):
            trace_path = folder / f"floor_gpu{index}.json"
            name, version = profile_null_launches(index, warmup, runs, trace_path)
            stats = floor_stats(launch_delays_ns(load_trace(trace_path)), runs)
            log.debug("floor gpu%d %s: %.3f us over %d samples", index, name, stats["floor_us"], stats["samples"])
            per_device.append(make_result(name, version, stats))
    results = minimum_per_model(per_device)
    if write:
        for result in results:
            write_cache(result)
    return results


def minimum_per_model(results: list[FloorResult]) -> list[FloorResult]:
    """Keep, per (GPU name, driver), the measurement with the lowest mean."""
    best: dict[tuple[str, str], FloorResult] = {}
    for result in results:
        key = (result.gpu_name, result.driver_version)
        if key not in best or result.floor_us < best[key].floor_us:
            best[key] = result
    return list(best.values())
