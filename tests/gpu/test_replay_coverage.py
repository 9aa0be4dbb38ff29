"""The input-rebuilding harness on real CPU traces: every recorded ATen op of
small workloads and of the tiny model presets is rebuilt and run alone."""
from __future__ import annotations

import pytest
import torch

from taxbreak.capture.replay import distinct_records, rebuild_coverage
from taxbreak.capture.replay_inputs import SKIPPED_OPS

from .workloads import EXPECTED_SHAPES, host_tables, pieces_workload, profile_to

# What the recorded shapes cannot express (see replay_inputs module doc).
KNOWN_UNSUPPORTED = {"aten::index": "Tensor?[] indices"}


def coverage_of(tmp_path, name, fn):
    trace = profile_to(tmp_path / f"{name}.json", fn)
    records = distinct_records(host_tables(trace))
    assert records, "the profiler recorded no ATen op"
    return rebuild_coverage(records, device="cpu")


def _check_only_known_gaps(cov):
    skipped = cov[cov["status"] == "skipped"]
    assert set(skipped["op_name"]) <= set(SKIPPED_OPS)
    unsupported = cov[cov["status"] == "unsupported"]
    for row in unsupported.itertuples(index=False):
        assert row.op_name in KNOWN_UNSUPPORTED and KNOWN_UNSUPPORTED[row.op_name] in row.reason, row


def test_pieces_workload_rebuilds_with_recorded_output_shapes(tmp_path):
    cov = coverage_of(tmp_path, "pieces", pieces_workload)
    _check_only_known_gaps(cov)
    rebuilt = cov[cov["status"] == "rebuilt"]
    assert len(rebuilt) >= 100
    for op_name, shapes in EXPECTED_SHAPES.items():
        got = rebuilt.loc[rebuilt["op_name"] == op_name, "output_shapes"].tolist()
        assert shapes in got, (op_name, got)
    assert {"aten::nonzero", "aten::index_add"} <= set(cov.loc[cov["status"] == "skipped", "op_name"])


def _prefill_and_decode(preset):
    from taxbreak.capture.models import build_model

    model = build_model(preset, tiny=True)

    def run():
        logits, cache = model(torch.zeros(2, 8, dtype=torch.long))
        model(logits[:, -1:].argmax(-1), cache)

    return run


@pytest.mark.parametrize("preset,full", [("llama-3.2-1b", True), ("gpt2", True),
                                         ("olmoe-1b-7b", False), ("qwen1.5-moe-a2.7b", False)])
def test_tiny_presets_rebuild(tmp_path, preset, full):
    cov = coverage_of(tmp_path, preset, _prefill_and_decode(preset))
    _check_only_known_gaps(cov)
    if full:  # dense models: every recorded op rebuilds
        assert (cov["status"] == "rebuilt").all(), cov[cov["status"] != "rebuilt"]
    else:  # MoE routing: nonzero/item are skipped, x[idx] is unsupported; the rest rebuilds
        assert (cov["status"] == "rebuilt").mean() > 0.95
        assert "aten::nonzero" in set(cov.loc[cov["status"] == "skipped", "op_name"])
