"""The Nsight reader on hostile exports: views, generated columns, odd storage
classes and runaway queries give tables with a counted diagnostic or a typed
error, never a hang, a memory blow-up or a TypeError."""
from __future__ import annotations

import json
import sqlite3

import pytest

from taxbreak.readers.nsys import read_nsys
from taxbreak.trace.errors import TraceFormatError

try:
    from .test_nsys_planted import write_export
except ImportError:
    from test_nsys_planted import write_export

ENDLESS = ("WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) "
           "SELECT i AS start, i AS end, 0 AS deviceId FROM r")


def _mutated(tmp_path, *sql: str):
    path = write_export(tmp_path / "hostile.sqlite")
    con = sqlite3.connect(path)
    for statement in sql:
        con.execute(statement)
    con.commit()
    con.close()
    return path


def test_a_view_in_place_of_an_event_table_is_never_run(tmp_path):
    path = _mutated(tmp_path, "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL",
                    f"CREATE VIEW CUPTI_ACTIVITY_KIND_KERNEL AS {ENDLESS}")
    tables = read_nsys(path)  # a view would never finish
    kinds = tables.device_activities.column("kind").to_pylist()
    assert "kernel" not in kinds and len(kinds) == 3  # the memcpy, memset and sync rows
    assert tables.diagnostics.count("nsys.untrusted_schema") == 1


def test_a_view_named_stringids_generating_blobs_is_never_run(tmp_path):
    path = _mutated(tmp_path, "DROP TABLE StringIds",
                    "CREATE VIEW StringIds AS WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r "
                    "WHERE i < 100000000) SELECT i AS id, zeroblob(1000000) AS value FROM r")
    tables = read_nsys(path)
    assert tables.diagnostics.count("nsys.untrusted_schema") == 1
    assert tables.diagnostics.count("nsys.unresolved_string") >= 1


def test_generated_columns_are_passed_over(tmp_path):
    path = _mutated(tmp_path, "ALTER TABLE StringIds RENAME TO old_strings",
                    "CREATE TABLE StringIds (id INTEGER, raw TEXT, "
                    "value BLOB GENERATED ALWAYS AS (zeroblob(900000000)) VIRTUAL)",
                    "INSERT INTO StringIds (id, raw) SELECT id, value FROM old_strings")
    tables = read_nsys(path)
    assert tables.diagnostics.count("nsys.untrusted_schema") == 1
    kernels = tables.device_activities.to_pandas().query("kind == 'kernel'")
    assert kernels["name"].isna().all() and len(kernels) == 4


@pytest.mark.parametrize("value", ["42", "4.5", "X'00FF61'", "X''", "NULL", "'ok'"])
def test_stringids_value_of_any_storage_class(tmp_path, value):
    # a column without type affinity keeps each value's storage class
    path = _mutated(tmp_path, "ALTER TABLE StringIds RENAME TO old_strings",
                    "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value)",
                    f"INSERT INTO StringIds SELECT id, {value} FROM old_strings",
                    f"UPDATE TARGET_INFO_GPU SET name = {value}, smCount = {value}")
    tables = read_nsys(path)
    names = tables.device_activities.column("name").to_pylist()
    assert all(n is None or isinstance(n, str) for n in names)
    json.dumps(tables.meta.devices)  # every value a JSON type (a blob name used to be bytes)
    wrong = value not in ("NULL", "'ok'")
    assert (tables.diagnostics.count("nsys.wrong_storage") > 0) == wrong
    assert sum(tables.meta.event_counts.values()) == tables.meta.input_events


@pytest.mark.parametrize("value", ["'text'", "X'DEADBEEF'", "1e300", "-1e300", "9223372036854775807", "NULL", "0.5"])
def test_any_storage_class_in_the_columns_read(tmp_path, value):
    tables_sql = ["CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL", "NVTX_EVENTS",
                  "CUPTI_ACTIVITY_KIND_MEMCPY", "ThreadNames", "PROCESSES"]
    con = sqlite3.connect(write_export(tmp_path / "base.sqlite"))
    statements = []
    for table in tables_sql:
        columns = [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
        statements += [f'UPDATE {table} SET "{c}" = {value} WHERE rowid % 2 = 1' for c in columns]
    con.close()
    try:
        tables = read_nsys(_mutated(tmp_path, *statements))
    except TraceFormatError as exc:
        assert exc.code in ("nsys.corrupt", "nsys.time_range")  # times beyond int64 clamp to its end
    else:
        assert sum(tables.meta.event_counts.values()) == tables.meta.input_events


REAL = "nsys-ai/tests/fixtures/mfu_2gpu_after.sqlite"  # about 0.4 VM steps per file byte to read


def test_runaway_work_stops_with_a_typed_error(shared_traces, monkeypatch):
    monkeypatch.setenv("TAXBREAK_NSYS_MAX_STEPS", "100000")
    with pytest.raises(TraceFormatError) as info:
        read_nsys(shared_traces / REAL)
    assert info.value.code == "nsys.query_limit"
    assert "TAXBREAK_NSYS_MAX_STEPS" in info.value.hint


def test_the_default_work_bound_reads_a_real_export(shared_traces):
    assert read_nsys(shared_traces / REAL).device_activities.num_rows > 0


def test_a_string_longer_than_the_bound_is_a_typed_error(tmp_path, monkeypatch):
    path = _mutated(tmp_path, "UPDATE StringIds SET value = printf('%.*c', 5000, 'x') WHERE id = 12")
    monkeypatch.setenv("TAXBREAK_NSYS_MAX_STRING_BYTES", "4096")
    with pytest.raises(TraceFormatError) as info:
        read_nsys(path)
    assert info.value.code == "nsys.string_limit"
    monkeypatch.delenv("TAXBREAK_NSYS_MAX_STRING_BYTES")
    assert read_nsys(path).device_activities.num_rows == 7


def test_schema_is_untrusted(tmp_path):
    from taxbreak.readers.nsys_db import open_export

    db = open_export(write_export(tmp_path / "x.sqlite"))
    try:
        assert db.conn.execute("PRAGMA trusted_schema").fetchone()[0] == 0
        with pytest.raises(sqlite3.OperationalError):
            db.conn.execute("CREATE TABLE t (a)")  # read-only
    finally:
        db.conn.close()


@pytest.mark.parametrize("value", ["X'00'", "'abc'", "NULL", "1e300"])
def test_enum_tables_of_any_storage_class(tmp_path, value):
    path = _mutated(tmp_path, "CREATE TABLE IF NOT EXISTS ENUM_CUDA_MEM_KIND (id, name, label)",
                    f"INSERT INTO ENUM_CUDA_MEM_KIND VALUES ({value}, {value}, {value})",
                    f"UPDATE ENUM_NSYS_EVENT_CLASS SET id = {value} WHERE rowid = 1")
    tables = read_nsys(path)
    assert sum(tables.meta.event_counts.values()) == tables.meta.input_events
