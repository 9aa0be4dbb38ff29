"""Analysis cache: the result of ``analyze`` kept as Arrow files next to the parse cache.

The parse cache alone leaves the decomposition to redo on every run; for
large traces that is most of the time (docs/performance.md, "Cold and cached `analyze`"). An
entry here holds the frames of an ``Analysis`` as Arrow IPC files with LZ4
(kernels, steps, phases, ops, host_partition) plus summary.json and
trace_meta.json, and is keyed by everything the result depends on:

    the trace (absolute path, size, mtime_ns, content fingerprint), a run directory's manifest (same),
    floor_us, step_pattern, tokens, the floor cache (names, mtimes),
    taxbreak.__version__, ANALYSIS_FORMAT_VERSION and the decompose/readers source files (size, mtime_ns)

A hit reads the frames back, and the tables from the parse cache only when
something touches them. Writes happen in a background thread (joined before
the process exits), are atomic and share the size cap and ``taxbreak cache clear`` of the parse cache;
an unreadable entry is removed and recomputed (``cache.corrupt_entry``).
"""
from __future__ import annotations

import functools
import hashlib
import json
import logging
from pathlib import Path

import msgspec
import pyarrow as pa
import pyarrow.feather as feather

from .. import __version__
from ..decompose.result import Analysis
from ..readers import load_trace
from ..readers import resolve_trace_path
from ..readers.cache import (bound_settings, cache_enabled, code_fingerprint, file_identity, is_entry, remove_entry,
                             store_in_background, touch_entry, wait_for_writes, writes_held)
from ..trace.errors import TaxbreakError
from ..trace.fileio import check_input
from ..trace.paths import cache_dir
from ..trace.progress import ANALYZE_STAGES, Stages
from ..trace.tables import META_FILE, DeferredTraceTables, read_meta

log = logging.getLogger(__name__)

# Bump when Analysis gains or changes a frame or summary key for the same input.
ANALYSIS_FORMAT_VERSION = 7  # 7: phases frame with the "all" row, nested values as long-form frames (not JSON text); 2: trace_meta.json in the entry (tables read on demand); 3: Arrow IPC frames; 4: idle frame, queue wait split; 5: idle causes launch_floor, launch_latency, graph_internal, copy_issued; 6: busy split per kind, captured launches, warmup, op_accounts frame, root-chained T_dispatch, library evidence
FRAMES = ("kernels", "steps", "phases", "ops", "host_partition", "idle", "op_accounts")


def analyze(path, **options) -> Analysis:
    """``taxbreak.decompose.analyze``, imported on a miss only: a hit needs neither the
    decomposer nor pandas (docs/performance.md, "Start-up")."""
    from ..decompose.analysis import analyze as decompose

    return decompose(path, **options)


def analysis_cache_dir() -> Path:
    """The folder of the analysis cache (``cache_dir() / "analysis"``)."""
    return cache_dir() / "analysis"


def _stat_ident(path: Path) -> list:
    if path.is_dir():  # a run directory: its files are keyed one by one below
        st = path.stat()
        return [str(path.resolve()), st.st_size, st.st_mtime_ns]
    return file_identity(path)  # with the content fingerprint of the parse cache


def _floor_fingerprint() -> list:
    """A newly measured floor changes ΔKT: the floor cache's files are part of the key."""
    folder = cache_dir() / "floor"
    if not folder.is_dir():
        return []
    return [[f.name, f.stat().st_mtime_ns] for f in sorted(folder.glob("*.json"))]


def analysis_key(path: str | Path, floor_us: float | None, step_pattern: str | None, tokens: int | None) -> str:
    """The entry name of one ``analyze`` call: every input that decides the result.

    Raises:
        OSError: when ``path`` cannot be stat'ed.
        TaxbreakError: a run directory whose trace cannot be found (the analysis would raise it too).
    """
    src = Path(path)
    ident = [_stat_ident(src)]
    if src.is_dir():  # a run directory: its manifest (tokens, runs) and the trace analyze reads, whatever its name
        ident += [_stat_ident(src / name) for name in ("manifest.json",) if (src / name).is_file()]
        ident += [_stat_ident(resolve_trace_path(src))]
    ident += [floor_us, step_pattern, tokens, _floor_fingerprint(), __version__, ANALYSIS_FORMAT_VERSION,
              code_fingerprint("decompose", "readers", "trace"), bound_settings()]
    return hashlib.sha256(json.dumps(ident).encode()).hexdigest()[:32]


def cached_analyze(path, floor_us: float | None = None, step_pattern: str | None = None,
                   tokens: int | None = None, use_cache: bool | None = None, progress=None) -> Analysis:
    """``taxbreak.decompose.analyze(path, ...)``, served from the analysis cache when possible.

    Args:
        path: a trace file or run directory (``TraceTables`` are analyzed uncached).
        floor_us, step_pattern, tokens: as for ``analyze``.
        use_cache: False computes and neither reads nor writes any cache; None: on
            unless ``$TAXBREAK_NO_CACHE`` is set (as for the parse cache).
        progress: the analysis's progress hook (taxbreak/trace/progress.py); a cache hit
            reports one stage, ``reading cached analysis``.

    Returns:
        The :class:`~taxbreak.decompose.Analysis`; from the cache, its frames come
        from Parquet and ``summary`` from JSON (NumPy scalars become Python numbers).
    """
    use_cache = cache_enabled(use_cache)
    target = Path(path) if isinstance(path, (str, Path)) else None
    options = {"floor_us": floor_us, "step_pattern": step_pattern, "tokens": tokens, "progress": progress}
    if target is None or not target.exists():  # tables, or a bad path that analyze reports
        return analyze(path, **options)
    check_input(target, allow_dir=True, what="trace")  # before the key's fingerprint opens it: a FIFO blocks
    if not use_cache:  # a run directory still goes through analyze's own loading
        if target.is_file():
            Stages(progress, ANALYZE_STAGES).enter("reading trace")
        source = load_trace(target, use_cache=False, progress=progress) if target.is_file() else path
        return analyze(source, **options)
    entry = analysis_cache_dir() / analysis_key(path, floor_us, step_pattern, tokens)
    wait_for_writes(entry.name)  # this process may still be writing the entry
    corrupt = False
    if is_entry(entry):
        Stages(progress, ("reading cached analysis",)).enter("reading cached analysis")
        found = _read(entry, path, {"floor_us": floor_us, "step_pattern": step_pattern, "tokens": tokens})
        if found is not None:
            return found
        corrupt = True
    result = analyze(path, **options)
    # held until the CLI's output is out: nothing changes the frames meanwhile, so they are
    # converted one at a time as written instead of copied into Arrow all at once now
    writer = _frame_writer(result) if writes_held() else _snapshot_writer(result)
    store_in_background(entry, writer, {"path": str(path)}, hold=True)
    if corrupt:
        result.tables.diagnostics.add("cache.corrupt_entry", 1, f"{entry} unreadable; analyzed {path} again")
    return result


def _snapshot_writer(result: Analysis):
    """A writer of the entry's files from a snapshot of ``result`` taken now.

    The frames become Arrow tables here (immutable; 0.04 s at 1.65 M kernels) and
    the JSON texts are made here, so a caller that changes the frames afterwards
    cannot race with the background write. Arrow IPC with LZ4 instead of
    Parquet: at 10 M events the kernels frame takes 0.31 s to write against
    0.99 s (files ~1.5x larger) and reads back faster.
    """
    tables = {name: pa.Table.from_pandas(getattr(result, name), preserve_index=False) for name in FRAMES}
    return functools.partial(_write_entry, tables, result.to_json_bytes(), result.tables.meta_json())


def _frame_writer(result: Analysis):
    """A writer of the entry's files that reads ``result`` when it runs, one frame at a time:
    for a write held until the output is out (``deferred_writes``), when nothing changes
    ``result`` any more; the Arrow copy of one frame is alive at a time, not of all seven."""
    def write(folder: Path) -> None:
        frames = {name: getattr(result, name) for name in FRAMES}
        _write_entry(frames, result.to_json_bytes(), result.tables.meta_json(), folder)

    return write


def _write_entry(frames: dict, summary_json: bytes, meta_json: str, folder: Path) -> None:
    """The frames (Arrow tables or pandas frames) as LZ4 Arrow IPC, the summary and the trace metadata."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, frame in frames.items():
        # one thread: no executor, which the interpreter refuses once it is shutting down
        table = frame if isinstance(frame, pa.Table) else pa.Table.from_pandas(frame, preserve_index=False, nthreads=1)
        feather.write_feather(table, folder / f"{name}.arrow", compression="lz4")
    (folder / "summary.json").write_bytes(summary_json)
    (folder / META_FILE).write_text(meta_json)  # a hit then needs no table for a report


def _read(entry: Path, path, options: dict) -> Analysis | None:
    """The entry as a :class:`CachedAnalysis`, or None (and the entry removed) when unreadable."""
    try:
        ops = feather.read_table(entry / "ops.arrow")  # Arrow only: a pandas frame when read
        summary = msgspec.json.decode((entry / "summary.json").read_bytes())
        meta, diagnostics = read_meta(entry)
    except Exception as err:  # noqa: BLE001 - any unreadable entry is recomputed, never fatal
        log.debug("analysis cache entry %s unreadable (%s: %s); recomputing", entry, type(err).__name__, err)
        remove_entry(entry)
        return None
    touch_entry(entry)
    # the tables (from the parse cache, or parsed again) only when something reads them
    tables = DeferredTraceTables(meta, diagnostics, functools.partial(load_trace, path))  # picklable
    return CachedAnalysis(entry, ops, summary, tables, functools.partial(_analyze_again, path, entry.name, options))


def _read_frame(entry: Path, name: str, table: pa.Table | None = None):
    """The frame ``name`` of an entry as pandas (``table``: its Arrow table, already read)."""
    if table is None:
        table = feather.read_table(entry / f"{name}.arrow")
    return table.to_pandas()


class CachedAnalysis(Analysis):
    """An :class:`Analysis` served by the cache.

    ``summary`` is read at once, with ``ops`` as an Arrow table (the terminal
    report shows it); every frame becomes a pandas DataFrame on first access,
    so a JSON output imports neither pandas nor the decomposer (0.3 s of a
    100 k-event cached ``analyze``). At 1 M events the other frames are ~0.15 s
    of a ~0.7 s cached ``analyze``, at 10 M ~0.6 s. A frame whose entry has been
    removed since the hit (cache pruned or cleared) is computed again from the
    trace, if the trace is unchanged.
    """

    def __init__(self, entry: Path, ops: pa.Table, summary: dict, tables, analyze_again) -> None:
        self.summary, self.tables = summary, tables
        self._entry, self._analyze_again, self._read_ops = entry, analyze_again, ops

    def __getattr__(self, name: str):
        # called only when normal lookup fails: a frame not made yet
        if name not in FRAMES or "_entry" not in self.__dict__:
            raise AttributeError(name)
        try:
            frame = _read_frame(self._entry, name, self.__dict__.pop("_read_ops", None) if name == "ops" else None)
        except Exception as err:  # noqa: BLE001 - a vanished entry: the frame is computed again
            log.debug("analysis cache entry %s gone (%s); analyzing again for %s", self._entry, err, name)
            frame = getattr(self._recomputed(), name)
        setattr(self, name, frame)
        return frame

    def _recomputed(self) -> Analysis:
        """The analysis computed again, once, for every frame the entry can no longer give."""
        if "_again" not in self.__dict__:
            self._again = self._analyze_again()
            self.tables.diagnostics.add("cache.corrupt_entry", 1, f"{self._entry} removed before its frames "
                                        "were read; analyzed again")
        return self._again


def _analyze_again(path, key: str, options: dict) -> Analysis:
    """The analysis of ``path`` recomputed, refused when the trace changed since the cache hit
    (its frames would not belong to the summary already handed out)."""
    try:
        same = analysis_key(path, **options) == key
    except OSError:
        same = False
    if not same:
        raise TaxbreakError("cache.corrupt", "the analysis cache entry was removed and the trace changed "
                            "since it was read", path=str(path),
                            hint="call cached_analyze(path) again for a result of the trace as it is now")
    return analyze(path, **options)
