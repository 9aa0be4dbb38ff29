"""The batching-policy advice for a workload, and its calibration fitted from sweep data.

Fits (sweep table, seconds):

* prefill  T_p = α_p + β_p·L     L = B·S prompt tokens of a prefill step, T_p its mean span
* decode   T_d = α_d + β_d·k     k = B requests of a decode step, T_d its mean span
* mixed    β_MB(r) = a + b·r + c·r²   β_MB = mean mixed-step span / tokens in the step

The decode fit pools every sequence length of the grid; its R² shows how much
the context length (ignored by the linear model) matters.
"""
from __future__ import annotations

import pandas as pd

from .batching import (
    Workload,
    amortisation_coeff,
    beta_eb_weighted,
    crossover_concurrency,
    crossover_delta,
    memory_safe_batch,
    solve_theta,
)
from .calibration import Calibration
from .fit import fit_linear, fit_quadratic

US = 1e-6


def fit_calibration(table: pd.DataFrame, source: str = "fitted from sweep") -> tuple[Calibration | None, dict]:
    """Least-squares calibration from a sweep table (see module docstring).

    Returns:
        ``(calibration or None, fits)``; ``fits`` has each fit's coefficients,
        R² and point count, or the reason it could not be made.
    """
    fits: dict = {}
    grid = table[table["kind"] == "grid"] if not table.empty else table
    prefill = _fit(grid, "prefill", "tokens_per_step", lambda r: r["step_us"] * US, fit_linear)
    decode = _fit(grid, "decode", "batch", lambda r: r["step_us"] * US, fit_linear)
    mixed_rows = table[table["kind"] == "mixed"] if not table.empty else table
    beta_mb = _fit(mixed_rows, "mixed", "decode_share", lambda r: r["step_us"] * US / r["tokens_per_step"], fit_quadratic)
    for name, fit in (("prefill", prefill), ("decode", decode), ("beta_mb", beta_mb)):
        fits[name] = fit.as_dict() if fit is not None else {"reason": "fewer distinct points than coefficients"}
    if prefill is None or decode is None:
        return None, fits
    calib = Calibration(
        alpha_p_s=prefill.coef[0], beta_p_s_per_token=prefill.coef[1],
        alpha_d_s=decode.coef[0], beta_d_s_per_request=decode.coef[1],
        beta_mb=None if beta_mb is None else tuple(beta_mb.coef), source=source,
        r2={"prefill": prefill.r2, "decode": decode.r2, "beta_mb": None if beta_mb is None else beta_mb.r2},
    )
    return calib, fits


def _fit(rows: pd.DataFrame, phase: str, x_col: str, y_fn, fitter):
    if rows.empty:
        return None
    rows = rows[rows["phase"] == phase].dropna(subset=[x_col, "step_us"])
    if rows.empty:
        return None
    return fitter(rows[x_col].to_numpy(dtype=float), y_fn(rows).to_numpy(dtype=float))


def advise(calib: Calibration, workload: Workload, concurrencies: list[int], *, alpha_mb_s: float | None = None,
           kv_capacity_tokens: float | None = None, oom_prob: float = 0.01) -> dict:
    """θ*, the EB–MB crossover and the winner at each concurrency N, and N̂* when capacity is given.

    Returns:
        A dict with every intermediate value (so each can be checked by hand),
        ``per_concurrency`` rows ``{N, k_hat, delta_s_per_token, winner}`` and
        ``not_computed`` where a value needs data that is missing.
    """
    out = {"calibration": calib.as_dict(), "workload": {"prompt_tokens": workload.prompt_tokens,
                                                        "output_tokens": workload.output_tokens},
           "warnings": fit_warnings(calib)}
    if calib.alpha_p_s <= 0 or calib.alpha_d_s <= 0:
        out["not_computed"] = "α_p and α_d must be > 0 for θ* (a fitted intercept came out <= 0)"
        return out
    rhs = workload.completion_prob * calib.alpha_p_s / calib.alpha_d_s
    theta = solve_theta(rhs)
    alpha_mb = calib.alpha_p_s if alpha_mb_s is None else alpha_mb_s
    out.update({
        "p": workload.completion_prob, "theta_rhs": rhs, "theta_star": theta,
        "decode_share_r": workload.decode_share, "alpha_mb_s": alpha_mb,
        "alpha_mb_source": "default α_MB = α_p" if alpha_mb_s is None else "given",
        "beta_eb_w_s_per_token": beta_eb_weighted(calib, workload),
        "beta_mb_e_s_per_token": calib.beta_mb_at(workload.decode_share),
        "amortisation_k": amortisation_coeff(calib, workload, theta, alpha_mb_s),
        "crossover_concurrency": crossover_concurrency(calib, workload, alpha_mb_s),
        "per_concurrency": [_at(calib, workload, n, theta, alpha_mb_s) for n in concurrencies],
    })
    if out["beta_mb_e_s_per_token"] is None:
        out["not_computed"] = "Δ(N) needs the mixed-batch fit β_MB(r) (sweep --mixed-shares or a calibration with beta_mb)"
    out["memory_safe_batch"] = _memory(kv_capacity_tokens, workload, theta, oom_prob)
    return out


def fit_warnings(calib: Calibration, min_r2: float = 0.9) -> list[str]:
    """A warning per fit whose R² is below ``min_r2``: the linear model does not describe the data."""
    return [f"{name} fit R² = {r2:.3f} < {min_r2}: the cost model describes these measurements poorly; "
            "treat the advice as indicative" for name, r2 in calib.r2.items() if r2 is not None and r2 < min_r2]


def _at(calib: Calibration, workload: Workload, n: int, theta: float, alpha_mb_s: float | None) -> dict:
    delta = crossover_delta(calib, workload, n, alpha_mb_s)
    winner = None if delta is None else ("EB" if delta > 0 else ("MB" if delta < 0 else "tie"))
    return {"concurrency": n, "k_hat": theta * n, "delta_s_per_token": delta, "winner": winner}


def _memory(capacity: float | None, workload: Workload, theta: float, oom_prob: float) -> dict:
    if capacity is None:
        return {"not_computed": "needs the KV-cache capacity in tokens (--kv-capacity-tokens)"}
    return {
        "kv_capacity_tokens": capacity, "oom_prob": oom_prob,
        "paper": memory_safe_batch(capacity, workload, theta, oom_prob, "paper"),
        "clt": memory_safe_batch(capacity, workload, theta, oom_prob, "clt"),
        "forms": "paper: ⌊(C − ν·ln(1/ε))/D(θ)⌋ (Prop. 3); clt: N·D(θ) + σ(θ)·√(N·ln(1/ε)) ≤ C (authors' code)",
    }
