"""Ranks of one run told from unrelated traces: Nsight exports by their metadata (command, session
start, captured rank), Kineto traces by distributedInfo, in run folders and under torch.profiler's
``{worker}.{ts}.pt.trace.json.gz`` names."""
from __future__ import annotations

import shutil
import sqlite3

from taxbreak.scale import analyze_many, find_traces
from taxbreak.scale.many import run_folders
from taxbreak.scale.nsys_identity import SAME_RUN_WINDOW_NS, group_ranks, read_identity
from taxbreak.synth.bigtrace import write_big_kineto

FIXTURES = "nsys-ai/tests/fixtures"
BEFORE, AFTER, MOCK = (f"{FIXTURES}/mfu_2gpu_before.sqlite", f"{FIXTURES}/mfu_2gpu_after.sqlite",
                       f"{FIXTURES}/mock.sqlite")
BEFORE_START_NS = 1779782330176752435


def _rank_copy(src, dst, *, shift_s=0, host=None, env=()):
    """A copy of a real export as another rank of its job: session start moved, host and
    captured environment variables set."""
    shutil.copy(src, dst)
    con = sqlite3.connect(dst)
    con.execute("UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = utcEpochNs + ?", (shift_s * 10**9,))
    if host:
        con.execute("UPDATE TARGET_INFO_SYSTEM_ENV SET value = ? WHERE name = 'Hostname'", (host,))
    con.executemany("INSERT INTO META_DATA_CAPTURE VALUES ('PROCESS_0:ENVIRONMENT_VARIABLE', ?)",
                    [(v,) for v in env])
    con.commit()
    con.close()
    return str(dst)


def _hints(paths):
    return group_ranks(paths, run_folders(paths))


def test_identity_of_a_real_torchrun_export(shared_traces):
    ident = read_identity(str(shared_traces / BEFORE))
    assert ident.command.split("\x1f") == ["torchrun", "--nnodes=1", "--nproc_per_node=2", "--master_port=29506",
                                           "/tmp/fv_mfu_training.py"]
    assert ident.session_start_ns == BEFORE_START_NS and ident.host == "modal"
    assert ident.rank is None and ident.world_size is None  # its environment rows were removed
    assert read_identity(str(shared_traces / "pipit/pipit/tests/data/saxpy-mpi-cuda_nsys_perlmutter0.sqlite")
                         ).command is None  # schema 2.9.1: no META_DATA_CAPTURE


def test_same_command_eighty_minutes_apart_are_two_runs(shared_traces, tmp_path):
    paths = [shutil.copy(shared_traces / rel, tmp_path / rel.rsplit("/", 1)[-1]) for rel in (BEFORE, AFTER, MOCK)]
    assert _hints([str(p) for p in paths]) == {}  # before/after: one command, 80 min apart; mock: another


def test_exports_of_one_job_are_ranks_of_one_run_in_session_order(shared_traces, tmp_path):
    job = tmp_path / "job"
    job.mkdir()
    r1 = _rank_copy(shared_traces / BEFORE, job / "a.sqlite", shift_s=3, host="node-b")
    r0 = _rank_copy(shared_traces / BEFORE, job / "b.sqlite", host="node-a")
    hints = _hints([r1, r0])
    assert {(h.run_group, h.rank, h.rank_source) for h in hints.values()} == {
        ("job", 0, "session_order"), ("job", 1, "session_order")}
    assert hints[1].rank == 0 and hints[0].rank == 1  # b started first


def test_captured_rank_variables_win_over_session_order(shared_traces, tmp_path):
    a = _rank_copy(shared_traces / BEFORE, tmp_path / "a.sqlite", env=("RANK=1", "WORLD_SIZE=2", "SECRET=x"))
    b = _rank_copy(shared_traces / BEFORE, tmp_path / "b.sqlite", shift_s=1, env=("RANK=0", "WORLD_SIZE=2"))
    hints = _hints([a, b])
    assert (hints[0].rank, hints[0].rank_source, hints[0].world_size) == (1, "nsys_env", 2)
    assert (hints[1].rank, hints[1].rank_source) == (0, "nsys_env")


def test_a_rank_outside_the_window_is_another_run(shared_traces, tmp_path):
    a = _rank_copy(shared_traces / BEFORE, tmp_path / "a.sqlite")
    b = _rank_copy(shared_traces / BEFORE, tmp_path / "b.sqlite", shift_s=5)
    late = _rank_copy(shared_traces / BEFORE, tmp_path / "late.sqlite", shift_s=SAME_RUN_WINDOW_NS // 10**9 + 60)
    hints = _hints([a, b, late])
    assert 2 not in hints  # alone in its group: the default rules decide (a run of its own)
    folder = run_folders([a])[0]
    assert hints[0].run_group == hints[1].run_group == f"{folder}.a"  # not the whole folder


def test_unreadable_exports_have_no_identity(tmp_path):
    (tmp_path / "empty.sqlite").write_bytes(b"")
    (tmp_path / "text.sqlite").write_text("not a database")
    (tmp_path / "header.sqlite").write_bytes(b"SQLite format 3\x00" + b"\xff" * 200)
    paths = [str(p) for p in sorted(tmp_path.iterdir())]
    assert [read_identity(p) for p in paths] == [None, None, None]
    assert _hints(paths) == {}


def test_analyze_folder_groups_nsys_ranks_and_keeps_unrelated_exports_apart(shared_traces, tmp_path):
    job = tmp_path / "nightly" / "job"
    job.mkdir(parents=True)
    _rank_copy(shared_traces / BEFORE, job / "r-x.sqlite", shift_s=2, host="node-b")
    _rank_copy(shared_traces / BEFORE, job / "r-y.sqlite", host="node-a")
    other = tmp_path / "nightly" / "other"
    other.mkdir()
    for rel in (BEFORE, MOCK):
        shutil.copy(shared_traces / rel, other / rel.rsplit("/", 1)[-1])
    result = analyze_many(find_traces(tmp_path / "nightly"), workers=1, use_cache=False)
    table = result.per_rank()
    assert not result.failed
    job_rows = table[table["run"] == "job"]
    assert sorted(zip(job_rows["path"].str.rsplit("/", n=1).str[-1], job_rows["rank"])) == [
        ("r-x.sqlite", 1), ("r-y.sqlite", 0)]
    assert set(job_rows["rank_source"]) == {"session_order"}
    assert sorted(result.runs) == ["job", "other.mfu_2gpu_before", "other.mock"]
    assert result.runs["job"]["traces"] == 2


def test_kineto_ranks_in_run_folders_under_torch_profiler_names(tmp_path):
    nightly = tmp_path / "nightly"
    for run in ("run-a", "run-b"):
        (nightly / run).mkdir(parents=True)
        for rank in (0, 1):
            write_big_kineto(nightly / run / f"worker{rank}.17123{rank}.pt.trace.json.gz", 600, seed=rank,
                             rank=rank, world_size=2)
    loose = nightly / "loose"  # two single-process traces of unrelated jobs, side by side
    loose.mkdir()
    for name in ("host1.1.pt.trace.json.gz", "host2.2.pt.trace.json.gz"):
        write_big_kineto(loose / name, 600, rank=0, world_size=1)
    result = analyze_many(find_traces(nightly), workers=1, use_cache=False)
    assert len(result.files) == 6 and not result.failed
    assert sorted(result.runs) == ["loose.host1.1", "loose.host2.2", "run-a", "run-b"]
    assert result.runs["run-a"]["traces"] == 2
    ranks = result.per_rank()
    assert sorted(ranks[ranks["run"] == "run-b"]["rank"]) == [0, 1]
    assert set(ranks["rank_source"]) == {"meta"}
