"""Every key of the JSON summary is documented in taxbreak/report/summary_schema.json with a type,
a unit and a meaning, and real output matches it: a key the summary produces that the schema lacks
fails, and so does a schema key that is never produced unless it is marked optional."""
from __future__ import annotations

import json
from importlib import resources

import numpy as np
import pytest

from taxbreak.decompose import analyze
from taxbreak.readers import load_trace
from taxbreak.synth.planted import build, random_spec

SCHEMA = json.loads(resources.files("taxbreak.report").joinpath("summary_schema.json").read_text("utf-8"))
DEFS = SCHEMA["$defs"]
JSON_TYPES = {"number": (int, float), "integer": (int,), "string": (str,), "boolean": (bool,),
              "object": (dict,), "array": (list,), "null": (type(None),)}


def _keys(name: str) -> tuple[dict, set]:
    """(properties, required) of one object of the schema; a step adds its own keys to the scope's."""
    props, required = {}, set()
    for part in ([DEFS["scope_keys"]] if name in ("scope", "step") else []) + ([DEFS[name]] if name != "scope" else []):
        props.update(part.get("properties", {}))
        required |= set(part.get("required", ()))
    return props, required


def _type_ok(value, types) -> bool:
    types = [types] if isinstance(types, str) else types
    if isinstance(value, bool):
        return "boolean" in types
    return any(isinstance(value, JSON_TYPES[t]) for t in types)


def _check(obj: dict, name: str, where: str, seen: set) -> None:
    props, required = _keys(name)
    unknown = set(obj) - set(props)
    assert not unknown, f"{where}: keys missing from summary_schema.json: {sorted(unknown)}"
    missing = required - set(obj)
    assert not missing, f"{where}: required schema keys not produced: {sorted(missing)}"
    for key, value in obj.items():
        assert _type_ok(value, props[key]["type"]), f"{where}.{key} = {value!r} is not {props[key]['type']}"
    seen |= set(obj)


@pytest.fixture(scope="module")
def planted_json() -> dict:
    a = analyze(build(random_spec(np.random.default_rng(11), steps=3, ops=3)).tables, tokens=3)
    return json.loads(a.to_json())


def check_summary(summary: dict) -> None:
    assert set(summary) == set(SCHEMA["required"]) == set(SCHEMA["properties"])
    seen: dict[str, set] = {"scope": set(), "step": set(), "meta": set()}
    _check(summary["all"], "scope", "all", seen["scope"])
    for phase, scope in summary["phases"].items():
        _check(scope, "scope", f"phases.{phase}", seen["scope"])
    for i, step in enumerate(summary["steps"]):
        _check(step, "step", f"steps[{i}]", seen["step"])
    _check(summary["meta"], "meta", "meta", seen["meta"])
    for code, diag in summary["diagnostics"].items():
        assert set(diag) == {"count", "severity", "example"}, code


def test_every_key_has_a_type_a_unit_and_a_meaning():
    for name in ("scope", "step", "meta"):
        props, required = _keys(name)
        for key, spec in props.items():
            assert spec.get("type") and spec.get("x-unit") and len(spec.get("description", "")) > 10, (name, key)
            assert key in required or spec.get("x-optional"), f"{name}.{key}: not required and no x-optional reason"


def test_planted_summary_matches_the_schema(planted_json):
    check_summary(planted_json)
    assert planted_json["phases"] and planted_json["steps"]


def test_a_key_missing_from_the_schema_fails(planted_json):
    summary = json.loads(json.dumps(planted_json))
    summary["all"]["undocumented_us"] = 1.0
    with pytest.raises(AssertionError, match="undocumented_us"):
        check_summary(summary)


def test_a_schema_key_never_produced_fails(planted_json):
    summary = json.loads(json.dumps(planted_json))
    del summary["meta"]["runs"]
    with pytest.raises(AssertionError, match="runs"):
        check_summary(summary)


def test_sums_of_overlapping_waits_say_so_in_name_and_unit():
    props, _ = _keys("scope")
    for key in ("tklqt_sum_us", "queue_wait_sum_us"):
        assert "sum" in props[key]["x-unit"] and "no elapsed time" in props[key]["description"]
    for old in ("tklqt_us", "queue_wait_us", "gpu_idle_us"):
        assert old not in props


@pytest.mark.parametrize("rel", [
    "HolisticTraceAnalysis/tests/data/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    "HolisticTraceAnalysis/tests/data/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
    "nsys-ai/tests/fixtures/mock.sqlite",
])
def test_real_summaries_match_the_schema(shared_traces, rel):
    """A Kineto trace with a device, a CPU-only trace (device keys null) and an Nsight export."""
    check_summary(json.loads(analyze(load_trace(shared_traces / rel)).to_json()))


def test_schema_is_valid_json_schema_and_validates_the_output(planted_json):
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    jsonschema.Draft202012Validator(SCHEMA).validate(planted_json)
    bad = json.loads(json.dumps(planted_json))
    bad["steps"][0]["undocumented"] = 1
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(SCHEMA).validate(bad)


def test_the_two_idle_windows_differ_by_the_host_only_prologue_and_epilogue(planted_json, shared_traces):
    """One device, whole trace: device_idle_us - device_span_idle_us == wall_us - span_us (docs/method.md §3.1)."""
    rel = "HolisticTraceAnalysis/tests/data/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
    for s in (planted_json["all"], analyze(load_trace(shared_traces / rel)).summary["all"]):
        assert len(s["devices"]) == 1
        assert round(s["device_idle_us"] - s["device_span_idle_us"], 3) == round(s["wall_us"] - s["span_us"], 3)
