"""Start-up: a command's help loads only what that command needs; every command is still listed."""
from __future__ import annotations

import subprocess
import sys

from click.testing import CliRunner

from taxbreak.cli.main import _COMMANDS, main

PROBE = r"""
import sys
from taxbreak.cli.main import main
try:
    main(["analyze", "--help"], prog_name="taxbreak")
except SystemExit:
    pass
heavy = sorted(m for m in ("numpy", "pyarrow", "pandas", "torch", "taxbreak.decompose", "taxbreak.report.html")
               if m in sys.modules)
print("HEAVY", ",".join(heavy), file=sys.stderr)
"""


def test_analyze_help_imports_no_numpy_pyarrow_pandas_or_decomposer():
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert "Usage: taxbreak analyze" in proc.stdout
    heavy = [line for line in proc.stderr.splitlines() if line.startswith("HEAVY")]
    assert heavy == ["HEAVY "], proc.stderr


def test_group_help_lists_every_command_and_each_resolves():
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    names = sorted({attr for _, attr in _COMMANDS})
    listed = [line.split()[0] for line in result.output.split("Commands:")[1].splitlines() if line.strip()]
    assert listed == names
    assert all(main.commands[name].name == name for name in names)
