"""Every input is stat'ed before it is opened (taxbreak/trace/fileio.check_input), and what it
names stays where it may: FIFOs, devices, oversized budgets, manifests naming files outside
their run folder, report names read as options (docs/reliability.md, "Inputs and outputs")."""
from __future__ import annotations

import errno
import json
import os
import stat
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from taxbreak.capture.manifest import read_manifest
from taxbreak.cli.main import main
from taxbreak.readers import parse_trace
from taxbreak.report.budget import MAX_BUDGET_BYTES
from taxbreak.synth.bigtrace import write_big_kineto
from taxbreak.trace.errors import TaxbreakError
from taxbreak.trace.paths import MAX_MANIFEST_BYTES

FIFO_COMMANDS = {  # the FIFO is f, a good trace t, a good budget b
    "analyze (cache on)": lambda f, t, b: ["analyze", f],
    "analyze --no-cache": lambda f, t, b: ["analyze", f, "--no-cache"],
    "info": lambda f, t, b: ["info", f],
    "report": lambda f, t, b: ["report", f, "-o", f"{t}.html"],
    "annotate": lambda f, t, b: ["annotate", f, "-o", f"{t}.a.json"],
    "diff": lambda f, t, b: ["diff", t, f],
    "check --baseline": lambda f, t, b: ["check", t, "--budget", b, "--baseline", f],
    "check --budget": lambda f, t, b: ["check", t, "--budget", f],
}


@pytest.fixture
def trace(tmp_path) -> Path:
    return write_big_kineto(tmp_path / "t.json", 300, seed=1, gzip=False).path


@pytest.fixture
def budget(tmp_path) -> Path:
    path = tmp_path / "b.toml"
    path.write_text('[all]\nkernels = ">= 0"\n')
    return path


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TAXBREAK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TAXBREAK_NO_CACHE", raising=False)


@pytest.mark.parametrize("command", sorted(FIFO_COMMANDS))
def test_a_fifo_input_is_refused_unopened_naming_it(command, trace, budget, tmp_path, cache):
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)  # opening it for reading would block forever: the test would hang
    result = CliRunner().invoke(main, [str(a) for a in FIFO_COMMANDS[command](fifo, trace, budget)])
    assert result.exit_code == (2 if command == "check --budget" else 1), result.output
    assert result.stderr.startswith(f"error[input.unreadable]: {fifo}"), result.stderr
    assert "not a regular file" in result.stderr


def test_a_budget_linked_to_a_device_or_too_large_is_refused_unread(trace, tmp_path):
    zero = tmp_path / "zero.toml"
    zero.symlink_to("/dev/zero")  # read, it never ends
    result = CliRunner().invoke(main, ["check", str(trace), "--budget", str(zero)])
    assert result.exit_code == 2 and result.stderr.startswith(f"error[input.unreadable]: {zero}")
    big = tmp_path / "big.toml"
    with open(big, "wb") as fh:  # sparse: its size is what counts, nothing is read
        fh.truncate(MAX_BUDGET_BYTES + 1)
    result = CliRunner().invoke(main, ["check", str(trace), "--budget", str(big)])
    assert result.exit_code == 2 and result.stderr.startswith(f"error[input.too_large]: {big}")


def _run_folder(tmp_path: Path, trace: Path, named: str, manifest_trace) -> Path:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    trace.rename(run_dir / named)
    (run_dir / "manifest.json").write_text(json.dumps({"trace": manifest_trace, "new_tokens": 1}))
    return run_dir


@pytest.mark.parametrize("outside", ["/etc/passwd", "../secret.json", "..", "sub/t.json", "link.json"])
@pytest.mark.parametrize("command", ["analyze", "report", "info"])
def test_a_manifest_naming_a_file_outside_its_run_folder_is_refused(outside, command, trace, tmp_path, cache):
    secret = tmp_path / "secret.json"
    write_big_kineto(secret, 50, seed=2, gzip=False)
    run_dir = _run_folder(tmp_path, trace, "trace.json", outside)
    (run_dir / "sub").mkdir()
    (run_dir / "link.json").symlink_to(secret)  # a bare name whose real path leads out
    args = [command, str(run_dir)] + (["-o", str(tmp_path / "r.html")] if command == "report" else [])
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith(f"error[run.not_a_run]: {run_dir / 'manifest.json'}: the manifest names a "
                                    "trace outside its run folder"), result.stderr


def test_a_manifest_naming_its_trace_is_followed_by_every_command(trace, tmp_path, cache):
    run_dir = _run_folder(tmp_path, trace, "w0.1712.pt.trace.json", "w0.1712.pt.trace.json")
    (run_dir / "decoy.json").write_text("{broken")  # not named: never read
    analyzed = CliRunner().invoke(main, ["analyze", str(run_dir), "--json"])
    reported = CliRunner().invoke(main, ["report", str(run_dir), "-o", str(tmp_path / "r.html")])
    assert analyzed.exit_code == 0 and reported.exit_code == 0, analyzed.output + reported.output
    assert json.loads(analyzed.stdout)["meta"]["path"].endswith("w0.1712.pt.trace.json")


def test_a_fifo_manifest_is_refused_unread(trace, tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    trace.rename(run_dir / "trace.json")
    os.mkfifo(run_dir / "manifest.json")  # (analyze takes this folder for a folder of traces: not a run folder)
    result = CliRunner().invoke(main, ["report", str(run_dir), "-o", str(tmp_path / "r.html")])
    assert result.exit_code == 1 and result.stderr.startswith(f"error[input.unreadable]: {run_dir / 'manifest.json'}")


@pytest.fixture
def fake_nsys(tmp_path, monkeypatch):
    """An ``nsys`` on PATH that records its arguments, sleeps ``$FAKE_NSYS_SLEEP`` s and fails (exit 3)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "argv.json"
    script = bin_dir / "nsys"
    script.write_text(f"#!{sys.executable}\n"
                      "import json, os, sys, time\n"
                      f"json.dump(sys.argv[1:], open({str(record)!r}, 'w'))\n"
                      "time.sleep(float(os.environ.get('FAKE_NSYS_SLEEP', '0')))\n"
                      "sys.exit(3)\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return record


def test_a_report_named_like_an_option_reaches_nsys_as_an_absolute_path(tmp_path, fake_nsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "--force-overwrite=true.nsys-rep").write_bytes(b"report")
    result = CliRunner().invoke(main, ["analyze", "--no-cache", "--", "--force-overwrite=true.nsys-rep"])
    assert result.exit_code == 1 and "error[nsys.export_failed]" in result.stderr, result.output
    argv = json.loads(fake_nsys.read_text())
    assert argv[:3] == ["export", "--type", "sqlite"]
    assert argv[-1] == str(tmp_path / "--force-overwrite=true.nsys-rep")
    assert all(not a.startswith("--force") for a in argv) and os.path.isabs(argv[argv.index("--output") + 1])


def test_nsys_export_is_stopped_by_its_timeout(tmp_path, fake_nsys, monkeypatch):
    (tmp_path / "r.nsys-rep").write_bytes(b"report")
    monkeypatch.setenv("FAKE_NSYS_SLEEP", "30")
    monkeypatch.setenv("TAXBREAK_NSYS_EXPORT_TIMEOUT_S", "0.5")
    result = CliRunner().invoke(main, ["analyze", "--no-cache", str(tmp_path / "r.nsys-rep")])
    assert result.exit_code == 1 and "error[nsys.export_failed]" in result.stderr
    assert "timed out after 0.5 seconds" in result.stderr


def test_special_files_of_a_folder_are_counted_in_the_headline(tmp_path):
    folder = tmp_path / "job"
    folder.mkdir()
    for rank in range(2):
        write_big_kineto(folder / f"r{rank}.json", 300, seed=rank, gzip=False, rank=rank, world_size=2)
    os.mkfifo(folder / "r2.json")
    (folder / "r3.json").symlink_to(tmp_path / "absent.json")
    result = CliRunner().invoke(main, ["analyze", str(folder), "--workers", "1", "--no-cache"])
    assert result.exit_code == 0, result.output
    assert "Analyzed 2 of 2 traces" in result.stderr and "· 2 entries passed over unopened" in result.stderr


def test_gzip_inputs_are_checked_like_plain_ones(tmp_path):
    """A character device under a trace name (``/dev/zero`` linked as .json.gz) is never opened."""
    link = tmp_path / "zero.json.gz"
    link.symlink_to("/dev/zero")
    result = CliRunner().invoke(main, ["info", str(link)])
    assert result.exit_code == 1 and result.stderr.startswith(f"error[input.unreadable]: {link}")


def _failing_reader(monkeypatch, exc: OSError) -> None:
    """The Kineto reader hits ``exc`` mid-read (a disk's I/O error, a file removed meanwhile)."""
    import taxbreak.readers.kineto as kineto

    def read_kineto(path, **_):
        raise exc

    monkeypatch.setattr(kineto, "read_kineto", read_kineto)


@pytest.mark.parametrize("args", [["analyze", "{t}", "--no-cache"], ["report", "{t}", "-o", "{t}.html"],
                                  ["check", "{t}", "--budget", "{b}", "--junit", "{t}.xml"]])
def test_an_os_error_while_reading_an_input_is_an_input_error_not_an_output_one(args, trace, budget, monkeypatch,
                                                                                cache):
    _failing_reader(monkeypatch, OSError(errno.EIO, "Input/output error"))
    result = CliRunner().invoke(main, [a.format(t=trace, b=budget) for a in args])
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith(f"error[input.unreadable]: {trace}: cannot read the trace: Input/output error"), \
        result.stderr
    assert "output.unwritable" not in result.stderr and not os.path.exists(f"{trace}.html")


def test_parse_trace_types_every_os_error_of_its_readers(trace, monkeypatch):
    _failing_reader(monkeypatch, FileNotFoundError(errno.ENOENT, "No such file or directory"))
    with pytest.raises(TaxbreakError) as caught:
        parse_trace(trace)
    assert (caught.value.code, caught.value.path) == ("input.not_found", str(trace))


def _manifest_error(run_dir: Path) -> str:
    with pytest.raises(TaxbreakError) as caught:
        read_manifest(run_dir)
    assert caught.value.path in (str(run_dir), str(run_dir / "manifest.json"))
    return caught.value.code


def test_capture_read_manifest_keeps_the_manifest_bounds(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    assert _manifest_error(run_dir) == "run.not_a_run"  # none there
    manifest = run_dir / "manifest.json"
    manifest.write_text('{"new_tokens": 4, "runs": 2}')
    assert read_manifest(run_dir) == {"new_tokens": 4, "runs": 2}
    manifest.write_text("[" * 100_000 + "]" * 100_000)  # json's decoder recurses once per level
    assert _manifest_error(run_dir) == "json.too_deep"
    manifest.write_text("[1, 2]")
    assert _manifest_error(run_dir) == "run.not_a_run"
    with open(manifest, "wb") as fh:  # sparse: its size is what counts, nothing is read
        fh.truncate(MAX_MANIFEST_BYTES + 1)
    assert _manifest_error(run_dir) == "input.too_large"
    manifest.unlink()
    os.mkfifo(manifest)  # opening it for reading would block forever: the test would hang
    assert _manifest_error(run_dir) == "input.unreadable"
