"""The canonical trace model: schemas, tables, diagnostics and errors."""
from __future__ import annotations

from .lazy import lazy_exports

# Names resolved on first use: `taxbreak.trace.errors` (wanted by every CLI command, even
# `--help`) must not import pyarrow through the schema and tables modules (~0.2 s).
_EXPORTS = {
    "Diagnostic": "diagnostics",
    "Diagnostics": "diagnostics",
    "ERROR_CODES": "errors",
    "TaxbreakError": "errors",
    "SCHEMAS": "schema",
    "TABLE_NAMES": "schema",
    "TraceMeta": "tables",
    "TraceTables": "tables",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
