"""The fuzz harness: its classification of crashes, hangs, memory blow-ups and
tracebacks, and a bounded run over both readers that must find no failure."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from harness import run_case  # noqa: E402
from mutators import MUTATORS, PENDING, dump, Pairs, Raw  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SEED = 20261203
# two cases per mutator class (all of them: mutators.PENDING is empty)
IN_SUITE_CASES = 2 * sum(m.name not in PENDING for m in MUTATORS)


def _segfault(path):
    os.kill(os.getpid(), signal.SIGSEGV)


def _sleep(path):
    time.sleep(60)


def _allocate(path):
    try:
        blob = bytearray(1024**3)  # over the cap below
    except MemoryError:
        return {"kind": "memory", "detail": "MemoryError"}
    return {"kind": "ok", "extra": {"len": len(blob)}}


def _raise(path):
    raise ValueError("boom")


def _typed(path):
    return {"kind": "typed", "detail": "json.invalid"}


@pytest.mark.parametrize("target, kind, detail", [
    (_segfault, "crash", "SIGSEGV"),
    (_sleep, "hang", "no result after 1 s"),
    (_allocate, "memory", "MemoryError"),
    (_raise, "traceback", "harness: ValueError: boom"),
    (_typed, "typed", "json.invalid"),
])
def test_the_harness_classifies_each_outcome(tmp_path, target, kind, detail):
    outcome = run_case(tmp_path / "x.json", timeout_s=1.0, memory_bytes=256 * 1024**2, target=target)
    assert (outcome.kind, outcome.detail) == (kind, detail)
    assert outcome.failed == (kind != "typed")


def test_a_real_case_is_read_and_analyzed_in_the_child(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1.0, "dur": 2.0}]}))
    assert run_case(path).kind == "ok"
    path.write_text('{"traceEvents": [')
    outcome = run_case(path)
    assert (outcome.kind, outcome.detail) == ("typed", "json.truncated")


def test_dump_writes_raw_numbers_duplicate_keys_and_deep_nesting():
    deep = Raw("[" * 5000 + "]" * 5000)
    text = dump(Pairs([("a", 1), ("a", Raw("1e-9999999")), ("d", deep)]))
    assert text.startswith('{"a":1,"a":1e-9999999,"d":[[[')


def test_a_bounded_run_over_both_readers_finds_no_failure(tmp_path):
    """The in-suite fuzz run: fixed seed and case count, every case in a forked child."""
    out = tmp_path / "failures"
    cmd = [sys.executable, str(REPO / "scripts" / "fuzz.py"), "--cases", str(IN_SUITE_CASES), "--seconds", "600",
           "--seed", str(SEED), "--skip-pending", "--timeout", "60", "--json", "--out", str(out)]
    run = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    report = json.loads(run.stdout)
    assert report["unique"] == {}, json.dumps(report["unique"], indent=1)
    assert run.returncode == 0, run.stderr
    assert report["cases"] == IN_SUITE_CASES
    assert set(report["by_mutator"]) == {m.name for m in MUTATORS if m.name not in PENDING}
    assert not out.exists()
