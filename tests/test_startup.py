"""Start-up: a command's help loads only what that command needs; every command is still listed;
a cached analysis prints its JSON without pandas."""
from __future__ import annotations

import json
import os
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
heavy = sorted(m for m in ("numpy", "pyarrow", "pandas", "torch", "matplotlib", "rich", "taxbreak.decompose",
                           "taxbreak.report.html") if m in sys.modules)
print("HEAVY", ",".join(heavy), file=sys.stderr)
"""


def test_analyze_help_imports_no_numpy_pyarrow_pandas_rich_or_decomposer():
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


CACHED_JSON_PROBE = r"""
import sys
from taxbreak.cli.main import main
try:
    main(["analyze", "--json", "--quiet", sys.argv[1]], prog_name="taxbreak")
except SystemExit:
    pass
from taxbreak.readers.cache import wait_for_writes
wait_for_writes()  # as the CLI's run() does before it exits: the cold run writes the analysis cache
heavy = sorted(m for m in ("pandas", "torch", "matplotlib", "rich.console", "taxbreak.decompose.analysis",
                           "taxbreak.readers.kineto") if m in sys.modules)
print("HEAVY", ",".join(heavy), file=sys.stderr)
"""


def test_cached_analyze_to_json_imports_no_pandas_decomposer_or_reader(tmp_path):
    """A second ``analyze --json`` of a trace is served by the analysis cache: its summary is
    printed without pandas, the decomposer or the Kineto reader (the first run needs them,
    but neither torch nor matplotlib)."""
    from taxbreak.synth.bigtrace import write_big_kineto

    trace = tmp_path / "small.json.gz"
    write_big_kineto(trace, 3000, seed=1)
    env = {**os.environ, "TAXBREAK_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("TAXBREAK_NO_CACHE", None)
    runs = [subprocess.run([sys.executable, "-c", CACHED_JSON_PROBE, str(trace)], capture_output=True, text=True,
                           timeout=300, env=env) for _ in range(2)]
    first, second = ([line for line in run.stderr.splitlines() if line.startswith("HEAVY")] for run in runs)
    assert "pandas" in first[0] and "taxbreak.decompose.analysis" in first[0]  # the cold run decomposes
    assert "torch" not in first[0] and "matplotlib" not in first[0], runs[0].stderr  # not even cold
    assert second == ["HEAVY "], runs[1].stderr
    assert json.loads(runs[1].stdout) == json.loads(runs[0].stdout)
    assert json.loads(runs[1].stdout)["all"]["kernels"] > 0
