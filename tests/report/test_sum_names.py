"""Sums of overlapping waits are named as sums; budgets and diff default to elapsed or spent time."""
from __future__ import annotations

import pytest

from taxbreak.report.budget import parse_budget
from taxbreak.report.diff import DIFF_METRICS, HOST_METRICS, diff_summaries
from taxbreak.report.metrics import METRIC_KEYS, ORCHESTRATION_METRICS, RENAMED_METRICS
from taxbreak.trace.errors import ERROR_CODES, BudgetError

from .fake import phase_metrics

# per-kernel sums of intervals that overlap, and idle time over the device's own span only
NOT_ELAPSED = ("queue_wait_sum_us", "tklqt_sum_us", "device_span_idle_us")


@pytest.mark.parametrize("old, table, location", [
    ("queue_wait_us", "all", "line 2, key all.queue_wait_us"),
    ("tklqt_us", "decode", "line 2, key decode.tklqt_us"),
    ("gpu_idle_us", "all", "line 2, key all.gpu_idle_us"),
])
def test_old_names_in_a_budget_are_a_typed_error_naming_both_choices(old, table, location):
    with pytest.raises(BudgetError) as info:
        parse_budget(f'[{table}]\n{old} = "<= 5000"\n', path="b.toml")
    err = info.value
    assert (err.code, err.location, err.exit_code) == ("budget.renamed_metric", location, 2)
    assert err.code in ERROR_CODES
    new = RENAMED_METRICS[old][0]
    assert err.message.startswith(f"metric {old!r} was renamed: it is {new}, ")
    assert err.hint.startswith(f"write {new} to keep this limit on the sum, or ")


def test_queue_wait_rename_message_and_hint_exact():
    with pytest.raises(BudgetError) as info:
        parse_budget('[regression]\nqueue_wait_us = 5\n')
    assert info.value.message == ("metric 'queue_wait_us' was renamed: it is queue_wait_sum_us, "
                                  "a per-kernel sum of queue waits that overlap")
    assert info.value.hint == ("write queue_wait_sum_us to keep this limit on the sum, or "
                               "queue_wait_union_us (elapsed time during which some kernel waited)")


def test_new_names_take_limits_when_named():
    budget = parse_budget('[all]\nqueue_wait_sum_us = "<= 5000"\ntklqt_sum_us = "<= 9"\n'
                          'device_span_idle_us = "<= 1"\n[regression]\nqueue_wait_sum_us = 5\n')
    assert [lim.metric for lim in budget.limits] == ["queue_wait_sum_us", "tklqt_sum_us", "device_span_idle_us"]
    assert set(RENAMED_METRICS).isdisjoint(METRIC_KEYS)


def test_defaults_of_check_and_diff_hold_no_overlapping_sum():
    for key in NOT_ELAPSED:
        assert key not in ORCHESTRATION_METRICS  # what [regression] max_pct checks
        assert key not in DIFF_METRICS + HOST_METRICS
    assert {"wall_us", "device_busy_us", "device_idle_us", "hdbi", "orchestration_us"} <= set(DIFF_METRICS)
    assert "exposed_orchestration_us" in HOST_METRICS


def test_diff_has_one_row_per_idle_cause_of_either_side():
    base = {"all": phase_metrics(wall_us=100.0, device_idle_us=30.0,
                                 idle_by_cause_us={"python": 20.0, "nothing_pending": 10.0}), "phases": {}}
    new = {"all": phase_metrics(wall_us=90.0, device_idle_us=25.0,
                                idle_by_cause_us={"python": 15.0, "nothing_pending": 5.0, "sync": 5.0}),
           "phases": {}}
    out = diff_summaries(base, new)["all"]
    causes = [k for k in out if k.startswith("idle_by_cause_us.")]
    assert causes == ["idle_by_cause_us.python", "idle_by_cause_us.nothing_pending", "idle_by_cause_us.sync"]
    assert out["idle_by_cause_us.python"] == {"base": 20.0, "new": 15.0, "delta": -5.0, "delta_pct": -25.0}
    assert out["idle_by_cause_us.sync"] == {"base": None, "new": 5.0, "delta": None, "delta_pct": None}
    assert out["wall_us"]["delta"] == -10.0 and out["device_idle_us"]["delta"] == -5.0
    assert not any(key in out for key in NOT_ELAPSED)
