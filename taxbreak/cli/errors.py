"""The one place where errors become stderr lines and exit codes."""
from __future__ import annotations

import functools
import sys
from typing import Callable

import click

from ..trace.errors import TaxbreakError, TraceNotFoundError
from ..trace.text import safe_text


def print_error(err: TaxbreakError) -> None:
    """One line ``error[code]: path: message (location)`` plus ``hint: ...``."""
    click.echo(safe_text(err.one_line()), err=True)  # paths and messages may quote a trace's names
    if err.hint:
        click.echo(f"  hint: {safe_text(err.hint)}", err=True)


def handle_errors(fn: Callable) -> Callable:
    """Decorator for click commands: typed errors -> one line + exit code."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except TaxbreakError as err:
            print_error(err)
            sys.exit(err.exit_code)
        except OSError as err:
            # the readers turn every input problem into a typed error, so an OSError that
            # reaches here comes from writing an output (-o, --junit, --markdown, ...)
            print_error(unwritable(err))
            sys.exit(1)

    return wrapper


def unwritable(err: OSError) -> TaxbreakError:
    """``output.unwritable`` for an OSError raised while writing an output."""
    return TraceNotFoundError("output.unwritable", err.strerror or str(err), path=err.filename,
                              hint="check that the output's folder exists and is writable, and the disk has space")
