"""The TaxBreak decomposition: ΔFT / ΔCT / ΔKT per kernel, HDBI, steps/phases
and the exact host partition (docs/method.md)."""
from __future__ import annotations

from .analysis import Analysis, analyze

__all__ = ["Analysis", "analyze"]
