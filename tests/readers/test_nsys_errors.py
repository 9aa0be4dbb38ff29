"""The Nsight reader on malformed input, damaged bytes and .nsys-rep files.

Exports come from ``write_export`` in test_nsys_planted.py.
"""
from __future__ import annotations

import os
import sqlite3
import stat
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from taxbreak.readers.nsys import read_nsys, read_nsys_rep
from taxbreak.trace.errors import (
    ERROR_CODES,
    TaxbreakError,
    ToolMissingError,
    TraceFormatError,
    TraceNotFoundError,
    UnsupportedFormatError,
)

try:  # tests/readers may or may not become a package
    from .test_nsys_planted import make_table, write_export
except ImportError:
    from test_nsys_planted import make_table, write_export


# --- malformed input ------------------------------------------------------------------


def _raises(path, error_type, code):
    with pytest.raises(error_type) as info:
        read_nsys(path)
    assert info.value.code == code and code in ERROR_CODES
    assert info.value.path == str(path)
    return info.value


def test_missing_and_empty_files(tmp_path):
    _raises(tmp_path / "nope.sqlite", TraceNotFoundError, "input.not_found")
    (tmp_path / "empty.sqlite").write_bytes(b"")
    _raises(tmp_path / "empty.sqlite", TraceNotFoundError, "input.empty")


def test_not_sqlite(tmp_path):
    (tmp_path / "x.sqlite").write_text('{"traceEvents": []}')
    err = _raises(tmp_path / "x.sqlite", UnsupportedFormatError, "nsys.not_an_export")
    assert "nsys export --type sqlite" in err.hint


def test_sqlite_without_nsys_tables(tmp_path):
    path = tmp_path / "other.sqlite"
    con = sqlite3.connect(path)
    make_table(con, "users", "id INTEGER, name TEXT", [(1, "a")])
    con.commit()
    con.close()
    err = _raises(path, UnsupportedFormatError, "nsys.not_an_export")
    assert "nsys export --type sqlite" in err.hint


@pytest.mark.parametrize("keep_fraction", [0.05, 0.5, 0.95])
def test_truncated_export(tmp_path, keep_fraction):
    data = write_export(tmp_path / "full.sqlite").read_bytes()
    path = tmp_path / "cut.sqlite"
    path.write_bytes(data[: int(len(data) * keep_fraction)])
    err = _raises(path, TraceFormatError, "nsys.corrupt")
    assert err.hint


def test_wrong_value_types_do_not_crash(tmp_path):
    path = write_export(tmp_path / "types.sqlite")
    con = sqlite3.connect(path)
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET correlationId = 'abc', start = 1.5e3 WHERE nameId = 3")
    con.execute("UPDATE NVTX_EVENTS SET textId = 'zzz' WHERE textId = 14")
    con.commit()
    con.close()
    tables = read_nsys(path)
    row = tables.api_calls.to_pandas().query("api_name == 'cuLaunchKernelEx'").iloc[0]
    assert (row.start_ns, row.correlation) == (1500, 0)  # SQLite CAST semantics
    assert tables.diagnostics.count("nsys.unresolved_string") == 1  # textId 'zzz' -> 0, not in StringIds
    assert None in tables.ranges.column("name").to_pylist()
    assert sum(tables.meta.event_counts.values()) == tables.meta.input_events


def test_invalid_utf8_is_replaced_and_counted(tmp_path):
    path = write_export(tmp_path / "utf.sqlite")
    con = sqlite3.connect(path)
    con.execute("UPDATE StringIds SET value = CAST(X'67656D6DFF' AS TEXT) WHERE id = 12")
    con.commit()
    con.close()
    tables = read_nsys(path)
    assert tables.diagnostics.count("nsys.invalid_utf8") == 1
    assert tables.device_activities.num_rows == 7


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_damaged_bytes_give_tables_or_a_typed_error(tmp_path_factory, data):
    base = _cached_export(tmp_path_factory)
    raw = bytearray(base.read_bytes())
    for _ in range(data.draw(st.integers(1, 20))):
        raw[data.draw(st.integers(100, len(raw) - 1))] = data.draw(st.integers(0, 255))
    path = tmp_path_factory.mktemp("fuzz") / "damaged.sqlite"
    path.write_bytes(bytes(raw))
    try:
        tables = read_nsys(path)
    except TaxbreakError as exc:
        assert exc.code in ERROR_CODES
    else:
        assert sum(tables.meta.event_counts.values()) == tables.meta.input_events


_EXPORT_CACHE: dict[str, Path] = {}


def _cached_export(factory) -> Path:
    if "base" not in _EXPORT_CACHE:
        _EXPORT_CACHE["base"] = write_export(factory.mktemp("base") / "base.sqlite")
    return _EXPORT_CACHE["base"]


# --- .nsys-rep --------------------------------------------------------------------------


def test_rep_without_nsys_on_path(tmp_path, monkeypatch):
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"not read without nsys")
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    with pytest.raises(ToolMissingError) as info:
        read_nsys_rep(rep)
    assert info.value.code == "nsys.not_installed"
    assert "nsys" in info.value.hint and "PATH" in info.value.hint


FAKE_NSYS = """#!{python}
import sqlite3, sys
args = sys.argv[1:]
open({log!r}, "w").write(" ".join(args))
if {fail!r}:
    sys.stderr.write("Error: report is from a newer version\\n")
    sys.exit(3)
out = args[args.index("--output") + 1]
src = sqlite3.connect({src!r})
dst = sqlite3.connect(out)
src.backup(dst)
dst.close()
"""


def _fake_nsys(tmp_path, monkeypatch, fail: bool) -> Path:
    """A script named nsys, first on PATH, that writes a real export on `nsys export`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "nsys-args.txt"
    src = write_export(tmp_path / "source.sqlite")
    script = bin_dir / "nsys"
    script.write_text(FAKE_NSYS.format(python=sys.executable, log=str(log), fail=fail, src=str(src)))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    return log


def test_rep_is_exported_with_nsys_then_read(tmp_path, monkeypatch):
    log = _fake_nsys(tmp_path, monkeypatch, fail=False)
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"binary report")
    tables = read_nsys_rep(rep)
    args = log.read_text().split()
    assert args[:4] == ["export", "--type", "sqlite", "--output"]
    assert args[-1] == str(rep)
    assert tables.api_calls.num_rows == 11 and tables.host_events.num_rows == 5
    assert tables.meta.path == str(rep)
    assert not Path(args[4]).exists()  # the temporary export is removed


def test_rep_export_failure(tmp_path, monkeypatch):
    _fake_nsys(tmp_path, monkeypatch, fail=True)
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"binary report")
    with pytest.raises(TraceFormatError) as info:
        read_nsys_rep(rep)
    assert info.value.code == "nsys.export_failed"
    assert "newer version" in info.value.message
