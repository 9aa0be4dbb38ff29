"""A folder of run directories (one per run, e.g. a sweep) is a folder of traces too."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from taxbreak.cli.main import main
from taxbreak.scale.discover import find_traces, is_trace_folder, uncompressed_bytes
from taxbreak.synth.bigtrace import write_big_kineto


@pytest.fixture(scope="module")
def sweep_like(tmp_path_factory):
    """Two run directories beside the JSON outputs a sweep writes next to them."""
    root = tmp_path_factory.mktemp("sweep") / "sweep"
    for i, name in enumerate(("b1-s16", "b2-s16")):
        run = root / name
        run.mkdir(parents=True)
        write_big_kineto(run / "trace.json.gz", 2000, seed=i)
        (run / "manifest.json").write_text(json.dumps({"trace": "trace.json.gz", "new_tokens": 4, "runs": 1}))
        (run / "summary.json").write_text("{}")
    (root / "sweep.json").write_text(json.dumps({"points": []}))
    (root / "plots").mkdir()
    return root


def test_run_directories_are_found_and_taxbreak_outputs_skipped(sweep_like):
    assert is_trace_folder(sweep_like)
    assert [p.name for p in find_traces(sweep_like)] == ["b1-s16", "b2-s16"]
    # memory sizing reads the run's trace, not the directory entry
    trace = sweep_like / "b1-s16" / "trace.json.gz"
    assert uncompressed_bytes(sweep_like / "b1-s16") == uncompressed_bytes(trace) > trace.stat().st_size


def test_analyze_of_a_sweep_folder_analyzes_every_run(sweep_like):
    result = CliRunner().invoke(main, ["analyze", str(sweep_like), "--json", "--workers", "1"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [f["path"].rsplit("/", 1)[-1] for f in data["files"]] == ["b1-s16", "b2-s16"]
    # the manifests' token counts reach the per-run summaries (4 tokens x 1 run each)
    assert [f["all"]["tokens"] for f in data["files"]] == [4, 4]
