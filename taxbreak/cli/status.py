"""A spinner on stderr while a command reads or decomposes a large trace.

A 10 M-event trace takes ~40 s to parse and decompose on two cores; without a
sign of life a user cannot tell work from a hang. Rich draws the spinner only
when stderr is a terminal, so pipes, logs, ``--json`` output and the tests see
nothing of it.
"""
from __future__ import annotations

import contextlib
from pathlib import Path

import click

from ..report.console_text import markup_text

QUIET_HELP = "No progress or status lines on stderr (errors still print)."


def quiet_option(fn):
    """``-q/--quiet``, the same flag on every command that shows progress or status on stderr."""
    return click.option("--quiet", "-q", is_flag=True, help=QUIET_HELP)(fn)


def working(action: str, target: str, quiet: bool = False):
    """Context manager: ``⠋ analyzing trace.json.gz (239.1 MB) …`` on stderr until the block ends."""
    if quiet:
        return contextlib.nullcontext()
    from rich.console import Console  # imported on use: --help and quick errors skip rich

    return Console(stderr=True).status(f"{action} {describe(target)} …", spinner="dots")


def status_line(text: str, quiet: bool) -> None:
    """A line for people on stderr (``wrote report.html``), left out under ``--quiet``."""
    if not quiet:
        click.echo(text, err=True)


def describe(target: str) -> str:
    """The file name and its size on disk, or the path as given (folders, missing files)."""
    path = Path(target)
    try:
        if path.is_file():
            return f"{markup_text(path.name)} ({path.stat().st_size / 1e6:,.1f} MB)"
    except OSError:
        pass
    return markup_text(target)
