"""Fixtures of the report tests: planted traces and golden files.

Golden files live in tests/report/golden/; run with TAXBREAK_UPDATE_GOLDEN=1
to rewrite them, then review the diff.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from .traces import write_planted

GOLDEN = Path(__file__).parent / "golden"


@pytest.fixture
def planted(tmp_path) -> Path:
    return write_planted(tmp_path / "planted.json.gz")


@pytest.fixture
def golden():
    """``golden(name, text)``: compare with (or, when updating, write) golden/<name>."""

    def check(name: str, text: str) -> None:
        path = GOLDEN / name
        if os.environ.get("TAXBREAK_UPDATE_GOLDEN"):
            path.write_text(text, encoding="utf-8")
        assert path.exists(), f"missing golden file {path}; run with TAXBREAK_UPDATE_GOLDEN=1"
        assert text == path.read_text(encoding="utf-8")

    return check
