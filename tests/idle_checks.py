"""Checks on a summary scope's idle-by-cause dict shared by the accounting tests.

The "library" cause is ``None`` (not measured) when a trace has no cuBLAS/cuDNN
ranges; the measured causes must then still add up to the device's idle time.
"""
from __future__ import annotations


def measured_cause_sum(by_cause: dict) -> float:
    """Σ of the causes that were measured (a ``None`` cause is not observable, not zero)."""
    return sum(us for us in by_cause.values() if us is not None)


def check_library_cause(by_cause: dict, library_ranges: bool) -> None:
    """The library cause is measured exactly when the trace has library ranges."""
    assert (by_cause["library"] is None) == (not library_ranges), by_cause
