"""Properties of the serving figures over random planted traces."""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

from taxbreak.decompose.analysis import analyze
from taxbreak.decompose.graph_cost import graph_launches
from taxbreak.decompose.ranks import rank_skew
from taxbreak.synth.planted import build, random_spec
from taxbreak.synth.ranks import PlantedRanksSpec, RankWork, build_ranks

SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
work = st.builds(RankWork, python_ns=st.integers(1_000, 400_000), dispatch_ns=st.integers(500, 100_000),
                 compute_ns=st.integers(20_000, 400_000))


@SETTINGS
@given(st.integers(2, 3).flatmap(lambda n: st.lists(st.lists(work, min_size=n, max_size=n), min_size=2, max_size=5)))
def test_planted_skew_is_recovered_for_any_work(segments):
    planted = build_ranks(PlantedRanksSpec(segments, steps=[len(segments)]))
    result = rank_skew([analyze(t) for t in planted.tables])
    got, truth = result.collectives, planted.collectives
    assert got["lateness_ns"].tolist() == truth["lateness_ns"].tolist()
    explained = got["cause_residual_ns"].notna().to_numpy()
    assert (got.loc[explained, "cause_residual_ns"] == 0).all()
    for layer in ("python", "dispatch", "compute"):  # the planted differences, exactly
        assert got.loc[explained, f"cause_{layer}_ns"].astype(int).tolist() == truth.loc[explained, f"{layer}_ns"].tolist()
    assert (result.steps["residual_ns"] == 0).all()


@SETTINGS
@given(st.integers(0, 2**31), st.booleans())
def test_overlap_and_graph_cost_identities(seed, graphs):
    spec = random_spec(np.random.default_rng(seed), steps=4, ops=3, streams=2, graphs=graphs)
    planted = build(spec)
    analysis = analyze(planted.tables)
    summary = analysis.summary
    for s in summary["overlap"]["steps"]:
        assert abs(s["hidden_us"] + s["exposed_us"] - s["prep_us"]) < 0.002
        assert 0 <= s["what_if_idle_us"] <= s["host_work_us"] <= s["prep_us"] + 0.001
    cost = summary["graph_launch_cost"]
    graph_nodes = int((planted.kernels["graph_node"] >= 0).sum())
    launches = int((planted.kernels["graph_node"] == 0).sum())
    assert cost.get("launches", 0) == launches
    assert sum(d["launches"] for d in cost["devices"].values()) == launches
    assert int(graph_launches(analysis.kernels)["nodes"].sum()) == graph_nodes  # every replayed node counted once
    assert (cost["reason"] is None) == (graph_nodes > 0)
