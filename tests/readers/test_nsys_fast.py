"""The Nsight reader's bulk paths give exactly what the row-by-row paths gave."""
from __future__ import annotations

import sqlite3
import sys

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from taxbreak.readers import nsys_adbc, nsys_db, nsys_schema as ns
from taxbreak.readers.nsys import read_nsys
from taxbreak.synth.big_nsys import LAUNCHES_PER_STEP, write_big_nsys

INT64 = st.integers(-2**63, 2**63 - 1)


@settings(max_examples=60, deadline=None)
@given(arrays(np.int64, st.tuples(st.integers(0, 40), st.sampled_from([1, 2, 3])),
              elements=st.one_of(st.integers(-3, 3), INT64)))
def test_unique_inverse_equals_numpy_unique(values):
    flat = values[:, 0] if values.shape[1] == 1 else values
    want_uniq, want_inverse = np.unique(flat, axis=0, return_inverse=True)
    got_uniq, got_inverse = nsys_db.unique_inverse(flat)
    assert np.array_equal(got_uniq, want_uniq)
    assert np.array_equal(got_inverse, want_inverse.ravel())


def _export(path, rows):
    con = sqlite3.connect(path)
    con.execute('CREATE TABLE "CUPTI_ACTIVITY_KIND_RUNTIME" (start INTEGER, end INTEGER, eventClass INTEGER, '
                'globalTid INTEGER, correlationId INTEGER, nameId INTEGER)')
    con.executemany('INSERT INTO "CUPTI_ACTIVITY_KIND_RUNTIME" VALUES (?,?,?,?,?,?)', rows)
    con.execute('CREATE VIEW "RUNTIME_VIEW" AS SELECT * FROM "CUPTI_ACTIVITY_KIND_RUNTIME"')
    con.commit()
    con.close()


def _row_by_row(path, table, specs):
    con = sqlite3.connect(path)
    present = {r[1] for r in con.execute(f'PRAGMA table_info("{table}")')}
    sql = f'SELECT {", ".join(nsys_db._expr(s, present) for s in specs)} FROM "{table}"'
    rows = con.execute(sql).fetchall()
    con.close()
    return nsys_db._to_columns(rows, specs), present


@pytest.fixture(params=["adbc", "csv"])
def bulk_path(request, monkeypatch):
    """Both bulk paths: the ADBC driver's, and SQLite's CSV text when the driver is absent."""
    if request.param == "csv":
        monkeypatch.setitem(sys.modules, "adbc_driver_sqlite", None)  # its import raises ImportError
    return request.param


def test_bulk_integers_equal_row_by_row_with_nulls_reals_text_and_extremes(tmp_path, bulk_path):
    path = tmp_path / "ints.sqlite"
    rows = [(1, 2, 0, 7, 1, 3), (None, 5, None, 2**63 - 1, -2**63, 1), (2.75, "12", "abc", -1, 0, None),
            (1e20, -1e20, 1, 2, 3, 4)] + [(i, i + 1, 0, 9, i, 2) for i in range(5000)]
    _export(path, rows)
    want, present = _row_by_row(path, "CUPTI_ACTIVITY_KIND_RUNTIME", ns.RUNTIME_COLS)
    got = nsys_db.fetch_int_columns(path, "CUPTI_ACTIVITY_KIND_RUNTIME", ns.RUNTIME_COLS, present, chunk_rows=777)
    assert got is not None and set(got) == set(want)
    for name in want:
        assert got[name].dtype == np.int64 and np.array_equal(got[name], want[name]), name
    assert got["start_ns"][1] == -1 and got["start_ns"][2] == 2 and got["event_class"][2] == 0
    exprs = ", ".join(nsys_db._expr(spec, present) for spec in ns.RUNTIME_COLS)
    direct = nsys_adbc.adbc_int_columns(path, "CUPTI_ACTIVITY_KIND_RUNTIME", [s.out for s in ns.RUNTIME_COLS], exprs, (1, len(rows)))
    assert (direct is None) == (bulk_path == "csv")  # the driver is a dependency: its path is the one taken


def test_the_adbc_path_gives_way_to_a_lowered_work_bound(tmp_path, monkeypatch):
    path = tmp_path / "ints.sqlite"
    _export(path, [(1, 2, 0, 7, 1, 3)])
    exprs = ", ".join(nsys_db._expr(spec, {"start"}) for spec in ns.RUNTIME_COLS)
    assert nsys_adbc.adbc_int_columns(path, "CUPTI_ACTIVITY_KIND_RUNTIME", [s.out for s in ns.RUNTIME_COLS], exprs, (1, 1)) is not None
    monkeypatch.setenv(nsys_db.ENV_MAX_STEPS, "1000000")  # only sqlite3 connections can charge it
    assert nsys_adbc.adbc_int_columns(path, "CUPTI_ACTIVITY_KIND_RUNTIME", [s.out for s in ns.RUNTIME_COLS], exprs, (1, 1)) is None


def test_bulk_integers_give_way_on_a_view(tmp_path, bulk_path):
    path = tmp_path / "ints.sqlite"
    _export(path, [(1, 2, 0, 7, 1, 3)])
    present = {"start", "end", "eventClass", "globalTid", "correlationId", "nameId"}
    assert nsys_db.fetch_int_columns(path, "RUNTIME_VIEW", ns.RUNTIME_COLS, present) is None


def test_big_export_reads_back_with_exact_counts(tmp_path):
    counts = write_big_nsys(tmp_path / "big.sqlite", 2 * 1000, seed=1)
    assert counts == {"launches": 1000, "kernels": 1000, "nvtx": 1000 + 1000 // LAUNCHES_PER_STEP,
                      "steps": 1000 // LAUNCHES_PER_STEP}
    tables = read_nsys(tmp_path / "big.sqlite")
    kernels = tables.device_activities.to_pandas()
    api = tables.api_calls.to_pandas()
    assert len(kernels) == 1000 and len(api) == 1000
    assert sorted(kernels["correlation"]) == sorted(api["correlation"]) == list(range(1, 1001))
    # one stream, in launch order, never overlapping, each after its launch returned
    k = kernels.sort_values("correlation")
    a = api.sort_values("correlation")
    assert (k["start_ns"].to_numpy()[1:] >= (k["start_ns"] + k["dur_ns"]).to_numpy()[:-1]).all()
    assert (k["start_ns"].to_numpy() > (a["start_ns"] + a["dur_ns"]).to_numpy()).all()


def test_text_and_integer_columns_read_apart_equal_rows_read_whole(tmp_path, bulk_path):
    """NVTX rows (integers plus text, some NULL, some not UTF-8) through ``NsysDb.fetch``."""
    from pathlib import Path

    path = tmp_path / "nvtx.sqlite"
    con = sqlite3.connect(path)
    con.execute('CREATE TABLE "NVTX_EVENTS" (start INTEGER, end INTEGER, eventType INTEGER, rangeId INTEGER, '
                'category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, '
                'textId INTEGER, domainId INTEGER)')
    rows = [(i, i + 5, 59, 0, 0, 0, None if i % 7 == 0 else f"aten::mm, seq = {i}", 9, 9, None, 0)
            for i in range(3000)]
    con.executemany('INSERT INTO "NVTX_EVENTS" VALUES (?,?,?,?,?,?,?,?,?,?,?)', rows)
    con.execute('CREATE TABLE "StringIds" (id INTEGER PRIMARY KEY, value TEXT NOT NULL)')
    con.commit()
    con.close()
    want, _ = _row_by_row(path, "NVTX_EVENTS", ns.NVTX_COLS)
    db = nsys_db.open_export(Path(path))
    got = db.fetch("NVTX_EVENTS", ns.NVTX_COLS)
    assert list(got) == list(want)
    for name in want:
        assert got[name].dtype == want[name].dtype and list(got[name]) == list(want[name]), name


def _nvtx_export(path, texts, start=0):
    con = sqlite3.connect(path)
    con.execute('CREATE TABLE "NVTX_EVENTS" (start INTEGER, end INTEGER, eventType INTEGER, text TEXT, '
                'globalTid INTEGER, textId INTEGER, domainId INTEGER, category INTEGER)')
    con.executemany('INSERT INTO "NVTX_EVENTS" VALUES (?,?,59,?,9,NULL,0,0)',
                    [(start + i, start + i + 5, text) for i, text in enumerate(texts)])
    con.execute('CREATE TABLE "StringIds" (id INTEGER PRIMARY KEY, value TEXT NOT NULL)')
    con.commit()
    con.close()


def _arrow_fetch(path):
    from pathlib import Path

    db = nsys_db.open_export(Path(path))
    try:
        return db.fetch("NVTX_EVENTS", ns.NVTX_COLS, arrow_text=True), db
    finally:
        db.conn.close()


def test_arrow_text_keeps_nulls_that_come_first_and_equals_the_row_path(tmp_path, bulk_path):
    """The driver types a column from its first rows: 5,000 NULL texts, then text."""
    path = tmp_path / "nvtx.sqlite"
    texts = [None] * 5000 + [f"aten::mm, seq = {i}, op_id = {i}" for i in range(3000)] + [None, "é ünïcode"]
    _nvtx_export(path, texts)
    got, _ = _arrow_fetch(path)
    assert got["text"].type == pa.string() and got["text"].to_pylist() == texts
    want, _ = _row_by_row(path, "NVTX_EVENTS", ns.NVTX_COLS)
    for name in want:
        if name != "text":
            assert np.array_equal(got[name], want[name]), name


def test_arrow_text_gives_way_to_invalid_utf8_which_stays_counted(tmp_path, bulk_path):
    path = tmp_path / "nvtx.sqlite"
    _nvtx_export(path, ["aten::mm, seq = 1"] * 10)
    con = sqlite3.connect(path)
    con.execute("UPDATE NVTX_EVENTS SET text = CAST(x'61ff62' AS TEXT) WHERE rowid = 4")
    con.commit()
    con.close()
    got, db = _arrow_fetch(path)
    assert got["text"].to_pylist()[3] == "a\ufffdb" and db.text.invalid == 1
    if bulk_path == "adbc":  # the driver would have passed the bytes on unchecked
        assert nsys_adbc.adbc_text_columns(path, "NVTX_EVENTS", ["text"], ['CAST("text" AS TEXT)'], 2**20) is None


def test_arrow_text_leaves_a_value_over_the_string_bound_to_sqlite(tmp_path, monkeypatch):
    path = tmp_path / "nvtx.sqlite"
    _nvtx_export(path, ["x" * 5000, "short"])
    monkeypatch.setenv(nsys_db.ENV_MAX_STRING, "4096")
    assert nsys_adbc.adbc_text_columns(path, "NVTX_EVENTS", ["text"], ['CAST("text" AS TEXT)'], 4096) is None
    from pathlib import Path

    from taxbreak.trace.errors import TraceFormatError
    db = nsys_db.open_export(Path(path))
    with pytest.raises(TraceFormatError) as err:
        db.fetch("NVTX_EVENTS", ns.NVTX_COLS, arrow_text=True)
    assert err.value.code == "nsys.string_limit"


@pytest.mark.parametrize("deleted", [range(0, 0), range(100, 1200), range(2500, 4000), range(1, 3999)])
def test_streamed_integers_close_gaps_left_by_deleted_rows(tmp_path, deleted):
    """Arrays are sized by the rowid range; rows deleted in either half leave gaps that are closed."""
    path = tmp_path / "ints.sqlite"
    _export(path, [(i, i + 1, 0, 9, i, 2) for i in range(4000)])
    con = sqlite3.connect(path)
    if len(deleted):
        con.execute('DELETE FROM "CUPTI_ACTIVITY_KIND_RUNTIME" WHERE rowid BETWEEN ? AND ?',
                    (deleted.start + 1, deleted.stop))
    con.commit()
    low, high = con.execute('SELECT min(rowid), max(rowid) FROM "CUPTI_ACTIVITY_KIND_RUNTIME"').fetchone()
    con.close()
    want, present = _row_by_row(path, "CUPTI_ACTIVITY_KIND_RUNTIME", ns.RUNTIME_COLS)
    exprs = ", ".join(nsys_db._expr(spec, present) for spec in ns.RUNTIME_COLS)
    got = nsys_adbc.adbc_int_columns(path, "CUPTI_ACTIVITY_KIND_RUNTIME", [s.out for s in ns.RUNTIME_COLS],
                                     exprs, (low, high))
    assert got is not None and len(got["start_ns"]) == 4000 - len(deleted)
    for name in want:
        assert np.array_equal(got[name], want[name]), name


def test_streamed_integers_give_way_to_a_value_that_is_not_an_integer(tmp_path):
    path = tmp_path / "ints.sqlite"
    _export(path, [(i, i + 1, 0, 9, i, 2) for i in range(100)])
    got = nsys_adbc.adbc_int_columns(path, "CUPTI_ACTIVITY_KIND_RUNTIME", ["a", "b"],
                                     "CAST(start AS INTEGER), CAST(start AS TEXT)", (1, 100))
    assert got is None


def test_a_sequence_number_beyond_int64_is_no_sequence_number(tmp_path, bulk_path):
    """A hostile op text used to stop the read (Arrow cannot cast 20 digits to int64)."""
    from taxbreak.trace.schema import NO_ID

    path = tmp_path / "nvtx.sqlite"
    _nvtx_export(path, ["aten::mm, seq = 99999999999999999999, op_id = 1", "aten::mm, seq = -12", "aten::mm, seq = 7, op_id = 3"])
    ops = read_nsys(path).host_events
    assert ops.column("sequence_nr").to_pylist() == [NO_ID, -12, 7]
    assert ops.column("name").to_pylist() == ["aten::mm"] * 3


def test_tables_in_start_order_come_back_in_one_chunk_without_copying_a_whole_chunk():
    from taxbreak.readers.nsys import _by_start

    names = pa.array(["sm90_gemm", "elementwise", "reduce"])
    whole = pa.chunked_array([names, pa.array([], pa.string())])  # kernels, then an empty memcpy read
    split = pa.chunked_array([np.array([0, 1], np.int64), np.array([2], np.int64)])  # two non-empty reads
    table = pa.table({"row_id": split, "start_ns": pa.chunked_array([[10, 20], [30]]), "name": whole})
    out = _by_start(table)
    assert out.equals(table)
    assert [out.column(n).num_chunks for n in out.schema.names] == [1, 1, 1]
    # the one filled chunk is kept as it is: same buffers, no copy
    assert out.column("name").chunk(0).buffers()[2].address == names.buffers()[2].address
    assert out.schema == table.schema
