"""θ* solver, EB–MB crossover Δ(N) and memory-safe N̂* against hand-derived values."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from taxbreak.whatif.batching import (
    Workload,
    amortisation_coeff,
    beta_eb_weighted,
    crossover_concurrency,
    crossover_delta,
    memory_safe_batch,
    solve_theta,
    theta_equation,
    theta_star,
)
from taxbreak.whatif.calibration import H200_QWEN3_8B, Calibration

LN2 = math.log(2.0)


def test_theta_half_by_hand():
    # θ = 1/2: θ/(1−θ) = 1 and ln(1−θ) = −ln 2, so the right side is 1 − ln 2.
    assert solve_theta(1.0 - LN2) == pytest.approx(0.5, abs=1e-12)


def test_theta_one_fifth_by_hand():
    # θ = 0.2: 0.2/0.8 = 0.25 and ln 0.8 = −0.22314355…, right side 0.02685645…
    assert solve_theta(0.25 + math.log(0.8)) == pytest.approx(0.2, abs=1e-12)


def test_theta_zero_and_huge_rhs():
    assert solve_theta(0.0) == 0.0
    assert 0.999 < solve_theta(1e6) < 1.0


@settings(max_examples=60, deadline=None)
@given(st.floats(min_value=1e-9, max_value=30.0))
def test_theta_solves_its_equation(rhs):
    theta = solve_theta(rhs)
    assert 0.0 < theta < 1.0
    assert theta_equation(theta) == pytest.approx(rhs, rel=1e-9, abs=1e-15)


# A hand-built calibration where every term comes out round:
# α_d = 0.01 s, μ_O = 100 → p = 0.01; α_p = 0.01·100·(1 − ln 2) so that
# p·α_p/α_d = 1 − ln 2 and θ* = 1/2 exactly.
HAND = Calibration(
    alpha_p_s=1.0 - LN2, beta_p_s_per_token=1e-5, alpha_d_s=0.01, beta_d_s_per_request=3e-5,
    beta_mb=(1e-5, 2e-5, 4e-5), source="hand",
)
HAND_LOAD = Workload(prompt_tokens=100, output_tokens=100)


def test_hand_calibration_theta_and_weights():
    assert theta_star(HAND, HAND_LOAD) == pytest.approx(0.5, abs=1e-12)
    # β_EB^w = (1e-5·100 + 3e-5·100)/200 = 2e-5; r = 100/200 = 0.5
    assert beta_eb_weighted(HAND, HAND_LOAD) == pytest.approx(2e-5)
    assert HAND_LOAD.decode_share == 0.5
    # β_MB^e(0.5) = 1e-5 + 2e-5·0.5 + 4e-5·0.25 = 3e-5
    assert HAND.beta_mb_at(0.5) == pytest.approx(3e-5)


def test_hand_crossover():
    # α_p − α_d·ln(1−θ)·μ_O = (1 − ln 2) + 0.01·ln 2·100 = 1, divided by θ = 0.5 → 2.
    # With α_MB = 0.01: α_MB·(1+μ_O) = 1.01; K = (2 − 1.01)/200 = 0.00495.
    assert amortisation_coeff(HAND, HAND_LOAD, 0.5, alpha_mb_s=0.01) == pytest.approx(0.00495)
    # Δ(N) = (3e-5 − 2e-5) − 0.00495/N: zero at N = 495, 5e-6 at N = 990.
    assert crossover_delta(HAND, HAND_LOAD, 495, alpha_mb_s=0.01) == pytest.approx(0.0, abs=1e-15)
    assert crossover_delta(HAND, HAND_LOAD, 990, alpha_mb_s=0.01) == pytest.approx(5e-6)
    assert crossover_concurrency(HAND, HAND_LOAD, alpha_mb_s=0.01) == pytest.approx(495.0)


def test_crossover_needs_beta_mb():
    no_mb = Calibration(1e-3, 1e-5, 1e-2, 1e-5, beta_mb=None)
    assert crossover_delta(no_mb, HAND_LOAD, 64) is None
    assert crossover_concurrency(no_mb, HAND_LOAD) is None


def test_published_h200_calibration():
    # μ_L = 512, μ_O = 256 (the paper's Table 4 workload): right side
    # (1/256)·1.2786e-3/8.9212e-3 = 5.5985e-4; the series θ²/2 + 2θ³/3 ≈ rhs gives θ ≈ 0.0327.
    load = Workload(512, 256)
    theta = theta_star(H200_QWEN3_8B, load)
    rhs = (1 / 256) * 1.2786e-3 / 8.9212e-3
    assert rhs == pytest.approx(5.5985e-4, rel=1e-4)
    assert theta == pytest.approx(0.032729, abs=1e-5)
    assert theta**2 / 2 + 2 * theta**3 / 3 == pytest.approx(rhs, rel=2e-3)
    # β_EB^w = (2.4853e-5·512 + 4.5865e-5·256)/768 = 3.1857e-5;
    # β_MB^e(1/3) = 2.494e-5 + 5.193e-5/3 + 1.478e-5/9 = 4.3892e-5.
    assert beta_eb_weighted(H200_QWEN3_8B, load) == pytest.approx(3.1857e-5, rel=1e-4)
    assert H200_QWEN3_8B.beta_mb_at(load.decode_share) == pytest.approx(4.38922e-5, rel=1e-4)
    # MB wins at c = 32 and EB at c = 2048, as in the paper's Table 4 (v1 11,584 vs EB 8,609
    # tok/s at 32; EB 27,198 vs v1 26,368 at 2048); the crossover lies near N = 220.
    assert crossover_delta(H200_QWEN3_8B, load, 32) < 0
    assert crossover_delta(H200_QWEN3_8B, load, 2048) > 0
    assert crossover_concurrency(H200_QWEN3_8B, load) == pytest.approx(219.9, abs=0.5)


def test_memory_safe_batch_paper_form_by_hand():
    # θ = 0.5, μ_L = 100, μ_O = 100 (p0 = 0.01), ε = 1/e (ln(1/ε) = 1), C = 10,000:
    # ν = 1/(p0²·μ_L) = 100; D = 100 + (0.5/(0.5·0.01))·ln 2 = 169.3147;
    # N̂* = ⌊(10,000 − 100)/169.3147⌋ = ⌊58.47⌋ = 58.
    assert memory_safe_batch(10_000, HAND_LOAD, 0.5, oom_prob=math.exp(-1)) == 58


def test_memory_safe_batch_clt_form_satisfies_its_inequality():
    load, theta, cap, eps = Workload(512, 256), 0.05, 1_000_000, 0.01
    n = memory_safe_batch(cap, load, theta, oom_prob=eps, form="clt")
    p0, lam = 1 / 256, -math.log(1 - theta)
    demand = 512 + (1 - theta) / (theta * p0) * lam
    sigma = math.sqrt(2 * lam * (1 + (p0 * 512 + lam / theta) ** 2)) / p0

    def need(m):
        return m * demand + sigma * math.sqrt(m * math.log(1 / eps))

    assert need(n) <= cap < need(n + 1)


def test_memory_safe_batch_rejects_bad_theta():
    assert memory_safe_batch(1e6, HAND_LOAD, 0.0) is None
    assert memory_safe_batch(1e6, HAND_LOAD, 1.0) is None
    with pytest.raises(ValueError):
        memory_safe_batch(1e6, HAND_LOAD, 0.5, form="other")
