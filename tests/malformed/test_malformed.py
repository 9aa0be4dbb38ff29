"""The malformed corpus: each file raises its stable error code (library and CLI),
or loads with its counted diagnostic."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from taxbreak.cli.main import main
from taxbreak.readers import load_trace
from taxbreak.trace.diagnostics import DIAGNOSTIC_CODES
from taxbreak.trace.errors import ERROR_CODES, TaxbreakError

sys.path.insert(0, str(Path(__file__).parent))
from corpus import CASES, CASES_DIR, RECOVERABLE  # noqa: E402


def test_corpus_files_match_the_generator():
    for name, (data, _) in {**CASES, **RECOVERABLE}.items():
        if name.endswith(".sqlite"):  # SQLite headers differ from one write to the next
            continue
        assert (CASES_DIR / name).read_bytes() == data, f"run python tests/malformed/corpus.py ({name})"


@pytest.mark.parametrize("name", sorted(CASES))
def test_load_trace_raises_the_expected_code(name):
    expected = CASES[name][1]
    assert expected in ERROR_CODES
    with pytest.raises(TaxbreakError) as info:
        load_trace(CASES_DIR / name, use_cache=False)
    assert info.value.code == expected
    assert info.value.path == str(CASES_DIR / name)
    assert info.value.hint or expected == "input.empty"


@pytest.mark.parametrize("name", sorted(CASES))
def test_cli_prints_one_error_line_and_exits_1(name):
    result = CliRunner().invoke(main, ["info", str(CASES_DIR / name)])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert lines[0].startswith(f"error[{CASES[name][1]}]: ")
    assert all(line.startswith("  hint: ") for line in lines[1:]) and len(lines) <= 2
    assert "Traceback" not in result.output


@pytest.mark.parametrize("name", sorted(RECOVERABLE))
def test_recoverable_oddities_load_with_their_diagnostic(name):
    code = RECOVERABLE[name][1]
    assert code in DIAGNOSTIC_CODES
    tables = load_trace(CASES_DIR / name, use_cache=False)
    assert tables.diagnostics.count(code) >= 1
    assert sum(tables.meta.event_counts.values()) == tables.meta.input_events


def test_truncated_json_message_names_offset_and_last_complete_event():
    with pytest.raises(TaxbreakError) as info:
        load_trace(CASES_DIR / "truncated.json", use_cache=False)
    size = len(CASES["truncated.json"][0])
    assert info.value.location == f"byte {size:,}; last complete event traceEvents[1]"
    assert "2 complete events usable with --allow-truncated" in info.value.hint


def test_allow_truncated_keeps_the_complete_events():
    tables = load_trace(CASES_DIR / "truncated.json", allow_truncated=True, use_cache=False)
    assert tables.host_events.num_rows == 2
    assert tables.meta.input_events == 2
    assert tables.diagnostics.count("trace.truncated") == 1


def test_allow_truncated_gzip_keeps_what_inflates():
    tables = load_trace(CASES_DIR / "truncated.json.gz", allow_truncated=True, use_cache=False)
    assert tables.diagnostics.count("trace.truncated") == 1
    assert tables.host_events.num_rows == tables.meta.input_events


def test_non_utf8_name_is_replaced_and_counted():
    tables = load_trace(CASES_DIR / "non_utf8_name.json", use_cache=False)
    assert tables.host_events.column("name").to_pylist() == ["aten::\ufffd\ufffdmm"]
    assert tables.diagnostics.count("trace.invalid_utf8") == 2
