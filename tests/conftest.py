"""Shared fixtures. Real traces from public projects live in ../shared/traces
(next to the repository), or wherever ``TAXBREAK_SHARED_TRACES`` points; they
are read in place, never copied (docs/testing.md says where they come from).

Without that corpus the tests that need it are skipped, one reason line per
module in pytest's summary; everything else runs. In CI (``CI`` set) the
corpus is required: a missing folder stops the run before collection, so a
skip can never hide there.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_TRACES = Path(os.environ.get("TAXBREAK_SHARED_TRACES", REPO_ROOT.parent / "shared" / "traces"))
CORPUS_MISSING = "real-trace corpus not found: see docs/testing.md"
IN_CI = os.environ.get("CI", "").lower() not in ("", "0", "false")

# Test modules that asked for the corpus's file list at import time; an empty
# parameter set in one of them means "no corpus", not "no case".
_CORPUS_MODULES: set[str] = set()


def corpus_present() -> bool:
    return SHARED_TRACES.is_dir()


def shared_trace_paths(suffixes=(".json", ".json.gz", ".sqlite")) -> list[Path]:
    """Every real trace under the corpus folder with one of ``suffixes``.

    Without the corpus this is an empty list, and every test parametrized
    over it is skipped with :data:`CORPUS_MISSING` (never passed by
    collecting nothing); in CI the run has already stopped (``pytest_configure``).
    """
    _CORPUS_MODULES.add(sys._getframe(1).f_globals.get("__file__", ""))
    if not corpus_present():
        return []
    return sorted(p for p in SHARED_TRACES.rglob("*") if p.is_file() and p.name.endswith(tuple(suffixes)))


def pytest_configure(config):
    config.addinivalue_line("markers", "corpus: needs the real-trace corpus (docs/testing.md)")
    if IN_CI and not corpus_present():
        raise pytest.UsageError(f"{CORPUS_MISSING} (CI requires it; looked in {SHARED_TRACES}, "
                                "set TAXBREAK_SHARED_TRACES)")


def _needs_corpus(item) -> bool:
    if "shared_traces" in getattr(item, "fixturenames", ()) or item.get_closest_marker("corpus"):
        return True
    if str(item.path) not in _CORPUS_MODULES:
        return False
    return any(str(m.kwargs.get("reason", "")).startswith("got empty parameter set")
               for m in item.iter_markers("skip"))


def pytest_collection_modifyitems(config, items):
    """Skip what needs the corpus when it is absent. The mark goes on each
    item (first, ahead of pytest's own empty-parameter-set mark) so that the
    summary folds the skips into one line per module."""
    if corpus_present():
        return
    mark = pytest.mark.skip(reason=CORPUS_MISSING)
    for item in items:
        if _needs_corpus(item):
            item.add_marker(mark, append=False)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A corpus skip is reported at its module, without a line number, so
    pytest folds a module's corpus skips into one summary line even for
    parametrized tests (which it would otherwise list per function)."""
    outcome = yield
    report = outcome.get_result()
    longrepr = report.longrepr
    if report.skipped and isinstance(longrepr, tuple) and CORPUS_MISSING in str(longrepr[2]):
        report.longrepr = (str(item.path), None, longrepr[2])


@pytest.fixture(scope="session")
def shared_traces() -> Path:
    if not corpus_present():  # only reached when a test bypasses the collection hook
        pytest.skip(CORPUS_MISSING)
    return SHARED_TRACES


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Each test gets its own cache dir so floor/parse caches never leak between tests, with the
    cache on: folder mode's ``--no-cache`` sets ``TAXBREAK_NO_CACHE`` in its own process for the
    workers it spawns, which under CliRunner is the test process (cli/many.py)."""
    monkeypatch.setenv("TAXBREAK_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    monkeypatch.delenv("TAXBREAK_NO_CACHE", raising=False)
    yield
    os.environ.pop("TAXBREAK_NO_CACHE", None)


# In CI (CI=true) property tests draw the same examples every run, so a rare
# float corner case found by chance cannot fail a submission at random; locally
# they keep exploring. Found failures are pinned with @example.
from hypothesis import settings as _hypothesis_settings  # noqa: E402

_hypothesis_settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
if IN_CI:
    _hypothesis_settings.load_profile("ci")
