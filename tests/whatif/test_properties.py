"""Property tests: the crossing interpolation and the crossover's sign."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from taxbreak.whatif.batching import Workload, crossover_concurrency, crossover_delta, memory_safe_batch, theta_star
from taxbreak.whatif.calibration import Calibration
from taxbreak.whatif.transition import crossing


@settings(max_examples=80, deadline=None)
@given(st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=2, max_size=8),
       st.floats(min_value=0.05, max_value=0.95))
def test_crossing_lands_between_the_bracketing_points(ys, threshold):
    x = np.arange(1, len(ys) + 1, dtype=float) * 2.0
    y = np.array(ys)
    hit = crossing(x, y, threshold)
    above = np.flatnonzero(y >= threshold)
    if len(above) == 0:
        assert hit["status"] == "not_reached"
    elif above[0] == 0:
        assert hit == {"status": "at_or_below_grid", "x": x[0]}
    else:
        i = above[0]
        assert x[i - 1] <= hit["x"] <= x[i]
        # the interpolated line passes through the threshold at x
        assert np.interp(hit["x"], x[i - 1 : i + 1], y[i - 1 : i + 1]) == pytest.approx(threshold, abs=1e-9)


calibrations = st.builds(
    lambda ap, bp, ad, bd, a, b, c: Calibration(ap, bp, ad, bd, beta_mb=(a, b, c)),
    st.floats(1e-4, 1e-1), st.floats(1e-7, 1e-4), st.floats(1e-4, 1e-1), st.floats(1e-7, 1e-4),
    st.floats(1e-7, 1e-4), st.floats(-1e-5, 1e-4), st.floats(-1e-5, 1e-4),
)


@settings(max_examples=80, deadline=None, derandomize=True)
@given(calibrations, st.floats(16, 4096), st.floats(16, 4096), st.integers(1, 100_000))
@example(Calibration(0.0625, 5.930572345106556e-05, 0.0625, 5.930572345106556e-05,
                     beta_mb=(5.930572345106556e-05, 1e-16, 0.0)), 16.0, 16.0, 1)
def test_delta_sign_flips_at_the_crossover(calib, mu_l, mu_o, n):
    load = Workload(mu_l, mu_o)
    delta = crossover_delta(calib, load, n)
    n_cross = crossover_concurrency(calib, load)
    if n_cross is None or abs(n - n_cross) < 1e-6 * n_cross:
        return
    # Δ(N) = contention − K/N is monotone in N: it has the sign of Δ(∞) beyond N×, the other below.
    # Δ(∞) is the contention term alone; a large finite N is not enough when the contention
    # is tiny and N× lies beyond it (hypothesis found N× > 1e12 with β_MB ≈ β_EB)
    far = crossover_delta(calib, load, math.inf)
    # Near N× the two terms cancel and float rounding decides the sign: only a
    # difference well above the rounding of |contention| + |K/N| is a claim.
    if abs(delta) <= 1e-9 * (abs(far) + abs(delta - far)):
        return
    assert np.sign(delta) == (np.sign(far) if n > n_cross else -np.sign(far))


@settings(max_examples=50, deadline=None)
@given(calibrations, st.floats(1e4, 1e7), st.floats(1.0, 4.0))
def test_memory_safe_batch_grows_with_capacity(calib, capacity, factor):
    load = Workload(512, 256)
    theta = theta_star(calib, load)
    for form in ("paper", "clt"):
        assert memory_safe_batch(capacity * factor, load, theta, form=form) >= memory_safe_batch(capacity, load, theta, form=form)
