"""Which files of a folder (and of its run folders) are traces, and how big they are once decompressed."""
from __future__ import annotations

import errno
import stat
import struct
from dataclasses import dataclass, field
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


# Folders deeper than this under the given folder are not searched (a run folder is one or two levels down).
MAX_DEPTH = 8
# Why an entry of a folder was passed over without being opened (counted, never fatal).
SKIP_REASONS = ("dangling_link", "link_loop", "not_a_regular_file", "unreadable")


def is_run_dir(path: str | Path) -> bool:
    """True when ``path`` is a run directory written by ``taxbreak profile``."""
    return (Path(path) / RUN_MANIFEST).is_file()


def _is_trace_name(name: str) -> bool:
    # *.pt.trace.json.gz (torch.profiler's tensorboard_trace_handler) ends in .json.gz too
    return not name.startswith(".") and name not in NOT_TRACES and name.endswith(TRACE_SUFFIXES)


def _kind(path: Path) -> str:
    """``file``, ``dir``, or a skip reason; a FIFO or device is never opened (stat, not open)."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "dangling_link" if path.is_symlink() else "unreadable"
    except OSError as err:  # ELOOP: a symlink loop; EACCES and friends
        return "link_loop" if err.errno == errno.ELOOP else "unreadable"
    if stat.S_ISDIR(mode):
        return "dir"
    return "file" if stat.S_ISREG(mode) else "not_a_regular_file"


@dataclass
class Discovery:
    """What a folder holds: the traces (files and run directories) and what was skipped, by reason."""

    traces: list[Path] = field(default_factory=list)
    skipped: dict[str, list[str]] = field(default_factory=dict)

    def skip(self, reason: str, path: Path) -> None:
        self.skipped.setdefault(reason, []).append(str(path))


def discover(folder: str | Path, max_depth: int = MAX_DEPTH) -> Discovery:
    """The trace files and run directories in ``folder`` and its sub-folders (run folders), sorted.

    Hidden entries and taxbreak's own JSON outputs are not traces; a run directory is one entry
    (not searched further). Dangling links, link loops, FIFOs, sockets and devices with a trace
    name, and folders reached twice through links, are skipped and counted by reason.

    Raises:
        TraceNotFoundError: ``folder`` does not exist (``input.not_found``).
    """
    root = Path(folder)
    if not root.is_dir():
        raise TraceNotFoundError("input.not_found", "no such folder", path=str(root))
    found = Discovery()
    _walk(root, found, max_depth, seen=set())
    found.traces.sort()
    return found


def _walk(folder: Path, found: Discovery, depth: int, seen: set) -> None:
    try:
        st = folder.stat()
        entries = sorted(folder.iterdir())
    except OSError:
        found.skip("unreadable", folder)
        return
    if (st.st_dev, st.st_ino) in seen:  # a link back to a folder already searched
        found.skip("link_loop", folder)
        return
    seen.add((st.st_dev, st.st_ino))
    for path in entries:
        if path.name.startswith("."):
            continue
        kind = _kind(path)
        if kind == "dir":
            if is_run_dir(path):
                found.traces.append(path)
            elif depth > 0:
                _walk(path, found, depth - 1, seen)
        elif _is_trace_name(path.name):
            found.traces.append(path) if kind == "file" else found.skip(kind, path)


def find_traces(folder: str | Path) -> list[Path]:
    """The traces of :func:`discover`, sorted by path.

    Raises:
        TraceNotFoundError: ``folder`` does not exist (``input.not_found``).
        UsageError: it holds no trace file (``run.no_traces``).
    """
    traces = discover(folder).traces
    if not traces:
        raise UsageError(
            "run.no_traces", "the folder holds no trace file", path=str(folder),
            hint=f"expected files ending in {', '.join(TRACE_SUFFIXES)} or run directories",
        )
    return traces


def is_trace_folder(path: str | Path) -> bool:
    """True when ``path`` is a folder of traces (one per rank or run), not a run directory."""
    root = Path(path)
    if not root.is_dir() or is_run_dir(root):
        return False
    return bool(discover(root).traces)


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


