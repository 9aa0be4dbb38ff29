"""trace_handler with a real torch.profiler schedule on CPU."""
from __future__ import annotations

import json

import pytest
import torch
from torch.profiler import ProfilerActivity, profile, schedule

import taxbreak
from taxbreak.capture import markers
from taxbreak.capture.models import build_model

from .trace_util import annotations, load_events


@pytest.mark.filterwarnings("ignore:Warning. Profiler clears events")
def test_one_run_directory_per_profiler_cycle(tmp_path):
    model = build_model("gpt2-tiny")
    ids = torch.randint(0, 2048, (1, 8), generator=torch.Generator().manual_seed(0))
    handler = taxbreak.trace_handler(tmp_path / "serve")
    markers.reset_counters()
    # 6 profiler steps: wait 1, warmup 1, active 1, twice -> two cycles
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_stack=True,
                 schedule=schedule(wait=1, warmup=1, active=1, repeat=2), on_trace_ready=handler) as prof:
        with torch.inference_mode():
            for _ in range(6):
                with taxbreak.phase("prefill"):
                    _, cache = model(ids)
                with taxbreak.phase("decode"):
                    model(ids[:, :1], cache=cache)
                prof.step()
    assert [d.name for d in handler.run_dirs] == ["step-000003", "step-000006"]
    seen = []
    for run_dir in handler.run_dirs:
        manifest = json.loads((run_dir / "manifest.json").read_text())
        assert manifest["source"] == "trace_handler" and manifest["new_tokens"] is None
        assert manifest["floor"]["floor_us"] is None  # CPU: unavailable, not 0
        assert set(manifest["outputs"]) == {"analysis", "summary", "tables"}
        names = [e["name"] for e in annotations(load_events(run_dir / "trace.json.gz"))]
        seen.append(names)
    # only the active step of each cycle is recorded; indices keep increasing
    assert seen == [["taxbreak/prefill/4", "taxbreak/decode/5"], ["taxbreak/prefill/10", "taxbreak/decode/11"]]


@pytest.mark.filterwarnings("ignore:Profiler won.t be using warmup")
def test_handler_without_analysis_writes_trace_and_manifest_only(tmp_path):
    handler = taxbreak.trace_handler(tmp_path, analyze=False)
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=0, active=1, repeat=1),
                 on_trace_ready=handler) as prof:
        torch.ones(4).sum()
        prof.step()
    (run_dir,) = handler.run_dirs
    assert sorted(p.name for p in run_dir.iterdir()) == ["manifest.json", "trace.json.gz"]
