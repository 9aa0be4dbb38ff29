"""Which reader a path needs, decided from its content (not its name).

* gzip magic ``1f 8b`` -> Kineto JSON, gzip-compressed;
* optional UTF-8 BOM and whitespace, then ``{`` or ``[`` -> Kineto JSON;
* ``SQLite format 3\\0`` header -> Nsight Systems SQLite export;
* ``.nsys-rep`` extension -> Nsight Systems report (exported with the nsys CLI);
* a UTF-16/32 byte-order mark -> ``json.encoding`` (JSON must be UTF-8);
* a directory holding ``manifest.json`` and ``trace.json.gz`` / ``trace.json`` /
  ``trace.sqlite`` -> a run directory (``taxbreak profile``): its trace.
"""
from __future__ import annotations

import stat
from dataclasses import dataclass
from pathlib import Path

from ..trace.errors import TraceFormatError, TraceNotFoundError, UnsupportedFormatError
from ..trace.fileio import check_input
from ..trace.paths import read_run_manifest, run_trace_file
from . import bounds as B

KINETO = "kineto"
NSYS_SQLITE = "nsys_sqlite"
NSYS_REP = "nsys_rep"

RUN_TRACE_NAMES = ("trace.json.gz", "trace.json", "trace.sqlite", "trace.nsys-rep")
_SQLITE_MAGIC = b"SQLite format 3\x00"
_GZIP_MAGIC = b"\x1f\x8b"
_UTF8_BOM = b"\xef\xbb\xbf"
_WIDE_BOMS = (b"\xff\xfe", b"\xfe\xff")
_HEAD_BYTES = 4096
_SPACE = b" \t\r\n"  # JSON whitespace


@dataclass(frozen=True)
class TraceFormat:
    """What :func:`detect_format` found: ``kind`` (``kineto`` | ``nsys_sqlite`` |
    ``nsys_rep``) and whether the bytes are gzip-compressed."""

    kind: str
    compressed: bool = False


def resolve_trace_path(path: str | Path) -> Path:
    """The trace file ``path`` names: itself, or the trace inside a run directory.

    Raises:
        TraceNotFoundError: ``input.not_found``.
        UnsupportedFormatError: ``run.not_a_run`` (a directory without a
            manifest) or ``run.no_traces`` (a run directory without a trace).
    """
    path = Path(path)
    if not stat.S_ISDIR(check_input(path, allow_dir=True, what="trace").st_mode):
        return path
    manifest = read_run_manifest(path)
    if manifest is None:
        raise UnsupportedFormatError("run.not_a_run", "a directory without manifest.json", str(path),
                                     hint="pass a trace file, or a run directory written by `taxbreak profile`")
    found = run_trace_file(path, RUN_TRACE_NAMES, manifest)
    if found is not None:
        return found
    raise UnsupportedFormatError("run.no_traces", "a run directory without a trace", str(path),
                                 hint=f"expected one of {', '.join(RUN_TRACE_NAMES)}")


def detect_format(path: str | Path) -> TraceFormat:
    """The format of the file at ``path``, from its first bytes.

    Raises:
        TraceNotFoundError: ``input.not_found``, ``input.unreadable``.
        TraceFormatError: ``input.empty``, ``json.encoding`` (UTF-16/32 JSON).
        UnsupportedFormatError: ``format.unknown``.
    """
    path = Path(path)
    head = _read_head(path)
    if path.name.endswith(".nsys-rep"):
        return TraceFormat(NSYS_REP)
    if not head:
        raise TraceFormatError("input.empty", "the file is empty", str(path), hint="the profiler wrote nothing")
    if head.startswith(_GZIP_MAGIC):
        return TraceFormat(KINETO, compressed=True)
    if head.startswith(_SQLITE_MAGIC):
        return TraceFormat(NSYS_SQLITE)
    if head.startswith(_WIDE_BOMS):
        raise TraceFormatError("json.encoding", "the file is UTF-16/32 encoded", str(path), location="byte 0",
                               hint="JSON traces must be UTF-8; re-save the file as UTF-8")
    text = head[3:] if head.startswith(_UTF8_BOM) else head
    first = text.lstrip(_SPACE)[:1] or _first_after_spaces(path, len(head))
    if first in (b"{", b"["):
        return TraceFormat(KINETO)
    if not first:
        raise TraceFormatError("input.empty", "the file holds only whitespace", str(path))
    raise UnsupportedFormatError(
        "format.unknown",
        "unrecognised content",  # none of it shown: the path may be a link to a secret (/proc/self/environ)
        str(path),
        hint="taxbreak reads Kineto JSON (.json/.json.gz) and Nsight Systems exports (.sqlite/.nsys-rep)",
    )


def _first_after_spaces(path: Path, offset: int) -> bytes:
    """The first non-whitespace byte from ``offset`` on (b"" at the end): a JSON trace may open
    with any amount of whitespace (the head alone called 4 KB of it empty); the run is bounded
    like any value the reader must hold (``json.too_long``)."""
    bounds = B.current()
    with path.open("rb") as fh:
        fh.seek(offset)
        while block := fh.read(1 << 16):
            rest = block.lstrip(_SPACE)
            if rest:
                return rest[:1]
            offset += len(block)
            if offset > bounds.string_bytes:
                raise B.too_long(path, bounds, offset)
    return b""


def _read_head(path: Path) -> bytes:
    check_input(path, what="trace")  # a FIFO blocks a read forever, a device never ends: refused unread
    try:
        with path.open("rb") as fh:
            return fh.read(_HEAD_BYTES)
    except FileNotFoundError as err:
        raise TraceNotFoundError("input.not_found", "no such file", str(path), hint="check the path") from err
    except IsADirectoryError as err:
        raise TraceNotFoundError("input.unreadable", "a directory, not a trace file", str(path)) from err
    except OSError as err:
        raise TraceNotFoundError("input.unreadable", f"cannot read the file: {err.strerror}", str(path)) from err

