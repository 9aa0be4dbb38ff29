"""What ``analyze`` keeps in memory: a path's tables are let go once the views are built and read back
on first access; tables handed in, or read with the parse cache off, stay as they are."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from taxbreak.decompose import analyze
from taxbreak.readers import load_trace
from taxbreak.readers.cache import wait_for_writes
from taxbreak.synth.bigtrace import write_big_kineto
from taxbreak.synth.planted import arrow_table, build, random_spec
from taxbreak.trace.schema import TABLE_NAMES
from taxbreak.trace.tables import DeferredTraceTables, TraceTables, write_parquet


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    path = tmp_path_factory.mktemp("release") / "rank0.json.gz"
    write_big_kineto(path, 2000, seed=3)
    return path


def test_a_path_releases_its_tables_and_reads_them_back_equal(trace):
    result = analyze(trace)
    assert isinstance(result.tables, DeferredTraceTables)
    assert result.tables._loaded is None  # nothing read back until asked
    fresh = load_trace(trace, use_cache=False)
    assert result.tables.meta.input_events == fresh.meta.input_events > 0
    for name in TABLE_NAMES:
        assert result.tables.table(name).equals(fresh.table(name)), name
    assert result.tables.meta.event_counts == fresh.meta.event_counts


def test_meta_and_diagnostics_need_no_read_back(trace):
    result = analyze(trace)
    assert result.tables.meta.source_format == "kineto"
    assert result.tables.diagnostics.as_dict() == load_trace(trace, use_cache=False).diagnostics.as_dict()
    assert result.tables._loaded is None


def test_without_the_parse_cache_the_tables_stay(trace, monkeypatch):
    monkeypatch.setenv("TAXBREAK_NO_CACHE", "1")
    result = analyze(trace)
    assert type(result.tables) is TraceTables
    assert result.tables.host_events.num_rows == load_trace(trace, use_cache=False).host_events.num_rows


def test_tables_handed_in_are_kept_as_given():
    tables = build(random_spec(np.random.default_rng(5))).tables
    assert analyze(tables).tables is tables


def test_released_and_kept_tables_give_the_same_analysis(trace, monkeypatch):
    released = analyze(trace)
    monkeypatch.setenv("TAXBREAK_NO_CACHE", "1")
    kept = analyze(trace)
    for name in ("kernels", "steps", "phases", "ops", "host_partition"):
        assert getattr(released, name).equals(getattr(kept, name)), name
    assert released.to_json() == kept.to_json()


def test_write_parquet_lets_go_of_each_table_once_written(tmp_path):
    tables = build(random_spec(np.random.default_rng(6))).tables
    handed = {name: tables.table(name) for name in TABLE_NAMES}
    written = write_parquet(handed, tables.meta_json(), tmp_path)
    assert handed == {}
    assert [p.name for p in written] == [f"{n}.parquet" for n in TABLE_NAMES] + ["trace_meta.json"]
    back = TraceTables.from_parquet(tmp_path)
    for name in TABLE_NAMES:
        assert back.table(name).equals(tables.table(name)), name


def test_kernel_names_exclude_the_names_of_sync_rows():
    """The device view encodes the names of its work rows only: a sync row's name is no kernel category."""
    tables = build(random_spec(np.random.default_rng(7))).tables
    dev = tables.device_activities.to_pandas()
    sync = dev.iloc[:1].copy()
    sync["kind"], sync["name"], sync["row_id"], sync["correlation"] = "sync", "Stream Sync", 10_000, -1
    tables.device_activities = arrow_table(pd.concat([dev, sync], ignore_index=True), "device_activities")
    kernels = analyze(tables).kernels
    assert len(kernels) == len(dev)
    assert "Stream Sync" not in set(kernels["name"].cat.categories)
    assert set(kernels["name"].cat.categories) == set(dev["name"])


def test_background_parse_cache_write_is_complete(trace):
    analyze(trace)
    wait_for_writes()
    again = load_trace(trace)  # served from the entry written while the decomposition ran
    assert again.host_events.equals(load_trace(trace, use_cache=False).host_events)
    assert isinstance(again.flows, pa.Table)
