"""The one place where errors become stderr lines and exit codes."""
from __future__ import annotations

import functools
import json
import sys
from typing import Callable

import click

from ..trace.errors import TaxbreakError
from ..trace.fileio import unwritable as output_unwritable
from ..trace.text import safe_text


def print_error(err: TaxbreakError) -> None:
    """One line ``error[code]: path: message (location)`` plus ``hint: ...``."""
    click.echo(safe_text(err.one_line()), err=True)  # paths and messages may quote a trace's names
    if err.hint:
        click.echo(f"  hint: {safe_text(err.hint)}", err=True)


def error_object(err: TaxbreakError) -> dict:
    """The JSON form of an error: stable keys, ``None`` for what the error does not carry."""
    return {"error": {"code": err.code, "message": err.message, "hint": err.hint, "path": err.path,
                      "location": err.location, "exit_code": err.exit_code}}


def handle_errors(fn: Callable) -> Callable:
    """Decorator for click commands: typed errors -> one line + exit code."""
    return _handled(fn, json_errors=False)


def handle_errors_json(fn: Callable) -> Callable:
    """:func:`handle_errors` for commands whose ``--json`` (``as_json``) promises JSON on stdout:
    with it, a failure also prints :func:`error_object` there; the stderr line and exit code stay."""
    return _handled(fn, json_errors=True)


def _handled(fn: Callable, json_errors: bool) -> Callable:
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except TaxbreakError as err:
            _fail(err, json_errors and kwargs.get("as_json"))
        except OSError as err:
            # the readers turn every input problem into a typed error, so an OSError that
            # reaches here comes from writing an output (-o, --junit, --markdown, ...)
            _fail(unwritable(err), json_errors and kwargs.get("as_json"))

    return wrapper


def _fail(err: TaxbreakError, as_json: bool) -> None:
    print_error(err)
    if as_json:
        click.echo(json.dumps(error_object(err), indent=1))
    sys.exit(err.exit_code)


def unwritable(err: OSError) -> TaxbreakError:
    """``output.unwritable`` for an OSError raised while writing an output."""
    return output_unwritable(err, err.filename)
