"""Capture: run a workload under the profiler and write a run directory.

* ``profile(ProfileConfig(...))`` -> ``RunResult`` (what ``taxbreak profile`` runs)
* ``phase(name)`` / ``step(phase, index)`` / ``run()`` markers for the user's own code
* ``trace_handler(dir)`` for ``torch.profiler.profile(on_trace_ready=...)``
* ``models``: the presets (``build_model``, ``ModelSpec``, ``count_parameters``)

Imported lazily so that ``import taxbreak.capture`` does not load torch.
"""
from __future__ import annotations

from ..trace.lazy import lazy_exports

_EXPORTS = {
    "phase": "markers", "step": "markers", "run": "markers", "reset_counters": "markers",
    "PHASES": "markers",
    "trace_handler": "handler", "TraceHandler": "handler",
    "profile": "runner", "ProfileConfig": "runner", "RunResult": "runner", "ProgressEvent": "runner",
    "generate": "runner",
    "build_model": "models", "ModelSpec": "models", "KVCache": "models", "count_parameters": "models",
    "PRESETS": "models", "preset_names": "models",
}

__all__ = sorted(_EXPORTS)


__getattr__ = lazy_exports(__name__, _EXPORTS)
