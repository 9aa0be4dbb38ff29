"""Inputs that were read wrong or crashed: leading whitespace, escaped surrogates, link ids that
are no integers, deep or huge run manifests, Nsight exports with a journal or WAL beside them,
running out of memory, and pool workers outliving their parent (docs/reliability.md)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner

from taxbreak.cli.main import main
from taxbreak.readers import load_trace
from taxbreak.trace import paths
from taxbreak.trace.errors import TaxbreakError

sys.path.insert(0, str(Path(__file__).parent))
from corpus_nsys import _export  # noqa: E402

_EVENT = '{"ph":"X","cat":"cpu_op","name":"%s","pid":1,"tid":1,"ts":%s,"dur":1}'


def _trace(tmp_path, body: str, name="t.json") -> Path:
    path = tmp_path / name
    path.write_text(body)
    return path


def _one_error_line(args, code: str) -> None:
    result = CliRunner().invoke(main, args, env={"TAXBREAK_NO_CACHE": "1"})
    assert result.exit_code == 1, result.output
    assert result.output.splitlines()[0].startswith(f"error[{code}]")
    assert "Traceback" not in result.output


def test_leading_whitespace_past_the_detection_head_is_read(tmp_path):
    body = " \n\t" * 4000 + '{"traceEvents":[' + _EVENT % ("aten::mm", 1) + "]}"
    tables = load_trace(_trace(tmp_path, body), use_cache=False)
    assert tables.host_events.column("name").to_pylist() == ["aten::mm"]


def test_only_whitespace_past_the_head_is_still_empty(tmp_path):
    with pytest.raises(TaxbreakError) as info:
        load_trace(_trace(tmp_path, " " * 20_000), use_cache=False)
    assert info.value.code == "input.empty"


def test_escaped_lone_surrogates_are_replaced_and_counted_pairs_and_text_kept(tmp_path):
    names = ["a\\ud800b", "\\ud83d\\ude00", "x\\udc00", "\\\\ud800"]  # lone, pair, lone low, escaped text
    body = '{"traceEvents":[' + ",".join(_EVENT % (n, i) for i, n in enumerate(names)) + "]}"
    tables = load_trace(_trace(tmp_path, body), use_cache=False)
    assert tables.host_events.column("name").to_pylist() == ["a\ufffdb", "\U0001F600", "x\ufffd", "\\ud800"]
    assert tables.diagnostics.count("trace.lone_surrogate") == 2


def test_fractional_and_boolean_correlation_ids_link_nothing(tmp_path):
    launch = ('{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":%d,"dur":1,'
              '"args":{"correlation":%s,"External id":%s}}')
    body = '{"traceEvents":[' + ",".join([launch % (1, "5.5", "1"), launch % (3, "true", "false"),
                                          launch % (5, "5.0", "7")]) + "]}"
    tables = load_trace(_trace(tmp_path, body), use_cache=False)
    assert tables.api_calls.column("correlation").to_pylist() == [-1, -1, 5]
    assert tables.api_calls.column("external_id").to_pylist() == [1, -1, 7]
    assert tables.diagnostics.count("event.id_not_integer") == 2


def _run_dir(tmp_path, manifest: bytes) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    (run / "manifest.json").write_bytes(manifest)
    (run / "trace.json").write_text('{"traceEvents":[' + _EVENT % ("aten::mm", 1) + "]}")
    return run


@pytest.mark.parametrize("command", ["analyze", "report"])
def test_a_deep_manifest_is_json_too_deep(tmp_path, command):
    run = _run_dir(tmp_path, b'{"trace": "trace.json", "x": ' + b"[" * 5000 + b"]" * 5000 + b"}")
    _one_error_line([command, str(run)] + (["-o", str(tmp_path / "r.html")] if command == "report" else []),
                    "json.too_deep")


def test_a_manifest_past_its_bound_is_refused_unparsed(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "MAX_MANIFEST_BYTES", 1000)
    run = _run_dir(tmp_path, json.dumps({"trace": "trace.json", "pad": "x" * 2000}).encode())
    _one_error_line(["analyze", str(run)], "input.too_large")


@pytest.mark.parametrize("suffix", ["-journal", "-wal"])
def test_an_export_with_a_journal_or_wal_is_refused(tmp_path, suffix):
    export = tmp_path / "x.sqlite"
    export.write_bytes(_export())
    side = tmp_path / f"x.sqlite{suffix}"
    side.write_bytes(b"\0" * 512)
    with pytest.raises(TaxbreakError) as info:
        load_trace(export, use_cache=False)
    assert info.value.code == "nsys.uncommitted" and side.name in info.value.location
    _one_error_line(["info", str(export)], "nsys.uncommitted")
    side.write_bytes(b"")  # an empty journal is no transaction: the export is read
    assert load_trace(export, use_cache=False).device_activities.num_rows == 2


def test_running_out_of_memory_is_a_typed_error_with_the_need(tmp_path, monkeypatch):
    trace = _trace(tmp_path, '{"traceEvents":[' + _EVENT % ("aten::mm", 1) + "]}")

    def exhausted(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr("taxbreak.scale.analysis_cache.cached_analyze", exhausted)
    result = CliRunner().invoke(main, ["analyze", str(trace)], env={"TAXBREAK_NO_CACHE": "1"})
    assert result.exit_code == 1 and "Traceback" not in result.output
    first = result.output.splitlines()[0]
    assert first.startswith("error[memory.exhausted]: ran out of memory (peak resident memory about")
    assert "hint: analyze needs about 1.2x the uncompressed trace" in result.output


_GRANDCHILD = ("import os, time; from taxbreak.scale.workers import die_with_parent; "
               "die_with_parent(os.getppid()); print(os.getpid(), flush=True); time.sleep(120)")
_PARENT = ("import subprocess, sys; child = subprocess.Popen([sys.executable, '-c', %r], stdout=subprocess.PIPE); "
           "print(child.stdout.readline().decode().strip(), flush=True)") % _GRANDCHILD


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_worker_dies_with_its_parent():
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    out = subprocess.run([sys.executable, "-c", _PARENT], env=env, capture_output=True, text=True, check=True)
    pid = int(out.stdout.strip())  # the parent has exited: its child must follow
    for _ in range(200):  # the kernel delivers the signal at once; the poll only waits for it
        if not _running(pid):
            break
        time.sleep(0.05)
    alive = _running(pid)
    if alive:
        os.kill(pid, 9)
    assert not alive


def test_a_long_name_shared_by_many_kernels_stays_one_dictionary_entry(tmp_path):
    rows = ", ".join(f"({1000 + 100 * i}, {1050 + 100 * i}, 0, 7, {10 + i}, 16777216, 4, 4)" for i in range(300))
    export = tmp_path / "x.sqlite"
    export.write_bytes(_export("INSERT INTO StringIds VALUES (4, '" + "n" * 200_000 + "')",
                               f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES {rows}",
                               "CREATE TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (start INTEGER, end INTEGER, "
                               "deviceId INTEGER, streamId INTEGER, correlationId INTEGER, globalPid INTEGER, "
                               "syncType INTEGER)",
                               "INSERT INTO CUPTI_ACTIVITY_KIND_SYNCHRONIZATION VALUES (40000, 40100, 0, 7, 0, "
                               "16777216, 3)"))
    names = load_trace(export, use_cache=False).device_activities.column("name")
    assert pa.types.is_dictionary(names.type)
    # 300 copies of 200 kB would be 60 MB of string data; the dictionary holds each name once
    assert sum(chunk.dictionary.nbytes for chunk in names.chunks) < 1_000_000
    from taxbreak.decompose import analyze

    a = analyze(export)  # the device view drops the sync row's name without casting to plain strings
    assert a.summary["all"]["kernels"] == 302
    assert (a.kernels["name"].astype(str).str.len() == 200_000).sum() == 300


def test_take_strings_and_the_device_view_never_copy_a_name_per_row():
    import numpy as np

    from taxbreak.decompose.views import used_names_only
    from taxbreak.readers.nsys_db import take_strings

    taken = take_strings(np.array(["k" * 1000, None, "m"], dtype=object), np.array([0, 0, 1, 2, 0]))
    assert isinstance(taken, pa.DictionaryArray) and taken.dictionary.to_pylist() == ["k" * 1000, "m"]
    assert taken.to_pylist() == ["k" * 1000, "k" * 1000, None, "m", "k" * 1000]
    kept = used_names_only(pa.chunked_array([taken]).take(pa.array([0, 2, 3])))
    assert isinstance(kept, pa.DictionaryArray) and kept.dictionary.to_pylist() == ["k" * 1000, "m"]
    assert kept.to_pylist() == ["k" * 1000, None, "m"]
