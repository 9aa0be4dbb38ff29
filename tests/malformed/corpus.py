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


_TEXT_EVENT = '{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":%s,"dur":%s}'
_KERNEL = ('{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":%s,"dur":%s,'
           '"args":{"device":0,"stream":7,"correlation":%s,"External id":%s,"grid":%s}}')


def _events(*events: str) -> bytes:
    """A trace from event texts (numbers kept exactly as written, which json.dumps cannot)."""
    return ('{"traceEvents":[' + ",".join(events) + "]}").encode()


def _with_good(event: str) -> bytes:
    """One hostile event after a good one: the good one must survive."""
    return _events(_TEXT_EVENT % ("1.5", "2"), event)


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


_DUP = _events(_TEXT_EVENT % ("1", "1"))[:-1] + b',"traceEvents":[' + (_TEXT_EVENT % ("5", "1")).encode() + b"]}"

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
    # hostile input: nesting anywhere, duplicate top-level keys, times that cannot share one int64 axis
    "nesting_in_args.json": (_with_good('{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":1,"dur":1,'
                                        '"args":{"x":' + _nested(1200) + "}}"), "json.too_deep"),
    "nesting_in_events.json": (_with_good(_nested(1200)), "json.too_deep"),
    "nesting_top_key.json": (('{"traceEvents":[],"distributedInfo":' + "{\"a\":" * 1200 + "1" + "}" * 1200
                              + "}").encode(), "json.too_deep"),
    "nesting_array_file.json": (_nested(1500).encode(), "json.too_deep"),
    "duplicate_events.json": (_DUP, "json.duplicate_key"),
    "duplicate_events_invalid_utf8.json": (_DUP.replace(b'"name":"aten::mm"', b'"name":"aten::\xffmm"'),
                                           "json.duplicate_key"),
    "duplicate_key_after_events.json": (_events(_TEXT_EVENT % ("1", "1"))[:-1] + b',"traceName":"a","traceName":"b"}',
                                        "json.duplicate_key"),
    "duplicate_key_before_events.json": (b'{"traceName":"a","tr\\u0061ceName":"b",'
                                         + _events(_TEXT_EVENT % ("1", "1"))[1:],
                                         "json.duplicate_key"),
    "epoch_wrap.json": (_events(_TEXT_EVENT % ("9000000000000000", "1"), _TEXT_EVENT % ("-9000000000000000", "1")),
                        "kineto.time_range"),
    "base_time_beyond_int64.json": (b'{"baseTimeNanoseconds":' + b"9" * 30 + b","
                                    + _events(_TEXT_EVENT % ("1", "1"))[1:],
                                    "kineto.time_range"),
}

# Recoverable oddities: they load, with the counted diagnostic named here.
def _deep_header(key: str, depth: int = 600) -> bytes:
    """A header key nested within the JSON depth bound but past what the metadata keeps."""
    return ('{"%s":' % key + _nested(depth) + ',"traceEvents":[' + _TEXT_EVENT % ("1", "1") + "]}").encode()


_LINK_ID = ('{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":2,"dur":1,'
            '"args":{"correlation":%s}}')

RECOVERABLE: dict[str, tuple[bytes, str]] = {
    "header_deep_trace_name.json": (_deep_header("traceName"), "kineto.header_too_deep"),
    "header_deep_schema_version.json": (_deep_header("schemaVersion"), "kineto.header_too_deep"),
    "header_deep_distributed_info.json": (_deep_header("distributedInfo", 901 - 2), "kineto.header_too_deep"),
    "lone_surrogate_name.json": (_with_good(_TEXT_EVENT.replace("aten::mm", "aten::\\ud800mm") % ("3", "1")),
                                 "trace.lone_surrogate"),
    "correlation_float.json": (_with_good(_LINK_ID % "5.5"), "event.id_not_integer"),
    "correlation_bool.json": (_with_good(_LINK_ID % "true"), "event.id_not_integer"),
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
    # numbers: extreme exponents never reach a decimal cast (one segfaulted, one took 30 s, one raised)
    "ts_exponent_tiny.json": (_with_good(_TEXT_EVENT % ("1e-9999999", "1")), "event.number_out_of_range"),
    "dur_exponent_tiny.json": (_with_good(_TEXT_EVENT % ("1", "1e-9999999")), "event.number_out_of_range"),
    "ts_exponent_slow.json": (_with_good(_TEXT_EVENT % ("1e999990", "1")), "event.number_out_of_range"),
    "ts_exponent_huge.json": (_with_good(_TEXT_EVENT % ("1e999999999", "1")), "event.number_out_of_range"),
    "dur_exponent_huge.json": (_with_good(_TEXT_EVENT % ("1", "-1E+999999999")), "event.number_out_of_range"),
    "ts_long_digits.json": (_with_good(_TEXT_EVENT % ("1" * 5000, "1")), "event.number_out_of_range"),
    "ts_long_fraction.json": (_with_good(_TEXT_EVENT % ("1." + "0" * 5000, "1")), "event.number_out_of_range"),
    "ts_beyond_int64.json": (_with_good(_TEXT_EVENT % ("9223372036854776", "1")), "event.number_out_of_range"),
    "dur_beyond_span.json": (_with_good(_TEXT_EVENT % ("1", "9000000000000000")), "event.number_out_of_range"),
    "kernel_ts_dur_9e15.json": (_with_good(_KERNEL % ("9e15", "9e15", 1, 1, "[1,1,1]")), "event.number_out_of_range"),
    # ids no int64 holds: the event is dropped and counted, the others kept
    "pid_beyond_uint64.json": (_with_good(_TEXT_EVENT.replace('"pid":1', '"pid":18446744073709551616') % ("1", "1")),
                               "event.id_out_of_range"),
    "tid_below_int64.json": (_with_good(_TEXT_EVENT.replace('"tid":1', '"tid":-9223372036854775809') % ("1", "1")),
                             "event.id_out_of_range"),
    "pid_float_huge.json": (_with_good(_TEXT_EVENT.replace('"pid":1', '"pid":1e300') % ("1", "1")),
                            "event.id_out_of_range"),
    "pid_hex_huge.json": (_with_good(_TEXT_EVENT.replace('"pid":1', '"pid":"0x' + "f" * 40 + '"') % ("1", "1")),
                          "event.id_out_of_range"),
    "correlation_huge.json": (_with_good(_KERNEL % ("1", "1", 2**70, 1, "[1,1,1]")), "event.id_out_of_range"),
    "external_id_huge.json": (_with_good(_KERNEL % ("1", "1", 1, -(2**70), "[1,1,1]")), "event.id_out_of_range"),
    "grid_huge.json": (_with_good(_KERNEL % ("1", "1", 1, 1, "[%d,1,1]" % 2**64)), "event.id_out_of_range"),
    "stream_hex_huge.json": (_with_good(_KERNEL.replace('"stream":7', '"stream":"0x' + "f" * 64 + '"')
                                        % ("1", "1", 1, 1, "[1,1,1]")), "event.id_out_of_range"),
    "flow_id_huge.json": (_with_good('{"ph":"s","cat":"ac2g","name":"f","pid":1,"tid":1,"ts":1,"id":%d}' % 2**65),
                          "event.id_out_of_range"),
    # beyond what msgspec decodes at all in an untyped field: the event is a wrong type
    "pid_number_beyond_float.json": (_with_good(_TEXT_EVENT.replace('"pid":1', '"pid":1e400') % ("1", "1")),
                                     "event.wrong_type"),
    "pid_integer_5000_digits.json": (_with_good(_TEXT_EVENT.replace('"pid":1', '"pid":' + "7" * 5000) % ("1", "1")),
                                     "event.wrong_type"),
}


def write_cases(cases: dict[str, tuple[bytes, str]], out: Path = CASES_DIR) -> None:
    """Write each ``name: (bytes, code)`` case file under ``out`` (this corpus and corpus_nsys)."""
    out.mkdir(parents=True, exist_ok=True)
    for name, (data, _) in cases.items():
        (out / name).write_bytes(data)


def write_corpus(out: Path = CASES_DIR) -> None:
    """Write every case file under ``out``."""
    write_cases({**CASES, **RECOVERABLE}, out)


if __name__ == "__main__":
    write_corpus(Path(sys.argv[1]) if len(sys.argv) > 1 else CASES_DIR)
