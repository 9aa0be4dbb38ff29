"""The compiled Kineto scanner against the Python reader: the same tables, drops,
diagnostics, metadata and errors on every input (readers/kineto_scan.py).

Inputs: every Kineto trace of the real-trace corpus, generated traces
(taxbreak/synth), fuzzed traces from every Kineto mutator class of the fuzz
harness, planted odd values the scanner leaves to the Python rules, and the
malformed corpus (the same error codes and messages through both readers).
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import random
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

import taxbreak.readers
from taxbreak.readers import kineto_scan
from taxbreak.readers.kineto import read_kineto
from taxbreak.synth.bigtrace import write_big_kineto
from taxbreak.synth.planted import build, random_spec
from taxbreak.synth.write_kineto import write_kineto
from taxbreak.trace.errors import TaxbreakError
from taxbreak.trace.schema import TABLE_NAMES

from conftest import IN_CI, shared_trace_paths

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS / "fuzz"))
sys.path.insert(0, str(TESTS / "malformed"))
from mutators import MUTATORS, Raw, dump  # noqa: E402
from corpus import CASES, CASES_DIR, RECOVERABLE  # noqa: E402

KINETO_MUTATORS = [m for m in MUTATORS if m.fmt == "kineto"]
CASES_PER_MUTATOR = 12
FUZZ_SEED = 20261207

needs_scanner = pytest.mark.skipif(not kineto_scan.available(),
                                   reason="the compiled scanner is not built (python setup.py build_ext --inplace)")


def test_the_scanner_is_built_in_ci():
    """CI installs with gcc present: a missing extension there is a build failure, not a skip."""
    # (a fresh clone of tests/test_fresh_clone.py is never built: its run is left out)
    if IN_CI and os.environ.get(kineto_scan.ENV_NO_EXT, "") in ("", "0") \
            and not os.environ.get("TAXBREAK_IN_FRESH_CLONE"):
        assert kineto_scan.available()


class _ChunkCounts(logging.Handler):
    """The reader's debug line: how many chunks the scanner read and how many msgspec decoded."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.counts = None

    def emit(self, record: logging.LogRecord) -> None:
        if "chunks read by the compiled scanner" in record.msg:
            self.counts = record.args[1:]


def outcome(path: Path, enabled: bool, workers: int = 0):
    """What reading ``path`` gives: the tables, metadata and diagnostics, or the typed error;
    ``reader`` is "kineto-c" when the scanner read at least one chunk itself."""
    logger = logging.getLogger("taxbreak.readers.kineto")
    handler, level = _ChunkCounts(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        with kineto_scan.scanner(enabled):
            tables = read_kineto(path, parse_workers=workers)
    except TaxbreakError as err:
        return {"error": (err.code, str(err), getattr(err, "hint", None), getattr(err, "location", None))}
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    meta = dataclasses.asdict(tables.meta)
    assert meta["extra"].pop("reader") == ("kineto-c" if enabled and kineto_scan.available() else "kineto-py")
    scanned = handler.counts is not None and handler.counts[0] > 0
    return {"tables": {name: getattr(tables, name) for name in TABLE_NAMES}, "meta": meta,
            "diagnostics": tables.diagnostics.as_dict(), "reader": "kineto-c" if scanned else "kineto-py"}


def assert_same(path: Path, workers: int = 0) -> str:
    """Both readers agree on ``path``; returns the reader the scanner path reported."""
    fast, slow = outcome(path, True, workers), outcome(path, False, 0)
    if "error" in slow or "error" in fast:
        assert fast.get("error") == slow.get("error"), path
        return "error"
    assert slow["reader"] == "kineto-py"
    for name in TABLE_NAMES:
        assert fast["tables"][name].schema == slow["tables"][name].schema, (path, name)
        assert fast["tables"][name].equals(slow["tables"][name]), (path, name)
    assert fast["meta"] == slow["meta"], path
    assert fast["diagnostics"] == slow["diagnostics"], path
    return fast["reader"]


KINETO_CORPUS = shared_trace_paths((".json", ".json.gz"))


@needs_scanner
@pytest.mark.parametrize("path", KINETO_CORPUS, ids=lambda p: p.name)
def test_real_traces_read_the_same(path):
    assert_same(path)


@needs_scanner
def test_most_real_traces_take_the_scanner():
    """The fast subset covers real Kineto output, not only the synthetic traces."""
    if not KINETO_CORPUS:
        pytest.skip("no corpus")
    readers = [outcome(p, True)["reader"] for p in KINETO_CORPUS]
    assert readers.count("kineto-c") >= len(readers) // 2, readers


@needs_scanner
@pytest.mark.parametrize("gzip", [True, False])
def test_a_generated_trace_reads_the_same_in_one_and_two_processes(tmp_path, gzip):
    path = write_big_kineto(tmp_path / ("big.json" + (".gz" if gzip else "")), 30_000, gzip=gzip).path
    assert assert_same(path) == "kineto-c"
    assert assert_same(path, workers=1) == "kineto-c"


@needs_scanner
@pytest.mark.parametrize("seed", range(4))
def test_planted_traces_read_the_same(tmp_path, seed):
    planted = build(random_spec(np.random.default_rng(seed), steps=2, ops=4, streams=2, graphs=seed % 2 == 1))
    path = write_kineto(planted.tables, tmp_path / "planted.json")
    assert assert_same(path) == "kineto-c"


def _base_doc(folder: Path) -> dict:
    """The fuzz harness's Kineto base case (tests/fuzz/mutators.base_traces)."""
    path = write_big_kineto(folder / "base.json", 400, gzip=False, layers=2, decode_steps=2).path
    return json.loads(path.read_text())


@needs_scanner
@pytest.mark.parametrize("mutator", KINETO_MUTATORS, ids=lambda m: m.name)
def test_fuzzed_traces_read_the_same(tmp_path, mutator):
    doc = _base_doc(tmp_path)
    rng = random.Random(f"{FUZZ_SEED}-{mutator.name}")
    for case in range(CASES_PER_MUTATOR):
        path = tmp_path / f"case{case}{mutator.suffix}"
        path.write_bytes(mutator.fn(rng, doc))
        assert_same(path)


# Values the scanner reads but leaves to the Python rules (or refuses), one per event field.
ODD_EVENTS = {
    "escaped_name": {"name": Raw('"aten::mm\\u0041\\n"')},
    "unicode_name": {"name": "aten::mm \u00e9\u4e2d\U0001f600"},
    "string_pid": {"pid": "Spans"},
    "hex_tid": {"tid": "0x1f"},
    "uint64_tid": {"tid": Raw("18446744073709551615")},
    "float_pid": {"pid": Raw("3.0")},
    "bool_pid": {"pid": True},
    "exponent_ts": {"ts": Raw("1.5e3")},
    "sub_ns_ts": {"ts": Raw("1712195495521131.1257")},
    "negative_ts": {"ts": Raw("-12.5")},
    "string_ts": {"ts": "12"},
    "null_ts": {"ts": None},
    "missing_dur": {"dur": None},
    "negative_dur": {"dur": Raw("-3.25")},
    "huge_dur": {"dur": Raw("99999999999999.5")},
    "epoch_ts": {"ts": Raw("1712195495521131.125")},
    "int64_edge_ts": {"ts": Raw("9223372036854775.807")},
    "past_int64_ts": {"ts": Raw("9223372036854775.808")},
    "long_number": {"ts": Raw("1." + "0" * 70)},
    "null_name": {"name": None},
    "number_name": {"name": 5},
    "null_ph": {"ph": None},
    "unknown_ph": {"ph": "Q"},
    "own_category": {"cat": "taxbreak"},
    "null_args": {"args": None},
    "list_args": {"args": [1, 2]},
    "string_correlation": {"args": {"correlation": "12"}},
    "float_external_id": {"args": {"External id": 2.5}},
    "grid_pair": {"args": {"grid": [1, 2]}},
    "grid_text": {"args": {"grid": "grid(100,)"}},
    "device_null": {"args": {"device": None, "stream": 3}},
    "raw_dims_escape": {"args": {"Input Dims": Raw('[["a\\"b"], [1, 2]]')}},
    "raw_dims_null": {"args": {"Input Dims": None}},
    "deep_unknown": {"extra": Raw("[" * 200 + "]" * 200)},
    "escaped_key": {Raw('"p\\u0068"'): "X"},
}


def _odd_trace(odd: dict) -> str:
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 2, "ts": Raw("10.5"), "dur": Raw("2"),
         "args": {"External id": 7, "Input Dims": [[2, 3]], "Sequence number": 4}},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": Raw("11.125"), "dur": Raw("1.5"),
         "args": {"device": 0, "stream": 7, "correlation": 9, "grid": [1, 2, 3], "block": [4, 1, 1]}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel_v7000", "pid": 1, "tid": 2,
         "ts": Raw("10.75"), "dur": Raw("0.5"), "args": {"correlation": 9, "cbid": 211}},
        {"ph": "s", "cat": "ac2g", "name": "flow", "id": 9, "pid": 1, "tid": 2, "ts": Raw("10.75")},
        {"ph": "M", "name": "process_name", "pid": "Spans", "tid": 0, "args": {"name": "spans"}},
    ]
    for target in (0, 1, 2):  # the odd value on a host op, a kernel and an API call
        events.append({**events[target], **odd})
    text = dump({"schemaVersion": 1, "traceEvents": [Raw(_event_text(e)) for e in events]})
    return text


def _event_text(event: dict) -> str:
    return "{" + ",".join(f"{k if isinstance(k, Raw) else json.dumps(k)}:{dump(v)}" for k, v in event.items()) + "}"


@needs_scanner
@pytest.mark.parametrize("key", sorted(ODD_EVENTS))
def test_odd_values_read_the_same(tmp_path, key):
    path = tmp_path / "odd.json"
    path.write_text(_odd_trace(ODD_EVENTS[key]))
    assert assert_same(path) in ("kineto-c", "kineto-py", "error")


@needs_scanner
def test_clean_events_take_the_scanner(tmp_path):
    """The control case of the test above: plain values are read by the scanner itself."""
    path = tmp_path / "clean.json"
    path.write_text(_odd_trace({"ts": Raw("12.125"), "dur": Raw("0.0005")}))
    assert assert_same(path) == "kineto-c"


MALFORMED = sorted(name for name in {**CASES, **RECOVERABLE} if ".json" in name)


@needs_scanner
@pytest.mark.parametrize("name", MALFORMED)
def test_malformed_corpus_gives_the_same_codes(name):
    assert_same(CASES_DIR / name)


def test_without_the_extension_the_python_path_reads(tmp_path):
    """``$TAXBREAK_NO_EXT`` (or no compiler) leaves the pure-Python path, which reads everything."""
    path = write_big_kineto(tmp_path / "big.json.gz", 5_000).path
    with kineto_scan.scanner(False):
        tables = read_kineto(path, parse_workers=0)
    assert tables.meta.extra["reader"] == "kineto-py"
    assert sum(tables.meta.event_counts.values()) == tables.meta.input_events


def test_no_ext_environment_variable_turns_the_scanner_off(tmp_path):
    """``TAXBREAK_NO_EXT=1`` in a fresh process: the Python path reads the trace, the same tables."""
    path = write_big_kineto(tmp_path / "big.json.gz", 3_000).path
    code = ("import sys; from taxbreak.readers.kineto import read_kineto; t = read_kineto(sys.argv[1]); "
            "print(t.meta.extra['reader'], t.host_events.num_rows, t.device_activities.num_rows)")
    env = {**os.environ, kineto_scan.ENV_NO_EXT: "1", "PYTHONPATH": str(TESTS.parent)}
    run = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr
    with kineto_scan.scanner(False):
        tables = read_kineto(path, parse_workers=0)
    assert run.stdout.split() == ["kineto-py", str(tables.host_events.num_rows),
                                  str(tables.device_activities.num_rows)]


def test_a_missing_or_stale_extension_is_not_loaded(monkeypatch):
    monkeypatch.delenv(kineto_scan.ENV_NO_EXT, raising=False)
    monkeypatch.setitem(sys.modules, "taxbreak.readers._kineto_scan", None)  # import fails: not built
    monkeypatch.delattr(taxbreak.readers, "_kineto_scan", raising=False)
    assert kineto_scan._load_extension() is None
    stale = types.SimpleNamespace(N_COLS=len(kineto_scan.COLUMNS) - 1)
    monkeypatch.setitem(sys.modules, "taxbreak.readers._kineto_scan", stale)
    monkeypatch.setattr(taxbreak.readers, "_kineto_scan", stale, raising=False)
    assert kineto_scan._load_extension() is None
