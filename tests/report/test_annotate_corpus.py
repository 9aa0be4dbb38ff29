"""Every real Kineto trace analyses the same after ``taxbreak annotate``: frames
and summary equal, no new diagnostic, every original event's text kept."""
from __future__ import annotations

import msgspec
import pytest
from conftest import shared_trace_paths

from taxbreak.decompose import analyze
from taxbreak.report.annotate import write_annotated
from taxbreak.report.annotate_io import read_trace_bytes, split_document

from .test_annotate import assert_same_analysis

CASES = [pytest.param(p, id=p.name) for p in shared_trace_paths((".json", ".json.gz"))]


def _raw_events(path) -> list[bytes]:
    _, array = split_document(read_trace_bytes(path))
    return [bytes(e) for e in msgspec.json.decode(array, type=list[msgspec.Raw])]


@pytest.mark.parametrize("trace", CASES)
def test_annotated_copy_analyses_the_same(trace, tmp_path):
    original = analyze(trace)
    out = tmp_path / "annotated.json.gz"
    write_annotated(trace, original, out)
    before, after = _raw_events(trace), _raw_events(out)
    assert after[: len(before)] == before
    assert_same_analysis(original, analyze(out))
