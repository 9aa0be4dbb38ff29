"""An output that cannot be written is one error line with a code, never a traceback."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from taxbreak.cli.main import main
from taxbreak.trace.errors import ERROR_CODES

from .traces import write_planted


@pytest.fixture()
def trace(tmp_path):
    return write_planted(tmp_path / "t.json")


def _commands(trace, missing, budget):
    return [["report", str(trace), "-o", str(missing / "r.html")],
            ["annotate", str(trace), "-o", str(missing / "a.json")],
            ["check", str(trace), "--budget", str(budget), "--junit", str(missing / "j.xml")],
            ["check", str(trace), "--budget", str(budget), "--markdown", str(missing / "m.md")],
            ["analyze", str(trace), "-o", str(missing / "x" / "out")],
            ["convert", str(trace), "-o", str(missing / "x" / "out")]]


def test_unwritable_outputs_exit_1_with_a_coded_line(trace, tmp_path):
    blocker = tmp_path / "a_file"  # a file where a folder is expected: no write below it can succeed
    blocker.write_text("")
    budget = tmp_path / "b.toml"
    budget.write_text('[all]\nkernels = ">= 0"\n')
    assert "output.unwritable" in ERROR_CODES
    for args in _commands(trace, blocker, budget):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 1, (args, result.output)
        assert result.stderr.startswith(f"error[output.unwritable]: {blocker}"), (args, result.stderr)
        assert "hint: check that the output's folder exists" in result.stderr
        assert "Traceback" not in result.output
