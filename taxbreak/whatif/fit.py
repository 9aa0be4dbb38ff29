"""Least-squares fits of the batching cost model (arXiv 2606.00516 §2.2, §2.5).

    prefill iteration   T_p(L) = α_p + β_p·L        L = prompt tokens in the iteration
    decode step         T_d(k) = α_d + β_d·k        k = requests in the decode batch
    mixed batch         β_MB(r) = a + b·r + c·r²    r = decode-token share, β_MB in s/token

Each fit returns its coefficients, the coefficient of determination R² and the
number of points, so a reader can judge how far the line can be trusted.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PolyFit:
    """A polynomial least-squares fit ``y = Σ coef[i]·x^i``.

    ``r2`` is ``None`` when the data have no spread (SS_tot = 0), where R² is
    undefined rather than 0 or 1.
    """

    coef: tuple[float, ...]
    r2: float | None
    points: int

    def predict(self, x: np.ndarray | float) -> np.ndarray | float:
        """Evaluate the fitted polynomial at ``x``."""
        x_arr = np.asarray(x, dtype=np.float64)
        y = sum(c * x_arr**i for i, c in enumerate(self.coef))
        return float(y) if np.ndim(y) == 0 else y

    def as_dict(self) -> dict:
        return {"coef": list(self.coef), "r2": self.r2, "points": self.points}


def fit_polynomial(x: np.ndarray, y: np.ndarray, degree: int) -> PolyFit | None:
    """Ordinary least squares of ``y`` on ``1, x, …, x^degree``.

    Args:
        x: predictor values.
        y: responses, same length.
        degree: 1 (linear) or 2 (quadratic).

    Returns:
        The fit, or ``None`` when there are fewer distinct ``x`` values than
        coefficients (the system is underdetermined: no honest fit exists).
    """
    x_arr = np.asarray(x, dtype=np.float64)
    y_arr = np.asarray(y, dtype=np.float64)
    keep = np.isfinite(x_arr) & np.isfinite(y_arr)
    x_arr, y_arr = x_arr[keep], y_arr[keep]
    if len(np.unique(x_arr)) < degree + 1:
        return None
    design = np.vander(x_arr, degree + 1, increasing=True)
    coef, *_ = np.linalg.lstsq(design, y_arr, rcond=None)
    return PolyFit(tuple(float(c) for c in coef), r_squared(y_arr, design @ coef), int(len(x_arr)))


def r_squared(y: np.ndarray, y_hat: np.ndarray) -> float | None:
    """R² = 1 − SS_res/SS_tot; ``None`` when SS_tot is 0 (all y equal)."""
    ss_tot = float(np.sum((y - np.mean(y)) ** 2))
    if ss_tot == 0.0:
        return None
    ss_res = float(np.sum((y - y_hat) ** 2))
    # Noise-free data leave rounding-level residuals; report those as an exact 1.
    if ss_res <= 1e-24 * ss_tot:
        return 1.0
    return 1.0 - ss_res / ss_tot


def fit_linear(x: np.ndarray, y: np.ndarray) -> PolyFit | None:
    """``y = α + β·x`` (prefill: x = prompt tokens L; decode: x = requests k)."""
    return fit_polynomial(x, y, 1)


def fit_quadratic(x: np.ndarray, y: np.ndarray) -> PolyFit | None:
    """``y = a + b·x + c·x²`` (β_MB against the decode-token share r, paper Eq. 11)."""
    return fit_polynomial(x, y, 2)
