"""Decoding the chunks of one streamed Kineto trace in two processes.

The per-chunk work (typed decode, routing, column extraction) is ~90 % of a
parse and is pure Python, so a second core helps only through a second process.
The reading process inflates and cuts the ``traceEvents`` array as before
(:mod:`kineto_stream`), hands chunks to one forked helper while it has fewer
than ``IN_FLIGHT`` of them, and decodes the others itself. Every chunk is
decoded as if it were the first of the file (row numbers from 0); results are
merged strictly in file order, adding the chunk's first event index to its
``row_id`` columns and to the ``traceEvents[N]`` of its diagnostic examples, so
the tables and diagnostics hold the same values as the one-process path (chunk
boundaries, and so the Arrow chunk layout of a column, may differ)
(``tests/readers/test_kineto_parallel.py``).

Without the one-process path's decode of each cut, a cut that falls inside a
string or a nested value is noticed by the process that decodes the chunk; the
reader then starts again in one process (:class:`ParallelFallback`), which
handles every case. A helper that dies or stops answering costs only speed:
its chunks are decoded by the reader.
"""
from __future__ import annotations

import fcntl
import gc
import multiprocessing
import os
import pickle
import queue
import re
import signal
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import msgspec
import numpy as np

from .kineto_columns import ColumnSink, narrow_ids
from .kineto_events import InvalidUtf8, chunk_indices, decode_chunk, gc_paused
from .kineto_io import GZIP_MAGIC

IN_FLIGHT = 3  # chunks queued at the helper: enough to keep it busy (it also takes a larger share), little memory
MIN_PARALLEL_BYTES = 8 << 20  # below ~8 MB of JSON (~40 k events) the fork and merge do not pay
_GZIP_RATIO = 8  # Kineto JSON inflates ~8-10x; a floor for the size estimate
_ANSWER_TIMEOUT_S = 60.0  # a helper silent this long (a chunk takes ~50 ms) is taken as lost
_ROW_REF = re.compile(r"traceEvents\[(\d+)\]")
ENV_WORKERS = "TAXBREAK_PARSE_WORKERS"


class ParallelFallback(Exception):
    """A chunk did not decode on its own (a cut inside a value, bad UTF-8): read in one process."""


@dataclass
class ChunkColumns:
    """One chunk's share of every table, with row numbers counted from the chunk's start."""

    n_input: int
    parts: dict[str, dict[str, list]]
    counts: dict[str, int]
    diagnostics: list[tuple[str, int, str]]
    metadata: list[tuple]
    min_ts_ns: int | None
    max_ts_ns: int | None
    chunks_by: dict[str, int]  # read by the compiled scanner / by msgspec


def helpers_for(path: Path, requested: int | None = None) -> int:
    """How many helper processes to decode ``path`` with: 0 or 1.

    ``requested`` (or ``$TAXBREAK_PARSE_WORKERS``) forces it; otherwise one
    helper when a second core is free to this process, the platform forks
    (Linux) and the trace holds more than ~8 MB of JSON.
    """
    if requested is None:
        env = os.environ.get(ENV_WORKERS, "").strip()
        requested = int(env) if env.isdigit() else None
    if requested is not None:
        return 1 if requested > 0 and _can_fork() else 0
    if not _can_fork() or len(os.sched_getaffinity(0)) < 2:
        return 0
    return 1 if _json_bytes_floor(path) >= MIN_PARALLEL_BYTES else 0


def _can_fork() -> bool:
    return (sys.platform.startswith("linux") and not multiprocessing.current_process().daemon
            and not _cuda_initialized())


def _cuda_initialized() -> bool:
    """True in a process that has started CUDA (``taxbreak profile`` on a GPU parses its own trace).

    The helper would not touch CUDA, but CUDA does not support ``fork()`` after
    initialization, and such a process also runs the driver's and torch's threads:
    it parses in one process instead.
    """
    torch = sys.modules.get("torch")
    try:
        return bool(torch is not None and torch.cuda.is_initialized())
    except Exception:  # noqa: BLE001 - a broken or partial torch: do not fork either
        return torch is not None


def _json_bytes_floor(path: Path) -> int:
    try:
        size = path.stat().st_size
        with path.open("rb") as fh:
            gz = fh.read(2) == GZIP_MAGIC
    except OSError:
        return 0
    return size * _GZIP_RATIO if gz else size


def decode_columns(chunk: bytes) -> ChunkColumns:
    """Typed decode, routing and column extraction of one ``[...]`` chunk (rows from 0)."""
    try:
        events, bad = decode_chunk(chunk, 0)
    except (msgspec.DecodeError, InvalidUtf8) as err:
        raise ParallelFallback(str(err)) from err
    sink = ColumnSink()
    with gc_paused():
        sink.add_bad(bad)
        sink.add_chunk(events, chunk_indices(0, len(events), bad))
    diags = [(d.code, d.count, d.example) for d in sink.diagnostics.items.values()]
    parts = {table: dict(cols) for table, cols in sink.parts.items() if cols}
    return ChunkColumns(len(events) + len(bad), parts, dict(sink.counts), diags, sink.metadata,
                        sink.min_ts_ns, sink.max_ts_ns, dict(sink.chunks_by))


def absorb(sink: ColumnSink, chunk: ChunkColumns, first: int) -> None:
    """Append one chunk's columns to ``sink`` as if it had been decoded at event index ``first``."""
    for table, cols in chunk.parts.items():
        for name, parts in cols.items():
            if name == "row_id":  # re-narrowed by the sink's own rule (int32 while they fit)
                parts = [narrow_ids(p.astype(np.int64) + np.int64(first)) for p in parts]
            sink.parts[table][name].extend(parts)
    for code, count, example in chunk.diagnostics:
        sink.diagnostics.add(code, count, _ROW_REF.sub(lambda m: f"traceEvents[{int(m.group(1)) + first}]",
                                                       example, count=1))
    for key, value in chunk.counts.items():
        sink.counts[key] += value
    sink.metadata.extend(chunk.metadata)
    for key, value in chunk.chunks_by.items():
        sink.chunks_by[key] += value
    if chunk.min_ts_ns is not None:
        low, high = chunk.min_ts_ns, chunk.max_ts_ns
        sink.min_ts_ns = low if sink.min_ts_ns is None else min(sink.min_ts_ns, low)
        sink.max_ts_ns = high if sink.max_ts_ns is None else max(sink.max_ts_ns, high)


def decode_in_parallel(raw_chunks: Iterator[bytes], helper: "ChunkHelper") -> tuple[ColumnSink, int]:
    """Decode raw chunks with ``helper`` taking what it can; merge in file order.

    Returns the filled sink and the number of input events.

    Raises:
        ParallelFallback: a chunk did not decode on its own.
    """
    sink = ColumnSink()
    merger = _OrderedMerge(sink)
    for index, chunk in enumerate(raw_chunks):
        if helper.alive and helper.in_flight < IN_FLIGHT:
            helper.submit(index, chunk)
        else:
            merger.put(index, decode_columns(chunk))
        for done, result in helper.ready():
            merger.put(done, result)
    for done, result in helper.finish():
        merger.put(done, result)
    merger.check_complete()
    return sink, merger.first


class _OrderedMerge:
    """Holds chunk results until all earlier chunks are merged."""

    def __init__(self, sink: ColumnSink) -> None:
        self.sink = sink
        self.pending: dict[int, ChunkColumns] = {}
        self.next_index = 0
        self.first = 0  # traceEvents index of the next chunk's first event

    def put(self, index: int, result: ChunkColumns | bytes) -> None:
        if isinstance(result, bytes):  # the helper was lost: decode its chunk here
            result = decode_columns(result)
        self.pending[index] = result
        while self.next_index in self.pending:
            chunk = self.pending.pop(self.next_index)
            absorb(self.sink, chunk, self.first)
            self.first += chunk.n_input
            self.next_index += 1

    def check_complete(self) -> None:
        if self.pending:
            raise ParallelFallback(f"chunks {sorted(self.pending)} were never merged")


class ChunkHelper:
    """One forked process that decodes chunks sent to it (see module doc).

    Chunks go out through a sender thread (a 2 MB send must not stall the
    reader while the helper is busy), results come back pickled and are picked
    up without blocking by :meth:`ready`, and all at the end by :meth:`finish`.
    """

    def __init__(self) -> None:
        ctx = multiprocessing.get_context("fork")
        task_out, self._task_in = ctx.Pipe(duplex=False)
        self._result_out, result_in = ctx.Pipe(duplex=False)
        self._process = ctx.Process(target=_serve, args=(task_out, result_in, self._task_in, self._result_out),
                                    name="taxbreak-parse", daemon=True)
        for conn in (task_out, self._result_out):
            _widen_pipe(conn)
        self._process.start()
        task_out.close()
        result_in.close()
        self._unanswered: dict[int, bytes] = {}  # chunks sent, kept until answered (for a lost helper)
        self._outbox: queue.SimpleQueue = queue.SimpleQueue()  # (index, chunk), None to stop
        self._sender = threading.Thread(target=self._send_loop, name="taxbreak-parse-send", daemon=True)
        self._sender.start()
        self.alive = True
        self._closed = False

    @property
    def in_flight(self) -> int:
        return len(self._unanswered)

    def submit(self, index: int, chunk: bytes) -> None:
        self._unanswered[index] = chunk
        self._outbox.put((index, chunk))

    def ready(self) -> list[tuple[int, ChunkColumns | bytes]]:
        """Results that have arrived, without waiting."""
        out = []
        while self.alive and self._unanswered and self._poll(0):
            out.append(self._receive())
        return out

    def finish(self) -> list[tuple[int, ChunkColumns | bytes]]:
        """Every outstanding result (a lost helper's chunks come back as their bytes)."""
        out = []
        while self.alive and self._unanswered:
            if not self._poll(_ANSWER_TIMEOUT_S):
                self._lose()
                break
            out.append(self._receive())
        out.extend(self._unanswered.items())
        self._unanswered.clear()
        self.close()
        return out

    def close(self) -> None:
        """Stop the sender thread and the helper process (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._outbox.put(None)
        self._sender.join(timeout=5)
        self._result_out.close()
        self._process.join(timeout=5)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()

    def _poll(self, timeout: float) -> bool:
        try:
            return self._result_out.poll(timeout)
        except (OSError, EOFError):
            self._lose()
            return False

    def _receive(self) -> tuple[int, ChunkColumns | bytes]:
        try:
            index, status, payload = pickle.loads(self._result_out.recv_bytes())
        except (OSError, EOFError, pickle.UnpicklingError):
            self._lose()
            index = next(iter(self._unanswered))
            return index, self._unanswered.pop(index)
        self._unanswered.pop(index, None)
        if status == "error":
            raise ParallelFallback(payload)
        return index, payload

    def _lose(self) -> None:
        self.alive = False
        if self._process.is_alive():
            self._process.kill()

    def _send_loop(self) -> None:
        while (item := self._outbox.get()) is not None:
            try:  # index, then the chunk: two messages, so the chunk is not copied
                self._task_in.send_bytes(item[0].to_bytes(8, "little"))
                self._task_in.send_bytes(item[1])
            except OSError:
                break
        self._task_in.close()


PIPE_BYTES = 1 << 20  # a chunk's columns pickle to ~0.9 MB (10 k events): one write, no wait


def _widen_pipe(conn) -> None:
    """Raise a pipe's buffer from 64 KB to 1 MB (Linux ``F_SETPIPE_SZ``).

    With 64 KB the helper blocked on every result until the reader, busy with
    its own chunk, drained the pipe: at 1 M events it spent 0.7 of its 2.5 s
    in ``send``. Refused (a lower ``pipe-max-size``) it stays as it was.
    """
    try:
        fcntl.fcntl(conn.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_BYTES)
    except OSError:
        pass


def _serve(tasks, results, parent_task_in, parent_result_out) -> None:
    """The helper's loop: decode each chunk it receives and send its columns back."""
    parent_task_in.close()  # the parent's ends, inherited through fork
    parent_result_out.close()
    # Ctrl-C reaches the whole process group: the reader stops the helper, which must not print a traceback
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    gc.disable()  # the helper builds many objects and no cycles; its heap dies with it
    while True:
        try:
            index = int.from_bytes(tasks.recv_bytes(), "little")
            chunk = tasks.recv_bytes()
        except (EOFError, OSError):
            return
        try:
            answer = (index, "ok", decode_columns(chunk))
        except Exception as err:  # noqa: BLE001 - any failure: the reader redoes the trace in one process
            answer = (index, "error", f"{type(err).__name__}: {err}")
        try:
            results.send_bytes(pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL))
        except OSError:  # the reader has stopped listening (Ctrl-C, an error): nothing left to do
            return
