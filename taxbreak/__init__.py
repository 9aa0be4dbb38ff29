"""taxbreak: a trace-driven profiler for the host-side cost of LLM inference.

Public API (each function is what a CLI command wraps):

* ``load_trace(path)`` -> ``TraceTables``           (readers)
* ``analyze(path_or_tables, floor_us=None, step_pattern=None)`` -> ``Analysis``  (decompose)
* ``phase(name)`` / ``trace_handler(dir)``            (capture, for the user's own code)
"""
from __future__ import annotations

__version__ = "0.1.0"


def __getattr__(name: str):
    # Lazy so that `import taxbreak` stays cheap and does not import torch.
    if name == "load_trace":
        from .readers import load_trace

        return load_trace
    if name == "analyze":
        from .decompose import analyze

        return analyze
    if name in ("phase", "step", "trace_handler"):
        from . import capture

        return getattr(capture, name)
    raise AttributeError(f"module 'taxbreak' has no attribute {name!r}")
