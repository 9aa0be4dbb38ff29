"""Small stand-ins for traces and analyses, for the scale tests.

A "fake trace" is a JSON file naming a rank (or null), per-kernel rows and
two summary metrics; ``fake_analyze`` turns it into an object with the
attributes of ``Analysis`` that the scale package reads. Module-level so that
spawned worker processes can unpickle it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from taxbreak.trace.errors import TraceFormatError
from taxbreak.trace.tables import TraceMeta, TraceTables


@dataclass
class FakeAnalysis:
    summary: dict
    tables: TraceTables
    kernels: pd.DataFrame = field(default_factory=pd.DataFrame)
    steps: pd.DataFrame = field(default_factory=pd.DataFrame)


def write_fake_trace(path: Path, rank, kernels: list[dict], orchestration_us: float, tokens=None) -> Path:
    """kernels: [{"name", "phase", "step", "dur_us"}]."""
    path.write_text(json.dumps({"rank": rank, "kernels": kernels, "orchestration_us": orchestration_us,
                                "tokens": tokens}))
    return path


def _metrics(kernels: pd.DataFrame, orchestration_us: float, tokens) -> dict:
    device = float(kernels["dur_us"].sum()) if len(kernels) else 0.0
    total = device + orchestration_us
    return {
        "kernels": int(len(kernels)),
        "device_active_us": device,
        "orchestration_us": orchestration_us,
        "hdbi": device / total if total else None,
        "floor_us": 4.5,
        "floor_source": "published:default",
        "tokens": tokens,
        "orchestration_us_per_token": orchestration_us / tokens if tokens else None,
    }


def fake_analyze(path, options) -> FakeAnalysis:
    text = Path(path).read_text()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise TraceFormatError("json.invalid", "not valid JSON", path=str(path), location=f"byte {err.pos}") from err
    kernels = pd.DataFrame(data["kernels"], columns=["name", "phase", "step", "dur_us"])
    orch = float(data["orchestration_us"])
    by_phase = {ph: _metrics(k, orch * len(k) / max(1, len(kernels)), data["tokens"])
                for ph, k in kernels.groupby("phase")}
    steps = kernels.groupby(["step", "phase"], as_index=False).agg(device_active_us=("dur_us", "sum"),
                                                                     kernels=("name", "size"))
    summary = {"all": _metrics(kernels, orch, data["tokens"]), "phases": by_phase, "steps": [], "meta": {}}
    # a rank with a world size: the traces of one folder are ranks of one run (taxbreak.scale.task)
    extra = {"distributedInfo": {"rank": data["rank"], "world_size": 8}} if data["rank"] is not None else {}
    tables = TraceTables(meta=TraceMeta(source_format="fake", path=str(path), rank=data["rank"], extra=extra))
    return FakeAnalysis(summary, tables, kernels, steps)


def crash_analyze(path, options):
    raise RuntimeError("boom")


def die_analyze(path, options):
    """A worker killed mid-analysis (out of memory, a signal)."""
    import os

    os._exit(9)


def slow_fake_analyze(path, options):
    """fake_analyze after a pause: long enough for a test to kill the worker mid-run."""
    import time

    time.sleep(0.4)
    return fake_analyze(path, options)


def crash_on_name_analyze(path, options):
    """The worker process dies on a trace whose name holds "crash" (a crash in native code);
    every other trace is analyzed as by fake_analyze."""
    import os

    if "crash" in Path(path).name:
        os._exit(11)
    return fake_analyze(path, options)
