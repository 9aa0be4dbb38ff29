"""Every error and diagnostic code the readers of docs/trace-model.md use is
registered in taxbreak.trace and documented there."""
from __future__ import annotations

import re
from pathlib import Path

from taxbreak.trace.diagnostics import DIAGNOSTIC_CODES
from taxbreak.trace.errors import ERROR_CODES

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [*sorted((ROOT / "taxbreak/readers").glob("kineto*.py")), ROOT / "taxbreak/readers/detect.py",
           ROOT / "taxbreak/readers/bounds.py"]
_QUOTED_CODE = re.compile(r'"([a-z0-9_]+\.[a-z0-9_]+)"')


def _codes_used() -> set[str]:
    found = set()
    for path in SOURCES:
        found |= {c for c in _QUOTED_CODE.findall(path.read_text())
                  if c.split(".")[0] in {"input", "format", "gzip", "json", "kineto", "run", "event", "trace"}
                  and c.split(".")[1] not in {"json", "sqlite", "gz"}}  # file names such as "trace.json"
    return found


def test_codes_used_by_the_kineto_reader_are_registered_and_documented():
    doc = (ROOT / "docs/trace-model.md").read_text()
    used = _codes_used()
    assert {"json.truncated", "event.instant", "trace.truncated", "format.unknown"} <= used
    for code in used:
        assert code in ERROR_CODES or code in DIAGNOSTIC_CODES, code
        assert f"`{code}`" in doc, code
