"""Calibration fitted from a sweep table, and the advice built on it."""
from __future__ import annotations

import pandas as pd
import pytest

from taxbreak.whatif.advisor import advise, fit_calibration
from taxbreak.whatif.batching import Workload
from taxbreak.whatif.calibration import H200_QWEN3_8B, Calibration

ALPHA_P, BETA_P, ALPHA_D, BETA_D = 1.2786e-3, 2.4853e-5, 8.9212e-3, 4.5865e-5
MB = (2.494e-5, 5.193e-5, 1.478e-5)


def planted_table() -> pd.DataFrame:
    """Sweep rows whose step latencies follow the published H200 model exactly (µs)."""
    rows = []
    for b in (1, 2, 4, 8, 16):
        for s in (512, 1024, 2048):
            rows.append({"kind": "grid", "phase": "prefill", "batch": b, "seq_len": s, "tokens_per_step": b * s,
                         "step_us": 1e6 * (ALPHA_P + BETA_P * b * s)})
            rows.append({"kind": "grid", "phase": "decode", "batch": b, "seq_len": s, "tokens_per_step": b,
                         "step_us": 1e6 * (ALPHA_D + BETA_D * b)})
    for r in (0.1, 0.2, 0.4, 0.8):
        rows.append({"kind": "mixed", "phase": "mixed", "batch": 1, "seq_len": 2048, "decode_share": r,
                     "tokens_per_step": 2048, "step_us": 1e6 * 2048 * (MB[0] + MB[1] * r + MB[2] * r * r)})
    return pd.DataFrame(rows)


def test_fit_recovers_planted_calibration():
    calib, fits = fit_calibration(planted_table())
    assert calib.alpha_p_s == pytest.approx(ALPHA_P, rel=1e-8)
    assert calib.beta_p_s_per_token == pytest.approx(BETA_P, rel=1e-8)
    assert calib.alpha_d_s == pytest.approx(ALPHA_D, rel=1e-8)
    assert calib.beta_d_s_per_request == pytest.approx(BETA_D, rel=1e-8)
    assert calib.beta_mb == pytest.approx(MB, rel=1e-6)
    assert calib.r2 == {"prefill": 1.0, "decode": 1.0, "beta_mb": 1.0}
    assert fits["prefill"]["points"] == 15 and fits["beta_mb"]["points"] == 4


def test_fit_without_mixed_points_has_no_beta_mb():
    table = planted_table()
    calib, fits = fit_calibration(table[table["kind"] == "grid"])
    assert calib.beta_mb is None and "reason" in fits["beta_mb"]
    advice = advise(calib, Workload(512, 256), [64])
    assert advice["per_concurrency"][0]["winner"] is None and "β_MB" in advice["not_computed"]


def test_advice_with_published_h200_calibration():
    advice = advise(H200_QWEN3_8B, Workload(512, 256), [32, 512, 2048], kv_capacity_tokens=1_000_000)
    assert [row["winner"] for row in advice["per_concurrency"]] == ["MB", "EB", "EB"]
    assert advice["per_concurrency"][0]["k_hat"] == pytest.approx(32 * advice["theta_star"])
    assert advice["alpha_mb_s"] == H200_QWEN3_8B.alpha_p_s
    assert advice["memory_safe_batch"]["paper"] == 1308  # ⌊(10⁶ − 128·ln 100)/D(θ*)⌋, D ≈ 763.76
    assert advice["memory_safe_batch"]["clt"] <= advice["memory_safe_batch"]["paper"]


def test_advice_refuses_non_positive_intercepts():
    advice = advise(Calibration(-1e-3, 1e-5, 1e-2, 1e-5), Workload(512, 256), [32])
    assert "θ*" in advice["not_computed"] and "theta_star" not in advice


def test_poor_fits_are_flagged():
    calib = Calibration(1e-3, 1e-5, 1e-2, 1e-5, r2={"prefill": 0.99, "decode": 0.3, "beta_mb": None})
    warnings = advise(calib, Workload(512, 256), [32])["warnings"]
    assert len(warnings) == 1 and warnings[0].startswith("decode fit R² = 0.300")
