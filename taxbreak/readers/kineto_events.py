"""Decoding the ``traceEvents`` array in bounded chunks.

In the whole-buffer path the file is first checked by one msgspec pass that
keeps ``traceEvents`` as raw bytes (:class:`msgspec.Raw`, zero-copy); that raw
array is then cut at event boundaries into chunks of ~2 MB and each chunk is decoded into typed
Structs holding only the fields taxbreak reads, so unknown keys are skipped in C
and no dicts are built (parse-speed.md: 0.54 s per 1 M events with GC off).

A cut is placed after a ``}`` followed by ``,`` and ``{``. Such a pattern can
also occur inside a string or a nested object; the cut is accepted only when
``[`` + chunk + ``]`` decodes, which is possible only at depth 1 between two
complete events (inside a string or a nested value one ``]`` cannot close
what is open), otherwise the next candidate is tried.
"""
from __future__ import annotations

import gc
import re
from contextlib import contextmanager
from typing import Any, Iterator

import msgspec
import numpy as np

from .kineto_scan import ScannedEvents, scan

CHUNK_BYTES = 2 << 20
_CUT = re.compile(rb"\}\s*,\s*\{")
_EVENT_END = re.compile(rb"\}\s*[,\]]")
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_RAW_LIST = msgspec.json.Decoder(list[msgspec.Raw])


class ChunkTooLong(Exception):
    """No event boundary within the chunk bound (one event or string too long); ``args[0]`` = bytes."""


class InvalidUtf8(Exception):
    """A decoded string is not valid UTF-8; the caller repairs the buffer and restarts."""


class Args(msgspec.Struct, gc=False):
    """The ``args`` keys taxbreak reads (trace-formats.md, table of categories).

    Scalars are typed ``Any`` on purpose: real traces hold ``stream: "0x0"``
    (ROCm) and ``grid: "grid(100,)"`` (Inductor ``cpu_op``); a strict type
    would reject the whole event. Shapes stay raw JSON text for the replay.
    """

    external_id: Any = msgspec.field(default=None, name="External id")
    correlation: Any = None
    cbid: Any = None
    python_id: Any = msgspec.field(default=None, name="Python id")
    python_parent_id: Any = msgspec.field(default=None, name="Python parent id")
    sequence_nr: Any = msgspec.field(default=None, name="Sequence number")
    input_dims: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input Dims")
    input_types: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input type")
    input_strides: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input Strides")
    concrete_inputs: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Concrete Inputs")
    device: Any = None
    context: Any = None
    stream: Any = None
    registers: Any = msgspec.field(default=None, name="registers per thread")
    shared_memory: Any = msgspec.field(default=None, name="shared memory")
    grid: Any = None
    block: Any = None
    bytes: Any = None
    graph_id: Any = msgspec.field(default=None, name="graph id")
    graph_node_id: Any = msgspec.field(default=None, name="graph node id")
    name: Any = None  # M events: process_name / thread_name value
    labels: Any = None  # M process_labels


class Event(msgspec.Struct, gc=False):
    """One Chrome-trace event, only the envelope fields taxbreak reads."""

    ph: str | None = None
    cat: str | None = None
    name: str | None = None
    pid: Any = None
    tid: Any = None
    ts: msgspec.Raw = msgspec.Raw()
    dur: msgspec.Raw = msgspec.Raw()
    id: Any = None
    args: Args | None = None


_EVENTS = msgspec.json.Decoder(list[Event])
_EVENT = msgspec.json.Decoder(Event)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic GC while millions of objects are built (parse-speed.md)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def iter_chunks(array: memoryview, chunk_bytes: int = CHUNK_BYTES,
                max_chunk_bytes: int | None = None) -> Iterator[tuple[int, list[Event], list[tuple[int, str]]]]:
    """Decode a valid JSON array of events chunk by chunk.

    Args:
        array: the bytes of the ``traceEvents`` array, ``[`` to ``]`` included,
            already known to be valid JSON.
        chunk_bytes: target size of one chunk.
        max_chunk_bytes: the largest chunk (an event or string longer than the
            bound): beyond it :class:`ChunkTooLong`.

    Yields:
        ``(first_index, events, bad)``: the decoded events of one chunk, the
        index of its first event in ``traceEvents``, and ``(index, message)``
        for each event of the chunk that has a field of the wrong JSON type
        (those are not in ``events``; ``events[k]`` is then at the index given
        by :func:`chunk_indices`).
    """
    body_end = _last_bracket(array)
    pos = _first_nonspace(array, 1, body_end)
    first = 0
    while pos < body_end:
        events, bad, pos = _decode_next(array, pos, body_end, first, chunk_bytes, max_chunk_bytes)
        n_decoded = len(events) + len(bad)
        yield first, events, bad
        del events, bad  # so that one chunk of Structs is alive at a time, not two
        first += n_decoded


def _decode_next(array: memoryview, pos: int, body_end: int, first: int, chunk_bytes: int,
                 max_chunk_bytes: int | None = None):
    """Decode the chunk that starts at ``pos``; returns its events and the next start.

    The array is known to be valid JSON, so a chunk that fails to decode was cut
    inside a string or a nested value: extend it to the next candidate cut.
    """
    target = pos + chunk_bytes
    while True:
        cut, next_pos = _next_cut(array, target, body_end)
        if max_chunk_bytes is not None and cut - pos > max_chunk_bytes:
            raise ChunkTooLong(cut - pos)
        try:
            events, bad = decode_chunk(b"".join((b"[", array[pos:cut], b"]")), first)
            return events, bad, next_pos
        except msgspec.DecodeError:
            if cut >= body_end:
                raise
            target = next_pos


def _next_cut(array: memoryview, target: int, body_end: int) -> tuple[int, int]:
    """The first candidate cut at or after ``target``, and where the next chunk starts."""
    if target < body_end:
        match = _CUT.search(array, target, body_end)
        if match is not None:
            return match.start() + 1, match.end() - 1
    return body_end, body_end


def decode_chunk(chunk: bytes, first: int) -> tuple["list[Event] | ScannedEvents", list[tuple[int, str]]]:
    """One ``[...]`` chunk: read by the compiled scanner when it can (:mod:`kineto_scan`),
    else decoded into typed Structs (:func:`decode_structs`)."""
    scanned = scan(chunk)
    if scanned is not None:
        return scanned, []
    return decode_structs(chunk, first)


def decode_event(raw: bytes) -> Event:
    """One event's JSON text as a typed Struct."""
    return _EVENT.decode(raw)


def decode_structs(chunk: bytes, first: int) -> tuple[list[Event], list[tuple[int, str]]]:
    """Typed decode of one ``[...]`` chunk; per-event fallback when a type is wrong."""
    try:
        with gc_paused():
            return _EVENTS.decode(chunk), []
    except msgspec.ValidationError:
        pass
    except msgspec.DecodeError as err:
        _raise_if_utf8(err)
        raise
    return _decode_one_by_one(chunk, first)


def _decode_one_by_one(chunk: bytes, first: int) -> tuple[list[Event], list[tuple[int, str]]]:
    """Slow path for a chunk with a badly typed event: keep every good event,
    report the bad ones by index (diagnostic ``event.wrong_type``)."""
    events: list[Event] = []
    bad: list[tuple[int, str]] = []
    for k, raw in enumerate(_RAW_LIST.decode(chunk)):
        try:
            events.append(_EVENT.decode(raw))
        except msgspec.ValidationError as err:
            bad.append((first + k, str(err).replace("$", f"traceEvents[{first + k}]", 1)))
        except msgspec.DecodeError as err:
            _raise_if_utf8(err)
            raise
    return events, bad


def chunk_indices(first: int, n_events: int, bad: list[tuple[int, str]]) -> np.ndarray:
    """``traceEvents`` index of each decoded event of a chunk (bad ones skipped)."""
    idx = np.arange(first, first + n_events + len(bad), dtype=np.int64)
    if bad:
        idx = np.delete(idx, [i - first for i, _ in bad])
    return idx


def _raise_if_utf8(err: msgspec.DecodeError) -> None:
    if needs_repair(err):
        raise InvalidUtf8(str(err)) from err


def needs_repair(err: msgspec.DecodeError) -> bool:
    """Bytes that are not UTF-8, or an escaped lone surrogate (``"\\ud800"``: msgspec says
    "unexpected end of hex escape"; Python's json and Chrome accept it): the buffer is
    repaired and read again (kineto._repair_text)."""
    text = str(err)
    return "UTF-8" in text or "hex escape" in text


def _last_bracket(array: memoryview) -> int:
    end = len(array) - 1
    while end > 0 and array[end] != ord("]"):
        end -= 1
    return end


def _first_nonspace(array: memoryview, pos: int, end: int) -> int:
    while pos < end and array[pos] in b" \t\r\n":
        pos += 1
    return pos


def find_events_array(buf: memoryview) -> int | None:
    """Byte offset of the ``[`` that opens ``traceEvents`` (or of a top-level array)."""
    start = _first_nonspace(buf, 0, len(buf))
    if start < len(buf) and buf[start] == ord("["):
        return start
    match = _EVENTS_KEY.search(buf)
    return None if match is None else match.end() - 1


def complete_prefix(buf: memoryview, array_start: int, max_tries: int = 64) -> tuple[int, int]:
    """For a truncated file: the end of the last complete event and how many
    complete events precede it.

    Tries the event boundaries from the end backwards; the first one whose
    prefix closes into a valid array wins (Perfetto keeps the complete events
    of a truncated trace the same way).

    Returns:
        ``(cut, n_complete)``: ``buf[array_start:cut] + b"]"`` is a valid array of
        ``n_complete`` events; ``(array_start + 1, 0)`` when none is complete.
    """
    # a `}` followed by `,` or `]`: between two events, or the end of a complete array
    cuts = [m.start() + 1 for m in _EVENT_END.finditer(buf, max(array_start, len(buf) - (4 << 20)))]
    for cut in list(reversed(cuts))[:max_tries]:
        chunk = b"".join((buf[array_start:cut], b"]"))
        try:
            return cut, len(_RAW_LIST.decode(chunk))
        except msgspec.DecodeError:
            continue
    return array_start + 1, 0
