"""The serving figures on the real traces of the corpus: their identities hold."""
from __future__ import annotations

import pytest

from taxbreak.decompose.analysis import analyze
from taxbreak.decompose.ranks import rank_skew
from tests.conftest import SHARED_TRACES

HTA = SHARED_TRACES / "HolisticTraceAnalysis/tests/data"
STEPPED = [HTA / "nccl_parser_config/nccl_data.json.gz", HTA / "df_index_resolver/df_index_resolver.json.gz",
           HTA / "negative_queue_length_values_check/rank0.json.gz"]
pytestmark = pytest.mark.skipif(not SHARED_TRACES.is_dir(), reason="real-trace corpus not found: see docs/testing.md")


@pytest.mark.parametrize("path", STEPPED, ids=lambda p: p.parent.name)
def test_overlap_identities(path):
    overlap = analyze(path).summary["overlap"]
    assert overlap["reason"] is None and overlap["steps"]
    for s in overlap["steps"]:
        assert s["hidden_us"] + s["exposed_us"] == pytest.approx(s["prep_us"], abs=0.002)
        assert 0 <= s["what_if_idle_us"] <= s["host_work_us"] <= s["prep_us"]


def test_graph_launch_cost_of_the_dlrm_trace():
    cost = analyze(HTA / "negative_queue_length_values_check/rank0.json.gz").summary["graph_launch_cost"]
    gpu = cost["devices"]["0"]
    assert (cost["launches"], gpu["sizes"]) == (70, 5)
    assert gpu["a_us"] is not None and gpu["b_us_per_node"] > 0 and 0 < gpu["r2"] <= 1


@pytest.mark.parametrize("path", STEPPED[:2], ids=lambda p: p.parent.name)
def test_single_rank_nccl_traces_say_one_rank(path):
    """The corpus's DDP/NCCL traces each hold one rank of their run: skew is not measured."""
    summary = rank_skew([analyze(path)]).summary
    assert summary["reason"].startswith("one rank")
