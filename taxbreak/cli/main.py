"""The ``taxbreak`` command group. Each command lives in its own module and is
registered here; only the CLI prints or exits."""
from __future__ import annotations

import atexit
import importlib
import logging
import os
import sys
import threading

import click

from .. import __version__

# (module, attribute) of each command; a module that is missing is skipped so a
# partial install still offers the commands it has.
_COMMANDS = [
    ("taxbreak.cli.info", "info"),
    ("taxbreak.cli.info", "convert"),
    ("taxbreak.cli.analyze", "analyze"),
    ("taxbreak.cli.profile", "profile"),
    ("taxbreak.cli.report", "report"),
    ("taxbreak.cli.report", "annotate"),
    ("taxbreak.cli.report", "diff"),
    ("taxbreak.cli.report", "check"),
    ("taxbreak.cli.gpu", "floor"),
    ("taxbreak.cli.gpu", "replay"),
    ("taxbreak.cli.sweep", "sweep"),
    ("taxbreak.cli.sweep", "whatif"),
    ("taxbreak.cli.cache", "cache"),
    ("taxbreak.cli.ranks", "ranks"),
]


class LazyGroup(click.Group):
    """A command group that imports a command's module only when that command is asked for.

    ``taxbreak analyze …`` then loads the analyze module alone, not the report,
    capture and sweep modules of the other commands (their imports took ~0.3 s of
    every start-up); ``taxbreak --help`` still lists them all.
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.commands = _LazyCommands(self, self.commands)

    def list_commands(self, ctx: click.Context) -> list[str]:
        names = {attr for _, attr in _COMMANDS if self.get_command(ctx, attr) is not None}
        return sorted(names | set(self.commands))

    def get_command(self, ctx: click.Context, cmd_name: str):
        if cmd_name not in self.commands:
            self._load(cmd_name)
        return self.commands.get(cmd_name)

    def _load(self, cmd_name: str) -> None:
        for module_name, attr in _COMMANDS:
            if attr != cmd_name:
                continue
            try:
                module = importlib.import_module(module_name)
            except ModuleNotFoundError as err:
                if err.name and err.name.startswith("taxbreak.cli"):
                    continue  # a partial install offers the commands it has
                raise
            command = getattr(module, attr, None)
            if command is not None:
                self.add_command(command)


class _LazyCommands(dict):
    """``group.commands[name]`` loads that command's module first, as click's own dict had it registered."""

    def __init__(self, group: LazyGroup, loaded: dict) -> None:
        super().__init__(loaded)
        self.group = group

    def __missing__(self, name: str):
        self.group._load(name)
        if dict.__contains__(self, name):
            return dict.__getitem__(self, name)
        raise KeyError(name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="taxbreak")
@click.option("--debug", is_flag=True, help="Verbose logging.")
def main(debug: bool) -> None:
    """taxbreak: where the host-side time of LLM inference goes (TaxBreak, HDBI)."""
    if debug:
        logging.basicConfig(level=logging.DEBUG)


def run() -> None:
    """The console entry point (``taxbreak``, ``python -m taxbreak``): :func:`main`, then a quick exit.

    Once a command has finished, the interpreter's teardown frees every module
    and every object of the analysis one by one: ~0.3 s at 1 M events, seconds
    at 10 M, for nothing. It is skipped, but only after what teardown would
    have done that matters: non-daemon threads (the background cache writes)
    are joined, the atexit handlers run (logging, temporary folders) and
    stdout/stderr are flushed. An unexpected exception still takes the normal
    path, with its traceback.
    """
    try:
        main(prog_name="taxbreak")
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc.code)
    _exit_now(code)


def _exit_code(code) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # sys.exit("message") semantics
    return 1


def _exit_now(code: int) -> None:
    if sys.getprofile() is not None or sys.gettrace() is not None:
        sys.exit(code)  # under cProfile or coverage: let them write their results at normal exit
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):  # `taxbreak … | head`, or a closed stream: nothing to save
            pass
    os._exit(code)
