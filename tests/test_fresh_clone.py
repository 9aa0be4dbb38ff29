"""The README's test command on a fresh clone, the way a new user meets it.

The committed HEAD of this checkout is cloned into a temporary folder with no
``../shared`` beside it (so no real-trace corpus), and the README's test
command runs there: it must exit 0 and show the corpus skip reason. The
README's install step is not repeated (this suite runs after it, and an
editable install of a temporary clone would outlive the test); the pytest
part runs verbatim, restricted by ``PYTEST_ADDOPTS`` to a fast subset that
holds corpus modules and corpus-free ones. ``TAXBREAK_FRESH_CLONE_FULL=1``
runs the whole suite there instead.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import CORPUS_MISSING, REPO_ROOT

pytestmark = pytest.mark.slow
INNER = "TAXBREAK_IN_FRESH_CLONE"  # set for the inner run: the clone test never runs itself again
SUBSET = ("tests/test_layers.py tests/test_entry_point.py tests/trace tests/readers/test_nsys_real.py "
          "tests/readers/test_kineto_real.py tests/readers/test_kineto_planted.py tests/decompose/test_real_traces.py "
          "tests/test_fresh_clone_fetch.py tests/test_fresh_clone.py -m 'not slow' -p no:cacheprovider")
CORPUS_MODULES = ("tests/readers/test_nsys_real.py", "tests/readers/test_kineto_real.py",
                  "tests/decompose/test_real_traces.py")


def readme_test_command() -> tuple[str, str]:
    """The README's test command, split into its install step and its pytest part."""
    readme = (REPO_ROOT / "README.md").read_text()
    command = re.search(r"```bash\n(bash scripts/install-test-deps\.sh && .*pytest.*)\n```", readme).group(1)
    install, test = (part.strip() for part in command.split("&&", 1))
    return install, test


def clone_head(dest: Path) -> str:
    """Clone this checkout and check out its committed HEAD (uncommitted edits do not travel)."""
    head = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(REPO_ROOT), str(dest)], check=True,
                   capture_output=True)
    subprocess.run(["git", "-C", str(dest), "checkout", "-q", head], check=True, capture_output=True)
    return head


def inner_env(clone: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "TAXBREAK_SHARED_TRACES", "PYTEST_ADDOPTS")}
    env.update({INNER: "1", "PYTHONPATH": str(clone)})  # the clone's code, as a user's editable install gives
    if os.environ.get("TAXBREAK_FRESH_CLONE_FULL") != "1":
        env["PYTEST_ADDOPTS"] = SUBSET
    return env


@pytest.fixture(scope="module")
def fresh_clone(tmp_path_factory):
    if os.environ.get(INNER):
        pytest.skip("inside the fresh-clone run: not cloning again")
    if shutil.which("git") is None or not (REPO_ROOT / ".git").exists():
        pytest.skip("not a git checkout: nothing to clone")
    clone = tmp_path_factory.mktemp("fresh") / "taxbreak"
    head = clone_head(clone)
    assert not (clone.parent / "shared").exists()
    install, test = readme_test_command()
    run = subprocess.run(test, shell=True, cwd=clone, env=inner_env(clone), capture_output=True, text=True,
                         timeout=1200)
    return {"clone": clone, "head": head, "install": install, "test": test, "run": run}


def test_readme_names_the_install_script_and_pytest(fresh_clone):
    assert fresh_clone["install"] == "bash scripts/install-test-deps.sh"
    assert fresh_clone["test"] == "python3 -m pytest -q"


def test_readme_command_passes_on_a_fresh_clone(fresh_clone):
    run = fresh_clone["run"]
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert re.search(r"\d+ passed", run.stdout), run.stdout[-2000:]
    assert "error" not in run.stdout.splitlines()[-1]


def test_each_corpus_module_shows_one_skip_reason_line(fresh_clone):
    lines = [line for line in fresh_clone["run"].stdout.splitlines() if CORPUS_MISSING in line]
    for module in CORPUS_MODULES:
        mine = [line for line in lines if f" {module}: " in line]
        assert len(mine) == 1 and mine[0].startswith("SKIPPED ["), (module, lines)


def test_the_clone_is_the_committed_head(fresh_clone):
    clone = fresh_clone["clone"]
    status = subprocess.run(["git", "-C", str(clone), "rev-parse", "HEAD"], capture_output=True, text=True)
    assert status.stdout.strip() == fresh_clone["head"]
    assert (clone / "tests" / "conftest.py").is_file() and not (clone.parent / "shared").exists()
