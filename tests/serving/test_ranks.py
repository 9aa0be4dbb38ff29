"""Cross-rank skew (docs/serving.md §1): planted multi-rank traces recovered exactly, and the
2-GPU Nsight export of the corpus."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from taxbreak.decompose.analysis import analyze
from taxbreak.decompose.ranks import rank_skew
from taxbreak.synth.ranks import PlantedRanksSpec, RankWork as W, build_ranks
from tests.conftest import SHARED_TRACES

SEGMENTS = [[W(), W(), W()],
            [W(python_ns=300_000), W(), W(python_ns=100_000)],  # rank 0 late by Python
            [W(), W(compute_ns=250_000), W()],  # rank 1 late by a longer kernel
            [W(dispatch_ns=80_000), W(), W()],  # rank 0 late by dispatch
            [W(), W(), W(python_ns=40_000, dispatch_ns=30_000)]]  # rank 2: two layers


def _recovered(one_trace: bool):
    planted = build_ranks(PlantedRanksSpec(SEGMENTS, steps=[2, 3], one_trace=one_trace))
    analyses = [analyze(t) for t in planted.tables]
    labels = ["trace"] if one_trace else ["r0", "r1", "r2"]
    return planted, rank_skew(analyses, labels)


@pytest.fixture(scope="module", params=[False, True], ids=["one-trace-per-rank", "one-export"])
def case(request):
    return _recovered(request.param)


def _rank_index(result, labels):
    return [None if pd.isna(label) else result.ranks.index(label) for label in labels]


def test_late_rank_and_lateness_recovered_exactly(case):
    planted, result = case
    truth, got = planted.collectives, result.collectives
    assert got["lateness_ns"].tolist() == truth["lateness_ns"].tolist()
    assert got["transfer_ns"].tolist() == truth["transfer_ns"].tolist()
    late = [None if pd.isna(x) else int(x) for x in truth["late_rank"]]
    assert _rank_index(result, got["late_rank"].tolist()) == late


def test_late_causes_are_the_planted_layers(case):
    planted, result = case
    got, truth = result.collectives.iloc[1:], planted.collectives.iloc[1:]
    for layer in ("python", "dispatch", "compute"):
        assert got[f"cause_{layer}_ns"].astype(int).tolist() == truth[f"{layer}_ns"].tolist()
    assert (got["cause_residual_ns"] == 0).all()
    assert got["cause"].tolist() == ["python", "compute", "dispatch", "python"]
    # the first collective has no earlier moment the ranks shared: n/a with its reason, not 0
    assert result.collectives["cause_python_ns"].isna().iloc[0]
    assert result.collectives["cause_reason"].iloc[0]


def test_skew_transfer_compute_idle_add_up_per_step_and_rank(case):
    planted, result = case
    steps = result.steps.assign(rank=_rank_index(result, result.steps["rank"].tolist()))
    merged = steps.merge(planted.steps, on=["step", "rank"], suffixes=("", "_truth"))
    assert len(merged) == len(planted.steps)
    for col in ("wall_ns", "skew_ns", "transfer_ns"):
        assert merged[col].tolist() == merged[f"{col}_truth"].tolist()
    assert (result.steps["residual_ns"] == 0).all() and result.summary["steps_add_up"]


def test_per_rank_durations_are_clock_free(case):
    """Per-rank skew rests on durations only: each rank on its own clock gives the same answer."""
    planted, result = case
    skew = result.arrivals["skew_ns"].to_numpy().reshape(-1, 3)
    assert skew.tolist() == planted.arrivals["skew_ns"].to_numpy().reshape(-1, 3).tolist()
    spread = result.collectives["end_spread_ns"]
    assert spread.isna().all() if len(planted.tables) > 1 else (spread == 0).all()


def test_one_rank_is_not_applicable():
    planted = build_ranks(PlantedRanksSpec(SEGMENTS[:2], steps=[2]))
    result = rank_skew([analyze(planted.tables[0])], ["r0"])
    assert result.summary["reason"].startswith("one rank") and result.collectives.empty


MFU = SHARED_TRACES / "nsys-ai/tests/fixtures"


@pytest.mark.skipif(not MFU.exists(), reason="real-trace corpus not found: see docs/testing.md")
@pytest.mark.parametrize("name, collectives", [("before", 33), ("after", 31)])
def test_two_gpu_nsight_export_adds_up(name, collectives):
    result = rank_skew([analyze(MFU / f"mfu_2gpu_{name}.sqlite")], ["mfu"])
    s = result.summary
    assert s["ranks"] == ["mfu:0", "mfu:1"] and s["collectives"] == collectives
    assert s["unmatched_collectives"] == {"mfu:0": 0, "mfu:1": 0}
    steps = result.steps
    parts = steps[["skew_ns", "transfer_ns", "compute_ns", "idle_ns"]].sum(axis=1)
    assert ((parts - steps["wall_ns"]).abs() <= 0.01 * steps["wall_ns"]).all()
    coll = result.collectives
    # the ends of a SendRecv are up to ~26 µs apart on the shared clock: the layer deltas explain the
    # lateness up to this collective's and the previous one's end spread (the two moments compared)
    bound = coll["end_spread_ns"] + coll["end_spread_ns"].shift(1)
    explained = coll.dropna(subset=["cause_residual_ns"]).index
    assert len(explained) == collectives - 1
    assert (coll.loc[explained, "cause_residual_ns"].abs() <= bound[explained]).all()
    assert np.isin(coll["cause"].dropna(), [c[6:-3] for c in coll if c.startswith("cause_")]).all()


def test_traces_without_device_work_have_no_rank():
    cpu = SHARED_TRACES / "HolisticTraceAnalysis/tests/data/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"
    if not cpu.exists():
        pytest.skip("real-trace corpus not found: see docs/testing.md")
    summary = rank_skew([analyze(cpu), analyze(cpu)], ["a", "b"]).summary
    assert summary["reason"].startswith("no device work") and summary["collectives"] == 0


def test_json_lists_every_collective(case):
    planted, result = case
    per = result.summary["per_collective"]
    assert [c["lateness_us"] for c in per] == (planted.collectives["lateness_ns"] / 1000).tolist()
    assert per[0]["cause_us"]["python"] is None and per[0]["cause_reason"]
    assert per[1]["cause"] == "python" and per[1]["cause_us"]["python"] == 298.0
    assert per[1]["late_t_launch_us"] is not None and per[1]["cause_residual_us"] == 0.0
