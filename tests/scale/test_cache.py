"""The Parquet parse cache: hits, misses, corrupt entries, concurrent writers, size cap."""
from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import pyarrow as pa
import pytest

from taxbreak.readers import cache
from taxbreak.trace.schema import SCHEMAS
from taxbreak.trace.tables import TraceMeta, TraceTables


def _tables(path: Path) -> TraceTables:
    """Three planted kernels; the content does not matter, only the round trip."""
    n = 3
    cols = {f.name: pa.array([i for i in range(n)], type=pa.int64()) for f in SCHEMAS["device_activities"]
            if pa.types.is_integer(f.type)}
    cols["kind"] = pa.array(["kernel"] * n).dictionary_encode().cast(SCHEMAS["device_activities"].field("kind").type)
    cols["name"] = pa.array(["gemm", "softmax", "gemm"])
    device = pa.table({f.name: cols[f.name] for f in SCHEMAS["device_activities"]})
    tables = TraceTables(device_activities=device, meta=TraceMeta(source_format="kineto", path=str(path), rank=3))
    tables.validate()
    tables.diagnostics.add("event.instant", 2, "planted")
    return tables


class CountingParse:
    def __init__(self):
        self.calls = 0

    def __call__(self, path: Path) -> TraceTables:
        self.calls += 1
        return _tables(path)


@pytest.fixture
def trace(tmp_path) -> Path:
    path = tmp_path / "rank0.json"
    path.write_text('{"traceEvents": []}')
    return path


def test_second_load_is_served_from_the_cache_and_equal(trace):
    parse = CountingParse()
    first = cache.cached_load(trace, parse)
    second = cache.cached_load(trace, parse)
    assert parse.calls == 1
    assert second.device_activities.equals(first.device_activities)
    assert second.meta == first.meta
    assert second.diagnostics.as_dict() == first.diagnostics.as_dict()
    assert cache.cache_stats().entries == 1


def test_entry_is_written_in_the_background_and_waited_for(trace):
    cache.cached_load(trace, CountingParse())
    cache.wait_for_writes()
    entry = cache.parse_cache_dir() / cache.cache_key(trace)
    assert (entry / cache.ENTRY_FILE).is_file()
    assert not [p for p in cache.parse_cache_dir().iterdir() if p.name.startswith(".tmp-")]


def test_changed_file_or_variant_misses(trace):
    parse = CountingParse()
    cache.cached_load(trace, parse)
    cache.cached_load(trace, parse, variant="allow_truncated")
    assert parse.calls == 2
    st = trace.stat()
    os.utime(trace, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    cache.cached_load(trace, parse)
    assert parse.calls == 3


def test_key_includes_tool_and_reader_versions(trace, monkeypatch):
    key = cache.cache_key(trace)
    monkeypatch.setattr(cache, "READER_FORMAT_VERSION", cache.READER_FORMAT_VERSION + 1)
    assert cache.cache_key(trace) != key
    monkeypatch.setattr(cache, "__version__", "99.0")
    assert cache.cache_key(trace) != key


def test_key_follows_the_reader_source(trace, tmp_path, monkeypatch):
    # an edited checkout: a reader module changed without a READER_FORMAT_VERSION bump
    package = tmp_path / "pkg"
    (package / "readers").mkdir(parents=True)
    (package / "trace").mkdir()
    module = package / "readers" / "kineto.py"
    module.write_text("x = 1\n")
    monkeypatch.setattr(cache, "_PACKAGE", package)
    key = cache.cache_key(trace)
    assert cache.cache_key(trace) == key
    module.write_text("x = 22\n")
    assert cache.cache_key(trace) != key
    assert cache.code_fingerprint("readers") == [["readers/kineto.py", 7, module.stat().st_mtime_ns]]


def test_use_cache_false_neither_reads_nor_writes(trace):
    parse = CountingParse()
    cache.cached_load(trace, parse, use_cache=False)
    cache.cached_load(trace, parse, use_cache=False)
    assert parse.calls == 2
    assert cache.cache_stats().entries == 0


def test_missing_path_goes_to_the_parser(tmp_path):
    seen = []
    cache.cached_load(tmp_path / "absent.json", lambda p: seen.append(p) or TraceTables())
    assert seen == [tmp_path / "absent.json"]


@pytest.mark.parametrize("damage", ["truncate_table", "bad_meta_json", "delete_table"])
def test_corrupt_entry_is_rebuilt_with_a_diagnostic(trace, damage):
    parse = CountingParse()
    cache.cached_load(trace, parse)
    cache.wait_for_writes()
    entry = cache.parse_cache_dir() / cache.cache_key(trace)
    if damage == "truncate_table":
        target = entry / "device_activities.arrow"
        target.write_bytes(target.read_bytes()[:20])
    elif damage == "bad_meta_json":
        (entry / "trace_meta.json").write_text("{not json")
    else:
        (entry / "host_events.arrow").unlink()
    rebuilt = cache.cached_load(trace, parse)
    assert parse.calls == 2
    assert rebuilt.diagnostics.count("cache.corrupt_entry") == 1
    assert rebuilt.device_activities.num_rows == 3
    again = cache.cached_load(trace, parse)  # the rebuilt entry is clean and serves the next load
    assert parse.calls == 2 and again.diagnostics.count("cache.corrupt_entry") == 0


def _store_once(args):
    trace, cache_root = args
    os.environ["TAXBREAK_CACHE_DIR"] = cache_root
    tables = cache.cached_load(Path(trace), _tables)
    cache.wait_for_writes()
    return tables.device_activities.num_rows


def test_concurrent_writers_leave_one_complete_entry(trace):
    root = os.environ["TAXBREAK_CACHE_DIR"]
    with ProcessPoolExecutor(4, mp_context=get_context("spawn")) as pool:
        rows = list(pool.map(_store_once, [(str(trace), root)] * 8))
    assert rows == [3] * 8
    entries = list(cache.parse_cache_dir().iterdir())
    assert [e.name for e in entries] == [cache.cache_key(trace)]  # no temp folder left behind
    assert cache.cached_load(trace, CountingParse()).meta.rank == 3


def test_size_cap_evicts_least_recently_used(tmp_path, monkeypatch):
    paths = []
    for i in range(3):
        p = tmp_path / f"r{i}.json"
        p.write_text(str(i))
        paths.append(p)
        cache.cached_load(p, _tables)
    cache.wait_for_writes()
    one_entry = cache.cache_stats().size_bytes // 3
    monkeypatch.setenv("TAXBREAK_CACHE_MAX_BYTES", str(int(one_entry * 2.5)))
    os.utime(cache.parse_cache_dir() / cache.cache_key(paths[0]) / cache.ENTRY_FILE, (1, 1))  # oldest use
    fourth = tmp_path / "r3.json"
    fourth.write_text("3")
    cache.cached_load(fourth, _tables)
    cache.wait_for_writes()
    names = {e.name for e in cache.parse_cache_dir().iterdir()}
    assert cache.cache_key(paths[0]) not in names
    assert cache.cache_key(fourth) in names
    assert cache.cache_stats().entries == 2


def test_zero_cap_disables_writes(trace, monkeypatch):
    monkeypatch.setenv("TAXBREAK_CACHE_MAX_BYTES", "0")
    cache.cached_load(trace, _tables)
    cache.wait_for_writes()
    assert cache.cache_stats().entries == 0


def test_clear_cache_removes_entries_and_reports_them(trace):
    cache.cached_load(trace, _tables)
    cache.wait_for_writes()
    removed = cache.clear_cache()
    assert removed.entries == 1 and removed.size_bytes > 0
    assert cache.cache_stats().entries == 0


def test_environment_switch_turns_the_cache_off(trace, monkeypatch):
    monkeypatch.setenv("TAXBREAK_NO_CACHE", "1")
    parse = CountingParse()
    cache.cached_load(trace, parse)
    cache.cached_load(trace, parse)
    assert parse.calls == 2 and cache.cache_stats().entries == 0
    cache.cached_load(trace, parse, use_cache=True)  # an explicit argument wins
    cache.wait_for_writes()
    assert cache.cache_stats().entries == 1


def test_cache_cli_info_and_clear(trace):
    from click.testing import CliRunner

    from taxbreak.cli.main import main

    cache.cached_load(trace, _tables)
    cache.wait_for_writes()
    runner = CliRunner()
    shown = runner.invoke(main, ["cache", "info"])
    assert shown.exit_code == 0 and "1 entries" in shown.output
    cleared = runner.invoke(main, ["cache", "clear"])
    assert cleared.exit_code == 0 and "removed 1 entries" in cleared.output
    assert cache.cache_stats().entries == 0
