"""Nullable numeric dtypes for the per-step and per-phase frames.

A summary value that was not measured is ``None``; a column built from such
values would be ``object``, which pandas cannot sum or compare and Parquet
writes as a null-typed column on a trace where nothing was measured (so the
frames of two traces no longer concatenate as one table). Numeric columns get
pandas' nullable ``Int64`` / ``Float64`` instead: a missing value is ``pd.NA``,
never 0 or a silently propagating NaN.
"""
from __future__ import annotations

import pandas as pd

# summary keys that count things: Int64 even when no row of a trace has a value
COUNT_KEYS = frozenset({"kernels", "launches", "orphan_kernels", "orphan_copies", "orphan_launches",
                        "captured_launches", "orphan_copy_calls", "tokens", "aten_ops", "steps", "step",
                        "start_ns", "end_ns"})
# text keys: their missing values stay None in an object column
TEXT_KEYS = frozenset({"phase", "name", "hdbi_reason", "floor_source", "scope", "cause"})
_INTEGER = {"integer"}
_FLOAT = {"floating", "mixed-integer-float", "decimal"}


def nullable_numeric(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with every ``object`` column of numbers (and ``None``) as ``Int64`` or ``Float64``, and
    every ``float64`` column holding NaN (pandas' stand-in for a ``None`` among numbers) as ``Float64``,
    or ``Int64`` for a count."""
    for column in df.columns[df.dtypes == object]:
        dtype = numeric_dtype(column, pd.api.types.infer_dtype(df[column], skipna=True))
        if dtype is not None:
            df[column] = df[column].astype(dtype)
    for column in df.columns[df.dtypes == "float64"]:
        if df[column].isna().any():
            df[column] = df[column].astype("Int64" if column in COUNT_KEYS else "Float64")
    return df


def numeric_dtype(column: str, inferred: str) -> str | None:
    """The nullable dtype for a column whose values pandas infers as ``inferred``; None: leave it."""
    if column in TEXT_KEYS:
        return None
    if inferred in _INTEGER or (inferred == "empty" and column in COUNT_KEYS):
        return "Int64"
    if inferred in _FLOAT or inferred == "empty":
        return "Float64"
    return None
