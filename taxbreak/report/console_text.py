"""Names for rich output: terminal-safe (taxbreak.trace.text) and markup-escaped.

Rich reads ``[bold]`` in a string as markup; a kernel named ``[red]x`` or
``[link=...]`` would restyle the report or fail to render. Every name that
reaches a rich table or a markup-enabled ``print`` goes through :func:`markup_text`.
"""
from __future__ import annotations

from ..trace.text import safe_text


def markup_text(value: object) -> str:
    """``value`` with control characters escaped, then rich markup escaped."""
    from rich.markup import escape  # on use: the CLI's start-up and --help need no rich

    return escape(safe_text(value))
