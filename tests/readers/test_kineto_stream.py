"""The streaming path (valid files, bounded memory) gives exactly what the
whole-buffer path gives, and hands every odd file over to it."""
from __future__ import annotations

import gzip
import json
from dataclasses import asdict

import pytest

from taxbreak.readers import kineto
from taxbreak.readers import kineto_stream as ks
from taxbreak.readers.kineto_stream import StreamFallback

SMALL_REAL = [
    "HolisticTraceAnalysis/tests/data/triton_example/triton_example.json.gz",
    "HolisticTraceAnalysis/tests/data/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "HolisticTraceAnalysis/tests/data/call_stack/backward_thread.json",
    "HolisticTraceAnalysis/tests/data/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
]
TABLES = ("host_events", "api_calls", "device_activities", "ranges", "flows")


def _same(a, b) -> bool:
    # values, not layout: chunked dictionary columns carry one dictionary per chunk
    return (all(a.table(n).to_pylist() == b.table(n).to_pylist() for n in TABLES) and asdict(a.meta) == asdict(b.meta)
            and a.diagnostics.as_dict() == b.diagnostics.as_dict())


@pytest.fixture
def tiny_blocks(monkeypatch):
    """Blocks and chunks of a few bytes, so every cut and block edge is exercised."""
    monkeypatch.setattr(ks, "BLOCK_BYTES", 64)
    monkeypatch.setattr(ks, "CHUNK_BYTES", 100)
    original = ks.EventStream.chunks
    monkeypatch.setattr(ks.EventStream, "chunks", lambda self, chunk_bytes=100: original(self, chunk_bytes))


@pytest.mark.parametrize("rel", SMALL_REAL)
def test_streaming_equals_whole_buffer_on_real_traces(shared_traces, rel):
    path = shared_traces / rel
    assert _same(kineto._read_streaming(path), kineto._read_whole(path, False, False))


@pytest.mark.parametrize("rel", SMALL_REAL[:2])
def test_streaming_with_tiny_blocks(shared_traces, rel, tiny_blocks):
    path = shared_traces / rel
    assert _same(kineto._read_streaming(path), kineto._read_whole(path, False, False))


def _events(n):
    return [{"ph": "X", "cat": "cpu_op", "name": 'odd},{"name', "pid": 1, "tid": 1, "ts": i, "dur": 1,
             "args": {"Input Dims": [[1], [2]], "nested": [{"a": 1}, {"b": 2}]}} for i in range(n)]


@pytest.mark.parametrize("layout", ["events_first", "events_last", "keys_after", "array", "gzip", "empty"])
def test_layouts(tmp_path, layout, tiny_blocks):
    props = [{"id": 0, "name": "GPU A"}, {"id": 1, "name": "GPU B"}]  # contains "}, {" after the array
    events = [] if layout == "empty" else _events(30)
    if layout == "events_first":
        text = json.dumps({"traceEvents": events, "deviceProperties": props, "baseTimeNanoseconds": 5})
    elif layout in ("events_last", "gzip", "empty"):
        text = json.dumps({"deviceProperties": props, "baseTimeNanoseconds": 5, "traceEvents": events})
    elif layout == "keys_after":
        text = json.dumps({"schemaVersion": 1, "traceEvents": events, "traceName": "x", "deviceProperties": props})
    else:
        text = json.dumps(events)
    path = tmp_path / ("t.json.gz" if layout == "gzip" else "t.json")
    path.write_bytes(gzip.compress(text.encode()) if layout == "gzip" else text.encode())
    streamed = kineto._read_streaming(path)
    assert _same(streamed, kineto._read_whole(path, False, False))
    assert streamed.host_events.num_rows == len(events)
    if layout != "array":
        assert streamed.meta.device_names == ["GPU A", "GPU B"]


@pytest.mark.parametrize("data", [
    b"", b'{"traceEvents": [{"ph": "X"}', b'{"traceEvents": [{"ph": "X"} {"ph": "X"}]}',
    b'{"traceEvents": [], "x": }', b'\xef\xbb\xbf{"traceEvents": []}', b'[{"ph": "X"}] trailing',
])
def test_odd_files_fall_back(tmp_path, data):
    path = tmp_path / "odd.json"
    path.write_bytes(data)
    with pytest.raises(StreamFallback):
        kineto._read_streaming(path)


def test_truncated_gzip_falls_back(tmp_path):
    path = tmp_path / "cut.json.gz"
    path.write_bytes(gzip.compress(json.dumps({"traceEvents": _events(50)}).encode())[:-30])
    with pytest.raises(StreamFallback):
        kineto._read_streaming(path)
