"""Step schemes, phases, the ``between`` pseudo-step and the single-step fallback."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from taxbreak.decompose import analyze
from taxbreak.decompose.steps import find_steps
from taxbreak.synth.planted import PlantedLaunch, PlantedOp, PlantedSpec, PlantedStep, build, random_spec
from taxbreak.trace.diagnostics import Diagnostics
from taxbreak.trace.errors import UsageError


def _find(names, pattern=None):
    n = len(names)
    starts = np.arange(n, dtype=np.int64) * 100
    import re

    return find_steps(np.array(names, dtype=object), starts, starts + 50,
                      re.compile(pattern) if pattern else None, (0, n * 100), Diagnostics())


@pytest.mark.parametrize("names, phases, scheme", [
    (["taxbreak/run/0", "taxbreak/prefill/0", "taxbreak/decode/1", "taxbreak/mixed/2"],
     ["prefill", "decode", "mixed"], "taxbreak"),
    (["execute_1_context_1(4)_generation_0(0)", "execute_2_context_0(0)_generation_4(4)",
      "execute_3_context_1(8)_generation_3(3)"], ["prefill", "decode", "mixed"], "vllm"),
    (["step[EXTEND bs=4]", "step[DECODE bs=4]"], ["prefill", "decode"], "sglang"),
    (["ProfilerStep#7", "ProfilerStep#8"], ["unknown", "unknown"], "profiler_step"),
])
def test_step_schemes(names, phases, scheme):
    steps = _find(names)
    assert steps.scheme == scheme
    assert steps.table["phase"].tolist() == phases
    assert steps.table["step"].tolist() == list(range(len(phases)))


def test_user_pattern_wins_and_names_phase():
    steps = _find(["ProfilerStep#1", "iter_decode_3", "iter_prefill_4"], r"iter_(?P<phase>[a-z]+)_\d+")
    assert steps.scheme == "pattern"
    assert steps.table["phase"].tolist() == ["decode", "prefill"]
    plain = _find(["blockA", "blockB"], r"block")
    assert plain.table["phase"].tolist() == ["unknown", "unknown"]


def test_bad_step_pattern_is_usage_error():
    planted = build(random_spec(np.random.default_rng(0), steps=1, ops=1))
    with pytest.raises(UsageError) as info:
        analyze(planted.tables, step_pattern="(unclosed")
    assert info.value.code == "usage.step_pattern" and info.value.exit_code == 2


def test_no_markers_is_one_step():
    planted = build(random_spec(np.random.default_rng(0), steps=2, ops=2))
    he = planted.tables.host_events
    kind = he.column("kind").cast(pa.string()).to_pylist()
    keep = pa.array([k != "annotation" for k in kind])
    planted.tables.host_events = he.filter(keep)
    a = analyze(planted.tables)
    assert a.summary["diagnostics"]["decompose.no_steps"]["count"] == 1
    assert len(a.summary["steps"]) == 1 and a.summary["steps"][0]["phase"] == "unknown"
    assert a.summary["all"]["kernels"] == len(planted.kernels)


def test_step_without_device_work_reports_none():
    launches = [PlantedLaunch("nvjet_tst_64", 2_000, 0, 3_000, 9_000, 40_000, False)]
    spec = PlantedSpec([PlantedStep("prefill", [PlantedOp("linear", "aten::addmm", 5_000, launches)]),
                        PlantedStep("decode", [PlantedOp("view", "aten::view", 2_000, [])])])
    a = analyze(build(spec).tables)
    decode = a.summary["steps"][1]
    assert decode["kernels"] == 0
    for key in ("device_active_us", "hdbi", "framework_us", "orchestration_us", "span_us"):
        assert decode[key] is None, key
    assert decode["host_thread_us"] > 0 and decode["host_python_us"] == 2.3  # 2000 py + 300 py tail


def test_between_steps_collects_outside_work():
    planted = build(random_spec(np.random.default_rng(2), steps=2, ops=2))
    # shrink step 1's marker so its first op falls outside every step
    he = planted.tables.host_events.to_pandas()
    row = he.index[he["name"] == "taxbreak/decode/1"][0]
    cut = int(planted.kernels.loc[planted.kernels["step"] == 1, "correlation"].size)
    first_launch = planted.tables.api_calls.to_pandas().sort_values("start_ns")
    k1 = first_launch[first_launch["correlation"].isin(planted.kernels.loc[planted.kernels["step"] == 1,
                                                                           "correlation"])]
    new_start = int(k1["start_ns"].iloc[0]) + 1
    he.loc[row, "dur_ns"] = he.loc[row, "start_ns"] + he.loc[row, "dur_ns"] - new_start
    he.loc[row, "start_ns"] = new_start
    planted.tables.host_events = pa.Table.from_pandas(he, schema=planted.tables.host_events.schema,
                                                      preserve_index=False)
    a = analyze(planted.tables)
    steps = {r["step"]: r for r in a.summary["steps"]}
    assert -1 in steps and steps[-1]["name"] == "between" and steps[-1]["kernels"] >= 1
    assert "between" in a.summary["phases"]
    assert sum(r["kernels"] for r in steps.values()) == a.summary["all"]["kernels"] == len(planted.kernels)
    assert cut >= 1
    walls = a.host_partition["host_thread_ns"].sum()
    assert walls == round(a.summary["all"]["host_thread_us"] * 1000)
