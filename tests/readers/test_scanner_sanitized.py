"""The compiled Kineto scanner built with AddressSanitizer and UBSan, run over fuzz inputs
(scripts/sanitize_scanner.sh): no read past a buffer, no overflow, no undefined behaviour."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _sanitizers_available() -> bool:
    if shutil.which("gcc") is None or not sys.platform.startswith("linux"):
        return False
    runtimes = [subprocess.run(["gcc", f"-print-file-name={lib}"], capture_output=True, text=True).stdout.strip()
                for lib in ("libasan.so", "libubsan.so")]
    return all(os.path.isabs(path) for path in runtimes)  # gcc prints the bare name when it has none


@pytest.mark.slow
@pytest.mark.skipif(not _sanitizers_available(), reason="needs gcc with the ASan and UBSan runtimes")
def test_the_sanitized_scanner_survives_the_fuzz_inputs():
    run = subprocess.run(["bash", str(REPO / "scripts" / "sanitize_scanner.sh"), "--seconds", "20"],
                         capture_output=True, text=True, cwd=REPO, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert run.returncode == 0, run.stderr[-4000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["mutator_cases"] >= report["mutator_classes"]  # every Kineto mutator class ran
    assert report["accepted"] > 0 and report["scans"] > report["accepted"]  # both outcomes exercised
