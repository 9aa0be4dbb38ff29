"""Which files of a folder are traces, and how big they are once decompressed."""
from __future__ import annotations

import struct
from pathlib import Path

from ..trace.errors import TraceNotFoundError, UsageError

# Suffixes taxbreak reads (readers/detect.py decides the format from content).
TRACE_SUFFIXES = (".json", ".json.gz", ".sqlite", ".nsys-rep")
RUN_MANIFEST = "manifest.json"
# JSON files taxbreak itself writes beside traces (run directories, sweeps, convert):
# never traces, so a sweep folder or a converted folder is not misread as a bad trace.
NOT_TRACES = frozenset({RUN_MANIFEST, "summary.json", "sweep.json", "sweep_point.json", "trace_meta.json"})
# A gzip member's trailer keeps the uncompressed size modulo 2**32 (RFC 1952).
_GZIP_ISIZE_WRAP = 2**32


def is_run_dir(path: str | Path) -> bool:
    """True when ``path`` is a run directory written by ``taxbreak profile``."""
    return (Path(path) / RUN_MANIFEST).is_file()


def _is_trace_file(path: Path) -> bool:
    return (path.is_file() and not path.name.startswith(".") and path.name not in NOT_TRACES
            and path.name.endswith(TRACE_SUFFIXES))


def _is_entry(path: Path) -> bool:
    """A trace file, or a run directory (one per run, e.g. the points of a sweep)."""
    return _is_trace_file(path) or (path.is_dir() and not path.name.startswith(".") and is_run_dir(path))


def find_traces(folder: str | Path) -> list[Path]:
    """The trace files and run directories directly inside ``folder``, sorted by name.

    taxbreak's own JSON outputs (``NOT_TRACES``) and hidden files are not traces.

    Raises:
        TraceNotFoundError: ``folder`` does not exist (``input.not_found``).
        UsageError: it holds no trace file (``run.no_traces``).
    """
    root = Path(folder)
    if not root.is_dir():
        raise TraceNotFoundError("input.not_found", "no such folder", path=str(root))
    traces = sorted(p for p in root.iterdir() if _is_entry(p))
    if not traces:
        raise UsageError(
            "run.no_traces", "the folder holds no trace file", path=str(root),
            hint=f"expected files ending in {', '.join(TRACE_SUFFIXES)} or run directories",
        )
    return traces


def is_trace_folder(path: str | Path) -> bool:
    """True when ``path`` is a folder of traces (one per rank or run), not a run directory."""
    root = Path(path)
    if not root.is_dir() or is_run_dir(root):
        return False
    return any(_is_entry(p) for p in root.iterdir())


def uncompressed_bytes(path: str | Path) -> int:
    """The size of ``path`` once decompressed (gzip trailer), else its size on disk.

    The gzip trailer holds the size modulo 4 GiB; a compressed file is assumed
    to expand at least 4x (Kineto JSON gzips 10-15x), which picks the right
    wrap count for the sizes seen in practice.
    """
    src = Path(path)
    if src.is_dir():  # a run directory: its trace file(s) decide the memory it needs
        return sum(uncompressed_bytes(f) for f in src.glob("trace.*") if f.is_file())
    size = src.stat().st_size
    if not src.name.endswith(".gz") or size < 18:
        return size
    with open(src, "rb") as fh:
        if fh.read(2) != b"\x1f\x8b":
            return size
        fh.seek(-4, 2)
        isize = struct.unpack("<I", fh.read(4))[0]
    wraps = max(0, (4 * size - isize + _GZIP_ISIZE_WRAP - 1) // _GZIP_ISIZE_WRAP)
    return isize + wraps * _GZIP_ISIZE_WRAP


