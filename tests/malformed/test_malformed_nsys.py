"""Hostile Nsight exports of the malformed corpus, through the library and the CLI."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from taxbreak.cli.main import main
from taxbreak.readers import load_trace
from taxbreak.trace.diagnostics import DIAGNOSTIC_CODES
from taxbreak.trace.errors import ERROR_CODES, TaxbreakError

sys.path.insert(0, str(Path(__file__).parent))
from corpus_nsys import CASES, CASES_DIR, RECOVERABLE, RECOVERABLE_WITHOUT_DIAGNOSTIC  # noqa: E402


def test_every_case_file_is_present_and_small():
    for name in {**CASES, **RECOVERABLE}:
        assert (CASES_DIR / name).stat().st_size < 10_000, f"run python tests/malformed/corpus_nsys.py ({name})"


@pytest.mark.parametrize("name", sorted(CASES))
def test_typed_error_through_the_library_and_the_cli(name):
    code = CASES[name][1]
    assert code in ERROR_CODES
    with pytest.raises(TaxbreakError) as info:
        load_trace(CASES_DIR / name, use_cache=False)
    assert info.value.code == code and info.value.path == str(CASES_DIR / name)
    result = CliRunner().invoke(main, ["info", str(CASES_DIR / name)])
    assert result.exit_code == 1 and result.output.startswith(f"error[{code}]: ")
    assert "Traceback" not in result.output


@pytest.mark.parametrize("name", sorted(RECOVERABLE))
def test_recoverable_through_the_library(name):
    code = RECOVERABLE[name][1]
    assert code in DIAGNOSTIC_CODES
    tables = load_trace(CASES_DIR / name, use_cache=False)
    if name not in RECOVERABLE_WITHOUT_DIAGNOSTIC:
        assert tables.diagnostics.count(code) >= 1
    assert sum(tables.meta.event_counts.values()) == tables.meta.input_events
    json.dumps(tables.meta.devices)
    assert all(n is None or isinstance(n, str) for n in tables.device_activities.column("name").to_pylist())


@pytest.mark.parametrize("name", sorted(RECOVERABLE))
def test_recoverable_through_the_cli(name, monkeypatch):
    monkeypatch.setenv("TAXBREAK_NO_CACHE", "1")  # --no-cache sets it for the process: restored after the test
    for command in (["info", str(CASES_DIR / name)], ["analyze", str(CASES_DIR / name), "--no-cache"]):
        result = CliRunner().invoke(main, command)
        assert result.exit_code == 0, result.output
        assert "Traceback" not in result.output and "\x1b" not in result.output


def test_a_blob_gpu_name_is_text():
    tables = load_trace(CASES_DIR / "nsys_blob_gpu_name.sqlite", use_cache=False)
    device = tables.meta.devices[0]
    assert isinstance(device["name"], str) and device["name"].startswith("H100")
    assert "numSms" not in device  # a blob where a number belongs is dropped
