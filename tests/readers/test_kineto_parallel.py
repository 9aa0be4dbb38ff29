"""Two-process decoding (kineto_parallel) gives exactly the one-process tables,
diagnostics and metadata, and survives bad cuts and a lost helper."""
from __future__ import annotations

import gzip
import json
import os
from dataclasses import asdict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from taxbreak.readers import kineto
from taxbreak.readers import kineto_parallel as kp
from taxbreak.readers import kineto_stream as ks
from taxbreak.readers.kineto_parallel import ParallelFallback

from conftest import shared_trace_paths

TABLES = ("host_events", "api_calls", "device_activities", "ranges", "flows")
KINETO_REAL = [p for p in shared_trace_paths((".json", ".json.gz"))]


def _same(a, b) -> bool:
    return (all(a.table(n).to_pylist() == b.table(n).to_pylist() for n in TABLES) and asdict(a.meta) == asdict(b.meta)
            and a.diagnostics.as_dict() == b.diagnostics.as_dict())


def _chunk_bytes(monkeypatch, size: int) -> None:
    original = ks.EventStream.raw_chunks
    monkeypatch.setattr(ks.EventStream, "raw_chunks", lambda self, chunk_bytes=size: original(self, chunk_bytes))


@pytest.fixture
def small_chunks(monkeypatch):
    """~4 KB chunks: even a small trace is decoded in many pieces by both processes."""
    _chunk_bytes(monkeypatch, 4096)


def _serial(path):
    return kineto.read_kineto(path, parse_workers=0)


@pytest.mark.parametrize("path", KINETO_REAL, ids=lambda p: p.name)
def test_parallel_equals_serial_on_real_traces(path, monkeypatch):
    _chunk_bytes(monkeypatch, max(4096, path.stat().st_size // 16))  # ~16-100 chunks per trace
    try:
        serial = _serial(path)
    except Exception as err:  # malformed corpus files: both paths must raise the same
        with pytest.raises(type(err)):
            kineto.read_kineto(path, parse_workers=1)
        return
    original = kineto._read_streaming
    monkeypatch.setattr(kineto, "_read_streaming", lambda p, helpers=0: _no_fallback(original, p, helpers))
    assert _same(kineto.read_kineto(path, parse_workers=1), serial)


def _no_fallback(read, path, helpers):
    """The parallel path must not give up on a real trace: equality must come from two processes."""
    try:
        return read(path, helpers)
    except ParallelFallback as err:
        raise AssertionError(f"parallel decoding gave up: {err}") from err


def _planted_events(n: int) -> list[dict]:
    """Ops, kernels and, spread over the trace, events that raise diagnostics."""
    events = []
    for i in range(n):
        events.append({"ph": "X", "cat": "cpu_op", "name": f"aten::op{i % 7}", "pid": 1, "tid": 1,
                       "ts": 10 * i, "dur": 5, "args": {"External id": i, "Input Dims": [[i, 2]]}})
        events.append({"ph": "X", "cat": "kernel", "name": f"k{i % 3}", "pid": 0, "tid": 7, "ts": 10 * i + 6,
                       "dur": 2, "args": {"correlation": i, "stream": 7, "grid": [1, 1, 1], "block": [32, 1, 1]}})
        if i % 97 == 50:
            events.append({"ph": "i", "cat": "cpu_instant_event", "name": "mark", "pid": 1, "tid": 1, "ts": 10 * i})
        if i % 131 == 60:
            events.append({"ph": "X", "cat": "cpu_op", "name": "no_dur", "pid": 1, "tid": 1, "ts": 10 * i + 1})
        if i % 149 == 70:
            events.append({"ph": "X", "cat": "cpu_op", "name": 17, "pid": 1, "tid": 1, "ts": 10 * i + 2, "dur": 1})
        if i % 173 == 80:
            events.append({"ph": "M", "name": "thread_name", "pid": 1, "tid": i, "args": {"name": f"t{i}"}})
    return events


def test_diagnostics_name_the_same_rows(tmp_path, small_chunks, monkeypatch):
    path = tmp_path / "planted.json"
    path.write_text(json.dumps({"traceEvents": _planted_events(2000), "traceName": "p"}))
    original = kineto._read_streaming
    monkeypatch.setattr(kineto, "_read_streaming", lambda p, helpers=0: _no_fallback(original, p, helpers))
    decoded_here = []
    decode = kp.decode_columns
    monkeypatch.setattr(kp, "decode_columns", lambda chunk: decoded_here.append(1) or decode(chunk))
    n_chunks = sum(1 for _ in ks.EventStream(ks.iter_blocks(path), kineto.decode_top).raw_chunks())
    parallel, serial = kineto.read_kineto(path, parse_workers=1), _serial(path)
    assert 0 < len(decoded_here) < n_chunks  # the reader decoded some chunks, the helper the rest
    assert _same(parallel, serial)
    diags = parallel.diagnostics.as_dict()
    # the first instant event follows the op and kernel of i = 50: 2 * 51 events before it
    assert parallel.diagnostics.count("event.instant") == len([i for i in range(2000) if i % 97 == 50])
    assert "traceEvents[102]" in diags["event.instant"]["example"]  # after 51 op/kernel pairs
    assert parallel.host_events.column("row_id").to_pylist() == serial.host_events.column("row_id").to_pylist()


def test_cut_inside_a_string_falls_back_to_one_process(tmp_path, small_chunks, monkeypatch):
    events = [{"ph": "X", "cat": "cpu_op", "name": 'odd},{"name' * 40, "pid": 1, "tid": 1, "ts": i, "dur": 1}
              for i in range(400)]
    path = tmp_path / "odd.json.gz"
    path.write_bytes(gzip.compress(json.dumps({"traceEvents": events}).encode()))
    fell_back = []
    original = kineto._read_streaming

    def spy(path, helpers=0):
        try:
            return original(path, helpers)
        except ParallelFallback:
            fell_back.append(helpers)
            raise

    monkeypatch.setattr(kineto, "_read_streaming", spy)
    result = kineto.read_kineto(path, parse_workers=1)
    assert fell_back == [1]
    assert result.host_events.num_rows == 400
    assert _same(result, _serial(path))


def test_lost_helper_costs_only_speed(tmp_path, small_chunks, monkeypatch):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": _planted_events(1500)}))

    def die_after_one(tasks, results, *parent_ends):
        int.from_bytes(tasks.recv_bytes(), "little")
        tasks.recv_bytes()
        os._exit(3)  # a helper killed (out of memory, signal) mid-trace

    monkeypatch.setattr(kp, "_serve", die_after_one)
    assert _same(kineto.read_kineto(path, parse_workers=1), _serial(path))


def test_helper_reports_undecodable_chunk(tmp_path, small_chunks):
    # invalid UTF-8 in a name: the decoding process reports it, the reader repairs it in one process
    text = json.dumps({"traceEvents": _planted_events(800)}).encode()
    text = text.replace(b"aten::op3", b"aten::o\xff3", 1)
    path = tmp_path / "bad_utf8.json"
    path.write_bytes(text)
    result = kineto.read_kineto(path, parse_workers=1)
    assert result.diagnostics.count("trace.invalid_utf8") == 1
    assert _same(result, _serial(path))


def test_helpers_for(tmp_path, monkeypatch):
    small = tmp_path / "small.json"
    small.write_text("{}")
    monkeypatch.delenv(kp.ENV_WORKERS, raising=False)
    assert kp.helpers_for(small) == 0  # too small to pay for a second process
    assert kp.helpers_for(small, 1) == 1
    monkeypatch.setenv(kp.ENV_WORKERS, "0")
    big = tmp_path / "big.json"
    with big.open("wb") as fh:
        fh.truncate(kp.MIN_PARALLEL_BYTES)  # sparse: the size is what counts
    assert kp.helpers_for(big) == 0
    monkeypatch.setenv(kp.ENV_WORKERS, "1")
    assert kp.helpers_for(small) == 1
    monkeypatch.delenv(kp.ENV_WORKERS)
    expected = 1 if len(os.sched_getaffinity(0)) >= 2 else 0
    assert kp.helpers_for(big) == expected


def test_absorb_shifts_rows_and_examples():
    chunk = kp.decode_columns(json.dumps(_planted_events(60)).encode())
    sink = kp.ColumnSink()
    kp.absorb(sink, chunk, 1000)
    assert sink.parts["host_events"]["row_id"][0][0] == 1000
    assert "traceEvents[1102]" in sink.diagnostics.as_dict()["event.instant"]["example"]


def test_merge_waits_for_earlier_chunks():
    sink = kp.ColumnSink()
    merge = kp._OrderedMerge(sink)
    second = kp.decode_columns(json.dumps(_planted_events(3)).encode())
    merge.put(1, second)
    assert merge.next_index == 0 and sink.counts["host_events"] == 0
    with pytest.raises(ParallelFallback):
        merge.check_complete()
    merge.put(0, kp.decode_columns(json.dumps(_planted_events(2)).encode()))
    assert merge.next_index == 2 and merge.first == 4 + 6


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(chunk_bytes=st.integers(min_value=48, max_value=6000), in_flight=st.integers(min_value=1, max_value=4))
def test_any_chunking_gives_the_one_process_tables(tmp_path_factory, chunk_bytes, in_flight):
    path = tmp_path_factory.getbasetemp() / "property.json.gz"
    if not path.exists():
        path.write_bytes(gzip.compress(json.dumps({"traceEvents": _planted_events(300)}).encode()))
    serial = _serial(path)
    with pytest.MonkeyPatch.context() as mp:  # per example: patches must not pile up across examples
        _chunk_bytes(mp, chunk_bytes)
        mp.setattr(kp, "IN_FLIGHT", in_flight)
        original = kineto._read_streaming
        mp.setattr(kineto, "_read_streaming", lambda p, helpers=0: _no_fallback(original, p, helpers))
        assert _same(kineto.read_kineto(path, parse_workers=1), serial)


def test_no_process_to_fork_reads_in_one_process(tmp_path, monkeypatch):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": _planted_events(200)}))

    def refuse():
        raise OSError(11, "Resource temporarily unavailable")  # fork() under a process limit

    monkeypatch.setattr(kineto, "ChunkHelper", refuse)
    assert _same(kineto.read_kineto(path, parse_workers=1), _serial(path))


def test_no_helper_once_cuda_is_initialized(monkeypatch, tmp_path):
    big = tmp_path / "big.json"
    with big.open("wb") as fh:
        fh.truncate(kp.MIN_PARALLEL_BYTES)
    monkeypatch.delenv(kp.ENV_WORKERS, raising=False)
    monkeypatch.setattr(kp, "_cuda_initialized", lambda: True)
    assert kp.helpers_for(big) == 0 and kp.helpers_for(big, 1) == 0


def test_result_pipe_is_widened_so_the_helper_need_not_wait():
    """A chunk's columns (~0.9 MB) fit the result pipe: the helper's send does not
    wait for the reader to finish its own chunk."""
    fcntl = pytest.importorskip("fcntl")
    max_size = int(open("/proc/sys/fs/pipe-max-size").read())
    helper = kp.ChunkHelper()
    try:
        size = fcntl.fcntl(helper._result_out.fileno(), getattr(fcntl, "F_GETPIPE_SZ", 1032))
    finally:
        helper.close()
    allowed = max_size >= kp.PIPE_BYTES or os.geteuid() == 0  # root may go past pipe-max-size
    assert size == (kp.PIPE_BYTES if allowed else 65536)


def test_refused_pipe_widening_is_harmless(monkeypatch):
    def refuse(*args):
        raise OSError(1, "Operation not permitted")

    monkeypatch.setattr(kp.fcntl, "fcntl", refuse)
    helper = kp.ChunkHelper()
    chunk = b'[{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":1.0,"dur":2.0}]'
    helper.submit(0, chunk)
    results = helper.finish()
    assert [(index, result.n_input, result.counts["host_events"]) for index, result in results] == [(0, 1, 1)]
