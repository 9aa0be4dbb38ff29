"""The words every human-readable output shares (defined in ``taxbreak.trace.words``)."""

from ..trace.words import NOT_MEASURED

__all__ = ["NOT_MEASURED"]
