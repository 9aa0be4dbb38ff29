"""Trace readers: every supported format into the canonical :class:`TraceTables`.

``load_trace(path)`` is the entry point: it resolves a run directory to its
trace and parses it; ``parse_trace`` detects the format from the content
(:mod:`taxbreak.readers.detect`) and dispatches to one reader. The parse cache
(:mod:`taxbreak.readers.cache`) wraps ``parse_trace``; nothing else changes.
"""
from __future__ import annotations

import functools
from pathlib import Path

from ..trace.errors import TaxbreakError
from ..trace.fileio import unreadable
from ..trace.progress import reporting
from ..trace.tables import TraceTables
from .cache import cache_key, cached_load, wait_for_writes
from .detect import KINETO, NSYS_REP, NSYS_SQLITE, TraceFormat, detect_format, resolve_trace_path

__all__ = ["TraceFormat", "detect_format", "load_trace", "parse_trace", "read_kineto", "resolve_trace_path",
           "wait_for_cache_entry"]


def load_trace(path: str | Path, *, allow_truncated: bool = False, use_cache: bool | None = None,
               progress=None) -> TraceTables:
    """Read a trace file or a run directory into canonical tables.

    Args:
        path: a Kineto ``.json``/``.json.gz``, an Nsight ``.sqlite`` export, an
            ``.nsys-rep`` report, or a run directory (``manifest.json`` + trace).
        allow_truncated: keep the complete events of a truncated Kineto trace.
        use_cache: read/write the Parquet parse cache (:mod:`taxbreak.readers.cache`);
            None: on unless ``$TAXBREAK_NO_CACHE`` is set.
        progress: a hook (``taxbreak.trace.progress``) given the bytes read of a Kineto file
            as ``ProgressEvent("reading trace", done, total, unit="bytes")``; nothing is printed.

    Raises:
        TaxbreakError: ``input.*``, ``format.unknown``, ``run.*``, ``json.*``,
            ``gzip.truncated``, ``kineto.*``, ``nsys.*`` (docs/trace-model.md).
    """
    trace_path = resolve_trace_path(path)
    parse = functools.partial(parse_trace, allow_truncated=allow_truncated)
    with reporting(progress):
        return cached_load(trace_path, parse, use_cache=use_cache,
                           variant="allow_truncated" if allow_truncated else "")


def parse_trace(path: str | Path, *, allow_truncated: bool = False) -> TraceTables:
    """Parse one trace file with the reader its content calls for (no caching).

    Raises:
        TaxbreakError: as :func:`load_trace`; an OSError of any reader while it reads ``path``
            (an I/O error, a file removed meanwhile) as ``input.unreadable`` / ``input.not_found``
            with the path, so that the CLI never reports it as an output it could not write.
    """
    path = Path(path)
    try:
        return _parse(path, allow_truncated)
    except OSError as err:
        raise unreadable(err, path, what="trace") from err


def _parse(path: Path, allow_truncated: bool) -> TraceTables:
    fmt = detect_format(path)
    if fmt.kind == KINETO:
        from .kineto import read_kineto  # on use: a cached trace needs no reader

        return read_kineto(path, allow_truncated=allow_truncated)
    from . import nsys  # imported lazily: the Kineto path does not need sqlite

    if fmt.kind == NSYS_SQLITE:
        return nsys.read_nsys(path)
    assert fmt.kind == NSYS_REP
    return nsys.read_nsys_rep(path)


def __getattr__(name: str):
    # the Kineto reader loads on first use: a run served by the caches never parses
    if name == "read_kineto":
        from .kineto import read_kineto

        return read_kineto
    raise AttributeError(f"module 'taxbreak.readers' has no attribute {name!r}")


def wait_for_cache_entry(path: str | Path) -> None:
    """Block until this process's background parse-cache write for ``path`` (if any) is done."""
    try:
        key = cache_key(resolve_trace_path(path))
    except (OSError, TaxbreakError):  # gone or unreadable since it was read: nothing of ours to wait for
        return
    wait_for_writes(key)
