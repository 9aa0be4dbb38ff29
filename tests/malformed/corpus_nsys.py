"""Hostile Nsight SQLite exports for the malformed corpus, with what each must give.

``python tests/malformed/corpus_nsys.py`` rewrites the ``nsys_*.sqlite`` files
under ``cases/``; ``test_malformed_nsys.py`` reads each through ``load_trace``
and the CLI. Each export is a few kB (page size 512): a metadata table,
``StringIds``, two runtime calls and two kernels, then one hostile change.
"""
from __future__ import annotations

import sqlite3
import sys
import tempfile
from pathlib import Path

CASES_DIR = Path(__file__).parent / "cases"
ENDLESS = "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r)"


def _export(*hostile: str) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "x.sqlite"
        con = sqlite3.connect(path)
        con.execute("PRAGMA page_size = 512")
        for sql in (
            "CREATE TABLE META_DATA_EXPORT (name TEXT, value TEXT)",
            "INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION', '3.25.0')",
            "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value)",
            "INSERT INTO StringIds VALUES (1, 'cudaLaunchKernel_v7000'), (2, 'gemm_kernel'), (3, 'softmax')",
            "CREATE TABLE TARGET_INFO_GPU (id INTEGER, name, smCount)",
            "INSERT INTO TARGET_INFO_GPU VALUES (0, 'NVIDIA H100', 132)",
            "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER, end INTEGER, eventClass INTEGER, "
            "globalTid INTEGER, correlationId INTEGER, nameId INTEGER)",
            "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (100, 200, 0, 16777217, 1, 1), (300, 400, 0, 16777217, 2, 1)",
            "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, deviceId INTEGER, streamId INTEGER, "
            "correlationId INTEGER, globalPid INTEGER, demangledName INTEGER, shortName INTEGER)",
            "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (250, 500, 0, 7, 1, 16777216, 2, 2), "
            "(500, 900, 0, 7, 2, 16777216, 3, 3)",
            *hostile,
        ):
            con.execute(sql)
        con.commit()
        con.close()
        return path.read_bytes()


def _stringids_as(value_sql: str) -> tuple[str, ...]:
    return ("ALTER TABLE StringIds RENAME TO s_old", "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value)",
            f"INSERT INTO StringIds SELECT id, {value_sql} FROM s_old", "DROP TABLE s_old")


# name -> (bytes, expected error code)
CASES: dict[str, tuple[bytes, str]] = {
    "nsys_views_only.sqlite": (_export(
        *(f"ALTER TABLE {t} RENAME TO {t}_x" for t in ("META_DATA_EXPORT", "StringIds", "CUPTI_ACTIVITY_KIND_KERNEL")),
        "CREATE VIEW META_DATA_EXPORT AS SELECT * FROM META_DATA_EXPORT_x",
        "CREATE VIEW StringIds AS SELECT * FROM StringIds_x",
        f"CREATE VIEW CUPTI_ACTIVITY_KIND_KERNEL AS {ENDLESS} SELECT i AS start FROM r",
        "DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME", "DROP TABLE TARGET_INFO_GPU"), "nsys.not_an_export"),
    # a future schema's renamed time columns: read with defaults, every kernel sat at time 0
    "nsys_renamed_time_columns.sqlite": (_export(
        "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL RENAME COLUMN start TO startNs",
        "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL RENAME COLUMN end TO endNs"), "nsys.unknown_schema"),
    "nsys_span_beyond_bound.sqlite": (_export(
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 9000000000000000000, end = 9000000000000000100 "
        "WHERE correlationId = 2"), "nsys.time_range"),
}

# name -> (bytes, diagnostic code it loads with): every hostile part ignored or read safely
RECOVERABLE: dict[str, tuple[bytes, str]] = {
    # a kernel ending at INT64_MAX (292 years): dropped and counted, as Kineto drops such a dur
    "nsys_kernel_end_int64_max.sqlite": (_export(
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = 9223372036854775807 WHERE correlationId = 2"),
        "event.number_out_of_range"),
    "nsys_endless_view_kernel.sqlite": (_export(
        "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL",
        f"CREATE VIEW CUPTI_ACTIVITY_KIND_KERNEL AS {ENDLESS} SELECT i AS start, i + 1 AS end, 0 AS deviceId FROM r"),
        "nsys.untrusted_schema"),
    "nsys_blob_view_stringids.sqlite": (_export(
        "DROP TABLE StringIds",
        f"CREATE VIEW StringIds AS {ENDLESS} SELECT i AS id, zeroblob(1000000) AS value FROM r"),
        "nsys.untrusted_schema"),
    "nsys_generated_column.sqlite": (_export(
        "ALTER TABLE StringIds RENAME TO s_old",
        "CREATE TABLE StringIds (id INTEGER, value BLOB GENERATED ALWAYS AS (zeroblob(900000000)) VIRTUAL)",
        "INSERT INTO StringIds (id) SELECT id FROM s_old"), "nsys.untrusted_schema"),
    "nsys_stringids_integer.sqlite": (_export(*_stringids_as("id * 1000")), "nsys.wrong_storage"),
    "nsys_stringids_real.sqlite": (_export(*_stringids_as("id + 0.5")), "nsys.wrong_storage"),
    "nsys_stringids_blob.sqlite": (_export(*_stringids_as("CAST(value AS BLOB)")), "nsys.wrong_storage"),
    "nsys_stringids_invalid_utf8_blob.sqlite": (_export(*_stringids_as("X'67656DFF6D'")), "nsys.wrong_storage"),
    "nsys_blob_gpu_name.sqlite": (_export("UPDATE TARGET_INFO_GPU SET name = X'48313030FF1B5D35323B', "
                                          "smCount = X'00'"), "nsys.wrong_storage"),
}
# nsys_blob_gpu_name holds no odd StringIds value: its diagnostic is absent; the test checks its GPU name instead
RECOVERABLE_WITHOUT_DIAGNOSTIC = {"nsys_blob_gpu_name.sqlite"}


def write_corpus(out: Path = CASES_DIR) -> None:
    from corpus import write_cases  # same folder; the one writer of case files

    write_cases({**CASES, **RECOVERABLE}, out)


if __name__ == "__main__":
    write_corpus(Path(sys.argv[1]) if len(sys.argv) > 1 else CASES_DIR)
