"""Small readers of a Kineto JSON trace for capture tests (independent of taxbreak.readers)."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np


def load_events(path: Path) -> list[dict]:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as handle:
        return json.load(handle)["traceEvents"]


def by_cat(events: list[dict], cat: str) -> list[dict]:
    return [e for e in events if e.get("cat") == cat and e.get("ph") == "X"]


def annotations(events: list[dict], prefix: str = "taxbreak/") -> list[dict]:
    return [e for e in by_cat(events, "user_annotation") if e["name"].startswith(prefix)]


def top_level_ops_without_python_frame(events: list[dict]) -> list[str]:
    """ATen ops not nested in another ATen op that no python_function on their thread encloses."""
    ops = [e for e in by_cat(events, "cpu_op") if e["name"].startswith("aten::")]
    frames = by_cat(events, "python_function")
    missing = []
    for tid in {e["tid"] for e in ops}:
        lane = sorted((e for e in ops if e["tid"] == tid), key=lambda e: (e["ts"], -e["dur"]))
        f_start = np.array([f["ts"] for f in frames if f["tid"] == tid])
        f_end = np.array([f["ts"] + f["dur"] for f in frames if f["tid"] == tid])
        open_until = -np.inf
        for op in lane:
            if op["ts"] < open_until:  # nested inside a previous ATen op
                continue
            open_until = op["ts"] + op["dur"]
            if not np.any((f_start <= op["ts"]) & (f_end >= op["ts"] + op["dur"])):
                missing.append(op["name"])
    return missing
