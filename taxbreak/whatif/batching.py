"""Batching-policy advisor: exclusive (EB) vs mixed (MB) batching (arXiv 2606.00516).

Formulas (symbols as in /work/shared/reference/batching-and-interference.md):

* §2.3 asymptotic phase-switch ratio θ* = k*/N, the root in (0, 1) of
  ``θ/(1−θ) + ln(1−θ) = p·α_p/α_d`` with ``p = 1/μ_O`` (constant failure rate).
* §2.5 crossover
  ``Δ(N) = (β_MB^e(r) − β_EB^w) − 1/(μ_L+μ_O)·[(α_p − α_d·ln(1−θ)·μ_O)/k̂ − α_MB·(1+μ_O)/N]``
  with ``k̂ = θ·N``, ``r = μ_O/(μ_L+μ_O)``, ``β_EB^w = (β_p·μ_L + β_d·μ_O)/(μ_L+μ_O)``,
  ``α_MB = α_p`` by default. EB gives more throughput when Δ(N) > 0, MB when Δ(N) < 0.
* §2.4 memory-safe batch size, paper form (Prop. 3):
  ``N̂* = ⌊(C − ν·ln(1/ε)) / D(θ)⌋``, ``ν = 1/(p_0²·μ_L)``,
  ``D(θ) = μ_L + (1−θ)/(θ·p_0)·ln(1/(1−θ))``; and the CLT form the authors' code uses:
  ``N·D(θ) + σ(θ)·√(N·ln(1/ε)) ≤ C``, ``σ² = 2Λ(1 + (p_0·μ_L + Λ/θ)²)/p_0²``, ``Λ = −ln(1−θ)``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .calibration import Calibration


def theta_equation(theta: float) -> float:
    """Left side of the θ* equation, ``θ/(1−θ) + ln(1−θ)``: 0 at θ=0, increasing, → ∞ at 1."""
    return theta / (1.0 - theta) + math.log1p(-theta)


def solve_theta(rhs: float, tol: float = 1e-14, max_iter: int = 200) -> float:
    """θ* in (0, 1) with ``θ/(1−θ) + ln(1−θ) = rhs`` by bisection.

    The left side is strictly increasing on [0, 1) (its derivative is θ/(1−θ)²),
    so bisection on a bracket always converges; no starting guess is needed.

    Args:
        rhs: ``p·α_p/α_d`` (must be finite and > 0).
        tol: width of the final bracket.
        max_iter: bisection steps (200 halvings exhaust float64).

    Returns:
        θ*; ``0.0`` for ``rhs <= 0`` (no prefill overhead to amortise).
    """
    if not math.isfinite(rhs):
        raise ValueError(f"rhs must be finite, got {rhs}")
    if rhs <= 0.0:
        return 0.0
    low, high = 0.0, 1.0 - 1e-16
    if theta_equation(high) < rhs:  # rhs beyond ~35: θ* is within float rounding of 1
        return high
    for _ in range(max_iter):
        mid = 0.5 * (low + high)
        if theta_equation(mid) < rhs:
            low = mid
        else:
            high = mid
        if high - low <= tol:
            break
    return 0.5 * (low + high)


@dataclass(frozen=True)
class Workload:
    """Mean prompt length μ_L and mean output length μ_O, in tokens."""

    prompt_tokens: float
    output_tokens: float

    @property
    def decode_share(self) -> float:
        """r = μ_O/(μ_L+μ_O), the steady-state decode-token share."""
        return self.output_tokens / (self.prompt_tokens + self.output_tokens)

    @property
    def completion_prob(self) -> float:
        """p = 1/μ_O, the per-step completion probability under a geometric (CFR) output length."""
        return 1.0 / self.output_tokens


def theta_star(calib: Calibration, workload: Workload) -> float:
    """θ* for a workload: solve with right side ``p·α_p/α_d``, ``p = 1/μ_O``."""
    rhs = workload.completion_prob * calib.alpha_p_s / calib.alpha_d_s
    return solve_theta(rhs)


def beta_eb_weighted(calib: Calibration, workload: Workload) -> float:
    """β_EB^w = (β_p·μ_L + β_d·μ_O)/(μ_L+μ_O), in s/token."""
    total = workload.prompt_tokens + workload.output_tokens
    return (calib.beta_p_s_per_token * workload.prompt_tokens + calib.beta_d_s_per_request * workload.output_tokens) / total


def amortisation_coeff(calib: Calibration, workload: Workload, theta: float, alpha_mb_s: float | None = None) -> float:
    """K with ``Δ(N) = contention − K/N``.

    Because ``k̂ = θ·N``, the bracket of Δ(N) is ``[(α_p − α_d·ln(1−θ)·μ_O)/θ − α_MB·(1+μ_O)]/N``,
    so ``K = [(α_p − α_d·ln(1−θ)·μ_O)/θ − α_MB·(1+μ_O)]/(μ_L+μ_O)`` (seconds·requests/token).
    """
    alpha_mb = calib.alpha_p_s if alpha_mb_s is None else alpha_mb_s
    mu_l, mu_o = workload.prompt_tokens, workload.output_tokens
    eb_fixed = (calib.alpha_p_s - calib.alpha_d_s * math.log1p(-theta) * mu_o) / theta
    return (eb_fixed - alpha_mb * (1.0 + mu_o)) / (mu_l + mu_o)


def crossover_delta(calib: Calibration, workload: Workload, concurrency: float, alpha_mb_s: float | None = None) -> float | None:
    """Δ(N) of §2.5 in s/token; ``None`` without a β_MB fit. Positive: EB wins."""
    share = workload.decode_share
    beta_mb = calib.beta_mb_at(share)
    if beta_mb is None:
        return None
    theta = theta_star(calib, workload)
    contention = beta_mb - beta_eb_weighted(calib, workload)
    return contention - amortisation_coeff(calib, workload, theta, alpha_mb_s) / concurrency


def crossover_concurrency(calib: Calibration, workload: Workload, alpha_mb_s: float | None = None) -> float | None:
    """N at which Δ(N) = 0, i.e. K/contention; ``None`` when Δ never changes sign for N > 0."""
    beta_mb = calib.beta_mb_at(workload.decode_share)
    if beta_mb is None:
        return None
    contention = beta_mb - beta_eb_weighted(calib, workload)
    k_coeff = amortisation_coeff(calib, workload, theta_star(calib, workload), alpha_mb_s)
    if contention == 0.0 or (k_coeff > 0) != (contention > 0):
        return None
    return k_coeff / contention


def memory_safe_batch(
    kv_capacity_tokens: float, workload: Workload, theta: float, oom_prob: float = 0.01, form: str = "paper"
) -> int | None:
    """N̂*, the largest decode batch whose KV demand stays under capacity with probability 1−ε.

    Args:
        kv_capacity_tokens: C, the KV-cache capacity in tokens.
        workload: μ_L and μ_O (p_0 = 1/μ_O).
        theta: the phase-switch ratio θ (0 < θ < 1).
        oom_prob: ε, the allowed probability of running out of KV memory.
        form: ``"paper"`` (Prop. 3, Eq. eq:Nstar) or ``"clt"`` (the authors' code).

    Returns:
        N̂* ≥ 0, or ``None`` when θ is outside (0, 1).
    """
    if not 0.0 < theta < 1.0 or not 0.0 < oom_prob < 1.0:
        return None
    p0, mu_l = workload.completion_prob, workload.prompt_tokens
    lam = -math.log1p(-theta)
    demand = mu_l + (1.0 - theta) / (theta * p0) * lam  # D(θ)
    log_eps = math.log(1.0 / oom_prob)
    if form == "paper":
        nu = 1.0 / (p0 * p0 * mu_l)
        return max(0, math.floor((kv_capacity_tokens - nu * log_eps) / demand))
    if form == "clt":
        sigma = math.sqrt(2.0 * lam * (1.0 + (p0 * mu_l + lam / theta) ** 2)) / p0
        # D·x² + σ·√ln(1/ε)·x − C = 0 in x = √N; take the positive root.
        b = sigma * math.sqrt(log_eps)
        root = (-b + math.sqrt(b * b + 4.0 * demand * kv_capacity_tokens)) / (2.0 * demand)
        return max(0, math.floor(root * root))
    raise ValueError(f"unknown form {form!r}")
