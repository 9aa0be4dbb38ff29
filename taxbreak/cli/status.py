"""Progress on stderr while a command reads or decomposes a trace.

A 1 M-event trace takes tens of seconds to parse and decompose on two cores;
without a sign of life a user cannot tell work from a hang. The library reports
its stages through a hook (taxbreak/trace/progress.py); here they become one
line on stderr: a spinner, the stage, a bar of the stages done and the elapsed
time. Only when stderr is a terminal and ``-q`` is not given: pipes, CI logs,
``--json`` output and the tests see nothing of it.
"""
from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import click

from ..report.console_text import markup_text

QUIET_HELP = "No progress or status lines on stderr (errors still print)."


def quiet_option(fn):
    """``-q/--quiet``, the same flag on every command that shows progress or status on stderr."""
    return click.option("--quiet", "-q", is_flag=True, help=QUIET_HELP)(fn)


def working(action: str, target: str, quiet: bool = False):
    """Context manager yielding a progress hook for the library call inside it.

    ``⠋ analyzing trace.json.gz (239.1 MB) · linking launches to kernels ━━━━━━╺━━ 2/5 0:00:07``
    on stderr until the block ends; the hook is None (nothing drawn) under ``-q`` or off a terminal.
    """
    if quiet or not sys.stderr.isatty():
        return contextlib.nullcontext(None)
    return _StageBar(f"{action} {describe(target)}")


class _StageBar:
    """One rich progress line fed by ``ProgressEvent``s; removed when the block ends."""

    def __init__(self, title: str) -> None:
        from rich.console import Console  # imported on use: --help and quick errors skip rich
        from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        title = title.replace("{", "{{").replace("}", "}}")  # a file name is not a format field
        self.bar = Progress(SpinnerColumn("dots"), TextColumn(title + " · {task.description}"), BarColumn(),
                            TextColumn("{task.fields[count]}"), TimeElapsedColumn(), console=Console(stderr=True),
                            transient=True)
        self.task = self.bar.add_task("starting", total=None, count="")

    def __enter__(self):
        self.bar.start()
        return self.update

    def update(self, event) -> None:
        """The hook: the stage, and a bar of the stages done or of the bytes read where the total is known."""
        self.bar.update(self.task, description=markup_text(event.stage), completed=event.done, total=event.total,
                        count=count_text(event))

    def __exit__(self, *exc) -> bool:
        self.bar.stop()
        return False


def count_text(event) -> str:
    """``2/5`` stages, ``45/120 MB`` read, or nothing when the total is unknown."""
    if not event.total:
        return ""
    if event.unit == "bytes":
        return f"{event.done / 1e6:,.0f}/{event.total / 1e6:,.0f} MB"
    return f"{event.done}/{event.total}"


def stage(hook, name: str) -> None:
    """Report a stage of the command itself (``writing report.html``) on the same line as the library's."""
    if hook is not None:
        from ..trace.progress import ProgressEvent

        hook(ProgressEvent(name, 0, None))


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
