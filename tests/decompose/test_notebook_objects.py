"""What a notebook user sees: dir(taxbreak), Analysis repr/_repr_html_, typed phase values, frame dtypes."""
from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import taxbreak
from conftest import SHARED_TRACES, corpus_present
from taxbreak.decompose import analyze
from taxbreak.decompose.accessors import PhaseValues, UnknownPhaseError
from taxbreak.decompose.dtypes import TEXT_KEYS, nullable_numeric
from taxbreak.decompose.analysis import FRAMES
from taxbreak.trace.errors import ERROR_CODES, UsageError

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from report.traces import write_planted  # noqa: E402  (the planted trace of the report tests)

CPU_ONLY = SHARED_TRACES / "HolisticTraceAnalysis/tests/data/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    return analyze(write_planted(tmp_path_factory.mktemp("p") / "planted.json.gz"), floor_us=4.5)


def test_dir_lists_the_public_api_without_importing_it():
    code = ("import sys, taxbreak; names = [n for n in dir(taxbreak) if not n.startswith('_')]; "
            "print(','.join(names)); print('torch' in sys.modules, 'pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0].split(",") == sorted(n for n in taxbreak.__all__ if not n.startswith("_"))
    assert {"analyze", "load_trace", "Analysis", "PhaseValues", "trace_handler", "phase"} <= set(out[0].split(","))
    assert out[1] == "False False"


def test_every_public_name_resolves():
    for name in taxbreak.__all__:
        assert getattr(taxbreak, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        taxbreak.nope


def test_repr_is_one_short_line(planted):
    assert repr(planted) == "<Analysis planted.json.gz (kineto): 3 kernels, 1 step, phases decode, HDBI 0.324>"


def test_repr_html_is_a_small_escaped_table(planted):
    page = planted._repr_html_()
    assert page.startswith("<table><caption>Analysis of planted.json.gz</caption>")
    assert "<tr><th>all</th><td>1</td><td>3</td><td>0.324</td><td>18.0</td><td>37.5</td>" \
           "<td>20.0</td><td>4.0</td><td>13.5</td></tr>" in page
    assert page.count("<tr>") == 3  # header, all, decode


def test_repr_html_escapes_names():
    summary = {"all": {"steps": 1, "hdbi": None}, "phases": {"<b>x</b>": {"steps": 1}}, "meta": {"path": "/t/<i>.json"}}
    fake = type("A", (), {"summary": summary})()
    from taxbreak.decompose.reprs import analysis_repr, analysis_repr_html

    page = analysis_repr_html(fake)
    assert "&lt;b&gt;x&lt;/b&gt;" in page and "&lt;i&gt;.json" in page and "<b>" not in page
    assert "<td>not measured</td>" in page
    assert analysis_repr(fake) == "<Analysis <i>.json: kernels not measured, 1 step, phases <b>x</b>, HDBI not measured>"


def test_phase_values_are_typed_and_exact(planted):
    values = planted.phase("decode")
    assert isinstance(values, PhaseValues) and values.name == "decode"
    assert (values.kernels, values.launches, values.steps, values.tokens) == (3, 3, 1, None)
    assert values.hdbi == pytest.approx(18.0 / (18.0 + 37.5), abs=1e-6) and values.hdbi_reason is None
    assert (values.ft_us, values.ft_python_us, values.ft_dispatch_us, values.ct_us) == (20.0, 5.0, 15.0, 4.0)
    assert (values.kt_us, values.launch_floor_us, values.launch_graph_us) == (13.5, 13.5, 0.0)
    assert values.orchestration_us == values.ft_us + values.ct_us + values.kt_us == 37.5
    assert (values.launch_latency_us, values.queue_wait_sum_us, values.queue_wait_union_us) == (28.0, 4.5, 4.5)
    assert sum(values.idle_by_cause_us.values()) == values.device_idle_us == 102.0
    assert planted.phase() == planted.phase("all")
    with pytest.raises(dataclasses.FrozenInstanceError):
        values.hdbi = 1.0
    with pytest.raises(TypeError):
        values.idle_by_cause_us["python"] = 0.0  # read-only
    assert values.as_dict()["idle_by_cause_us"]["python"] == 10.0


def test_phase_field_types_match_their_annotations(planted):
    hints = {f.name: f.type for f in dataclasses.fields(PhaseValues)}
    for name, value in planted.phase("all").as_dict().items():
        kind = {"int | None": int, "float | None": float, "str": str, "str | None": str}.get(hints[name])
        if kind is not None and value is not None:
            assert type(value) is kind, name


def test_unknown_phase_is_a_typed_error_listing_the_known_ones(planted):
    with pytest.raises(UnknownPhaseError) as info:
        planted.phase("prefill")
    err = info.value
    assert err.code == "analysis.unknown_phase" and err.code in ERROR_CODES
    assert isinstance(err, KeyError) and isinstance(err, UsageError)
    assert str(err) == "error[analysis.unknown_phase]: no phase 'prefill' in this trace (it has: all, decode)"
    assert planted.phase_names == ["all", "decode"]


@pytest.mark.corpus
@pytest.mark.skipif(not corpus_present(), reason="real-trace corpus not found: see docs/testing.md")
def test_a_trace_without_markers_has_phase_unknown_and_nulls_not_zeros():
    a = analyze(CPU_ONLY)
    assert a.phase_names == ["all", "unknown", "between"]
    values = a.phase("unknown")
    assert values.hdbi is None and values.hdbi_reason == "no device activity in the trace"
    assert values.device_active_us is None and values.idle_by_cause_us is None and values.kernels == 0
    assert values.host_thread_us > 0
    assert a.phases["hdbi"].dtype == "Float64" and a.phases["hdbi"].isna().all()
    assert a.phases["device_active_us"].dtype == "Float64"


def _numeric_objects(frame: pd.DataFrame) -> list[str]:
    """Columns of dtype object that hold a number."""
    return [c for c in frame.columns[frame.dtypes == object]
            if pd.api.types.infer_dtype(frame[c], skipna=True) in ("integer", "floating", "mixed-integer-float")
            or (frame[c].isna().all() and len(frame) and c not in TEXT_KEYS)]


def test_no_frame_holds_numbers_in_object_columns(planted):
    for name in FRAMES:
        assert _numeric_objects(getattr(planted, name)) == [], name
    assert planted.steps["tokens"].dtype == "Int64" and planted.steps["kernels_per_token"].dtype == "Float64"
    assert planted.kernels["t_py_ns"].dtype == "Int64" and planted.idle["pid"].dtype == "Int64"


def test_nan_among_floats_becomes_na_and_counts_stay_integers():
    df = pd.DataFrame({"hdbi": [0.5, None], "kernels": [3, None], "span_us": [1.0, 2.0]})
    assert df["hdbi"].dtype == "float64" and df["kernels"].dtype == "float64"  # what pandas makes of None
    out = nullable_numeric(df)
    assert str(out["hdbi"].dtype) == "Float64" and out["hdbi"].isna().tolist() == [False, True]
    assert str(out["kernels"].dtype) == "Int64" and out["kernels"].tolist()[0] == 3
    assert str(out["span_us"].dtype) == "float64"  # nothing missing: left as it is


def test_nullable_numeric_rules():
    df = pd.DataFrame({"tokens": [None, None], "hdbi": [None, 0.5], "kernels": [1, None], "hdbi_reason": [None, "x"],
                       "span_us": [None, None], "name": ["a", "b"]}, dtype=object)
    out = nullable_numeric(df)
    assert {c: str(t) for c, t in out.dtypes.items()} == {
        "tokens": "Int64", "hdbi": "Float64", "kernels": "Int64", "hdbi_reason": "object",
        "span_us": "Float64", "name": "object"}
    assert out["hdbi"].isna().tolist() == [True, False] and out["kernels"].tolist()[0] == 1


@pytest.mark.parametrize("source", ["kineto", "nsys"])
def test_the_kernel_table_is_writeable_and_shares_nothing_with_the_trace_tables(tmp_path, source):
    """The kernel frame is built without copying its columns: a notebook user's in-place edit
    must still work (no read-only Arrow view inside) and must not reach the trace tables."""
    from taxbreak.readers import load_trace
    from taxbreak.synth.big_nsys import write_big_nsys

    if source == "kineto":
        path = write_planted(tmp_path / "planted.json.gz")
    else:
        path = tmp_path / "small.sqlite"
        write_big_nsys(str(path), 2_000)
    tables = load_trace(str(path), use_cache=False)
    before = analyze(tables, floor_us=4.5).kernels
    kernels = analyze(tables, floor_us=4.5).kernels
    first = kernels.index[0]
    for column in ("correlation", "device", "stream", "start_ns", "dur_ns", "launch_start_ns", "t_launch_ns"):
        kernels.loc[first, column] = -7
        assert kernels.loc[first, column] == -7
    again = analyze(tables, floor_us=4.5).kernels
    pd.testing.assert_frame_equal(again, before)


def test_phases_frame_has_a_row_for_every_listed_phase(planted):
    assert planted.phases["phase"].tolist() == planted.phase_names == ["all", "decode"]
    whole = planted.phases.set_index("phase").loc["all"]
    assert whole["kernels"] == planted.summary["all"]["kernels"] == 3
    assert whole["hdbi"] == planted.phase("all").hdbi


def test_nested_values_are_long_form_frames_not_json_text(planted):
    for frame in (planted.phases, planted.steps):
        assert not {"idle_by_cause_us", "devices"} & set(frame.columns)
    idle = planted.idle_by_cause
    assert idle.dtypes[["step", "device"]].tolist() == ["Int64", "Int64"] and idle["idle_us"].dtype == "Float64"
    summed = idle[(idle["scope"] == "all") & idle["device"].isna()]
    expected = planted.summary["all"]["idle_by_cause_us"]
    assert summed["cause"].tolist() == list(expected)
    assert [None if pd.isna(v) else v for v in summed["idle_us"]] == list(expected.values())
    steps = idle[(idle["scope"] == "step") & idle["device"].isna()]
    assert sorted(steps["step"].unique().tolist()) == sorted(s["step"] for s in planted.summary["steps"])
    devices = planted.devices
    ((device, entry),) = planted.summary["all"]["devices"].items()
    whole = devices[devices["scope"] == "all"]
    assert whole["device"].tolist() == [int(device)] and whole["busy_us"].tolist() == [entry["busy_us"]]
    assert set(devices["scope"]) == {"all", "phase", "step"} and devices["busy_us"].dtype == "Float64"
    per_device = idle[(idle["scope"] == "all") & idle["device"].notna()]
    assert per_device["idle_us"].sum() == pytest.approx(sum(v for v in entry["idle_by_cause_us"].values() if v))


def test_a_trace_without_device_activity_has_empty_nested_frames_of_the_same_columns():
    from taxbreak.decompose.nested import DEVICE_COLUMNS, IDLE_COLUMNS, devices_frame, idle_by_cause_frame

    summary = {"all": {"idle_by_cause_us": None, "devices": None}, "phases": {}, "steps": []}
    assert idle_by_cause_frame(summary).columns.tolist() == list(IDLE_COLUMNS) and idle_by_cause_frame(summary).empty
    assert devices_frame(summary).columns.tolist() == list(DEVICE_COLUMNS) and devices_frame(summary).empty
