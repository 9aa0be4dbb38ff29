"""The advice on hand-built summaries (rules in taxbreak/report/advice.py): one account —
device idle time by cause — drives the verdict and the ranking of layers."""
from __future__ import annotations

from taxbreak.report.advice import advise

from taxbreak.decompose.idle import CAUSES


def _summary(idle: dict | None = None, wall: float = 1_000.0, **values):
    by_cause = dict.fromkeys(CAUSES, 0.0) | (idle if idle is not None else {"launch_latency": 300.0, "python": 100.0})
    total = sum(by_cause.values())
    base = {"kernels": 10, "framework_us": 10.0, "library_us": 5.0, "launch_floor_us": 45.0, "launch_latency_us": 20.0,
            "orchestration_us": 60.0, "hdbi": 0.5, "hdbi_reason": None, "wall_us": wall,
            "device_idle_us": total, "idle_by_cause_us": by_cause, "queue_wait_union_us": 30.0,
            "devices": {"0": {"idle_us": total, "busy_us": wall - total, "idle_by_cause_us": by_cause}}}
    base.update(values)
    return {"all": base}


def test_host_bound_verdict_and_exposed_ranking():
    advice = advise(_summary())
    assert "idle 40% of the elapsed time" in advice[0].finding and "HDBI 0.500" in advice[0].finding
    assert "the kernel launch path" in advice[1].finding and "75% of its idle time" in advice[1].finding
    assert "CUDA Graphs" in advice[1].action


def test_ranking_follows_exposed_time_not_raw_sums():
    # ΔFT is the smallest raw component, but Python time is what the device waited on
    advice = advise(_summary(idle={"python": 500.0, "launch_latency": 50.0}, framework_us=5.0))
    assert "Python between ops" in advice[1].finding and "torch.compile" in advice[1].action
    assert "launch floor" in advice[2].finding  # the raw composition is still reported, labelled as such


def test_device_bound_queueing_is_healthy():
    advice = advise(_summary(idle={"launch_latency": 20.0}, hdbi=0.9))
    assert advice[0].finding.startswith("device-bound") and "healthy queueing" in advice[0].finding
    assert "buy little" in advice[0].action


def test_every_cause_has_a_target_or_an_action():
    for cause in CAUSES:
        if cause == "nothing_pending":
            continue
        advice = advise(_summary(idle={cause: 400.0}))
        assert "the device waited longest on" in advice[1].finding and advice[1].action, cause


def test_copies_and_graph_gaps_have_their_own_actions():
    assert "pinned host memory" in advise(_summary(idle={"copy_issued": 400.0}))[1].action
    assert "graph" in advise(_summary(idle={"graph_internal": 400.0}))[1].action


def test_sync_and_untraced_causes_have_their_own_actions():
    sync = advise(_summary(idle={"sync": 400.0}))
    assert "synchronize calls" in sync[1].finding and ".item()" in sync[1].action
    untraced = advise(_summary(idle={"untraced": 400.0}))
    assert "with_stack" in untraced[1].action


def test_unmeasured_hdbi_is_named_with_its_reason():
    advice = advise(_summary(hdbi=None, hdbi_reason="ΔFT not measured: no kernel in this scope is linked"))
    assert "HDBI not measured" in advice[0].finding
    assert any(a.finding.startswith("HDBI is not measured: ΔFT not measured") for a in advice)
    assert not any("0.000" in a.finding for a in advice)


def test_no_kernels_says_so_instead_of_guessing():
    only = advise({"all": {"orchestration_us": None}})
    assert len(only) == 1 and "need a CUDA device" in only[0].finding


# --- HDBI and the idle share disagree: the verdict says why (advice.hdbi_idle_disagreement) ---

def test_agreeing_verdicts_carry_no_explanation():
    from taxbreak.report.advice import hdbi_idle_disagreement

    assert hdbi_idle_disagreement(_summary(idle={"launch_latency": 20.0}, hdbi=0.9)["all"]) is None  # 2 %, 0.9
    assert hdbi_idle_disagreement(_summary(idle={"python": 600.0}, hdbi=0.3)["all"]) is None  # 60 %, 0.3
    assert hdbi_idle_disagreement(_summary(idle={"python": 500.0}, hdbi=0.5)["all"]) is None  # 50 % is not > 50 %
    assert hdbi_idle_disagreement(_summary(idle={"python": 200.0}, hdbi=0.499)["all"]) is None  # 20 % is not < 20 %
    assert hdbi_idle_disagreement(_summary(idle={"nothing_pending": 900.0}, hdbi=None)["all"]) is None


def test_device_bound_hdbi_with_idle_outside_orchestration_names_the_largest_cause():
    from taxbreak.report.advice import hdbi_idle_disagreement

    s = _summary(idle={"nothing_pending": 800.0, "copy_issued": 50.0, "python": 100.0}, hdbi=0.847)
    assert hdbi_idle_disagreement(s["all"]) == (
        "HDBI 0.847 reads device-bound while the GPU was idle 95% of the elapsed time: HDBI weighs kernel "
        "time against T_Orchestrate (60.0 µs) only, and 89% of the idle time had a cause outside it; the "
        "largest is nothing pending (no device work left to run: the host ran on after the last kernel): "
        "800.0 µs, 84% of the idle time")
    verdict = advise(s)[0].finding
    assert verdict.startswith("the GPU was idle 95% of the elapsed time (HDBI 0.847); the host caused 16% ")
    assert verdict.endswith(". " + hdbi_idle_disagreement(s["all"]))


def test_device_bound_hdbi_with_idle_from_host_work_off_the_launch_paths():
    from taxbreak.report.advice import hdbi_idle_disagreement

    s = _summary(idle={"python": 500.0, "dispatch": 100.0, "sync": 10.0}, hdbi=0.847)
    assert hdbi_idle_disagreement(s["all"]) == (
        "HDBI 0.847 reads device-bound while the GPU was idle 61% of the elapsed time: HDBI weighs kernel "
        "time against T_Orchestrate (60.0 µs) only, while the host layers it counts caused 600.0 µs of idle "
        "time (98%), 10.0× T_Orchestrate: host work off the kernels' launch paths (before the first kernel, "
        "between steps), which T_Orchestrate does not count; the largest is Python between ops: 500.0 µs, "
        "82% of the idle time")


def test_host_bound_hdbi_with_little_idle_says_orchestration_was_hidden():
    from taxbreak.report.advice import hdbi_idle_disagreement

    s = _summary(idle={"python": 50.0, "launch_latency": 50.0}, hdbi=0.3, hidden_orchestration_us=900.0,
                 exposed_orchestration_us=40.0)
    assert hdbi_idle_disagreement(s["all"]) == (
        "HDBI 0.300 reads host-bound while the GPU was idle only 10% of the elapsed time: T_Orchestrate "
        "(60.0 µs) is host time per kernel, not time the device waited for; host work ran 900.0 µs while the "
        "device was busy (hidden) against 40.0 µs while it was idle (exposed), summed over threads")
    assert advise(s)[0].finding.startswith("device-bound: the GPU was idle 10% of the elapsed time (HDBI 0.300)")
    unmeasured = _summary(idle={"python": 50.0}, hdbi=0.3)
    assert hdbi_idle_disagreement(unmeasured["all"]).endswith(
        "not time the device waited for; host work hidden behind device work is not measured")


def test_a_cause_added_later_counts_outside_orchestration_under_its_own_name():
    from taxbreak.report.advice import hdbi_idle_disagreement

    s = _summary(idle={"dependency_wait": 700.0, "python": 10.0}, hdbi=0.9)
    assert hdbi_idle_disagreement(s["all"]).endswith(
        "99% of the idle time had a cause outside it; the largest is dependencies of issued kernels (stream waits, synchronizes, "
        "blocking copies): 700.0 µs, 99% of the idle time")


CORPUS_DISAGREEMENTS = {  # trace -> the cause the explanation names (docs/method.md §3.3)
    "HolisticTraceAnalysis/tests/data/negative_queue_length_values_check/rank0.json.gz":
        "the largest is memcpy/memset calls issued but not yet started: ",
}
CORPUS_AGREEMENTS = (
    "HolisticTraceAnalysis/tests/data/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    "HolisticTraceAnalysis/tests/data/df_index_resolver/df_index_resolver.json.gz",
    "nsys-ai/tests/fixtures/mfu_2gpu_before.sqlite",
)


def test_corpus_verdicts_explain_exactly_where_hdbi_and_idle_disagree(shared_traces):
    from taxbreak.decompose import analyze
    from taxbreak.readers import load_trace
    from taxbreak.report.advice import hdbi_idle_disagreement

    for rel, names in CORPUS_DISAGREEMENTS.items():
        why = hdbi_idle_disagreement(analyze(load_trace(shared_traces / rel)).summary["all"])
        assert why is not None and why.startswith("HDBI over the 96% of launch calls it covers 0.663 ") \
            and names in why, (rel, why)
    for rel in CORPUS_AGREEMENTS:
        assert hdbi_idle_disagreement(analyze(load_trace(shared_traces / rel)).summary["all"]) is None, rel
