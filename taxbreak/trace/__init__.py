"""The canonical trace model: schemas, tables, diagnostics and errors."""
from .diagnostics import Diagnostic, Diagnostics
from .errors import ERROR_CODES, TaxbreakError
from .schema import SCHEMAS, TABLE_NAMES
from .tables import TraceMeta, TraceTables

__all__ = [
    "Diagnostic",
    "Diagnostics",
    "ERROR_CODES",
    "SCHEMAS",
    "TABLE_NAMES",
    "TaxbreakError",
    "TraceMeta",
    "TraceTables",
]
