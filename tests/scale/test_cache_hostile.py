"""The caches against stale content, foreign folders, concurrent and killed analyses.

A trace rewritten in place with its size and mtime restored must miss; ``cache
clear`` and the size cap remove only what taxbreak wrote; two concurrent
analyses of one trace, and a killed analysis followed by a clean one, give the
output of an uncached analysis.
"""
from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from taxbreak.readers import cache, load_trace
from taxbreak.scale.analysis_cache import analysis_cache_dir, cached_analyze
from taxbreak.synth.bigtrace import write_big_kineto

REPO = Path(__file__).resolve().parents[2]


def _rewrite_keeping_size_and_mtime(path: Path, old: bytes, new: bytes) -> None:
    """Replace ``old`` by ``new`` (same length) once, then restore the mtime as ``touch -r`` does."""
    assert len(old) == len(new)
    st = path.stat()
    data = path.read_bytes()
    assert old in data
    path.write_bytes(data.replace(old, new, 1))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns


@pytest.fixture
def small_trace(tmp_path) -> Path:
    return write_big_kineto(tmp_path / "t.json", 3000, gzip=False).path


def test_a_rewrite_with_size_and_mtime_restored_misses_the_parse_cache(small_trace):
    before = load_trace(small_trace).device_activities.num_rows
    cache.wait_for_writes()
    _rewrite_keeping_size_and_mtime(small_trace, b'"cat":"kernel"', b'"cat":"kernex"')
    after = load_trace(small_trace)
    assert after.device_activities.num_rows == before - 1
    assert after.diagnostics.count("event.unknown_category") == 1


def test_a_rewrite_with_size_and_mtime_restored_misses_the_analysis_cache(small_trace):
    before = cached_analyze(small_trace).summary["all"]["kernels"]
    cache.wait_for_writes()
    _rewrite_keeping_size_and_mtime(small_trace, b'"cat":"kernel"', b'"cat":"kernex"')
    assert cached_analyze(small_trace).summary["all"]["kernels"] == before - 1


def _blocks_file(path: Path, size: int) -> Path:
    path.write_bytes(bytes(i % 251 for i in range(size)))
    return path


@pytest.mark.parametrize("where", ["start", "middle", "end"])
def test_the_fingerprint_sees_an_edit_in_each_sampled_block(tmp_path, where):
    path = _blocks_file(tmp_path / "big.bin", 10 * cache.FINGERPRINT_BLOCK)
    before = cache.content_fingerprint(path)
    offset = {"start": 10, "middle": path.stat().st_size // 2, "end": path.stat().st_size - 3}[where]
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))
    assert cache.content_fingerprint(path) != before


def test_a_small_file_is_hashed_whole(tmp_path):
    path = _blocks_file(tmp_path / "small.bin", 3 * cache.FINGERPRINT_BLOCK)
    before = cache.content_fingerprint(path)
    data = bytearray(path.read_bytes())
    data[cache.FINGERPRINT_BLOCK + 5] ^= 1
    path.write_bytes(bytes(data))
    assert cache.content_fingerprint(path) != before


def test_a_gzip_rewrite_changes_the_sampled_blocks_whatever_it_edits(tmp_path):
    """The gzip trailer holds the CRC-32 of the content: an edit anywhere changes the last block."""
    body = bytes(i % 97 for i in range(30 * cache.FINGERPRINT_BLOCK))
    edited = bytearray(body)
    edited[len(body) // 3] ^= 1  # outside every sampled block of the compressed file
    a, b = tmp_path / "a.json.gz", tmp_path / "b.json.gz"
    a.write_bytes(gzip.compress(body, mtime=0))
    b.write_bytes(gzip.compress(bytes(edited), mtime=0))
    assert a.read_bytes()[-8:] != b.read_bytes()[-8:]  # CRC-32 and length: inside the last sampled block
    assert cache.content_fingerprint(a) != cache.content_fingerprint(b)


# --- clear and prune remove only taxbreak's own folders -----------------------------------


def _foreign(root: Path) -> list[Path]:
    """Folders and files under the cache that taxbreak did not write."""
    made = []
    for kind in ("parse", "analysis"):
        base = root / kind
        base.mkdir(parents=True, exist_ok=True)
        lookalike = base / ("f" * 32)
        lookalike.mkdir()
        (lookalike / "entry.json").write_text('{"path": "mine"}')
        (lookalike / "data.parquet").write_text("precious")
        tmp = base / ".tmp-someone-else"
        tmp.mkdir()
        (tmp / "work.txt").write_text("in progress")
        os.utime(tmp, (0, 0))  # old enough for the stale-temporary rule
        note = base / "notes.txt"
        note.write_text("keep me")
        made += [lookalike / "entry.json", lookalike / "data.parquet", tmp / "work.txt", note]
    return made


def test_clear_removes_only_marked_entries(small_trace):
    cached_analyze(small_trace)
    cache.wait_for_writes()
    root = cache.cache_dir()
    ours = [e for r in cache.cache_roots() for e in r.iterdir() if cache.is_entry(e)]
    assert len(ours) == 2  # one parse entry, one analysis entry
    stray = ours[0] / "user-notes.txt"  # a file someone put into an entry
    stray.write_text("not taxbreak's")
    foreign = _foreign(root)
    removed = cache.clear_cache()
    assert removed.entries == 2
    assert all(p.exists() for p in foreign)
    assert stray.exists() and sorted(f.name for f in ours[0].iterdir()) == ["user-notes.txt"]
    assert not ours[1].exists()


def test_the_size_cap_prunes_only_marked_entries(small_trace, monkeypatch):
    foreign = _foreign(cache.cache_dir())
    cached_analyze(small_trace)
    cache.wait_for_writes()
    assert cache.prune_cache(0) == 2
    assert all(p.exists() for p in foreign)
    assert cache.cache_stats().entries == 0


def test_a_foreign_lookalike_entry_is_never_served(small_trace):
    key = cache.cache_key(small_trace)
    fake = cache.parse_cache_dir() / key
    fake.mkdir(parents=True)
    (fake / "entry.json").write_text("{}")
    tables = load_trace(small_trace)
    assert tables.device_activities.num_rows > 0
    assert (fake / "entry.json").read_text() == "{}"  # neither read nor removed


def test_cache_clear_cli_keeps_foreign_folders(small_trace):
    from click.testing import CliRunner

    from taxbreak.cli.main import main

    load_trace(small_trace)
    cache.wait_for_writes()
    foreign = _foreign(cache.cache_dir())
    result = CliRunner().invoke(main, ["cache", "clear"])
    assert result.exit_code == 0 and "removed 1 entries" in result.stderr
    assert all(p.exists() for p in foreign)


# --- concurrent and killed analyses -----------------------------------------------------


def _analyze_cmd(trace: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "taxbreak", "analyze", str(trace), "--json", "--floor-us", "4.5", *extra]


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _normalized(stdout: str) -> dict:
    doc = json.loads(stdout)
    doc.get("diagnostics", {}).pop("cache.corrupt_entry", None)
    return doc


@pytest.fixture
def mid_trace(tmp_path) -> Path:
    return write_big_kineto(tmp_path / "mid.json.gz", 60_000).path


def test_two_concurrent_analyses_of_one_trace_agree_with_an_uncached_one(mid_trace):
    fresh = subprocess.run(_analyze_cmd(mid_trace, "--no-cache"), capture_output=True, text=True, env=_env())
    assert fresh.returncode == 0, fresh.stderr
    procs = [subprocess.Popen(_analyze_cmd(mid_trace), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=_env()) for _ in range(2)]
    outs = [p.communicate() for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1] for o in outs]
    assert _normalized(outs[0][0]) == _normalized(outs[1][0]) == _normalized(fresh.stdout)
    again = subprocess.run(_analyze_cmd(mid_trace), capture_output=True, text=True, env=_env())  # a cache hit
    assert _normalized(again.stdout) == _normalized(fresh.stdout)


def test_a_killed_analysis_then_a_clean_one_gives_the_uncached_output(mid_trace):
    fresh = subprocess.run(_analyze_cmd(mid_trace, "--no-cache"), capture_output=True, text=True, env=_env())
    victim = subprocess.Popen(_analyze_cmd(mid_trace), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env=_env())
    deadline = time.monotonic() + 60
    parse_root = cache.parse_cache_dir()
    # kill it while it writes its cache entry (a .tmp-* folder exists), or as soon as it has started parsing
    while victim.poll() is None and time.monotonic() < deadline:
        if parse_root.is_dir() and any(p.name.startswith(".tmp-") for p in parse_root.iterdir()):
            break
        time.sleep(0.005)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    clean = subprocess.run(_analyze_cmd(mid_trace), capture_output=True, text=True, env=_env())
    assert clean.returncode == 0, clean.stderr
    assert _normalized(clean.stdout) == _normalized(fresh.stdout)
    hit = subprocess.run(_analyze_cmd(mid_trace), capture_output=True, text=True, env=_env())
    assert _normalized(hit.stdout) == _normalized(fresh.stdout)
