"""The console entry point (``python -m taxbreak``, the ``taxbreak`` script) skips the
interpreter's teardown but loses nothing: exit codes, flushed output, finished cache writes."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from taxbreak.synth.bigtrace import write_big_kineto


def _taxbreak(*args: str, cache_dir) -> subprocess.CompletedProcess:
    env = dict(os.environ, TAXBREAK_CACHE_DIR=str(cache_dir))
    env.pop("TAXBREAK_NO_CACHE", None)
    return subprocess.run([sys.executable, "-m", "taxbreak", *args], capture_output=True, text=True, env=env,
                          timeout=300)


@pytest.fixture
def trace(tmp_path):
    path = tmp_path / "t.json.gz"
    write_big_kineto(path, 2_000, seed=0, gzip=True)
    return path


def test_success_output_and_background_cache_write(trace, tmp_path):
    done = _taxbreak("info", str(trace), cache_dir=tmp_path / "cache")
    assert done.returncode == 0, done.stderr
    assert str(trace) in done.stdout  # stdout flushed before the quick exit
    entries = list((tmp_path / "cache" / "parse").glob("*/entry.json"))
    assert len(entries) == 1  # the background Parquet write was joined, not cut off


def test_error_and_usage_exit_codes(tmp_path):
    missing = _taxbreak("analyze", str(tmp_path / "absent.json"), cache_dir=tmp_path / "c")
    assert missing.returncode == 1
    assert missing.stderr.startswith("error[input.not_found]")
    usage = _taxbreak("analyze", "--top", "abc", "x", cache_dir=tmp_path / "c")
    assert usage.returncode == 2
    assert _taxbreak("--version", cache_dir=tmp_path / "c").returncode == 0


def test_exit_code_of_sys_exit_messages():
    from taxbreak.cli.main import _exit_code

    assert (_exit_code(None), _exit_code(0), _exit_code(2)) == (0, 0, 2)
    assert _exit_code("stopped") == 1


def test_spinner_names_the_file_and_stays_out_of_pipes(trace, tmp_path):
    from taxbreak.cli.status import describe

    assert describe(str(trace)) == f"t.json.gz ({trace.stat().st_size / 1e6:,.1f} MB)"
    assert describe(str(tmp_path / "absent.json")) == str(tmp_path / "absent.json")
    done = _taxbreak("analyze", str(trace), cache_dir=tmp_path / "cache")
    assert done.returncode == 0 and "analyzing" not in done.stderr  # stderr is a pipe here: no spinner


def test_cprofile_still_writes_its_output(tmp_path):
    # the quick exit would skip cProfile's own write at exit; under a profiler the exit is normal
    out = tmp_path / "cli.prof"
    done = subprocess.run([sys.executable, "-m", "cProfile", "-o", str(out), "-m", "taxbreak", "--version"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert out.is_file() and out.stat().st_size > 0
