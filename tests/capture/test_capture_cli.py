"""taxbreak profile: options, JSON output, error lines and exit codes."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from taxbreak.cli.main import main

SMALL = ["--model", "gpt2-tiny", "--seq-len", "8", "--new-tokens", "2", "--warmup", "0", "--runs", "1"]


@pytest.fixture
def runner():
    return CliRunner()


def test_json_output_has_manifest_and_run_dir(runner, tmp_path):
    result = runner.invoke(main, ["profile", *SMALL, "-o", str(tmp_path / "run"), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["run_dir"] == str(tmp_path / "run")
    assert data["manifest"]["model"] == "gpt2-tiny" and data["manifest"]["new_tokens"] == 2
    assert (tmp_path / "run" / "manifest.json").is_file()


def test_report_names_the_run_directory(runner, tmp_path):
    result = runner.invoke(main, ["profile", *SMALL, "-o", str(tmp_path / "run"), "-q"])
    assert result.exit_code == 0, result.output
    assert f"run directory: {tmp_path / 'run'}" in result.stderr.replace("\n", "")
    assert "capture overhead" in result.stdout
    assert "Traceback" not in result.output


def test_short_and_long_flags_agree(runner, tmp_path):
    short = ["-m", "gpt2-tiny", "-s", "8", "-t", "2", "-b", "1", "--warmup", "0", "--runs", "1"]
    result = runner.invoke(main, ["profile", *short, "-o", str(tmp_path / "r"), "--json"])
    assert result.exit_code == 0, result.output
    config = json.loads(result.stdout)["manifest"]["config"]
    assert (config["model"], config["seq_len"], config["new_tokens"]) == ("gpt2-tiny", 8, 2)


@pytest.mark.parametrize("args, code", [
    (["--model", "llama-9"], "model.unknown"),
    (["--model", "gpt2", "--experts", "4"], "model.invalid"),
    (["--backend", "nsys"], "capture.nsys_missing"),
    (["--device", "cuda"], "device.unavailable"),
])
def test_errors_are_one_line_with_exit_1(runner, monkeypatch, tmp_path, args, code):
    monkeypatch.setenv("PATH", str(tmp_path))  # no nsys
    result = runner.invoke(main, ["profile", *args])
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error[{code}]")
    assert "hint:" in result.stderr and "Traceback" not in result.output


def test_hf_model_without_transformers(runner, monkeypatch, tmp_path):
    import sys

    monkeypatch.setitem(sys.modules, "transformers", None)
    result = runner.invoke(main, ["profile", "--model", f"hf:{tmp_path}"])
    assert result.exit_code == 1
    assert result.stderr.startswith("error[model.hf_unavailable]")
    assert "pip install 'taxbreak[hf]'" in result.stderr


@pytest.mark.parametrize("args", [["--batch-size", "0"], ["--dtype", "int8"], ["--backend", "perf"]])
def test_bad_option_values_exit_2(runner, args):
    result = runner.invoke(main, ["profile", *args])
    assert result.exit_code == 2
