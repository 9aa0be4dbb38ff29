"""What ``analyze`` accepts: a ``TraceTables``, a trace file, or a run directory."""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Callable

from ..trace.errors import TraceNotFoundError, UsageError
from ..trace.fileio import check_input
from ..trace.paths import require_run_manifest, run_trace_file
from ..trace.tables import DeferredTraceTables, TraceTables

TRACE_NAMES = ("trace.json.gz", "trace.json", "trace.sqlite", "trace.nsys-rep")


@dataclass
class Source:
    """Tables plus what a run manifest says about them.

    ``reload`` reads the tables again cheaply (from the parse cache, which the
    load has just filled); it is None when the caller handed over the tables or
    the parse cache is off, and then the tables stay in memory.
    """

    tables: TraceTables
    path: str
    manifest: dict | None
    new_tokens: int | None
    runs: int | None
    reload: Callable[[], TraceTables] | None = None

    def release_tables(self) -> TraceTables:
        """Swap the tables for ones read again on first access, when they can be.

        The decomposer needs only its numpy views once they are built; letting
        the other columns go (input shapes, launch geometry, flows: ~0.9 GB of
        1.4 GB at 10 M events) is most of what keeps a cold ``analyze`` below
        the size of the JSON it reads. ``meta`` and ``diagnostics`` stay.

        It then waits for the parse cache's background write of these tables
        (~2 s at 10 M events): the writer holds them until it is done, and the
        decomposition's own working set on top of them made the peak 2.8 GB.
        """
        if self.reload is not None and not isinstance(self.tables, DeferredTraceTables):
            self.tables = DeferredTraceTables(self.tables.meta, self.tables.diagnostics, self.reload)
            from ..readers import wait_for_cache_entry

            wait_for_cache_entry(self.path)
        return self.tables


def resolve_input(path_or_tables) -> Source:
    """Load ``path_or_tables`` (see :func:`taxbreak.decompose.analyze`)."""
    if isinstance(path_or_tables, TraceTables):
        return Source(path_or_tables, path_or_tables.meta.path, None, None, None)
    if not isinstance(path_or_tables, (str, Path)):
        raise UsageError("usage.invalid", f"analyze() takes a path or TraceTables, not {type(path_or_tables).__name__}")
    path = Path(path_or_tables)
    if not path.exists():
        raise TraceNotFoundError("input.not_found", "no such file or directory", path=str(path),
                                 hint="give a trace file (.json, .json.gz, .sqlite, .nsys-rep) or a run directory")
    check_input(path, allow_dir=True, what="trace")  # a FIFO or device: refused unread
    # readers sit below decompose; imported late to keep import light
    from ..readers import load_trace
    from ..readers.cache import cache_enabled

    trace, manifest = (path, None) if not path.is_dir() else _run_trace(path)
    reload = partial(load_trace, trace) if cache_enabled() else None
    return Source(load_trace(trace), str(trace), manifest, _positive_int(manifest, "new_tokens"),
                  _positive_int(manifest, "runs"), reload)


def _run_trace(run_dir: Path) -> tuple[Path, dict]:
    manifest = require_run_manifest(run_dir)
    return _trace_in(run_dir, manifest), manifest


def _trace_in(run_dir: Path, manifest: dict) -> Path:
    found = run_trace_file(run_dir, TRACE_NAMES, manifest)  # confined to the folder (trace/paths.py)
    if found is not None:
        return found
    raise TraceNotFoundError("run.no_traces", "run directory without a trace file", path=str(run_dir),
                             hint=f"expected one of {', '.join(TRACE_NAMES)}")


def _positive_int(manifest: dict | None, key: str) -> int | None:
    if manifest is None:
        return None
    value = manifest.get(key)
    if value is None:
        value = (manifest.get("shape") or {}).get(key) if isinstance(manifest.get("shape"), dict) else None
    return int(value) if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
