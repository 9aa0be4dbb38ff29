"""Conventional flags: -q/--quiet, sweep's short options, profile -o refusal, --json errors."""
from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner

from taxbreak.cli.main import main

from .traces import write_planted

# every command that shows progress or status lines on stderr
PROGRESS_COMMANDS = ("analyze", "info", "convert", "profile", "sweep", "report", "annotate", "check")


def options(command: str) -> dict[str, click.Option]:
    """Each option string (``-b``, ``--batch-size``) of a command -> its option."""
    return {flag: p for p in main.commands[command].params if isinstance(p, click.Option)
            for flag in p.opts + p.secondary_opts}


@pytest.mark.parametrize("command", PROGRESS_COMMANDS)
def test_every_progress_command_takes_q_and_quiet(command):
    flags = options(command)
    assert flags["-q"] is flags["--quiet"] and flags["-q"].is_flag


def test_sweep_has_the_short_options_of_profile():
    profile, sweep = options("profile"), options("sweep")
    shorts = sorted(f for f in profile if len(f) == 2)
    assert shorts == ["-b", "-m", "-o", "-q", "-s", "-t"]
    for short in shorts:
        # the same letter means the same thing: sweep's option also answers to profile's long name
        long_names = [f for f in profile[short].opts if f.startswith("--")]
        assert short in sweep and any(name in sweep[short].opts for name in long_names), short


def test_sweep_takes_profile_spellings_for_its_lists():
    sweep = options("sweep")
    assert sweep["--batch-size"] is sweep["--batch-sizes"] is sweep["-b"]
    assert sweep["--seq-len"] is sweep["--seq-lens"] is sweep["-s"]


@pytest.fixture
def trace(tmp_path):
    return write_planted(tmp_path / "t.json.gz")


def _quiet_and_loud(args, tmp_path):
    loud = CliRunner().invoke(main, args, catch_exceptions=False)
    quiet = CliRunner().invoke(main, [*args, "-q"], catch_exceptions=False)
    return loud, quiet


@pytest.mark.parametrize("args, loud_line", [
    (["report", "{t}", "-o", "{d}/r.html"], "wrote {d}/r.html"),
    (["annotate", "{t}", "-o", "{d}/a.json.gz"], "wrote {d}/a.json.gz: "),
    (["convert", "{t}", "-o", "{d}/tables"], "wrote "),
])
def test_quiet_leaves_stderr_empty(trace, tmp_path, args, loud_line):
    args = [a.format(t=trace, d=tmp_path) for a in args] + ["--floor-us", "4.5"] * (args[0] != "convert")
    loud, quiet = _quiet_and_loud(args, tmp_path)
    assert loud.exit_code == quiet.exit_code == 0
    assert loud.stderr.startswith(loud_line.format(d=tmp_path))
    assert quiet.stderr == "" and quiet.stdout == loud.stdout


def test_quiet_check_keeps_the_table_and_the_exit_code(trace, tmp_path):
    budget = tmp_path / "b.toml"
    budget.write_text('[all]\nkernels = "== 3"\n')
    loud, quiet = _quiet_and_loud(["check", str(trace), "--budget", str(budget), "--floor-us", "4.5"], tmp_path)
    assert loud.exit_code == quiet.exit_code == 0
    assert loud.stderr.startswith("budget PASSED") and quiet.stderr == ""
    assert quiet.stdout == loud.stdout and "all.kernels" in quiet.stdout


def test_quiet_does_not_hide_errors(tmp_path):
    result = CliRunner().invoke(main, ["info", str(tmp_path / "missing.json"), "-q"])
    assert result.exit_code == 1 and result.stderr.startswith("error[input.not_found]")


def test_profile_refuses_an_occupied_output_directory(tmp_path):
    (tmp_path / "old-run").mkdir()
    (tmp_path / "old-run" / "trace.json.gz").write_bytes(b"")
    result = CliRunner().invoke(main, ["profile", "-o", str(tmp_path / "old-run"), "-q"])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"error[usage.invalid]: {tmp_path / 'old-run'}: the output directory already holds files",
        "  hint: choose a new -o directory, or add --force to write over this one"]
    assert [p.name for p in (tmp_path / "old-run").iterdir()] == ["trace.json.gz"]


def test_profile_accepts_a_new_or_empty_directory_and_force(tmp_path):
    from taxbreak.cli.profile import refuse_existing
    from taxbreak.trace.errors import UsageError

    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "manifest.json").write_text("{}")
    refuse_existing(None, False)  # the default, a new timestamped folder
    refuse_existing(str(tmp_path / "new"), False)
    refuse_existing(str(tmp_path), True)
    (tmp_path / "empty").mkdir()
    refuse_existing(str(tmp_path / "empty"), False)
    with pytest.raises(UsageError):
        refuse_existing(str(occupied), False)
    refuse_existing(str(occupied), True)


@pytest.mark.parametrize("args", [["floor", "--json"], ["replay", "{d}/no-such-run", "--json"]])
def test_json_errors_of_floor_and_replay(tmp_path, args):
    args = [a.format(d=tmp_path) for a in args]
    result = CliRunner().invoke(main, args)
    plain = CliRunner().invoke(main, [a for a in args if a != "--json"])
    assert result.exit_code == plain.exit_code == 1
    error = json.loads(result.stdout)["error"]
    assert set(error) == {"code", "message", "hint", "path", "location", "exit_code"}
    assert result.stderr.startswith(f"error[{error['code']}]") and result.stderr == plain.stderr
    assert plain.stdout == "" and error["exit_code"] == 1 and error["hint"]
