"""The malformed-trace corpus: each case's bytes and the error code it must raise.

``python tests/malformed/corpus.py`` rewrites the files under ``cases/``;
``test_malformed.py`` checks them against this table and reads each one through
``load_trace`` and the CLI.
"""
from __future__ import annotations

import gzip
import json
import sqlite3
import sys
import tempfile
from pathlib import Path

CASES_DIR = Path(__file__).parent / "cases"

_EVENT = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10.5, "dur": 2.0}
_GOOD = json.dumps({"schemaVersion": 1, "traceEvents": [_EVENT] * 3}).encode()


def _sqlite_not_nsys() -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "x.sqlite"
        con = sqlite3.connect(db)
        con.execute("CREATE TABLE people (name TEXT)")
        con.execute("INSERT INTO people VALUES ('ada')")
        con.commit()
        con.close()
        return db.read_bytes()


# name -> (bytes, expected error code). Every case is small (< 10 kB).
CASES: dict[str, tuple[bytes, str]] = {
    "empty.json": (b"", "input.empty"),
    "whitespace.json": (b"  \n\t ", "input.empty"),
    "not_json.json": (b"hello, this is not a trace\n", "format.unknown"),
    "binary.bin": (bytes(range(1, 200)), "format.unknown"),
    "invalid_json.json": (b'{"traceEvents": [{"ph": "X" "cat": 1}]}', "json.invalid"),
    "trailing_garbage.json": (_GOOD + b"}}", "json.invalid"),
    "truncated.json": (_GOOD[:-20], "json.truncated"),
    "truncated_in_header.json": (b'{"schemaVersion": 1, "deviceProp', "json.truncated"),
    "truncated.json.gz": (gzip.compress(_GOOD, mtime=0)[:-12], "gzip.truncated"),
    "gzip_of_garbage.json.gz": (b"\x1f\x8b\x08\x00" + b"\xde\xad\xbe\xef" * 8, "gzip.truncated"),
    "gzip_of_empty.json.gz": (gzip.compress(b"", mtime=0), "input.empty"),
    "utf16.json": (json.dumps({"traceEvents": []}).encode("utf-16"), "json.encoding"),
    "events_not_list.json": (b'{"traceEvents": {"ph": "X"}}', "kineto.wrong_type"),
    "events_string.json": (b'{"traceEvents": "none"}', "kineto.wrong_type"),
    "no_events.json": (b'{"schemaVersion": 1, "deviceProperties": []}', "kineto.no_events"),
    "array_truncated.json": (b'[{"ph": "X", "cat": "cpu_op"', "json.truncated"),
    "top_level_string.json": (b'"traceEvents"', "format.unknown"),
    "sqlite_not_nsys.sqlite": (_sqlite_not_nsys(), "nsys.not_an_export"),
}

# Recoverable oddities: they load, with the counted diagnostic named here.
RECOVERABLE: dict[str, tuple[bytes, str]] = {
    "ts_string.json": (json.dumps({"traceEvents": [_EVENT, {**_EVENT, "ts": "10"}]}).encode(), "event.wrong_type"),
    "pid_list.json": (json.dumps({"traceEvents": [_EVENT, {**_EVENT, "name": 7}]}).encode(), "event.wrong_type"),
    "missing_ts.json": (json.dumps({"traceEvents": [_EVENT, {k: v for k, v in _EVENT.items() if k != "ts"}]}).encode(),
                        "event.missing_field"),
    "missing_dur.json": (json.dumps({"traceEvents": [{k: v for k, v in _EVENT.items() if k != "dur"}]}).encode(),
                         "event.missing_dur"),
    "negative_dur.json": (json.dumps({"traceEvents": [{**_EVENT, "dur": -3}]}).encode(), "event.negative_dur"),
    "begin_end.json": (json.dumps({"traceEvents": [{**_EVENT, "ph": "B"}, {**_EVENT, "ph": "E"}]}).encode(),
                       "event.begin_end"),
    "unknown_phase.json": (json.dumps({"traceEvents": [{**_EVENT, "ph": "C"}]}).encode(), "event.unsupported_phase"),
    "array_of_numbers.json": (b"[1, 2, 3]", "event.wrong_type"),
    "metadata_only.json": (json.dumps({"traceEvents": [
        {"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": "python"}}]}).encode(),
        "event.metadata"),
    "non_utf8_name.json": (json.dumps({"traceEvents": [_EVENT]}).encode().replace(b"aten::mm", b"aten::\xff\xfemm"),
                           "trace.invalid_utf8"),
    "non_utf8_shapes.json": (json.dumps({"traceEvents": [{**_EVENT, "args": {"Input Dims": ["QQ"]}}]}).encode()
                             .replace(b'"QQ"', b'"\xc3("'), "trace.invalid_utf8"),
}


def write_corpus(out: Path = CASES_DIR) -> None:
    """Write every case file under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    for name, (data, _) in {**CASES, **RECOVERABLE}.items():
        (out / name).write_bytes(data)


if __name__ == "__main__":
    write_corpus(Path(sys.argv[1]) if len(sys.argv) > 1 else CASES_DIR)
