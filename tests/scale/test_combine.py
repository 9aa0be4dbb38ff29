"""Combining per-rank summaries: sums of additive metrics, ratios recomputed from sums."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from taxbreak.scale.combine import combine_metrics, combine_summaries, hdbi


def _m(device, orch, **extra):
    d = {"kernels": 10, "device_active_us": device, "orchestration_us": orch,
         "hdbi": hdbi(device, orch), "floor_us": 4.5, "floor_source": "published:H100"}
    d.update(extra)
    return d


def test_hdbi_is_recomputed_from_sums_not_averaged():
    combined, unmeasured = combine_metrics([_m(300.0, 100.0), _m(100.0, 100.0)])
    assert combined["device_active_us"] == 400.0
    assert combined["orchestration_us"] == 200.0
    assert combined["kernels"] == 20
    assert combined["hdbi"] == pytest.approx(400.0 / 600.0)
    assert combined["hdbi"] != pytest.approx((0.75 + 0.5) / 2)
    assert unmeasured == {}


def test_agreed_constants_are_kept_and_disagreeing_ones_are_none():
    combined, unmeasured = combine_metrics([_m(1.0, 1.0), _m(1.0, 1.0, floor_us=5.0, floor_source="given")])
    assert combined["floor_us"] is None and combined["floor_source"] is None
    assert unmeasured["floor_us"] == "differs between traces"
    same, _ = combine_metrics([_m(1.0, 1.0), _m(2.0, 1.0)])
    assert same["floor_us"] == 4.5 and same["floor_source"] == "published:H100"


def test_unmeasured_in_one_trace_is_unmeasured_in_the_combination():
    combined, unmeasured = combine_metrics([_m(1.0, 2.0), _m(1.0, None)])
    assert combined["orchestration_us"] is None
    assert combined["hdbi"] is None
    assert unmeasured["orchestration_us"] == "not measured in 1 of 2 traces"
    assert "hdbi" in unmeasured


def test_per_token_metrics_are_ratios_of_sums():
    a = _m(10.0, 30.0, tokens=3, orchestration_us_per_token=10.0)
    b = _m(10.0, 10.0, tokens=1, orchestration_us_per_token=10.0)
    combined, _ = combine_metrics([a, b])
    assert combined["tokens"] == 4
    assert combined["orchestration_us_per_token"] == pytest.approx(40.0 / 4)
    without_tokens, why = combine_metrics([a, _m(1.0, 1.0, tokens=None, orchestration_us_per_token=None)])
    assert without_tokens["orchestration_us_per_token"] is None and "orchestration_us_per_token" in why


def test_kernel_diversity_is_not_summed():
    combined, unmeasured = combine_metrics([_m(1.0, 1.0, kernel_diversity=0.5), _m(1.0, 1.0, kernel_diversity=0.2)])
    assert combined["kernel_diversity"] is None and "kernel_diversity" in unmeasured


def test_combine_summaries_combines_each_phase_over_the_traces_that_have_it():
    s0 = {"all": _m(3.0, 1.0), "phases": {"prefill": _m(2.0, 0.5), "decode": _m(1.0, 0.5)}}
    s1 = {"all": _m(1.0, 1.0), "phases": {"decode": _m(1.0, 1.0)}}
    out = combine_summaries([s0, s1])
    assert out["traces"] == 2
    assert out["all"]["hdbi"] == pytest.approx(4.0 / 6.0)
    assert out["phases"]["prefill"]["device_active_us"] == 2.0
    assert out["phases"]["decode"]["device_active_us"] == 2.0
    assert out["phases"]["decode"]["hdbi"] == pytest.approx(2.0 / 3.5)


def test_hdbi_edge_cases():
    assert hdbi(None, 1.0) is None
    assert hdbi(0.0, 0.0) is None
    assert hdbi(5.0, 0.0) == 1.0


_metric = st.floats(min_value=0, max_value=1e9, allow_nan=False)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(_metric, _metric, st.integers(0, 10**6)), min_size=1, max_size=8))
def test_combination_sums_additive_metrics_and_bounds_hdbi(rows):
    dicts = [_m(d, o, kernels=k) for d, o, k in rows]
    combined, _ = combine_metrics(dicts)
    assert combined["kernels"] == sum(k for _, _, k in rows)
    assert combined["device_active_us"] == pytest.approx(sum(d for d, _, _ in rows))
    total = combined["device_active_us"] + combined["orchestration_us"]
    if total > 0:
        assert 0.0 <= combined["hdbi"] <= 1.0
        assert combined["hdbi"] == pytest.approx(combined["device_active_us"] / total)
    else:
        assert combined["hdbi"] is None
