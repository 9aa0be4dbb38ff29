"""docs/report.md's per-trace verdicts and docs/method.md's component table are what
scripts/verdict_table.py generates from the corpus now (example numbers are generated, never typed)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import corpus_present

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.corpus
@pytest.mark.slow
def test_docs_tables_are_what_the_script_generates():
    if not corpus_present():
        pytest.skip("real-trace corpus not present")
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "verdict_table.py"), "--check"],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, "run python3 scripts/verdict_table.py --write: " + result.stdout + result.stderr
