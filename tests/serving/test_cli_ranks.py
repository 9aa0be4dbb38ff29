"""``taxbreak ranks``: planted rank traces written as files (a folder of Kineto traces, one
several-process Nsight export), recovered through the CLI."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from taxbreak.cli.main import main
from taxbreak.synth.ranks import PlantedRanksSpec, RankWork as W, build_ranks
from taxbreak.synth.write_kineto import write_kineto
from taxbreak.synth.write_nsys import write_nsys

SEGMENTS = [[W(), W()], [W(python_ns=300_000), W()], [W(), W(compute_ns=250_000)]]


def _run(*args):
    return CliRunner().invoke(main, ["ranks", *map(str, args)], env={"NO_COLOR": "1", "COLUMNS": "160"})


@pytest.fixture(scope="module")
def rank_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ranks")
    planted = build_ranks(PlantedRanksSpec(SEGMENTS, steps=[1, 2]))
    for i, tables in enumerate(planted.tables):
        write_kineto(tables, folder / f"rank{i}.json")
    return folder, planted


def test_folder_json_recovers_planted_lateness(rank_folder):
    folder, planted = rank_folder
    out = _run(folder, "--json", "-q")
    assert out.exit_code == 0, out.output
    ranks = json.loads(out.output)["ranks"]
    assert ranks["ranks"] == ["rank0", "rank1"] and ranks["collectives"] == 3
    assert ranks["lateness_us"]["sum"] == planted.collectives["lateness_ns"].sum() / 1000
    assert ranks["late_rank_counts"] == {"rank0": 1, "rank1": 1}
    assert ranks["cause_us"]["python"] == 298.0 and ranks["cause_us"]["compute"] == 200.0
    assert ranks["steps_add_up"] is True


def test_folder_text_names_the_causes(rank_folder):
    folder, _ = rank_folder
    out = _run(folder, "-q")
    assert out.exit_code == 0, out.output
    assert "Cross-rank skew" in out.output and "python" in out.output and "298.0 µs" in out.output


def test_several_process_nsight_export(tmp_path):
    planted = build_ranks(PlantedRanksSpec(SEGMENTS, steps=[3], one_trace=True))
    path = write_nsys(planted.tables[0], tmp_path / "two.sqlite")
    out = _run(path, "--json", "-q")
    assert out.exit_code == 0, out.output
    ranks = json.loads(out.output)["ranks"]
    assert ranks["ranks"] == ["two:0", "two:1"]
    assert ranks["lateness_us"]["max"] == 298.0 and ranks["end_spread_us"]["max"] == 0.0


def test_one_rank_says_why_not(rank_folder):
    folder, _ = rank_folder
    out = _run(folder / "rank0.json", "--json", "-q")
    assert out.exit_code == 0
    assert json.loads(out.output)["ranks"]["reason"].startswith("one rank")


def test_missing_path_is_one_line_error(tmp_path):
    out = _run(tmp_path / "nope.json")
    assert out.exit_code == 1 and "nope.json" in out.output
