"""A spinner on stderr while a command reads or decomposes a large trace.

A 10 M-event trace takes ~40 s to parse and decompose on two cores; without a
sign of life a user cannot tell work from a hang. Rich draws the spinner only
when stderr is a terminal, so pipes, logs, ``--json`` output and the tests see
nothing of it.
"""
from __future__ import annotations

from pathlib import Path

from rich.console import Console

from ..report.console_text import markup_text


def working(action: str, target: str):
    """Context manager: ``⠋ analyzing trace.json.gz (239.1 MB) …`` on stderr until the block ends."""
    return Console(stderr=True).status(f"{action} {describe(target)} …", spinner="dots")


def describe(target: str) -> str:
    """The file name and its size on disk, or the path as given (folders, missing files)."""
    path = Path(target)
    try:
        if path.is_file():
            return f"{markup_text(path.name)} ({path.stat().st_size / 1e6:,.1f} MB)"
    except OSError:
        pass
    return markup_text(target)
