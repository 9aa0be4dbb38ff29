"""Graph launches, orphans and the floor resolution order."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from taxbreak.decompose import analyze
from taxbreak.decompose.floor import resolve_floor
from taxbreak.synth.planted import PlantedLaunch, PlantedOp, PlantedSpec, PlantedStep, build
from taxbreak.trace.paths import floor_cache_path


def _spec(gpu="NVIDIA H100 80GB HBM3") -> PlantedSpec:
    launches = [PlantedLaunch("nvjet_a", 2_000, 0, 3_000, 9_000, 40_000, False),
                PlantedLaunch("nvjet_b", 1_000, 0, 3_000, 8_000, 30_000, False)]
    return PlantedSpec([PlantedStep("decode", [PlantedOp("f", "aten::mm", 4_000, launches)])], gpu_name=gpu)


def _replace(tables, name, df):
    setattr(tables, name, pa.Table.from_pandas(df, schema=getattr(tables, name).schema, preserve_index=False))


def test_graph_launch_keeps_every_kernel_and_counts_host_cost_once():
    planted = build(_spec())
    dev = planted.tables.device_activities.to_pandas()
    corr0 = int(dev["correlation"].iloc[0])
    extra = dev.iloc[[0, 0]].copy()
    extra["row_id"] = [900, 901]
    extra["start_ns"] = extra["start_ns"] + np.array([50_000, 60_000])
    _replace(planted.tables, "device_activities", pd.concat([dev, extra], ignore_index=True))
    a = analyze(planted.tables)
    k = a.kernels[a.kernels["correlation"] == corr0].sort_values("start_ns")
    assert len(k) == 3  # every replayed kernel kept
    assert a.summary["diagnostics"]["decompose.graph_launch"]["count"] == 2
    assert k["kt_floor_ns"].tolist() == [4_710, 0, 0] and k["ft_ns"].iloc[1:].tolist() == [0, 0]
    assert k["t_launch_ns"].tolist() == [13_710, 63_710, 73_710]
    # the replayed kernels wait behind the graph's first: queue wait, no launch latency of their own
    assert k["queue_wait_ns"].iloc[1:].tolist() == [63_710, 73_710] and k["launch_latency_ns"].iloc[1:].tolist() == [0, 0]
    assert a.summary["all"]["launch_floor_us"] == 2 * 4.71


def test_orphans_are_counted_not_dropped():
    planted = build(_spec())
    api = planted.tables.api_calls.to_pandas()
    dev = planted.tables.device_activities.to_pandas()
    dev.loc[0, "correlation"] = 777_777  # kernel whose launch is not in the trace
    _replace(planted.tables, "device_activities", dev)
    a = analyze(planted.tables)
    s = a.summary["all"]
    assert s["orphan_kernels"] == 1 and s["orphan_launches"] == 1 and s["kernels"] == 2
    orphan = a.kernels[a.kernels["correlation"] == 777_777].iloc[0]
    assert orphan["launch_start_ns"] is np.nan or str(orphan["launch_start_ns"]) == "<NA>"
    assert str(orphan["ft_ns"]) == "<NA>"  # never fabricated
    assert len(api) == 2


def test_floor_resolution_order(monkeypatch):
    tables = build(_spec("NVIDIA H200")).tables
    assert (resolve_floor(tables).source, resolve_floor(tables).floor_ns) == ("published:H200", 4_500)
    assert resolve_floor(tables, 3.25).floor_ns == 3_250 and resolve_floor(tables, 3.25).source == "given"
    tables.meta.extra = {"cuda_driver_version": "12090"}
    path = floor_cache_path("NVIDIA H200", "12090")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"gpu_name": "NVIDIA H200", "driver_version": "12090", "floor_us": 4.123}))
    assert (resolve_floor(tables).source, resolve_floor(tables).floor_ns) == ("measured", 4_123)
    tables.meta.extra = {"cuda_driver_version": "99999"}  # no entry for this driver: newest of the GPU model
    assert (resolve_floor(tables).source, resolve_floor(tables).floor_ns) == ("measured", 4_123)
    assert resolve_floor(tables, 3.0).source == "given"  # the command line still wins
    other = build(_spec("Tesla V100-SXM2-32GB")).tables
    assert (resolve_floor(other).source, resolve_floor(other).floor_ns) == ("published:default", 4_500)
    tables.device_activities = tables.device_activities.slice(0, 0)
    assert resolve_floor(tables).source == "unavailable" and resolve_floor(tables).floor_ns is None


def test_analyze_rejects_bad_floor_and_token_arguments():
    from taxbreak.decompose import analyze
    from taxbreak.synth.planted import build, random_spec
    from taxbreak.trace.errors import UsageError

    tables = build(random_spec(np.random.default_rng(3), steps=1, ops=1)).tables
    for kwargs in ({"floor_us": -1.0}, {"floor_us": float("nan")}, {"floor_us": 0}, {"tokens": 0},
                   {"tokens": 2.5}, {"tokens": True}):
        with pytest.raises(UsageError) as err:
            analyze(tables, **kwargs)
        assert err.value.code == "usage.invalid"
    assert analyze(tables, floor_us=np.float32(4.5), tokens=np.int64(3)).summary["all"]["floor_source"] == "given"


@pytest.mark.parametrize("content", ["[" * 100_000, '{"floor_us": 4.0, "pad": "' + "x" * 100_000 + '"}', "[1, 2]",
                                     '{"floor_us": -1}', "not json"],
                         ids=["deep", "oversized", "not_an_object", "not_positive", "not_json"])
def test_a_floor_record_that_is_no_record_falls_back_to_the_published_floor(content):
    """A cached floor file that is deeply nested, oversized, not an object, not positive or not JSON
    is no measurement: the published floor is used, never a RecursionError or a huge read."""
    tables = build(_spec("NVIDIA H200")).tables
    tables.meta.extra = {"cuda_driver_version": "12090"}
    path = floor_cache_path("NVIDIA H200", "12090")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    assert (resolve_floor(tables).source, resolve_floor(tables).floor_ns) == ("published:H200", 4_500)
