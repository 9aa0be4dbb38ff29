"""Outputs never destroy data: no write through a link, none onto an input, none left half-written.

Every writer goes through taxbreak/trace/fileio.py; these tests drive each CLI
writer and the module itself (docs/reliability.md, "Inputs and outputs").
"""
from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from taxbreak.cli.main import main
from taxbreak.synth.bigtrace import write_big_kineto
from taxbreak.trace import fileio
from taxbreak.trace.errors import ERROR_CODES, TaxbreakError

from .traces import FLOOR_US, write_planted

BUDGET = '[all]\nkernels = "== 3"\n'
PRECIOUS = b"precious bytes that no output may replace\n"


@pytest.fixture
def trace(tmp_path) -> Path:
    return write_planted(tmp_path / "t.json.gz")


@pytest.fixture
def budget(tmp_path) -> Path:
    path = tmp_path / "budget.toml"
    path.write_text(BUDGET)
    return path


def invoke(args, cwd: Path | None = None):
    if cwd is None:
        return CliRunner().invoke(main, [str(a) for a in args])
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(main, [str(a) for a in args])
    finally:
        os.chdir(old)


def _linked(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """``tmp_path/out/name`` as a link to a precious file elsewhere; (link, its target)."""
    victim = tmp_path / "victim" / "precious.txt"
    victim.parent.mkdir(exist_ok=True)
    victim.write_bytes(PRECIOUS)
    link = tmp_path / "out" / name
    link.parent.mkdir(exist_ok=True)
    link.symlink_to(victim)
    return link, victim


FILE_WRITERS = {  # name of the output file -> the command line writing it (t: trace, b: budget, o: the output)
    "report -o": ("r.html", lambda t, b, o: ["report", t, "-o", o, "--floor-us", FLOOR_US]),
    "annotate -o": ("a.json.gz", lambda t, b, o: ["annotate", t, "-o", o, "--floor-us", FLOOR_US]),
    "annotate -o .json": ("a.json", lambda t, b, o: ["annotate", t, "-o", o, "--floor-us", FLOOR_US]),
    "check --junit": ("j.xml", lambda t, b, o: ["check", t, "--budget", b, "--junit", o, "--floor-us", FLOOR_US]),
    "check --markdown": ("m.md", lambda t, b, o: ["check", t, "--budget", b, "--markdown", o,
                                                  "--floor-us", FLOOR_US]),
}
DIR_WRITERS = {  # a file the command writes into its -o folder -> the command line
    "analyze -o summary.json": ("summary.json", lambda t, o: ["analyze", t, "-o", o, "--json"]),
    "analyze -o kernels.parquet": ("kernels.parquet", lambda t, o: ["analyze", t, "-o", o, "--json"]),
    "analyze --format csv -o": ("kernels.csv", lambda t, o: ["analyze", t, "-o", o, "--format", "csv"]),
    "convert -o parquet": ("host_events.parquet", lambda t, o: ["convert", t, "-o", o]),
    "convert -o meta": ("trace_meta.json", lambda t, o: ["convert", t, "-o", o]),
}


@pytest.mark.parametrize("writer", sorted(FILE_WRITERS))
def test_file_outputs_refuse_a_symbolic_link(writer, trace, budget, tmp_path):
    name, args = FILE_WRITERS[writer]
    link, victim = _linked(tmp_path, name)
    result = invoke(args(trace, budget, link))
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith(f"error[output.is_link]: {link}"), result.stderr
    assert victim.read_bytes() == PRECIOUS and link.is_symlink()


@pytest.mark.parametrize("writer", sorted(DIR_WRITERS))
def test_folder_outputs_refuse_a_symbolic_link_before_writing_any_file(writer, trace, tmp_path):
    name, args = DIR_WRITERS[writer]
    link, victim = _linked(tmp_path, name)
    result = invoke(args(trace, link.parent))
    assert result.exit_code == 1, result.output
    assert f"error[output.is_link]: {link}" in result.stderr
    assert victim.read_bytes() == PRECIOUS
    assert sorted(p.name for p in link.parent.iterdir()) == [name]  # every name checked before the first write


def test_analyze_csv_refuses_a_non_regular_csv_name_before_writing_the_parquet_files(trace, tmp_path):
    out = tmp_path / "out"
    (out / "phases.csv").mkdir(parents=True)  # the last file written: a folder, not a file
    result = invoke(["analyze", trace, "-o", out, "--format", "csv"])
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith(f"error[output.unwritable]: {out / 'phases.csv'}: the output exists and is "
                                    "not a regular file"), result.stderr
    assert sorted(p.name for p in out.iterdir()) == ["phases.csv"]


def _check(trace, budget, *outputs):
    return invoke(["check", trace, "--budget", budget, *outputs, "--floor-us", FLOOR_US])


def test_two_outputs_of_check_on_one_file_are_refused_before_any_work(trace, budget, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    same = out / "ci.txt"
    result = _check(trace, tmp_path / "no-such-budget.toml", "--junit", same, "--markdown", same)
    # refused before the budget is read (it does not exist) and before either file is written
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"error[usage.invalid]: {same}: --junit and --markdown name the same file"), \
        result.stderr
    assert "hint: give each output its own file" in result.stderr and not same.exists()
    same.write_bytes(PRECIOUS)
    hard = out / "hard.md"
    os.link(same, hard)  # another name of one existing file
    for junit, markdown in [(same, out / "." / ".." / "out" / "ci.txt"), (same, hard)]:
        result = _check(trace, budget, "--junit", junit, "--markdown", markdown)
        assert result.exit_code == 2 and "error[usage.invalid]" in result.stderr, (junit, markdown, result.output)
        assert "--junit and --markdown name the same file" in result.stderr
    assert same.read_bytes() == PRECIOUS and sorted(p.name for p in out.iterdir()) == ["ci.txt", "hard.md"]
    result = _check(trace, budget, "--junit", out / "j.xml", "--markdown", out / "m.md")  # two files: both written
    assert result.exit_code == 0, result.output
    assert (out / "j.xml").read_text().startswith("<?xml") and (out / "m.md").read_text()


def test_analyze_outputs_on_one_file_are_refused_before_the_analysis(trace, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "kernels.parquet").write_bytes(PRECIOUS)
    os.link(out / "kernels.parquet", out / "kernels.csv")
    result = invoke(["analyze", trace, "-o", out, "--format", "csv"])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"error[usage.invalid]: {out / 'kernels.csv'}: kernels.parquet and kernels.csv "
                                    "name the same file"), result.stderr
    assert sorted(p.name for p in out.iterdir()) == ["kernels.csv", "kernels.parquet"]
    assert (out / "kernels.parquet").read_bytes() == PRECIOUS


def test_refuse_shared_outputs_skips_stdout_and_absent_outputs(tmp_path):
    fileio.refuse_shared_outputs({"--junit": "-", "--markdown": "-", "--html": None, "-o": tmp_path / "a"})
    fileio.refuse_shared_outputs({"--junit": tmp_path / "a", "--markdown": tmp_path / "b"})
    with pytest.raises(TaxbreakError) as caught:
        fileio.refuse_shared_outputs({"--junit": tmp_path / "a", "--markdown": tmp_path / "b",
                                      "--html": tmp_path / "sub" / ".." / "a"})
    assert caught.value.code == "usage.invalid" and caught.value.exit_code == 2
    assert caught.value.message == "--junit and --html name the same file"


@pytest.mark.parametrize("command, default", [("report", "report.html"), ("annotate", "annotated.json.gz")])
def test_default_output_names_refuse_a_symbolic_link(command, default, trace, tmp_path):
    link, victim = _linked(tmp_path, default)
    result = invoke([command, trace, "--floor-us", FLOOR_US], cwd=link.parent)
    assert result.exit_code == 1 and "error[output.is_link]" in result.stderr
    assert victim.read_bytes() == PRECIOUS


def test_profile_force_refuses_a_link_left_in_the_run_folder(tmp_path):
    pytest.importorskip("torch")
    run_dir = tmp_path / "run"
    link, victim = _linked(tmp_path, "manifest.json")
    link.parent.rename(run_dir)
    result = invoke(["profile", "-m", "gpt2-tiny", "-s", "4", "-t", "2", "--warmup", "0", "--runs", "1",
                     "--device", "cpu", "-o", run_dir, "--force", "-q"])
    assert result.exit_code == 1 and "error[output.is_link]" in result.stderr, result.output
    assert victim.read_bytes() == PRECIOUS


def test_an_output_onto_its_own_input_is_refused(trace, budget, tmp_path):
    before = trace.read_bytes()
    cases = [["report", trace, "-o", trace], ["annotate", trace, "-o", trace],
             ["check", trace, "--budget", budget, "--junit", trace],
             ["check", trace, "--budget", budget, "--markdown", budget],
             ["check", trace, "--budget", budget, "--baseline", trace, "--junit", budget]]
    hard = tmp_path / "hard.json.gz"
    os.link(trace, hard)  # another name of the same file is the same input
    cases.append(["report", trace, "-o", hard])
    for args in cases:
        result = invoke([*args, "--floor-us", FLOOR_US])
        assert result.exit_code == 1, (args, result.output)
        assert result.stderr.startswith("error[output.is_input]"), (args, result.stderr)
    assert trace.read_bytes() == before and budget.read_text() == BUDGET
    assert "output.is_input" in ERROR_CODES and "output.is_link" in ERROR_CODES


def test_an_output_onto_a_file_of_the_input_run_folder_is_refused(trace, tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "manifest.json").write_text('{"new_tokens": 1}')
    trace.rename(run_dir / "trace.json.gz")
    before = (run_dir / "trace.json.gz").read_bytes()
    result = invoke(["report", run_dir, "-o", run_dir / "trace.json.gz", "--floor-us", FLOOR_US])
    assert result.exit_code == 1 and "error[output.is_input]" in result.stderr
    assert (run_dir / "trace.json.gz").read_bytes() == before


def _fail_after_first_chunk(monkeypatch):
    """Make the disk 'fill up' after the first chunk of any output (the write of a full disk)."""
    real = fileio.write_chunk
    calls = []

    def write_chunk(fd, chunk):
        if calls:
            raise OSError(errno.ENOSPC, "No space left on device")
        calls.append(len(chunk))
        real(fd, chunk)

    monkeypatch.setattr(fileio, "_CHUNK", 1024)
    monkeypatch.setattr(fileio, "write_chunk", write_chunk)


def test_a_failed_write_keeps_the_old_file_and_leaves_no_partial_file(trace, tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    old = out / "r.html"
    old.write_bytes(PRECIOUS)
    _fail_after_first_chunk(monkeypatch)
    result = invoke(["report", trace, "-o", old, "--floor-us", FLOOR_US])
    assert result.exit_code == 1 and result.stderr.startswith(f"error[output.unwritable]: {old}")
    assert "No space left on device" in result.stderr
    assert old.read_bytes() == PRECIOUS
    assert sorted(p.name for p in out.iterdir()) == ["r.html"]  # the temporary file is gone


def test_annotate_onto_its_input_on_a_full_disk_keeps_the_trace(trace, monkeypatch):
    before = trace.read_bytes()
    _fail_after_first_chunk(monkeypatch)
    result = invoke(["annotate", trace, "-o", trace, "--floor-us", FLOOR_US])
    assert result.exit_code == 1 and "error[output.is_input]" in result.stderr
    assert trace.read_bytes() == before


def test_a_new_output_that_fails_leaves_no_file(trace, tmp_path, monkeypatch):
    _fail_after_first_chunk(monkeypatch)
    target = tmp_path / "new.json.gz"
    result = invoke(["annotate", trace, "-o", target, "--floor-us", FLOOR_US])
    assert result.exit_code == 1 and "error[output.unwritable]" in result.stderr
    assert not target.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".partial-")]


def test_an_exception_inside_the_block_removes_the_temporary_file(tmp_path):
    target = tmp_path / "x.bin"
    target.write_bytes(PRECIOUS)
    with pytest.raises(RuntimeError):
        with fileio.atomic_output(target) as tmp:
            tmp.write_bytes(b"half")
            raise RuntimeError("writer failed")
    assert target.read_bytes() == PRECIOUS and sorted(p.name for p in tmp_path.iterdir()) == ["x.bin"]


def test_a_link_is_followed_only_when_asked_and_the_mode_is_kept(tmp_path):
    link, victim = _linked(tmp_path, "l.txt")
    victim.chmod(0o640)
    with pytest.raises(TaxbreakError) as info:
        fileio.write_output(link, "new")
    assert info.value.code == "output.is_link"
    fileio.write_output(link, "new", follow_symlinks=True)
    assert link.is_symlink() and victim.read_text() == "new" and (victim.stat().st_mode & 0o777) == 0o640
    fresh = fileio.write_output(tmp_path / "fresh.txt", "x")  # not mkstemp's 0600: the umask's default
    umask = os.umask(0o022)
    os.umask(umask)
    assert (fresh.stat().st_mode & 0o777) == 0o666 & ~umask


def test_an_output_that_is_not_a_regular_file_is_refused(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(TaxbreakError) as info:
        fileio.write_output(fifo, "x")
    assert info.value.code == "output.unwritable" and fifo.exists()


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 64 KiB tmpfs (root only): a real full disk."""
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
                                           capture_output=True).returncode != 0:
        pytest.skip("mounting a tmpfs needs root")
    yield mount
    subprocess.run(["umount", str(mount)], check=False)


def test_a_real_full_disk_keeps_the_old_file(tmp_path, small_tmpfs):
    big = write_big_kineto(tmp_path / "big.json", 2000, seed=0, gzip=False).path  # its copy: over 64 KiB
    old = small_tmpfs / "annotated.json"
    old.write_bytes(PRECIOUS)
    result = invoke(["annotate", big, "-o", old])
    assert result.exit_code == 1 and result.stderr.startswith(f"error[output.unwritable]: {old}"), result.output
    assert old.read_bytes() == PRECIOUS
    assert sorted(p.name for p in small_tmpfs.iterdir()) == ["annotated.json"]
