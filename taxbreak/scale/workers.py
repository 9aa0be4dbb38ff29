"""How many traces to analyze at once: bounded by CPUs and by available memory.

Peak memory of one analysis grows with the decompressed trace size; the ratio
below was measured with scripts/bench.py (docs/performance.md, "Many traces"): peak
RSS of ``taxbreak analyze`` divided by the decompressed JSON size, on the
synthetic 1 M-event trace, plus the interpreter's own footprint.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path

from .discover import uncompressed_bytes

log = logging.getLogger(__name__)

# Measured with scripts/bench.py (docs/performance.md, "Many traces"): peak RSS of a cold
# `taxbreak analyze` was 252 MB / 745 MB / 5,436 MB for 22 MB / 220 MB / 2,228 MB of
# JSON (100 k / 1 M / 10 M events). BASE + RATIO × JSON bounds all three from above.
RSS_PER_JSON_BYTE = 2.5
BASE_RSS_BYTES = 250 * 1024**2
# Leave room for the parent process, page cache and other work on the machine.
MEMORY_HEADROOM = 0.8


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent(parent_pid: int) -> None:
    """Have the kernel SIGKILL this process when its parent ends (Linux ``PR_SET_PDEATHSIG``),
    and end now if it already has (it died before this ran). Elsewhere a no-op: the pool's own
    shutdown is all there is. The resource tracker ends by itself once the last process that
    holds its pipe is gone."""
    import ctypes
    import ctypes.util
    import signal

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):  # not Linux / not glibc
        return
    if os.getppid() != parent_pid:
        os._exit(1)


def available_memory_bytes() -> int:
    """``MemAvailable`` from /proc/meminfo, else free physical pages."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


def usable_cpus() -> int:
    """CPUs this process may run on (affinity mask, cgroup-unaware fallback to cpu_count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def estimate_peak_bytes(path: str | Path) -> int:
    """Expected peak RSS of analyzing ``path`` in a fresh process."""
    return int(BASE_RSS_BYTES + RSS_PER_JSON_BYTE * uncompressed_bytes(path))


def plan_workers(paths: list[Path], workers: int | None = None, available_bytes: int | None = None) -> int:
    """The worker count for analyzing ``paths`` in parallel.

    Args:
        paths: the traces.
        workers: an explicit count (still capped by the number of traces).
        available_bytes: memory to plan with; ``available_memory_bytes()`` when None.

    Returns:
        ``min(traces, CPUs, memory budget / largest per-trace peak)``, at least 1.
    """
    if not paths:
        return 1
    if workers is not None:
        return max(1, min(int(workers), len(paths)))
    budget = MEMORY_HEADROOM * (available_memory_bytes() if available_bytes is None else available_bytes)
    peak = max(estimate_peak_bytes(p) for p in paths)
    by_memory = int(budget // peak)
    planned = max(1, min(len(paths), usable_cpus(), by_memory))
    log.debug("workers: %d (cpus %d, memory allows %d at %.0f MB peak each)",
              planned, usable_cpus(), by_memory, peak / 1e6)
    return planned
