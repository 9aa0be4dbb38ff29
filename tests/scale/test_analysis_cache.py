"""The analysis cache: a second analyze of the same trace is read back, equal to the first."""
from __future__ import annotations

import json
import pickle

import pandas as pd
import pandas.testing as pdt
import pytest

from taxbreak.readers import load_trace
from taxbreak.readers.cache import cache_stats, clear_cache, deferred_writes, wait_for_writes
from taxbreak.scale import analysis_cache
from taxbreak.scale.analysis_cache import FRAMES, analysis_cache_dir, analysis_key, cached_analyze
from taxbreak.synth.bigtrace import write_big_kineto
from taxbreak.trace.errors import TaxbreakError
from taxbreak.trace.tables import DeferredTraceTables


@pytest.fixture(scope="module")
def small_trace(tmp_path_factory):
    path = tmp_path_factory.mktemp("small") / "rank0.json.gz"
    write_big_kineto(path, 3000, seed=1)
    return path


def _assert_same(a, b):
    for name in FRAMES:
        left, right = getattr(a, name), getattr(b, name)
        assert list(left.columns) == list(right.columns), name
        for col in left.columns:
            x, y = left[col], right[col]
            if isinstance(x.dtype, pd.CategoricalDtype):
                # Parquet gives categories of dtype str where pandas built object: same values
                assert isinstance(y.dtype, pd.CategoricalDtype), (name, col)
                x, y = x.astype(object), y.astype(object)
            pdt.assert_series_equal(x, y, obj=f"{name}.{col}")
    assert json.loads(a.to_json()) == b.summary


def test_second_analyze_is_read_back_and_equal(small_trace, monkeypatch):
    first = cached_analyze(small_trace)
    calls = []
    monkeypatch.setattr(analysis_cache, "analyze", lambda *a, **k: calls.append(a))
    second = cached_analyze(small_trace)
    assert calls == []  # served from the cache
    _assert_same(first, second)
    assert second.tables.device_activities.num_rows == first.tables.device_activities.num_rows


def test_a_hit_reads_tables_only_when_touched(small_trace, monkeypatch):
    first = cached_analyze(small_trace)
    loads = []
    monkeypatch.setattr(analysis_cache, "load_trace", lambda path: loads.append(path) or load_trace(path))
    second = cached_analyze(small_trace)
    assert isinstance(second.tables, DeferredTraceTables)
    assert second.tables.meta == first.tables.meta  # the report's needs, with no table read
    assert second.tables.diagnostics.as_dict() == first.tables.diagnostics.as_dict()
    assert loads == []
    for name in ("host_events", "api_calls", "device_activities", "ranges", "flows"):
        assert second.tables.table(name).equals(first.tables.table(name)), name
    assert loads == [small_trace]  # loaded once, on first touch


def test_a_hit_pickles(small_trace):
    cached_analyze(small_trace)
    hit = cached_analyze(small_trace)
    again = pickle.loads(pickle.dumps(hit))  # e.g. joblib or a process pool in a notebook
    assert again.tables.meta == hit.tables.meta
    assert again.tables.host_events.num_rows == hit.tables.host_events.num_rows > 0


def test_options_are_part_of_the_key(small_trace):
    base = analysis_key(small_trace, None, None, None)
    assert analysis_key(small_trace, 5.0, None, None) != base
    assert analysis_key(small_trace, None, r"taxbreak/(?P<phase>\w+)/\d+", None) != base
    assert analysis_key(small_trace, None, None, 64) != base
    with_floor = cached_analyze(small_trace, floor_us=7.0)
    assert with_floor.summary["all"]["floor_us"] == 7.0
    assert cached_analyze(small_trace, floor_us=7.0).summary["all"]["floor_us"] == 7.0
    assert cached_analyze(small_trace).summary["all"]["floor_us"] != 7.0


def test_no_cache_writes_nothing(small_trace):
    clear_cache()
    result = cached_analyze(small_trace, use_cache=False)
    assert result.summary["all"]["kernels"] > 0
    assert cache_stats().entries == 0


def test_corrupt_entry_is_recomputed_with_a_diagnostic(small_trace):
    first = cached_analyze(small_trace)
    wait_for_writes()  # the entry is written in the background
    entry = analysis_cache_dir() / analysis_key(small_trace, None, None, None)
    (entry / "ops.arrow").write_bytes(b"ARROW1 not really")  # read at the hit itself
    again = cached_analyze(small_trace)
    assert again.tables.diagnostics.count("cache.corrupt_entry") == 1
    _assert_same(first, again)


def test_tables_and_missing_paths_go_straight_to_analyze(small_trace, tmp_path):
    result = cached_analyze(load_trace(small_trace))
    assert result.summary["all"]["kernels"] > 0
    from taxbreak.trace.errors import TaxbreakError

    with pytest.raises(TaxbreakError) as info:
        cached_analyze(tmp_path / "absent.json")
    assert info.value.code == "input.not_found"


def test_background_write_is_a_snapshot(tmp_path):
    """The entry is written after cached_analyze returns: changing the returned
    frames at once must not change what a later hit reads back."""
    path = tmp_path / "rank0.json.gz"
    write_big_kineto(path, 2000, seed=3)
    first = cached_analyze(path)
    expected = analysis_cache.analyze(path)
    first.kernels["dur_ns"] = -1
    first.summary["all"]["kernels"] = -1
    wait_for_writes()
    again = cached_analyze(path)
    _assert_same(expected, again)
    assert again.kernels["dur_ns"].min() >= 0


def test_report_frames_only_are_read_at_a_hit(small_trace, monkeypatch):
    first = cached_analyze(small_trace)
    wait_for_writes()
    read = []
    original = analysis_cache._read_frame
    monkeypatch.setattr(analysis_cache, "_read_frame",
                        lambda entry, name, table=None: read.append(name) or original(entry, name, table))
    second = cached_analyze(small_trace)
    assert read == []  # the summary only: a JSON output needs no frame (ops is checked as Arrow)
    second.ops
    second.kernels
    second.kernels
    assert read == ["ops", "kernels"]  # made once, on first access
    _assert_same(first, second)


def test_a_deferred_frame_whose_entry_vanished_is_computed_again(tmp_path):
    path = tmp_path / "rank0.json.gz"
    write_big_kineto(path, 2000, seed=4)
    first = cached_analyze(path)
    wait_for_writes()
    second = cached_analyze(path)
    clear_cache()  # e.g. `taxbreak cache clear` in another shell, before the frame is read
    _assert_same(first, second)
    assert second.tables.diagnostics.count("cache.corrupt_entry") == 1  # analyzed again once, for all frames


def test_a_vanished_entry_of_a_changed_trace_is_an_error(tmp_path):
    path = tmp_path / "rank0.json.gz"
    write_big_kineto(path, 2000, seed=5)
    cached_analyze(path)
    wait_for_writes()
    second = cached_analyze(path)
    clear_cache()
    write_big_kineto(path, 2500, seed=6)  # the trace changed too: its frames would not match the summary
    with pytest.raises(TaxbreakError) as err:
        second.kernels
    assert err.value.code == "cache.corrupt"


def test_a_held_write_waits_for_the_end_of_deferred_writes(tmp_path):
    """The CLI holds the analysis cache's write until its output is out; the entry is then the
    same as one written at once, and a second analysis inside the block still gets a hit."""
    path = tmp_path / "rank0.json.gz"
    write_big_kineto(path, 2000, seed=7)
    entry = analysis_cache_dir() / analysis_key(path, None, None, None)
    with deferred_writes():
        first = cached_analyze(path)
        assert not entry.exists()  # held: nothing written while the block runs
        again = cached_analyze(path)  # waits for the held write: starts it, then reads it back
        assert isinstance(again, analysis_cache.CachedAnalysis)
    wait_for_writes()
    _assert_same(first, cached_analyze(path))
    _assert_same(first, again)


def test_a_write_held_to_the_end_of_the_block_is_written_there(tmp_path):
    path = tmp_path / "rank0.json.gz"
    write_big_kineto(path, 2000, seed=8)
    entry = analysis_cache_dir() / analysis_key(path, None, None, None)
    with deferred_writes():
        first = cached_analyze(path)
        assert not entry.exists()
    wait_for_writes()
    assert (entry / "kernels.arrow").is_file()
    _assert_same(first, cached_analyze(path))
