"""Fuzzing: random bytes and random mutations/truncations of a valid small trace
give either tables or a TaxbreakError, never any other exception."""
from __future__ import annotations

import gzip
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from taxbreak.readers import parse_trace
from taxbreak.trace.errors import TaxbreakError

_EVENTS = [
    {"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": "python"}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1695835573023613.123, "dur": 9.5,
     "args": {"External id": 3, "Input Dims": [[2, 2], [2, 2]]}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1695835573023614,
     "dur": 2, "args": {"External id": 3, "correlation": 8, "cbid": 211}},
    {"ph": "s", "id": 8, "pid": 1, "tid": 1, "ts": 1695835573023614, "cat": "ac2g", "name": "ac2g"},
    {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 1695835573023620, "dur": 3,
     "args": {"correlation": 8, "grid": [1, 1, 1], "block": [32, 1, 1], "stream": 7, "device": 0}},
    {"ph": "f", "id": 8, "pid": 0, "tid": 7, "ts": 1695835573023620, "cat": "ac2g", "name": "ac2g", "bp": "e"},
    {"ph": "i", "s": "t", "name": "mark", "pid": 1, "tid": 1, "ts": 1695835573023621},
]
VALID = json.dumps({"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "GPU"}], "traceEvents": _EVENTS}).encode()
SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _parse(tmp_path, data: bytes) -> None:
    path = tmp_path / "fuzz.json"
    path.write_bytes(data)
    try:
        tables = parse_trace(path)
    except TaxbreakError:
        return
    assert sum(tables.meta.event_counts.values()) == tables.meta.input_events


@SETTINGS
@given(data=st.binary(max_size=400))
def test_random_bytes(tmp_path, data):
    _parse(tmp_path, data)


@SETTINGS
@given(cut=st.integers(min_value=0, max_value=len(VALID)))
def test_truncations(tmp_path, cut):
    _parse(tmp_path, VALID[:cut])


@SETTINGS
@given(cut=st.integers(min_value=0, max_value=len(VALID)), compress=st.booleans())
def test_truncated_gzip(tmp_path, cut, compress):
    packed = gzip.compress(VALID, mtime=0)
    _parse(tmp_path, packed[: cut % (len(packed) + 1)] if compress else packed)


@SETTINGS
@given(edits=st.lists(st.tuples(st.integers(min_value=0, max_value=len(VALID) - 1), st.integers(0, 255)),
                      min_size=1, max_size=8))
def test_byte_mutations(tmp_path, edits):
    data = bytearray(VALID)
    for pos, value in edits:
        data[pos] = value
    _parse(tmp_path, bytes(data))


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


@SETTINGS
@given(field=st.sampled_from(["ph", "cat", "name", "pid", "tid", "ts", "dur", "id", "args"]),
       index=st.integers(0, len(_EVENTS) - 1), value=_JSON)
def test_any_json_value_in_any_field(tmp_path, field, index, value):
    events = [dict(e) for e in _EVENTS]
    events[index][field] = value
    _parse(tmp_path, json.dumps({"traceEvents": events}).encode())
