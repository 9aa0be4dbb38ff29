"""Least-squares fits recover planted cost-model parameters."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from taxbreak.whatif.fit import fit_linear, fit_quadratic, r_squared


def test_linear_recovers_published_prefill_exactly():
    # T_p = 1.2786e-3 + 2.4853e-5·L on the authors' prefill sizes.
    tokens = np.array([256, 512, 1024, 2048, 4096], dtype=float)
    fit = fit_linear(tokens, 1.2786e-3 + 2.4853e-5 * tokens)
    assert fit.coef == pytest.approx((1.2786e-3, 2.4853e-5), rel=1e-9)
    assert fit.r2 == 1.0 and fit.points == 5


def test_quadratic_recovers_beta_mb_exactly():
    share = np.array([0.1, 0.2, 0.4, 0.8])
    fit = fit_quadratic(share, 2.494e-5 + 5.193e-5 * share + 1.478e-5 * share**2)
    assert fit.coef == pytest.approx((2.494e-5, 5.193e-5, 1.478e-5), rel=1e-8)
    assert fit.r2 == 1.0


def test_noisy_fit_has_r2_below_one():
    x = np.arange(1.0, 9.0)
    y = 2.0 + 3.0 * x + np.array([0.5, -0.5, 0.4, -0.4, 0.3, -0.3, 0.2, -0.2])
    fit = fit_linear(x, y)
    assert 0.9 < fit.r2 < 1.0
    assert fit.predict(0.0) == pytest.approx(fit.coef[0])


def test_underdetermined_fits_are_none():
    assert fit_linear(np.array([4.0, 4.0, 4.0]), np.array([1.0, 2.0, 3.0])) is None
    assert fit_quadratic(np.array([0.1, 0.2]), np.array([1.0, 2.0])) is None


def test_r2_undefined_without_spread():
    assert r_squared(np.array([2.0, 2.0]), np.array([2.0, 2.0])) is None
    assert fit_linear(np.array([1.0, 2.0]), np.array([5.0, 5.0])).r2 is None


def test_nan_points_are_left_out():
    fit = fit_linear(np.array([1.0, 2.0, np.nan, 4.0]), np.array([3.0, 5.0, 1.0, 9.0]))
    assert fit.coef == pytest.approx((1.0, 2.0)) and fit.points == 3


@settings(max_examples=50, deadline=None)
@given(
    st.floats(min_value=1e-6, max_value=1.0),
    st.floats(min_value=1e-8, max_value=1e-2),
    st.lists(st.integers(min_value=1, max_value=4096), min_size=2, max_size=12, unique=True),
)
def test_linear_recovers_any_noise_free_line(alpha, beta, xs):
    x = np.array(xs, dtype=float)
    fit = fit_linear(x, alpha + beta * x)
    assert fit.coef[0] == pytest.approx(alpha, rel=1e-6, abs=1e-12)
    assert fit.coef[1] == pytest.approx(beta, rel=1e-6)
