"""Columns of a chunk of Kineto events read by the compiled scanner (``_kineto_scan.c``).

The scanner reads one ``[...]`` chunk in a single pass and writes the fields
the reader uses as fixed-width int64 rows: exact ns of ``ts``/``dur`` (from
the decimal µs text, never through float64), ids, dictionary codes of
``ph``/``cat``/``name`` and the byte spans of the raw ``args`` shapes. It
answers ``None`` for a chunk outside its fast subset (invalid JSON, escapes in
names or keys, duplicate keys, deep nesting, wrong types, numbers it would
have to round), and :func:`scan` then hands the chunk to msgspec as before.

:class:`ScannedEvents` gives :class:`~.kineto_columns.ColumnSink` the same
inputs as decoded Structs (:class:`~.kineto_columns.PyEvents`), so routing,
drops and diagnostics follow one set of rules. Values the scanner only marks
(a string ``pid``, a float id, an exponent in ``ts``) are read by the Python
rules: when such an event lands in a table the whole chunk is decoded by
msgspec instead (:meth:`ScannedEvents.needs_python`). Events whose example
text or metadata is needed (drops, ``M`` events: a few per trace) are decoded
one by one from their byte span.

``$TAXBREAK_NO_EXT=1`` (or a build without a compiler) leaves the reader on
the pure-Python path, which gives the same tables.
"""
from __future__ import annotations

import logging
import os
from contextlib import contextmanager
from functools import cached_property
from typing import Iterator

import numpy as np
import pyarrow as pa

from ..trace.schema import TEXT
from . import bounds as B
from . import kineto_vocab as V
from .kineto_text import MISSING, OK

ENV_NO_EXT = "TAXBREAK_NO_EXT"
log = logging.getLogger(__name__)

# int64 columns of one scanner row, in the order of _kineto_scan.c's enum
COLUMNS = (
    "start", "end", "ph", "cat", "name", "pid", "tid", "id", "ts", "dur",
    "external_id", "correlation", "cbid", "python_id", "python_parent_id", "sequence_nr",
    "device", "context", "stream", "registers", "shared_memory", "bytes", "graph_id", "graph_node_id",
    "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
    "input_dims", "input_types", "input_strides", "concrete_inputs",  # codes of the raw args text
    "flags",
)
_COL = {name: k for k, name in enumerate(COLUMNS)}
TS_MISSING, TS_ODD, DUR_MISSING, DUR_ODD, F_ODD, F_HAS_DEVICE, F_HAS_STREAM = 1, 2, 4, 8, 16, 32, 64


def _load_extension():
    """The compiled scanner, or None (not built, or turned off by ``$TAXBREAK_NO_EXT``)."""
    if os.environ.get(ENV_NO_EXT, "").strip() not in ("", "0"):
        return None
    try:
        from . import _kineto_scan
    except ImportError:
        return None
    if _kineto_scan.N_COLS != len(COLUMNS):  # a stale in-place build of an older scanner
        log.warning("the compiled Kineto scanner is out of date (python setup.py build_ext --inplace); "
                    "reading without it")
        return None
    return _kineto_scan


_BUILT = _load_extension()
_EXT = _BUILT


def available() -> bool:
    """True when the compiled scanner is built and not turned off."""
    return _BUILT is not None


def reader_name() -> str:
    """``kineto-c`` while the compiled scanner is on, ``kineto-py`` without it (``TraceMeta.extra["reader"]``)."""
    return "kineto-c" if _EXT is not None else "kineto-py"


@contextmanager
def scanner(enabled: bool) -> Iterator[None]:
    """Read with (``True``, when built) or without the compiled scanner inside the block:
    the differential tests compare the two paths in one process."""
    global _EXT
    before = _EXT
    _EXT = _BUILT if enabled else None
    try:
        yield
    finally:
        _EXT = before




def scan(chunk: bytes) -> "ScannedEvents | None":
    """The scanned chunk, or None when the extension is off or the chunk is outside its subset."""
    if _EXT is None:
        return None
    bounds = B.current()
    # the scanner accepts less nesting than the Python path allows, never more
    found = _EXT.scan_chunk(chunk, bounds.number_chars, max(bounds.depth - 2, 0))
    if found is None:
        return None
    n, rows, strings = found
    return ScannedEvents(chunk, np.frombuffer(rows, dtype=np.int64).reshape(len(COLUMNS), n), strings)


class ScannedEvents:
    """One scanned chunk: the rows, the interned strings and the chunk's bytes."""

    def __init__(self, chunk: bytes, rows: np.ndarray, strings: list[str]) -> None:
        self.chunk = chunk
        self.rows = rows
        self.strings = strings

    def __len__(self) -> int:
        return self.rows.shape[1]

    def col(self, name: str, idx: np.ndarray | None = None) -> np.ndarray:
        """A fresh int64 column (the rows buffer is read-only): all rows, or those at ``idx``."""
        column = self.rows[_COL[name]]
        return column.copy() if idx is None else column[idx]

    @cached_property
    def flags(self) -> np.ndarray:
        return self.col("flags")

    @cached_property
    def _texts(self) -> pa.Array:
        """The interned strings and a last null (code -1: the field was absent or null)."""
        return pa.array(self.strings + [None], type=pa.string())

    def _codes(self, name: str, idx: np.ndarray | None = None) -> np.ndarray:
        codes = self.col(name, idx)
        return np.where(codes < 0, len(self.strings), codes)

    # -- the inputs of ColumnSink.add_chunk --------------------------------------------

    def decode(self):
        """The Python rules' decode of the same chunk (msgspec Structs)."""
        from .kineto_events import decode_structs
        return decode_structs(self.chunk, 0)[0]

    def event(self, i: int):
        """Event ``i`` decoded by msgspec (example texts, metadata)."""
        from .kineto_events import decode_event
        start, end = self.rows[_COL["start"], i], self.rows[_COL["end"], i]
        return decode_event(self.chunk[start:end])

    def times(self, bounds: B.Bounds) -> tuple[np.ndarray, np.ndarray]:
        state = np.where(self.flags & TS_MISSING, MISSING, OK).astype(np.uint8)
        return self.col("ts"), state

    def routes(self, ts_state: np.ndarray) -> np.ndarray:
        """Route codes by the rules of kineto_columns._routes, one lookup per distinct string."""
        texts = self.strings + [None]
        is_x = np.array([s == "X" for s in texts])
        cat_route = np.array([V.COMPLETE_ROUTES.get(s, V.UNKNOWN_CAT) for s in texts], dtype=np.int8)
        own_cat = np.array([s == V.OWN_CATEGORY for s in texts])
        phase_route = np.array([V.PHASE_ROUTES.get(s, V.UNSUPPORTED_PH) for s in texts[:-1]] + [V.MISSING_FIELD],
                               dtype=np.int8)
        ph, cat = self._codes("ph"), self._codes("cat")
        route = np.where(is_x[ph], cat_route[cat], np.where(own_cat[cat], np.int8(V.OWN), phase_route[ph]))
        route = route.astype(np.int8)
        route[self.col("name") < 0] = V.MISSING_FIELD
        needs_ts = (route != V.META) & (route != V.OWN)
        route[needs_ts & (ts_state == MISSING)] = V.MISSING_FIELD
        return route

    def needs_python(self, route: np.ndarray) -> bool:
        """True when an event the tables use holds a value only the Python rules read."""
        flags = self.flags
        needs_ts = (route != V.META) & (route != V.OWN)
        return bool(((flags & TS_ODD).astype(bool) & needs_ts).any()
                    or ((flags & DUR_ODD).astype(bool) & (route <= V.RANGE)).any()
                    or ((flags & F_ODD).astype(bool) & (route <= V.FLOW)).any())

    def durations(self, idx: np.ndarray, bounds: B.Bounds) -> tuple[np.ndarray, np.ndarray]:
        state = np.where(self.flags[idx] & DUR_MISSING, MISSING, OK).astype(np.uint8)
        return self.col("dur", idx), state

    def metadata(self, idx: np.ndarray) -> list[tuple]:
        from .kineto_columns import metadata_tuple
        return [metadata_tuple(self.event(i)) for i in idx.tolist()]

    # -- table columns -------------------------------------------------------------------

    def text(self, name: str, idx: np.ndarray) -> pa.Array:
        """Interned strings of the rows at ``idx`` (``ph``/``cat``/``name`` or an args shape's raw
        text) as the Python path's ``dictionary_encode()`` gives them: the dictionary in order of
        first appearance, null where absent. Equal codes are equal bytes, so no string is hashed again."""
        codes = self._codes(name, idx)  # absent: the last code, len(self.strings)
        absent = codes == len(self.strings)
        # first position of each code, in one pass (no sort of the whole column)
        first = np.full(len(self.strings) + 1, len(codes), dtype=np.int64)
        np.minimum.at(first, codes, np.arange(len(codes)))
        first[-1] = len(codes)  # the absent code is a null, not a dictionary entry
        used = np.flatnonzero(first < len(codes))
        in_order = used[np.argsort(first[used], kind="stable")]
        rank = np.zeros(len(first), dtype=np.int32)
        rank[in_order] = np.arange(len(in_order), dtype=np.int32)
        indices = pa.array(rank[codes], mask=absent if absent.any() else None)
        return pa.DictionaryArray.from_arrays(indices, self._texts.take(pa.array(in_order)))

    def api_texts(self, idx: np.ndarray) -> dict[str, pa.Array]:
        """``domain``, ``kind``, ``api_name`` of API rows: classified once per distinct name.
        The domain depends on the category only through ``cat == "cuda_driver"`` (``api_domain``)."""
        texts = self.strings + [None]
        names, cats = self._codes("name", idx), self._codes("cat", idx)
        driver = np.array([t == "cuda_driver" for t in texts])[cats]
        api_name = lambda code: V.normalize_api_name(texts[code])  # noqa: E731
        return {
            "domain": _spread(lambda key: V.api_domain("cuda_driver" if key % 2 else "cuda_runtime", api_name(key // 2)),
                              names * 2 + driver, 2 * len(texts)),
            "kind": _spread(lambda code: V.api_kind(api_name(code)), names, len(texts)),
            "api_name": _spread(api_name, names, len(texts)),
        }

    def raw_text(self, name: str, idx: np.ndarray) -> pa.Array:
        """Raw JSON text of an ``args`` shape (kineto_columns._raw_text's result): null where absent."""
        if not (self.col(name, idx) >= 0).any():
            return pa.nulls(len(idx), type=TEXT)
        return self.text(name, idx)

    def select(self, idx: np.ndarray) -> "_ScannedSelection":
        return _ScannedSelection(self, idx)


def _spread(value_of, keys: np.ndarray, n_keys: int) -> pa.Array:
    """``value_of(key)`` for each key in use (keys below ``n_keys``), spread over the rows and
    dictionary-encoded (several keys may give one value: ``cudaLaunchKernel`` and ``cudaLaunchKernel_v7000``)."""
    used = np.flatnonzero(np.bincount(keys, minlength=n_keys))
    slot = np.zeros(n_keys, dtype=np.int64)
    slot[used] = np.arange(len(used))
    values = pa.array([value_of(k) for k in used.tolist()], type=pa.string())
    return values.take(pa.array(slot[keys])).dictionary_encode()


_HAS = {"device": F_HAS_DEVICE, "stream": F_HAS_STREAM}


class _ScannedSelection:
    """The fields of the scanned events of one table (column slices, no per-event Python)."""

    def __init__(self, scanned: ScannedEvents, idx: np.ndarray) -> None:
        self.scanned = scanned
        self.idx = idx

    def __len__(self) -> int:
        return len(self.idx)

    def ids(self, field: str) -> np.ndarray:
        return self.scanned.col(field, self.idx)

    def ids_or(self, field: str, fallback: str) -> np.ndarray:
        """An ``args`` id, the event's ``fallback`` field where the args lack it."""
        present = (self.scanned.flags[self.idx] & _HAS[field]).astype(bool)
        return np.where(present, self.ids(field), self.ids(fallback))

    def text(self, field: str) -> pa.Array:
        return self.scanned.text(field, self.idx)

    def raw_text(self, field: str) -> pa.Array:
        return self.scanned.raw_text(field, self.idx)

    def triple(self, key: str) -> list[np.ndarray]:
        return [self.ids(f"{key}_{axis}") for axis in "xyz"]

    def api_texts(self) -> dict[str, pa.Array]:
        return self.scanned.api_texts(self.idx)
