"""The one place where errors become stderr lines and exit codes."""
from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
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
            # the readers wrap every OSError of reading an input in a typed input error
            # (readers.parse_trace, fileio.read_input_bytes), so one that reaches here comes
            # from writing an output (-o, --junit, --markdown, ...)
            _fail(unwritable(err), json_errors and kwargs.get("as_json"))
        except MemoryError:
            # under a memory cap (ulimit -v, a container) a 10 M-event analyze ran out after 55 s
            _fail(out_of_memory(kwargs), json_errors and kwargs.get("as_json"))

    return wrapper


def _fail(err: TaxbreakError, as_json: bool) -> None:
    print_error(err)
    if as_json:
        click.echo(json.dumps(error_object(err), indent=1))
    sys.exit(err.exit_code)


BYTES_PER_INPUT_BYTE = 1.2  # cold analyze peak / uncompressed Kineto JSON (10 M events: 2.6 GB of 2.2 GB)
BASE_BYTES = 300 << 20  # interpreter, numpy, pandas, Arrow (1 M events: 472 MB of 220 MB JSON)
GZIP_RATIO = 9  # Kineto JSON inflates ~8-10x


def out_of_memory(kwargs: dict) -> TaxbreakError:
    """``memory.exhausted``: the memory the inputs named in ``kwargs`` need, the limit in force, the hint."""
    inputs = _input_paths(kwargs.values())
    need = BASE_BYTES + int(BYTES_PER_INPUT_BYTE * sum(_inflated_size(p) for p in inputs)) if inputs else 0
    limit = _address_space_limit()
    where = f"peak resident memory about {need / 2**30:,.1f} GiB" if need else None
    if limit is not None:
        where = f"{where + '; ' if where else ''}address-space limit {limit / 2**30:,.1f} GiB"
    return TaxbreakError("memory.exhausted", "ran out of memory", location=where,
                         hint="analyze needs about 1.2x the uncompressed trace (10 M events: ~2.6 GB resident; an "
                              "address-space cap must leave more); raise the limit (ulimit -v, the container's "
                              "memory) or run on a larger machine")


def _input_paths(values) -> list[Path]:
    out = []
    for value in values:
        for item in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(item, (str, Path)) and len(str(item)) < 4096:
                path = Path(item)
                if path.is_file():
                    out.append(path)
                elif path.is_dir():
                    out += [f for f in path.iterdir() if f.is_file() and f.name.endswith((".json", ".json.gz",
                                                                                         ".sqlite"))]
    return out


def _inflated_size(path: Path) -> int:
    size = path.stat().st_size
    return size * GZIP_RATIO if path.name.endswith(".gz") else size


def _address_space_limit() -> int | None:
    try:
        import resource
    except ImportError:  # not on POSIX
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return None if soft == resource.RLIM_INFINITY else soft


def unwritable(err: OSError) -> TaxbreakError:
    """``output.unwritable`` for an OSError raised while writing an output."""
    return output_unwritable(err, err.filename)
