"""Shared fixtures. Real traces from public projects live in ../shared/traces
(next to the repository); they are read in place, never copied."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_TRACES = Path(os.environ.get("TAXBREAK_SHARED_TRACES", REPO_ROOT.parent / "shared" / "traces"))


def shared_trace_paths(suffixes=(".json", ".json.gz", ".sqlite")) -> list[Path]:
    """Every real trace under ../shared/traces with one of ``suffixes``.

    A missing folder is an error, not an empty list: tests parametrized over
    the real traces must never pass by collecting nothing.
    """
    if not SHARED_TRACES.is_dir():
        raise FileNotFoundError(f"real traces expected at {SHARED_TRACES} (set TAXBREAK_SHARED_TRACES)")
    return sorted(p for p in SHARED_TRACES.rglob("*") if p.is_file() and p.name.endswith(tuple(suffixes)))


@pytest.fixture(scope="session")
def shared_traces() -> Path:
    if not SHARED_TRACES.is_dir():
        pytest.fail(f"real traces expected at {SHARED_TRACES}")
    return SHARED_TRACES


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Each test gets its own cache dir so floor/parse caches never leak between tests."""
    monkeypatch.setenv("TAXBREAK_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


# In CI (CI=true) property tests draw the same examples every run, so a rare
# float corner case found by chance cannot fail a submission at random; locally
# they keep exploring. Found failures are pinned with @example.
from hypothesis import settings as _hypothesis_settings  # noqa: E402

_hypothesis_settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
if os.environ.get("CI"):
    _hypothesis_settings.load_profile("ci")
