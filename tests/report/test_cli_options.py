"""Option grammar of report/annotate/diff/check: short == long, usage errors exit 2."""
from __future__ import annotations

from click.testing import CliRunner

from taxbreak.cli.main import main

from .traces import write_planted


def test_short_and_long_output_flags_write_the_same_report(tmp_path):
    trace = write_planted(tmp_path / "t.json")
    for flag, name in (("-o", "a.html"), ("--output", "b.html")):
        result = CliRunner().invoke(main, ["report", str(trace), flag, str(tmp_path / name), "--floor-us", "4.5"])
        assert result.exit_code == 0, result.output
    strip = [line for line in (tmp_path / "a.html").read_text().split("<p") if "generated" not in line]
    assert strip == [line for line in (tmp_path / "b.html").read_text().split("<p") if "generated" not in line]


def test_usage_errors_exit_2_without_traceback(tmp_path):
    trace = write_planted(tmp_path / "t.json")
    budget = tmp_path / "b.toml"
    budget.write_text('[all]\nkernels = ">= 0"\n')
    cases = [["check", str(trace)],                                   # --budget missing
             ["report", str(trace), "--floor-us", "-1"],              # negative floor
             ["check", str(trace), "--budget", str(budget), "--floor-us", "0"],  # zero floor, as `analyze`
             ["diff", str(trace)],                                    # NEW missing
             ["annotate", str(trace), "--tokens", "0"]]               # tokens < 1
    for args in cases:
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 2, (args, result.output)
        assert "Traceback" not in result.output


def test_bad_step_pattern_is_a_usage_error(tmp_path):
    trace = write_planted(tmp_path / "t.json")
    result = CliRunner().invoke(main, ["report", str(trace), "--step-pattern", "(unclosed"])
    assert result.exit_code == 2 and result.stderr.startswith("error[usage.step_pattern]")
