"""The summary of a fixed planted trace matches its reviewed golden copy key by key."""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from taxbreak.decompose import analyze
from taxbreak.synth.planted import build, random_spec

GOLDEN = Path(__file__).parent / "golden" / "planted_summary.json"


def test_planted_summary_matches_golden():
    a = analyze(build(random_spec(np.random.default_rng(11), steps=3, ops=3)).tables, tokens=3)
    got = json.loads(a.to_json())
    if os.environ.get("TAXBREAK_UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    expected = json.loads(GOLDEN.read_text())
    assert got.keys() == expected.keys()
    for section in ("all", "phases", "steps", "diagnostics"):
        assert got[section] == expected[section], section
    for key in ("device", "floor_source", "step_scheme", "runs", "tokens", "t_py_measured"):
        assert got["meta"][key] == expected["meta"][key], key
