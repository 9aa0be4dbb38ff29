"""Reader for PyTorch-profiler (Kineto) Chrome-trace JSON, plain or gzip.

Pipeline (docs/trace-model.md, docs/performance.md):

1. a valid file is streamed (:mod:`kineto_stream`): read and inflated in blocks,
   its ``traceEvents`` array cut into ~2 MB chunks of typed Structs
   (:mod:`kineto_events`), each routed into table columns (:mod:`kineto_columns`)
   and dropped, so the JSON is never whole in memory;
2. anything else (invalid, truncated, BOM, non-UTF-8 names) takes the
   whole-buffer path: the bytes are read or inflated (:mod:`kineto_io`), one
   msgspec pass validates them keeping ``traceEvents`` raw, which yields exact
   typed errors or, with ``allow_truncated``, the complete events of a cut file;
   the raw array is then decoded in the same chunks;
3. tables: chunks concatenated one table at a time, times made relative to the
   origin, nesting depth/parent computed, schemas conformed, every input event
   accounted for.
"""
from __future__ import annotations

import logging
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa

from ..trace.diagnostics import Diagnostics
from ..trace.errors import TraceFormatError
from ..trace.memory import release_freed_heap
from ..trace.nesting import nesting
from ..trace.schema import TABLE_NAMES, conform, empty_table
from ..trace.tables import TraceMeta, TraceTables
from . import bounds as B
from .kineto_columns import ColumnSink
from .kineto_events import (CHUNK_BYTES, ChunkTooLong, InvalidUtf8, chunk_indices, complete_prefix, find_events_array,
                            gc_paused, iter_chunks, needs_repair)
from .kineto_io import read_trace_bytes
from .kineto_keys import DuplicateKey, duplicate_key_error, object_members
from .kineto_scan import reader_name
from .kineto_parallel import ChunkHelper, ParallelFallback, decode_in_parallel, helpers_for
from .kineto_stream import EventStream, StreamFallback, iter_blocks

log = logging.getLogger(__name__)

_VERSION_KEYS = (
    "schemaVersion", "displayTimeUnit", "traceName", "trace_id",
    "cupti_version", "cuda_runtime_version", "cuda_driver_version",
    "roctracer_version", "hip_runtime_version", "hip_driver_version",
    "record_shapes", "with_stack", "profile_memory", "with_flops", "with_modules",
)
_BYTE_AT = re.compile(r"\(byte (\d+)\)")
_UTF8_BOM = b"\xef\xbb\xbf"
_NON_SPACE = re.compile(rb"\S")


class _Top(msgspec.Struct):
    """Top-level keys of a Kineto file; ``traceEvents`` kept as raw bytes."""

    traceEvents: msgspec.Raw = msgspec.Raw()
    deviceProperties: Any = None
    baseTimeNanoseconds: Any = None
    distributedInfo: Any = None
    schemaVersion: Any = None
    displayTimeUnit: Any = None
    traceName: Any = None
    trace_id: Any = None
    cupti_version: Any = None
    cuda_runtime_version: Any = None
    cuda_driver_version: Any = None
    roctracer_version: Any = None
    hip_runtime_version: Any = None
    hip_driver_version: Any = None
    record_shapes: Any = None
    with_stack: Any = None
    profile_memory: Any = None
    with_flops: Any = None
    with_modules: Any = None


_TOP_FIELDS = tuple(name for name in _Top.__struct_fields__ if name != "traceEvents")


def decode_top(text) -> tuple[_Top, frozenset[str]]:
    """The top-level keys of a Kineto object and the set of its key names.

    Raises:
        DuplicateKey: a key appears twice (:mod:`kineto_keys`).
        msgspec.DecodeError / ValidationError: not a valid JSON object.
    """
    members = object_members(text)
    values = {name: msgspec.json.decode(members[name]) for name in _TOP_FIELDS if name in members}
    return _Top(traceEvents=members.get("traceEvents", msgspec.Raw()), **values), frozenset(members)


def read_kineto(path: str | Path, allow_truncated: bool = False, parse_workers: int | None = None) -> TraceTables:
    """Read a Kineto Chrome-trace JSON (``.json`` or ``.json.gz``) into canonical tables.

    Args:
        path: the trace file.
        allow_truncated: keep the complete events of a truncated file (with a
            ``trace.truncated`` diagnostic) instead of raising ``json.truncated``.
        parse_workers: 1 to decode with a second (forked) process, 0 for one
            process; None decides from ``$TAXBREAK_PARSE_WORKERS``, the free
            cores and the trace size (:mod:`kineto_parallel`). The tables are
            the same either way.

    Returns:
        The five tables, :class:`TraceMeta` (devices, names, rank, versions,
        accounting of every input event) and the diagnostics.

    Raises:
        TraceNotFoundError: ``input.not_found``, ``input.unreadable``.
        TraceFormatError: ``input.empty``, ``gzip.truncated``, ``json.truncated``,
            ``json.invalid``, ``kineto.no_events``, ``kineto.wrong_type``, and
            past a bound on hostile input (:mod:`bounds`): ``json.too_deep``,
            ``json.too_long``, ``json.duplicate_key``, ``gzip.too_large``,
            ``gzip.ratio``, ``kineto.time_range``.
    """
    path = Path(path)
    bounds = B.current()
    try:
        with B.json_depth(bounds):
            return _read_repairing(path, allow_truncated, parse_workers)
    except RecursionError:
        raise B.too_deep(path, bounds) from None
    except DuplicateKey as err:
        raise duplicate_key_error(path, err.key) from None
    except ChunkTooLong as err:
        raise B.too_long(path, bounds, err.args[0]) from None
    except TraceFormatError as err:
        if err.path is None:  # raised below the layer that knows the path (stream, bounds)
            err.path = str(path)
        raise


def _read_repairing(path: Path, allow_truncated: bool, parse_workers: int | None) -> TraceTables:
    try:
        return _read(path, allow_truncated, repair_utf8=False, helpers=helpers_for(path, parse_workers))
    except InvalidUtf8:
        # Strings that are not UTF-8 (house-style malformed corpus): decode with
        # replacement and count the replaced sequences, rather than lose a whole
        # trace over one kernel name. Escaped lone surrogates are repaired the same way.
        try:
            return _read(path, allow_truncated, repair_utf8=True, helpers=0)
        except InvalidUtf8 as err:  # a bad escape the repair does not cover (\u12G4)
            raise TraceFormatError("json.invalid", f"invalid JSON: {err}", str(path)) from None


def _read(path: Path, allow_truncated: bool, repair_utf8: bool, helpers: int) -> TraceTables:
    if not repair_utf8:
        try:
            if helpers:
                try:
                    return _read_streaming(path, helpers)
                except ParallelFallback as why:
                    log.debug("%s: one-process parse (%s)", path, why)
            return _read_streaming(path, 0)
        except StreamFallback as why:
            log.debug("%s: whole-buffer parse (%s)", path, why)
    return _read_whole(path, allow_truncated, repair_utf8)


def _read_streaming(path: Path, helpers: int = 0) -> TraceTables:
    """The common case, a valid file: decoded block by block (:mod:`kineto_stream`),
    with a helper process decoding some of the chunks when ``helpers`` is 1."""
    bounds = B.current()
    helper = _start_helper() if helpers else None  # forked before the inflate thread starts
    try:
        stream = EventStream(iter_blocks(path, bounds), decode_top, bounds)
        if helper is None:
            sink, input_events = _decode_chunks(stream.chunks(), bounds)
        else:
            sink, input_events = decode_in_parallel(stream.raw_chunks(), helper)
    except OSError as err:
        raise StreamFallback(str(err)) from err
    finally:
        if helper is not None:
            helper.close()
    repeated = stream.header_keys & stream.trailer_keys
    if repeated:
        raise DuplicateKey(min(repeated))
    top = _merge_top(stream.header, stream.trailer)
    return _assemble(top, sink, path, input_events, None)


def _start_helper() -> ChunkHelper | None:
    """The parse helper, or None when the system refuses a process (limits, memory): one process then."""
    try:
        return ChunkHelper()
    except OSError as err:
        log.debug("no parse helper (%s); decoding in one process", err)
        return None


def _merge_top(header: "_Top", trailer: "_Top | None") -> "_Top":
    """Top-level keys after ``traceEvents`` (e.g. ``traceName``) fill the header's gaps."""
    if trailer is not None:
        for name in header.__struct_fields__:
            if getattr(header, name) is None and getattr(trailer, name) is not None:
                setattr(header, name, getattr(trailer, name))
    return header


def _decode_chunks(chunks, bounds: B.Bounds) -> tuple[ColumnSink, int]:
    sink = ColumnSink(bounds)
    input_events = 0
    with gc_paused():
        for first, chunk, bad in chunks:
            sink.add_bad(bad)
            sink.add_chunk(chunk, chunk_indices(first, len(chunk), bad))
            input_events += len(chunk) + len(bad)
            del chunk, bad  # free this chunk's Structs before the next one is decoded
    return sink, input_events


def _read_whole(path: Path, allow_truncated: bool, repair_utf8: bool) -> TraceTables:
    """Files the streaming path cannot finish: exact typed errors, truncated tails, repaired UTF-8."""
    bounds = B.current()
    data, gzip_truncation = read_trace_bytes(path, allow_truncated, bounds)
    if _NON_SPACE.search(data) is None:  # not data.strip(): that would copy the whole trace
        raise TraceFormatError("input.empty", "the trace is empty", str(path), hint="the profiler wrote nothing")
    n_bad = n_surrogates = 0
    if repair_utf8:
        data, n_bad = _repair_utf8(data)
        data, n_surrogates = _repair_surrogates(data)
    top, sink, input_events, truncation = _decode(data, path, allow_truncated, bounds)
    del data  # the JSON bytes go before the tables are assembled: a lower peak RSS
    tables = _assemble(top, sink, path, input_events, truncation or gzip_truncation)
    if n_bad:
        tables.diagnostics.add("trace.invalid_utf8", n_bad, f"{n_bad} invalid byte sequences replaced by U+FFFD")
    if n_surrogates:
        tables.diagnostics.add("trace.lone_surrogate", n_surrogates,
                               f"{n_surrogates} escaped lone surrogates (\\ud800) replaced by U+FFFD")
    return tables


# an escape \uD800-\uDBFF not followed by \uDC00-\uDFFF, or one of those not preceded by the first
# kind; (?<!\\)(\\\\)* keeps an escaped backslash (the text "\\ud800") out
_LONE_HIGH = re.compile(rb"(?<!\\)((?:\\\\)*)\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})")
_LONE_LOW = re.compile(rb"(?<!\\u[dD][89abAB][0-9a-fA-F]{2})(?<!\\)((?:\\\\)*)\\u[dD][c-fC-F][0-9a-fA-F]{2}")


def _repair_surrogates(data: bytes) -> tuple[bytes, int]:
    """Escaped lone UTF-16 surrogates become ``\\ufffd`` (Arrow strings are UTF-8 and cannot
    hold them; msgspec refuses them where Python's json keeps them)."""
    if b"\\u" not in data:
        return data, 0
    data, n_high = _LONE_HIGH.subn(rb"\1\\ufffd", data)
    data, n_low = _LONE_LOW.subn(rb"\1\\ufffd", data)
    return data, n_high + n_low


def _repair_utf8(data: bytes | bytearray) -> tuple[bytes, int]:
    text = bytes(data).decode("utf-8", errors="replace")
    fixed = text.encode("utf-8")
    return fixed, max(fixed.count("\ufffd".encode()) - bytes(data).count("\ufffd".encode()), 1)


def _decode(data, path: Path, allow_truncated: bool, bounds: B.Bounds) -> tuple["_Top", ColumnSink, int, str | None]:
    """Decode every event into column chunks; no reference to ``data`` survives."""
    view = memoryview(data)
    if bytes(view[:3]) == _UTF8_BOM:
        view = view[3:]
    top, events, truncation = _decode_top(view, path, allow_truncated)
    chunks = iter_chunks(events, max_chunk_bytes=CHUNK_BYTES + bounds.string_bytes)
    sink, input_events = _decode_chunks(chunks, bounds)
    top.traceEvents = msgspec.Raw()
    return top, sink, input_events, truncation


def _decode_top(view: memoryview, path: Path, allow_truncated: bool) -> tuple[_Top, memoryview, str | None]:
    """Validate the whole file and return its top level and the raw events array."""
    head = bytes(view[:64]).lstrip()
    try:
        if head[:1] == b"[":  # Chrome "JSON Array Format": the file is the event list
            return _Top(), memoryview(msgspec.json.decode(view, type=msgspec.Raw)), None
        if head[:1] != b"{":
            msgspec.json.decode(view, type=msgspec.Raw)
            raise TraceFormatError("kineto.wrong_type", "the JSON value is not an object", str(path),
                                   hint="a Kineto trace is a JSON object with a traceEvents list")
        top, _ = decode_top(view)
    except msgspec.ValidationError as err:
        raise TraceFormatError("kineto.wrong_type", str(err), str(path)) from err
    except msgspec.DecodeError as err:
        if needs_repair(err):
            raise InvalidUtf8(str(err)) from err
        if "truncated" not in str(err):
            raise _invalid_json(err, view, path) from err
        return _recover_truncated(view, path, allow_truncated)
    events = memoryview(top.traceEvents)
    if len(events) == 0:
        raise TraceFormatError("kineto.no_events", "a JSON object without traceEvents", str(path),
                               hint="is this a PyTorch profiler (Kineto) trace?")
    if events[0] != ord("["):
        raise TraceFormatError("kineto.wrong_type", "traceEvents is not a list", str(path),
                               location="$.traceEvents", hint="traceEvents must be a JSON array of events")
    return top, events, None


def _invalid_json(err: msgspec.DecodeError, view: memoryview, path: Path) -> TraceFormatError:
    match = _BYTE_AT.search(str(err))
    offset = int(match.group(1)) if match else None
    context = ""
    if offset is not None:
        context = bytes(view[max(offset - 30, 0): offset + 30]).decode("utf-8", errors="replace")
    return TraceFormatError(
        "json.invalid",
        _BYTE_AT.sub("", str(err)).replace("JSON is malformed: ", "invalid JSON: ").strip(),
        str(path),
        location=f"byte {offset:,}" if offset is not None else None,
        hint=f"near: {context!r}" if context else "the file is not JSON",
    )


def _recover_truncated(view: memoryview, path: Path, allow_truncated: bool) -> tuple[_Top, memoryview, str]:
    """Keep the complete events of a file that ends early (Perfetto does the same)."""
    array_start = find_events_array(view)
    cut, n_complete = (0, 0) if array_start is None else complete_prefix(view, array_start)
    last = f"; last complete event traceEvents[{n_complete - 1}]" if n_complete else "; no complete event"
    if not allow_truncated:
        raise TraceFormatError(
            "json.truncated",
            "unexpected end of data",
            str(path),
            location=f"byte {len(view):,}{last}",
            hint=f"profiler probably killed mid-write; {n_complete:,} complete events usable with --allow-truncated",
        )
    if array_start is None:
        return _Top(), memoryview(b"[]"), f"truncated at byte {len(view):,} before traceEvents"
    events = memoryview(b"".join((view[array_start:cut], b"]")))
    try:  # the keys before traceEvents (deviceProperties, baseTimeNanoseconds) are complete
        top, _ = decode_top(b"".join((view[:array_start], b"[]}")))
    except msgspec.MsgspecError:
        top = _Top()
    return top, events, f"truncated at byte {len(view):,}; {n_complete:,} complete events kept"


def _assemble(top: _Top, sink: ColumnSink, path: Path, input_events: int, truncation: str | None) -> TraceTables:
    diags = sink.diagnostics
    meta = _meta(top, sink, path, diags)
    relative = meta.time_base == "kineto_relative"
    shift_ns = 0 if relative else (meta.origin_ns or 0)
    if sink.min_ts_ns is not None:  # relative times and their sums must stay far inside int64
        B.check_span(path, sink.bounds, min(sink.min_ts_ns, shift_ns), max(sink.max_ts_ns, shift_ns))
    tables = _finish_tables(sink, shift_ns)
    release_freed_heap()  # the nesting sorts and the conform casts left ~190 MiB freed at 10 M events
    if truncation:
        diags.add("trace.truncated", 1, truncation)
    diags.add("event.metadata", sink.counts["metadata"], "process_name / thread_name / labels")
    meta.input_events = input_events
    meta.event_counts = {name: tables[name].num_rows for name in TABLE_NAMES}
    meta.event_counts["metadata"] = sink.counts["metadata"]
    meta.event_counts["dropped"] = sink.counts["dropped"]
    if sink.counts.get("taxbreak"):  # only in a trace `taxbreak annotate` wrote
        meta.event_counts["taxbreak"] = sink.counts["taxbreak"]
    return TraceTables(**tables, meta=meta, diagnostics=diags)


def _finish_tables(sink: ColumnSink, shift_ns: int) -> dict[str, pa.Table]:
    """Every table from its chunks, one at a time, the host nesting in a second thread.

    The depth and parent of host events (sorts over millions of rows: ~1.9 s at
    10 M events) need only the host table's own columns, so they are computed
    while the other four tables are assembled; numpy releases the GIL, and the
    parse helper has exited by now. Widening the tables themselves stays one at
    a time: two at once raised the peak RSS of the parse by ~0.3 GiB.
    """
    tables = {}
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="taxbreak-nesting") as pool:
        nesting_jobs = {}
        for name in TABLE_NAMES:
            table = sink.take_table(name, shift_ns)
            release_freed_heap()  # this table's chunk columns are gone: lower the peak before the next
            if table is not None and name in _NESTED:
                nesting_jobs[name] = pool.submit(_nesting, table, "pid", "tid")
            tables[name] = table
        for name in TABLE_NAMES:
            nested = nesting_jobs[name].result() if name in nesting_jobs else None
            tables[name] = _finish_table(name, tables[name], nested)
    return tables


_BASE_LIMIT_NS = 1 << 62  # base + relative times stay inside int64
_NESTED = ("host_events", "ranges")  # tables with nesting columns (depth; parent for host events)


def _finish_table(name: str, table: pa.Table | None, nested) -> pa.Table:
    """Add nesting columns (``nested`` = depth, parent index) and conform to the canonical schema."""
    if table is None:
        return empty_table(name)
    if name == "host_events":
        depth, parent = nested
        row_id = table.column("row_id").to_numpy()
        parent_row = np.where(parent >= 0, row_id[np.maximum(parent, 0)], -1)
        table = table.append_column("depth", pa.array(depth)).append_column("parent", pa.array(parent_row))
    elif name == "ranges":
        table = table.append_column("depth", pa.array(nested[0]))
    return conform(name, table)


def _nesting(table: pa.Table, pid: str, tid: str) -> tuple[np.ndarray, np.ndarray]:
    """Depth and parent index on each (pid, tid) lane (trace.nesting)."""
    pids = table.column(pid).to_numpy()
    tids = table.column(tid).to_numpy()
    order = np.lexsort((tids, pids))
    new_lane = np.ones(len(order), dtype=bool)
    new_lane[1:] = (np.diff(pids[order]) != 0) | (np.diff(tids[order]) != 0)
    lane = np.empty(len(order), dtype=np.int64)
    lane[order] = np.cumsum(new_lane) - 1
    return nesting(lane, table.column("start_ns").to_numpy(), table.column("dur_ns").to_numpy())


_HEADER_DEPTH = 32  # header values are scalars or small dicts; deeper ones cannot be kept in the meta


def _depth_at_most(value: Any, limit: int) -> bool:
    """Whether ``value`` nests at most ``limit`` lists/dicts deep (iterative: no recursion)."""
    level, stack = [value], 0
    while level:
        stack += 1
        if stack > limit:
            return False
        level = [v for item in level if isinstance(item, (list, dict))
                 for v in (item.values() if isinstance(item, dict) else item) if isinstance(v, (list, dict))]
    return True


def _shallow_header(top: _Top, diags: Diagnostics) -> None:
    """Header keys nested past ``_HEADER_DEPTH`` (a ``traceName`` 900 lists deep) are dropped with
    ``kineto.header_too_deep``: the meta is written as JSON and printed, and each level costs a
    frame there (the reader's depth bound is not the writer's)."""
    for name in top.__struct_fields__:
        value = getattr(top, name)
        if name != "traceEvents" and isinstance(value, (list, dict)) and not _depth_at_most(value, _HEADER_DEPTH):
            setattr(top, name, None)
            diags.add("kineto.header_too_deep", 1, f"{name} nested deeper than {_HEADER_DEPTH} levels, dropped")


def _meta(top: _Top, sink: ColumnSink, path: Path, diags: Diagnostics) -> TraceMeta:
    _shallow_header(top, diags)
    base = top.baseTimeNanoseconds
    relative = type(base) is int
    if relative and not abs(base) < _BASE_LIMIT_NS:
        raise TraceFormatError("kineto.time_range", f"baseTimeNanoseconds {base} is beyond ±2**62 ns", str(path),
                               location="$.baseTimeNanoseconds", hint="an epoch in ns is ~1.7e18; this one is not")
    meta = TraceMeta(
        source_format="kineto",
        format_version="" if top.schemaVersion is None else str(top.schemaVersion),
        producer_version=_producer(top),
        path=str(path),
        origin_ns=base if relative else sink.min_ts_ns,
        time_base="kineto_relative" if relative else "kineto_epoch_us",
        devices=_devices(top.deviceProperties, diags),
        rank=_rank(top.distributedInfo),
        extra={key: getattr(top, key) for key in _VERSION_KEYS if getattr(top, key) is not None},
    )
    if top.distributedInfo is not None:
        meta.extra["distributedInfo"] = top.distributedInfo
    # the compiled scanner on (kineto_scan; chunks outside its subset still take msgspec) or off; which
    # chunks took which path depends on where they were cut, so only the debug log says it
    meta.extra["reader"] = reader_name()
    log.debug("%s: %d chunks read by the compiled scanner, %d by msgspec", path,
              sink.chunks_by.get("scanner", 0), sink.chunks_by.get("python", 0))
    _names_from_metadata(meta, sink.metadata)
    return meta


def _producer(top: _Top) -> str:
    if top.cupti_version is not None:
        return f"cupti {top.cupti_version}"
    if top.roctracer_version is not None:
        return f"roctracer {top.roctracer_version}"
    return ""


def _devices(props: Any, diags: Diagnostics) -> list[dict]:
    devices = [d for d in props if isinstance(d, dict)] if isinstance(props, list) else []
    if not devices:
        diags.add("trace.no_device_info", 1, "no deviceProperties in the trace")
    return devices


def _rank(info: Any) -> int | None:
    if isinstance(info, dict) and type(info.get("rank")) is int:
        return info["rank"]
    return None


def _names_from_metadata(meta: TraceMeta, metadata: list[tuple]) -> None:
    labels = {}
    for name, pid, tid, value, label in metadata:
        if name == "process_name" and isinstance(value, str):
            meta.process_names[str(pid)] = value
        elif name == "thread_name" and isinstance(value, str):
            meta.thread_names[f"{pid}:{tid}"] = value
        elif name == "process_labels" and label is not None:
            labels[str(pid)] = label
    if labels:
        meta.extra["process_labels"] = labels
