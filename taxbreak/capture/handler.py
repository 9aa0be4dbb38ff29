"""``trace_handler(dir)``: an ``on_trace_ready`` handler for the user's own profiler.

::

    import taxbreak, torch
    from torch.profiler import profile, schedule

    with profile(schedule=schedule(wait=1, warmup=1, active=2, repeat=2),
                 on_trace_ready=taxbreak.trace_handler("runs/serve"),
                 record_shapes=True, with_stack=True) as prof:
        for batch in batches:
            with taxbreak.phase("decode"):
                serve(batch)
            prof.step()

Each completed cycle becomes one run directory ``<dir>/step-<n>/`` (``n`` is
the profiler step at which the cycle ended) with the same layout as
``taxbreak profile``: ``trace.json.gz``, ``manifest.json``, ``tables/``,
``analysis/`` and ``summary.json``.
"""
from __future__ import annotations

from pathlib import Path

from . import manifest as mf
from .hostinfo import host_info


class TraceHandler:
    """Callable ``handler(prof)``; remembers the run directories it wrote."""

    def __init__(self, out_dir: str | Path, *, analyze: bool = True) -> None:
        self.out_dir = Path(out_dir)
        self.analyze = analyze
        self.run_dirs: list[Path] = []
        self.analyses: list[object | None] = []

    def __call__(self, prof) -> None:
        run_dir = self.out_dir / f"step-{prof.step_num:06d}"
        run_dir.mkdir(parents=True, exist_ok=True)
        trace_path = run_dir / "trace.json.gz"
        prof.export_chrome_trace(str(trace_path))
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


def trace_handler(out_dir: str | Path, *, analyze: bool = True) -> TraceHandler:
    """An ``on_trace_ready`` handler writing one run directory per profiler cycle.

    Args:
        out_dir: parent directory; each cycle goes to ``out_dir/step-<n>/``.
        analyze: also write ``tables/``, ``analysis/`` and ``summary.json``.

    Returns:
        A :class:`TraceHandler` (``.run_dirs`` lists what it wrote).
    """
    return TraceHandler(out_dir, analyze=analyze)
