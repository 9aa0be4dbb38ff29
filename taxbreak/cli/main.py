"""The ``taxbreak`` command group. Each command lives in its own module and is
registered here; only the CLI prints or exits."""
from __future__ import annotations

import importlib
import logging

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
]


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="taxbreak")
@click.option("--debug", is_flag=True, help="Verbose logging.")
def main(debug: bool) -> None:
    """taxbreak: where the host-side time of LLM inference goes (TaxBreak, HDBI)."""
    if debug:
        logging.basicConfig(level=logging.DEBUG)


def _register() -> None:
    for module_name, attr in _COMMANDS:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as err:
            if err.name and err.name.startswith("taxbreak.cli"):
                continue
            raise
        command = getattr(module, attr, None)
        if command is not None:
            main.add_command(command)


_register()
