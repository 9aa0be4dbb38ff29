"""Transition point rule on planted HDBI curves."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from taxbreak.whatif.transition import NO_DEVICE, crossing, transition_points


def _grid(hdbi, device, exposed, batches=(1, 2, 4, 8), seq_len=16, phase="decode"):
    return pd.DataFrame({
        "phase": phase, "batch": list(batches), "seq_len": seq_len,
        "hdbi": hdbi, "device_active_us": device, "exposed_orchestration_us": exposed,
    })


def test_crossing_interpolates_between_points():
    # HDBI 0.4 at B=2, 0.6 at B=4: 0.5 is reached at 2 + (0.1/0.2)·2 = 3.
    out = crossing(np.array([1, 2, 4, 8.0]), np.array([0.2, 0.4, 0.6, 0.8]), 0.5)
    assert out == {"status": "interpolated", "x": pytest.approx(3.0)}


def test_crossing_edges():
    assert crossing(np.array([1.0, 2.0]), np.array([0.7, 0.9]), 0.5)["status"] == "at_or_below_grid"
    assert crossing(np.array([1.0, 2.0]), np.array([0.1, 0.2]), 0.5) == {"status": "not_reached", "x": None}
    assert crossing(np.array([1.0]), np.array([np.nan]), 0.5)["status"] == "unmeasured"


def test_transition_points_both_criteria():
    table = _grid([0.2, 0.4, 0.6, 0.8], [10, 20, 40, 80], [50, 40, 30, 20])
    out = transition_points(table)
    decode = out["phases"]["decode"]
    curve = decode["by_batch"][0]
    assert curve["seq_len"] == 16
    assert curve["hdbi"]["x"] == pytest.approx(3.0)
    # device − exposed: −40, −20, 10, 60 → zero between B=2 and B=4 at 2 + (20/30)·2 = 3.333.
    assert curve["device_exceeds_exposed"]["x"] == pytest.approx(2 + 40 / 30, rel=1e-9)
    assert decode["smallest_device_bound"] == {"batch": 4, "seq_len": 16, "hdbi": 0.6}
    assert "HDBI >= 0.5" in out["rule"]


def test_transition_undetermined_without_device():
    nan = [np.nan] * 4
    out = transition_points(_grid(nan, nan, nan, phase="prefill"))
    assert out["phases"]["prefill"] == {"status": "undetermined", "reason": NO_DEVICE}


def test_transition_over_seq_len_at_fixed_batch():
    table = pd.concat([
        _grid([0.1, 0.2, 0.3, 0.45], [1] * 4, [2] * 4, seq_len=8),
        _grid([0.3, 0.45, 0.55, 0.7], [3] * 4, [2] * 4, seq_len=32),
    ])
    out = transition_points(table)["phases"]["decode"]
    by_seq = {c["batch"]: c for c in out["by_seq_len"]}
    # at B=4: 0.3 (S=8) → 0.55 (S=32): 8 + (0.2/0.25)·24 = 27.2
    assert by_seq[4]["hdbi"]["x"] == pytest.approx(27.2)
    assert by_seq[1]["hdbi"]["status"] == "not_reached"
    assert out["smallest_device_bound"]["batch"] == 4 and out["smallest_device_bound"]["seq_len"] == 32
