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


def _rank(device, orch, idle, devices, **extra):
    return _m(device, orch, queue_wait_sum_us=7.0, queue_wait_median_us=2.0, queue_wait_p99_us=5.0,
              queue_wait_union_us=6.0, wall_us=100.0, device_idle_us=sum(idle.values()),
              idle_by_cause_us=idle, devices=devices, hdbi_reason=None, **extra)


def _dev(busy, idle):
    return {"busy_us": busy, "idle_us": sum(idle.values()), "idle_by_cause_us": idle}


def test_idle_causes_sum_cause_by_cause_and_devices_stay_apart():
    idle0, idle1 = {"python": 10.0, "sync": 5.0}, {"python": 1.0, "sync": 0.0}
    r0 = _rank(300.0, 100.0, idle0, {"0": _dev(90.0, idle0)})
    r1 = _rank(100.0, 100.0, idle1, {"0": _dev(99.0, idle1)})
    combined, unmeasured = combine_metrics([r0, r1], ["0", "1"])
    assert combined["idle_by_cause_us"] == {"python": 11.0, "sync": 5.0}
    assert combined["device_idle_us"] == 16.0
    assert combined["devices"] == {"0/0": _dev(90.0, idle0), "1/0": _dev(99.0, idle1)}  # two GPUs, not one
    assert combined["wall_us"] == 200.0 and combined["queue_wait_sum_us"] == 14.0  # rank-time, time waited
    assert combined["hdbi"] == pytest.approx(400.0 / 600.0) and combined["hdbi_reason"] is None
    for key in ("queue_wait_median_us", "queue_wait_p99_us", "queue_wait_union_us"):
        assert combined[key] is None and key in unmeasured


def test_a_duplicate_rank_keeps_both_traces_devices():
    idle = {"python": 1.0}
    ranks = [_rank(1.0, 1.0, idle, {"0": _dev(1.0, idle)}) for _ in range(2)]
    combined, _ = combine_metrics(ranks, ["0", "0"])
    assert sorted(combined["devices"]) == ["0#1/0", "0/0"]


def test_idle_unmeasured_in_one_trace_is_unmeasured_combined():
    r0 = _rank(1.0, 1.0, {"python": 1.0}, {"0": _dev(1.0, {"python": 1.0})})
    r1 = _rank(1.0, 1.0, {"python": 1.0}, None) | {"idle_by_cause_us": None}
    combined, unmeasured = combine_metrics([r0, r1])
    assert combined["idle_by_cause_us"] is None and combined["devices"] is None
    assert "idle_by_cause_us" in unmeasured and "devices" in unmeasured


def test_hdbi_reason_of_an_unmeasured_rank_carries_into_the_combination():
    why = "ΔCT not measured: no dispatch baseline (T_dispatch_base) in this trace"
    r0 = _rank(300.0, 100.0, {}, {})
    r1 = _rank(100.0, 100.0, {}, {}) | {"hdbi": None, "hdbi_reason": why, "library_us": None}
    combined, unmeasured = combine_metrics([r0, r1])
    assert combined["hdbi"] is None
    assert why in combined["hdbi_reason"] and combined["hdbi_reason"] == unmeasured["hdbi"]


def test_chain_coverage_is_chained_kernels_over_kernels():
    combined, _ = combine_metrics([_m(1.0, 1.0, kernels=4, chain_coverage=0.75),
                                   _m(1.0, 1.0, kernels=6, chain_coverage=0.5)])
    assert combined["chain_coverage"] == 0.6  # (3 + 3) / 10, not the mean 0.625
