"""taxbreak: a trace-driven profiler for the host-side cost of LLM inference.

Public API (each function is what a CLI command wraps):

* ``load_trace(path)`` -> ``TraceTables``           (readers)
* ``analyze(path_or_tables, floor_us=None, step_pattern=None, tokens=None)`` -> ``Analysis``  (decompose)
* ``Analysis.phase(name)`` -> ``PhaseValues``         (typed per-phase values)
* ``phase(name)`` / ``step(i)`` / ``trace_handler(dir)``  (capture, for the user's own code)
* ``TaxbreakError``: the base of every typed error (``code``, ``message``, ``path``, ``hint``)

Names are imported on first use, so ``import taxbreak`` stays cheap and does not
import torch or pandas; ``dir(taxbreak)`` lists them all the same.
"""

__version__ = "0.1.0"

# public name -> the module that defines it (imported on first access)
_EXPORTS = {
    "load_trace": "taxbreak.readers",
    "TraceTables": "taxbreak.trace.tables",
    "analyze": "taxbreak.decompose",
    "Analysis": "taxbreak.decompose.result",
    "PhaseValues": "taxbreak.decompose.accessors",
    "UnknownPhaseError": "taxbreak.decompose.accessors",
    "TaxbreakError": "taxbreak.trace.errors",
    "NOT_MEASURED": "taxbreak.trace.words",
    "phase": "taxbreak.capture",
    "step": "taxbreak.capture",
    "trace_handler": "taxbreak.capture",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str):
    # Lazy so that `import taxbreak` stays cheap and does not import torch.
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'taxbreak' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    """The public names (``__all__``) beside the module's own attributes, for tab completion."""
    return sorted(set(globals()) | set(__all__))
