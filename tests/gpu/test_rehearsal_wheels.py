"""scripts/gpu_wheels.sh --verify and scripts/gpu-wheels.lock, offline: planted wheel files
stand in for the downloads (the real ones are checked by test_rehearsal.py)."""
from __future__ import annotations

import hashlib
import os
import re
import subprocess
from pathlib import Path

from conftest import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "gpu_wheels.sh"
LOCK = REPO_ROOT / "scripts" / "gpu-wheels.lock"
PINS = {"msgspec": "0.23.0", "isal": "1.9.1", "nvtx": "0.2.17"}


def _lock() -> dict[str, str]:
    rows = [line.split() for line in LOCK.read_text().splitlines() if line.strip() and not line.startswith("#")]
    return {name: sha for sha, name in rows}


def _verify(folder: Path, pythons: str = "3.12") -> subprocess.CompletedProcess:
    env = dict(os.environ, TAXBREAK_GPU_WHEELS=str(folder), TAXBREAK_GPU_WHEEL_PYTHONS=pythons)
    return subprocess.run(["bash", str(SCRIPT), "--verify"], capture_output=True, text=True, env=env, timeout=60)


def test_lock_pins_each_package_for_the_gpu_image():
    lock = _lock()
    assert all(re.fullmatch(r"[0-9a-f]{64}", sha) for sha in lock.values())
    for package, version in PINS.items():
        cp312 = [n for n in lock if n.startswith(f"{package}-{version}-cp312-cp312-") and "manylinux_2_17_x86_64" in n]
        assert len(cp312) == 1, (package, sorted(lock))
    assert f"pins: msgspec=={PINS['msgspec']} isal=={PINS['isal']} nvtx=={PINS['nvtx']}" in LOCK.read_text()


def test_verify_refuses_a_tampered_wheel_and_reports_missing_ones(tmp_path):
    name = next(n for n in _lock() if n.startswith("msgspec-") and "-cp312-" in n)
    (tmp_path / name).write_bytes(b"not the locked bytes")
    run = _verify(tmp_path)
    assert run.returncode == 1
    assert f"MISMATCH  {name}: sha256 {hashlib.sha256(b'not the locked bytes').hexdigest()}" in run.stderr
    assert not (tmp_path / name).exists()  # a tampered file never stays where the install looks
    assert "MISSING   isal==1.9.1 for CPython 3.12" in run.stderr
    assert "MISSING   nvtx==0.2.17 for CPython 3.12" in run.stderr


def test_verify_refuses_an_unlocked_wheel(tmp_path):
    (tmp_path / "msgspec-9.9.9-cp312-cp312-manylinux_2_17_x86_64.whl").write_bytes(b"x")
    run = _verify(tmp_path)
    assert run.returncode == 1 and "UNLOCKED  msgspec-9.9.9-cp312-cp312-manylinux_2_17_x86_64.whl" in run.stderr


def test_usage_error_exits_2(tmp_path):
    run = subprocess.run(["bash", str(SCRIPT), "--bogus"], capture_output=True, text=True,
                         env=dict(os.environ, TAXBREAK_GPU_WHEELS=str(tmp_path)))
    assert run.returncode == 2 and run.stderr.startswith("usage: scripts/gpu_wheels.sh")
