"""``trace_handler(dir)``: an ``on_trace_ready`` handler for the user's own profiler.

::

    import taxbreak, torch
    from torch.profiler import profile, schedule, tensorboard_trace_handler

    with profile(schedule=schedule(wait=1, warmup=1, active=2, repeat=2),
                 on_trace_ready=taxbreak.trace_handler("runs/serve",
                                                       then=tensorboard_trace_handler("tb/serve")),
                 record_shapes=True, with_stack=True) as prof:
        for batch in batches:
            with taxbreak.phase("decode"):
                serve(batch)
            prof.step()

Each completed cycle becomes one run directory ``<dir>/step-<n>/`` (``n`` is
the profiler step at which the cycle ended) with the layout of ``taxbreak
profile``: the trace, ``manifest.json``, ``tables/``, ``analysis/`` and
``summary.json``. The trace is named as ``tensorboard_trace_handler`` names
its files, ``<worker_name>.<time_ns>.pt.trace.json.gz`` (``worker_name``
defaults to ``<host>_<pid>``), so TensorBoard's profiler plugin and HTA read
the same folder; ``manifest.json`` records the name (``"trace"``) and every
``taxbreak`` command given the run directory finds it there.

``then`` chains other handlers (one callable or a sequence), called after
taxbreak's own, in order. The profiler can save a cycle's trace only once
(torch raises "Trace is already saved" on a second export), so the chained
handlers get the profiler with ``export_chrome_trace`` answered from the file
taxbreak already wrote (copied, or decompressed for a ``.json`` target). They
run even when taxbreak's export or analysis fails; that error is raised after them.
"""
from __future__ import annotations

import gzip
import os
import shutil
import socket
import time
from pathlib import Path
from typing import Callable, Iterable

from ..trace.fileio import atomic_output
from . import manifest as mf
from .hostinfo import host_info

TRACE_SUFFIX = ".pt.trace.json.gz"  # torch.profiler.tensorboard_trace_handler(use_gzip=True)
Handler = Callable[[object], object]


class TraceHandler:
    """Callable ``handler(prof)``; remembers the run directories it wrote."""

    def __init__(self, out_dir: str | Path, *, analyze: bool = True, worker_name: str | None = None,
                 then: Handler | Iterable[Handler] | None = None) -> None:
        self.out_dir = Path(out_dir)
        self.analyze = analyze
        self.worker_name = worker_name or default_worker_name()
        self.then = chained(then)
        self.run_dirs: list[Path] = []
        self.analyses: list[object | None] = []

    def __call__(self, prof) -> None:
        exported: list[Path] = []
        try:
            self._write_run(prof, exported)
        finally:  # the chained handlers still see the cycle if ours failed
            shared = ExportedProfiler(prof, exported[0]) if exported else prof
            for handler in self.then:
                handler(shared)

    def _write_run(self, prof, exported: list[Path]) -> None:
        run_dir = self.out_dir / f"step-{prof.step_num:06d}"
        run_dir.mkdir(parents=True, exist_ok=True)
        trace_path = run_dir / trace_file_name(self.worker_name)
        with atomic_output(trace_path) as tmp:  # the temporary name keeps .json.gz: torch gzips by suffix
            prof.export_chrome_trace(str(tmp))
        exported.append(trace_path)
        manifest = _cycle_manifest(prof, trace_path, len(self.run_dirs))
        mf.write_json(run_dir / mf.MANIFEST, manifest)
        analysis = None
        if self.analyze:
            derived = mf.write_derived(run_dir, trace_path)
            manifest["outputs"] = derived.status
            mf.write_json(run_dir / mf.MANIFEST, manifest)
            analysis = derived.analysis
        self.run_dirs.append(run_dir)
        self.analyses.append(analysis)


class ExportedProfiler:
    """The profiler as a chained handler sees it: every attribute is the profiler's, but
    ``export_chrome_trace(path)`` writes the trace already exported to ``trace_path``."""

    def __init__(self, prof, trace_path: Path) -> None:
        self._prof = prof
        self._trace_path = trace_path

    def __getattr__(self, name: str):
        return getattr(self._prof, name)

    def export_chrome_trace(self, path: str, **_options) -> None:
        """Write the trace to ``path``; export options (``use_python_export``) do not apply to a copy."""
        with atomic_output(path) as tmp:  # never through a link, never half a file (docs/reliability.md)
            if str(path).endswith(".gz"):
                shutil.copyfile(self._trace_path, tmp)
                return
            with gzip.open(self._trace_path, "rb") as src, open(tmp, "wb") as dst:
                shutil.copyfileobj(src, dst)


def default_worker_name() -> str:
    """``<host>_<pid>``, tensorboard_trace_handler's default worker name."""
    return f"{socket.gethostname()}_{os.getpid()}"


def trace_file_name(worker_name: str, time_ns: int | None = None) -> str:
    """``<worker_name>.<time_ns>.pt.trace.json.gz``, as tensorboard_trace_handler names a trace."""
    return f"{worker_name}.{time.time_ns() if time_ns is None else time_ns}{TRACE_SUFFIX}"


def chained(then: Handler | Iterable[Handler] | None) -> tuple[Handler, ...]:
    """``then`` as a tuple of callables; a TypeError names what is not one."""
    handlers = () if then is None else ((then,) if callable(then) else tuple(then))
    for handler in handlers:
        if not callable(handler):
            raise TypeError(f"then= takes a callable handler(prof) or a sequence of them, got {handler!r}")
    return handlers


def _cycle_manifest(prof, trace_path: Path, cycle: int) -> dict:
    """What is known of a user-driven capture: host, versions, profiler step.

    Model, shape and token counts are the user's; they are recorded as null
    (unknown), never guessed, so per-token figures stay unavailable.
    """
    host = host_info()
    return {
        "manifest_version": mf.MANIFEST_VERSION,
        "created_utc": mf.utc_stamp(),
        "backend": "torch",
        "source": "trace_handler",
        "trace": trace_path.name,
        "cycle": cycle,
        "profiler_step": prof.step_num,
        "model": None,
        "batch_size": None,
        "seq_len": None,
        "new_tokens": None,
        "output_tokens_per_run": None,
        **mf.host_fields(host),
    }


def trace_handler(out_dir: str | Path, *, analyze: bool = True, worker_name: str | None = None,
                  then: Handler | Iterable[Handler] | None = None) -> TraceHandler:
    """An ``on_trace_ready`` handler writing one run directory per profiler cycle.

    Args:
        out_dir: parent directory; each cycle goes to ``out_dir/step-<n>/``.
        analyze: also write ``tables/``, ``analysis/`` and ``summary.json``.
        worker_name: the first part of the trace's name (default ``<host>_<pid>``).
        then: another ``on_trace_ready`` handler (or a sequence of them) to call after this one,
            e.g. ``torch.profiler.tensorboard_trace_handler(dir)``.

    Returns:
        A :class:`TraceHandler` (``.run_dirs`` lists what it wrote).

    Raises:
        TypeError: ``then`` holds something that is not callable.
    """
    return TraceHandler(out_dir, analyze=analyze, worker_name=worker_name, then=then)
