"""The TaxBreak decomposition: ΔFT / ΔCT / ΔKT per kernel, HDBI, steps/phases
and the exact host partition (docs/method.md)."""
from __future__ import annotations

from .result import Analysis

__all__ = ["Analysis", "analyze"]


def __getattr__(name: str):
    # the decomposer (and pandas) load on first use of analyze: a cached result needs neither
    if name == "analyze":
        from .analysis import analyze

        globals()["analyze"] = analyze
        return analyze
    raise AttributeError(f"module 'taxbreak.decompose' has no attribute {name!r}")
