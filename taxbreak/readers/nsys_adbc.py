"""Columns of an Nsight export read by the ADBC SQLite driver (``adbc-driver-sqlite``).

The driver steps a query in C and appends each value to an Arrow column: no Python
object per value. Every read here is one ``SELECT`` over the two halves of the
table's rowid range, on two connections at once (the driver runs without the GIL);
rowid ranges in order are the order of a full scan. Each function returns None when
it cannot give exactly what the ``sqlite3`` paths of ``nsys_db`` give (driver not
installed, ``$TAXBREAK_NSYS_MAX_STEPS`` set, a driver error, a value of another
type), and the caller falls back to them.

The work bound (``NsysDb.guard``'s progress handler) exists only on ``sqlite3``
connections, so a lowered bound turns this path off; a scan of a stored table is
linear in the file, so the default bound is out of its reach.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.request import pathname2url

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

ENV_MAX_STEPS = "TAXBREAK_NSYS_MAX_STEPS"
BATCH_ROWS = 65_536  # rows per Arrow batch from the driver (its default, 1,024, costs ~40 µs of Python per batch)


class _Mismatch(Exception):
    """A batch that is not what the query promised (type, nulls, more rows than rowids)."""


def adbc_int_columns(path: Path, table: str, names: list[str], exprs: str,
                     rowids: tuple[int, int]) -> dict[str, np.ndarray] | None:
    """The all-integer columns ``exprs`` of ``table`` as int64 numpy arrays named ``names``.

    Each batch is copied into arrays allocated once for the whole rowid range and then
    dropped, so the Arrow copy of the table never exists whole beside the numpy one
    (5 M kernel rows of 20 columns: 0.8 GB instead of 1.6 GB at the read's peak). A table
    whose rowid range is far wider than the file could hold takes ``adbc_table`` instead.
    """
    low, high = rowids
    if _no_driver():
        return None
    if high - low + 1 > os.path.getsize(path) // 4:  # a row takes at least 4 bytes of the file: rowids are sparse
        return _whole_table_ints(path, table, names, exprs)
    out = [np.empty(high - low + 1, dtype=np.int64) for _ in names]
    halves = _halves(low, high)
    try:
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="taxbreak-nsys") as pool:
            counts = list(pool.map(lambda r: _stream_into(path, table, exprs, r, out, r[0] - low), halves))
    except Exception as exc:  # noqa: BLE001 - sorted by _driver_error
        if _driver_error(exc):
            return None
        raise
    return dict(zip(names, _compact(out, [r[0] - low for r in halves], counts)))


def adbc_text_columns(path: Path, table: str, names: list[str], exprs: list[str],
                      max_bytes: int) -> dict[str, pa.ChunkedArray] | None:
    """Text columns as Arrow string arrays, chunked as read (null where NULL).

    The driver types a column from its first rows, so a column that starts with NULLs and
    holds text later fails; each text is read as ``COALESCE(text, '')`` beside an
    ``IS NOT NULL`` flag that puts the NULLs back. The driver checks neither UTF-8 nor
    the connection's length bound, so invalid UTF-8 (counted by ``LenientText``) or a
    value of ``max_bytes`` or more sends the read to the ``sqlite3`` path, which reports
    either as it always has. 500 k NVTX texts: ~0.15 s, against ~0.5 s as Python strings.
    """
    select = ", ".join(f"COALESCE({e}, ''), ({e} IS NOT NULL)" for e in exprs)
    table_ = adbc_table(path, table, select)
    if table_ is None:
        return None
    out = {}
    for i, name in enumerate(names):
        text = _text_column(table_.column(2 * i), max_bytes) if table_.num_rows else pa.array([], pa.string())
        has_text = table_.column(2 * i + 1)
        if text is None or (table_.num_rows and has_text.type != pa.int64()):
            return None
        if table_.num_rows and not pc.all(pc.not_equal(has_text, 0)).as_py():
            text = pc.if_else(pc.not_equal(has_text, 0), text, pa.scalar(None, pa.string()))
        out[name] = text  # chunked as read: combining would copy every byte once more
    return out


def adbc_table(path: Path, table: str, select: str) -> pa.Table | None:
    """``SELECT select FROM table`` over the two rowid halves as one Arrow table, or None."""
    if _no_driver():
        return None
    from adbc_driver_sqlite import dbapi
    try:
        with dbapi.connect(_uri(path)) as conn, conn.cursor() as cursor:
            cursor.execute(f'SELECT min(rowid), max(rowid) FROM "{table}"')
            low, high = cursor.fetchone()
        if low is None:
            return None
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="taxbreak-nsys") as pool:
            parts = list(pool.map(lambda r: _range_table(path, table, select, r), _halves(low, high)))
    except Exception as exc:  # noqa: BLE001 - sorted by _driver_error
        if _driver_error(exc):
            return None
        raise
    nonempty = [part for part in parts if part.num_rows]
    return pa.concat_tables(nonempty) if nonempty else parts[0]


def _stream_into(path: Path, table: str, exprs: str, rowids: tuple[int, int], out: list[np.ndarray],
                 offset: int) -> int:
    """Copy the rows of one rowid range into ``out`` from ``offset``, batch by batch; their count."""
    from adbc_driver_sqlite import dbapi
    capacity = rowids[1] - rowids[0] + 1
    n_rows = 0
    with dbapi.connect(_uri(path)) as conn, conn.cursor() as cursor:
        _prepare(cursor)
        cursor.execute(f'SELECT {exprs} FROM "{table}" WHERE rowid BETWEEN ? AND ?', rowids)
        for batch in cursor.fetch_record_batch():
            if batch.num_rows == 0:
                continue  # an empty result is typed by the driver's guess, not by the query
            if n_rows + batch.num_rows > capacity or batch.num_columns != len(out):
                raise _Mismatch("more rows or columns than asked for")
            for column, target in zip(batch.columns, out):
                if column.type != pa.int64() or column.null_count:
                    raise _Mismatch(f"a {column.type} column")  # every expression is CAST(… AS INTEGER) or a comparison
                target[offset + n_rows:offset + n_rows + batch.num_rows] = column.to_numpy()
            n_rows += batch.num_rows
    return n_rows


def _compact(out: list[np.ndarray], offsets: list[int], counts: list[int]) -> list[np.ndarray]:
    """Close the gap between the halves (rowids not dense) and cut the arrays to the rows read."""
    total = sum(counts)
    if len(counts) == 2 and counts[0] < offsets[1]:
        for column in out:  # overlapping copy to the left: numpy handles the overlap
            column[counts[0]:total] = column[offsets[1]:offsets[1] + counts[1]]
    # arrays much longer than their rows would keep untouched capacity reserved: copy those
    return [column[:total] if total * 2 >= len(column) else column[:total].copy() for column in out]


def _whole_table_ints(path: Path, table: str, names: list[str], exprs: str) -> dict[str, np.ndarray] | None:
    columns = adbc_table(path, table, exprs)
    if columns is None or columns.num_columns != len(names):
        return None
    if columns.num_rows and not all(t == pa.int64() for t in columns.schema.types):
        return None
    if any(column.null_count for column in columns.columns):
        return None
    return {name: columns.column(i).to_numpy().astype(np.int64, copy=False) for i, name in enumerate(names)}


def _text_column(text: pa.ChunkedArray, max_bytes: int) -> pa.ChunkedArray | None:
    if text.type != pa.string():
        return None
    try:
        text.validate(full=True)  # UTF-8
    except pa.ArrowInvalid:
        return None
    longest = pc.max(pc.binary_length(text)).as_py()
    return None if longest is not None and longest >= max_bytes else text


def _range_table(path: Path, table: str, select: str, rowids: tuple[int, int]) -> pa.Table:
    from adbc_driver_sqlite import dbapi
    with dbapi.connect(_uri(path)) as conn, conn.cursor() as cursor:
        _prepare(cursor)
        cursor.execute(f'SELECT {select} FROM "{table}" WHERE rowid BETWEEN ? AND ?', rowids)
        return cursor.fetch_arrow_table()


def _prepare(cursor) -> None:
    cursor.execute("PRAGMA trusted_schema=OFF")  # as on every sqlite3 connection of the export
    cursor.adbc_statement.set_options(**{"adbc.sqlite.query.batch_rows": str(BATCH_ROWS)})


def _halves(low: int, high: int) -> list[tuple[int, int]]:
    mid = low + (high - low) // 2
    return [(low, mid), (mid + 1, high)] if high > low else [(low, high)]


def _no_driver() -> bool:
    if os.environ.get(ENV_MAX_STEPS):
        return True
    try:
        import adbc_driver_sqlite.dbapi  # noqa: F401
    except ImportError:
        return True
    return False


def _driver_error(exc: Exception) -> bool:
    """Errors that mean "read it another way": the driver's own (``dbapi.Error`` derives
    from ``Exception`` through ``adbc_driver_manager``), a type mismatch, bad Arrow data."""
    from adbc_driver_sqlite import dbapi
    return isinstance(exc, (dbapi.Error, _Mismatch, pa.ArrowInvalid, ValueError, OSError))


def _uri(path: Path) -> str:
    return f"file:{pathname2url(str(path.resolve()))}?mode=ro&immutable=1"
