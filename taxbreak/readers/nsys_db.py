"""Bulk access to an Nsight Systems SQLite export.

One query per table, columns chosen by name from ``PRAGMA table_info`` (nsys
adds, renames and drops columns between versions, and users add their own),
results turned into numpy columns 100,000 rows at a time. Every SQLite failure becomes
a typed error here, so the table readers never see ``sqlite3`` exceptions.
"""
from __future__ import annotations

import io
import os
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from urllib.request import pathname2url

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from taxbreak.trace.errors import TraceFormatError, TraceNotFoundError, UnsupportedFormatError
from taxbreak.trace.schema import NO_ID

from . import nsys_schema as ns
from .nsys_adbc import ENV_MAX_STEPS, adbc_int_columns, adbc_text_columns

SQLITE_MAGIC = b"SQLite format 3\x00"
SQLITE_HEADER_BYTES = 100
FETCH_ROWS = 100_000  # rows converted to numpy per step (bounds the Python tuples alive at once)
FAST_CHUNK_ROWS = 100_000  # rows of integers formatted as one CSV text by SQLite (~8 MB, below MAX_STRING_BYTES)
EXPORT_HINT = "export the report with `nsys export --type sqlite --output trace.sqlite report.nsys-rep`"

# Bounds on hostile exports (docs/reliability.md, "Nsight SQLite"). A real export
# costs under 1 SQLite VM instruction per file byte to read; the work bound is
# 100 per byte (at least 100 M), so only a runaway schema reaches it.
ENV_MAX_STRING = "TAXBREAK_NSYS_MAX_STRING_BYTES"
STEPS_PER_BYTE = 100
MIN_STEPS = 100_000_000
PROGRESS_EVERY = 1_000  # VM instructions between two progress-handler calls
MAX_STRING_BYTES = 16 * 1024 * 1024  # one string or blob value (kernel names are < 10 kB)


@dataclass
class Tally:
    """Accounting of input rows: each lands in a table, in metadata or is dropped."""

    read: int = 0
    metadata: int = 0
    dropped: int = 0


@dataclass
class NsysDb:
    """An open, read-only export plus the running ``row_id`` counter."""

    path: Path
    conn: sqlite3.Connection
    tables: frozenset[str]
    next_row_id: int = 0
    tally: Tally = field(default_factory=Tally)
    text: "LenientText" = field(default_factory=lambda: LenientText())
    max_steps: int = MIN_STEPS  # VM-instruction budget of all queries together
    steps: int = 0  # VM instructions run so far (counted by the progress handler)
    ignored_schema: int = 0  # views and generated columns passed over
    wrong_storage: int = 0  # StringIds values stored as a number or a blob
    _columns: dict[str, list[str]] = field(default_factory=dict)
    _strings: "StringIds | None" = None

    def has(self, table: str) -> bool:
        return table in self.tables

    def guard(self, conn: sqlite3.Connection) -> None:
        """This export's bounds on a second connection (the bulk reads): the same length cap and
        untrusted schema, and its VM instructions charged to the same budget."""
        conn.execute("PRAGMA trusted_schema=OFF")
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, min(_env_int(ENV_MAX_STRING, MAX_STRING_BYTES), 2**31 - 1))

        def count_steps() -> int:
            self.steps += PROGRESS_EVERY
            return int(self.steps > self.max_steps)

        conn.set_progress_handler(count_steps, PROGRESS_EVERY)

    def columns(self, table: str) -> list[str]:
        """Stored column names of ``table`` (empty when the table is absent).

        Generated columns (``table_xinfo`` hidden 2 or 3) are computed by an
        expression in the schema, which an export never holds: they are passed
        over and counted, like views.
        """
        if table not in self._columns:
            rows = self.query(f'PRAGMA table_xinfo("{table}")', table) if self.has(table) else []
            self._columns[table] = [r[1] for r in rows if r[6] == 0]
            self.ignored_schema += sum(1 for r in rows if r[6] in (2, 3))
        return self._columns[table]

    def query(self, sql: str, where: str) -> list[tuple]:
        """Run ``sql``; a damaged file raises ``nsys.corrupt`` naming ``where``."""
        return self._guarded(lambda: self.conn.execute(sql).fetchall(), where)

    def fetch(self, table: str, specs: tuple[ns.Col, ...], arrow_text: bool = False) -> dict:
        """All rows of ``table`` as numpy columns named by ``specs``.

        Integer columns are int64 (NULL -> the spec's default), text columns
        object arrays, or Arrow string arrays with ``arrow_text`` (then read by
        the ADBC driver when it can: no Python string per row). An absent table
        gives empty columns. Rows are converted in chunks of ``FETCH_ROWS`` so
        that at most one chunk of Python tuples is alive at a time.
        """
        present = set(self.columns(table))
        _require_times(self.path, table, specs, present)
        out = self._fetch_bulk(table, specs, present, arrow_text) if present else _to_columns([], specs)
        if out is None:
            sql = f'SELECT {", ".join(_expr(spec, present) for spec in specs)} FROM "{table}"'
            out = self._guarded(lambda: self._fetch_chunks(sql, specs), table)
        if arrow_text:
            out.update({s.out: _as_arrow_text(out[s.out]) for s in specs if s.text})
        return out

    def _fetch_bulk(self, table: str, specs: tuple[ns.Col, ...], present: set[str],
                    arrow_text: bool = False) -> dict | None:
        """The integer columns through ``fetch_int_columns``; text columns through the ADBC
        driver (``arrow_text``) or alone row by row (a 1-tuple per row instead of one per row
        of all columns); None: use the full row path."""
        numbers = tuple(s for s in specs if not s.text)
        texts = tuple(s for s in specs if s.text)
        if not numbers:
            return None
        out = self._guarded(lambda: fetch_int_columns(self.path, table, numbers, present, guard=self.guard), table)
        if out is None or not texts:
            return out
        n_rows = len(out[numbers[0].out])
        arrow = adbc_text_columns(self.path, table, [s.out for s in texts], [_expr(s, present) for s in texts],
                                  min(_env_int(ENV_MAX_STRING, MAX_STRING_BYTES), 2**31 - 1)) if arrow_text else None
        if arrow is not None and all(len(v) == n_rows for v in arrow.values()):
            out.update(arrow)
            return {s.out: out[s.out] for s in specs}
        sql = f'SELECT {", ".join(_expr(spec, present) for spec in texts)} FROM "{table}"'
        out.update(self._guarded(lambda: self._fetch_chunks(sql, texts), table))
        if any(len(out[s.out]) != len(out[numbers[0].out]) for s in texts):
            return None  # rows changed between the scans (not a read-only file): read once, row by row
        return {s.out: out[s.out] for s in specs}

    def _fetch_chunks(self, sql: str, specs: tuple[ns.Col, ...]) -> dict[str, np.ndarray]:
        cursor = self.conn.execute(sql)
        parts = []
        while rows := cursor.fetchmany(FETCH_ROWS):
            parts.append(_to_columns(rows, specs))
        if len(parts) <= 1:
            return parts[0] if parts else _to_columns([], specs)
        return {s.out: np.concatenate([part[s.out] for part in parts]) for s in specs}

    def _guarded(self, action, where: str):
        """``action()`` with SQLite failures mapped to ``nsys.corrupt``. Text that
        is not UTF-8 switches to lenient decoding and runs ``action`` again."""
        try:
            return action()
        except (sqlite3.OperationalError, UnicodeDecodeError) as exc:
            if "decode" not in str(exc) or self.conn.text_factory is self.text:
                raise _limit_error(self, where, exc) or _corrupt(self.path, where, exc) from exc
        except sqlite3.Error as exc:
            raise _limit_error(self, where, exc) or _corrupt(self.path, where, exc) from exc
        self.conn.text_factory = self.text
        return self._guarded(action, where)

    def row_ids(self, n: int) -> np.ndarray:
        """``n`` fresh row ids, unique across all tables of this trace."""
        ids = np.arange(self.next_row_id, self.next_row_id + n, dtype=np.int64)
        self.next_row_id += n
        return ids

    @property
    def strings(self) -> "StringIds":
        if self._strings is None:
            cols = self.fetch(ns.STRINGS, (ns.Col("id", ("id",)), ns.Col("value", ("value",), text=True),
                                           ns.Col("stored_as_text", ("value",), default=1, sql=ns.IS_TEXT)))
            self.wrong_storage += int((cols["stored_as_text"] == 0).sum())
            self._strings = StringIds.build(cols["id"], cols["value"])
        return self._strings

    def enum_ids(self, table: str, defaults: dict[str, int]) -> dict[str, int]:
        """``defaults`` (name -> id) updated from an ``ENUM_*(id, name)`` table when present."""
        ids = dict(defaults)
        if {"id", "name"} <= set(self.columns(table)):
            for type_id, name in self.query(f'SELECT CAST(id AS INTEGER), CAST(name AS TEXT) FROM "{table}"', table):
                if name in ids and type_id is not None:
                    ids[name] = type_id
        return ids

    def key_values(self, table: str) -> dict[str, str]:
        """A ``(name, value)`` table as a dict (first value of a repeated name wins)."""
        if not {"name", "value"} <= set(self.columns(table)):
            return {}
        out: dict[str, str] = {}
        for name, value in self.query(f'SELECT CAST(name AS TEXT), CAST(value AS TEXT) FROM "{table}"', table):
            out.setdefault(str(name), "" if value is None else str(value))
        return out


class LenientText:
    """sqlite3 text factory: UTF-8, with invalid bytes replaced and counted
    (the 2.9.1 saxpy export holds binary bytes in TARGET_INFO_SYSTEM_ENV)."""

    def __init__(self) -> None:
        self.invalid = 0
        self.example = ""

    def __call__(self, raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            self.invalid += 1
            text = raw.decode("utf-8", "replace")
            # repr: the bytes are often binary blobs whose control characters would garble a terminal
            self.example = self.example or f"text {text[:40]!r}"
            return text


@dataclass
class StringIds:
    """``StringIds(id, value)`` as sorted arrays for vectorized lookup."""

    ids: np.ndarray
    values: np.ndarray

    @classmethod
    def build(cls, ids: np.ndarray, values: np.ndarray) -> "StringIds":
        order = np.argsort(ids, kind="stable")
        return cls(ids[order], values[order])

    def lookup(self, ids: np.ndarray) -> np.ndarray:
        """Object array of the strings of ``ids``; None where an id is unknown."""
        out = np.full(len(ids), None, dtype=object)
        if len(self.ids) == 0 or len(ids) == 0:
            return out
        pos = np.minimum(np.searchsorted(self.ids, ids), len(self.ids) - 1)
        found = self.ids[pos] == ids
        out[found] = self.values[pos[found]]
        return out


def open_export(path: Path) -> NsysDb:
    """Open ``path`` read-only and check that it is an Nsight Systems export.

    Raises:
        TraceNotFoundError: ``input.not_found`` / ``input.empty`` / ``input.unreadable``.
        UnsupportedFormatError: ``nsys.not_an_export`` (not SQLite, or no nsys tables).
        TraceFormatError: ``nsys.corrupt`` (SQLite header but unreadable content).
    """
    _check_header(path)
    _refuse_uncommitted(path)
    # immutable=1: no locks and no journal lookups; the shared traces are read-only files.
    uri = f"file:{pathname2url(str(path.resolve()))}?mode=ro&immutable=1"
    conn = None
    try:
        conn = sqlite3.connect(uri, uri=True)
        db = _guard_connection(path, conn)
        rows = conn.execute("SELECT type, CAST(name AS TEXT) FROM sqlite_master WHERE type IN ('table', 'view')").fetchall()
    except (sqlite3.Error, UnicodeDecodeError) as exc:
        if conn is not None:
            conn.close()
        raise _corrupt(path, "sqlite_master", exc) from exc
    # Tables only: a view runs a query of the file's choosing (an endless
    # recursive CTE, a blob generator) under a name the reader trusts.
    db.tables = frozenset(name for kind, name in rows if kind == "table" and name)
    db.ignored_schema = sum(1 for kind, _ in rows if kind == "view")
    if not is_nsys_export(db.tables):
        conn.close()
        raise UnsupportedFormatError(
            "nsys.not_an_export", "an SQLite database without Nsight Systems tables",
            path=str(path), location=f"{len(db.tables)} tables", hint=EXPORT_HINT,
        )
    return db


_TIME_OUTS = ("start_ns", "end_ns")


def _require_times(path: Path, table: str, specs: tuple[ns.Col, ...], present: set[str]) -> None:
    """A present table whose start/end columns are all missing is a schema taxbreak does not
    know (renamed columns): read with the defaults, every row would sit at time 0."""
    for spec in specs:
        if present and spec.out in _TIME_OUTS and not any(c in present for c in spec.sources):
            raise TraceFormatError(
                "nsys.unknown_schema", f"{table} has no {' or '.join(spec.sources)} column",
                path=str(path), location=f"{table}: {len(present)} columns",
                hint="an export schema this taxbreak does not read; export with a supported nsys version "
                     "(docs/trace-model-nsys.md)")


def _refuse_uncommitted(path: Path) -> None:
    """An export with a rollback journal or a write-ahead log beside it is being written, or its
    writer died mid-transaction. Read as immutable, the journal is ignored (half the kernels of an
    open transaction were read) and a WAL's committed pages are missed: refused, never read wrong."""
    for suffix, what in (("-journal", "a rollback journal (an uncommitted or interrupted transaction)"),
                         ("-wal", "a write-ahead log (pages not yet checkpointed into the file)")):
        side = path.with_name(path.name + suffix)
        try:
            size = side.stat().st_size
        except OSError:
            continue
        if size > 0:
            raise TraceFormatError(
                "nsys.uncommitted", f"the export has {what} beside it", path=str(path),
                location=f"{side.name}: {size:,} bytes",
                hint="wait until nsys has finished writing it; if its writer died, open it once with "
                     f"`sqlite3 {path.name} 'PRAGMA integrity_check'` (in a writable folder) to recover, "
                     "then read it again")


def _guard_connection(path: Path, conn: sqlite3.Connection) -> NsysDb:
    """The export's connection with its bounds set: schema functions untrusted,
    a string/blob length cap and a VM-instruction budget for all queries."""
    conn.execute("PRAGMA trusted_schema=OFF")
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, min(_env_int(ENV_MAX_STRING, MAX_STRING_BYTES), 2**31 - 1))
    db = NsysDb(path=path, conn=conn, tables=frozenset())
    db.max_steps = _env_int(ENV_MAX_STEPS, max(MIN_STEPS, STEPS_PER_BYTE * path.stat().st_size))

    def count_steps() -> int:
        db.steps += PROGRESS_EVERY
        return int(db.steps > db.max_steps)  # non-zero aborts the running statement

    conn.set_progress_handler(count_steps, PROGRESS_EVERY)
    return db


def _env_int(name: str, default: int) -> int:
    """A positive integer from the environment, else ``default``."""
    raw = os.environ.get(name, "").replace("_", "")
    return int(raw) if raw.isdigit() and int(raw) > 0 else default


def _limit_error(db: NsysDb, where: str, exc: Exception) -> TraceFormatError | None:
    """The bound that stopped a query as a typed error; None for other failures."""
    if db.steps > db.max_steps:
        return TraceFormatError(
            "nsys.query_limit", f"reading the export took more than {db.max_steps:,} SQLite VM steps",
            path=str(db.path), location=f"table {where}",
            hint=f"a real export needs far fewer; if this one is genuine, set {ENV_MAX_STEPS} higher",
        )
    if isinstance(exc, sqlite3.DataError) or "too big" in str(exc):
        return TraceFormatError(
            "nsys.string_limit", "a string or blob value is longer than the bound",
            path=str(db.path), location=f"table {where}",
            hint=f"names in real exports are short; to read it anyway set {ENV_MAX_STRING} higher (bytes)",
        )
    return None


def is_nsys_export(tables: frozenset[str] | set[str]) -> bool:
    """An export has its metadata table, or ``StringIds`` plus an event table."""
    if any(t in tables for t in ns.EXPORT_META_TABLES):
        return True
    return ns.STRINGS in tables and any(t in tables for t in ns.EVENT_TABLES)


def split_global_id(global_id: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(pid, tid)`` of serialized GlobalIds; -1 where the id is missing (-1)."""
    missing = global_id < 0
    pid = np.where(missing, NO_ID, (global_id >> ns.ID_BITS) & ns.ID_MASK)
    tid = np.where(missing, NO_ID, global_id & ns.ID_MASK)
    return pid.astype(np.int64), tid.astype(np.int64)


def unique_inverse(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, axis=0, return_inverse=True)`` (rows of a 2-D array, or values of a 1-D one)
    by one stable ``lexsort``: numpy's ``unique`` sorts 2-D rows as void records (~1 s per 500 k
    kernel rows) and, in numpy 2.4, hashes 1-D values. Same distinct values, same order (ascending,
    column by column), same 1-D inverse."""
    n = len(values)
    if n == 0:
        return values[:0], np.zeros(0, dtype=np.intp)
    keys = (values,) if values.ndim == 1 else tuple(values[:, j] for j in range(values.shape[1] - 1, -1, -1))
    order = np.lexsort(keys)
    ordered = values[order]
    new = np.ones(n, dtype=bool)
    step = ordered[1:] != ordered[:-1]
    new[1:] = step if values.ndim == 1 else step.any(axis=1)
    inverse = np.empty(n, dtype=np.intp)
    inverse[order] = np.cumsum(new) - 1
    return ordered[new], inverse


def constant_strings(n: int, value: str) -> pa.DictionaryArray:
    """``n`` copies of ``value`` as a dictionary array (one string, n int32 indices)."""
    return pa.DictionaryArray.from_arrays(np.zeros(n, dtype=np.int32), pa.array([value], pa.string()))


def take_strings(values: np.ndarray, index: np.ndarray) -> pa.DictionaryArray:
    """``values[index]`` as a dictionary array (values: object array of the distinct strings,
    None = null): each distinct name is held once. Taken as plain strings, one 700 KB kernel
    name shared by 3,587 kernels overflowed Arrow's 2 GB string capacity after 18 s at 2.2 GB."""
    index = np.asarray(index, np.int64)
    # one pass over the distinct values, not the rows: a row of a null value is a null row, and the
    # dictionary holds no null (Arrow cannot unify dictionaries with nulls)
    is_none = np.fromiter((v is None for v in values), dtype=bool, count=len(values))
    if not is_none.any():
        return pa.DictionaryArray.from_arrays(pa.array(index.astype(np.int32), type=pa.int32()),
                                              pa.array(values, type=pa.string()))
    position = (np.cumsum(~is_none) - 1).astype(np.int32)
    indices = pa.array(np.maximum(position[index], 0), type=pa.int32(), mask=is_none[index])
    return pa.DictionaryArray.from_arrays(indices, pa.array(values[~is_none], type=pa.string()))


def _check_header(path: Path) -> None:
    try:
        with path.open("rb") as fh:
            head = fh.read(SQLITE_HEADER_BYTES)
        size = path.stat().st_size
    except FileNotFoundError as exc:
        raise TraceNotFoundError("input.not_found", "no such file", path=str(path)) from exc
    except OSError as exc:
        raise TraceNotFoundError("input.unreadable", f"cannot read: {exc.strerror or exc}", path=str(path)) from exc
    if not head:
        raise TraceNotFoundError("input.empty", "the file is empty", path=str(path))
    if SQLITE_MAGIC.startswith(head) and len(head) < len(SQLITE_MAGIC):
        raise _corrupt(path, "file header", f"the file ends at byte {len(head)} inside the SQLite header")
    if not head.startswith(SQLITE_MAGIC):
        raise UnsupportedFormatError(
            "nsys.not_an_export", "not an SQLite database (no 'SQLite format 3' header)",
            path=str(path), location="byte 0", hint=EXPORT_HINT,
        )
    expected = _expected_size(head)
    if expected is not None and size < expected:
        raise _corrupt(path, "file header", f"the file ends at byte {size:,} of {expected:,} (truncated)")


def _expected_size(head: bytes) -> int | None:
    """Database size the SQLite header promises (page size x page count), when
    the header says that count is valid (sqlite.org/fileformat.html, 1.3).
    A truncated last page can otherwise read as zeros without any error."""
    if len(head) < SQLITE_HEADER_BYTES:
        return SQLITE_HEADER_BYTES
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    n_pages = int.from_bytes(head[28:32], "big")
    count_valid = head[92:96] == head[24:28]
    return page_size * n_pages if count_valid and n_pages > 0 else None


def _corrupt(path: Path, where: str, exc: Exception | str) -> TraceFormatError:
    return TraceFormatError(
        "nsys.corrupt", f"the SQLite file cannot be read: {exc}", path=str(path),
        location=where if where == "file header" else f"table {where}",
        hint="the export is truncated or damaged; export the .nsys-rep again",
    )


def fetch_int_columns(path: Path, table: str, specs: tuple[ns.Col, ...], present: set[str],
                      chunk_rows: int = FAST_CHUNK_ROWS, guard=None) -> dict[str, np.ndarray] | None:
    """All-integer columns of ``table`` without a Python object per value, or None to use ``fetch``.

    Python's ``sqlite3`` makes a tuple of ints per row (~4 s per 500 k kernel rows). The
    ADBC SQLite driver, when installed, reads them straight into Arrow (``adbc_int_columns``);
    else SQLite formats each rowid range as CSV text itself (``printf`` + ``group_concat``, the
    same ``CAST(COALESCE(…))`` expressions, so the same integers) and Arrow's CSV reader
    parses it. Ranges are read on two connections at once: SQLite runs the whole aggregate
    without the GIL. Rowid ranges in order are the order of a full scan. A view or a table
    without rowids, or text that does not parse, gives None (the row-by-row path decides).
    """
    exprs = ", ".join(_expr(spec, present) for spec in specs)
    try:
        with _connect(path, guard) as conn:
            low, high = conn.execute(f'SELECT min(rowid), max(rowid) FROM "{table}"').fetchone()
    except sqlite3.Error:
        return None
    if low is None:
        return None
    columns = adbc_int_columns(path, table, [s.out for s in specs], exprs, (low, high))
    if columns is not None:
        return columns
    fmt = ",".join(["%d"] * len(specs))
    sql = (f"SELECT group_concat(printf('{fmt}', {exprs}), char(10)) FROM "
           f'"{table}" WHERE rowid BETWEEN ? AND ?')
    try:
        ranges = [(start, min(start + chunk_rows - 1, high)) for start in range(low, high + 1, chunk_rows)]
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="taxbreak-nsys") as pool:
            texts = list(pool.map(lambda r: _range_text(path, sql, r, guard), _halves(ranges)))
        parts = [_parse_csv(text, specs) for half in texts for text in half if text]
    except (sqlite3.Error, pa.ArrowInvalid, ValueError, TypeError):
        return None
    if not parts:
        return None
    return {s.out: np.concatenate([part[s.out] for part in parts]) for s in specs}


def _as_arrow_text(values) -> pa.Array | pa.ChunkedArray:
    """A text column as Arrow strings (object arrays of str/None converted, Arrow kept as it is)."""
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return values
    return pa.array(values, type=pa.string())


def _halves(ranges: list[tuple[int, int]]) -> list[list[tuple[int, int]]]:
    mid = (len(ranges) + 1) // 2
    return [half for half in (ranges[:mid], ranges[mid:]) if half]


def _connect(path: Path, guard=None) -> sqlite3.Connection:
    """A second read-only connection; ``guard`` puts the export's bounds on it (``NsysDb.guard``)."""
    uri = f"file:{pathname2url(str(path.resolve()))}?mode=ro&immutable=1"
    conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
    if guard is not None:
        guard(conn)
    return conn


def _range_text(path: Path, sql: str, ranges: list[tuple[int, int]], guard=None) -> list[str | None]:
    conn = _connect(path, guard)
    try:
        return [conn.execute(sql, r).fetchone()[0] for r in ranges]
    finally:
        conn.close()


def _parse_csv(text: str, specs: tuple[ns.Col, ...]) -> dict[str, np.ndarray]:
    names = [s.out for s in specs]
    data = text.encode()
    # one block: one chunk per column, so to_numpy() below is a view, not a concatenation
    options = pacsv.ReadOptions(column_names=names, block_size=len(data) + 1, use_threads=False)
    table = pacsv.read_csv(io.BytesIO(data), read_options=options,
                           convert_options=pacsv.ConvertOptions(column_types={n: pa.int64() for n in names}))
    return {n: table.column(n).to_numpy() for n in names}


def _expr(spec: ns.Col, present: set[str]) -> str:
    source = next((c for c in spec.sources if c in present), None)
    if source is None:
        return "NULL" if spec.text else str(int(spec.default))
    return spec.template.format(c=source, default=int(spec.default))


def _to_columns(rows: list[tuple], specs: tuple[ns.Col, ...]) -> dict[str, np.ndarray]:
    n_cols = len(specs)
    if not any(s.text for s in specs):
        grid = np.array(rows, dtype=np.int64).reshape(len(rows), n_cols)
        return {s.out: grid[:, i].copy() for i, s in enumerate(specs)}
    grid = np.empty((len(rows), n_cols), dtype=object)
    if rows:
        grid[:] = rows
    return {s.out: grid[:, i].copy() if s.text else grid[:, i].astype(np.int64) for i, s in enumerate(specs)}
