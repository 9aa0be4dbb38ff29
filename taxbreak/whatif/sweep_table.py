"""The sweep table: one row per (point, phase) with the mean step and per-token figures.

Per-token figures divide the mean step by the tokens one step processes:

| phase   | tokens per step                 |
|---------|---------------------------------|
| prefill | B·S (prompt tokens)             |
| decode  | B (one new token per sequence)  |
| mixed   | S (chunk + decode tokens; C + k)|

Step latency is ``step_us`` (:func:`taxbreak.whatif.metrics.with_latency`):
the larger of the step marker's wall time and the device span of its kernels.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from ..trace.errors import TaxbreakError
from .metrics import phases_in, read_summary, step_means
from .sweep import read_index

# Mean-step metrics copied into the table (µs unless named otherwise).
STEP_KEYS = (
    "step_us", "wall_us", "span_us", "hdbi", "orchestration_us", "framework_us", "library_us", "launch_floor_us",
    "launch_latency_us", "device_active_us", "device_busy_us", "exposed_orchestration_us",
    "hidden_orchestration_us", "kernels", "host_thread_us", "host_sync_us",
)
PER_TOKEN_KEYS = (
    "framework_us", "library_us", "launch_floor_us", "launch_latency_us", "orchestration_us",
    "device_active_us", "kernels", "host_thread_us",
)


def tokens_per_step(phase: str, batch: int, seq_len: int) -> int | None:
    """Tokens one step of ``phase`` processes (see the module table); None for an unknown phase."""
    return {"prefill": batch * seq_len, "decode": batch, "mixed": seq_len}.get(phase)


def point_rows(point: dict, summary: dict) -> list[dict]:
    """Rows of one sweep point: one per phase of its summary."""
    rows = []
    for phase in phases_in(summary):
        means = step_means(summary, phase)
        tokens = tokens_per_step(phase, point["batch"], point["seq_len"])
        row = {"name": point["name"], "kind": point["kind"], "batch": point["batch"], "seq_len": point["seq_len"],
               "decode_share": point.get("decode_share"),
               "decode_share_requested": point.get("decode_share_requested", point.get("decode_share")), "phase": phase, "steps": means["steps"],
               "tokens_per_step": tokens}
        row.update({key: means.get(key) for key in STEP_KEYS})
        no_device = means.get("device_active_us") is None
        for key in PER_TOKEN_KEYS:
            # Without device activity the kernel count is not measured, not zero.
            value = None if key == "kernels" and no_device else means.get(key)
            row[f"{key}_per_token"] = None if value is None or not tokens else value / tokens
        rows.append(row)
    return rows


def build_table(sweep_dir: str | Path) -> tuple[pd.DataFrame, list[str]]:
    """The table of every complete point of a sweep, and a note per point left out.

    Raises:
        TaxbreakError: ``run.not_a_run`` when ``sweep_dir`` has no ``sweep.json``.
    """
    root = Path(sweep_dir)
    index = read_index(root)
    rows, notes = [], []
    for point in index.get("points", []):
        if point.get("status") == "failed":
            notes.append(f"{point['name']}: failed ({point.get('error')})")
            continue
        try:
            summary = read_summary(root / point["run_dir"])
        except TaxbreakError as err:
            notes.append(f"{point['name']}: {err.one_line()}")
            continue
        rows.extend(point_rows(_actual_share(point, root / point["run_dir"]), summary))
    table = pd.DataFrame(rows)
    if not table.empty:
        numeric = [c for c in table.columns if c not in ("name", "kind", "phase")]
        table[numeric] = table[numeric].apply(pd.to_numeric, errors="coerce")
    return table, notes


def _actual_share(point: dict, run_dir: Path) -> dict:
    """A mixed point with the decode share it ran at (k/T after rounding k), from its manifest."""
    if point.get("kind") != "mixed":
        return point
    try:
        share = json.loads((run_dir / "manifest.json").read_text())["mixed"]["decode_share"]
    except (OSError, ValueError, KeyError, TypeError):
        return point
    return {**point, "decode_share": share, "decode_share_requested": point.get("decode_share")}


def grid_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The batch × sequence-length rows (mixed points left out)."""
    if table.empty:
        return table
    return table[table["kind"] == "grid"]


def as_records(table: pd.DataFrame) -> list[dict]:
    """Rows as dicts with NaN turned into ``None`` (JSON ``null``: not measured)."""
    clean = table.astype(object).where(pd.notna(table), None)
    return [{k: (v.item() if isinstance(v, np.generic) else v) for k, v in row.items()}
            for row in clean.to_dict(orient="records")]
