"""``taxbreak analyze DIR`` over the rank traces of one run: the run's cross-rank skew
(docs/serving.md §1) in the folder's JSON and terminal output, from planted rank traces."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from taxbreak.cli.main import main
from taxbreak.scale import analysis_cache
from taxbreak.scale.many import analyze_many
from taxbreak.scale.ranks import run_skews
from taxbreak.scale.task import ManyOptions
from taxbreak.synth.ranks import PlantedRanksSpec, RankWork as W, build_ranks
from taxbreak.synth.write_kineto import write_kineto

SEGMENTS = [[W(), W()], [W(python_ns=300_000), W()], [W(), W(compute_ns=250_000)]]


def _write_rank(tables, path, rank: int, world_size: int = 2) -> None:
    """A planted rank as a Kineto trace that records its rank (``distributedInfo``, as torch does)."""
    write_kineto(tables, path)
    data = json.loads(path.read_text())
    data["distributedInfo"] = {"rank": rank, "world_size": world_size, "backend": "nccl"}
    path.write_text(json.dumps(data))


@pytest.fixture(scope="module")
def planted():
    return build_ranks(PlantedRanksSpec(SEGMENTS, steps=[1, 2]))


@pytest.fixture
def job(tmp_path, planted):
    folder = tmp_path / "job"
    folder.mkdir()
    for rank, tables in enumerate(planted.tables):
        _write_rank(tables, folder / f"rank{rank}.json", rank)
    return folder


def _run(*args):
    return CliRunner().invoke(main, ["analyze", *map(str, args)], env={"NO_COLOR": "1"})


def _assert_planted(skew: dict, planted) -> None:
    assert skew["reason"] is None and skew["ranks"] == ["rank0", "rank1"] and skew["collectives"] == 3
    assert skew["lateness_us"]["sum"] == planted.collectives["lateness_ns"].sum() / 1000
    assert skew["late_rank_counts"] == {"rank0": 1, "rank1": 1}
    assert skew["cause_us"]["python"] == 298.0 and skew["cause_us"]["compute"] == 200.0
    got = {(s["step"], s["rank"]): (s["wall_us"], s["skew_us"], s["transfer_us"]) for s in skew["steps"]}
    truth = {(int(r.step), f"rank{int(r.rank)}"): (r.wall_ns / 1000, r.skew_ns / 1000, r.transfer_ns / 1000)
             for r in planted.steps.itertuples(index=False)}
    assert got == truth
    assert skew["steps_add_up"] is True and "per_collective" not in skew


def test_json_holds_the_runs_skew_with_the_planted_values(job, planted):
    out = _run(job, "--json", "--workers", "2")
    assert out.exit_code == 0, out.output
    _assert_planted(json.loads(out.stdout)["skew"]["job"], planted)


def test_terminal_shows_the_section(job):
    out = _run(job, "--workers", "1")
    assert out.exit_code == 0, out.output
    assert "Cross-rank skew, run job" in out.stdout and "3 collectives matched" in out.stdout
    assert "298.0" in out.stdout and "Per step and rank" in out.stdout


def test_skew_reads_the_cached_analyses_back_without_analysing_again(job, planted, monkeypatch):
    paths = sorted(str(p) for p in job.iterdir())
    result = analyze_many(paths, workers=1)
    _assert_planted(result.skew["job"], planted)

    def refuse(*args, **kwargs):
        raise AssertionError("analysed again")

    monkeypatch.setattr(analysis_cache, "analyze", refuse)
    assert run_skews(result.files, ManyOptions()) == result.skew


def test_dataset_gives_the_same_skew(job, tmp_path, planted):
    out = _run(job, "--json", "--workers", "1", "--partitioned", "-o", tmp_path / "fleet")
    assert out.exit_code == 0, out.output
    _assert_planted(json.loads(out.stdout)["skew"]["job"], planted)


def test_no_cache_says_why_on_one_line(job):
    out = _run(job, "--json", "--workers", "1", "--no-cache")
    assert out.exit_code == 0, out.output
    skew = json.loads(out.stdout)["skew"]["job"]
    assert skew["collectives"] == 0 and "--no-cache" in skew["reason"]
    text = _run(job, "--workers", "1", "--no-cache")
    line = next(x for x in text.stdout.splitlines() if x.startswith("Cross-rank skew, run job"))
    assert "not measured" in line and "--no-cache" in line


def test_one_trace_and_a_repeated_rank_are_na(tmp_path, planted):
    one = tmp_path / "one"
    one.mkdir()
    _write_rank(planted.tables[0], one / "rank0.json", 0)
    skew = json.loads(_run(one, "--json", "--workers", "1").stdout)["skew"]
    assert skew["one"]["reason"].startswith("one trace") and skew["one"]["ranks"] == ["rank0"]
    twice = tmp_path / "twice"
    twice.mkdir()
    for i, tables in enumerate(planted.tables):
        _write_rank(tables, twice / f"r{i}.json", 0)
    skew = json.loads(_run(twice, "--json", "--workers", "1").stdout)["skew"]
    assert skew["twice"]["reason"] == "its traces disagree: rank 0 more than once"
