"""Step/phase markers: names, counters, decorator use, and what the profiler records."""
from __future__ import annotations

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

import taxbreak
from taxbreak.capture import markers
from taxbreak.trace.errors import UsageError


@pytest.fixture(autouse=True)
def _fresh_counters():
    markers.reset_counters()


def test_steps_are_numbered_across_phases_and_runs():
    names = []
    for _ in range(2):
        with markers.run() as run_name:
            names.append(run_name)
            for phase_name in ("prefill", "decode", "decode"):
                with markers.step(phase_name) as name:
                    names.append(name)
    assert names == ["taxbreak/run/0", "taxbreak/prefill/0", "taxbreak/decode/1", "taxbreak/decode/2",
                     "taxbreak/run/1", "taxbreak/prefill/3", "taxbreak/decode/4", "taxbreak/decode/5"]


def test_phase_decorator_marks_each_call_as_a_new_step():
    seen = []

    @taxbreak.phase("decode")
    def decode_one(x):
        return x + 1

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            seen.append(decode_one(torch.ones(2)))
    names = [e.name for e in prof.events() if e.name.startswith("taxbreak/")]
    assert names == ["taxbreak/decode/0", "taxbreak/decode/1", "taxbreak/decode/2"]


def test_fixed_index_and_mixed_phase():
    with taxbreak.step("mixed", index=41) as name:
        pass
    assert name == "taxbreak/mixed/41"


def test_unknown_phase_is_a_usage_error():
    with pytest.raises(UsageError) as err:
        taxbreak.phase("generate")
    assert err.value.code == "usage.invalid" and err.value.exit_code == 2


def test_markers_work_without_a_profiler():
    with taxbreak.phase("prefill") as name:
        y = torch.ones(3).sum()
    assert name == "taxbreak/prefill/0" and float(y) == 3.0


def test_recursive_use_of_one_marker_nests_ranges():
    marker = taxbreak.step("mixed")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        with marker as outer:
            with marker as inner:
                torch.ones(1).add_(1)
    assert (outer, inner) == ("taxbreak/mixed/0", "taxbreak/mixed/1")
    events = {e.name: e for e in prof.events() if e.name.startswith("taxbreak/")}
    assert events[outer].time_range.start <= events[inner].time_range.start
    assert events[inner].time_range.end <= events[outer].time_range.end
