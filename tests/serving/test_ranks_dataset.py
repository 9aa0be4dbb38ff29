"""Cross-rank skew read from a fleet dataset: the same values as from the analyses."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from taxbreak.cli.main import main
from taxbreak.decompose.analysis import analyze
from taxbreak.decompose.ranks import rank_skew
from taxbreak.scale.dataset import open_dataset
from taxbreak.scale.partition import write_partitions
from taxbreak.scale.ranks import rank_skew_of_dataset
from taxbreak.synth.ranks import PlantedRanksSpec, RankWork as W, build_ranks
from taxbreak.trace.errors import UsageError

SEGMENTS = [[W(), W()], [W(python_ns=300_000), W()], [W(), W(compute_ns=250_000)]]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("fleet")
    open_dataset(str(root))
    analyses = [analyze(t) for t in build_ranks(PlantedRanksSpec(SEGMENTS, steps=[1, 2])).tables]
    for rank, analysis in enumerate(analyses):
        write_partitions(analysis, str(root), "run-a", rank, part_id=f"p{rank}")
    write_partitions(analyses[0], str(root), "run-b", 0, part_id="q0")
    return root, rank_skew(analyses, ["rank0", "rank1"])


def test_dataset_gives_the_values_of_the_analyses(dataset):
    root, direct = dataset
    got = rank_skew_of_dataset(root, "run-a")
    assert got.ranks == ["rank0", "rank1"]
    cols = ["lateness_ns", "transfer_ns", "late_rank", "cause", "cause_python_ns", "cause_compute_ns"]
    assert got.collectives[cols].astype(str).equals(direct.collectives[cols].astype(str))
    assert got.summary["steps"] == direct.summary["steps"]


def test_several_runs_need_one_named(dataset):
    root, _ = dataset
    with pytest.raises(UsageError, match="several runs"):
        rank_skew_of_dataset(root)
    assert rank_skew_of_dataset(root, "run-b").summary["reason"].startswith("one rank")


def test_cli_reads_the_dataset(dataset):
    root, direct = dataset
    out = CliRunner().invoke(main, ["ranks", str(root), "--run", "run-a", "--json", "-q"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["ranks"]["lateness_us"] == direct.summary["lateness_us"]
    bad = CliRunner().invoke(main, ["ranks", str(root), "-q"])
    assert bad.exit_code == 2 and "--run" in bad.output


def test_an_unknown_run_names_the_runs_held(dataset):
    root, _ = dataset
    with pytest.raises(UsageError, match="holds no run 'nope'") as err:
        rank_skew_of_dataset(root, "nope")
    assert err.value.hint == "name one with --run: run-a, run-b"
