"""Format detection from content, and run-directory resolution."""
from __future__ import annotations

import gzip

import pytest

from taxbreak.readers.detect import KINETO, NSYS_REP, NSYS_SQLITE, detect_format, resolve_trace_path
from taxbreak.trace.errors import TaxbreakError


@pytest.mark.parametrize("name, data, kind, compressed", [
    ("a.json", b'{"traceEvents": []}', KINETO, False),
    ("misnamed.sqlite", b'  \n{"traceEvents": []}', KINETO, False),
    ("bom.json", b'\xef\xbb\xbf{"traceEvents": []}', KINETO, False),
    ("array.txt", b'[{"ph": "X"}]', KINETO, False),
    ("trace.bin", gzip.compress(b"{}"), KINETO, True),
    ("export.json", b"SQLite format 3\x00" + bytes(100), NSYS_SQLITE, False),
    ("report.nsys-rep", b"\x00\x01binary", NSYS_REP, False),
])
def test_detects_from_content(tmp_path, name, data, kind, compressed):
    path = tmp_path / name
    path.write_bytes(data)
    fmt = detect_format(path)
    assert (fmt.kind, fmt.compressed) == (kind, compressed)


@pytest.mark.parametrize("data, code", [
    (b"", "input.empty"), (b"   ", "input.empty"), (b"PK\x03\x04zip", "format.unknown"),
    ('{"a": 1}'.encode("utf-16"), "json.encoding"),
])
def test_rejects_with_stable_codes(tmp_path, data, code):
    path = tmp_path / "x"
    path.write_bytes(data)
    with pytest.raises(TaxbreakError) as info:
        detect_format(path)
    assert info.value.code == code


def test_missing_path(tmp_path):
    with pytest.raises(TaxbreakError) as info:
        resolve_trace_path(tmp_path / "nope.json")
    assert info.value.code == "input.not_found"


def test_run_directory_resolves_to_its_trace(tmp_path):
    (tmp_path / "manifest.json").write_text("{}")
    with pytest.raises(TaxbreakError) as info:
        resolve_trace_path(tmp_path)
    assert info.value.code == "run.no_traces"
    (tmp_path / "trace.json").write_text('{"traceEvents": []}')
    (tmp_path / "trace.json.gz").write_bytes(gzip.compress(b'{"traceEvents": []}'))
    assert resolve_trace_path(tmp_path) == tmp_path / "trace.json.gz"


def test_directory_without_manifest(tmp_path):
    with pytest.raises(TaxbreakError) as info:
        resolve_trace_path(tmp_path)
    assert info.value.code == "run.not_a_run"
