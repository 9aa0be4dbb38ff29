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
from .kineto_scan import ScannedEvents
from .kineto_text import MISSING, OUT_OF_RANGE, WRONG_TYPE, IdOutOfRange, int_ids, link_ids, us_text_to_ns

_NO_ARGS = Args()
_HOST_KINDS = ("python", "op", "annotation")  # in route order HOST_PY, HOST_OP, HOST_ANN
_DEVICE_KINDS = ("kernel", "memcpy", "memset", "sync")  # DEV_KERNEL .. DEV_SYNC
_DROP_CODES = {
    V.INSTANT: "event.instant",
    V.BEGIN_END: "event.begin_end",
    V.UNKNOWN_CAT: "event.unknown_category",
    V.PROFILER_SPAN: "event.profiler_span",
    V.PROFILER_OVERHEAD: "event.profiler_overhead",
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
        self.chunks_by: dict[str, int] = defaultdict(int)  # chunks read by the compiled scanner / by msgspec

    def add_bad(self, bad: list[tuple[int, str]]) -> None:
        """Events a chunk could not decode with their types (wrong JSON type)."""
        for _, message in bad:
            self._drop(V.WRONG_TYPE, 1, message)

    def add_chunk(self, events: "list[Event] | ScannedEvents", row_ids: np.ndarray) -> None:
        """Route and extract one chunk: decoded Structs or the compiled scanner's rows."""
        if not len(events):
            return
        source = events if isinstance(events, ScannedEvents) else PyEvents(events)
        if not isinstance(events, ScannedEvents):
            self.chunks_by["python"] += 1
        ts_ns, ts_state = source.times(self.bounds)
        route = source.routes(ts_state)
        if isinstance(source, ScannedEvents):
            if source.needs_python(route):  # a value only the Python rules read lands in a table
                source = PyEvents(source.decode())
                ts_ns, ts_state = source.times(self.bounds)
                route = source.routes(ts_state)
                self.chunks_by["python"] += 1
            else:
                self.chunks_by["scanner"] += 1
        self._add_routed(source, row_ids, route, ts_ns)

    def _add_routed(self, source, row_ids: np.ndarray, route: np.ndarray, ts_ns: np.ndarray) -> None:
        self._count_drops(source, row_ids, route)
        own = int((route == V.OWN).sum())
        if own:  # annotate's own events: accounted for, not a diagnostic
            self.counts["taxbreak"] += own
        meta_idx = np.flatnonzero(route == V.META)
        self.metadata.extend(source.metadata(meta_idx))
        self.counts["metadata"] += len(meta_idx)
        complete = np.flatnonzero(route <= V.RANGE)
        dur_ns = self._durations(source, row_ids, complete, route)
        for table, extract in _EXTRACTORS.items():
            low, high = _TABLE_ROUTES[table]
            idx = np.flatnonzero((route >= low) & (route <= high))
            cols, idx = self._extract(extract, source, row_ids, idx, route, ts_ns, dur_ns)
            if len(idx):
                cols["row_id"] = row_ids[idx]
                for name, col in cols.items():
                    self.parts[table][name].append(narrow_ids(col))
                self.counts[table] += len(idx)
        self._note_time_range(ts_ns[route <= V.FLOW])

    def _extract(self, extract, source, row_ids, idx, route, ts_ns, dur_ns):
        """One table's columns for the events at ``idx``; an event with an id no
        int64 holds is dropped (``event.id_out_of_range``) and the rest extracted again."""
        while len(idx):
            take_odd = getattr(source, "take_odd_links", None)  # the compiled scanner reads no odd id
            try:
                if take_odd:
                    take_odd()  # what an attempt cut short by IdOutOfRange left
                cols = extract(source, idx, route[idx], ts_ns[idx], dur_ns[idx])
                odd = take_odd() if take_odd else ()
                if len(odd):
                    self._note(np.isin(idx, odd), idx, row_ids, source, "event.id_not_integer")
                return cols, idx
            except IdOutOfRange as err:
                beyond = idx[err.positions]
                route[beyond] = V.ID_OUT_OF_RANGE
                self._drop(V.ID_OUT_OF_RANGE, len(beyond), _example(source.event(beyond[0]), int(row_ids[beyond[0]])))
                idx = np.delete(idx, err.positions)
        return None, idx

    def _note_time_range(self, placed_ts: np.ndarray) -> None:
        """First and last timestamp of the placed events (the reader checks the span)."""
        if len(placed_ts):
            low, high = int(placed_ts.min()), int(placed_ts.max())
            self.min_ts_ns = low if self.min_ts_ns is None else min(self.min_ts_ns, low)
            self.max_ts_ns = high if self.max_ts_ns is None else max(self.max_ts_ns, high)

    def _durations(self, source, row_ids, complete, route) -> np.ndarray:
        """Durations of complete (X) events: missing -> 0, negative -> clamped to 0, both counted."""
        dur_ns = np.zeros(len(source), dtype=np.int64)
        if not len(complete):
            return dur_ns
        values, state = source.durations(complete, self.bounds)
        self._note(state == MISSING, complete, row_ids, source, "event.missing_dur")
        self._unplaceable(state == WRONG_TYPE, complete, row_ids, source, route, V.WRONG_TYPE)
        # beyond the span bound, a duration would overflow int64 once added to a start
        beyond = (state == OUT_OF_RANGE) | (values > self.bounds.span_ns)
        self._unplaceable(beyond, complete, row_ids, source, route, V.NUMBER_OUT_OF_RANGE)
        values[beyond] = 0
        negative = values < 0
        self._note(negative, complete, row_ids, source, "event.negative_dur")
        dur_ns[complete] = np.maximum(values, 0)
        return dur_ns

    def _unplaceable(self, mask, complete, row_ids, source, route, route_code) -> None:
        """Complete events whose dur cannot be used (not a number, out of range): dropped, counted."""
        if mask.any():
            self._note(mask, complete, row_ids, source, _DROP_CODES[route_code])
            route[complete[mask]] = route_code
            self.counts["dropped"] += int(mask.sum())

    def _note(self, mask, idx, row_ids, source, code) -> None:
        if mask.any():
            first = int(idx[np.argmax(mask)])
            self.diagnostics.add(code, int(mask.sum()), _example(source.event(first), int(row_ids[first])))

    def _count_drops(self, source, row_ids, route) -> None:
        for code in _DROP_CODES:
            hit = route == code
            if hit.any():
                first = int(np.argmax(hit))
                self._drop(code, int(hit.sum()), _example(source.event(first), int(row_ids[first])))

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


def metadata_tuple(e: Event) -> tuple:
    """``(name, pid, tid, args.name, args.labels)`` of an ``M`` event."""
    args = e.args or _NO_ARGS
    return (e.name, e.pid, e.tid, args.name, args.labels)


_EVENT_FIELDS = ("ph", "cat", "name", "pid", "tid", "id")
_LINK_FIELDS = ("correlation", "external_id")  # ids that join events: typed strictly (link_ids)


class PyEvents:
    """A chunk of msgspec-decoded events: the inputs of :meth:`ColumnSink.add_chunk`
    (the compiled scanner's rows give the same through :class:`~.kineto_scan.ScannedEvents`)."""

    def __init__(self, events: list[Event]) -> None:
        self.events = events
        self.odd_links: list[np.ndarray] = []  # events whose link id is no integer (link_ids)

    def take_odd_links(self) -> np.ndarray:
        """The events found with a fractional or boolean link id since the last call."""
        odd = np.unique(np.concatenate(self.odd_links)) if self.odd_links else np.zeros(0, np.int64)
        self.odd_links = []
        return odd

    def __len__(self) -> int:
        return len(self.events)

    def event(self, i: int) -> Event:
        return self.events[i]

    def times(self, bounds: B.Bounds) -> tuple[np.ndarray, np.ndarray]:
        return us_text_to_ns([e.ts for e in self.events], bounds)

    def routes(self, ts_state: np.ndarray) -> np.ndarray:
        return _routes(self.events, ts_state)

    def durations(self, idx: np.ndarray, bounds: B.Bounds) -> tuple[np.ndarray, np.ndarray]:
        return us_text_to_ns([self.events[i].dur for i in idx.tolist()], bounds)

    def metadata(self, idx: np.ndarray) -> list[tuple]:
        return [metadata_tuple(self.events[i]) for i in idx.tolist()]

    def select(self, idx: np.ndarray) -> "_PySelection":
        return _PySelection([self.events[i] for i in idx.tolist()], self, idx)


class _PySelection:
    """The fields of the events of one table (one list comprehension per field)."""

    def __init__(self, sel: list[Event], owner: PyEvents | None = None, idx: np.ndarray | None = None) -> None:
        self.sel = sel
        self.args = [e.args or _NO_ARGS for e in sel]
        self.owner, self.idx = owner, idx

    def __len__(self) -> int:
        return len(self.sel)

    def ids(self, field: str) -> np.ndarray:
        rows = self.sel if field in _EVENT_FIELDS else self.args
        values = [getattr(r, field) for r in rows]
        if field not in _LINK_FIELDS:
            return int_ids(values)
        ids, odd = link_ids(values)  # 5.5 or true links nothing (never truncated to 5 or 1)
        if len(odd) and self.owner is not None:
            self.owner.odd_links.append(self.idx[odd])
        return ids

    def ids_or(self, field: str, fallback: str) -> np.ndarray:
        """An ``args`` id, the event's ``fallback`` field where the args lack it."""
        return int_ids([v if (v := getattr(a, field)) is not None else getattr(e, fallback)
                        for a, e in zip(self.args, self.sel)])

    def text(self, field: str) -> pa.Array:
        return _strings([getattr(e, field) for e in self.sel])

    def raw_text(self, field: str) -> pa.Array:
        return _raw_text([getattr(a, field) for a in self.args])

    def triple(self, key: str) -> list[np.ndarray]:
        return _triples([getattr(a, key) for a in self.args])

    def api_texts(self) -> dict[str, pa.Array]:
        names = [e.name for e in self.sel]
        api_names = [V.normalize_api_name(n) for n in names]
        return {
            "domain": _strings([V.api_domain(e.cat, n) for e, n in zip(self.sel, api_names)]),
            "kind": _strings([V.api_kind(n) for n in api_names]),
            "api_name": _strings(api_names),
        }


def _strings(values: list) -> pa.Array:
    """A text column of one chunk, dictionary-encoded: names, kinds and categories repeat.
    (The chunks' dictionaries are unified once the table is whole.)"""
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


def _host(source, idx, route, ts_ns, dur_ns) -> dict:
    sel = source.select(idx)
    kinds = _vocabulary(_HOST_KINDS).take(pa.array(route - V.HOST_PY))  # one Arrow take, no per-row Python
    return {
        "pid": sel.ids("pid"),
        "tid": sel.ids("tid"),
        "kind": kinds,
        "name": sel.text("name"),
        "start_ns": ts_ns,
        "dur_ns": dur_ns,
        "external_id": sel.ids("external_id"),
        "python_id": sel.ids("python_id"),
        "python_parent_id": sel.ids("python_parent_id"),
        "sequence_nr": sel.ids("sequence_nr"),
        "input_dims": sel.raw_text("input_dims"),
        "input_types": sel.raw_text("input_types"),
        "input_strides": sel.raw_text("input_strides"),
        "concrete_inputs": sel.raw_text("concrete_inputs"),
    }


def _api(source, idx, route, ts_ns, dur_ns) -> dict:
    sel = source.select(idx)
    texts = sel.api_texts()
    return {
        "process": np.zeros(len(sel), dtype=np.int64),  # one correlation namespace per Kineto file
        "pid": sel.ids("pid"),
        "tid": sel.ids("tid"),
        "domain": texts["domain"],
        "kind": texts["kind"],
        "name": sel.text("name"),
        "api_name": texts["api_name"],
        "start_ns": ts_ns,
        "dur_ns": dur_ns,
        "correlation": sel.ids("correlation"),
        "external_id": sel.ids("external_id"),
        "cbid": sel.ids("cbid"),
    }


def _device(source, idx, route, ts_ns, dur_ns) -> dict:
    sel = source.select(idx)
    kinds = _vocabulary(_DEVICE_KINDS).take(pa.array(route - V.DEV_KERNEL))
    cols = {
        "process": np.zeros(len(sel), dtype=np.int64),
        "kind": kinds,
        "name": sel.text("name"),
        # GPU events carry pid = device, tid = stream; args say it explicitly when present
        "device": sel.ids_or("device", "pid"),
        "stream": sel.ids_or("stream", "tid"),
        "context": sel.ids("context"),
        "start_ns": ts_ns,
        "dur_ns": dur_ns,
        "correlation": sel.ids("correlation"),
        "external_id": sel.ids("external_id"),
        "registers": sel.ids("registers"),
        "shared_mem_bytes": sel.ids("shared_memory"),
        "bytes": sel.ids("bytes"),
        "graph_id": sel.ids("graph_id"),
        "graph_node_id": sel.ids("graph_node_id"),
    }
    for key in ("grid", "block"):
        axes = sel.triple(key)
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
    return [int_ids([t[axis] for t in triples]) for axis in range(3)]


def _triple(value) -> tuple:
    if type(value) is list and len(value) == 3:
        return value
    return (None, None, None)


def _ranges(source, idx, route, ts_ns, dur_ns) -> dict:
    sel = source.select(idx)
    return {
        "source": _strings(["gpu_annotation"] * len(sel)),
        "name": sel.text("name"),
        "pid": sel.ids("pid"),  # device id
        "tid": sel.ids("tid"),  # stream
        "start_ns": ts_ns,
        "dur_ns": dur_ns,
        "external_id": sel.ids("external_id"),
        "domain": pa.nulls(len(sel), type=TEXT),
    }


def _flows(source, idx, route, ts_ns, dur_ns) -> dict:
    sel = source.select(idx)
    return {
        "flow_id": sel.ids("id"),
        "category": sel.text("cat"),
        "phase": sel.text("ph"),
        "pid": sel.ids("pid"),
        "tid": sel.ids("tid"),
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
