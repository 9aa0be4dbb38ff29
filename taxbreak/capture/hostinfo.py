"""What the host and device are: CPU model and clock, GPU, versions.

The CPU's single-thread maximum clock matters to this method (a faster host
cuts orchestration by 10-29%, TaxBreak abstract), so it is read from the most
authoritative source present and the source is recorded:
``/sys/.../cpufreq/cpuinfo_max_freq`` > ``lscpu`` "CPU max MHz" >
``/proc/cpuinfo`` "cpu MHz" (the *current* clock, flagged as such).
"""
from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path

import torch

_CPUINFO = Path("/proc/cpuinfo")
_CPUFREQ = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
_MEMINFO = Path("/proc/meminfo")


def cpu_model(cpuinfo_text: str | None = None) -> str | None:
    """``model name`` from /proc/cpuinfo, else ``platform.processor()``."""
    text = cpuinfo_text if cpuinfo_text is not None else _read(_CPUINFO)
    match = re.search(r"^model name\s*:\s*(.+)$", text or "", re.MULTILINE)
    if match:
        return match.group(1).strip()
    return platform.processor() or None


def cpu_max_mhz(cpufreq_khz: str | None = None, lscpu_text: str | None = None,
                cpuinfo_text: str | None = None) -> tuple[float | None, str]:
    """The single-thread maximum clock in MHz and where it came from.

    Each argument overrides one source (for tests); ``None`` reads the system.
    Returns ``(None, "unavailable")`` when no source has it.
    """
    khz = cpufreq_khz if cpufreq_khz is not None else _read(_CPUFREQ)
    if khz and khz.strip().isdigit():
        return int(khz.strip()) / 1000.0, "sysfs:cpuinfo_max_freq"
    lscpu = lscpu_text if lscpu_text is not None else _run(["lscpu"])
    match = re.search(r"^CPU max MHz:\s*([0-9.]+)", lscpu or "", re.MULTILINE)
    if match:
        return float(match.group(1)), "lscpu:CPU max MHz"
    text = cpuinfo_text if cpuinfo_text is not None else _read(_CPUINFO)
    match = re.search(r"^cpu MHz\s*:\s*([0-9.]+)", text or "", re.MULTILINE)
    if match:
        return float(match.group(1)), "proc:cpu MHz (current clock, not the maximum)"
    return None, "unavailable"


def gpu_info() -> dict:
    """GPU name, count, compute capability and driver, or why there is none."""
    if not torch.cuda.is_available():
        return {"gpu_name": None, "gpu_count": 0, "driver_version": None, "reason": "no CUDA device"}
    props = torch.cuda.get_device_properties(0)
    return {
        "gpu_name": props.name,
        "gpu_count": torch.cuda.device_count(),
        "compute_capability": f"{props.major}.{props.minor}",
        "gpu_memory_bytes": int(props.total_memory),
        "driver_version": _driver_version(),
    }


def _driver_version() -> str | None:
    out = _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    if out and out.strip():
        return out.strip().splitlines()[0]
    return None


def free_memory_bytes(device: str) -> int | None:
    """Free memory of ``device``: ``cudaMemGetInfo`` on a GPU, MemAvailable on the CPU."""
    if str(device).startswith("cuda"):
        return torch.cuda.mem_get_info(torch.device(device))[0]
    try:
        meminfo = _MEMINFO.read_text()
    except OSError:
        return None
    for line in meminfo.splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return None


def host_info() -> dict:
    """Everything the manifest records about the machine and the software."""
    mhz, mhz_source = cpu_max_mhz()
    return {
        "cpu_model": cpu_model(),
        "cpu_max_mhz": mhz,
        "cpu_max_mhz_source": mhz_source,
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "hostname": platform.node(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        **gpu_info(),
    }


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _run(cmd: list[str]) -> str | None:
    if shutil.which(cmd[0]) is None:
        return None
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None
