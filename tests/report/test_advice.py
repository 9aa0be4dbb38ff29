"""The next-target advice on hand-built summaries (rules in taxbreak/report/advice.py)."""
from __future__ import annotations

from taxbreak.report.advice import advise


def _summary(**values):
    base = {"framework_us": 10.0, "library_us": 5.0, "launch_floor_us": 45.0, "launch_latency_us": 20.0,
            "orchestration_us": 60.0, "exposed_orchestration_us": 80.0, "hidden_orchestration_us": 20.0,
            "host_sync_us": 0.0, "host_thread_us": 100.0}
    base.update(values)
    return {"all": base}


def test_launch_floor_dominates_points_at_fusion_and_graphs():
    first = advise(_summary())[0]
    assert "launch floor" in first.finding and "75% of T_Orchestrate" in first.finding
    assert "CUDA Graphs" in first.action


def test_framework_dominates_points_at_the_software_stack():
    first = advise(_summary(framework_us=50.0, launch_floor_us=5.0))[0]
    assert "framework translation" in first.finding and "83%" in first.finding
    assert "torch.compile" in first.action


def test_library_dominates():
    first = advise(_summary(library_us=40.0, launch_floor_us=10.0, framework_us=10.0))[0]
    assert "CUDA-library" in first.finding


def test_residual_above_floor_is_flagged_only_when_larger():
    assert not any("above the floor" in a.finding for a in advise(_summary()))
    assert any("above the floor" in a.finding for a in advise(_summary(launch_latency_us=50.0)))


def test_exposed_versus_hidden():
    assert "80% of host work ran while the device was idle" in advise(_summary())[1].finding
    hidden = advise(_summary(exposed_orchestration_us=10.0, hidden_orchestration_us=90.0))
    assert any("only 10%" in a.finding for a in hidden)


def test_sync_waits_flagged_only_when_host_bound():
    assert any("synchronize" in a.finding for a in advise(_summary(host_sync_us=30.0)))
    device_bound = _summary(host_sync_us=30.0, exposed_orchestration_us=10.0, hidden_orchestration_us=90.0)
    assert not any("synchronize" in a.finding for a in advise(device_bound))


def test_no_kernels_says_so_instead_of_guessing():
    only = advise({"all": {"orchestration_us": None}})
    assert len(only) == 1 and "need a CUDA device" in only[0].finding
