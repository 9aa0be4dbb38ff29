"""Per-chunk extraction of Kineto events into the columns of the canonical tables.

Each chunk of decoded events is routed (one code per event, see
:mod:`kineto_vocab`), its ``ts``/``dur`` texts are turned into exact ns in bulk,
and each table's columns are pulled out with one list comprehension per field
and stored as numpy/Arrow arrays. Times stay absolute here; the reader subtracts
the origin once every chunk is in.
"""
from __future__ import annotations

from collections import defaultdict
from functools import lru_cache

import numpy as np
import pyarrow as pa

from ..trace.diagnostics import Diagnostics
from ..trace.schema import TEXT
from . import bounds as B
from . import kineto_vocab as V
from .kineto_events import Args, Event, InvalidUtf8
from .kineto_text import MISSING, OUT_OF_RANGE, WRONG_TYPE, IdOutOfRange, int_ids, us_text_to_ns

_NO_ARGS = Args()
_HOST_KINDS = ("python", "op", "annotation")  # in route order HOST_PY, HOST_OP, HOST_ANN
_DEVICE_KINDS = ("kernel", "memcpy", "memset", "sync")  # DEV_KERNEL .. DEV_SYNC
_DROP_CODES = {
    V.INSTANT: "event.instant",
    V.BEGIN_END: "event.begin_end",
    V.UNKNOWN_CAT: "event.unknown_category",
    V.PROFILER_SPAN: "event.profiler_span",
    V.UNSUPPORTED_PH: "event.unsupported_phase",
    V.MISSING_FIELD: "event.missing_field",
    V.WRONG_TYPE: "event.wrong_type",
    V.NUMBER_OUT_OF_RANGE: "event.number_out_of_range",
    V.ID_OUT_OF_RANGE: "event.id_out_of_range",
}


class ColumnSink:
    """Accumulates the columns of every table over the chunks of one trace."""

    def __init__(self, bounds: B.Bounds | None = None) -> None:
        self.bounds = B.current() if bounds is None else bounds
        self.parts: dict[str, dict[str, list]] = {t: defaultdict(list) for t in _TABLES}
        self.diagnostics = Diagnostics()
        self.counts: dict[str, int] = defaultdict(int)
        self.metadata: list[tuple] = []  # (name, pid, tid, args.name, args.labels) of M events
        self.min_ts_ns: int | None = None
        self.max_ts_ns: int | None = None

    def add_bad(self, bad: list[tuple[int, str]]) -> None:
        """Events a chunk could not decode with their types (wrong JSON type)."""
        for _, message in bad:
            self._drop(V.WRONG_TYPE, 1, message)

    def add_chunk(self, events: list[Event], row_ids: np.ndarray) -> None:
        """Route and extract one chunk of decoded events."""
        if not events:
            return
        ts_ns, ts_state = us_text_to_ns([e.ts for e in events], self.bounds)
        route = _routes(events, ts_state)
        self._count_drops(events, row_ids, route)
        own = int((route == V.OWN).sum())
        if own:  # annotate's own events: accounted for, not a diagnostic
            self.counts["taxbreak"] += own
        meta_idx = np.flatnonzero(route == V.META)
        self.metadata.extend(_metadata(events, meta_idx))
        self.counts["metadata"] += len(meta_idx)
        complete = np.flatnonzero(route <= V.RANGE)
        dur_ns = self._durations(events, row_ids, complete, route)
        for table, extract in _EXTRACTORS.items():
            low, high = _TABLE_ROUTES[table]
            idx = np.flatnonzero((route >= low) & (route <= high))
            cols, idx = self._extract(extract, events, row_ids, idx, route, ts_ns, dur_ns)
            if len(idx):
                cols["row_id"] = row_ids[idx]
                for name, col in cols.items():
                    self.parts[table][name].append(narrow_ids(col))
                self.counts[table] += len(idx)
        self._note_time_range(ts_ns[route <= V.FLOW])

    def _extract(self, extract, events, row_ids, idx, route, ts_ns, dur_ns):
        """One table's columns for the events at ``idx``; an event with an id no
        int64 holds is dropped (``event.id_out_of_range``) and the rest extracted again."""
        while len(idx):
            sel = [events[i] for i in idx.tolist()]
            try:
                return extract(sel, route[idx], ts_ns[idx], dur_ns[idx]), idx
            except IdOutOfRange as err:
                beyond = idx[err.positions]
                route[beyond] = V.ID_OUT_OF_RANGE
                self._drop(V.ID_OUT_OF_RANGE, len(beyond), _example(events[beyond[0]], int(row_ids[beyond[0]])))
                idx = np.delete(idx, err.positions)
        return None, idx

    def _note_time_range(self, placed_ts: np.ndarray) -> None:
        """First and last timestamp of the placed events (the reader checks the span)."""
        if len(placed_ts):
            low, high = int(placed_ts.min()), int(placed_ts.max())
            self.min_ts_ns = low if self.min_ts_ns is None else min(self.min_ts_ns, low)
            self.max_ts_ns = high if self.max_ts_ns is None else max(self.max_ts_ns, high)

    def _durations(self, events, row_ids, complete, route) -> np.ndarray:
        """Durations of complete (X) events: missing -> 0, negative -> clamped to 0, both counted."""
        dur_ns = np.zeros(len(events), dtype=np.int64)
        if not len(complete):
            return dur_ns
        values, state = us_text_to_ns([events[i].dur for i in complete.tolist()], self.bounds)
        self._note(state == MISSING, complete, row_ids, events, "event.missing_dur")
        self._unplaceable(state == WRONG_TYPE, complete, row_ids, events, route, V.WRONG_TYPE)
        # beyond the span bound, a duration would overflow int64 once added to a start
        beyond = (state == OUT_OF_RANGE) | (values > self.bounds.span_ns)
        self._unplaceable(beyond, complete, row_ids, events, route, V.NUMBER_OUT_OF_RANGE)
        values[beyond] = 0
        negative = values < 0
        self._note(negative, complete, row_ids, events, "event.negative_dur")
        dur_ns[complete] = np.maximum(values, 0)
        return dur_ns

    def _unplaceable(self, mask, complete, row_ids, events, route, route_code) -> None:
        """Complete events whose dur cannot be used (not a number, out of range): dropped, counted."""
        if mask.any():
            self._note(mask, complete, row_ids, events, _DROP_CODES[route_code])
            route[complete[mask]] = route_code
            self.counts["dropped"] += int(mask.sum())

    def _note(self, mask, idx, row_ids, events, code) -> None:
        if mask.any():
            first = int(idx[np.argmax(mask)])
            self.diagnostics.add(code, int(mask.sum()), _example(events[first], int(row_ids[first])))

    def _count_drops(self, events, row_ids, route) -> None:
        for code in _DROP_CODES:
            hit = route == code
            if hit.any():
                first = int(np.argmax(hit))
                self._drop(code, int(hit.sum()), _example(events[first], int(row_ids[first])))

    def _drop(self, route_code: int, count: int, example: str) -> None:
        self.diagnostics.add(_DROP_CODES[route_code], count, example)
        self.counts["dropped"] += count

    def take_table(self, table: str, origin_ns: int) -> pa.Table | None:
        """Concatenate the chunks of one table (times made relative to ``origin_ns``)
        and release them as they are taken."""
        parts = self.parts.pop(table, {})
        cols = {}
        for name in list(parts):
            cols[name] = _concat(parts.pop(name))
            if name in ("start_ns", "ts_ns"):
                cols[name] -= np.int64(origin_ns)  # in place: _concat made a fresh int64 array
        return pa.table(cols) if cols else None


@lru_cache(maxsize=None)
def _vocabulary(values: tuple[str, ...]) -> pa.Array:
    # built on first use: a pa.array call at import time would import pandas for every reader user
    return pa.array(values, type=pa.string())


def narrow_ids(col):
    """Ids held as int32 while the chunks accumulate (half the memory); they widen
    back to the canonical int64 as the chunks are concatenated; times stay int64."""
    if isinstance(col, np.ndarray) and col.dtype == np.int64 and len(col):
        if col.min() >= _I32_MIN and col.max() <= _I32_MAX:
            return col.astype(np.int32)
    return col


_I32_MIN, _I32_MAX = np.iinfo(np.int32).min, np.iinfo(np.int32).max


def _example(event: Event, row: int) -> str:
    return f"traceEvents[{row}]: ph={event.ph!r} cat={event.cat!r} name={str(event.name)[:80]!r}"


def _routes(events: list[Event], ts_state: np.ndarray) -> np.ndarray:
    """One route code per event (table, metadata or the reason it is dropped)."""
    complete, unknown, missing = V.COMPLETE_ROUTES, V.UNKNOWN_CAT, V.MISSING_FIELD
    phases = {**V.PHASE_ROUTES, None: missing}
    own, own_cat = V.OWN, V.OWN_CATEGORY  # annotate's flows and thread names must not reach the tables
    route = np.array(
        [
            (complete.get(e.cat, unknown) if e.ph == "X" else
             own if e.cat == own_cat else phases.get(e.ph, V.UNSUPPORTED_PH))
            if e.name is not None else missing
            for e in events
        ],
        dtype=np.int8,
    )
    needs_ts = (route != V.META) & (route != own)
    route[needs_ts & (ts_state == MISSING)] = V.MISSING_FIELD
    route[needs_ts & (ts_state == WRONG_TYPE)] = V.WRONG_TYPE
    route[needs_ts & (ts_state == OUT_OF_RANGE)] = V.NUMBER_OUT_OF_RANGE
    return route


def _metadata(events: list[Event], idx: np.ndarray) -> list[tuple]:
    out = []
    for i in idx.tolist():
        e = events[i]
        args = e.args or _NO_ARGS
        out.append((e.name, e.pid, e.tid, args.name, args.labels))
    return out


def _args(sel: list[Event]) -> list[Args]:
    return [e.args or _NO_ARGS for e in sel]


def _ids(values: list) -> np.ndarray:
    return int_ids(values)


def _names(sel: list[Event]) -> pa.Array:
    """Event names, dictionary-encoded per chunk (the canonical text type; the
    chunks' dictionaries are unified once the table is whole)."""
    return _strings([e.name for e in sel])


def _strings(values: list) -> pa.Array:
    """A text column of one chunk, dictionary-encoded: names, kinds and categories repeat."""
    return pa.array(values, type=pa.string()).dictionary_encode()


def _raw_text(raws: list) -> pa.Array:
    """Raw JSON values as text (the replay needs the exact shapes); null when absent.

    Built straight from Arrow buffers (one join, no per-value ``bytes``/``str``);
    a chunk is a few MB, so 32-bit offsets hold it; the chunk's text is then
    dictionary-encoded, the canonical text type.
    """
    lengths = np.fromiter(map(len, raws), dtype=np.int64, count=len(raws))
    if not lengths.any():
        return pa.nulls(len(raws), type=TEXT)
    wide = lengths.sum() > _I32_MAX  # only a pathological single event of > 2 GiB
    offsets = np.zeros(len(raws) + 1, dtype=np.int64 if wide else np.int32)
    np.cumsum(lengths, out=offsets[1:])
    valid = np.packbits(lengths > 0, bitorder="little")
    array = (pa.LargeStringArray if wide else pa.StringArray).from_buffers(
        len(raws), pa.py_buffer(offsets), pa.py_buffer(b"".join(raws)), pa.py_buffer(valid)
    )
    try:  # args text is skipped by the typed decoder, so its UTF-8 is checked here
        array.validate(full=True)
    except pa.ArrowInvalid as err:
        raise InvalidUtf8(str(err)) from err
    # recorded shapes repeat from step to step: the chunk keeps each distinct text once
    return (array.cast(pa.string()) if wide else array).dictionary_encode()


def _host(sel, route, ts_ns, dur_ns) -> dict:
    args = _args(sel)
    kinds = _vocabulary(_HOST_KINDS).take(pa.array(route - V.HOST_PY))  # one Arrow take, no per-row Python
    return {
        "pid": _ids([e.pid for e in sel]),
        "tid": _ids([e.tid for e in sel]),
        "kind": kinds,
        "name": _names(sel),
        "start_ns": ts_ns,
        "dur_ns": dur_ns,
        "external_id": _ids([a.external_id for a in args]),
        "python_id": _ids([a.python_id for a in args]),
        "python_parent_id": _ids([a.python_parent_id for a in args]),
        "sequence_nr": _ids([a.sequence_nr for a in args]),
        "input_dims": _raw_text([a.input_dims for a in args]),
        "input_types": _raw_text([a.input_types for a in args]),
        "input_strides": _raw_text([a.input_strides for a in args]),
        "concrete_inputs": _raw_text([a.concrete_inputs for a in args]),
    }


def _api(sel, route, ts_ns, dur_ns) -> dict:
    args = _args(sel)
    names = [e.name for e in sel]
    api_names = [V.normalize_api_name(n) for n in names]
    return {
        "process": np.zeros(len(sel), dtype=np.int64),  # one correlation namespace per Kineto file
        "pid": _ids([e.pid for e in sel]),
        "tid": _ids([e.tid for e in sel]),
        "domain": _strings([V.api_domain(e.cat, n) for e, n in zip(sel, api_names)]),
        "kind": _strings([V.api_kind(n) for n in api_names]),
        "name": _strings(names),
        "api_name": _strings(api_names),
        "start_ns": ts_ns,
        "dur_ns": dur_ns,
        "correlation": _ids([a.correlation for a in args]),
        "external_id": _ids([a.external_id for a in args]),
        "cbid": _ids([a.cbid for a in args]),
    }


def _device(sel, route, ts_ns, dur_ns) -> dict:
    args = _args(sel)
    kinds = _vocabulary(_DEVICE_KINDS).take(pa.array(route - V.DEV_KERNEL))
    cols = {
        "process": np.zeros(len(sel), dtype=np.int64),
        "kind": kinds,
        "name": _names(sel),
        # GPU events carry pid = device, tid = stream; args say it explicitly when present
        "device": _ids([a.device if a.device is not None else e.pid for a, e in zip(args, sel)]),
        "stream": _ids([a.stream if a.stream is not None else e.tid for a, e in zip(args, sel)]),
        "context": _ids([a.context for a in args]),
        "start_ns": ts_ns,
        "dur_ns": dur_ns,
        "correlation": _ids([a.correlation for a in args]),
        "external_id": _ids([a.external_id for a in args]),
        "registers": _ids([a.registers for a in args]),
        "shared_mem_bytes": _ids([a.shared_memory for a in args]),
        "bytes": _ids([a.bytes for a in args]),
        "graph_id": _ids([a.graph_id for a in args]),
        "graph_node_id": _ids([a.graph_node_id for a in args]),
    }
    for key in ("grid", "block"):
        axes = _triples([getattr(a, key) for a in args])
        for axis, suffix in enumerate("xyz"):
            cols[f"{key}_{suffix}"] = axes[axis]
    return cols


def _triples(values: list) -> list[np.ndarray]:
    """x, y, z id columns of ``grid``/``block`` lists: one numpy call when every
    value is a list of three ints (kernels); per value otherwise (memcpy rows have none)."""
    try:
        matrix = np.array(values, dtype=np.int64)
        if matrix.shape == (len(values), 3):
            return [matrix[:, axis] for axis in range(3)]
    except (TypeError, ValueError, OverflowError):
        pass
    triples = [_triple(v) for v in values]
    return [_ids([t[axis] for t in triples]) for axis in range(3)]


def _triple(value) -> tuple:
    if type(value) is list and len(value) == 3:
        return value
    return (None, None, None)


def _ranges(sel, route, ts_ns, dur_ns) -> dict:
    args = _args(sel)
    return {
        "source": _strings(["gpu_annotation"] * len(sel)),
        "name": _names(sel),
        "pid": _ids([e.pid for e in sel]),  # device id
        "tid": _ids([e.tid for e in sel]),  # stream
        "start_ns": ts_ns,
        "dur_ns": dur_ns,
        "external_id": _ids([a.external_id for a in args]),
        "domain": pa.nulls(len(sel), type=TEXT),
    }


def _flows(sel, route, ts_ns, dur_ns) -> dict:
    return {
        "flow_id": _ids([e.id for e in sel]),
        "category": _strings([e.cat for e in sel]),
        "phase": _strings([e.ph for e in sel]),
        "pid": _ids([e.pid for e in sel]),
        "tid": _ids([e.tid for e in sel]),
        "ts_ns": ts_ns,
    }


def _concat(chunks: list):
    """One column from its chunks. Numeric chunks (int32 ids or int64) are widened
    while they are copied, straight into the canonical int64: no int32 copy of
    the whole column and no cast when the table is conformed."""
    if isinstance(chunks[0], np.ndarray):
        return np.concatenate(chunks, dtype=np.int64)
    if len({c.type for c in chunks}) > 1:  # e.g. plain host kinds next to an empty chunk's
        chunks = [c.cast(TEXT) for c in chunks]
    return pa.chunked_array(chunks)


_EXTRACTORS = {
    "host_events": _host,
    "api_calls": _api,
    "device_activities": _device,
    "ranges": _ranges,
    "flows": _flows,
}
_TABLES = tuple(_EXTRACTORS)
# (lowest, highest) route code of each table: the codes of one table are consecutive
_TABLE_ROUTES = {
    "host_events": (V.HOST_PY, V.HOST_ANN),
    "api_calls": (V.API, V.API),
    "device_activities": (V.DEV_KERNEL, V.DEV_SYNC),
    "ranges": (V.RANGE, V.RANGE),
    "flows": (V.FLOW, V.FLOW),
}
