"""trace_handler with a real torch.profiler schedule on CPU."""
from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pytest
import torch
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

import taxbreak
from taxbreak.capture import markers
from taxbreak.capture.handler import trace_file_name
from taxbreak.capture.models import build_model
from taxbreak.capture.replay import find_trace as find_replay_trace
from taxbreak.readers.detect import resolve_trace_path
from taxbreak.report.run import find_trace as find_report_trace

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
        assert re.fullmatch(r".+_\d+\.\d+\.pt\.trace\.json\.gz", manifest["trace"]), manifest["trace"]
        names = [e["name"] for e in annotations(load_events(run_dir / manifest["trace"]))]
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
    (trace,) = run_dir.glob("*.pt.trace.json.gz")
    assert sorted(p.name for p in run_dir.iterdir()) == ["manifest.json", trace.name]


def _one_cycle(handler) -> None:
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=0, active=1, repeat=1),
                 on_trace_ready=handler) as prof:
        torch.ones(4).sum()
        prof.step()


@pytest.mark.filterwarnings("ignore:Profiler won.t be using warmup")
def test_trace_is_named_like_tensorboard_and_found_by_every_reader(tmp_path):
    handler = taxbreak.trace_handler(tmp_path, worker_name="rank0", analyze=False)
    _one_cycle(handler)
    (run_dir,) = handler.run_dirs
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert re.fullmatch(r"rank0\.\d{19}\.pt\.trace\.json\.gz", manifest["trace"])
    trace = run_dir / manifest["trace"]
    assert resolve_trace_path(run_dir) == trace
    assert find_replay_trace(run_dir) == trace
    assert find_report_trace(run_dir)[0] == trace
    assert taxbreak.analyze(run_dir).summary["meta"]["path"].endswith(manifest["trace"])


@pytest.mark.filterwarnings("ignore:Profiler won.t be using warmup")
def test_then_chains_tensorboard_trace_handler_and_callables(tmp_path):
    seen = []
    handler = taxbreak.trace_handler(tmp_path / "tb", analyze=False,
                                     then=[tensorboard_trace_handler(str(tmp_path / "tb-own"), worker_name="w"),
                                           lambda prof: seen.append(prof.step_num)])
    _one_cycle(handler)
    assert seen == [1]
    (theirs,) = (tmp_path / "tb-own").iterdir()
    assert re.fullmatch(r"w\.\d+\.pt\.trace\.json", theirs.name)
    assert len(json.loads(theirs.read_text())["traceEvents"]) > 0
    single = taxbreak.trace_handler(tmp_path / "one", analyze=False, then=lambda prof: seen.append("one"))
    _one_cycle(single)
    assert seen == [1, "one"]


@pytest.mark.filterwarnings("ignore:Profiler won.t be using warmup")
def test_a_gzip_tensorboard_handler_gets_the_same_bytes(tmp_path):
    handler = taxbreak.trace_handler(tmp_path / "ours", analyze=False,
                                     then=tensorboard_trace_handler(str(tmp_path / "tb"), use_gzip=True))
    _one_cycle(handler)
    (theirs,) = (tmp_path / "tb").iterdir()
    (ours,) = handler.run_dirs[0].glob("*.pt.trace.json.gz")
    assert theirs.name.endswith(".pt.trace.json.gz") and theirs.read_bytes() == ours.read_bytes()


def test_chained_handlers_run_even_when_ours_fails(tmp_path):
    seen = []
    blocker = tmp_path / "file"
    blocker.write_text("")  # a file where the run directory's parent should be: mkdir fails
    handler = taxbreak.trace_handler(blocker, then=lambda prof: seen.append(prof.step_num))
    with pytest.raises(OSError):
        handler(SimpleNamespace(step_num=7, export_chrome_trace=lambda path: None))
    assert seen == [7]


def test_then_must_be_callable(tmp_path):
    with pytest.raises(TypeError, match="then= takes a callable"):
        taxbreak.trace_handler(tmp_path, then=["not a handler"])
    assert trace_file_name("w", 123) == "w.123.pt.trace.json.gz"
