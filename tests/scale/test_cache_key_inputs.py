"""Every input that decides a result is in the cache key; entries someone else wrote are not trusted
(docs/reliability.md, "Cache")."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from taxbreak.cli.main import main
from taxbreak.readers import cache
from taxbreak.scale.analysis_cache import analysis_key
from taxbreak.synth.bigtrace import write_big_kineto

NOBODY = 65534


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("TAXBREAK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TAXBREAK_NO_CACHE", raising=False)
    for name in list(os.environ):
        if name.startswith(cache.BOUND_PREFIXES):
            monkeypatch.delenv(name)
    return tmp_path / "cache"


def kernels(target, *extra) -> int:
    result = CliRunner().invoke(main, ["analyze", str(target), "--json", *extra])
    assert result.exit_code == 0, result.output
    cache.wait_for_writes()
    return json.loads(result.stdout)["all"]["kernels"]


def test_a_run_folder_whose_manifest_names_its_trace_sees_the_trace_change(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    named = run_dir / "worker0.1712.pt.trace.json"  # the layout trace_handler writes
    (run_dir / "manifest.json").write_text(json.dumps({"trace": named.name}))
    write_big_kineto(named, 300, seed=1, gzip=False)
    first = kernels(run_dir)
    write_big_kineto(named, 1500, seed=1, gzip=False)
    assert kernels(run_dir) == kernels(run_dir, "--no-cache") != first


def test_the_reader_bounds_are_in_both_keys(tmp_path, monkeypatch):
    trace = write_big_kineto(tmp_path / "t.json", 300, seed=1, gzip=False).path
    keys = (cache.cache_key(trace), analysis_key(trace, None, None, None))
    for name in ("TAXBREAK_MAX_SPAN_S", "TAXBREAK_MAX_STRING_BYTES", "TAXBREAK_NSYS_MAX_STRING_BYTES"):
        monkeypatch.setenv(name, "1000")
        changed = (cache.cache_key(trace), analysis_key(trace, None, None, None))
        assert changed[0] != keys[0] and changed[1] != keys[1], name
        monkeypatch.delenv(name)
    assert (cache.cache_key(trace), analysis_key(trace, None, None, None)) == keys


def test_a_lowered_bound_is_not_served_a_result_read_under_the_default(tmp_path, monkeypatch):
    trace = write_big_kineto(tmp_path / "t.json", 300, seed=1, gzip=False).path
    assert kernels(trace) > 0  # cached under the default bounds
    monkeypatch.setenv("TAXBREAK_MAX_SPAN_S", "0.000001")  # far below the trace's span
    result = CliRunner().invoke(main, ["analyze", str(trace), "--json"])
    assert result.exit_code == 1 and "error[kineto.time_range]" in result.stderr, result.output


def _chown_tree(folder: Path, uid: int) -> None:
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            os.lchown(os.path.join(root, name), uid, uid)
    os.lchown(folder, uid, uid)


@pytest.mark.skipif(os.geteuid() != 0, reason="handing a cache entry to another user needs root")
def test_entries_owned_by_another_user_are_neither_read_nor_counted_nor_removed(tmp_path, cache_dir):
    trace = write_big_kineto(tmp_path / "t.json", 300, seed=1, gzip=False).path
    honest = kernels(trace)
    entries = [e for root in cache.cache_roots() for e in root.iterdir() if cache.is_entry(e)]
    assert len(entries) == 2  # one parse entry, one analysis entry
    analysis_entry = next(e for e in entries if e.parent.name == "analysis")
    forged = json.loads((analysis_entry / "summary.json").read_text())
    forged["all"]["kernels"] = 999_999
    (analysis_entry / "summary.json").write_text(json.dumps(forged))
    for entry in entries:
        _chown_tree(entry, NOBODY)  # as if `nobody` had written them into a shared cache folder
    assert kernels(trace) == honest
    assert cache.cache_stats().entries == 0
    removed = cache.clear_cache()
    assert (removed.entries, removed.size_bytes) == (0, 0)
    assert all(e.is_dir() for e in entries)
    out = CliRunner().invoke(main, ["cache", "clear"])
    assert out.exit_code == 0 and out.stderr.startswith("removed 0 entries (0.0 MB)")


def test_clear_counts_what_it_removed(tmp_path):
    trace = write_big_kineto(tmp_path / "t.json", 300, seed=1, gzip=False).path
    kernels(trace)
    before = cache.cache_stats()
    removed = cache.clear_cache()
    assert (removed.entries, removed.size_bytes) == (before.entries, before.size_bytes) and before.entries == 2
    assert cache.cache_stats().entries == 0
