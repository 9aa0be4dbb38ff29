"""Hostile Kineto JSON: every bound of taxbreak/readers/bounds.py holds, has its code,
and is raised by its variable; numbers and ids out of range drop only their event."""
from __future__ import annotations

import gzip
import json
import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from taxbreak.cli.main import main
from taxbreak.readers import bounds as B
from taxbreak.readers import kineto
from taxbreak.readers.kineto import read_kineto
from taxbreak.report.annotate_io import read_trace_bytes, split_document
from taxbreak.trace.errors import TaxbreakError

sys.path.insert(0, str(Path(__file__).parent))
from corpus import CASES, CASES_DIR, RECOVERABLE  # noqa: E402

_HOSTILE_RECOVERABLE = sorted(n for n, (_, code) in RECOVERABLE.items()
                              if code in ("event.number_out_of_range", "event.id_out_of_range")
                              or n.startswith("pid_"))
_GOOD = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1.5, "dur": 2}


def read_document(path):
    """What ``taxbreak annotate`` reads: the bytes under the inflate bounds, then the top level
    under the nesting bound and the duplicate-key refusal."""
    return split_document(read_trace_bytes(path), path)


def _code(path, **kwargs) -> str:
    with pytest.raises(TaxbreakError) as info:
        read_kineto(path, **kwargs)
    return info.value.code


@pytest.mark.parametrize("name", _HOSTILE_RECOVERABLE)
def test_hostile_value_drops_only_its_event(name):
    code = RECOVERABLE[name][1]
    tables = read_kineto(CASES_DIR / name)
    assert tables.diagnostics.count(code) == 1
    assert tables.meta.event_counts["dropped"] == 1
    assert tables.host_events.column("name").to_pylist() == ["aten::mm"]  # the good event, exactly
    assert tables.host_events.column("start_ns").to_pylist() == [0]
    assert tables.host_events.column("dur_ns").to_pylist() == [2000]


@pytest.mark.parametrize("name", _HOSTILE_RECOVERABLE)
def test_hostile_value_through_the_cli_exits_0_and_names_the_diagnostic(name):
    result = CliRunner().invoke(main, ["info", str(CASES_DIR / name)], env={"TAXBREAK_NO_CACHE": "1"})
    assert result.exit_code == 0, result.output
    assert RECOVERABLE[name][1] in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("name", _HOSTILE_RECOVERABLE)
def test_the_parallel_path_drops_the_same_events(name):
    one = read_kineto(CASES_DIR / name, parse_workers=0)
    two = read_kineto(CASES_DIR / name, parse_workers=1)
    assert two.meta.event_counts == one.meta.event_counts
    assert {d.code: d.count for d in two.diagnostics.items.values()} == \
           {d.code: d.count for d in one.diagnostics.items.values()}


_ID_FIELDS = [("pid", None), ("tid", None), (None, "External id"), (None, "Sequence number"),
              (None, "Python id"), (None, "Python parent id")]
_KERNEL_ID_FIELDS = ["correlation", "External id", "device", "stream", "context", "registers per thread",
                     "shared memory", "bytes", "graph id", "graph node id"]


def _write(tmp_path, events, name="t.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"traceEvents": events}))
    return path


@pytest.mark.parametrize("value", [2**64, -(2**63) - 1, 1e300, "0x" + "f" * 17, "9" * 80])
@pytest.mark.parametrize("field", _ID_FIELDS)
def test_every_host_id_field_out_of_range_is_dropped_and_counted(tmp_path, field, value):
    top, arg = field
    bad = {**_GOOD, top: value} if top else {**_GOOD, "args": {arg: value}}
    tables = read_kineto(_write(tmp_path, [_GOOD, bad]))
    assert tables.diagnostics.count("event.id_out_of_range") == 1
    assert tables.host_events.num_rows == 1
    assert sum(tables.meta.event_counts.values()) == tables.meta.input_events == 2


@pytest.mark.parametrize("arg", [*_KERNEL_ID_FIELDS, "grid", "block"])
def test_every_kernel_id_field_out_of_range_is_dropped_and_counted(tmp_path, arg):
    kernel = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 3, "dur": 1,
              "args": {"correlation": 1, "grid": [1, 1, 1], "block": [1, 1, 1]}}
    value = [2**64, 1, 1] if arg in ("grid", "block") else 2**64
    bad = {**kernel, "args": {**kernel["args"], arg: value}}
    tables = read_kineto(_write(tmp_path, [kernel, bad]))
    assert tables.diagnostics.count("event.id_out_of_range") == 1
    assert tables.device_activities.num_rows == 1


def test_uint64_ids_still_wrap_to_twos_complement(tmp_path):
    tables = read_kineto(_write(tmp_path, [{**_GOOD, "tid": 2**64 - 1}]))
    assert tables.host_events.column("tid").to_pylist() == [-1]
    assert tables.diagnostics.count("event.id_out_of_range") == 0


def _bomb(tmp_path, body: bytes, name="bomb.json.gz") -> Path:
    path = tmp_path / name
    path.write_bytes(gzip.compress(body, compresslevel=9))
    return path


@pytest.fixture
def low_ratio_floor(monkeypatch):
    """The ratio counts from 64 MiB inflated; tests use bombs of a few MiB."""
    monkeypatch.setattr(B, "RATIO_FLOOR_BYTES", 1 << 20)


def test_gzip_bomb_of_spaces_stops_at_the_ratio(tmp_path, low_ratio_floor):
    path = _bomb(tmp_path, b'{"traceEvents":[' + b" " * (8 << 20) + b"]}")
    assert _code(path) == "gzip.ratio"
    with pytest.raises(TaxbreakError) as info:  # the whole-buffer path holds the same bound
        kineto._read_whole(path, False, False)
    assert info.value.code == "gzip.ratio"


def test_gzip_bomb_of_nul_bytes_is_a_bomb_not_invalid_json(tmp_path, low_ratio_floor):
    assert _code(_bomb(tmp_path, b"\0" * (8 << 20))) == "gzip.ratio"


def test_gzip_ratio_bound_is_raised_by_its_variable(tmp_path, low_ratio_floor, monkeypatch):
    path = _bomb(tmp_path, json.dumps({"traceEvents": [_GOOD]}).encode() + b" " * (8 << 20))
    monkeypatch.setenv(B.ENV_INFLATE_RATIO, "100000")
    assert read_kineto(path).host_events.num_rows == 1


def test_gzip_size_bound_and_its_variable(tmp_path, monkeypatch):
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(json.dumps({"traceEvents": [_GOOD] * 2000}).encode()))
    monkeypatch.setenv(B.ENV_INFLATED_BYTES, "50000")
    assert _code(path) == "gzip.too_large"
    with pytest.raises(TaxbreakError) as info:
        kineto._read_whole(path, False, False)
    assert info.value.code == "gzip.too_large"
    monkeypatch.setenv(B.ENV_INFLATED_BYTES, str(10 << 20))
    assert read_kineto(path).host_events.num_rows == 2000


def test_annotate_reader_holds_the_inflate_bounds(tmp_path, low_ratio_floor):
    with pytest.raises(TaxbreakError) as info:
        read_document(_bomb(tmp_path, b'{"traceEvents":[' + b" " * (8 << 20) + b"]}"))
    assert info.value.code == "gzip.ratio"


def test_one_event_longer_than_the_string_bound(tmp_path, monkeypatch):
    monkeypatch.setenv(B.ENV_STRING_BYTES, str(1 << 20))
    long_name = {**_GOOD, "name": "x" * (24 << 20)}
    assert _code(_write(tmp_path, [_GOOD, long_name])) == "json.too_long"
    monkeypatch.delenv(B.ENV_STRING_BYTES)
    assert read_kineto(_write(tmp_path, [_GOOD, long_name])).host_events.num_rows == 2


def test_nesting_bound_is_raised_by_its_variable(monkeypatch):
    monkeypatch.setenv(B.ENV_DEPTH, "3000")
    tables = read_kineto(CASES_DIR / "nesting_in_args.json")
    assert tables.host_events.num_rows == 2
    before = sys.getrecursionlimit()
    read_kineto(CASES_DIR / "nesting_in_args.json")
    assert sys.getrecursionlimit() == before  # restored after the read


def test_number_bounds_are_raised_by_their_variables(tmp_path, monkeypatch):
    monkeypatch.setenv(B.ENV_NUMBER_CHARS, "6000")
    tables = read_kineto(CASES_DIR / "ts_long_fraction.json")
    assert tables.host_events.column("start_ns").to_pylist() == [500, 0]  # 1.5 and 1.000... µs, origin 1 µs
    path = _with_text_ts(tmp_path, "1e-1500")
    assert read_kineto(path).diagnostics.count("event.number_out_of_range") == 1
    monkeypatch.setenv(B.ENV_NUMBER_EXPONENT, "2000")
    tables = read_kineto(path)
    assert tables.diagnostics.count("event.number_out_of_range") == 0
    assert tables.host_events.column("start_ns").to_pylist() == [0]


def _with_text_ts(folder: Path, ts_text: str) -> Path:
    path = folder / "ts.json"
    path.write_text('{"traceEvents":[{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":%s,"dur":1}]}'
                    % ts_text)
    return path


def test_span_bound_is_raised_by_its_variable(tmp_path, monkeypatch):
    path = _write(tmp_path, [_GOOD, {**_GOOD, "ts": 10, "dur": 10**14}])  # 10**14 µs: ~3 years
    assert read_kineto(path).diagnostics.count("event.number_out_of_range") == 1
    monkeypatch.setenv(B.ENV_SPAN_S, str(10**9))
    assert read_kineto(path).host_events.column("dur_ns").to_pylist() == [2000, 10**17]


def test_epoch_wrap_is_refused_not_wrapped():
    with pytest.raises(TaxbreakError) as info:
        read_kineto(CASES_DIR / "epoch_wrap.json")
    assert info.value.code == "kineto.time_range" and B.ENV_SPAN_S in info.value.hint


@pytest.mark.parametrize("name", sorted(n for n, (_, c) in CASES.items()
                                        if c in ("json.duplicate_key", "json.too_deep")))
def test_annotate_reader_refuses_what_the_reader_refuses(name):
    with pytest.raises(TaxbreakError) as info:
        read_document(CASES_DIR / name)
    assert info.value.code == CASES[name][1]


def test_duplicate_key_names_the_key():
    with pytest.raises(TaxbreakError) as info:
        read_kineto(CASES_DIR / "duplicate_key_before_events.json")
    assert "'traceName' appears twice" in info.value.message


def test_unrecognised_file_content_is_never_printed(tmp_path):
    secret = tmp_path / "environ"
    secret.write_bytes(b"API_TOKEN=hunter2\0HOME=/root\0")
    link = tmp_path / "trace.json"
    os.symlink(secret, link)
    result = CliRunner().invoke(main, ["info", str(link)], env={"TAXBREAK_NO_CACHE": "1"})
    assert result.exit_code == 1 and result.output.startswith("error[format.unknown]")
    assert "API_TOKEN" not in result.output and "hunter2" not in result.output


@pytest.mark.parametrize("text", [b"1." + b"0" * 42, b"0." + b"0" * 60 + b"1", b"0" * 50 + b"12.125"])
def test_long_number_texts_are_read_exactly_not_by_the_decimal_cast(text, monkeypatch):
    # Arrow's string -> decimal128 cast returns 0 for the first text; the reader never asks it
    from decimal import Decimal

    from taxbreak.readers import kineto_text as T

    monkeypatch.setenv(B.ENV_NUMBER_CHARS, "100")
    ns, state = T.us_text_to_ns([b"1.5", text], B.current())
    assert state.tolist() == [T.OK, T.OK]
    assert ns.tolist() == [1500, int(Decimal(text.decode()) * 1000)]


_MANTISSA = st.one_of(st.integers(-(10**30), 10**30).map(str),
                      st.decimals(allow_nan=False, allow_infinity=False, places=6).map(str))
_HOSTILE_NUMBER = st.one_of(
    st.builds(lambda m, e, big: f"{m}{big}{e}".encode(), _MANTISSA, st.integers(-(10**9), 10**9),
              st.sampled_from(["e", "E", "e+", "E-"])),
    st.integers(1, 300).map(lambda n: b"9" * n),
    st.integers(1, 300).map(lambda n: b"0." + b"0" * n + b"7"),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(_HOSTILE_NUMBER, st.sampled_from([b"1.5", b"", b"12"])), min_size=1, max_size=12))
def test_any_number_text_converts_or_is_out_of_range_never_raises(texts):
    from taxbreak.readers import kineto_text as T

    ns, state = T.us_text_to_ns(texts)
    reference = [T._one_us_text_to_ns(t) for t in texts]
    assert state.tolist() == [s for _, s in reference]
    assert ns.tolist() == [v for v, _ in reference]
    assert set(state.tolist()) <= {T.OK, T.MISSING, T.OUT_OF_RANGE, T.WRONG_TYPE}


_KEYS = st.lists(st.sampled_from(["traceEvents", "traceName", "deviceProperties", "a", "tr\\u0061ceName"]),
                 min_size=0, max_size=6)


@settings(max_examples=150, deadline=None)
@given(_KEYS, st.sampled_from(["", " ", "\n  "]))
def test_duplicate_keys_are_found_exactly_when_present(keys, space):
    import msgspec

    from taxbreak.readers.kineto_keys import DuplicateKey, object_members

    text = "{" + ",".join(f'{space}"{k}"{space}:{space}[{i}, {{"k": "{k}"}}]' for i, k in enumerate(keys)) + space + "}"
    decoded = [msgspec.json.decode(f'"{k}"'.encode()) for k in keys]
    if len(set(decoded)) < len(decoded):
        with pytest.raises(DuplicateKey):
            object_members(text.encode())
    else:
        assert sorted(object_members(text.encode())) == sorted(decoded)


def test_a_fifo_is_refused_unread(tmp_path):
    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)  # opening it for reading would block until a writer comes
    result = CliRunner().invoke(main, ["info", str(fifo)], env={"TAXBREAK_NO_CACHE": "1"})
    assert result.exit_code == 1 and result.output.startswith("error[input.unreadable]")
    assert "FIFO" in result.output


def _assert_one_error_line(result, code: str) -> None:
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert lines[0].startswith(f"error[{code}]: ") and len(lines) == 2 and lines[1].startswith("  hint: ")
    assert "Traceback" not in result.output


def test_bound_errors_through_the_cli(tmp_path, low_ratio_floor):
    bomb = _bomb(tmp_path, b'{"traceEvents":[' + b" " * (8 << 20) + b"]}")
    env = {"TAXBREAK_NO_CACHE": "1"}
    result = CliRunner().invoke(main, ["info", str(bomb)], env=env)
    _assert_one_error_line(result, "gzip.ratio")
    assert result.output.startswith(f"error[gzip.ratio]: {bomb}: ")
    big = tmp_path / "big.json.gz"
    big.write_bytes(gzip.compress(json.dumps({"traceEvents": [_GOOD] * 2000}).encode()))
    result = CliRunner().invoke(main, ["analyze", str(big)], env={**env, B.ENV_INFLATED_BYTES: "50000"})
    _assert_one_error_line(result, "gzip.too_large")
    assert B.ENV_INFLATED_BYTES in result.output
    long_event = _write(tmp_path, [_GOOD, {**_GOOD, "name": "x" * (24 << 20)}])
    result = CliRunner().invoke(main, ["info", str(long_event)], env={**env, B.ENV_STRING_BYTES: str(1 << 20)})
    _assert_one_error_line(result, "json.too_long")
    assert result.output.startswith(f"error[json.too_long]: {long_event}: ")


def _spaces_bomb(path: Path, inflated_mib: int) -> None:
    """``{"traceEvents":[`` + spaces + ``]}`` gzip-compressed in pieces (~1,000x: a few hundred KB)."""
    import zlib

    deflate = zlib.compressobj(1, zlib.DEFLATED, 31)
    spaces = b" " * (1 << 20)
    with path.open("wb") as fh:
        fh.write(deflate.compress(b'{"traceEvents":['))
        for _ in range(inflated_mib):
            fh.write(deflate.compress(spaces))
        fh.write(deflate.compress(b"]}") + deflate.flush())


def test_a_gzip_bomb_is_stopped_with_bounded_memory_at_the_default_bounds(tmp_path):
    import subprocess

    bomb = tmp_path / "bomb.json.gz"
    _spaces_bomb(bomb, 768)  # 768 MiB inflated from well under 1 MB
    # VmHWM, not ru_maxrss: the latter carries the parent's high-water mark across fork + exec,
    # so a large pytest process (1 GB late in the suite) would be measured instead of the child.
    child = ("import re, sys\nfrom taxbreak.readers.kineto import read_kineto\n"
             "try:\n    read_kineto(sys.argv[1])\nexcept Exception as err:\n    print(err.code)\n"
             "status = open('/proc/self/status').read()\n"
             "print(re.search(r'VmHWM:\\s+(\\d+) kB', status).group(1))\n")
    run = subprocess.run([sys.executable, "-c", child, str(bomb)], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
    code, peak_kib = run.stdout.split()
    assert code == "gzip.ratio"
    assert int(peak_kib) < 400 * 1024  # stopped near the 64 MiB floor, never near the 768 MiB
