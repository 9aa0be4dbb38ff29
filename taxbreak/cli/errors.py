"""The one place where errors become stderr lines and exit codes."""
from __future__ import annotations

import functools
import sys
from typing import Callable

import click

from ..trace.errors import TaxbreakError


def print_error(err: TaxbreakError) -> None:
    """One line ``error[code]: path: message (location)`` plus ``hint: ...``."""
    click.echo(err.one_line(), err=True)
    if err.hint:
        click.echo(f"  hint: {err.hint}", err=True)


def handle_errors(fn: Callable) -> Callable:
    """Decorator for click commands: typed errors -> one line + exit code."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except TaxbreakError as err:
            print_error(err)
            sys.exit(err.exit_code)

    return wrapper
