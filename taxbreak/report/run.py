"""Resolve ``RUN_DIR|TRACE`` arguments into an analysis and its run manifest.

A run directory (docs/architecture.md) holds ``manifest.json`` next to the
trace (``trace.json.gz`` or ``trace.sqlite``); a bare trace file has no
manifest. Every report command takes either.
"""
from __future__ import annotations

import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..trace.errors import TraceNotFoundError, UnsupportedFormatError
from ..trace.fileio import check_input
from ..trace.paths import read_run_manifest, run_trace_file

MANIFEST = "manifest.json"
TRACE_NAMES = ("trace.json.gz", "trace.json", "trace.sqlite", "trace.nsys-rep")
TRACE_SUFFIXES = (".json.gz", ".json", ".sqlite", ".nsys-rep")
_NOT_TRACES = {MANIFEST, "summary.json", "trace_meta.json", "sweep.json", "sweep_point.json"}
SWEEP_INDEX = "sweep.json"  # written by `taxbreak sweep` (docs/sweep.md)


@dataclass
class Run:
    """One analysed input: the trace path, its manifest (or None) and the Analysis."""

    path: Path
    trace_path: Path
    manifest: dict | None
    analysis: Any


def find_trace(path: str | Path) -> tuple[Path, dict | None]:
    """The trace file and manifest of ``path`` (a run directory or a trace file).

    Raises:
        TraceNotFoundError: ``input.not_found`` when the path does not exist.
        TraceNotFoundError: ``run.no_traces`` for a directory without a trace.
        UnsupportedFormatError: ``run.not_a_run`` for a directory with several
            traces and none of the run-directory names.
    """
    p = Path(path)
    if not p.exists():
        raise TraceNotFoundError("input.not_found", "no such file or directory", path=str(p),
                                 hint="give a run directory (with manifest.json) or a trace file")
    if not stat.S_ISDIR(check_input(p, allow_dir=True, what="trace").st_mode):  # a FIFO or device: refused unread
        return p, None
    if (p / SWEEP_INDEX).is_file() and not (p / MANIFEST).is_file():
        raise UnsupportedFormatError("run.not_a_run", "a sweep directory, not one run", path=str(p),
                                     hint=f"the sweep's own report is {p / 'sweep.html'}; give one of its "
                                          "point directories (b<B>-s<S>) here")
    manifest = read_run_manifest(p)
    named = run_trace_file(p, TRACE_NAMES, manifest)  # the manifest's "trace", confined to the folder
    if named is not None:
        return named, manifest
    found = sorted(f for f in p.iterdir()
                   if f.is_file() and f.name.endswith(TRACE_SUFFIXES) and f.name not in _NOT_TRACES)
    if len(found) == 1:
        return found[0], manifest
    if not found:
        raise TraceNotFoundError("run.no_traces", "directory holds no trace file", path=str(p),
                            hint="expected trace.json.gz or trace.sqlite (written by `taxbreak profile`)")
    raise UnsupportedFormatError("run.not_a_run", f"directory holds {len(found)} traces and no trace.json.gz",
                        path=str(p), hint="name one trace file explicitly")


def load_run(path: str | Path, floor_us: float | None = None, step_pattern: str | None = None,
             tokens: int | None = None, progress=None) -> Run:
    """Analyse a run directory or trace file with the same options as ``analyze``.

    Args:
        path: a run directory (manifest.json + trace) or a trace file.
        floor_us: launch floor override (µs); None lets the decomposer resolve it.
        step_pattern: step marker regex (``--step-pattern``).
        tokens: output-token count for the per-token metrics; None lets the
            decomposer read it from the run manifest.
        progress: the analysis's progress hook (``taxbreak.trace.progress``); nothing is printed.
    """
    from ..decompose import analyze

    trace_path, manifest = find_trace(path)
    # A run directory goes to analyze() whole, so that it reads the manifest's
    # token count and runs itself; anything else is analysed as its trace file.
    target = Path(path) if manifest is not None else trace_path
    analysis = analyze(target, floor_us=floor_us, step_pattern=step_pattern, tokens=tokens, progress=progress)
    return Run(Path(path), trace_path, manifest, analysis)
